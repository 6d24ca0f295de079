//! The GPU side of the engine, on `wgpu` (WebGPU's API; natively Vulkan, Metal or DX12): a
//! device, kernels for every step of a layer (matrix products for the float formats, the
//! 32-element blocks, the K-quants and IQ4_NL/IQ4_XS; RMSNorm, add, SwiGLU, GeGLU, RoPE,
//! attention and its gate, DeltaNet's gates, convolution and delta rule), each checked against
//! its CPU twin, and [`GpuState`], the model's
//! `Backend` on them: the same forward pass as the CPU's, one command encoder per batch.
//! The same code runs natively (Vulkan, Metal, DX12) and in the browser (WebGPU): everything
//! the GPU hands back comes through a [`Signal`], which native code settles by polling the
//! device and the browser by its own event loop, so nothing here ever blocks a page.
//!
//! Weights are uploaded as the file stores them: a matrix's bytes go up unchanged (padded to
//! a whole number of `u32`, in slices of rows where one binding cannot hold it), and each
//! kernel reads its blocks out of `array<u32>` words, with `unpack2x16float` for the f16
//! scales, so no `shader-f16` feature is needed (SwiftShader and some browsers lack it). Every
//! block here starts on an even byte, so a scale never straddles two words.

mod backend;
mod best;
mod runners;
mod shaders;
mod signal;
mod streamed;
mod vision;

pub use backend::{GpuMemory, GpuState, KernelTime};
pub use shaders::MATVEC_TYPES;
pub use signal::Signal;
pub use streamed::{DeviceWeights, StreamError, WeightStream};
pub use vision::{GpuSquare, GpuVision, SquareError};

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use crate::model::attention::TILED_MIN_QUERIES;
use crate::model::{Activation, DeltaInputs, DeltaNet};
use crate::tensor::WeightType;
use shaders::AttentionKernel;

/// Threads of a matrix-vector workgroup: [`shaders::ROWS_PER_GROUP`] output rows per
/// workgroup, each thread a strided share of a row's 32-weight units, then a tree sum in
/// workgroup memory.
const WORKGROUP: u32 = 64;
/// Threads of an element-wise workgroup (one element or RoPE pair each).
const ELEMENTWISE_WORKGROUP: u32 = 256;
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
    /// A part of the model the GPU does not run yet (heads wider than its kernels take).
    Refused(&'static str),
    /// A buffer larger than the adapter binds at once.
    TooLarge { what: &'static str, bytes: u64, limit: u64 },
    /// Shapes that do not fit together.
    Shape(String),
    /// The device failed a submission or a readback (out of memory, a validation error).
    Failed(String),
    /// The device is gone (a driver reset, `device.destroy()`): nothing more runs on it.
    Lost(String),
    /// Asked for results the GPU has not finished yet (wait for [`GpuState::pending`] first).
    NotReady,
    /// The model's weights were streamed to one GPU and are held nowhere else: it cannot move
    /// to the CPU or another device without loading the file again.
    WeightsOnDevice,
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuError::NoAdapter(why) => write!(f, "no GPU adapter: {why}"),
            GpuError::Device(why) => write!(f, "the GPU adapter gave no device: {why}"),
            GpuError::Unsupported(t) => write!(f, "no GPU kernel for {t:?} weights yet"),
            GpuError::Refused(what) => write!(f, "{what} do not run on the GPU yet"),
            GpuError::TooLarge { what, bytes, limit } => {
                write!(f, "{what} is {bytes} bytes, over the adapter's {limit} per binding")
            }
            GpuError::Shape(why) => write!(f, "shapes do not fit: {why}"),
            GpuError::Failed(why) => write!(f, "the GPU failed: {why}"),
            GpuError::Lost(why) => write!(f, "the GPU device was lost: {why}"),
            GpuError::NotReady => write!(f, "the GPU has not finished the work asked for yet"),
            GpuError::WeightsOnDevice => write!(
                f,
                "this model's weights went straight to the GPU as the file loaded (it is larger than \
                 this build's memory) and are held nowhere else: load the file again to run it elsewhere"
            ),
        }
    }
}

impl std::error::Error for GpuError {}

impl GpuError {
    /// A stable snake_case name (the page's `kind`): no adapter, a model the GPU cannot run, a
    /// failure, or a lost device (after which the engine goes on on the CPU).
    pub fn kind(&self) -> &'static str {
        match self {
            GpuError::NoAdapter(_) | GpuError::Device(_) => "no_gpu",
            GpuError::Unsupported(_) | GpuError::Refused(_) | GpuError::TooLarge { .. } => "gpu_unsupported",
            GpuError::Shape(_) | GpuError::Failed(_) | GpuError::NotReady => "gpu_failed",
            GpuError::Lost(_) => "gpu_lost",
            GpuError::WeightsOnDevice => "weights_on_gpu",
        }
    }
}

/// The adapter's facts a caller reports (what the page will show: "GPU · name").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterFacts {
    pub name: String,
    pub backend: String,
    /// wgpu's kind of device: `DiscreteGpu`, `IntegratedGpu`, `VirtualGpu` or `Cpu` (a
    /// software rasterizer such as lavapipe or SwiftShader, whose speed says nothing of a GPU's).
    pub device_type: String,
    /// The driver's name and version, as the adapter reports them (may be empty).
    pub driver: String,
    /// Largest storage binding, and largest buffer, in bytes.
    pub max_binding: u64,
    pub max_buffer: u64,
    pub shader_f16: bool,
    /// Storage buffers a kernel may bind (WebGPU promises 8; the fused query, key and value
    /// kernel binds 7).
    pub storage_buffers: u32,
    /// Whether the matrix kernels sum a row through subgroup shuffles: the adapter has
    /// subgroups, none narrower than a row's lanes.
    pub subgroups: bool,
    /// Whether dispatches can be timed on the device (timestamp queries; natively only):
    /// what [`GpuState::profile_kernels`] needs.
    pub timestamps: bool,
    /// Whether WGSL has `dot4I8Packed` here (its `packed_4x8_integer_dot_product` extension:
    /// always natively, where naga writes it out if the driver lacks it; in a browser, where
    /// `navigator.gpu.wgslLanguageFeatures` has it), which [`Gpu::integer_dots`] needs.
    pub packed_dots: bool,
}

/// A device and its queue, with every kernel's pipeline built once.
pub struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    facts: AdapterFacts,
    /// The first error the device reported on its own (a validation error, running out of
    /// memory, losing the device): wgpu's default for those is a panic.
    fault: Arc<Mutex<Option<GpuError>>>,
    /// Per weight type: the kernels for one input row, a short batch, and a long one.
    /// Each matrix type's decode, short-batch and GEMM pipelines, built at the first use of the
    /// type: a model has two to four of the fifteen, and building all of them took most of the
    /// device's start (0.7 s on lavapipe).
    matmul: Vec<(WeightType, OnceLock<[wgpu::ComputePipeline; 3]>)>,
    /// The decode and short-batch pipelines of [`shaders::Q8_DOT_TYPES`] over 8-bit inputs,
    /// built at the first matrix of the type that reads them.
    matmul_q8: Vec<(WeightType, OnceLock<[wgpu::ComputePipeline; 3]>)>,
    /// Inputs to 8 bits for those ([`shaders::quantize_q8`]), alone and as RMSNorm stores
    /// its rows.
    quantize_q8: wgpu::ComputePipeline,
    rms_norm_q8: wgpu::ComputePipeline,
    /// Whether decode steps and short batches dot [`shaders::Q8_DOT_TYPES`] with 8-bit inputs
    /// ([`Gpu::set_integer_dots`]).
    integer_dots: std::sync::atomic::AtomicBool,
    /// Each type's experts' pipelines: a pair per workgroup (decode), eight of an expert's
    /// pairs (short batches), the GEMM over an expert's pairs (long ones); built at the first
    /// expert stack of the type.
    expert_matmul: Vec<(WeightType, OnceLock<[wgpu::ComputePipeline; 3]>)>,
    /// Each type's row lookup ([`shaders::get_rows`]), built at the first table of the type
    /// held on the device only.
    get_rows: Vec<(WeightType, OnceLock<wgpu::ComputePipeline>)>,
    /// Each type's gated feed-forward decode kernel ([`shaders::gated_matvec`]), with SwiGLU
    /// and with GeGLU, over float inputs and over 8-bit ones, built at first use.
    gated_matvec: Vec<(WeightType, [OnceLock<wgpu::ComputePipeline>; 4])>,
    /// Each pair of types' query, key and value decode kernel ([`shaders::qkv_matvec`]), over
    /// float or 8-bit inputs, built at first use.
    qkv_matvec: Mutex<HashMap<(WeightType, WeightType, bool), Option<wgpu::ComputePipeline>>>,
    group_by_expert: wgpu::ComputePipeline,
    rms_norm: wgpu::ComputePipeline,
    add: wgpu::ComputePipeline,
    swiglu: wgpu::ComputePipeline,
    swiglu_oai: wgpu::ComputePipeline,
    geglu: wgpu::ComputePipeline,
    route: wgpu::ComputePipeline,
    expert_bias: wgpu::ComputePipeline,
    expert_sum: wgpu::ComputePipeline,
    rope: wgpu::ComputePipeline,
    /// A layer's query and key heads normalized and rotated in one dispatch, where the adapter
    /// lets a kernel bind its 8 storage buffers (WebGPU promises 8; some native downlevel
    /// adapters offer fewer, and take the steps one by one).
    qk_heads: Option<wgpu::ComputePipeline>,
    /// Attention with a workgroup per query and head (decode, short batches), and tiled
    /// (prefill); see [`Gpu::attention_plan`].
    attention: [wgpu::ComputePipeline; 2],
    /// Attention with a workgroup per query and KV head for each group size from 2, built at
    /// its first use ([`shaders::attention_grouped`]).
    attention_grouped: [OnceLock<wgpu::ComputePipeline>; shaders::MAX_ATTENTION_GROUP - 1],
    attention_merge: wgpu::ComputePipeline,
    /// Keys and values into the f16 cache.
    pack_f16: wgpu::ComputePipeline,
    add_bias: wgpu::ComputePipeline,
    per_layer_gate: wgpu::ComputePipeline,
    mix_embedding: wgpu::ComputePipeline,
    scale: wgpu::ComputePipeline,
    softcap: wgpu::ComputePipeline,
    split_gate: wgpu::ComputePipeline,
    apply_gate: wgpu::ComputePipeline,
    delta_gates: wgpu::ComputePipeline,
    delta_conv: wgpu::ComputePipeline,
    delta_rule: wgpu::ComputePipeline,
    short_conv: wgpu::ComputePipeline,
    short_conv_in: wgpu::ComputePipeline,
    short_conv_out: wgpu::ComputePipeline,
    ssm_scan: wgpu::ComputePipeline,
    gather_columns: wgpu::ComputePipeline,
    bias_silu: wgpu::ComputePipeline,
    gate_by_silu: wgpu::ComputePipeline,
    /// A decode step's best logits and their statistics ([`best`]).
    best_logits: wgpu::ComputePipeline,
    /// Whether steps that need only the best logits rank them here ([`Gpu::set_best_logits`]).
    reads_best: std::sync::atomic::AtomicBool,
    /// A vision encoder's kernels, built with the first picture.
    vision: OnceLock<vision::VisionPipelines>,
}

// A row's threads reduce by halving (a power of two), and in a batch each of its first eight
// writes one input row's sum.
const _: () = assert!(
    WORKGROUP.is_multiple_of(shaders::ROWS_PER_GROUP)
        && (WORKGROUP / shaders::ROWS_PER_GROUP).is_power_of_two()
        && WORKGROUP / shaders::ROWS_PER_GROUP >= shaders::TILE_TOKENS
);

/// Batches of at least this many input rows take the GEMM; up to 16 (two of the short-batch
/// kernel's tiles of 8), the GEMM's tile of 32 input rows is half empty or more, and the
/// short-batch kernel did less work. On lavapipe, over 8-bit inputs (`inferno bench --device
/// gpu --pp N`): SmolLM2 Q4_1's pp8 took 7.6 tok/s through the GEMM and 20-22 through the short
/// kernel, its pp16 14.7 and 23.8, and a Qwen3-0.6B-shaped Q4_K_M's pp16 3.5 and 4.0; at pp24
/// that file took 5.3 and 4.3, and at pp32 SmolLM2 25.8 and 24.6. (It was 8, and pp8 fell
/// below llama.cpp's.) llama.cpp's Vulkan backend takes its matrix-vector kernel up to 8.
const GEMM_MIN_BATCH: usize = 17;

/// Batches of at least this many queries take the tiled attention kernel (a workgroup per 8
/// queries of a head); fewer, a workgroup per query and head, split over a long cache.
const TILED_ATTENTION_MIN_QUERIES: usize = 8;

/// Batches of at least this many (token, expert) pairs take the experts' GEMM.
const EXPERT_GEMM_MIN_PAIRS: usize = 8;

/// A matrix product's pipeline and how its workgroups cover a matrix.
struct MatmulKernel {
    pipeline: wgpu::ComputePipeline,
    /// Weight rows per workgroup.
    rows_per_group: u32,
    /// Workgroups along the input rows (tiles of them in a batch).
    groups_z: u32,
    /// Whether it reads the inputs quantized to 8 bits ([`shaders::quantize_q8`]).
    q8: bool,
}

impl MatmulKernel {
    /// The workgroups for `rows` weight rows: up to 65,535 in x, the rest in y.
    fn groups(&self, rows: usize) -> [u32; 3] {
        let [x, y] = groups_2d((rows as u32).div_ceil(self.rows_per_group));
        [x, y, self.groups_z]
    }
}

/// The shape of an attention call: queries of `n_head` heads at positions `start..`, over the
/// keys and values of positions `0..start + queries` with `n_kv` heads (grouped queries), each
/// `head_dim` wide; a sliding `window` (0: none), the score scale, and a soft cap (0: none).
#[derive(Clone, Copy, Debug)]
pub struct AttentionParams {
    pub n_head: usize,
    pub n_kv: usize,
    pub head_dim: usize,
    pub start: usize,
    pub window: usize,
    pub scale: f32,
    pub softcap: f32,
    /// Whether a query sees only positions up to its own; otherwise it sees the whole batch
    /// (a picture's rows, attended both ways).
    pub causal: bool,
    /// Attention's exact precision: fewer than [`TILED_MIN_QUERIES`] queries take the workgroup
    /// kernel computing as llama.cpp's one-pass CPU kernel (f16 query and `Σ p·V`), as the
    /// CPU's [`crate::model::AttentionPrecision::Exact`] does; otherwise f32, and the tiled kernel from
    /// [`TILED_ATTENTION_MIN_QUERIES`] queries.
    pub exact: bool,
}

/// The largest head the attention kernel takes (its accumulator is per thread).
pub const MAX_ATTENTION_HEAD: usize = 256;

/// How RoPE runs on a batch: the heads of each row, the rotated dimensions and pairing, the
/// first row's position, and the frequencies (the model's [`crate::model::Rope`]).
#[derive(Clone, Copy, Debug)]
pub struct RopeParams {
    pub heads: usize,
    pub head_dim: usize,
    pub rope_dims: usize,
    pub start: usize,
    pub neox: bool,
    pub base: f32,
    pub freq_scale: f32,
    pub attn_factor: f32,
    /// YaRN's ramp ([`crate::model::Yarn::ramp`]), where the model scales by YaRN.
    pub yarn_ramp: Option<[f32; 2]>,
    /// A picture's rows under M-RoPE: its grid's width and the first row's cell (the factors
    /// then hold each pair's stream after them; see the shader).
    pub grid: Option<[usize; 2]>,
}

impl RopeParams {
    /// No rotation (`rope_dims` 0) for `heads` heads of `head_dim`: what a fused kernel that
    /// may rotate is given for a layer without RoPE.
    pub fn none(heads: usize, head_dim: usize) -> RopeParams {
        RopeParams {
            heads,
            head_dim,
            rope_dims: 0,
            start: 0,
            neox: false,
            base: 1.0,
            freq_scale: 1.0,
            attn_factor: 1.0,
            yarn_ramp: None,
            grid: None,
        }
    }
}

impl Gpu {
    /// [`Gpu::request`], waited for: natively only, where nothing else would run its future.
    #[cfg(not(target_family = "wasm"))]
    pub fn new() -> Result<Gpu, GpuError> {
        pollster::block_on(Self::request())
    }

    /// The first adapter wgpu finds (a discrete GPU first), with the adapter's own limits.
    pub async fn request() -> Result<Gpu, GpuError> {
        Self::request_with(true).await
    }

    /// [`Gpu::request`], with subgroups used only where `subgroups` allows them (the tests hold
    /// both ways of summing a row against each other on one adapter).
    pub async fn request_with(subgroups: bool) -> Result<Gpu, GpuError> {
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
            device_type: format!("{:?}", info.device_type),
            driver: format!("{} {}", info.driver, info.driver_info).trim().to_owned(),
            max_binding: limits.max_storage_buffer_binding_size,
            max_buffer: limits.max_buffer_size,
            shader_f16: adapter.features().contains(wgpu::Features::SHADER_F16),
            storage_buffers: limits.max_storage_buffers_per_shader_stage,
            subgroups: subgroups
                && adapter.features().contains(wgpu::Features::SUBGROUP)
                && info.subgroup_min_size >= WORKGROUP / shaders::ROWS_PER_GROUP,
            timestamps: cfg!(not(target_family = "wasm"))
                && adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY),
            packed_dots: instance
                .wgsl_language_features()
                .contains(wgpu::WgslLanguageFeatures::Packed4x8IntegerDotProduct),
        };
        let descriptor = wgpu::DeviceDescriptor {
            label: Some("inferno"),
            required_limits: limits,
            required_features: [
                (facts.subgroups, wgpu::Features::SUBGROUP),
                (facts.timestamps, wgpu::Features::TIMESTAMP_QUERY),
            ]
            .into_iter()
            .filter(|&(wanted, _)| wanted)
            .fold(wgpu::Features::empty(), |all, (_, feature)| all | feature),
            ..Default::default()
        };
        let (device, queue) =
            adapter.request_device(&descriptor).await.map_err(|e| GpuError::Device(e.to_string()))?;
        let fault = Arc::new(Mutex::new(None));
        let slot = Arc::clone(&fault);
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            let error = match error {
                wgpu::Error::OutOfMemory { .. } => GpuError::Failed("out of GPU memory".into()),
                other => GpuError::Failed(other.to_string()),
            };
            record_fault(&slot, error);
        }));
        let slot = Arc::clone(&fault);
        device.set_device_lost_callback(move |_reason, message| {
            record_fault(&slot, GpuError::Lost(message));
        });
        let matmul =
            shaders::MATVEC_TYPES.iter().map(|&weight_type| (weight_type, OnceLock::new())).collect();
        let expert_matmul =
            shaders::MATVEC_TYPES.iter().map(|&weight_type| (weight_type, OnceLock::new())).collect();
        let get_rows =
            shaders::MATVEC_TYPES.iter().map(|&weight_type| (weight_type, OnceLock::new())).collect();
        let matmul_q8 =
            shaders::Q8_DOT_TYPES.iter().map(|&weight_type| (weight_type, OnceLock::new())).collect();
        let quantize_q8 = pipeline(&device, &shaders::quantize_q8());
        let rms_norm_q8 = pipeline(&device, &shaders::rms_norm(WORKGROUP, true));
        let gated_matvec = shaders::MATVEC_TYPES
            .iter()
            .map(|&weight_type| (weight_type, std::array::from_fn(|_| OnceLock::new())))
            .collect();
        let qkv_matvec = Mutex::new(HashMap::new());
        let group_by_expert = pipeline(&device, shaders::GROUP_BY_EXPERT);
        let (swiglu_oai, route, expert_bias, expert_sum) = (
            pipeline(&device, &shaders::elementwise(shaders::SWIGLU_OAI)),
            pipeline(&device, shaders::ROUTE),
            pipeline(&device, shaders::EXPERT_BIAS),
            pipeline(&device, shaders::EXPERT_SUM),
        );
        let attention = [AttentionKernel::Group, AttentionKernel::Flash]
            .map(|kernel| pipeline(&device, &shaders::attention(kernel)));
        let attention_grouped = std::array::from_fn(|_| OnceLock::new());
        let attention_merge = pipeline(&device, &shaders::attention_merge());
        let pack_f16 = pipeline(&device, &shaders::pack_f16());
        let qk_heads = (facts.storage_buffers >= 8).then(|| pipeline(&device, &shaders::qk_heads(WORKGROUP)));
        let (rms_norm, add, swiglu, geglu, rope) = (
            pipeline(&device, &shaders::rms_norm(WORKGROUP, false)),
            pipeline(&device, &shaders::elementwise("x[i] = x[i] + y[i];")),
            pipeline(&device, &shaders::elementwise(shaders::SWIGLU)),
            pipeline(&device, &shaders::elementwise(&shaders::geglu())),
            pipeline(&device, &shaders::rope()),
        );
        let (add_bias, scale, softcap) = (
            pipeline(&device, &shaders::elementwise("x[i] = x[i] + y[i % p.a];")),
            pipeline(&device, &shaders::elementwise("x[i] = x[i] * y[0];")),
            pipeline(&device, &shaders::elementwise("x[i] = tanh(x[i] * (1.0 / y[0])) * y[0];")),
        );
        let per_layer_gate = pipeline(&device, &shaders::elementwise(&shaders::per_layer_gate()));
        let mix_embedding = pipeline(&device, &shaders::elementwise(shaders::MIX_EMBEDDING));
        let (split_gate, apply_gate) = (
            pipeline(&device, &shaders::elementwise(shaders::SPLIT_GATE)),
            pipeline(&device, &shaders::elementwise(shaders::APPLY_GATE)),
        );
        let (delta_gates, delta_conv, delta_rule) = (
            pipeline(&device, shaders::DELTA_GATES),
            pipeline(&device, shaders::DELTA_CONV),
            pipeline(&device, shaders::DELTA_RULE),
        );
        let (short_conv, short_conv_in, short_conv_out) = (
            pipeline(&device, &shaders::short_conv()),
            pipeline(&device, &shaders::elementwise(shaders::SHORT_CONV_IN)),
            pipeline(&device, &shaders::elementwise(shaders::SHORT_CONV_OUT)),
        );
        let (ssm_scan, gather_columns, bias_silu, gate_by_silu) = (
            pipeline(&device, shaders::SSM_SCAN),
            pipeline(&device, &shaders::elementwise(shaders::GATHER_COLUMNS)),
            pipeline(&device, &shaders::elementwise(shaders::BIAS_SILU)),
            pipeline(&device, &shaders::elementwise(shaders::GATE_BY_SILU)),
        );
        let best_logits = pipeline(&device, &shaders::best_logits());
        let reads_best = std::sync::atomic::AtomicBool::new(facts.device_type != "Cpu");
        let integer_dots = std::sync::atomic::AtomicBool::new(facts.packed_dots);
        Ok(Gpu {
            device,
            queue,
            facts,
            fault,
            matmul,
            matmul_q8,
            quantize_q8,
            rms_norm_q8,
            integer_dots,
            expert_matmul,
            get_rows,
            gated_matvec,
            qkv_matvec,
            group_by_expert,
            rms_norm,
            add,
            swiglu,
            swiglu_oai,
            geglu,
            route,
            expert_bias,
            expert_sum,
            rope,
            qk_heads,
            attention,
            attention_grouped,
            attention_merge,
            pack_f16,
            add_bias,
            per_layer_gate,
            mix_embedding,
            scale,
            softcap,
            split_gate,
            apply_gate,
            delta_gates,
            delta_conv,
            delta_rule,
            short_conv,
            short_conv_in,
            short_conv_out,
            ssm_scan,
            gather_columns,
            bias_silu,
            gate_by_silu,
            best_logits,
            reads_best,
            vision: OnceLock::new(),
        })
    }

    /// Whether a decode step whose sampling needs only the best logits ranks them on the
    /// device and reads back those alone (`crate::sampler::BestLogits`), rather than every
    /// logit. So by default on every adapter but a software one: there the device is the CPU,
    /// and the ranking kernel cost more than reading everything (lavapipe: Gemma 3's decode
    /// step 1.5× as long, SmolLM2's 1.18×, `inferno generate --device gpu`).
    pub fn reads_best_logits(&self) -> bool {
        self.reads_best.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets [`Gpu::reads_best_logits`] (the tests hold both ways against each other on one
    /// adapter; the bench measures both).
    pub fn set_best_logits(&self, on: bool) {
        self.reads_best.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether products quantize their inputs to 8 bits and dot them with the weights'
    /// integers (`dot4I8Packed`), for the types that can ([`shaders::Q8_DOT_TYPES`]), in decode,
    /// short batches and the GEMM alike, as llama.cpp's Vulkan backend does for batches and
    /// wide matrices where the adapter has integer dot products. On by default wherever
    /// WGSL has `dot4I8Packed` ([`AdapterFacts::packed_dots`]): on lavapipe decode gained a
    /// third (docs/benchmarks.md); a real GPU's figures are still owed (`scripts/gpu-check.sh`
    /// measures both ways).
    pub fn integer_dots(&self) -> bool {
        self.integer_dots.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets [`Gpu::integer_dots`] (never on where WGSL lacks `dot4I8Packed`; the tests hold
    /// both ways against the CPU; the bench and `scripts/gpu-check.sh` measure both).
    pub fn set_integer_dots(&self, on: bool) {
        let on = on && self.facts.packed_dots;
        self.integer_dots.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether a product with a matrix of `weight_type` reads 8-bit inputs
    /// ([`Gpu::integer_dots`]).
    fn reads_q8(&self, weight_type: WeightType) -> bool {
        self.integer_dots() && shaders::Q8_DOT_TYPES.contains(&weight_type)
    }

    pub fn facts(&self) -> &AdapterFacts {
        &self.facts
    }

    /// Binds at most `bytes` at once from now on (never more than the adapter allows): how the
    /// tests run the slicing of large matrices and expert stacks with files far too small to
    /// reach an adapter's own limit.
    #[doc(hidden)]
    pub fn limit_bindings(&mut self, bytes: u64) {
        self.facts.max_binding = self.facts.max_binding.min(bytes);
    }

    /// What the device reported on its own since it started, if anything: once lost, it
    /// stays lost.
    pub fn fault(&self) -> Option<GpuError> {
        self.fault.lock().ok().and_then(|slot| slot.clone())
    }

    /// Gives the device up, as a driver reset would (what the tests of a lost device use).
    pub fn destroy(&self) {
        self.device.destroy();
        record_fault(&self.fault, GpuError::Lost("destroyed".into()));
    }

    /// Copies a buffer of `bytes` into another `repeats` times in one submission (each copy
    /// reads and writes `bytes`): timed by the caller, this is the adapter's own memory
    /// bandwidth, the yardstick for how well decode streams its weights. The signal fires when
    /// the copies are done.
    pub fn copy_test(&self, bytes: u64, repeats: u32) -> Result<Signal, GpuError> {
        let bytes = bytes.min(self.facts.max_buffer) / 4 * 4;
        if bytes == 0 {
            return Err(GpuError::Shape("a copy test needs at least 4 bytes".into()));
        }
        let buffer = |usage| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("copy test"),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        let (from, to) = (buffer(wgpu::BufferUsages::COPY_SRC), buffer(wgpu::BufferUsages::COPY_DST));
        let mut encoder = self.device.create_command_encoder(&Default::default());
        for _ in 0..repeats.max(1) {
            encoder.copy_buffer_to_buffer(&from, 0, &to, 0, bytes);
        }
        self.queue.submit([encoder.finish()]);
        let signal = Signal::default();
        let done = signal.clone();
        self.queue.on_submitted_work_done(move || done.complete(Ok(())));
        #[cfg(not(target_family = "wasm"))]
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| GpuError::Failed(e.to_string()))?;
        Ok(signal)
    }

    /// A buffer holding `bytes` (padded to whole words), written through the queue: unlike a
    /// buffer mapped at creation, this cannot panic on a lost device, it only reports an error.
    /// An empty storage buffer of `size` bytes that writes can fill.
    fn storage_buffer(&self, size: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: size.max(4),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    fn buffer_with(&self, bytes: &[u8], usage: wgpu::BufferUsages) -> wgpu::Buffer {
        let size = bytes.len().div_ceil(4).max(1) * 4;
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: size as u64,
            usage: usage | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        if bytes.len() == size {
            self.queue.write_buffer(&buffer, 0, bytes);
        } else {
            let mut padded = bytes.to_vec();
            padded.resize(size, 0);
            self.queue.write_buffer(&buffer, 0, &padded);
        }
        buffer
    }

    /// The matrix product kernel for `batch` input rows of `weight_type`: one input row per
    /// workgroup for decode, a tile of them for a short batch, the GEMM for a long one (whose
    /// sums are the same products added in another order); over 8-bit inputs where `q8_ok`
    /// (the caller quantizes them) and [`Gpu::reads_q8`].
    fn matmul_kernel(
        &self,
        weight_type: WeightType,
        batch: usize,
        q8_ok: bool,
    ) -> Result<MatmulKernel, GpuError> {
        let [single, tiled, gemm] = self.matmul_pipelines(weight_type)?;
        let q8 = q8_ok && self.reads_q8(weight_type);
        let [single, tiled, gemm] =
            if q8 { self.matmul_q8_pipelines(weight_type).each_ref() } else { [single, tiled, gemm] };
        let kernel = |pipeline: &wgpu::ComputePipeline, rows_per_group, tokens_per_group: u32| MatmulKernel {
            pipeline: pipeline.clone(),
            rows_per_group,
            groups_z: (batch.max(1) as u32).div_ceil(tokens_per_group),
            q8,
        };
        Ok(match batch {
            0 | 1 => kernel(single, shaders::ROWS_PER_GROUP, 1),
            _ if batch < GEMM_MIN_BATCH => kernel(tiled, shaders::ROWS_PER_GROUP, shaders::TILE_TOKENS),
            _ => kernel(gemm, shaders::GEMM_ROWS, shaders::GEMM_TOKENS),
        })
    }

    /// What a profile calls `pipeline`'s kernel: a matrix product's shape and weight type, or
    /// the operation.
    fn kernel_name(&self, pipeline: &wgpu::ComputePipeline) -> String {
        for (weight_type, pipelines) in &self.matmul {
            let kinds = ["matvec", "matvec batch", "gemm"];
            if let Some(kind) =
                pipelines.get().and_then(|p| kinds.iter().zip(p).find(|(_, q)| *q == pipeline))
            {
                return format!("{} {weight_type:?}", kind.0);
            }
        }
        for (weight_type, pipelines) in &self.matmul_q8 {
            let kinds = ["matvec q8", "matvec batch q8", "gemm q8"];
            if let Some(kind) =
                pipelines.get().and_then(|p| kinds.iter().zip(p).find(|(_, q)| *q == pipeline))
            {
                return format!("{} {weight_type:?}", kind.0);
            }
        }
        for (weight_type, slots) in &self.gated_matvec {
            if let Some(at) = slots.iter().position(|slot| slot.get() == Some(pipeline)) {
                return format!("matvec gated{} {weight_type:?}", if at >= 2 { " q8" } else { "" });
            }
        }
        if let Ok(pipelines) = self.qkv_matvec.lock() {
            for ((qk_type, v_type, q8), built) in pipelines.iter() {
                if built.as_ref() == Some(pipeline) {
                    let types = if qk_type == v_type {
                        format!("{qk_type:?}")
                    } else {
                        format!("{qk_type:?}+{v_type:?}")
                    };
                    return format!("matvec qkv{} {types}", if *q8 { " q8" } else { "" });
                }
            }
        }
        for (weight_type, pipelines) in &self.expert_matmul {
            let kinds = ["experts matvec", "experts matvec grouped", "experts gemm"];
            if let Some(kind) =
                pipelines.get().and_then(|p| kinds.iter().zip(p).find(|(_, q)| *q == pipeline))
            {
                return format!("{} {weight_type:?}", kind.0);
            }
        }
        if self.attention_grouped.iter().any(|built| built.get() == Some(pipeline)) {
            return "attention (a workgroup per KV head)".into();
        }
        let named = [
            (&self.attention[0], "attention (a workgroup per head)"),
            (&self.attention[1], "attention (tiled)"),
            (&self.attention_merge, "attention (merge of splits)"),
            (&self.pack_f16, "keys and values to f16"),
            (&self.rms_norm, "rms_norm"),
            (&self.add, "add"),
            (&self.swiglu, "swiglu"),
            (&self.swiglu_oai, "swiglu_oai"),
            (&self.geglu, "geglu"),
            (&self.route, "route"),
            (&self.group_by_expert, "group_by_expert"),
            (&self.expert_bias, "expert_bias"),
            (&self.expert_sum, "expert_sum"),
            (&self.rope, "rope"),
            (&self.add_bias, "add_bias"),
            (&self.per_layer_gate, "per_layer_gate"),
            (&self.mix_embedding, "mix_embedding"),
            (&self.scale, "scale"),
            (&self.softcap, "softcap"),
            (&self.split_gate, "split_gate"),
            (&self.apply_gate, "apply_gate"),
            (&self.delta_gates, "delta_gates"),
            (&self.delta_conv, "delta_conv"),
            (&self.delta_rule, "delta_rule"),
            (&self.short_conv, "short_conv"),
            (&self.short_conv_in, "short_conv_in"),
            (&self.short_conv_out, "short_conv_out"),
            (&self.ssm_scan, "ssm_scan"),
            (&self.gather_columns, "gather_columns"),
            (&self.bias_silu, "bias_silu"),
            (&self.gate_by_silu, "gate_by_silu"),
            (&self.best_logits, "best_logits"),
            (&self.quantize_q8, "inputs to 8 bits"),
            (&self.rms_norm_q8, "rms_norm and its rows to 8 bits"),
        ];
        if self.qk_heads.as_ref() == Some(pipeline) {
            return "qk_heads (norms, rope, cache)".to_owned();
        }
        let vision = self.vision.get().and_then(|v| v.name_of(pipeline));
        named
            .iter()
            .find(|(p, _)| *p == pipeline)
            .map_or(vision.unwrap_or("other"), |(_, name)| name)
            .to_owned()
    }

    /// The vision encoder's pipelines, built on first use.
    fn vision_pipelines(&self) -> &vision::VisionPipelines {
        self.vision.get_or_init(|| vision::VisionPipelines::new(&self.device))
    }

    /// The three matrix pipelines of `weight_type`, built on first use; an error for a type
    /// without a kernel.
    fn matmul_pipelines(&self, weight_type: WeightType) -> Result<&[wgpu::ComputePipeline; 3], GpuError> {
        let (_, pipelines) =
            self.matmul.iter().find(|(t, _)| *t == weight_type).ok_or(GpuError::Unsupported(weight_type))?;
        Ok(pipelines.get_or_init(|| {
            let kernel = |tiled| {
                pipeline(
                    &self.device,
                    &shaders::matmul(weight_type, WORKGROUP, tiled, self.facts.subgroups, false),
                )
            };
            [kernel(false), kernel(true), pipeline(&self.device, &shaders::gemm(weight_type))]
        }))
    }

    /// The decode, short-batch and GEMM pipelines of `weight_type` over 8-bit inputs, built on
    /// first use (only for [`shaders::Q8_DOT_TYPES`]: see [`Gpu::reads_q8`]).
    fn matmul_q8_pipelines(&self, weight_type: WeightType) -> &[wgpu::ComputePipeline; 3] {
        let (_, pipelines) =
            self.matmul_q8.iter().find(|(t, _)| *t == weight_type).expect("a type of Q8_DOT_TYPES");
        pipelines.get_or_init(|| {
            let kernel = |tiled| {
                pipeline(
                    &self.device,
                    &shaders::matmul(weight_type, WORKGROUP, tiled, self.facts.subgroups, true),
                )
            };
            [kernel(false), kernel(true), pipeline(&self.device, &shaders::gemm_q8(weight_type))]
        })
    }

    /// The row lookup of `weight_type`, built on first use.
    fn get_rows_pipeline(&self, weight_type: WeightType) -> Result<&wgpu::ComputePipeline, GpuError> {
        let (_, pipeline_slot) = self
            .get_rows
            .iter()
            .find(|(t, _)| *t == weight_type)
            .ok_or(GpuError::Unsupported(weight_type))?;
        Ok(pipeline_slot.get_or_init(|| pipeline(&self.device, &shaders::get_rows(weight_type))))
    }

    /// The gated feed-forward's decode pipeline of `weight_type` with `activation` (SwiGLU
    /// or GeGLU; none for the others), built on first use, and whether it reads 8-bit inputs.
    fn gated_matvec_pipeline(
        &self,
        weight_type: WeightType,
        activation: Activation,
    ) -> Option<(&wgpu::ComputePipeline, bool)> {
        let (index, body) = match activation {
            Activation::SwiGlu => (0, shaders::SWIGLU.to_string()),
            Activation::GeGlu => (1, shaders::geglu()),
            Activation::SwiGluOai | Activation::Gelu => return None,
        };
        let q8 = self.reads_q8(weight_type);
        let (_, slots) = self.gated_matvec.iter().find(|(t, _)| *t == weight_type)?;
        let built = slots[index + 2 * usize::from(q8)].get_or_init(|| {
            let source = shaders::gated_matvec(weight_type, WORKGROUP, self.facts.subgroups, q8, &body);
            pipeline(&self.device, &source)
        });
        Some((built, q8))
    }

    /// The query, key and value decode pipeline of these types, built on first use, and
    /// whether it reads 8-bit inputs.
    fn qkv_matvec_pipeline(
        &self,
        qk_type: WeightType,
        v_type: WeightType,
    ) -> Option<(wgpu::ComputePipeline, bool)> {
        if ![qk_type, v_type].iter().all(|t| shaders::MATVEC_TYPES.contains(t)) {
            return None;
        }
        // 8-bit inputs where both types dot with them, quantized alike (the inputs are shared).
        let q8 = self.reads_q8(qk_type)
            && self.reads_q8(v_type)
            && shaders::q8_format(qk_type) == shaders::q8_format(v_type);
        let mut pipelines = self.qkv_matvec.lock().ok()?;
        let built = pipelines.entry((qk_type, v_type, q8)).or_insert_with(|| {
            let source = shaders::qkv_matvec(qk_type, v_type, WORKGROUP, self.facts.subgroups, q8)?;
            Some(pipeline(&self.device, &source))
        });
        built.clone().map(|pipeline| (pipeline, q8))
    }

    /// Whether [`shaders::get_rows`] reads tables of `weight_type`.
    pub fn looks_up(&self, weight_type: WeightType) -> bool {
        self.get_rows.iter().any(|(t, _)| *t == weight_type)
    }

    /// The experts' pipelines of `weight_type` (a pair per workgroup, eight of an expert's
    /// pairs, the GEMM), built on first use.
    fn expert_matmul_pipelines(
        &self,
        weight_type: WeightType,
    ) -> Result<&[wgpu::ComputePipeline; 3], GpuError> {
        let (_, pipelines) = self
            .expert_matmul
            .iter()
            .find(|(t, _)| *t == weight_type)
            .ok_or(GpuError::Unsupported(weight_type))?;
        Ok(pipelines.get_or_init(|| {
            let kernel = |grouped| shaders::expert_matmul(weight_type, WORKGROUP, grouped);
            [kernel(false), kernel(true), shaders::expert_gemm(weight_type)]
                .map(|source| pipeline(&self.device, &source))
        }))
    }

    /// How an attention call over `queries` rows of `n_head` heads runs, as the matrix
    /// products split: below [`TILED_ATTENTION_MIN_QUERIES`] queries (decode) a workgroup per query and
    /// head, all 64 threads on one head's cache, and where `can_split` and a range is longer
    /// than [`SPLIT_ABOVE`] positions, split into up to [`MAX_SPLITS`] workgroups whose
    /// partial sums a second kernel merges (so a long cache keeps many workgroups busy, not
    /// `n_head`); from 8 queries (prefill, pictures) the tiled kernel, a workgroup per
    /// [`shaders::FLASH_QUERIES`] queries of a head.
    fn attention_plan(
        &self,
        queries: usize,
        a: &AttentionParams,
        has_sinks: bool,
        can_split: bool,
    ) -> AttentionPlan<'_> {
        let pairs = queries * a.n_head;
        // llvmpipe (lavapipe) ends any invocation's loops after 65,535 iterations in all, and
        // then attends to only the first keys (wrong output, no error). The tiled kernel's
        // threads loop about head / 4 + 112 times per block of 64 keys, which reaches past
        // 23,000 keys at head 256; the workgroup kernel's 280-450 a block, 10,000-15,000.
        // The longest range a query sees: the window's, or the cache's.
        let keys = a.start + queries;
        let range = if a.window > 0 { a.window.min(keys) } else { keys };
        // Exact attention leaves short batches to the workgroup kernel as llama.cpp's CPU does,
        // where their range stays within that loop limit (they do not split).
        let one_pass_batches = a.exact && range <= EXACT_SPLIT_ABOVE;
        let tiled_from = if one_pass_batches { TILED_MIN_QUERIES } else { TILED_ATTENTION_MIN_QUERIES };
        if queries >= tiled_from && a.head_dim.is_multiple_of(4) {
            let [x, y] = groups_2d((queries.div_ceil(shaders::FLASH_QUERIES) * a.n_head) as u32);
            let words = attention_params(a, queries, x, has_sinks, (1, 0));
            return AttentionPlan { main: (&self.attention[1], words, [x, y, 1]), merge: None };
        }
        // Grouped query heads share a workgroup that reads their KV head's rows once (f32 only:
        // the exact arithmetic keeps a workgroup per head).
        let group = a.n_head / a.n_kv;
        let grouped = !a.exact && (2..=shaders::MAX_ATTENTION_GROUP).contains(&group);
        // Only decode splits: `attention_parts` holds the sums of fewer than 8 queries (a batch
        // with heads that are no multiple of 4 takes this kernel whole).
        // Exact attention splits only past llvmpipe's loop limit: a split's f16 sums start
        // afresh, and llama.cpp's CPU kernel walks the whole range in one.
        let (split_above, split_chunk) =
            if a.exact { (EXACT_SPLIT_ABOVE, EXACT_SPLIT_ABOVE) } else { (SPLIT_ABOVE, SPLIT_CHUNK) };
        let may_split = can_split && queries < TILED_ATTENTION_MIN_QUERIES;
        let (mut splits, mut chunk) = if may_split && range > split_above {
            let chunk = range.div_ceil(MAX_SPLITS).next_multiple_of(64).max(split_chunk);
            (range.div_ceil(chunk), chunk)
        } else {
            (1, 0)
        };
        // A group's workgroup does its heads' work: split its range in as many (of 64 positions
        // at least) to keep as many workgroups busy as a workgroup per head would (Gemma 3's
        // one KV head would leave a decode step's attention to one workgroup a layer).
        let filling = group.min(range.div_ceil(64));
        if grouped && may_split && filling > splits {
            chunk = range.div_ceil(filling).next_multiple_of(64);
            splits = range.div_ceil(chunk);
        }
        let (kernel, workgroups) = if grouped {
            let built = self.attention_grouped[group - 2]
                .get_or_init(|| pipeline(&self.device, &shaders::attention_grouped(group)));
            (built, queries * a.n_kv)
        } else {
            (&self.attention[0], pairs)
        };
        let [x, y] = groups_2d((workgroups * splits) as u32);
        let main = (kernel, attention_params(a, queries, x, has_sinks, (splits, chunk)), [x, y, 1]);
        let merge = (splits > 1).then(|| {
            let [x, y] = groups_2d(pairs as u32);
            (&self.attention_merge, attention_params(a, queries, x, has_sinks, (splits, chunk)), [x, y, 1])
        });
        AttentionPlan { main, merge }
    }
}

/// An attention call's dispatches: the kernel, and where it splits, the merge of its partial
/// sums (which then go to a buffer of [`attention_parts`] floats between the two).
struct AttentionPlan<'a> {
    main: (&'a wgpu::ComputePipeline, [u32; 16], [u32; 3]),
    merge: Option<(&'a wgpu::ComputePipeline, [u32; 16], [u32; 3])>,
}

/// Decode ranges longer than this split (see [`Gpu::attention_plan`]).
const SPLIT_ABOVE: usize = 512;
/// The most splits of a range, and the fewest positions a split takes.
const MAX_SPLITS: usize = 16;
const SPLIT_CHUNK: usize = 256;
/// Where exact attention splits, and the fewest positions it splits into: its threads loop
/// about 700 times per block of 64 positions, 65,535 in all on llvmpipe.
const EXACT_SPLIT_ABOVE: usize = 4096;

/// Floats of split attention's partial sums for `queries` queries (fewer than
/// [`TILED_ATTENTION_MIN_QUERIES`]) of `n_head` heads up to `head_dim` wide.
fn attention_parts(queries: usize, n_head: usize, head_dim: usize) -> usize {
    queries.min(TILED_ATTENTION_MIN_QUERIES - 1) * n_head * (head_dim + 2) * MAX_SPLITS
}

/// Asks for `buffer` to be mapped once the queue is done with it; the signal says when.
fn map_for_reading(buffer: &wgpu::Buffer) -> Signal {
    let signal = Signal::default();
    let done = signal.clone();
    buffer.map_async(wgpu::MapMode::Read, .., move |result| {
        done.complete(result.map_err(|e| GpuError::Failed(e.to_string())));
    });
    signal
}

/// The first `floats` values of a mapped buffer, which is then unmapped for reuse.
fn mapped_floats(buffer: &wgpu::Buffer, floats: usize) -> Result<Vec<f32>, GpuError> {
    Ok(mapped_words(buffer, floats)?.into_iter().map(f32::from_bits).collect())
}

/// The first `words` 32-bit words of a mapped buffer, which is then unmapped for reuse.
fn mapped_words(buffer: &wgpu::Buffer, words: usize) -> Result<Vec<u32>, GpuError> {
    let values = {
        let view = buffer.get_mapped_range(..).map_err(|e| GpuError::Failed(e.to_string()))?;
        view.chunks_exact(4).take(words).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
    };
    buffer.unmap();
    Ok(values)
}

fn record_fault(slot: &Mutex<Option<GpuError>>, error: GpuError) {
    if let Ok(mut slot) = slot.lock() {
        // A lost device outranks whatever failed before it.
        if slot.is_none() || matches!(error, GpuError::Lost(_)) {
            *slot = Some(error);
        }
    }
}

/// The RoPE kernel's uniform for `rows` rows.
fn rope_params(rope: &RopeParams, rows: usize, has_factors: bool, groups_x: u32) -> [u32; 16] {
    let [ramp_start, ramp_end] = rope.yarn_ramp.unwrap_or([0.0; 2]);
    [
        rows as u32,
        rope.heads as u32,
        rope.head_dim as u32,
        rope.rope_dims as u32,
        rope.start as u32,
        u32::from(rope.neox),
        u32::from(has_factors),
        groups_x,
        rope.base.to_bits(),
        rope.freq_scale.to_bits(),
        rope.attn_factor.to_bits(),
        u32::from(rope.yarn_ramp.is_some()),
        ramp_start.to_bits(),
        ramp_end.to_bits(),
        rope.grid.map_or(0, |[width, _]| width as u32),
        rope.grid.map_or(0, |[_, first_row]| first_row as u32),
    ]
}

/// The attention kernels' uniform for `queries` query rows, with a sink per head or none, and
/// the splits of each range with the positions each takes (1 and 0: none).
fn attention_params(
    a: &AttentionParams,
    queries: usize,
    groups_x: u32,
    has_sinks: bool,
    (splits, chunk): (usize, usize),
) -> [u32; 16] {
    [
        a.n_head as u32,
        a.n_kv as u32,
        a.head_dim as u32,
        a.start as u32,
        queries as u32,
        a.window as u32,
        groups_x,
        u32::from(!a.causal),
        a.scale.to_bits(),
        a.softcap.to_bits(),
        u32::from(has_sinks),
        0,
        splits as u32,
        chunk as u32,
        u32::from(a.exact),
        0,
    ]
}

/// The routing kernel's number for a way of gating (`shaders::ROUTE`).
fn gating_code(gating: crate::model::Gating) -> u32 {
    match gating {
        crate::model::Gating::Softmax => 0,
        crate::model::Gating::Sigmoid => 1,
        crate::model::Gating::SoftmaxWeight => 2,
    }
}

/// Workgroup counts for `groups` workgroups: up to 65,535 in x, the rest in y.
fn groups_2d(groups: u32) -> [u32; 2] {
    let x = groups.clamp(1, MAX_GROUPS_PER_DIMENSION);
    [x, groups.div_ceil(x).max(1)]
}

fn pipeline(device: &wgpu::Device, source: &str) -> wgpu::ComputePipeline {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
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

// Native: they wait on the GPU with pollster; the browser's GPU is checked through the page
// (tests/page/gpu.test.mjs).
#[cfg(all(test, not(target_family = "wasm")))]
mod tests;
