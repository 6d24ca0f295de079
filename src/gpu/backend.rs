//! The model's [`Backend`] on the GPU: the same forward pass (`model::forward_batch`) with
//! every operation recorded per batch into one command buffer, weights uploaded once as the
//! file stores them, activations and the KV cache (f32) on the device, and nothing read back
//! but the logits. Runs every family's layers: attention (gated, with value norms, sliding),
//! Gemma 4's per-layer inputs, and Qwen3.5's gated DeltaNet, whose recurrent state stays on the
//! device with its checkpoints (the same [`Checkpoints`] policy as the CPU's cache).
//!
//! A forward pass is two calls, so that a page never blocks on the GPU: [`GpuState::submit`]
//! records and submits, and [`GpuState::collect`] takes the logits once [`GpuState::pending`]
//! has fired ([`GpuState::forward`] does both, natively).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use super::streamed::DeviceWeights;
use super::{AttentionParams, Gpu, GpuError, RopeParams, Signal, groups_2d};
use crate::model::backend::{Backend, Buf, Input, LayerAttention, LayerRope, LogitsHead, QkHeads};
use crate::model::{
    Activation, AttentionPrecision, BatchInput, Checkpoints, DeltaNetWeights, EncoderInput, ExpertWeights,
    Family, FeedForward, Ffn, Mamba2Weights, Matrix, Mixer, Model, ModelError, Norm, PerLayerWeights,
    Placement, RopeStyle, ShortConvWeights,
};
use crate::sampler::{LogitsRead, ReadLogits};

/// What a model keeps on the device between batches: its weights (by where they lie in the
/// file, or where their decoded vector lives), the named activations, and the KV cache.
pub struct GpuState {
    bufs: Vec<wgpu::Buffer>,
    gate: wgpu::Buffer,
    up: wgpu::Buffer,
    temp: wgpu::Buffer,
    /// A product's inputs quantized to 8 bits ([`Gpu::integer_dots`]): a batch's rows of the
    /// widest matrix, where some matrix can read them ([`GpuState::q8_norm_format`]).
    q8_inputs: wgpu::Buffer,
    /// How a norm stores its rows in 8 bits for the products after it: the
    /// [`q8_format`](super::shaders::q8_format) most of the model's matrices whose products read
    /// 8-bit inputs ([`shaders::Q8_DOT_TYPES`](super::shaders::Q8_DOT_TYPES)) read (a product of
    /// another format quantizes the rows again); none where no matrix does.
    q8_norm_format: Option<u32>,
    /// Split attention's partial sums (decode over a long cache).
    attention_parts: wgpu::Buffer,
    keys: Vec<wgpu::Buffer>,
    values: Vec<wgpu::Buffer>,
    logits: wgpu::Buffer,
    /// A batch's token ids, where the token embedding is looked up on the device.
    token_ids: wgpu::Buffer,
    /// Where the last token's logits are copied to be mapped and read.
    readback: wgpu::Buffer,
    /// The passes' results of the best logits ([`super::best`]), and where the last is read.
    best_scratch: [wgpu::Buffer; 2],
    best_readback: wgpu::Buffer,
    /// Each matrix as slices of whole rows, each within one binding: (first row, rows, blocks).
    matrices: HashMap<usize, Slices>,
    /// Each stack of experts' matrices (by its first expert's place in the file) as slices of
    /// whole experts, each within one binding: (first expert, experts, blocks).
    stacks: HashMap<usize, Slices>,
    vectors: HashMap<usize, wgpu::Buffer>,
    /// The work submitted last, and what it reads back of the logits (`readback` or
    /// `best_readback`), if any.
    in_flight: Option<(Signal, Option<LogitsRead>)>,
    /// Gemma 4's per-layer inputs, where the model has them.
    per_layer: Option<PerLayerBuffers>,
    /// Rows of one value, by width and value's bits: the weight of a norm that has none
    /// (Gemma 4's value norm; DeltaNet's L2 norm, whose weight is `1/√d`).
    constant_rows: HashMap<(usize, u32), wgpu::Buffer>,
    /// RoPE's per-pair frequency factors where some pairs stay unrotated (M-RoPE), by the
    /// model's factors they start from (0: none).
    rope_factors: HashMap<usize, wgpu::Buffer>,
    /// Turns each batch's recording into a command buffer.
    encoder: Encoder,
    /// Dispatches in the last batch submitted.
    dispatches: usize,
    /// Each dispatch timed on the device, where [`GpuState::profile_kernels`] asked for it.
    profile: Option<KernelProfile>,
    /// Qwen3.5's DeltaNet activations, and each recurrent layer's state with its checkpoints.
    delta: Option<DeltaBuffers>,
    short_conv: Option<ShortConvBuffers>,
    experts: Option<ExpertBuffers>,
    mamba2: Option<Mamba2Buffers>,
    recurrent: Vec<RecurrentLayer>,
    checkpoints: Checkpoints<Vec<RecurrentLayer>>,
    max_batch: usize,
    capacity: usize,
    len: usize,
    memory: GpuMemory,
    /// Whether attention computes as llama.cpp's one-pass CPU kernel ([`AttentionParams::exact`]).
    exact_attention: bool,
}

/// The [`q8_format`](super::shaders::q8_format) most of `model`'s 8-bit products read (the
/// first of those tied), which the norms then store their rows in: a file's few matrices of
/// another type (SmolLM2 Q4_1's Q8_0 output, say) should not make every layer quantize again.
fn most_common_q8_format(model: &Model) -> Option<u32> {
    let mut counts: Vec<(u32, usize)> = Vec::new();
    for matrix in model.decode_matrices() {
        if !super::shaders::Q8_DOT_TYPES.contains(&matrix.weight_type) {
            continue;
        }
        let format = super::shaders::q8_format(matrix.weight_type);
        match counts.iter_mut().find(|(f, _)| *f == format) {
            Some((_, count)) => *count += 1,
            None => counts.push((format, 1)),
        }
    }
    // `max_by_key` keeps the last of equals: search from the back for the first.
    counts.iter().rev().max_by_key(|&&(_, count)| count).map(|&(format, _)| format)
}

/// A state's device memory by what holds it, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuMemory {
    /// The model's: matrices, embeddings, norms and biases, tables derived from them.
    pub weights: u64,
    /// The KV cache, the recurrent layers' state and its checkpoints.
    pub cache: u64,
    /// The rest: activations of a batch, the logits and their readback, constant rows.
    pub scratch: u64,
}

impl GpuState {
    /// Device memory for `model` with a cache of `capacity` positions and batches of up to
    /// `max_batch` tokens, and every weight the GPU reads uploaded; refuses a model with
    /// layers the GPU cannot run yet.
    pub fn new(gpu: &Gpu, model: &Model, capacity: usize, max_batch: usize) -> Result<GpuState, GpuError> {
        Self::with_weights(gpu, model, None, capacity, max_batch)
    }

    /// [`GpuState::new`] for a model some of whose weights are on the device already
    /// (`uploaded`: streamed there as the file arrived, [`super::WeightStream`]); the rest are
    /// uploaded from the file.
    pub fn with_weights(
        gpu: &Gpu,
        model: &Model,
        uploaded: Option<&DeviceWeights>,
        capacity: usize,
        max_batch: usize,
    ) -> Result<GpuState, GpuError> {
        Self::check(gpu, model)?;
        let c = model.config();
        let max_batch = max_batch.max(1);
        let best_scratch = [0, 1].map(|_| gpu.scratch_buffer(super::best::scratch_bytes(c.vocab_size)));
        let best_readback = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("best logits"),
            size: super::best::RESULT_BYTES,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut bytes = 2 * super::best::scratch_bytes(c.vocab_size) + super::best::RESULT_BYTES;
        let mut buffer = |floats: usize, usage: wgpu::BufferUsages| {
            let size = (4 * floats.max(1)) as u64;
            bytes += size;
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        let storage =
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
        let (d, q, kv) = (c.n_embd, c.q_dim(), c.kv_dim());
        let widths = [d, d, d, q, 2 * q, kv, kv, q]; // In Buf's order.
        let bufs = widths.iter().map(|&w| buffer(w * max_batch, storage)).collect();
        let attention_layers = (0..c.n_layer).filter(|&l| c.keeps_kv(l)).count();
        let n_ff = (0..c.n_layer).map(|l| c.layer(l).n_ff).max().unwrap_or(c.n_ff);
        let max_head = (0..c.n_layer).map(|l| c.layer(l).head_dim).max().unwrap_or(0);
        let per_layer = c.per_layer_input.map(|width| {
            let all = width * c.n_layer * max_batch;
            PerLayerBuffers {
                raw: buffer(all, storage),
                inputs: buffer(all, storage),
                embedded: buffer(all, storage),
                hidden: buffer(width * max_batch, storage),
            }
        });
        let delta = c.delta_net.map(|shape| DeltaBuffers {
            qkv: buffer(shape.conv_dim() * max_batch, storage),
            convolved: buffer(shape.conv_dim() * max_batch, storage),
            z: buffer(shape.value_dim() * max_batch, storage),
            alpha: buffer(shape.v_heads * max_batch, storage),
            beta: buffer(shape.v_heads * max_batch, storage),
            out: buffer(shape.value_dim() * max_batch, storage),
        });
        let short_conv = c.short_conv.map(|_| ShortConvBuffers {
            bcx: buffer(3 * d * max_batch, storage),
            gated: buffer(d * max_batch, storage),
        });
        let mamba2 = c.mamba2.map(|shape| Mamba2Buffers {
            zxbcdt: buffer(shape.in_dim() * max_batch, storage),
            xbc: buffer(shape.conv_dim() * max_batch, storage),
            convolved: buffer(shape.conv_dim() * max_batch, storage),
            y: buffer(shape.inner * max_batch, storage),
            normed: buffer(shape.inner * max_batch, storage),
        });
        let experts = c.experts.map(|shape| {
            let pairs = shape.used * max_batch;
            // The shared expert's hidden rows go where the chosen ones' went.
            let hidden = (shape.used * shape.width).max(shape.shared_width.unwrap_or(0)) * max_batch;
            ExpertBuffers {
                scores: buffer(shape.count * max_batch, storage),
                ids: buffer(pairs, storage),
                order: buffer(pairs, storage),
                offsets: buffer(shape.count + 1, storage),
                weights: buffer(pairs, storage),
                gate: buffer(hidden, storage),
                up: buffer(hidden, storage),
                out: buffer(pairs * d, storage),
                shared: buffer(d * max_batch, storage),
            }
        });
        let (conv_len, ssm_len) = c.recurrent_state_lens();
        let recurrent: Vec<RecurrentLayer> = (0..c.n_layer)
            .filter(|&l| c.is_recurrent(l))
            .map(|_| RecurrentLayer { conv: buffer(conv_len, storage), ssm: buffer(ssm_len, storage) })
            .collect();
        let recurrent_bytes: u64 = recurrent.iter().map(RecurrentLayer::bytes).sum();
        // The cache's keys and values (below), and the recurrent layers' state.
        let cache_bytes =
            2 * attention_layers as u64 * (4 * (capacity * kv).div_ceil(2).max(1)) as u64 + recurrent_bytes;
        let widest = model.decode_matrices().map(|m| m.cols).max().unwrap_or(0);
        let q8_norm_format = most_common_q8_format(model);
        let q8_rows = if q8_norm_format.is_some() { max_batch } else { 0 };
        let q8_inputs = buffer(super::shaders::q8_bytes(widest * q8_rows) / 4, storage);
        let mut state = GpuState {
            bufs,
            q8_inputs,
            q8_norm_format,
            gate: buffer(n_ff * max_batch, storage),
            up: buffer(n_ff * max_batch, storage),
            temp: buffer(d.max(2 * q) * max_batch, storage),
            attention_parts: buffer(super::attention_parts(max_batch, c.n_head, max_head), storage),
            // In f16, two values a word, as llama.cpp's default cache.
            keys: (0..attention_layers).map(|_| buffer((capacity * kv).div_ceil(2), storage)).collect(),
            values: (0..attention_layers).map(|_| buffer((capacity * kv).div_ceil(2), storage)).collect(),
            logits: buffer(c.vocab_size, storage),
            token_ids: buffer(max_batch, storage),
            readback: buffer(c.vocab_size, wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST),
            best_scratch,
            best_readback,
            matrices: uploaded.map(|w| w.matrices.clone()).unwrap_or_default(),
            stacks: uploaded.map(|w| w.stacks.clone()).unwrap_or_default(),
            vectors: HashMap::new(),
            in_flight: None,
            exact_attention: false,
            per_layer,
            delta,
            short_conv,
            experts,
            mamba2,
            recurrent,
            checkpoints: Checkpoints::new(recurrent_bytes as usize),
            constant_rows: HashMap::new(),
            rope_factors: HashMap::new(),
            encoder: Encoder::new(gpu),
            dispatches: 0,
            profile: None,
            max_batch,
            capacity,
            len: 0,
            memory: GpuMemory {
                weights: uploaded.map_or(0, |w| w.bytes),
                cache: cache_bytes,
                scratch: bytes - cache_bytes,
            },
        };
        state.upload_weights(gpu, model)?;
        Ok(state)
    }

    /// Whether the GPU runs every part of `model`, from its configuration and weight types
    /// alone (nothing is uploaded): the reason it does not, if not.
    pub fn check(gpu: &Gpu, model: &Model) -> Result<(), GpuError> {
        Self::check_parts(gpu, model.config(), model.weights())
    }

    /// [`GpuState::check`] from a configuration and weights (a header's, before any data).
    pub fn check_parts(
        gpu: &Gpu,
        c: &crate::model::Config,
        weights: &crate::model::Weights,
    ) -> Result<(), GpuError> {
        let missing = [
            (c.spec().family == Family::Encoder, "encoders (BERT)"),
            (
                c.delta_net.is_some_and(|shape| shape.head_dim > super::shaders::MAX_DELTA_HEAD),
                "DeltaNet heads over 256 wide",
            ),
            ((0..c.n_layer).any(|l| c.layer(l).head_dim > super::MAX_ATTENTION_HEAD), "heads over 256 wide"),
            // The f16 cache packs a head's values two to a word.
            ((0..c.n_layer).any(|l| c.layer(l).head_dim % 2 == 1), "heads of an odd width"),
        ];
        if let Some((_, what)) = missing.iter().find(|(needed, _)| *needed) {
            return Err(GpuError::Refused(what));
        }
        match weights.decode_matrices().find(|m| !gpu.matmul.iter().any(|(t, _)| *t == m.weight_type)) {
            Some(m) => Err(GpuError::Unsupported(m.weight_type)),
            None => Ok(()),
        }
    }

    /// Uploads every matrix and vector the forward pass reads (the token embedding stays on
    /// the CPU, which looks up one row per token), so that running out of device memory shows
    /// now and the first prompt's time is the model's own.
    fn upload_weights(&mut self, gpu: &Gpu, model: &Model) -> Result<(), GpuError> {
        let w = model.weights();
        let mut vectors: Vec<&[f32]> = w.output.iter().map(|head| head.norm.as_slice()).collect();
        vectors.extend(w.per_layer_input.as_ref().map(|input| input.proj_norm.as_slice()));
        vectors.extend(
            [&w.rope_freqs, &w.rope_factors_long, &w.rope_factors_short]
                .into_iter()
                .flatten()
                .map(Vec::as_slice),
        );
        for layer in &w.layers {
            vectors.push(&layer.attn_norm.weight);
            vectors.push(&layer.ffn_norm.weight);
            vectors.extend(layer.per_layer.as_ref().map(|p| p.post_norm.as_slice()));
            vectors.extend(
                [&layer.post_attn_norm, &layer.post_ffn_norm].into_iter().flatten().map(Vec::as_slice),
            );
            match &layer.mixer {
                Mixer::Attention(a) => vectors.extend(
                    [&a.bq, &a.bk, &a.bv, &a.bo, &a.q_norm, &a.k_norm, &a.sinks]
                        .into_iter()
                        .flatten()
                        .map(Vec::as_slice),
                ),
                Mixer::DeltaNet(delta) => {
                    vectors.extend([&delta.conv, &delta.norm].map(Vec::as_slice));
                    self.rates(gpu, delta);
                }
                Mixer::ShortConv(short) => vectors.push(&short.conv),
                Mixer::Mamba2(m) => {
                    vectors.extend([&m.conv, &m.norm].map(Vec::as_slice));
                    vectors.extend(m.conv_bias.as_deref());
                    self.ssm_heads(gpu, m);
                }
            }
        }
        // Expert stacks go up whole (in slices of whole experts), not expert by expert.
        let mut stacked = std::collections::HashSet::new();
        for layer in &w.layers {
            let Ffn::Experts(experts) = &layer.ffn else { continue };
            for views in [&experts.gate, &experts.up, &experts.down] {
                self.stack(gpu, model, views)?;
                stacked.extend(views.iter().map(|view| view.range.start));
            }
            vectors.extend(
                [&experts.router_bias, &experts.selection_bias].into_iter().flatten().map(Vec::as_slice),
            );
            if let Some(biases) = &experts.biases {
                vectors.extend([&biases.gate, &biases.up, &biases.down].map(Vec::as_slice));
            }
        }
        for matrix in model.decode_matrices().filter(|m| !stacked.contains(&m.range.start)) {
            self.matrix(gpu, model, matrix)?;
        }
        for vector in vectors {
            self.vector(gpu, vector);
        }
        gpu.fault().map_or(Ok(()), Err)
    }

    /// Positions in the cache.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Kernel dispatches in the last batch submitted (a decode step's, after one).
    pub fn dispatches(&self) -> usize {
        self.dispatches
    }

    /// How attention keeps its query and `Σ p·V` from the next submission on: as the CPU's
    /// [`AttentionPrecision`] says (exact: llama.cpp's one-pass CPU kernel, f16; fast: f32).
    pub fn set_attention_precision(&mut self, precision: AttentionPrecision) {
        self.exact_attention = precision == AttentionPrecision::Exact;
    }

    /// Times every dispatch from now on, each in a compute pass of its own with a timestamp at
    /// its start and end, and waits for the times after each batch (natively only): for a
    /// bench's separate run, never for the timed ones. Off again with `on` false.
    #[cfg(not(target_family = "wasm"))]
    pub fn profile_kernels(&mut self, gpu: &Gpu, on: bool) -> Result<(), GpuError> {
        if !on {
            self.profile = None;
            return Ok(());
        }
        if !gpu.facts.timestamps {
            return Err(GpuError::Failed(format!(
                "{} cannot time dispatches (no timestamp queries)",
                gpu.facts.name
            )));
        }
        let bytes = (2 * PROFILED_DISPATCHES * 8) as u64;
        let buffer = |usage| {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("kernel timestamps"),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        self.profile = Some(KernelProfile {
            queries: gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("kernel timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * PROFILED_DISPATCHES as u32,
            }),
            resolved: buffer(wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC),
            readback: buffer(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST),
            names: Vec::new(),
            totals: BTreeMap::new(),
        });
        Ok(())
    }

    /// Each kernel's dispatches and device time since profiling began, the longest first.
    pub fn kernel_times(&self) -> Vec<KernelTime> {
        let mut times: Vec<KernelTime> = self
            .profile
            .iter()
            .flat_map(|p| &p.totals)
            .map(|(kernel, &(dispatches, ns))| KernelTime {
                kernel: kernel.clone(),
                dispatches,
                ms: ns / 1e6,
            })
            .collect();
        times.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        times
    }

    /// Adds the batch just submitted's dispatch times to the profile's totals (waiting for them).
    #[cfg(not(target_family = "wasm"))]
    fn read_kernel_times(&mut self, gpu: &Gpu) -> Result<(), GpuError> {
        let Some(profile) = self.profile.as_mut() else { return Ok(()) };
        if profile.names.is_empty() {
            return Ok(());
        }
        let signal = super::map_for_reading(&profile.readback);
        gpu.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| GpuError::Failed(e.to_string()))?;
        signal.result().ok_or(GpuError::NotReady)??;
        let stamps: Vec<u64> = {
            let view = profile.readback.get_mapped_range(..).map_err(|e| GpuError::Failed(e.to_string()))?;
            view.chunks_exact(8)
                .take(2 * profile.names.len())
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                .collect()
        };
        profile.readback.unmap();
        let period = f64::from(gpu.queue.get_timestamp_period());
        for (name, pair) in profile.names.drain(..).zip(stamps.chunks_exact(2)) {
            let total = profile.totals.entry(name).or_insert((0, 0.0));
            total.0 += 1;
            total.1 += pair[1].saturating_sub(pair[0]) as f64 * period;
        }
        Ok(())
    }

    /// Device memory taken: weights, cache and activations.
    pub fn bytes(&self) -> u64 {
        self.memory.weights + self.memory.cache + self.memory.scratch
    }

    /// [`GpuState::bytes`] by what holds them.
    pub fn memory(&self) -> GpuMemory {
        self.memory
    }

    /// Forgets the positions from `len` on: the rollback behind branching from an earlier
    /// step (later tokens overwrite what was cached there). A recurrent state goes back to the
    /// newest checkpoint at or before `len`, or to zero. Returns the length kept: the caller
    /// replays the tokens from there to `len`.
    pub fn truncate(&mut self, gpu: &Gpu, len: usize) -> usize {
        if len >= self.len {
            return self.len;
        }
        if self.recurrent.is_empty() {
            self.len = len;
            return len;
        }
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        match self.checkpoints.back_to(len) {
            Some(checkpoint) => {
                copy_state(&mut encoder, &checkpoint.state, &self.recurrent);
                self.len = checkpoint.position;
            }
            None => {
                for layer in &self.recurrent {
                    encoder.clear_buffer(&layer.conv, 0, None);
                    encoder.clear_buffer(&layer.ssm, 0, None);
                }
                self.len = 0;
            }
        }
        gpu.queue.submit([encoder.finish()]);
        self.len
    }

    /// Saves the recurrent state at the current length, with `logits` (the last token's, or
    /// none: [`GpuState::attach_logits`] adds them when they come), unless there is nothing to
    /// save or it is saved already. The copy runs on the device after the work before it.
    pub fn checkpoint(&mut self, gpu: &Gpu, logits: &[f32]) -> Result<(), ModelError> {
        let (current, bytes) = (&self.recurrent, &mut self.memory.cache);
        self.checkpoints.save(self.len, logits, |reused| {
            let saved = reused.unwrap_or_else(|| {
                let copy: Vec<RecurrentLayer> = current.iter().map(|layer| layer.like(gpu)).collect();
                *bytes += copy.iter().map(RecurrentLayer::bytes).sum::<u64>();
                copy
            });
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            copy_state(&mut encoder, current, &saved);
            gpu.queue.submit([encoder.finish()]);
            Ok(saved)
        })
    }

    /// A checkpoint (without logits) if [`crate::model::CHECKPOINT_INTERVAL`] positions have
    /// passed since the last.
    pub fn checkpoint_if_due(&mut self, gpu: &Gpu) -> Result<(), ModelError> {
        if self.checkpoints.due(self.len) { self.checkpoint(gpu, &[]) } else { Ok(()) }
    }

    /// Gives the checkpoint at `len`, taken before its logits were read back, those logits.
    pub fn attach_logits(&mut self, len: usize, logits: &[f32]) -> Result<(), ModelError> {
        self.checkpoints.attach_logits(len, logits)
    }

    /// Goes back to the checkpoint at exactly `len` if it kept logits, and returns them: a
    /// rollback that needs no replay. `None` (and nothing changed) otherwise.
    pub fn restore_with_logits(&mut self, gpu: &Gpu, len: usize) -> Option<&[f32]> {
        if len > self.len {
            return None;
        }
        let checkpoint = self.checkpoints.with_logits_at(len)?;
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        copy_state(&mut encoder, &checkpoint.state, &self.recurrent);
        gpu.queue.submit([encoder.finish()]);
        self.len = len;
        Some(&checkpoint.logits)
    }

    /// Checkpoints held now, the most kept, and bytes each (all 0 without recurrent layers).
    pub fn checkpoints(&self) -> (usize, usize, usize) {
        let (held, most) = self.checkpoints.counts();
        (held, most, self.recurrent.iter().map(RecurrentLayer::bytes).sum::<u64>() as usize)
    }

    /// Bytes of logits the checkpoints hold (in CPU memory).
    pub fn checkpoint_logits_bytes(&self) -> usize {
        self.checkpoints.logits_bytes()
    }

    /// Runs `tokens` after the cached positions and returns the logits of the last one:
    /// [`GpuState::submit`] and [`GpuState::collect`], waiting for the GPU in between.
    #[cfg(not(target_family = "wasm"))]
    pub fn forward(&mut self, gpu: &Gpu, model: &Model, tokens: &[u32]) -> Result<Vec<f32>, GpuError> {
        self.submit(gpu, model, tokens, true)?;
        match self.collect(gpu)? {
            Some(ReadLogits::Every(logits)) => Ok(logits),
            _ => Err(GpuError::NotReady),
        }
    }

    /// Records `tokens` after the cached positions (in batches of at most `max_batch`) and
    /// submits them, with the last token's logits when `logits` is set. The cache counts them
    /// at once; [`GpuState::pending`] says when the GPU has done them.
    pub fn submit(&mut self, gpu: &Gpu, model: &Model, tokens: &[u32], logits: bool) -> Result<(), GpuError> {
        self.submit_reading(gpu, model, tokens, logits.then_some(LogitsRead::Every))
    }

    /// [`GpuState::submit`], the last token's logits read as `read` says (the best only where
    /// [`Gpu::reads_best_logits`]).
    pub fn submit_reading(
        &mut self,
        gpu: &Gpu,
        model: &Model,
        tokens: &[u32],
        read: Option<LogitsRead>,
    ) -> Result<(), GpuError> {
        self.submit_input(gpu, model, BatchInput::Tokens(tokens), None, read)
    }

    /// [`GpuState::submit`] for tokens or rows given whole (a picture's, in one batch when they
    /// attend both ways), reading back the last row's logits as `read` says (`None`: none).
    pub(crate) fn submit_input(
        &mut self,
        gpu: &Gpu,
        model: &Model,
        input: BatchInput,
        placement: Option<Placement>,
        read: Option<LogitsRead>,
    ) -> Result<(), GpuError> {
        let (vocab, row_width) = (model.config().vocab_size, model.config().input_width());
        let n = match input {
            BatchInput::Tokens(tokens) => tokens.len(),
            BatchInput::Rows { rows, .. } => rows.len() / row_width,
        };
        if n == 0 || self.len + n > self.capacity {
            return Err(GpuError::Shape(format!(
                "{n} rows after {} cached, with room for {}",
                self.len, self.capacity
            )));
        }
        let batches: Vec<BatchInput> = match input {
            BatchInput::Tokens(tokens) => {
                if let Some(&token) = tokens.iter().find(|&&t| t as usize >= vocab) {
                    return Err(GpuError::Shape(format!(
                        "token {token} is outside the vocabulary of {vocab}"
                    )));
                }
                tokens.chunks(self.max_batch).map(BatchInput::Tokens).collect()
            }
            BatchInput::Rows { causal: false, .. } if n > self.max_batch => {
                return Err(GpuError::Shape(format!(
                    "{n} rows attended both ways, more than a batch of {}",
                    self.max_batch
                )));
            }
            BatchInput::Rows { rows, causal } => rows
                .chunks(self.max_batch * row_width)
                .map(|rows| BatchInput::Rows { rows, causal })
                .collect(),
        };
        if let Some(fault) = gpu.fault() {
            return Err(fault);
        }
        let read = read.map(|read| if gpu.reads_best_logits() { read } else { LogitsRead::Every });
        // What a previous submission left mapped or waiting is dropped: the queue runs in order.
        self.discard_in_flight();
        let count = batches.len();
        let mut done = 0;
        for (i, batch) in batches.into_iter().enumerate() {
            let last = i + 1 == count;
            let n = match batch {
                BatchInput::Tokens(tokens) => tokens.len(),
                BatchInput::Rows { rows, .. } => rows.len() / row_width,
            };
            let placement = placement.map(|p| p.after(done));
            done += n;
            let mut backend = GpuBackend {
                gpu,
                model,
                placement,
                start: self.len,
                n,
                rows: n,
                first: 0,
                layer: 0,
                stored_layer: None,
                recording: Recording::default(),
                read: read.unwrap_or(LogitsRead::Every),
                q8_norm: None,
                state: self,
                error: None,
            };
            let rows = (last && read.is_some()).then_some(n - 1..n);
            let result = crate::model::forward_batch(&mut backend, model, batch, rows, Some(&mut Vec::new()));
            let recording = std::mem::take(&mut backend.recording);
            if let Some(error) = backend.error.take() {
                return Err(error);
            }
            result.map_err(|e| GpuError::Failed(e.to_string()))?;
            self.dispatches = recording.dispatches();
            let commands = self.encoder.encode(gpu, &recording, &mut self.profile);
            gpu.queue.submit([commands]);
            #[cfg(not(target_family = "wasm"))]
            self.read_kernel_times(gpu)?;
        }
        let signal = if let Some(read) = read {
            super::map_for_reading(self.readback_for(read))
        } else {
            let signal = Signal::default();
            let done = signal.clone();
            gpu.queue.on_submitted_work_done(move || done.complete(Ok(())));
            signal
        };
        self.in_flight = Some((signal, read));
        Ok(())
    }

    /// Where logits read as `read` are copied to be mapped.
    fn readback_for(&self, read: LogitsRead) -> &wgpu::Buffer {
        match read {
            LogitsRead::Every => &self.readback,
            LogitsRead::Best { .. } => &self.best_readback,
        }
    }

    /// Fires when the last submission is done (None when nothing was submitted since the last
    /// [`GpuState::collect`]).
    pub fn pending(&self) -> Option<Signal> {
        self.in_flight.as_ref().map(|(signal, _)| signal.clone())
    }

    /// The last submission's logits as it read them (None if it asked for none), once it is
    /// done: natively this waits for the GPU; in the browser it is [`GpuError::NotReady`] until
    /// [`GpuState::pending`] has fired.
    pub fn collect(&mut self, gpu: &Gpu) -> Result<Option<ReadLogits>, GpuError> {
        let Some((signal, read)) = self.in_flight.clone() else { return Ok(None) };
        #[cfg(not(target_family = "wasm"))]
        gpu.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| GpuError::Failed(e.to_string()))?;
        let result = signal.result().ok_or(GpuError::NotReady)?;
        self.in_flight = None;
        if let Some(fault) = gpu.fault() {
            return Err(fault);
        }
        result?;
        match read {
            None => Ok(None),
            Some(LogitsRead::Every) => {
                super::mapped_floats(&self.readback, self.readback.size() as usize / 4)
                    .map(|v| Some(ReadLogits::Every(v)))
            }
            Some(LogitsRead::Best { temperature }) => {
                let words =
                    super::mapped_words(&self.best_readback, super::shaders::BEST_GROUP_WORDS as usize)?;
                let vocab = self.readback.size() as usize / 4;
                super::best::decode(&words, vocab, temperature).map(|best| Some(ReadLogits::Best(best)))
            }
        }
    }

    /// Forgets a submission nobody collected, unmapping the readback so it can be reused.
    fn discard_in_flight(&mut self) {
        if let Some((signal, Some(read))) = self.in_flight.take()
            && signal.result().is_some_and(|r| r.is_ok())
        {
            self.readback_for(read).unmap();
        }
    }

    /// `width` copies of `value`: the weight of a norm without one.
    fn constant_row(&mut self, gpu: &Gpu, width: usize, value: f32) -> wgpu::Buffer {
        let bytes = &mut self.memory.scratch;
        self.constant_rows
            .entry((width, value.to_bits()))
            .or_insert_with(|| {
                *bytes += 4 * width as u64;
                upload(gpu, &super::f32_bytes(&vec![value; width]))
            })
            .clone()
    }

    /// A DeltaNet layer's gate rates on the device, `dt_bias` then `a` (keyed by `dt_bias`).
    fn rates(&mut self, gpu: &Gpu, weights: &DeltaNetWeights) -> wgpu::Buffer {
        let bytes = &mut self.memory.weights;
        self.vectors
            .entry(weights.dt_bias.as_ptr() as usize)
            .or_insert_with(|| {
                let rates = [weights.dt_bias.as_slice(), &weights.a].concat();
                *bytes += 4 * rates.len() as u64;
                upload(gpu, &super::f32_bytes(&rates))
            })
            .clone()
    }

    /// A Mamba-2 layer's per-head parameters on the device, `dt_bias`, `A` then `D` (keyed by
    /// `dt_bias`).
    fn ssm_heads(&mut self, gpu: &Gpu, weights: &Mamba2Weights) -> wgpu::Buffer {
        let bytes = &mut self.memory.weights;
        self.vectors
            .entry(weights.dt_bias.as_ptr() as usize)
            .or_insert_with(|| {
                let heads = [weights.dt_bias.as_slice(), &weights.a, &weights.d].concat();
                *bytes += 4 * heads.len() as u64;
                upload(gpu, &super::f32_bytes(&heads))
            })
            .clone()
    }

    /// A vector of the model (a norm weight, a bias) on the device, uploaded on first use.
    fn vector(&mut self, gpu: &Gpu, values: &[f32]) -> wgpu::Buffer {
        let key = values.as_ptr() as usize;
        let bytes = &mut self.memory.weights;
        self.vectors
            .entry(key)
            .or_insert_with(|| {
                *bytes += 4 * values.len() as u64;
                upload(gpu, &super::f32_bytes(values))
            })
            .clone()
    }

    /// A matrix's blocks on the device, uploaded on first use: in slices of whole rows where
    /// it is larger than one binding holds (a large vocabulary's embedding).
    fn matrix(&mut self, gpu: &Gpu, model: &Model, matrix: &Matrix) -> Result<Slices, GpuError> {
        // Builds the type's kernels with its first matrix (uploaded now, or streamed there
        // already): a type without one fails the load.
        gpu.matmul_pipelines(matrix.weight_type)?;
        if let Some(slices) = self.matrices.get(&matrix.range.start) {
            return Ok(slices.clone());
        }
        let bytes = matrix.bytes(model.file());
        let row_bytes = bytes.len() / matrix.rows.max(1);
        let slices = self.upload_in_slices(gpu, bytes, row_bytes, "a weight row")?;
        self.matrices.insert(matrix.range.start, slices.clone());
        Ok(slices)
    }

    /// [`upload_in_slices`], counted in this state's bytes.
    fn upload_in_slices(
        &mut self,
        gpu: &Gpu,
        bytes: &[u8],
        unit_bytes: usize,
        what: &'static str,
    ) -> Result<Slices, GpuError> {
        let (slices, uploaded) = upload_in_slices(gpu, bytes, unit_bytes, what)?;
        self.memory.weights += uploaded;
        Ok(slices)
    }

    /// A stack of experts' matrices (`views`, one per expert, consecutive in the file) on the
    /// device, uploaded on first use: in slices of whole experts where it is larger than one
    /// binding holds (gpt-oss-20b's are 200 to 400 MiB).
    fn stack(&mut self, gpu: &Gpu, model: &Model, views: &[Matrix]) -> Result<Slices, GpuError> {
        let Some(first) = views.first() else { return Ok(Vec::new()) };
        gpu.expert_matmul_pipelines(first.weight_type)?;
        if let Some(slices) = self.stacks.get(&first.range.start) {
            return Ok(slices.clone());
        }
        let expert_bytes = first.range.len();
        let consecutive = views.iter().enumerate().all(|(e, view)| {
            view.range.start == first.range.start + e * expert_bytes && view.range.len() == expert_bytes
        });
        let stack = model.file().get(first.range.start..first.range.start + views.len() * expert_bytes);
        let (true, Some(stack)) = (consecutive, stack) else {
            return Err(GpuError::Shape(format!(
                "{}: the experts are not one stack in the file",
                first.name
            )));
        };
        let slices = self.upload_in_slices(gpu, stack, expert_bytes, "one expert's matrix")?;
        self.stacks.insert(first.range.start, slices.clone());
        Ok(slices)
    }
}

/// What turns a recording into a command buffer: every dispatch's parameters, a slot each (room
/// for `param_slots`), and the bind groups the last recording used, by slot.
pub(super) struct Encoder {
    params: wgpu::Buffer,
    param_slots: usize,
    bind_groups: Vec<CachedBindGroup>,
}

impl Encoder {
    /// Drops the cached bind groups, and with them their hold on the buffers they bound.
    pub(super) fn forget_bind_groups(&mut self) {
        self.bind_groups.clear();
    }

    pub(super) fn new(gpu: &Gpu) -> Encoder {
        let params = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("dispatch parameters"),
            size: (PARAM_SLOT_WORDS * 4) as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Encoder { params, param_slots: 1, bind_groups: Vec::new() }
    }

    /// One batch's recorded commands as a command buffer: the dispatches' parameters written
    /// to the uniform buffer in one go (a slot of [`PARAM_SLOT_WORDS`] each), consecutive
    /// dispatches in one compute pass, and each dispatch's bind group the one it had last time
    /// at the same place in the batch where its pipeline and buffers are the same (a decode
    /// step repeats the last one's exactly, so it creates none).
    pub(super) fn encode(
        &mut self,
        gpu: &Gpu,
        recording: &Recording,
        profile_slot: &mut Option<KernelProfile>,
    ) -> wgpu::CommandBuffer {
        let (commands, params) = (&recording.commands, &recording.params);
        let slots = params.len() / PARAM_SLOT_WORDS;
        if slots > self.param_slots {
            self.param_slots = slots.next_power_of_two();
            self.params = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("dispatch parameters"),
                size: (self.param_slots * PARAM_SLOT_WORDS * 4) as u64,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            self.bind_groups.clear();
        }
        if !params.is_empty() {
            gpu.queue.write_buffer(&self.params, 0, &super::u32_bytes(params));
        }
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        let mut slot = 0;
        let mut commands = commands.iter().peekable();
        let mut profile = profile_slot.take();
        while let Some(command) = commands.next() {
            match command {
                Command::Copy { from, from_offset, to, to_offset, bytes } => {
                    encoder.copy_buffer_to_buffer(from, *from_offset, to, *to_offset, *bytes);
                }
                // Profiling: a pass per dispatch, timed at its start and end.
                Command::Dispatch { pipeline, buffers, groups } if profile.is_some() => {
                    let profile = profile.as_mut().expect("profiling");
                    let index = profile.names.len();
                    let timed = index < PROFILED_DISPATCHES;
                    if timed {
                        profile.names.push(gpu.kernel_name(pipeline));
                    }
                    let timestamp_writes = timed.then(|| wgpu::ComputePassTimestampWrites {
                        query_set: &profile.queries,
                        beginning_of_pass_write_index: Some(2 * index as u32),
                        end_of_pass_write_index: Some(2 * index as u32 + 1),
                    });
                    let group = self.bind_group(gpu, slot, pipeline, buffers);
                    let mut pass = encoder
                        .begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes });
                    pass.set_pipeline(pipeline);
                    pass.set_bind_group(0, &group, &[]);
                    pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
                    slot += 1;
                }
                Command::Dispatch { .. } => {
                    let mut pass = encoder.begin_compute_pass(&Default::default());
                    let mut next = Some(command);
                    while let Some(Command::Dispatch { pipeline, buffers, groups }) = next {
                        let group = self.bind_group(gpu, slot, pipeline, buffers);
                        pass.set_pipeline(pipeline);
                        pass.set_bind_group(0, &group, &[]);
                        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
                        slot += 1;
                        next = commands.next_if(|c| matches!(c, Command::Dispatch { .. }));
                    }
                }
            }
        }
        if let Some(profile) = &profile
            && !profile.names.is_empty()
        {
            let stamps = 2 * profile.names.len() as u32;
            encoder.resolve_query_set(&profile.queries, 0..stamps, &profile.resolved, 0);
            encoder.copy_buffer_to_buffer(&profile.resolved, 0, &profile.readback, 0, u64::from(stamps) * 8);
        }
        *profile_slot = profile;
        encoder.finish()
    }

    /// The bind group of the dispatch in parameter slot `slot`: the cached one if it binds the
    /// same pipeline and buffers, else a new one (cached in its place).
    fn bind_group(
        &mut self,
        gpu: &Gpu,
        slot: usize,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[wgpu::Buffer],
    ) -> wgpu::BindGroup {
        if let Some(cached) = self.bind_groups.get(slot)
            && cached.pipeline == *pipeline
            && cached.buffers == buffers
        {
            return cached.group.clone();
        }
        let mut entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() })
            .collect();
        entries.push(wgpu::BindGroupEntry {
            binding: buffers.len() as u32,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.params,
                offset: (slot * PARAM_SLOT_WORDS * 4) as u64,
                size: wgpu::BufferSize::new((PARAM_SLOT_WORDS * 4) as u64),
            }),
        });
        let group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        let cached =
            CachedBindGroup { pipeline: pipeline.clone(), buffers: buffers.to_vec(), group: group.clone() };
        if slot < self.bind_groups.len() {
            self.bind_groups[slot] = cached;
        } else {
            self.bind_groups.push(cached);
        }
        group
    }
}

/// Gemma 4's per-layer inputs on the device, `n_layer × width` per token: the projection
/// (`raw`), the finished inputs, the token's per-layer embedding (looked up on the CPU), and a
/// layer's hidden `width` per token.
struct PerLayerBuffers {
    raw: wgpu::Buffer,
    inputs: wgpu::Buffer,
    embedded: wgpu::Buffer,
    hidden: wgpu::Buffer,
}

/// Qwen3.5's DeltaNet activations, `max_batch` rows each: the projected queries, keys and
/// values (then, normalized, the delta rule's input), their convolution, the output gate, the
/// decays and betas, and the delta rule's output.
struct DeltaBuffers {
    qkv: wgpu::Buffer,
    convolved: wgpu::Buffer,
    z: wgpu::Buffer,
    alpha: wgpu::Buffer,
    beta: wgpu::Buffer,
    out: wgpu::Buffer,
}

/// LFM2's short convolution activations, `max_batch` rows each: the input projection's
/// `[b, c, x]`, and `b ⊙ x`, then `c ⊙ conv(b ⊙ x)`.
struct ShortConvBuffers {
    bcx: wgpu::Buffer,
    gated: wgpu::Buffer,
}

/// Mamba-2's activations, `max_batch` rows each: the input projection's `[z, xBC, dt]`, `xBC`
/// gathered, convolved, the scan's output `y`, and `y` gated and normalized.
struct Mamba2Buffers {
    zxbcdt: wgpu::Buffer,
    xbc: wgpu::Buffer,
    convolved: wgpu::Buffer,
    y: wgpu::Buffer,
    normed: wgpu::Buffer,
}

/// A mixture of experts' activations: the router's scores (`count` per token), each (token,
/// slot) pair's expert and weight (`used` per token), the pairs' gate and up projections
/// (`used × width` per token; the shared expert's after them), their outputs (`used × n_embd`
/// per token), and the shared expert's output.
struct ExpertBuffers {
    scores: wgpu::Buffer,
    ids: wgpu::Buffer,
    /// In a batch, the pairs listed expert by expert, and where each expert's run starts.
    order: wgpu::Buffer,
    offsets: wgpu::Buffer,
    weights: wgpu::Buffer,
    gate: wgpu::Buffer,
    up: wgpu::Buffer,
    out: wgpu::Buffer,
    shared: wgpu::Buffer,
}

/// One recurrent layer's state on the device: the convolution's last inputs (`[tap][channel]`)
/// and the delta rule's state (per value head `[key dim][value dim]`, the transpose of the
/// CPU's, so that the kernel's neighbouring threads read neighbouring words).
struct RecurrentLayer {
    conv: wgpu::Buffer,
    ssm: wgpu::Buffer,
}

impl RecurrentLayer {
    fn bytes(&self) -> u64 {
        self.conv.size() + self.ssm.size()
    }

    /// Another state of the same size (contents unset).
    fn like(&self, gpu: &Gpu) -> RecurrentLayer {
        let buffer = |of: &wgpu::Buffer| {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("recurrent checkpoint"),
                size: of.size(),
                usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        RecurrentLayer { conv: buffer(&self.conv), ssm: buffer(&self.ssm) }
    }
}

/// Records copies of every layer's state from `from` into `to`.
fn copy_state(encoder: &mut wgpu::CommandEncoder, from: &[RecurrentLayer], to: &[RecurrentLayer]) {
    for (from, to) in from.iter().zip(to) {
        encoder.copy_buffer_to_buffer(&from.conv, 0, &to.conv, 0, from.conv.size());
        encoder.copy_buffer_to_buffer(&from.ssm, 0, &to.ssm, 0, from.ssm.size());
    }
}

/// Words of a dispatch's parameters: a slot of 256 bytes, WebGPU's largest uniform offset
/// alignment.
const PARAM_SLOT_WORDS: usize = 64;

/// What a batch records, to be encoded once it is complete ([`GpuState::encode`]).
/// Dispatches a profile times per batch: 4,096 timestamps, the most a WebGPU query set holds (a
/// decode step has a few hundred dispatches).
const PROFILED_DISPATCHES: usize = 2048;

/// Where a profile's timestamps go, and what they add up to so far.
#[cfg_attr(target_family = "wasm", allow(dead_code, reason = "profiles are taken natively only"))]
pub(super) struct KernelProfile {
    queries: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    readback: wgpu::Buffer,
    /// The kernel of each timed dispatch of the batch being encoded.
    names: Vec<String>,
    /// Per kernel: dispatches and nanoseconds on the device.
    totals: BTreeMap<String, (usize, f64)>,
}

/// One kernel's share of a profile: how often it ran and its device time in all.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct KernelTime {
    pub kernel: String,
    pub dispatches: usize,
    pub ms: f64,
}

enum Command {
    Dispatch { pipeline: wgpu::ComputePipeline, buffers: Vec<wgpu::Buffer>, groups: [u32; 3] },
    Copy { from: wgpu::Buffer, from_offset: u64, to: wgpu::Buffer, to_offset: u64, bytes: u64 },
}

/// Commands recorded in order, with each dispatch's parameters (a slot of [`PARAM_SLOT_WORDS`]
/// after the other), for an [`Encoder`] to turn into one command buffer.
#[derive(Default)]
pub(super) struct Recording {
    commands: Vec<Command>,
    params: Vec<u32>,
}

impl Recording {
    /// One dispatch of `pipeline` over `buffers` and a uniform of `params`.
    pub(super) fn dispatch(
        &mut self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        params: &[u32],
        groups: [u32; 3],
    ) {
        debug_assert!(params.len() <= PARAM_SLOT_WORDS);
        let slot = self.params.len();
        self.params.extend_from_slice(params);
        self.params.resize(slot + PARAM_SLOT_WORDS, 0);
        let buffers = buffers.iter().map(|&b| b.clone()).collect();
        self.commands.push(Command::Dispatch { pipeline: pipeline.clone(), buffers, groups });
    }

    /// `x ← f(x, y)` over `n` elements with an element-wise pipeline (`shaders::elementwise`),
    /// its parameters `a`, `b` and `c`.
    pub(super) fn elementwise(
        &mut self,
        pipeline: &wgpu::ComputePipeline,
        y: &wgpu::Buffer,
        x: &wgpu::Buffer,
        n: usize,
        [a, b, c]: [u32; 3],
    ) {
        let [groups_x, groups_y] = groups_2d((n as u32).div_ceil(super::ELEMENTWISE_WORKGROUP));
        let params = [n as u32, groups_x, a, b, c, 0, 0, 0];
        self.dispatch(pipeline, &[y, x], &params, [groups_x, groups_y, 1]);
    }

    /// A copy of `bytes` between two buffers.
    pub(super) fn copy_bytes(
        &mut self,
        from: &wgpu::Buffer,
        from_offset: u64,
        to: &wgpu::Buffer,
        to_offset: u64,
        bytes: u64,
    ) {
        let (from, to) = (from.clone(), to.clone());
        self.commands.push(Command::Copy { from, from_offset, to, to_offset, bytes });
    }

    /// Dispatches recorded.
    pub(super) fn dispatches(&self) -> usize {
        self.params.len() / PARAM_SLOT_WORDS
    }

    /// Commands recorded: dispatches and copies.
    fn commands(&self) -> usize {
        self.commands.len()
    }
}

/// The bind group a dispatch had at its place in the last batch, and what it bound.
struct CachedBindGroup {
    pipeline: wgpu::ComputePipeline,
    buffers: Vec<wgpu::Buffer>,
    group: wgpu::BindGroup,
}

/// One batch on the GPU: the operations record commands and their parameters, which
/// [`GpuState::encode`] turns into one command buffer.
struct GpuBackend<'a> {
    gpu: &'a Gpu,
    model: &'a Model,
    state: &'a mut GpuState,
    recording: Recording,
    start: usize,
    /// Where the rows stand in the model's positions (`None`: at their cache slots).
    placement: Option<Placement>,
    n: usize,
    rows: usize,
    /// The batch row the first row held now was (past `keep_rows`).
    first: usize,
    layer: usize,
    /// The layer whose keys and values `qk_heads` has put in the cache already.
    stored_layer: Option<usize>,
    /// What the batch reads back of the logits it computes.
    read: LogitsRead,
    /// Where `q8_inputs` holds a norm's rows as 8 bits ([`GpuBackend::norm`]): the rows' buffer,
    /// width and [`q8_format`](super::shaders::q8_format), valid while the recording is this
    /// many commands long (the norm's dispatch, then the products that read them; anything else
    /// may have written the rows).
    q8_norm: Option<(wgpu::Buffer, usize, u32, usize)>,
    /// The first failure of an operation that cannot return one (reported after the batch).
    error: Option<GpuError>,
}

impl GpuBackend<'_> {
    fn buf(&self, buf: Buf) -> &wgpu::Buffer {
        &self.state.bufs[buf as usize]
    }

    fn width(&self, buf: Buf) -> usize {
        let c = self.model.config();
        let shape = c.layer(self.layer);
        match buf {
            Buf::X | Buf::Normed | Buf::BlockOut => c.n_embd,
            Buf::Q | Buf::Attn => c.n_head * shape.head_dim,
            Buf::QGate => 2 * c.n_head * shape.head_dim,
            Buf::K | Buf::V => shape.kv_dim(),
        }
    }

    /// Records one dispatch of `pipeline` over `buffers` and a uniform of `params`.
    fn dispatch(
        &mut self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        params: &[u32],
        groups: [u32; 3],
    ) {
        self.recording.dispatch(pipeline, buffers, params, groups);
    }

    /// Records a copy of `bytes` between two buffers.
    fn copy_bytes(
        &mut self,
        from: &wgpu::Buffer,
        from_offset: u64,
        to: &wgpu::Buffer,
        to_offset: u64,
        bytes: u64,
    ) {
        self.recording.copy_bytes(from, from_offset, to, to_offset, bytes);
    }

    fn vector(&mut self, values: &[f32]) -> wgpu::Buffer {
        self.state.vector(self.gpu, values)
    }

    fn matrix(&mut self, matrix: &Matrix) -> Result<Slices, GpuError> {
        self.state.matrix(self.gpu, self.model, matrix)
    }

    /// `out` ← `input · matrixᵀ` for the rows held, one dispatch per slice of the matrix.
    fn matmul(&mut self, matrix: &Matrix, input: &wgpu::Buffer, out: &wgpu::Buffer) -> Result<(), GpuError> {
        self.matmul_into(matrix, input, out, false)
    }

    /// As [`GpuBackend::matmul`], the products added to what `out` holds where `accumulate`.
    fn matmul_into(
        &mut self,
        matrix: &Matrix,
        input: &wgpu::Buffer,
        out: &wgpu::Buffer,
        accumulate: bool,
    ) -> Result<(), GpuError> {
        let kernel = self.gpu.matmul_kernel(matrix.weight_type, self.rows, true)?;
        let row_bytes = matrix.range.len() / matrix.rows.max(1);
        let input = &if kernel.q8 { self.q8_inputs(input, matrix) } else { input.clone() };
        for (first, rows, weights) in self.matrix(matrix)? {
            let groups = kernel.groups(rows);
            let params = [
                rows as u32,
                matrix.cols as u32,
                row_bytes as u32,
                groups[0],
                matrix.rows as u32,
                first as u32,
                self.rows as u32,
                0,
                0,
                0,
                0,
                0,
                u32::from(accumulate),
            ];
            self.dispatch(&kernel.pipeline, &[&weights, input, out], &params, groups);
        }
        Ok(())
    }

    /// `out` ← each (token, slot) pair's row times its expert's matrix (`views`, the stack's
    /// experts), for the pairs of the rows held (`ids` names each pair's expert): the input row
    /// is the token's where `per_token` (the gate and up projections), else the pair's own (the
    /// down projection). A decode step's pairs take a workgroup each (a dispatch per slice of
    /// the stack and 65,535 pairs); a batch's, a workgroup per expert and rows, which reads each
    /// expert's rows once for all its pairs (a dispatch per slice).
    fn expert_matmul(
        &mut self,
        views: &[Matrix],
        input: &wgpu::Buffer,
        out: &wgpu::Buffer,
        per_token: bool,
    ) -> Result<(), GpuError> {
        let Some(first) = views.first() else { return Ok(()) };
        let used = self.model.config().experts.map_or(1, |shape| shape.used);
        let [one_pair, grouped, gemm] = self.gpu.expert_matmul_pipelines(first.weight_type)?.clone();
        let Some(b) = &self.state.experts else { return Err(GpuError::Refused("experts")) };
        let (ids, order, offsets) = (b.ids.clone(), b.order.clone(), b.offsets.clone());
        let row_bytes = first.range.len() / first.rows.max(1);
        let pairs = self.rows * used;
        let [groups_x, groups_y] = groups_2d((first.rows as u32).div_ceil(super::shaders::ROWS_PER_GROUP));
        for (expert_first, experts, weights) in self.state.stack(self.gpu, self.model, views)? {
            let params = |pair_first: usize| {
                [
                    first.rows as u32,
                    first.cols as u32,
                    row_bytes as u32,
                    groups_x,
                    first.rows as u32,
                    0,
                    pairs as u32,
                    pair_first as u32,
                    first.range.len() as u32,
                    if per_token { used as u32 } else { 1 },
                    expert_first as u32,
                    (expert_first + experts) as u32,
                ]
            };
            if self.rows > 1 {
                // An expert has at most a pair per token: enough workgroups for every token's.
                let (pipeline, rows_per_group, pairs_per_group) = if self.rows < super::EXPERT_GEMM_MIN_PAIRS
                {
                    (&grouped, super::shaders::ROWS_PER_GROUP, super::shaders::TILE_TOKENS)
                } else {
                    (&gemm, super::shaders::GEMM_ROWS, super::shaders::GEMM_TOKENS)
                };
                let per_expert = self.rows.div_ceil(pairs_per_group as usize);
                let [x, y] = groups_2d((first.rows as u32).div_ceil(rows_per_group));
                let mut words = params(0);
                words[3] = x;
                words[6] = per_expert as u32;
                let buffers = [&weights, input, out, &order, &offsets];
                self.dispatch(pipeline, &buffers, &words, [x, y, (experts * per_expert) as u32]);
                continue;
            }
            for pair_first in (0..pairs).step_by(super::MAX_GROUPS_PER_DIMENSION as usize) {
                let z = (pairs - pair_first).min(super::MAX_GROUPS_PER_DIMENSION as usize);
                let buffers = [&weights, input, out, &ids];
                self.dispatch(&one_pair, &buffers, &params(pair_first), [groups_x, groups_y, z as u32]);
            }
        }
        Ok(())
    }

    /// `out ← W_down · (act(W_gate · input) ⊙ (W_up · input))` for the rows held (`out +=`
    /// where `accumulate`), the hidden rows in `gate` and `up`.
    fn gated_ffn(
        &mut self,
        ffn: &FeedForward,
        input: &wgpu::Buffer,
        (gate, up): (&wgpu::Buffer, &wgpu::Buffer),
        out: &wgpu::Buffer,
        accumulate: bool,
    ) {
        let Some(w_gate) = &ffn.w_gate else {
            return self.fail(GpuError::Refused("feed-forward blocks without a gate"));
        };
        match self.gated_matvec(w_gate, &ffn.w_up, input, gate) {
            Ok(true) => {
                if let Err(error) = self.matmul_into(&ffn.w_down, gate, out, accumulate) {
                    self.fail(error);
                }
                return;
            }
            Ok(false) => {}
            Err(error) => return self.fail(error),
        }
        for (matrix, target) in [(w_gate, gate), (&ffn.w_up, up)] {
            if let Err(error) = self.matmul(matrix, input, target) {
                self.fail(error);
            }
        }
        let pipeline = self.activation();
        self.elementwise(&pipeline, up, gate, self.rows * w_gate.rows, [0; 3]);
        if let Err(error) = self.matmul_into(&ffn.w_down, gate, out, accumulate) {
            self.fail(error);
        }
    }

    /// The dense feed-forward block of `Normed` into `out`: `BlockOut`, or added into `X`.
    fn dense_ffn(&mut self, layer: &FeedForward, out: Buf) {
        let (normed, gate, up, target) = (
            self.buf(Buf::Normed).clone(),
            self.state.gate.clone(),
            self.state.up.clone(),
            self.buf(out).clone(),
        );
        self.gated_ffn(layer, &normed, (&gate, &up), &target, out == Buf::X);
    }

    /// `gate ← act(W_gate · input) ⊙ (W_up · input)` in one dispatch where it can be: a
    /// decode step, both matrices of one type in one slice each, an activation with a fused
    /// kernel. False where it cannot (nothing recorded).
    fn gated_matvec(
        &mut self,
        w_gate: &Matrix,
        w_up: &Matrix,
        input: &wgpu::Buffer,
        gate: &wgpu::Buffer,
    ) -> Result<bool, GpuError> {
        let activation = self.model.config().activation;
        if self.rows != 1 || w_gate.weight_type != w_up.weight_type || w_gate.range.len() != w_up.range.len()
        {
            return Ok(false);
        }
        let Some((pipeline, q8)) = self.gpu.gated_matvec_pipeline(w_gate.weight_type, activation) else {
            return Ok(false);
        };
        let pipeline = pipeline.clone();
        let (gate_slices, up_slices) = (self.matrix(w_gate)?, self.matrix(w_up)?);
        let ([(_, rows, gate_weights)], [(_, _, up_weights)]) = (&gate_slices[..], &up_slices[..]) else {
            return Ok(false);
        };
        let groups = groups_2d((*rows as u32).div_ceil(super::shaders::ROWS_PER_GROUP));
        let row_bytes = w_gate.range.len() / w_gate.rows.max(1);
        let params = [*rows as u32, w_gate.cols as u32, row_bytes as u32, groups[0], *rows as u32, 0, 1];
        let input = &if q8 { self.q8_inputs(input, w_gate) } else { input.clone() };
        self.dispatch(
            &pipeline,
            &[gate_weights, input, up_weights, gate],
            &params,
            [groups[0], groups[1], 1],
        );
        Ok(true)
    }

    /// Three projections of one input (queries, keys, values) in one dispatch where they can
    /// be: a decode step, queries and keys of one type and values of that or another block
    /// type, one slice each. False where they cannot (nothing recorded).
    fn qkv_matvec(&mut self, outputs: [&(&Matrix, Buf); 3], input: &wgpu::Buffer) -> Result<bool, GpuError> {
        let [(q, _), (k, _), (v, _)] = outputs;
        let fits = k.weight_type == q.weight_type && k.cols == q.cols && v.cols == q.cols;
        if self.rows != 1 || !fits || self.gpu.facts().storage_buffers < 7 {
            return Ok(false);
        }
        let Some((pipeline, q8)) = self.gpu.qkv_matvec_pipeline(q.weight_type, v.weight_type) else {
            return Ok(false);
        };
        let mut weights = Vec::new();
        for (matrix, _) in outputs {
            let slices = self.matrix(matrix)?;
            let [(_, _, buffer)] = &slices[..] else { return Ok(false) };
            weights.push(buffer.clone());
        }
        let outs: Vec<wgpu::Buffer> = outputs.iter().map(|(_, buf)| self.buf(*buf).clone()).collect();
        let rows = q.rows + k.rows + v.rows;
        let groups = groups_2d((rows as u32).div_ceil(super::shaders::ROWS_PER_GROUP));
        let row_bytes = |m: &Matrix| (m.range.len() / m.rows.max(1)) as u32;
        let mut params = [0; 16];
        params[..7].copy_from_slice(&[
            rows as u32,
            q.cols as u32,
            row_bytes(q),
            groups[0],
            rows as u32,
            0,
            1,
        ]);
        params[13] = q.rows as u32;
        params[14] = (q.rows + k.rows) as u32;
        params[15] = row_bytes(v);
        let input = &if q8 { self.q8_inputs(input, q) } else { input.clone() };
        let buffers = [&weights[0], input, &weights[1], &weights[2], &outs[0], &outs[1], &outs[2]];
        self.dispatch(&pipeline, &buffers, &params, [groups[0], groups[1], 1]);
        Ok(true)
    }

    /// Records `input`'s rows held quantized to 8 bits for a product with `matrix` (its
    /// columns wide, whole blocks of its [`q8_format`](super::shaders::q8_format)) into
    /// `q8_inputs`, which it returns.
    fn q8_inputs(&mut self, input: &wgpu::Buffer, matrix: &Matrix) -> wgpu::Buffer {
        let (cols, format) = (matrix.cols, super::shaders::q8_format(matrix.weight_type));
        let commands = self.recording.commands();
        if let Some((rows, width, norm_format, at)) = &mut self.q8_norm
            && rows == input
            && (*width, *norm_format) == (cols, format)
            && *at == commands
        {
            // The norm quantized them: valid past the product's own dispatch too, which reads them.
            *at += 1;
            return self.state.q8_inputs.clone();
        }
        self.q8_norm = None;
        let blocks = (self.rows * cols / super::shaders::q8_block_len(format)) as u32;
        let [x, y] = groups_2d(blocks.div_ceil(64));
        let (pipeline, out) = (self.gpu.quantize_q8.clone(), self.state.q8_inputs.clone());
        self.dispatch(&pipeline, &[input, &out], &[blocks, x, format, 0], [x, y, 1]);
        out
    }

    /// The gated activation's pipeline: `x ← act(x) ⊙ y`.
    fn activation(&self) -> wgpu::ComputePipeline {
        match self.model.config().activation {
            Activation::GeGlu => self.gpu.geglu.clone(),
            Activation::SwiGlu | Activation::Gelu => self.gpu.swiglu.clone(),
            Activation::SwiGluOai => self.gpu.swiglu_oai.clone(),
        }
    }

    /// Each (token, slot) pair's row of `width` in `x` plus its expert's row of `bias`.
    fn expert_bias(&mut self, bias: &[f32], x: &wgpu::Buffer, width: usize) {
        let Some(ids) = self.state.experts.as_ref().map(|b| b.ids.clone()) else { return };
        let used = self.model.config().experts.map_or(1, |shape| shape.used);
        let (bias, pipeline) = (self.vector(bias), self.gpu.expert_bias.clone());
        let n = self.rows * used * width;
        self.dispatch_threads(&pipeline, &[&ids, &bias, x], [n as u32, width as u32, 0], n);
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

    /// RMSNorm of `floats` values of `source` in rows of `width`, times `weight`, into
    /// `target` (through `temp`, a model row per token, when they are one buffer: a kernel
    /// cannot bind a buffer twice).
    fn rms_norm(
        &mut self,
        source: &wgpu::Buffer,
        target: &wgpu::Buffer,
        weight: &wgpu::Buffer,
        width: usize,
        floats: usize,
    ) {
        let mut source = source.clone();
        if &source == target {
            let temp = self.state.temp.clone();
            self.copy(&source, 0, &temp, 0, floats);
            source = temp;
        }
        let eps = self.model.config().rms_eps;
        self.rms_norm_rows(&source, target, weight, [floats / width, width, 1, width, 0], eps);
    }

    /// RMSNorm of `rows` rows of `width`, `per_item` to each item of `stride` floats, the
    /// weights of an item's `k`th row from `k · weight_stride`.
    fn rms_norm_rows(
        &mut self,
        source: &wgpu::Buffer,
        target: &wgpu::Buffer,
        weight: &wgpu::Buffer,
        [rows, width, per_item, stride, weight_stride]: [usize; 5],
        eps: f32,
    ) {
        let [groups_x, groups_y] = groups_2d(rows as u32);
        let pipeline = self.gpu.rms_norm.clone();
        let params = [
            rows as u32,
            width as u32,
            eps.to_bits(),
            groups_x,
            per_item as u32,
            stride as u32,
            weight_stride as u32,
        ];
        self.dispatch(&pipeline, &[source, weight, target], &params, [groups_x, groups_y, 1]);
    }

    /// A dispatch of one of DeltaNet's per-element kernels: `threads` threads in workgroups
    /// of 256, three words of parameters and then the workgroups in x.
    fn dispatch_threads(
        &mut self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        [a, b, c]: [u32; 3],
        threads: usize,
    ) {
        let [groups_x, groups_y] = groups_2d((threads as u32).div_ceil(super::ELEMENTWISE_WORKGROUP));
        self.dispatch(pipeline, buffers, &[a, b, c, groups_x], [groups_x, groups_y, 1]);
    }

    fn copy(
        &mut self,
        from: &wgpu::Buffer,
        from_offset: usize,
        to: &wgpu::Buffer,
        to_offset: usize,
        floats: usize,
    ) {
        if floats > 0 {
            self.copy_bytes(from, (4 * from_offset) as u64, to, (4 * to_offset) as u64, (4 * floats) as u64);
        }
    }

    /// Gated attention's gather (`Buf::Q` from each head's query half) or gate (`Buf::Attn`
    /// times the sigmoid of each head's gate half), both reading `Buf::QGate`.
    fn gate(&mut self, target: Buf, pipeline: wgpu::ComputePipeline) {
        let hd = self.model.config().layer(self.layer).head_dim;
        let n = self.rows * self.width(target);
        let (both, x) = (self.buf(Buf::QGate).clone(), self.buf(target).clone());
        self.elementwise(&pipeline, &both, &x, n, [hd as u32, 0, 0]);
    }

    /// RoPE's per-pair factors under M-RoPE (the model's, or ones) with 0 at the pairs of the
    /// fourth stream (left unrotated), then each pair's stream (the shader's grid rows read it),
    /// uploaded once per starting point.
    fn mrope_factors(&mut self, factors: Option<&[f32]>, rope_dims: usize) -> wgpu::Buffer {
        let key = factors.map_or(0, |f| f.as_ptr() as usize);
        let (gpu, streams) = (self.gpu, &self.model.config().rope_streams);
        let bytes = &mut self.state.memory.weights;
        self.state
            .rope_factors
            .entry(key)
            .or_insert_with(|| {
                let half = rope_dims / 2;
                let mut table = factors.map_or_else(|| vec![1.0; half], |f| f[..half].to_vec());
                for (factor, &stream) in table.iter_mut().zip(streams) {
                    if stream == 3 {
                        *factor = 0.0;
                    }
                }
                table.extend((0..half).map(|pair| f32::from(streams.get(pair).copied().unwrap_or(0))));
                *bytes += 4 * table.len() as u64;
                upload(gpu, &super::f32_bytes(&table))
            })
            .clone()
    }

    /// The cache's keys and values of layer `kv_layer`: the device keeps a buffer of each per
    /// layer that keeps keys and values, in layer order.
    fn cache(&self, kv_layer: usize) -> (wgpu::Buffer, wgpu::Buffer) {
        let c = self.model.config();
        let index = (0..kv_layer).filter(|&j| c.keeps_kv(j)).count();
        (self.state.keys[index].clone(), self.state.values[index].clone())
    }

    /// RoPE's factors buffer and uniform words for `heads` heads of the current layer at the
    /// batch's positions (`rope` none: no pair rotates).
    fn rope_words(
        &mut self,
        rope: Option<&LayerRope>,
        heads: usize,
        groups_x: u32,
    ) -> (wgpu::Buffer, [u32; 16]) {
        let head_dim = self.model.config().layer(self.layer).head_dim;
        let Some(rope) = rope else {
            let none = RopeParams::none(heads, head_dim);
            let factors = self.state.constant_row(self.gpu, 1, 1.0);
            return (factors, super::rope_params(&none, self.rows, false, groups_x));
        };
        let mrope = !rope.streams.is_empty();
        let factor_buffer = match rope.factors {
            _ if mrope => self.mrope_factors(rope.factors, rope.dims),
            Some(f) => self.vector(f),
            None => self.state.constant_row(self.gpu, 1, 1.0),
        };
        let factors = rope.factors.or(mrope.then_some(&[]));
        let (start, grid) = match self.placement {
            None => (self.start, None),
            Some(Placement::Text { start }) => (start + self.first, None),
            Some(Placement::Grid { start, width, first_row }) => {
                (start, Some([width, first_row + self.first]))
            }
        };
        let params = RopeParams {
            heads,
            head_dim,
            rope_dims: rope.dims,
            start,
            neox: rope.style == RopeStyle::Neox,
            base: rope.rope.base,
            freq_scale: rope.rope.freq_scale,
            attn_factor: rope.rope.attn_factor,
            yarn_ramp: rope.rope.yarn.map(|yarn| yarn.ramp(rope.dims, rope.rope.base)),
            grid,
        };
        (factor_buffer, super::rope_params(&params, self.rows, factors.is_some(), groups_x))
    }

    /// The tokens' embeddings looked up on the device, where the table's bytes are held there
    /// only (a model streamed to the GPU): a dispatch per slice of the table, each writing the
    /// rows it holds.
    fn embed_on_device(&mut self, tokens: &[u32]) -> Result<(), ModelError> {
        let (c, table) = (self.model.config(), &self.model.weights().token_embd);
        let slices =
            self.state.matrices.get(&table.range.start).cloned().ok_or_else(|| no_buffers("token_embd"))?;
        let pipeline = match self.gpu.get_rows_pipeline(table.weight_type) {
            Ok(pipeline) => pipeline.clone(),
            Err(error) => {
                self.fail(error);
                return Ok(());
            }
        };
        let ids = self.state.token_ids.clone();
        let id_bytes: Vec<u8> = tokens.iter().flat_map(|id| id.to_le_bytes()).collect();
        self.gpu.queue.write_buffer(&ids, 0, &id_bytes);
        let scale = c.embedding_scale.unwrap_or(1.0);
        let row_bytes = table.range.len() / table.rows.max(1);
        let x = self.buf(Buf::X).clone();
        let [groups_x, groups_y] = groups_2d(tokens.len() as u32);
        for (first, rows, weights) in slices {
            let params = [
                rows as u32,
                table.cols as u32,
                row_bytes as u32,
                groups_x,
                table.rows as u32,
                first as u32,
                tokens.len() as u32,
                scale.to_bits(),
            ];
            self.dispatch(&pipeline, &[&weights, &ids, &x], &params, [groups_x, groups_y, 1]);
        }
        Ok(())
    }

    fn fail(&mut self, error: GpuError) {
        self.error.get_or_insert(error);
    }
}

/// A weight on the device in slices of whole units (a matrix's rows, a stack's experts), each
/// within one binding: `(first unit, units, buffer)` each.
pub(super) type Slices = Vec<(usize, usize, wgpu::Buffer)>;

/// `bytes` on the device, in slices of whole units of `unit_bytes` (a matrix's rows, a stack's
/// experts), each within one binding and 32-bit byte offsets: `(first unit, units, buffer)`
/// each, and the bytes uploaded. A unit larger than a binding is `TooLarge`, named `what`.
pub(super) fn upload_in_slices(
    gpu: &Gpu,
    bytes: &[u8],
    unit_bytes: usize,
    what: &'static str,
) -> Result<(Slices, u64), GpuError> {
    let mut slices = Vec::new();
    let mut uploaded = 0;
    for (first, count) in plan_slices(gpu, bytes.len(), unit_bytes, what)? {
        let mut padded = bytes[first * unit_bytes..(first + count) * unit_bytes].to_vec();
        padded.resize(padded.len().div_ceil(4) * 4, 0);
        uploaded += padded.len() as u64;
        slices.push((first, count, upload(gpu, &padded)));
    }
    Ok((slices, uploaded))
}

/// How [`upload_in_slices`] cuts `bytes` bytes of units of `unit_bytes`: `(first unit, units)`
/// per slice, each as large as one binding (and a 32-bit byte offset) allows.
pub(super) fn plan_slices(
    gpu: &Gpu,
    bytes: usize,
    unit_bytes: usize,
    what: &'static str,
) -> Result<Vec<(usize, usize)>, GpuError> {
    let units = bytes / unit_bytes.max(1);
    let limit = gpu.facts.max_binding.min(gpu.facts.max_buffer).min(u64::from(u32::MAX)) as usize;
    let per_slice = (limit / unit_bytes.max(1)).min(units);
    if per_slice == 0 {
        return Err(GpuError::TooLarge { what, bytes: unit_bytes as u64, limit: limit as u64 });
    }
    Ok((0..units).step_by(per_slice).map(|first| (first, per_slice.min(units - first))).collect())
}

fn upload(gpu: &Gpu, bytes: &[u8]) -> wgpu::Buffer {
    gpu.buffer_with(bytes, wgpu::BufferUsages::STORAGE)
}

/// An operation whose buffers this state lacks fails the batch (never reached:
/// [`GpuState::new`] makes them for every model that has the part).
fn no_buffers(what: &str) -> ModelError {
    ModelError::BadKey { key: what.into(), reason: "has no buffers on this GPU state".into() }
}

impl Backend for GpuBackend<'_> {
    fn rows(&self) -> usize {
        self.rows
    }

    fn capacity(&self) -> usize {
        self.state.capacity
    }

    fn layer(&mut self, l: usize) {
        self.layer = l;
    }

    fn embed(&mut self, tokens: &[u32]) -> Result<(), ModelError> {
        let (c, w, file) = (self.model.config(), self.model.weights(), self.model.file());
        if file.get(w.token_embd.range.clone()).is_none() {
            return self.embed_on_device(tokens);
        }
        let mut x = vec![0.0f32; tokens.len() * c.n_embd];
        crate::model::embeddings(c, w, file, tokens, &mut x)?;
        self.gpu.queue.write_buffer(self.buf(Buf::X), 0, &super::f32_bytes(&x));
        Ok(())
    }

    fn embed_rows(&mut self, rows: &[f32]) -> Result<(), ModelError> {
        self.gpu.queue.write_buffer(self.buf(Buf::X), 0, &super::f32_bytes(rows));
        Ok(())
    }

    /// A buffer of its own for each call: a queued write would land before the batch's first
    /// command, not after the layer it follows.
    fn add_rows(&mut self, rows: &[f32]) -> Result<(), ModelError> {
        let (y, x, pipeline) =
            (upload(self.gpu, &super::f32_bytes(rows)), self.buf(Buf::X).clone(), self.gpu.add.clone());
        self.elementwise(&pipeline, &y, &x, rows.len(), [0; 3]);
        Ok(())
    }

    /// Encoders are refused by [`GpuBackend::check`]; this keeps an unchecked one from running.
    fn encoder_input(&mut self, _: &EncoderInput) -> Result<(), ModelError> {
        self.fail(GpuError::Refused("encoders (BERT)"));
        Ok(())
    }

    /// `(norm(model_proj · x / √d) + embedding · √width) / √2` per token and layer, the token's
    /// per-layer embedding looked up on the CPU (one row of a large table per token).
    fn per_layer_inputs(&mut self, tokens: &[u32]) -> Result<(), ModelError> {
        let (c, w, file) = (self.model.config(), self.model.weights(), self.model.file());
        let (Some(input), Some(buffers)) = (&w.per_layer_input, &self.state.per_layer) else {
            return Ok(());
        };
        let (raw, inputs, embedded) = (buffers.raw.clone(), buffers.inputs.clone(), buffers.embedded.clone());
        let width = input.proj_norm.len();
        let all = width * c.n_layer;
        let floats = tokens.len() * all;
        let mut rows = vec![0.0f32; floats];
        for (&token, row) in tokens.iter().zip(rows.chunks_exact_mut(all)) {
            let bytes = input.token_embd.row_bytes(file, token as usize);
            crate::tensor::dequantize_row(input.token_embd.weight_type, bytes, row)?;
        }
        self.gpu.queue.write_buffer(&embedded, 0, &super::f32_bytes(&rows));
        let x = self.buf(Buf::X).clone();
        if let Err(error) = self.matmul(&input.model_proj, &x, &raw) {
            self.fail(error);
        }
        let scale = self.state.constant_row(self.gpu, 1, 1.0 / (c.n_embd as f32).sqrt());
        let pipeline = self.gpu.scale.clone();
        self.elementwise(&pipeline, &scale, &raw, floats, [0; 3]);
        let norm = self.vector(&input.proj_norm);
        self.rms_norm(&raw, &inputs, &norm, width, floats);
        let (embedding_scale, input_scale) = ((width as f32).sqrt(), 1.0 / 2f32.sqrt());
        let pipeline = self.gpu.mix_embedding.clone();
        let scales = [embedding_scale.to_bits(), input_scale.to_bits(), 0];
        self.elementwise(&pipeline, &embedded, &inputs, floats, scales);
        Ok(())
    }

    fn norm(&mut self, out: Buf, input: Buf, weight: &[f32]) {
        let floats = self.rows * self.width(input);
        let weight_buffer = self.vector(weight);
        let (source, target) = (self.buf(input).clone(), self.buf(out).clone());
        let width = weight.len();
        // Rows the products will read as 8 bits: quantized as they are stored.
        let format = self.state.q8_norm_format.filter(|&format| {
            self.gpu.integer_dots() && width.is_multiple_of(super::shaders::q8_block_len(format))
        });
        let Some(format) = format.filter(|_| source != target) else {
            return self.rms_norm(&source, &target, &weight_buffer, width, floats);
        };
        let rows = floats / width;
        let [groups_x, groups_y] = groups_2d(rows as u32);
        let eps = self.model.config().rms_eps.to_bits();
        let params = [rows as u32, width as u32, eps, groups_x, 1, width as u32, 0, format];
        let (pipeline, q8_inputs) = (self.gpu.rms_norm_q8.clone(), self.state.q8_inputs.clone());
        self.dispatch(
            &pipeline,
            &[&source, &weight_buffer, &target, &q8_inputs],
            &params,
            [groups_x, groups_y, 1],
        );
        self.q8_norm = Some((target, width, format, self.recording.commands()));
    }

    /// As [`Backend::encoder_input`]: only encoders use it.
    fn layer_norm(&mut self, _: Buf, _: &Norm) {
        self.fail(GpuError::Refused("encoders (BERT)"));
    }

    fn norm_unweighted(&mut self, buf: Buf, width: usize) {
        let floats = self.rows * self.width(buf);
        let ones = self.state.constant_row(self.gpu, width, 1.0);
        let target = self.buf(buf).clone();
        self.rms_norm(&target, &target, &ones, width, floats);
    }

    fn add(&mut self, to: Buf, from: Buf) {
        let n = self.rows * self.width(to);
        let (y, x, pipeline) = (self.buf(from).clone(), self.buf(to).clone(), self.gpu.add.clone());
        self.elementwise(&pipeline, &y, &x, n, [0; 3]);
    }

    fn add_bias(&mut self, buf: Buf, bias: &[f32]) {
        let n = self.rows * self.width(buf);
        let (y, x, pipeline) = (self.vector(bias), self.buf(buf).clone(), self.gpu.add_bias.clone());
        self.elementwise(&pipeline, &y, &x, n, [bias.len() as u32, 0, 0]);
    }

    fn scale(&mut self, buf: Buf, factor: f32) {
        let n = self.rows * self.width(buf);
        let (x, pipeline) = (self.buf(buf).clone(), self.gpu.scale.clone());
        let factor = self.state.constant_row(self.gpu, 1, factor);
        self.elementwise(&pipeline, &factor, &x, n, [0; 3]);
    }

    fn copy(&mut self, to: Buf, from: Buf) {
        let floats = self.rows * self.width(from);
        let (from, to) = (self.buf(from).clone(), self.buf(to).clone());
        GpuBackend::copy(self, &from, 0, &to, 0, floats);
    }

    fn project<const M: usize>(
        &mut self,
        input: Buf,
        _which: Input,
        outputs: [(&Matrix, Buf); M],
    ) -> Result<(), ModelError> {
        let source = self.buf(input).clone();
        if let [q, k, v] = &outputs[..] {
            match self.qkv_matvec([q, k, v], &source) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(error) => {
                    self.fail(error);
                    return Ok(());
                }
            }
        }
        for (matrix, out) in outputs {
            let target = self.buf(out).clone();
            if let Err(error) = self.matmul(matrix, &source, &target) {
                self.fail(error);
            }
        }
        Ok(())
    }

    /// The projection's kernels add into `X` themselves (see `shaders::store`).
    fn project_residual(&mut self, input: Buf, _which: Input, matrix: &Matrix) -> Result<(), ModelError> {
        let (source, target) = (self.buf(input).clone(), self.buf(Buf::X).clone());
        if let Err(error) = self.matmul_into(matrix, &source, &target, true) {
            self.fail(error);
        }
        Ok(())
    }

    fn split_gate(&mut self) {
        self.gate(Buf::Q, self.gpu.split_gate.clone());
    }

    fn apply_gate(&mut self) {
        self.gate(Buf::Attn, self.gpu.apply_gate.clone());
    }

    fn rope(&mut self, keys: bool, rope: &LayerRope) {
        let c = self.model.config();
        let shape = c.layer(self.layer);
        for (buf, heads) in [(Buf::Q, c.n_head), (Buf::K, shape.n_head_kv)] {
            if buf == Buf::K && !keys {
                continue;
            }
            let threads = (self.rows * heads * (rope.dims / 2)) as u32;
            let [groups_x, groups_y] = groups_2d(threads.div_ceil(super::ELEMENTWISE_WORKGROUP));
            let (factors, words) = self.rope_words(Some(rope), heads, groups_x);
            let (x, pipeline) = (self.buf(buf).clone(), self.gpu.rope.clone());
            self.dispatch(&pipeline, &[&factors, &x], &words, [groups_x, groups_y, 1]);
        }
    }

    /// One dispatch for both norms and RoPE where the heads' norms are per head (see
    /// `shaders::qk_heads`); the steps one by one where they are not, or where keys that are
    /// not the layer's own would be normalized but not rotated.
    fn qk_heads(&mut self, heads: &QkHeads) {
        let c = self.model.config();
        let shape = c.layer(self.layer);
        let per_head = |weight: Option<&[f32]>| weight.is_none_or(|w| w.len() == shape.head_dim);
        let Some(pipeline) = self.gpu.qk_heads.clone() else { return heads.one_by_one(self) };
        if !per_head(heads.q_norm) || !per_head(heads.k_norm) || (heads.k_norm.is_some() && !heads.keys) {
            return heads.one_by_one(self);
        }
        // The layer's own keys and values go into the cache here, finished (`attend` then
        // skips its packing dispatch).
        let store = heads.keys;
        let q_heads = if heads.q_norm.is_some() || heads.rope.is_some() { c.n_head } else { 0 };
        let k_heads = if store || heads.k_norm.is_some() || (heads.rope.is_some() && heads.keys) {
            shape.n_head_kv
        } else {
            0
        };
        let v_heads = if store { k_heads } else { 0 };
        let items = (self.rows * (q_heads + k_heads + v_heads)) as u32;
        if items == 0 {
            return;
        }
        let [groups_x, groups_y] = groups_2d(items);
        let (factors, rope_words) = self.rope_words(heads.rope, q_heads, groups_x);
        let mut words = rope_words.to_vec();
        words.extend([
            k_heads as u32,
            c.rms_eps.to_bits(),
            u32::from(heads.q_norm.is_some()),
            u32::from(heads.k_norm.is_some()),
            u32::from(store),
            (self.start * shape.kv_dim() / 2) as u32,
        ]);
        let one = self.state.constant_row(self.gpu, 1, 1.0);
        let [q_weight, k_weight] =
            [heads.q_norm, heads.k_norm].map(|w| w.map_or_else(|| one.clone(), |w| self.vector(w)));
        let [q, k, v] = [Buf::Q, Buf::K, Buf::V].map(|buf| self.buf(buf).clone());
        // Without storing, the cache's bindings are placeholders (a shared layer keeps none),
        // two buffers bound nowhere else in the dispatch: writable bindings may not alias.
        let (keys, values) = match store {
            true => self.cache(self.layer),
            false => (self.state.constant_row(self.gpu, 1, 0.0), self.state.constant_row(self.gpu, 2, 0.0)),
        };
        let buffers = [&factors, &q_weight, &k_weight, &v, &q, &k, &keys, &values];
        self.dispatch(&pipeline, &buffers, &words, [groups_x, groups_y, 1]);
        if store {
            self.stored_layer = Some(self.layer);
        }
    }

    fn attend(&mut self, store: bool, attention: &LayerAttention) {
        let (c, l) = (self.model.config(), self.layer);
        let shape = c.layer(l);
        let kvd = shape.kv_dim();
        let (keys, values) = self.cache(attention.kv_layer);
        if store && self.stored_layer.take() != Some(l) {
            let (k, v, pack) =
                (self.buf(Buf::K).clone(), self.buf(Buf::V).clone(), self.gpu.pack_f16.clone());
            let (pairs, to) = (self.rows * kvd / 2, self.start * kvd / 2);
            self.dispatch_threads(&pack, &[&k, &v, &keys, &values], [pairs as u32, 0, to as u32], pairs);
        }
        let params = AttentionParams {
            n_head: c.n_head,
            n_kv: shape.n_head_kv,
            head_dim: shape.head_dim,
            start: self.start,
            window: attention.window.unwrap_or(0),
            scale: attention.score_scale,
            softcap: attention.softcap.unwrap_or(0.0),
            causal: attention.causal,
            exact: self.state.exact_attention,
        };
        let plan = self.gpu.attention_plan(self.rows, &params, attention.sinks.is_some(), true);
        let sinks = match attention.sinks {
            Some(sinks) => self.vector(sinks),
            None => self.state.constant_row(self.gpu, 1, 0.0),
        };
        let (q, out) = (self.buf(Buf::Q).clone(), self.buf(Buf::Attn).clone());
        // No spans: a model's queries see what their window and causality leave them.
        let spans = self.state.constant_row(self.gpu, 1, 0.0);
        let (pipeline, words, groups) = plan.main;
        let pipeline = pipeline.clone();
        match plan.merge {
            None => self.dispatch(&pipeline, &[&q, &keys, &values, &sinks, &spans, &out], &words, groups),
            Some((merge, merge_words, merge_groups)) => {
                let (merge, parts) = (merge.clone(), self.state.attention_parts.clone());
                self.dispatch(&pipeline, &[&q, &keys, &values, &sinks, &spans, &parts], &words, groups);
                self.dispatch(&merge, &[&parts, &sinks, &out], &merge_words, merge_groups);
            }
        }
    }

    /// `model::cpu`'s short convolution, each step a kernel: the input projection, `b ⊙ x`, the
    /// convolution over this layer's state, `c ⊙` it, the output projection.
    fn short_conv(&mut self, weights: &ShortConvWeights) -> Result<(), ModelError> {
        let (c, l, n) = (self.model.config(), self.layer, self.rows);
        let (Some(shape), Some(b)) = (c.short_conv, &self.state.short_conv) else {
            return Err(no_buffers("short convolution layers"));
        };
        let (bcx, gated) = (b.bcx.clone(), b.gated.clone());
        let slot = (0..l).filter(|&j| c.is_recurrent(j)).count();
        let conv_state = self.state.recurrent[slot].conv.clone();
        let d = c.n_embd;
        let (normed, out) = (self.buf(Buf::Normed).clone(), self.buf(Buf::BlockOut).clone());
        if let Err(error) = self.matmul(&weights.w_in, &normed, &bcx) {
            self.fail(error);
        }
        let (gate_in, gate_out) = (self.gpu.short_conv_in.clone(), self.gpu.short_conv_out.clone());
        self.elementwise(&gate_in, &bcx, &gated, n * d, [d as u32, 0, 0]);
        let (taps, pipeline) = (self.vector(&weights.conv), self.gpu.short_conv.clone());
        let temp = self.state.temp.clone();
        let params = [n as u32, d as u32, shape.kernel as u32];
        self.dispatch_threads(&pipeline, &[&taps, &gated, &conv_state, &temp], params, d);
        self.elementwise(&gate_out, &bcx, &temp, n * d, [d as u32, 0, 0]);
        if let Err(error) = self.matmul(&weights.w_out, &temp, &out) {
            self.fail(error);
        }
        Ok(())
    }

    /// `model::cpu`'s mixture of experts, each step a kernel: the router's scores, the routing
    /// (each token's experts and weights, on the device), each (token, slot) pair's gate and up
    /// projections through its expert's rows, the activation, the down projections, the
    /// weighted sum per token, and the shared expert added.
    fn experts(&mut self, weights: &ExpertWeights) -> Result<(), ModelError> {
        let (c, n) = (self.model.config(), self.rows);
        let (Some(shape), Some(b)) = (c.experts, &self.state.experts) else {
            return Err(no_buffers("mixture-of-experts layers"));
        };
        let [scores, ids, order, offsets, expert_weights, gate, up, expert_out, shared] =
            [&b.scores, &b.ids, &b.order, &b.offsets, &b.weights, &b.gate, &b.up, &b.out, &b.shared]
                .map(Clone::clone);
        let (d, used, ff) = (c.n_embd, shape.used, shape.width);
        let (normed, out) = (self.buf(Buf::Normed).clone(), self.buf(Buf::BlockOut).clone());
        if let Err(error) = self.matmul(&weights.router, &normed, &scores) {
            self.fail(error);
        }
        let none = self.state.constant_row(self.gpu, 1, 0.0);
        let bias = weights.router_bias.as_deref().map_or_else(|| none.clone(), |b| self.vector(b));
        let selection = weights.selection_bias.as_deref().map_or_else(|| none.clone(), |b| self.vector(b));
        let [groups_x, groups_y] = groups_2d((n as u32).div_ceil(64));
        let params = [
            n as u32,
            shape.count as u32,
            used as u32,
            groups_x,
            super::gating_code(shape.gating),
            u32::from(shape.normalize),
            u32::from(weights.router_bias.is_some()),
            u32::from(weights.selection_bias.is_some()),
        ];
        let pipeline = self.gpu.route.clone();
        self.dispatch(
            &pipeline,
            &[&bias, &selection, &scores, &ids, &expert_weights],
            &params,
            [groups_x, groups_y, 1],
        );
        if n > 1 {
            let pipeline = self.gpu.group_by_expert.clone();
            let params = [(n * used) as u32, shape.count as u32];
            let groups = [(shape.count as u32).div_ceil(64), 1, 1];
            self.dispatch(&pipeline, &[&ids, &order, &offsets], &params, groups);
        }
        for (views, target) in [(&weights.gate, &gate), (&weights.up, &up)] {
            if let Err(error) = self.expert_matmul(views, &normed, target, true) {
                self.fail(error);
            }
        }
        let biases = weights.biases.as_deref();
        if let Some(biases) = biases {
            for (bias, target) in [(&biases.gate, &gate), (&biases.up, &up)] {
                self.expert_bias(bias, target, ff);
            }
        }
        let pipeline = self.activation();
        self.elementwise(&pipeline, &up, &gate, n * used * ff, [0; 3]);
        if let Err(error) = self.expert_matmul(&weights.down, &gate, &expert_out, false) {
            self.fail(error);
        }
        if let Some(biases) = biases {
            self.expert_bias(&biases.down, &expert_out, d);
        }
        let pipeline = self.gpu.expert_sum.clone();
        self.dispatch_threads(
            &pipeline,
            &[&expert_weights, &expert_out, &out],
            [(n * d) as u32, d as u32, used as u32],
            n * d,
        );
        if let Some(ffn) = &weights.shared {
            self.gated_ffn(ffn, &normed, (&gate, &up), &shared, false);
            let pipeline = self.gpu.add.clone();
            self.elementwise(&pipeline, &shared, &out, n * d, [0; 3]);
        }
        Ok(())
    }

    /// `model::cpu`'s Mamba-2 layer, each step a kernel: the input projection, `xBC` gathered
    /// from it, the convolution over this layer's state with its bias and SiLU, the selective
    /// scan over this layer's state, `y · silu(z)`, each group's RMSNorm, the output projection.
    fn mamba2(&mut self, weights: &Mamba2Weights) -> Result<(), ModelError> {
        let (c, l, n) = (self.model.config(), self.layer, self.rows);
        let (Some(shape), Some(b)) = (c.mamba2, &self.state.mamba2) else {
            return Err(no_buffers("Mamba-2 layers"));
        };
        let [zxbcdt, xbc, convolved, y, normed_y] =
            [&b.zxbcdt, &b.xbc, &b.convolved, &b.y, &b.normed].map(Clone::clone);
        let slot = (0..l).filter(|&j| c.is_recurrent(j)).count();
        let RecurrentLayer { conv: conv_state, ssm } = &self.state.recurrent[slot];
        let (conv_state, ssm) = (conv_state.clone(), ssm.clone());
        let (inner, conv_dim, in_dim) = (shape.inner, shape.conv_dim(), shape.in_dim());
        let (normed, out) = (self.buf(Buf::Normed).clone(), self.buf(Buf::BlockOut).clone());
        if let Err(error) = self.matmul(&weights.w_in, &normed, &zxbcdt) {
            self.fail(error);
        }
        let pipeline = self.gpu.gather_columns.clone();
        self.elementwise(
            &pipeline,
            &zxbcdt,
            &xbc,
            n * conv_dim,
            [conv_dim as u32, in_dim as u32, inner as u32],
        );
        let (taps, pipeline) = (self.vector(&weights.conv), self.gpu.short_conv.clone());
        let params = [n as u32, conv_dim as u32, shape.conv_kernel as u32];
        self.dispatch_threads(&pipeline, &[&taps, &xbc, &conv_state, &convolved], params, conv_dim);
        let bias = match &weights.conv_bias {
            Some(bias) => self.vector(bias),
            None => self.state.constant_row(self.gpu, conv_dim, 0.0),
        };
        let pipeline = self.gpu.bias_silu.clone();
        self.elementwise(&pipeline, &bias, &convolved, n * conv_dim, [conv_dim as u32, 0, 0]);
        let heads = self.state.ssm_heads(self.gpu, weights);
        let [groups_x, groups_y] = groups_2d((inner as u32).div_ceil(64));
        let params = [
            n as u32,
            inner as u32,
            shape.state as u32,
            shape.heads as u32,
            shape.groups as u32,
            in_dim as u32,
            conv_dim as u32,
            groups_x,
        ];
        let pipeline = self.gpu.ssm_scan.clone();
        self.dispatch(&pipeline, &[&convolved, &zxbcdt, &heads, &ssm, &y], &params, [groups_x, groups_y, 1]);
        let pipeline = self.gpu.gate_by_silu.clone();
        self.elementwise(&pipeline, &zxbcdt, &y, n * inner, [inner as u32, in_dim as u32, 0]);
        let width = inner / shape.groups;
        let norm = self.vector(&weights.norm);
        let rows = [n * shape.groups, width, shape.groups, inner, width];
        self.rms_norm_rows(&y, &normed_y, &norm, rows, c.rms_eps);
        if let Err(error) = self.matmul(&weights.w_out, &normed_y, &out) {
            self.fail(error);
        }
        Ok(())
    }

    fn feed_forward(&mut self, layer: &FeedForward) -> Result<(), ModelError> {
        self.dense_ffn(layer, Buf::BlockOut);
        Ok(())
    }

    /// The down projection adds into `X` itself: no `BlockOut`, no add's dispatch.
    fn feed_forward_residual(&mut self, layer: &FeedForward) -> Result<(), ModelError> {
        if layer.b_down.is_some() {
            self.feed_forward(layer)?;
            self.add(Buf::X, Buf::BlockOut);
        } else {
            self.dense_ffn(layer, Buf::X);
        }
        Ok(())
    }

    /// The steps of `model::cpu`'s DeltaNet block, each a kernel: the projections, the gates,
    /// the convolution, queries and keys L2-normalized, the delta rule over this layer's state,
    /// each head's output normalized and gated by `silu(z)`, and the output projection.
    fn delta_net(&mut self, weights: &DeltaNetWeights) -> Result<(), ModelError> {
        let (c, l, n) = (self.model.config(), self.layer, self.rows);
        let (Some(shape), Some(b)) = (c.delta_net, &self.state.delta) else {
            return Err(no_buffers("gated DeltaNet layers"));
        };
        let slot = (0..l).filter(|&j| c.is_recurrent(j)).count();
        let RecurrentLayer { conv: conv_state, ssm } = &self.state.recurrent[slot];
        let (conv_state, ssm) = (conv_state.clone(), ssm.clone());
        let [qkv, convolved, z, alpha, beta, out] =
            [&b.qkv, &b.convolved, &b.z, &b.alpha, &b.beta, &b.out].map(Clone::clone);
        let normed = self.buf(Buf::Normed).clone();
        for (matrix, target) in
            [(&weights.wqkv, &qkv), (&weights.wz, &z), (&weights.w_beta, &beta), (&weights.w_alpha, &alpha)]
        {
            if let Err(error) = self.matmul(matrix, &normed, target) {
                self.fail(error);
            }
        }
        let (heads, channels, d) = (shape.v_heads, shape.conv_dim(), shape.head_dim);
        let rates = self.state.rates(self.gpu, weights);
        let pipeline = self.gpu.delta_gates.clone();
        self.dispatch_threads(
            &pipeline,
            &[&rates, &alpha, &beta],
            [(n * heads) as u32, heads as u32, 0],
            n * heads,
        );
        let (taps, pipeline) = (self.vector(&weights.conv), self.gpu.delta_conv.clone());
        let params = [n as u32, channels as u32, shape.conv_kernel as u32];
        self.dispatch_threads(&pipeline, &[&taps, &qkv, &conv_state, &convolved], params, channels);
        // The convolved values go on as they are; the queries and keys, normalized, over them.
        GpuBackend::copy(self, &convolved, 0, &qkv, 0, n * channels);
        let inverse_sqrt = self.state.constant_row(self.gpu, d, 1.0 / (d as f32).sqrt());
        let qk_heads = 2 * shape.k_heads;
        let eps = c.rms_eps / d as f32;
        self.rms_norm_rows(&convolved, &qkv, &inverse_sqrt, [n * qk_heads, d, qk_heads, channels, 0], eps);
        let pipeline = self.gpu.delta_rule.clone();
        let params = [n as u32, shape.k_heads as u32, heads as u32, d as u32];
        self.dispatch(&pipeline, &[&qkv, &alpha, &beta, &ssm, &out], &params, [heads as u32, 1, 1]);
        // Each head's output normalized (into `convolved`, free again), then `z ← silu(z) · it`.
        let norm = self.vector(&weights.norm);
        let floats = n * shape.value_dim();
        self.rms_norm_rows(
            &out,
            &convolved,
            &norm,
            [floats / weights.norm.len(), weights.norm.len(), 1, weights.norm.len(), 0],
            c.rms_eps,
        );
        let pipeline = self.gpu.swiglu.clone();
        self.elementwise(&pipeline, &convolved, &z, floats, [0; 3]);
        let block_out = self.buf(Buf::BlockOut).clone();
        if let Err(error) = self.matmul(&weights.w_out, &z, &block_out) {
            self.fail(error);
        }
        Ok(())
    }

    /// `x += norm(proj · (gelu(gate · x) ⊙ this layer's input))`.
    fn per_layer(&mut self, weights: &PerLayerWeights) -> Result<(), ModelError> {
        let c = self.model.config();
        let Some(buffers) = &self.state.per_layer else { return Err(no_buffers("per-layer inputs")) };
        let (inputs, hidden) = (buffers.inputs.clone(), buffers.hidden.clone());
        let width = weights.gate.rows;
        let all = width * c.n_layer;
        let (x, out) = (self.buf(Buf::X).clone(), self.buf(Buf::BlockOut).clone());
        if let Err(error) = self.matmul(&weights.gate, &x, &hidden) {
            self.fail(error);
        }
        let offset = self.first * all + self.layer * width;
        let pipeline = self.gpu.per_layer_gate.clone();
        let shape = [width as u32, all as u32, offset as u32];
        self.elementwise(&pipeline, &inputs, &hidden, self.rows * width, shape);
        if let Err(error) = self.matmul(&weights.proj, &hidden, &out) {
            self.fail(error);
        }
        self.norm(Buf::BlockOut, Buf::BlockOut, &weights.post_norm);
        self.add(Buf::X, Buf::BlockOut);
        Ok(())
    }

    fn keep_rows(&mut self, rows: Range<usize>) {
        let d = self.model.config().n_embd;
        let (x, temp) = (self.buf(Buf::X).clone(), self.state.temp.clone());
        GpuBackend::copy(self, &x, rows.start * d, &temp, 0, rows.len() * d);
        GpuBackend::copy(self, &temp, 0, &x, 0, rows.len() * d);
        self.rows = rows.len();
        self.first = rows.start;
    }

    fn commit(&mut self) {
        self.state.len = self.start + self.n;
    }

    fn logits(&mut self, out: &mut [f32], head: &LogitsHead) -> Result<(), ModelError> {
        let (normed, logits) = (self.buf(Buf::Normed).clone(), self.state.logits.clone());
        let Some(output) = &self.model.weights().output else {
            return Err(ModelError::EmbeddingOnly(self.model.config().architecture.name().into()));
        };
        if let Err(error) = self.matmul(&output.matrix, &normed, &logits) {
            self.fail(error);
        }
        if let Some(divisor) = head.divisor {
            let pipeline = self.gpu.scale.clone();
            let factor = self.state.constant_row(self.gpu, 1, 1.0 / divisor);
            self.elementwise(&pipeline, &factor, &logits, out.len(), [0; 3]);
        }
        if let Some(cap) = head.softcap {
            let pipeline = self.gpu.softcap.clone();
            let cap = self.state.constant_row(self.gpu, 1, cap);
            self.elementwise(&pipeline, &cap, &logits, out.len(), [0; 3]);
        }
        // Read by GpuState::collect once the GPU is done: the caller's `out` stays as it is.
        match self.read {
            LogitsRead::Every => {
                let (bytes, readback) = ((4 * out.len()) as u64, self.state.readback.clone());
                self.copy_bytes(&logits, 0, &readback, 0, bytes);
            }
            LogitsRead::Best { temperature } => {
                let (scratch, result) = (&self.state.best_scratch, &self.state.best_readback);
                let recording = &mut self.recording;
                super::best::record(recording, self.gpu, &logits, out.len(), temperature, scratch, result);
            }
        }
        Ok(())
    }
}
