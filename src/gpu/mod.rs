//! The GPU side of the engine, on `wgpu` (WebGPU's API; natively Vulkan, Metal or DX12). So far
//! it holds a device and the matrix-vector products of a decode step for the float formats, the
//! 32-element blocks, the K-quants and IQ4_NL/IQ4_XS, each checked against its CPU twin
//! (`dequantize_row` and a dot).
//! The forward pass does not run on it yet: that is [`crate::model`]'s `Backend` trait's GPU
//! implementation, still to come.
//!
//! Weights are uploaded as the file stores them: a matrix's bytes go up unchanged (padded to
//! a whole number of `u32`), and each kernel reads its blocks out of `array<u32>` words, with
//! `unpack2x16float` for the f16 scales, so no `shader-f16` feature is needed (SwiftShader and
//! some browsers lack it). Every block here starts on an even byte, so a scale never straddles
//! two words.

mod shaders;

use std::fmt;

use crate::tensor::WeightType;

/// Threads of a matrix-vector workgroup: one workgroup per output row, each thread a strided
/// share of the row's blocks, then a tree sum in workgroup memory.
const WORKGROUP: u32 = 64;
/// Workgroups per dispatch dimension (WebGPU's minimum limit, which every adapter offers).
const MAX_GROUPS_PER_DIMENSION: u32 = 65_535;

/// What can go wrong on the GPU, each a reason the CPU runs instead.
#[derive(Debug, Clone, PartialEq)]
pub enum GpuError {
    /// No adapter: no GPU and no software driver (natively, Vulkan's lavapipe).
    NoAdapter(String),
    /// The adapter refused a device with its own limits.
    Device(String),
    /// A weight type with no kernel yet.
    Unsupported(WeightType),
    /// A buffer larger than the adapter binds at once.
    TooLarge { what: &'static str, bytes: u64, limit: u64 },
    /// Shapes that do not fit together.
    Shape(String),
    /// The device failed a submission or a readback (lost, out of memory).
    Failed(String),
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuError::NoAdapter(why) => write!(f, "no GPU adapter: {why}"),
            GpuError::Device(why) => write!(f, "the GPU adapter gave no device: {why}"),
            GpuError::Unsupported(t) => write!(f, "no GPU kernel for {t:?} weights yet"),
            GpuError::TooLarge { what, bytes, limit } => {
                write!(f, "{what} is {bytes} bytes, over the adapter's {limit} per binding")
            }
            GpuError::Shape(why) => write!(f, "shapes do not fit: {why}"),
            GpuError::Failed(why) => write!(f, "the GPU failed: {why}"),
        }
    }
}

impl std::error::Error for GpuError {}

/// The adapter's facts a caller reports (what the page will show: "GPU · name").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterFacts {
    pub name: String,
    pub backend: String,
    /// Largest storage binding, and largest buffer, in bytes.
    pub max_binding: u64,
    pub max_buffer: u64,
    pub shader_f16: bool,
}

/// A device and its queue, with the matrix-vector pipelines built once.
pub struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    facts: AdapterFacts,
    pipelines: Vec<(WeightType, wgpu::ComputePipeline)>,
}

impl Gpu {
    /// The first adapter wgpu finds (a discrete GPU first), with the adapter's own limits.
    pub fn new() -> Result<Gpu, GpuError> {
        pollster::block_on(Self::start())
    }

    async fn start() -> Result<Gpu, GpuError> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        let options = wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        };
        let adapter =
            instance.request_adapter(&options).await.map_err(|e| GpuError::NoAdapter(e.to_string()))?;
        let limits = adapter.limits();
        let info = adapter.get_info();
        let facts = AdapterFacts {
            name: info.name.clone(),
            backend: format!("{:?}", info.backend),
            max_binding: limits.max_storage_buffer_binding_size,
            max_buffer: limits.max_buffer_size,
            shader_f16: adapter.features().contains(wgpu::Features::SHADER_F16),
        };
        let descriptor =
            wgpu::DeviceDescriptor { label: Some("inferno"), required_limits: limits, ..Default::default() };
        let (device, queue) =
            adapter.request_device(&descriptor).await.map_err(|e| GpuError::Device(e.to_string()))?;
        let pipelines = shaders::MATVEC_TYPES
            .iter()
            .map(|&weight_type| (weight_type, matvec_pipeline(&device, weight_type)))
            .collect();
        Ok(Gpu { device, queue, facts, pipelines })
    }

    pub fn facts(&self) -> &AdapterFacts {
        &self.facts
    }

    /// `y = W · x` for a `rows × cols` matrix of `weight_type` stored as `bytes` (the file's
    /// blocks, row after row). Uploads, runs and reads back in one go: a check of the kernels
    /// against the CPU's; the forward pass will keep weights and activations on the device.
    pub fn matvec(
        &self,
        weight_type: WeightType,
        bytes: &[u8],
        rows: usize,
        cols: usize,
        x: &[f32],
    ) -> Result<Vec<f32>, GpuError> {
        let pipeline = self
            .pipelines
            .iter()
            .find(|(t, _)| *t == weight_type)
            .map(|(_, p)| p)
            .ok_or(GpuError::Unsupported(weight_type))?;
        let row_bytes = weight_type.row_bytes(cols).map_err(|e| GpuError::Shape(e.to_string()))?;
        if x.len() != cols || rows.checked_mul(row_bytes) != Some(bytes.len()) {
            return Err(GpuError::Shape(format!(
                "{rows} × {cols} {weight_type:?} needs {rows} rows of {row_bytes} bytes and {cols} inputs, got {} bytes and {}",
                bytes.len(),
                x.len()
            )));
        }
        if rows == 0 {
            return Ok(Vec::new());
        }
        let words = bytes.len().div_ceil(4) * 4;
        for (what, size) in [("the matrix", words), ("the input", 4 * cols), ("the output", 4 * rows)] {
            if size as u64 > self.facts.max_binding {
                return Err(GpuError::TooLarge { what, bytes: size as u64, limit: self.facts.max_binding });
            }
        }
        let mut padded = bytes.to_vec();
        padded.resize(words, 0);
        let storage = |label, contents: &[u8]| {
            wgpu::util::DeviceExt::create_buffer_init(
                &self.device,
                &wgpu::util::BufferInitDescriptor {
                    label: Some(label),
                    contents,
                    usage: wgpu::BufferUsages::STORAGE,
                },
            )
        };
        let weights = storage("weights", &padded);
        let input = storage("x", &f32_bytes(x));
        let groups_x = (rows as u32).min(MAX_GROUPS_PER_DIMENSION);
        let groups_y = (rows as u32).div_ceil(groups_x);
        let params = [rows as u32, cols as u32, row_bytes as u32, groups_x];
        let uniform = wgpu::util::DeviceExt::create_buffer_init(
            &self.device,
            &wgpu::util::BufferInitDescriptor {
                label: Some("params"),
                contents: &u32_bytes(&params),
                usage: wgpu::BufferUsages::UNIFORM,
            },
        );
        let out_size = (4 * rows) as u64;
        let output = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("y"),
            size: out_size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let readback = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("y readback"),
            size: out_size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("matvec"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: weights.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 1, resource: input.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 2, resource: output.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 3, resource: uniform.as_entire_binding() },
            ],
        });
        let mut encoder = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(groups_x, groups_y, 1);
        }
        encoder.copy_buffer_to_buffer(&output, 0, &readback, 0, out_size);
        self.queue.submit([encoder.finish()]);
        let (sender, receiver) = std::sync::mpsc::channel();
        readback.map_async(wgpu::MapMode::Read, .., move |result| {
            let _ = sender.send(result);
        });
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| GpuError::Failed(e.to_string()))?;
        receiver
            .recv()
            .map_err(|e| GpuError::Failed(e.to_string()))?
            .map_err(|e| GpuError::Failed(e.to_string()))?;
        let view = readback.get_mapped_range(..).map_err(|e| GpuError::Failed(e.to_string()))?;
        let y = view.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        Ok(y)
    }
}

fn matvec_pipeline(device: &wgpu::Device, weight_type: WeightType) -> wgpu::ComputePipeline {
    let source = shaders::matvec(weight_type, WORKGROUP);
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("matvec"),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("matvec"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    })
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn u32_bytes(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests;
