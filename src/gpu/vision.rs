//! A vision encoder on the GPU: the same sequence of operations as the CPU's
//! ([`VisionEncoder::run_square`]), each recorded as kernels into one command buffer per square,
//! the square's activations on the device, its weights uploaded at first use and kept, and one
//! readback of its embeddings at the end. As with a model's batches, a square is two calls, so
//! that a page never blocks on the GPU: [`GpuVision::submit`] records and submits it, and
//! [`GpuSquare::collect`] reads it once [`GpuSquare::pending`] has fired.
//!
//! Rounding differs from the CPU's where llama.cpp's CPU backend rounds for speed (activations to
//! f16 before an F16 matrix, keys and values to f16 in attention): the GPU keeps f32 there, so
//! its embeddings are held to mtmd's within a tolerance, not bit for bit.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use super::backend::{Encoder, Recording, Slices};
use super::{AttentionParams, Gpu, GpuError, Signal, groups_2d, pipeline, shaders};
use crate::model::ModelError;
use crate::tensor::WeightType;
use crate::vision::ImageEmbeddings;
use crate::vision::backend::{OwnMatrix, VisionBackend};
use crate::vision::image::RgbImage;
use crate::vision::vit::{FeedForward, Linear, NormKind, PatchRope, SquareRows, VisionEncoder};

/// The vision kernels, built with the first encoder on a device (a model alone never needs them).
pub(super) struct VisionPipelines {
    layer_norm: wgpu::ComputePipeline,
    activation: wgpu::ComputePipeline,
    clamp: wgpu::ComputePipeline,
    round_f16: wgpu::ComputePipeline,
    standardize: wgpu::ComputePipeline,
    rope: wgpu::ComputePipeline,
    gather: wgpu::ComputePipeline,
    average_pool: wgpu::ComputePipeline,
}

impl VisionPipelines {
    pub(super) fn new(device: &wgpu::Device) -> VisionPipelines {
        VisionPipelines {
            layer_norm: pipeline(device, &shaders::layer_norm(super::WORKGROUP)),
            activation: pipeline(device, &shaders::elementwise(shaders::VISION_ACTIVATION)),
            clamp: pipeline(device, &shaders::elementwise(shaders::CLAMP)),
            round_f16: pipeline(device, &shaders::elementwise(shaders::ROUND_F16)),
            standardize: pipeline(device, &shaders::elementwise(shaders::STANDARDIZE)),
            rope: pipeline(device, shaders::ROPE_TABLE),
            gather: pipeline(device, shaders::GATHER),
            average_pool: pipeline(device, shaders::AVERAGE_POOL),
        }
    }

    /// What a profile calls `pipeline`, if it is one of these.
    pub(super) fn name_of(&self, pipeline: &wgpu::ComputePipeline) -> Option<&'static str> {
        [
            (&self.layer_norm, "layer_norm"),
            (&self.activation, "vision activation"),
            (&self.clamp, "clamp"),
            (&self.round_f16, "round to f16"),
            (&self.standardize, "standardize"),
            (&self.rope, "vision rope"),
            (&self.gather, "gather"),
            (&self.average_pool, "average_pool"),
        ]
        .into_iter()
        .find(|(p, _)| *p == pipeline)
        .map(|(_, name)| name)
    }
}

/// What fails a square: the picture (the encoder's own checks) or the GPU.
#[derive(Debug)]
pub enum SquareError {
    Model(ModelError),
    Gpu(GpuError),
}

impl std::fmt::Display for SquareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SquareError::Model(e) => e.fmt(f),
            SquareError::Gpu(e) => e.fmt(f),
        }
    }
}

impl From<ModelError> for SquareError {
    fn from(e: ModelError) -> Self {
        SquareError::Model(e)
    }
}

impl From<GpuError> for SquareError {
    fn from(e: GpuError) -> Self {
        SquareError::Gpu(e)
    }
}

/// A projector's weights on a device, kept between squares (by where they lie in memory: the
/// encoder's file and its own matrices stay put while it is loaded), and the buffers that
/// squares' activations reuse.
pub struct GpuVision {
    gpu: Arc<Gpu>,
    /// Each matrix as slices of whole rows, each within one binding: (first row, rows, blocks).
    matrices: HashMap<usize, Slices>,
    vectors: HashMap<VectorKey, wgpu::Buffer>,
    /// Activation buffers free for the next operation (a square's come back as it drops them).
    pool: Arc<Mutex<Vec<wgpu::Buffer>>>,
    encoder: Encoder,
    /// Weight bytes on the device.
    bytes: u64,
}

/// A vector on the device: one of the encoder's (where its values lie, and how many), or a
/// constant's (its value's bits, and how many).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum VectorKey {
    At(usize, usize),
    Constant(u32, usize),
}

/// A square submitted to the GPU: its embeddings once [`GpuSquare::pending`] fires.
pub struct GpuSquare {
    signal: Signal,
    readback: wgpu::Buffer,
    /// Floats of each part (the projector's rows, then each deepstack layer's).
    parts: Vec<usize>,
    rows: SquareRows<()>,
    gpu: Arc<Gpu>,
}

impl GpuSquare {
    /// Fires when the GPU has encoded the square.
    pub fn pending(&self) -> Signal {
        self.signal.clone()
    }

    /// The square's embeddings: natively this waits for the GPU; in the browser it is
    /// [`GpuError::NotReady`] until [`GpuSquare::pending`] has fired.
    pub fn collect(&self) -> Result<ImageEmbeddings, GpuError> {
        #[cfg(not(target_family = "wasm"))]
        self.gpu
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| GpuError::Failed(e.to_string()))?;
        self.signal.result().ok_or(GpuError::NotReady)??;
        if let Some(fault) = self.gpu.fault() {
            return Err(fault);
        }
        let floats = super::mapped_floats(&self.readback, self.parts.iter().sum())?;
        let mut parts = Vec::with_capacity(self.parts.len());
        let mut rest = floats.as_slice();
        for &len in &self.parts {
            let (part, after) = rest.split_at(len);
            parts.push(part.to_vec());
            rest = after;
        }
        Ok(self.rows.assemble(parts))
    }
}

impl GpuVision {
    // In the browser wgpu's buffers are neither `Send` nor `Sync`, and nothing here crosses
    // threads: the pool is shared only with the rows of the square being recorded.
    #[allow(clippy::arc_with_non_send_sync)]
    pub fn new(gpu: Arc<Gpu>) -> GpuVision {
        let encoder = Encoder::new(&gpu);
        GpuVision {
            gpu,
            matrices: HashMap::new(),
            vectors: HashMap::new(),
            pool: Arc::new(Mutex::new(Vec::new())),
            encoder,
            bytes: 0,
        }
    }

    /// Weight bytes on the device so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Records `square` through `encoder` and submits it (see [`GpuSquare`]).
    pub fn submit(&mut self, encoder: &VisionEncoder, square: &RgbImage) -> Result<GpuSquare, SquareError> {
        if let Some(fault) = self.gpu.fault() {
            return Err(fault.into());
        }
        let gpu = Arc::clone(&self.gpu);
        let pipelines = gpu.vision_pipelines();
        let file = encoder.file();
        let mut pass = Pass {
            vision: self,
            file,
            pipelines,
            recording: Recording::default(),
            rope_table: None,
            error: None,
        };
        let rows = encoder.run_square(&mut pass, square)?;
        if let Some(error) = pass.error.take() {
            return Err(error.into());
        }
        let parts: Vec<usize> = rows.parts.iter().map(|part| part.floats).collect();
        let layout = SquareRows {
            parts: vec![(); parts.len()],
            tokens: rows.tokens,
            width: rows.width,
            grid: rows.grid,
        };
        let total: usize = parts.iter().sum();
        let readback = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("picture embeddings"),
            size: (4 * total.max(1)) as u64,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut offset = 0;
        for part in &rows.parts {
            pass.recording.copy_bytes(&part.buffer, 0, &readback, offset, (4 * part.floats) as u64);
            offset += (4 * part.floats) as u64;
        }
        let Pass { recording, .. } = pass;
        drop(rows);
        // The square's buffers go when the GPU is done with them: a picture's activations are
        // not held between squares.
        if let Ok(mut pool) = self.pool.lock() {
            pool.clear();
        }
        let commands = self.encoder.encode(&gpu, &recording, &mut None);
        gpu.queue.submit([commands]);
        // Nor do the bind groups keep them (or the square's uploads): the next square's
        // buffers differ anyway.
        self.encoder.forget_bind_groups();
        let signal = super::map_for_reading(&readback);
        Ok(GpuSquare { signal, readback, parts, rows: layout, gpu })
    }

    /// A square's embeddings, waited for (natively).
    #[cfg(not(target_family = "wasm"))]
    pub fn encode_square(
        &mut self,
        encoder: &VisionEncoder,
        square: &RgbImage,
    ) -> Result<ImageEmbeddings, SquareError> {
        Ok(self.submit(encoder, square)?.collect()?)
    }
}

/// A square's rows on the device: `floats` values of `buffer` (which may be larger: a reused
/// one), handed back to the pool when dropped.
pub(crate) struct GpuRows {
    buffer: wgpu::Buffer,
    floats: usize,
    pool: Arc<Mutex<Vec<wgpu::Buffer>>>,
}

impl Drop for GpuRows {
    fn drop(&mut self) {
        if let Ok(mut pool) = self.pool.lock() {
            pool.push(self.buffer.clone());
        }
    }
}

/// One square being recorded.
struct Pass<'a> {
    vision: &'a mut GpuVision,
    /// The projector file, which the encoder's matrices view.
    file: &'a crate::model::ModelBytes,
    pipelines: &'a VisionPipelines,
    recording: Recording,
    /// The square's RoPE table on the device (every layer's Q and K take it), by its rope.
    rope_table: Option<(usize, wgpu::Buffer)>,
    /// The first failure (reported after the square).
    error: Option<GpuError>,
}

impl Pass<'_> {
    fn gpu(&self) -> &Gpu {
        &self.vision.gpu
    }

    fn fail(&mut self, error: GpuError) {
        self.error.get_or_insert(error);
    }

    /// Rows of `floats` values, in a free buffer of the pool (the smallest that holds them) or
    /// a new one. Reuse is safe within a recording: the queue runs its commands in order.
    fn rows(&mut self, floats: usize) -> GpuRows {
        let bytes = (4 * floats.max(1)) as u64;
        let pool = Arc::clone(&self.vision.pool);
        let reused = pool.lock().ok().and_then(|mut free| {
            let best =
                (0..free.len()).filter(|&i| free[i].size() >= bytes).min_by_key(|&i| free[i].size())?;
            Some(free.swap_remove(best))
        });
        let buffer = reused.unwrap_or_else(|| {
            if bytes > self.gpu().facts.max_binding {
                let limit = self.gpu().facts.max_binding;
                self.fail(GpuError::TooLarge { what: "a picture's activations", bytes, limit });
            }
            let size = bytes.min(self.gpu().facts.max_binding).max(4);
            self.gpu().device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("picture activations"),
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        GpuRows { buffer, floats, pool }
    }

    /// `bytes` in a buffer of their own: a queued write lands before the recording's first
    /// command, so it never goes into a buffer the recording already used.
    fn upload(&self, bytes: &[u8]) -> wgpu::Buffer {
        self.gpu().buffer_with(bytes, wgpu::BufferUsages::STORAGE)
    }

    /// A vector of the encoder's (a norm's weight, a bias) on the device, uploaded on first use;
    /// `make` gives its values (keyed by `key`, where they live, and `len`).
    fn vector(&mut self, key: VectorKey, make: impl FnOnce() -> Vec<f32>) -> wgpu::Buffer {
        if let Some(buffer) = self.vision.vectors.get(&key) {
            return buffer.clone();
        }
        let values = make();
        let buffer = self.upload(&super::f32_bytes(&values));
        self.vision.bytes += 4 * values.len() as u64;
        self.vision.vectors.insert(key, buffer.clone());
        buffer
    }

    fn weights(&mut self, values: &[f32]) -> wgpu::Buffer {
        self.vector(VectorKey::At(values.as_ptr() as usize, values.len()), || values.to_vec())
    }

    /// `width` ones (the weight of a norm without one), or a constant's single value.
    fn constant(&mut self, width: usize, value: f32) -> wgpu::Buffer {
        self.vector(VectorKey::Constant(value.to_bits(), width), || vec![value; width])
    }

    /// A matrix's blocks on the device (keyed by where its bytes lie), in slices of whole rows.
    fn matrix(&mut self, bytes: &[u8], rows: usize) -> Result<Slices, GpuError> {
        let key = bytes.as_ptr() as usize;
        if let Some(slices) = self.vision.matrices.get(&key) {
            return Ok(slices.clone());
        }
        let row_bytes = bytes.len() / rows.max(1);
        let (slices, uploaded) =
            super::backend::upload_in_slices(self.gpu(), bytes, row_bytes, "a weight row")?;
        self.vision.bytes += uploaded;
        self.vision.matrices.insert(key, slices.clone());
        Ok(slices)
    }

    /// `out` ← `x · Wᵀ` for `n` rows of `x`, one dispatch per slice of the matrix.
    fn matmul_into(
        &mut self,
        matrix: OwnMatrix,
        x: &wgpu::Buffer,
        n: usize,
        out: &wgpu::Buffer,
    ) -> Result<(), GpuError> {
        // Float inputs: a picture's products are long batches (the GEMM) but for its last rows.
        let kernel = self.gpu().matmul_kernel(matrix.weight_type, n, false)?;
        let row_bytes =
            matrix.weight_type.row_bytes(matrix.cols).map_err(|e| GpuError::Shape(e.to_string()))?;
        for (first, rows, weights) in self.matrix(matrix.bytes, matrix.rows)? {
            let groups = kernel.groups(rows);
            let params = [
                rows as u32,
                matrix.cols as u32,
                row_bytes as u32,
                groups[0],
                matrix.rows as u32,
                first as u32,
                n as u32,
                0,
            ];
            self.recording.dispatch(&kernel.pipeline, &[&weights, x, out], &params, groups);
        }
        Ok(())
    }

    /// `x ← f(x, y)` over `n` elements with an element-wise pipeline.
    fn elementwise(
        &mut self,
        pipeline: &wgpu::ComputePipeline,
        y: &wgpu::Buffer,
        x: &wgpu::Buffer,
        n: usize,
        abc: [u32; 3],
    ) {
        self.recording.elementwise(pipeline, y, x, n, abc);
    }

    /// Every row of `width` of `x` RMS-normalized and times `weight` (on the device), in place
    /// (the kernel reads a copy: it cannot bind one buffer twice).
    fn rms_norm(&mut self, x: &GpuRows, weight: &wgpu::Buffer, width: usize, eps: f32) {
        let rows = (x.floats / width.max(1)) as u32;
        let [groups_x, groups_y] = groups_2d(rows);
        let source = self.copy(x);
        let pipeline = self.gpu().rms_norm.clone();
        let params = [rows, width as u32, eps.to_bits(), groups_x, 1, width as u32, 0];
        let buffers = [&source.buffer, weight, &x.buffer];
        self.recording.dispatch(&pipeline, &buffers, &params, [groups_x, groups_y, 1]);
    }

    fn clamp(&mut self, x: &GpuRows, (low, high): (f32, f32)) {
        let (dummy, pipeline) = (self.constant(1, 0.0), self.pipelines.clamp.clone());
        self.elementwise(&pipeline, &dummy, &x.buffer, x.floats, [high.to_bits(), low.to_bits(), 0]);
    }

    /// Keys and values in f16, two values a word (of the same, even count).
    fn packed(&mut self, k: &GpuRows, v: &GpuRows) -> (GpuRows, GpuRows) {
        let pairs = k.floats / 2;
        let (keys, values) = (self.rows(pairs), self.rows(pairs));
        let pipeline = self.gpu().pack_f16.clone();
        let buffers = [&k.buffer, &v.buffer, &keys.buffer, &values.buffer];
        self.dispatch_threads(&pipeline, &buffers, &[pairs as u32, 0, 0, 0], pairs, 3);
        (keys, values)
    }

    /// A copy of `x` rounded to f16 and back.
    fn rounded(&mut self, x: &GpuRows) -> GpuRows {
        let out = self.copy(x);
        let (dummy, pipeline) = (self.constant(1, 0.0), self.pipelines.round_f16.clone());
        self.elementwise(&pipeline, &dummy, &out.buffer, out.floats, [0; 3]);
        out
    }

    /// A matrix's input as llama.cpp's CPU takes it: clamped where the linear clamps it, rounded
    /// to f16 for an F16 matrix (the GPU's products are f32 otherwise).
    fn prepared(
        &mut self,
        x: &GpuRows,
        weight_type: WeightType,
        clamp: Option<(f32, f32)>,
    ) -> Option<GpuRows> {
        let clamped = clamp.map(|bounds| {
            let input = self.copy(x);
            self.clamp(&input, bounds);
            input
        });
        if weight_type != WeightType::F16 {
            return clamped;
        }
        let rounded = self.rounded(clamped.as_ref().unwrap_or(x));
        Some(rounded)
    }

    /// A threads-per-value dispatch of one of the gathers (`params` then the workgroups in x).
    fn dispatch_threads(
        &mut self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        params: &[u32],
        threads: usize,
        groups_at: usize,
    ) {
        let [groups_x, groups_y] = groups_2d((threads as u32).div_ceil(super::ELEMENTWISE_WORKGROUP));
        let mut words = params.to_vec();
        words[groups_at] = groups_x;
        self.recording.dispatch(pipeline, buffers, &words, [groups_x, groups_y, 1]);
    }
}

impl VisionBackend for Pass<'_> {
    type Rows = GpuRows;

    fn rows(&mut self, values: Vec<f32>) -> Result<GpuRows, ModelError> {
        let buffer = self.gpu().buffer_with(
            &super::f32_bytes(&values),
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        );
        Ok(GpuRows { buffer, floats: values.len(), pool: Arc::clone(&self.vision.pool) })
    }

    fn matmul(&mut self, matrix: OwnMatrix, x: &GpuRows, n: usize) -> Result<GpuRows, ModelError> {
        let prepared = self.prepared(x, matrix.weight_type, None);
        let input = prepared.as_ref().unwrap_or(x);
        let out = self.rows(n * matrix.rows);
        if let Err(error) = self.matmul_into(matrix, &input.buffer, n, &out.buffer) {
            self.fail(error);
        }
        Ok(out)
    }

    fn linears<const N: usize>(
        &mut self,
        linears: [&Linear; N],
        x: &GpuRows,
        n: usize,
    ) -> Result<[GpuRows; N], ModelError> {
        let mut outs = Vec::with_capacity(N);
        // Q, K and V take one prepared input.
        type Input = (WeightType, Option<(f32, f32)>);
        let mut prepared: Option<(Input, Option<GpuRows>)> = None;
        for linear in linears {
            let matrix = &linear.matrix;
            let key: Input = (matrix.weight_type, linear.clamp.map(|c| c.input));
            if prepared.as_ref().is_none_or(|(taken, _)| *taken != key) {
                prepared = Some((key, self.prepared(x, key.0, key.1)));
            }
            let input = prepared.as_ref().and_then(|(_, rows)| rows.as_ref()).unwrap_or(x);
            let out = self.rows(n * matrix.rows);
            let own = OwnMatrix {
                bytes: matrix.bytes(self.file),
                weight_type: matrix.weight_type,
                layout: matrix.layout,
                rows: matrix.rows,
                cols: matrix.cols,
            };
            if let Err(error) = self.matmul_into(own, &input.buffer, n, &out.buffer) {
                self.fail(error);
            }
            if let Some(clamp) = linear.clamp {
                self.clamp(&out, clamp.output);
            }
            let mut out = out;
            if let Some(bias) = &linear.bias {
                self.add_bias(&mut out, bias);
            }
            outs.push(out);
        }
        Ok(outs.try_into().unwrap_or_else(|_| unreachable!("one output per linear")))
    }

    fn copy(&mut self, x: &GpuRows) -> GpuRows {
        let out = self.rows(x.floats);
        self.recording.copy_bytes(&x.buffer, 0, &out.buffer, 0, (4 * x.floats) as u64);
        out
    }

    fn add(&mut self, x: &mut GpuRows, y: &GpuRows) {
        let pipeline = self.gpu().add.clone();
        self.elementwise(&pipeline, &y.buffer, &x.buffer, x.floats, [0; 3]);
    }

    fn add_bias(&mut self, x: &mut GpuRows, bias: &[f32]) {
        let (y, pipeline) = (self.weights(bias), self.gpu().add_bias.clone());
        self.elementwise(&pipeline, &y, &x.buffer, x.floats, [bias.len() as u32, 0, 0]);
    }

    fn scale(&mut self, x: &mut GpuRows, factor: f32) {
        let (y, pipeline) = (self.constant(1, factor), self.gpu().scale.clone());
        self.elementwise(&pipeline, &y, &x.buffer, x.floats, [0; 3]);
    }

    fn standardize(&mut self, x: &mut GpuRows, bias: &[f32], scale: &[f32]) {
        let y = self.vector(VectorKey::At(bias.as_ptr() as usize, 2 * bias.len()), || [bias, scale].concat());
        let pipeline = self.pipelines.standardize.clone();
        self.elementwise(&pipeline, &y, &x.buffer, x.floats, [bias.len() as u32, 0, 0]);
    }

    fn norm(&mut self, x: &mut GpuRows, kind: NormKind, weight: &[f32], bias: Option<&[f32]>, eps: f32) {
        let width = weight.len();
        let w = self.weights(weight);
        match kind {
            NormKind::Rms => {
                self.rms_norm(x, &w, width, eps);
                if let Some(bias) = bias {
                    self.add_bias(x, bias);
                }
            }
            NormKind::Layer => {
                let rows = (x.floats / width.max(1)) as u32;
                let [groups_x, groups_y] = groups_2d(rows);
                // A kernel cannot bind one buffer twice: it reads a copy.
                let source = self.copy(x);
                let b = match bias {
                    Some(bias) => self.weights(bias),
                    None => self.constant(1, 0.0),
                };
                let pipeline = self.pipelines.layer_norm.clone();
                let params = [rows, width as u32, eps.to_bits(), groups_x, u32::from(bias.is_some())];
                let buffers = [&source.buffer, &w, &b, &x.buffer];
                self.recording.dispatch(&pipeline, &buffers, &params, [groups_x, groups_y, 1]);
            }
        }
    }

    fn rms_unweighted(&mut self, x: &mut GpuRows, width: usize, eps: f32) {
        let ones = self.constant(width, 1.0);
        self.rms_norm(x, &ones, width, eps);
    }

    fn activate(&mut self, x: &mut GpuRows, activation: FeedForward) {
        let (dummy, pipeline) = (self.constant(1, 0.0), self.pipelines.activation.clone());
        self.elementwise(&pipeline, &dummy, &x.buffer, x.floats, [activation_code(activation), 0, 0]);
    }

    fn gated(&mut self, gate: &mut GpuRows, up: &GpuRows, activation: FeedForward, _width: usize) {
        let pipeline = self.pipelines.activation.clone();
        self.elementwise(
            &pipeline,
            &up.buffer,
            &gate.buffer,
            gate.floats,
            [activation_code(activation), 1, 0],
        );
    }

    fn rope(&mut self, x: &mut GpuRows, rope: &PatchRope) {
        let head_dim = rope.head_dim;
        let rows = rope.places.len();
        let heads = x.floats / (rows * head_dim).max(1);
        let table = match &self.rope_table {
            Some((key, table)) if *key == rope as *const PatchRope as usize => table.clone(),
            _ => {
                let table = self.upload(&super::f32_bytes(&rope.table()));
                self.rope_table = Some((rope as *const PatchRope as usize, table.clone()));
                table
            }
        };
        let span = if rope.halves { head_dim / 2 } else { head_dim };
        let pipeline = self.pipelines.rope.clone();
        let threads = rows * heads * (head_dim / 2);
        let params = [rows as u32, heads as u32, head_dim as u32, span as u32, 0];
        self.dispatch_threads(&pipeline, &[&table, &x.buffer], &params, threads, 4);
    }

    fn attention(
        &mut self,
        q: &GpuRows,
        k: &GpuRows,
        v: &GpuRows,
        (n, d, heads): (usize, usize, usize),
        kq_scale: f32,
        spans: Option<&[Range<usize>]>,
    ) -> GpuRows {
        let out = self.rows(n * d);
        let head_dim = d / heads.max(1);
        if head_dim > super::MAX_ATTENTION_HEAD || head_dim % 2 == 1 {
            self.fail(GpuError::Refused("vision heads over 256 wide or of an odd width"));
            return out;
        }
        let params = AttentionParams {
            n_head: heads,
            n_kv: heads,
            head_dim,
            start: 0,
            window: 0,
            scale: kq_scale,
            softcap: 0.0,
            causal: false,
            exact: false,
        };
        // Never split: a picture's rows are a batch, which the tiled kernel takes whole.
        let (pipeline, mut words, groups) = self.gpu().attention_plan(n, &params, false, false).main;
        let pipeline = pipeline.clone();
        let spans = match spans {
            Some(spans) => {
                words[11] = 1;
                let bounds: Vec<u32> = spans.iter().flat_map(|s| [s.start as u32, s.end as u32]).collect();
                self.upload(&super::u32_bytes(&bounds))
            }
            None => self.constant(1, 0.0),
        };
        let sinks = self.constant(1, 0.0);
        // llama.cpp's flash attention takes keys and values in f16 (`ggml_cast`), as the
        // kernels read them.
        let (k, v) = self.packed(k, v);
        let buffers = [&q.buffer, &k.buffer, &v.buffer, &sinks, &spans, &out.buffer];
        self.recording.dispatch(&pipeline, &buffers, &words, groups);
        out
    }

    fn gather(&mut self, x: &GpuRows, chunk: usize, sources: &[u32]) -> GpuRows {
        let out = self.rows(sources.len() * chunk);
        let sources = self.upload(&super::u32_bytes(sources));
        let pipeline = self.pipelines.gather.clone();
        let params = [out.floats as u32, chunk as u32, 0, 0];
        self.dispatch_threads(&pipeline, &[&sources, &x.buffer, &out.buffer], &params, out.floats, 2);
        out
    }

    fn average_pool(
        &mut self,
        x: &GpuRows,
        (width, height, d): (usize, usize, usize),
        merge: usize,
    ) -> GpuRows {
        let out_width = width / merge.max(1);
        let out = self.rows(out_width * (height / merge.max(1)) * d);
        let pipeline = self.pipelines.average_pool.clone();
        let params = [out.floats as u32, width as u32, d as u32, merge as u32, out_width as u32, 0, 0, 0];
        self.dispatch_threads(&pipeline, &[&x.buffer, &out.buffer], &params, out.floats, 5);
        out
    }
}

/// The activation kernel's number for an activation.
fn activation_code(activation: FeedForward) -> u32 {
    match activation {
        FeedForward::Gelu => 0,
        FeedForward::GeluQuick => 1,
        FeedForward::Silu => 2,
    }
}
