//! The CPU backend: [`Backend`]'s operations on the crate's kernels (SIMD128 in the browser,
//! AVX2 natively, split across threads by [`crate::parallel`]), over working memory sized once
//! ([`Scratch`]). Its results are the ones the parity tests hold to llama.cpp's bits.

use std::ops::Range;

use half::f16;

use super::attention::{
    AttentionPrecision, CachedKey, CachedValue, GroupScratch, HeadView, Scoring, TILED_MIN_QUERIES,
    attend_group_one_pass, attend_head_f32,
};
use super::backend::{Backend, Buf, Input, LayerAttention, LayerRope, LogitsHead};
use super::bytes::ModelBytes;
use super::cache::{Cache, KvRows, KvType, KvTypes};
use super::config::Config;
use super::delta_net::{DeltaInputs, causal_conv, causal_conv_silu, delta_rule, gates, l2_normalize_heads};
use super::error::{ModelError, try_zeroed};
use super::experts::{Choice, RouterBiases, route};
use super::forward::Placement;
use super::mamba2::{ScanInputs, ScanWeights, scan_step};
use super::ops::{
    add_in_place, apply_rope, gated, gelu, layer_norm_in_place, mrope_table, rms_norm, rms_norm_in_place,
    rms_scale, sigmoid, silu, walsh_hadamard,
};
use super::weights::{
    DeltaNetWeights, EncoderInput, ExpertWeights, FeedForward, FfnParts, Mamba2Weights, Matrix, Norm,
    PerLayerWeights, ShortConvWeights, Weights,
};
use super::{Activation, Model};
use crate::parallel;
use crate::tensor::{
    ActivationType, MatmulOperand, QuantizedActivations, dequantize_row, kv_rows, matmul_groups, matmul_many,
};

/// Attention heads (times queries) below which a part is not worth a thread.
const MIN_HEADS_PER_PART: usize = 2;

/// Working memory of forward passes: sized once for the largest batch, reused every call.
pub struct Scratch {
    max_batch: usize,
    /// The named activations ([`Buf`]), each `max_batch ×` its widest width.
    bufs: Bufs,
    delta: DeltaScratch,
    short_conv: ShortConvScratch,
    mamba2: Mamba2Scratch,
    per_layer: PerLayerScratch,
    experts: ExpertScratch,
    gate: Vec<f32>,
    up: Vec<f32>,
    /// The layer's cached keys and values widened to f32, `context × kv_dim`.
    keys: Vec<f32>,
    values: Vec<f32>,
    rope: Vec<(f32, f32)>,
    /// Another stream's table, for M-RoPE rows whose streams differ.
    rope_other: Vec<(f32, f32)>,
    quantized: QuantizedInput,
    pub(super) logits: Vec<f32>,
    /// How decode and short batches keep attention's query and `Σ p·V` (exact by default).
    attention_precision: AttentionPrecision,
}

/// The vectors behind [`Buf`], one field each.
struct Bufs {
    x: Vec<f32>,
    normed: Vec<f32>,
    block_out: Vec<f32>,
    q: Vec<f32>,
    q_and_gate: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
}

impl Scratch {
    /// Sets how the passes from now on keep attention's query and `Σ p·V` (one-pass kernel).
    pub fn set_attention_precision(&mut self, precision: AttentionPrecision) {
        self.attention_precision = precision;
    }

    /// The first `len` values of `Normed`: after a pass that stopped at the output norm, the
    /// final hidden states of the rows asked for.
    pub(super) fn normed(&self, len: usize) -> &[f32] {
        &self.bufs.normed[..len]
    }
}

impl Bufs {
    /// Every buffer, by [`Buf`]'s index: an operation takes the ones it names, each at most once.
    fn slots(&mut self) -> [Option<&mut Vec<f32>>; Buf::COUNT] {
        let Bufs { x, normed, block_out, q, q_and_gate, k, v, attn } = self;
        [x, normed, block_out, q, q_and_gate, k, v, attn].map(Some)
    }

    fn get(&mut self, buf: Buf) -> &mut Vec<f32> {
        match buf {
            Buf::X => &mut self.x,
            Buf::Normed => &mut self.normed,
            Buf::BlockOut => &mut self.block_out,
            Buf::Q => &mut self.q,
            Buf::QGate => &mut self.q_and_gate,
            Buf::K => &mut self.k,
            Buf::V => &mut self.v,
            Buf::Attn => &mut self.attn,
        }
    }

    /// Every buffer. (Destructured without `..`, as in [`slots`](Self::slots), so a new buffer
    /// cannot be left out of [`Scratch::bytes`].)
    fn all(&self) -> [&Vec<f32>; Buf::COUNT] {
        let Bufs { x, normed, block_out, q, q_and_gate, k, v, attn } = self;
        [x, normed, block_out, q, q_and_gate, k, v, attn]
    }
}

/// Working memory of Gemma 4's per-layer inputs (empty for other models).
#[derive(Default)]
struct PerLayerScratch {
    /// The batch's per-layer inputs, `batch × n_layer × width`.
    inputs: Vec<f32>,
    /// One token's per-layer embedding row, `n_layer × width`.
    row: Vec<f32>,
    /// A layer's gated hidden state, `batch × width`.
    hidden: Vec<f32>,
}

impl PerLayerScratch {
    fn all(&self) -> [&Vec<f32>; 3] {
        let PerLayerScratch { inputs, row, hidden } = self;
        [inputs, row, hidden]
    }
}

/// Working memory of gated DeltaNet layers (empty for other models).
#[derive(Default)]
struct DeltaScratch {
    /// Projected queries, keys and values (`batch × conv_dim`), then convolved.
    qkv: Vec<f32>,
    convolved: Vec<f32>,
    /// Output gate, `batch × value_dim`.
    z: Vec<f32>,
    /// Per token and value head: decay input becoming the log-decay, beta.
    alpha: Vec<f32>,
    beta: Vec<f32>,
    /// The delta rule's output, `batch × value_dim`.
    out: Vec<f32>,
    /// The convolution's window (state and batch) and the delta rule's per-head output.
    window: Vec<f32>,
    by_head: Vec<f32>,
}

impl DeltaScratch {
    fn all(&self) -> [&Vec<f32>; 8] {
        let DeltaScratch { qkv, convolved, z, alpha, beta, out, window, by_head } = self;
        [qkv, convolved, z, alpha, beta, out, window, by_head]
    }
}

/// Working memory of LFM2's short convolutions (empty for other models).
#[derive(Default)]
struct ShortConvScratch {
    /// The input projection's `[b, c, x]` rows, `batch × 3 n_embd`.
    bcx: Vec<f32>,
    /// `b ⊙ x`, then `c ⊙ conv(b ⊙ x)`; and the convolution's output, `batch × n_embd`.
    gated: Vec<f32>,
    convolved: Vec<f32>,
    /// The convolution's window (state and batch).
    window: Vec<f32>,
}

impl ShortConvScratch {
    fn all(&self) -> [&Vec<f32>; 4] {
        let ShortConvScratch { bcx, gated, convolved, window } = self;
        [bcx, gated, convolved, window]
    }
}

/// Working memory of Mamba-2 layers (empty for other models).
#[derive(Default)]
struct Mamba2Scratch {
    /// The input projection's `[z, xBC, dt]` rows, `batch × in_dim`.
    zxbcdt: Vec<f32>,
    /// `xBC` gathered, then convolved, `batch × conv_dim`.
    xbc: Vec<f32>,
    convolved: Vec<f32>,
    /// The scan's output, then gated and normalized, `batch × inner`.
    y: Vec<f32>,
    /// The convolution's window (state and batch).
    window: Vec<f32>,
}

impl Mamba2Scratch {
    fn all(&self) -> [&Vec<f32>; 5] {
        let Mamba2Scratch { zxbcdt, xbc, convolved, y, window } = self;
        [zxbcdt, xbc, convolved, y, window]
    }
}

/// Working memory of mixture-of-experts layers (empty for other models).
#[derive(Default)]
struct ExpertScratch {
    /// The router's scores, then probabilities, `batch × count`.
    scores: Vec<f32>,
    /// Each row's chosen experts and weights, `batch × used`.
    chosen: Vec<Choice>,
    /// The experts in the order rows first chose them, and whether each is in it yet.
    order: Vec<u32>,
    seen: Vec<bool>,
    /// The rows routed to each expert, with their weights, one expert after another, and each
    /// expert's range of them.
    rows: Vec<(usize, f32)>,
    spans: Vec<(usize, Range<usize>)>,
    /// Each expert's rows of a group quantized: its inputs, then its hidden states.
    activations: Vec<ExpertActivations>,
    /// Those rows' inputs, and the expert's (or the shared expert's) outputs, `batch × n_embd`.
    input: Vec<f32>,
    output: Vec<f32>,
}

impl ExpertScratch {
    /// Bytes held (every field named, as in [`Scratch::bytes`]).
    fn bytes(&self) -> usize {
        let ExpertScratch { scores, chosen, order, seen, rows, spans, activations, input, output } = self;
        4 * (scores.capacity() + input.capacity() + output.capacity() + order.capacity())
            + chosen.capacity() * size_of::<Choice>()
            + seen.capacity()
            + rows.capacity() * size_of::<(usize, f32)>()
            + spans.capacity() * size_of::<(usize, Range<usize>)>()
            + activations.iter().map(ExpertActivations::bytes).sum::<usize>()
    }
}

/// Activations quantized for the kernels, and which input they were quantized from.
struct QuantizedInput {
    activations: QuantizedActivations,
    of: Option<Input>,
}

impl QuantizedInput {
    /// `values` (`rows × cols`, the vector `input`) in format `wanted`, quantized now unless
    /// they already are.
    fn of(
        &mut self,
        input: Input,
        values: &[f32],
        wanted: ActivationType,
        rows: usize,
        cols: usize,
    ) -> Result<&QuantizedActivations, ModelError> {
        let a = &self.activations;
        if self.of != Some(input) || a.activation_type() != wanted || a.rows() != rows {
            self.of = None; // Until the new quantization has succeeded.
            self.activations.requantize(wanted, values, rows, cols)?;
            self.of = Some(input);
        }
        Ok(&self.activations)
    }
}

impl Scratch {
    /// Buffers for batches of up to `max_batch` tokens over a cache of `context` positions
    /// kept as `types` (whose keys and values the tiled kernel widens to f32 when they are F16).
    pub fn new(
        config: &Config,
        context: usize,
        max_batch: usize,
        types: KvTypes,
    ) -> Result<Scratch, ModelError> {
        let max_batch = max_batch.max(1);
        let widened =
            if widens_cache(types, max_batch) { context.saturating_mul(config.kv_dim()) } else { 0 };
        let rows_of = |n: usize, width: usize| try_zeroed::<f32>("scratch buffers", n.saturating_mul(width));
        let rows = |width: usize| rows_of(max_batch, width);
        let delta = match config.delta_net {
            Some(shape) => DeltaScratch {
                qkv: rows(shape.conv_dim())?,
                convolved: rows(shape.conv_dim())?,
                z: rows(shape.value_dim())?,
                alpha: rows(shape.v_heads)?,
                beta: rows(shape.v_heads)?,
                out: rows(shape.value_dim())?,
                window: Vec::new(),
                by_head: Vec::new(),
            },
            None => DeltaScratch::default(),
        };
        let per_layer = match config.per_layer_input {
            Some(width) => PerLayerScratch {
                inputs: rows(width.saturating_mul(config.n_layer))?,
                row: Vec::new(),
                hidden: rows(width)?,
            },
            None => PerLayerScratch::default(),
        };
        let short_conv = match config.short_conv {
            Some(_) => ShortConvScratch {
                bcx: rows(3 * config.n_embd)?,
                gated: rows(config.n_embd)?,
                convolved: rows(config.n_embd)?,
                window: Vec::new(),
            },
            None => ShortConvScratch::default(),
        };
        let mamba2 = match config.mamba2 {
            Some(shape) => Mamba2Scratch {
                zxbcdt: rows(shape.in_dim())?,
                xbc: rows(shape.conv_dim())?,
                convolved: rows(shape.conv_dim())?,
                y: rows(shape.inner)?,
                window: Vec::new(),
            },
            None => Mamba2Scratch::default(),
        };
        let experts = match config.experts {
            Some(shape) => ExpertScratch {
                scores: rows(shape.count)?,
                chosen: vec![(0, 0.0); max_batch.saturating_mul(shape.used)],
                order: Vec::with_capacity(shape.count),
                seen: vec![false; shape.count],
                rows: Vec::with_capacity(max_batch.saturating_mul(shape.used)),
                spans: Vec::with_capacity(shape.count),
                activations: Vec::new(),
                input: rows_of(max_batch.max(shape.used), config.n_embd)?,
                output: rows_of(max_batch.max(shape.used), config.n_embd)?,
            },
            None => ExpertScratch::default(),
        };
        // The widest feed-forward network: a dense layer's, the shared expert's, or a group of
        // experts' rows (at least every expert one row chooses).
        let ff_rows = config.experts.map_or(max_batch, |e| max_batch.max(e.used));
        let n_ff = config.experts.map_or(config.n_ff, |e| {
            let dense = if e.dense_lead > 0 { config.n_ff } else { 0 };
            e.width.max(e.shared_width.unwrap_or(0)).max(dense)
        });
        Ok(Scratch {
            max_batch,
            bufs: Bufs {
                x: rows(config.n_embd)?,
                normed: rows(config.n_embd)?,
                block_out: rows(config.n_embd)?,
                q: rows(config.q_dim())?,
                q_and_gate: rows(if config.gated_attention { 2 * config.q_dim() } else { 0 })?,
                k: rows(config.kv_dim())?,
                v: rows(config.kv_dim())?,
                attn: rows(config.q_dim())?,
            },
            delta,
            short_conv,
            mamba2,
            per_layer,
            experts,
            gate: rows_of(ff_rows, n_ff)?,
            up: rows_of(ff_rows, n_ff)?,
            keys: try_zeroed("attention keys", widened)?,
            values: try_zeroed("attention values", widened)?,
            rope: Vec::with_capacity(config.rope_dims / 2),
            rope_other: Vec::with_capacity(config.rope_dims / 2),
            quantized: QuantizedInput {
                activations: QuantizedActivations::quantize(ActivationType::F32, &[], 0, 0)?,
                of: None,
            },
            logits: Vec::new(),
            attention_precision: AttentionPrecision::Exact,
        })
    }

    pub fn max_batch(&self) -> usize {
        self.max_batch
    }

    /// The most these buffers hold at once for `config`: the fixed ones as allocated, plus
    /// what grows on first use (quantized activations of the widest row, at most 4 bytes a
    /// value, and one row of logits). With the KV cache, this is the memory a session costs.
    pub fn bytes(&self, config: &Config) -> usize {
        // Every field named, no `..`: a buffer added to the struct must be counted here.
        let Scratch {
            max_batch,
            bufs,
            delta,
            short_conv,
            mamba2,
            per_layer,
            experts,
            gate,
            up,
            keys,
            values,
            rope,
            rope_other,
            quantized: _,
            logits: _,
            attention_precision: _,
        } = self;
        let f32s: usize = [gate, up, keys, values]
            .into_iter()
            .chain(bufs.all())
            .chain(delta.all())
            .chain(short_conv.all())
            .chain(mamba2.all())
            .chain(per_layer.all())
            .map(Vec::capacity)
            .sum();
        // What grows on first use: the quantized activations and the logits.
        let widest = config.n_embd.max(config.n_ff).max(config.q_dim());
        let grown = max_batch.saturating_mul(widest).saturating_add(config.vocab_size);
        f32s.saturating_add(grown)
            .saturating_mul(4)
            .saturating_add((rope.capacity() + rope_other.capacity()) * size_of::<(f32, f32)>())
            .saturating_add(experts.bytes())
    }
}

/// One batch of a forward pass on the CPU: `rows` tokens at positions `start..`.
pub struct Cpu<'a> {
    config: &'a Config,
    weights: &'a Weights,
    file: &'a ModelBytes,
    cache: &'a mut Cache,
    s: &'a mut Scratch,
    /// The batch's first cache slot, and its size.
    start: usize,
    n: usize,
    /// Several sequences packed in one batch (embeddings): the cache slot where each row's
    /// sequence begins. Its positions count from there, and it attends to its own keys only.
    /// `None`: one sequence, from slot 0.
    sequence_starts: Option<&'a [usize]>,
    /// Rows still computed, and the batch position of the first (after [`Backend::keep_rows`]).
    rows: usize,
    first: usize,
    layer: usize,
    /// Where the rows stand in the model's positions (`None`: at their cache slots).
    placement: Option<Placement>,
}

impl<'a> Cpu<'a> {
    /// A batch of `n` tokens following what `cache` holds.
    pub fn new(model: &'a Model, cache: &'a mut Cache, s: &'a mut Scratch, n: usize) -> Cpu<'a> {
        s.quantized.of = None; // Its inputs are another batch's.
        let start = cache.len();
        Cpu {
            config: &model.config,
            weights: &model.weights,
            file: &model.file,
            cache,
            s,
            start,
            n,
            sequence_starts: None,
            rows: n,
            first: 0,
            layer: 0,
            placement: None,
        }
    }

    /// Places the batch's rows at `placement` rather than their cache slots (M-RoPE).
    pub fn place(&mut self, placement: Option<Placement>) {
        self.placement = placement;
    }

    /// A batch of several sequences into an empty `cache`, row `t` belonging to the sequence
    /// that begins at row `sequence_starts[t]` (see [`Cpu::sequence_starts`]).
    pub fn packed(
        model: &'a Model,
        cache: &'a mut Cache,
        s: &'a mut Scratch,
        sequence_starts: &'a [usize],
    ) -> Cpu<'a> {
        debug_assert!(cache.is_empty());
        let mut cpu = Cpu::new(model, cache, s, sequence_starts.len());
        cpu.sequence_starts = Some(sequence_starts);
        cpu
    }

    /// The width of `buf` at the current layer.
    fn width(&self, buf: Buf) -> usize {
        let c = self.config;
        let shape = c.layer(self.layer);
        match buf {
            Buf::X | Buf::Normed | Buf::BlockOut => c.n_embd,
            Buf::Q | Buf::Attn => c.n_head * shape.head_dim,
            Buf::QGate => 2 * c.n_head * shape.head_dim,
            Buf::K | Buf::V => shape.kv_dim(),
        }
    }

    /// The rows of `buf` in use.
    fn buf(&mut self, buf: Buf) -> &mut [f32] {
        let len = self.rows * self.width(buf);
        &mut self.s.bufs.get(buf)[..len]
    }

    /// Two different buffers' rows in use, the first to write.
    fn two(&mut self, out: Buf, input: Buf) -> (&mut [f32], &[f32]) {
        let (out_len, in_len) = (self.rows * self.width(out), self.rows * self.width(input));
        let mut slots = self.s.bufs.slots();
        let out = slots[out as usize].take().expect("a buffer named once");
        let input = slots[input as usize].take().expect("out and input differ");
        (&mut out[..out_len], &input[..in_len])
    }
}

impl Backend for Cpu<'_> {
    fn rows(&self) -> usize {
        self.rows
    }

    fn capacity(&self) -> usize {
        self.cache.capacity()
    }

    fn layer(&mut self, l: usize) {
        self.layer = l;
    }

    fn embed(&mut self, tokens: &[u32]) -> Result<(), ModelError> {
        let x = &mut self.s.bufs.x[..tokens.len() * self.config.n_embd];
        embeddings(self.config, self.weights, self.file, tokens, x)
    }

    fn embed_rows(&mut self, rows: &[f32]) -> Result<(), ModelError> {
        self.s.bufs.x[..rows.len()].copy_from_slice(rows);
        Ok(())
    }

    fn add_rows(&mut self, rows: &[f32]) -> Result<(), ModelError> {
        add_in_place(&mut self.s.bufs.x[..rows.len()], rows);
        Ok(())
    }

    fn encoder_input(&mut self, input: &EncoderInput) -> Result<(), ModelError> {
        let d = self.config.n_embd;
        let x = &mut self.s.bufs.x[..self.n * d];
        if let Some(row) = &input.token_type {
            x.chunks_exact_mut(d).for_each(|x| add_in_place(x, row));
        }
        let Some(table) = &input.positions else { return Ok(()) };
        let mut row = vec![0.0; d];
        for t in 0..self.n {
            let position = position_in_sequence(self.start, self.sequence_starts, t);
            if position >= table.rows {
                return Err(ModelError::ContextFull { needed: position + 1, capacity: table.rows });
            }
            dequantize_row(table.weight_type, table.row_bytes(self.file, position), &mut row)?;
            add_in_place(&mut x[t * d..(t + 1) * d], &row);
        }
        Ok(())
    }

    /// Gemma 4's per-layer inputs of a batch (`n × n_layer × width`): each token's row of the
    /// per-layer embeddings, scaled by √width, plus the normalized projection of its scaled
    /// embedding (`x`), the sum scaled by 1/√2.
    fn per_layer_inputs(&mut self, tokens: &[u32]) -> Result<(), ModelError> {
        let (c, Some(input)) = (self.config, &self.weights.per_layer_input) else { return Ok(()) };
        let (d, n) = (c.n_embd, tokens.len());
        let width = input.proj_norm.len();
        let all = width * c.n_layer;
        let ple = &mut self.s.per_layer.inputs[..n * all];
        let x = &self.s.bufs.x[..n * d];
        project(self.file, Input::Embeddings, x, &mut self.s.quantized, &input.model_proj, ple)?;
        let projection_scale = 1.0 / (d as f32).sqrt();
        ple.iter_mut().for_each(|v| *v *= projection_scale);
        rms_norm_in_place(ple, &input.proj_norm, c.rms_eps);
        let (embedding_scale, input_scale) = ((width as f32).sqrt(), 1.0 / 2f32.sqrt());
        let row = &mut self.s.per_layer.row;
        row.resize(all, 0.0);
        for (&token, ple) in tokens.iter().zip(ple.chunks_exact_mut(all)) {
            dequantize_row(
                input.token_embd.weight_type,
                input.token_embd.row_bytes(self.file, token as usize),
                row,
            )?;
            for (p, &e) in ple.iter_mut().zip(row.iter()) {
                *p = (*p + e * embedding_scale) * input_scale;
            }
        }
        Ok(())
    }

    fn norm(&mut self, out: Buf, input: Buf, weight: &[f32]) {
        let eps = self.config.rms_eps;
        if out == input {
            rms_norm_in_place(self.buf(out), weight, eps);
        } else {
            let (out, input) = self.two(out, input);
            rms_norm(out, input, weight, eps);
        }
    }

    fn layer_norm(&mut self, buf: Buf, norm: &Norm) {
        let eps = self.config.layer_norm_eps;
        layer_norm_in_place(self.buf(buf), &norm.weight, norm.bias.as_deref(), eps);
    }

    fn norm_unweighted(&mut self, buf: Buf, width: usize) {
        let eps = self.config.rms_eps;
        for head in self.buf(buf).chunks_exact_mut(width) {
            let scale = rms_scale(head, eps);
            head.iter_mut().for_each(|x| *x *= scale);
        }
    }

    fn add(&mut self, to: Buf, from: Buf) {
        let (to, from) = self.two(to, from);
        add_in_place(to, from);
    }

    fn add_bias(&mut self, buf: Buf, bias: &[f32]) {
        add_rows_bias(self.buf(buf), bias);
    }

    fn scale(&mut self, buf: Buf, factor: f32) {
        self.buf(buf).iter_mut().for_each(|v| *v *= factor);
    }

    fn copy(&mut self, to: Buf, from: Buf) {
        let (to, from) = self.two(to, from);
        to.copy_from_slice(from);
    }

    fn project<const M: usize>(
        &mut self,
        input: Buf,
        which: Input,
        outputs: [(&Matrix, Buf); M],
    ) -> Result<(), ModelError> {
        let rows = self.rows;
        let in_len = rows * self.width(input);
        let mut slots = self.s.bufs.slots();
        let input = &slots[input as usize].take().expect("an input named once")[..in_len];
        let named = outputs.map(|(matrix, buf)| {
            let out = slots[buf as usize].take().expect("outputs named once, none the input");
            (matrix, &mut out[..rows * matrix.rows])
        });
        project_many(self.file, which, input, &mut self.s.quantized, named)
    }

    fn split_gate(&mut self) {
        let hd = self.config.layer(self.layer).head_dim;
        let (q, both) = self.two(Buf::Q, Buf::QGate);
        for (query, both) in q.chunks_exact_mut(hd).zip(both.chunks_exact(2 * hd)) {
            query.copy_from_slice(&both[..hd]);
        }
    }

    fn apply_gate(&mut self) {
        let hd = self.config.layer(self.layer).head_dim;
        let (attn, both) = self.two(Buf::Attn, Buf::QGate);
        for (head, both) in attn.chunks_exact_mut(hd).zip(both.chunks_exact(2 * hd)) {
            head.iter_mut().zip(&both[hd..]).for_each(|(a, &gate)| *a *= sigmoid(gate));
        }
    }

    fn rope(&mut self, keys: bool, rope: &LayerRope) {
        let (c, start) = (self.config, self.start);
        let shape = c.layer(self.layer);
        let (hd, qd, kvd) = (shape.head_dim, c.n_head * shape.head_dim, shape.kv_dim());
        let n = self.rows;
        let Bufs { q, k, .. } = &mut self.s.bufs;
        let (table, other) = (&mut self.s.rope, &mut self.s.rope_other);
        let sequence_starts = self.sequence_starts;
        for t in 0..n {
            let positions = match self.placement {
                Some(placement) => placement.streams(self.first + t),
                None => [position_in_sequence(start, sequence_starts, t); 3],
            };
            mrope_table(table, other, positions, rope.rope, rope.dims, rope.factors, rope.streams);
            apply_rope(&mut q[t * qd..(t + 1) * qd], hd, table, rope.style);
            if keys {
                apply_rope(&mut k[t * kvd..(t + 1) * kvd], hd, table, rope.style);
            }
        }
    }

    fn attend(&mut self, store: bool, attention: &LayerAttention) {
        let (l, start, rows) = (self.layer, self.start, self.rows);
        let (qd, kvd) = (self.width(Buf::Q), self.width(Buf::K));
        let rotations = self.cache.rotations(l);
        let Bufs { q, k, v, attn, .. } = &mut self.s.bufs;
        let (q, out) = (&mut q[..rows * qd], &mut attn[..rows * qd]);
        // Queries and keys turned alike leave their dot products as they were; the values'
        // turn is undone on the output.
        walsh_hadamard(q, rotations.keys);
        if store {
            let (k, v) = (&mut k[..rows * kvd], &mut v[..rows * kvd]);
            walsh_hadamard(k, rotations.keys);
            walsh_hadamard(v, rotations.values);
            self.cache.store(l, start, k, v);
        }
        let (keys32, values32) = (&mut self.s.keys, &mut self.s.values);
        let q = &*q;
        let attention = (attention, self.s.attention_precision);
        match self.sequence_starts {
            None => attend(self.config, l, attention, self.cache, [keys32, values32], q, out, start, 0),
            Some(starts) => {
                // Packed sequences attend one by one, each as it would alone (the kernel a query
                // takes depends on how many there are: a sequence's bits then do not depend on
                // its company).
                let mut row = 0;
                while row < rows {
                    let first = starts[row];
                    let end = (row..rows).find(|&t| starts[t] != first).unwrap_or(rows);
                    let (q, out) = (&q[row * qd..end * qd], &mut out[row * qd..end * qd]);
                    let kv32 = [&mut *keys32, &mut *values32];
                    attend(self.config, l, attention, self.cache, kv32, q, out, start + row, first);
                    row = end;
                }
            }
        }
        walsh_hadamard(out, rotations.values);
    }

    /// `BlockOut = W_down · (act(W_gate · h) ⊙ (W_up · h))`, `h` the normalized input; without
    /// a gate, `W_down · gelu(W_up · h + b_up) + b_down`.
    fn feed_forward(&mut self, ffn: &FeedForward) -> Result<(), ModelError> {
        let (d, n, l) = (self.config.n_embd, self.rows, self.layer);
        let Bufs { normed, block_out, .. } = &mut self.s.bufs;
        let hidden = Hidden { gate: &mut self.s.gate, up: &mut self.s.up };
        let names = (Input::FeedForwardIn(l), Input::FeedForwardHidden(l));
        let (h, out) = (&normed[..n * d], &mut block_out[..n * d]);
        ffn_rows(self.file, self.config.activation, ffn.parts(), h, names, hidden, &mut self.s.quantized, out)
    }

    /// The rows are routed one by one; then each chosen expert multiplies the rows routed to it
    /// at once (its weights read once for the batch), and its outputs are added, weighted, into
    /// their rows. Experts run in the order rows first chose them, so a single row (decode) sums
    /// its experts best first, as llama.cpp does.
    fn experts(&mut self, weights: &ExpertWeights) -> Result<(), ModelError> {
        let (c, l, n) = (self.config, self.layer, self.rows);
        let shape = c.experts.expect("expert layers have an experts shape");
        let (d, count, used, ff) = (c.n_embd, shape.count, shape.used, shape.width);
        let max_rows = self.s.max_batch.max(used);
        let Bufs { normed, block_out, .. } = &mut self.s.bufs;
        let (h, out) = (&normed[..n * d], &mut block_out[..n * d]);
        let x = &mut self.s.experts;
        let quantized = &mut self.s.quantized;
        let scores = &mut x.scores[..n * count];
        project(self.file, Input::FeedForwardIn(l), h, quantized, &weights.router, scores)?;
        let chosen = &mut x.chosen[..n * used];
        let biases = RouterBiases {
            scores: weights.router_bias.as_deref(),
            selection: weights.selection_bias.as_deref(),
        };
        for (scores, chosen) in scores.chunks_exact_mut(count).zip(chosen.chunks_exact_mut(used)) {
            route(&shape, scores, biases, chosen);
        }
        x.order.clear();
        x.seen.iter_mut().for_each(|seen| *seen = false);
        for &(expert, _) in chosen.iter() {
            if !std::mem::replace(&mut x.seen[expert as usize], true) {
                x.order.push(expert);
            }
        }
        // Each expert's rows, in the order rows first chose the experts.
        x.rows.clear();
        x.spans.clear();
        for &expert in &x.order {
            let start = x.rows.len();
            for (t, choice) in chosen.chunks_exact(used).enumerate() {
                if let Some(&(_, weight)) = choice.iter().find(|&&(chosen, _)| chosen == expert) {
                    x.rows.push((t, weight));
                }
            }
            x.spans.push((expert as usize, start..x.rows.len()));
        }
        out.fill(0.0);
        // As many experts at once as the buffers hold rows for (every chosen expert of a decode
        // step): their gate and up projections one parallel job, their down projections another.
        let mut first = 0;
        while first < x.spans.len() {
            let base = x.spans[first].1.start;
            let mut last = first + 1;
            while last < x.spans.len() && x.spans[last].1.end - base <= max_rows {
                last += 1;
            }
            let group = &x.spans[first..last];
            let total = group[group.len() - 1].1.end - base;
            let rows = &x.rows[base..base + total];
            for (row, &(t, _)) in x.input.chunks_exact_mut(d).zip(rows) {
                row.copy_from_slice(&h[t * d..(t + 1) * d]);
            }
            let (gate, up) = (&mut self.s.gate[..total * ff], &mut self.s.up[..total * ff]);
            let output = &mut x.output[..total * d];
            let input = &x.input[..total * d];
            run_experts(
                self.file,
                weights,
                group,
                base,
                input,
                (gate, up),
                c.activation,
                &mut x.activations,
                output,
            )?;
            for (y, &(t, weight)) in output.chunks_exact(d).zip(rows) {
                let out = &mut out[t * d..(t + 1) * d];
                out.iter_mut().zip(y).for_each(|(o, &y)| *o += y * weight);
            }
            first = last;
        }
        if let Some(shared) = &weights.shared {
            let names = (Input::FeedForwardIn(l), Input::FeedForwardHidden(l));
            let hidden = Hidden { gate: &mut self.s.gate, up: &mut self.s.up };
            let output = &mut x.output[..n * d];
            ffn_rows(self.file, c.activation, shared.parts(), h, names, hidden, quantized, output)?;
            add_in_place(out, output);
        }
        Ok(())
    }

    /// Qwen3.5's gated DeltaNet: `BlockOut = W_out · (norm(delta_rule(q, k, v)) ⊙ silu(z))`,
    /// where q, k, v come from a causal convolution over `W_qkv · h`, and the rule's decay and
    /// beta from `W_alpha · h` and `W_beta · h`. The convolution's and the rule's state live
    /// in the cache and carry over from the previous batch.
    fn delta_net(&mut self, layer: &DeltaNetWeights) -> Result<(), ModelError> {
        let (c, l, n) = (self.config, self.layer, self.rows);
        let shape = c.delta_net.expect("recurrent layers have a DeltaNet shape");
        let (d, hd) = (c.n_embd, shape.head_dim);
        let b = &mut self.s.delta;
        let (qkv, z) = (&mut b.qkv[..n * shape.conv_dim()], &mut b.z[..n * shape.value_dim()]);
        let (alpha, beta) = (&mut b.alpha[..n * shape.v_heads], &mut b.beta[..n * shape.v_heads]);
        let Bufs { normed, block_out, .. } = &mut self.s.bufs;
        let quantized = &mut self.s.quantized;
        project_many(
            self.file,
            Input::AttentionIn(l),
            &normed[..n * d],
            quantized,
            [
                (&layer.wqkv, &mut *qkv),
                (&layer.wz, &mut *z),
                (&layer.w_beta, &mut *beta),
                (&layer.w_alpha, &mut *alpha),
            ],
        )?;
        gates(&layer.dt_bias, &layer.a, alpha, beta);

        let (conv_state, ssm_state) = self.cache.recurrent_layer(l);
        let convolved = &mut b.convolved[..n * shape.conv_dim()];
        causal_conv_silu(&shape, conv_state, &layer.conv, qkv, convolved, &mut b.window);
        for row in convolved.chunks_exact_mut(shape.conv_dim()) {
            l2_normalize_heads(&mut row[..2 * shape.key_dim()], hd, c.rms_eps);
        }
        let out = &mut b.out[..n * shape.value_dim()];
        let inputs = DeltaInputs { qkv: convolved, g: alpha, beta };
        delta_rule(&shape, &inputs, ssm_state, out, &mut b.by_head);

        // Each head's output normalized, then gated by silu(z).
        rms_norm_in_place(out, &layer.norm, c.rms_eps);
        out.iter_mut().zip(z.iter()).for_each(|(o, &z)| *o *= silu(z));
        let block_out = &mut block_out[..n * d];
        project(self.file, Input::AttentionOut(l), out, quantized, &layer.w_out, block_out)
    }

    /// LFM2's short convolution: `[b, c, x] = W_in · h`, then `BlockOut = W_out · (c ⊙
    /// conv(b ⊙ x))`, the convolution's last inputs carried in the cache from batch to batch.
    fn short_conv(&mut self, layer: &ShortConvWeights) -> Result<(), ModelError> {
        let (c, l, n) = (self.config, self.layer, self.rows);
        let shape = c.short_conv.expect("short convolution layers have a shape");
        let d = c.n_embd;
        let sc = &mut self.s.short_conv;
        let (bcx, gated, convolved) =
            (&mut sc.bcx[..n * 3 * d], &mut sc.gated[..n * d], &mut sc.convolved[..n * d]);
        let Bufs { normed, block_out, .. } = &mut self.s.bufs;
        let quantized = &mut self.s.quantized;
        project(self.file, Input::AttentionIn(l), &normed[..n * d], quantized, &layer.w_in, bcx)?;
        for (row, out) in bcx.chunks_exact(3 * d).zip(gated.chunks_exact_mut(d)) {
            let (b, x) = (&row[..d], &row[2 * d..]);
            out.iter_mut().zip(b.iter().zip(x)).for_each(|(o, (&b, &x))| *o = b * x);
        }
        let (conv_state, _) = self.cache.recurrent_layer(l);
        causal_conv(d, shape.kernel, conv_state, &layer.conv, gated, convolved, &mut sc.window, |v| v);
        for ((row, conv), out) in
            bcx.chunks_exact(3 * d).zip(convolved.chunks_exact(d)).zip(gated.chunks_exact_mut(d))
        {
            let c = &row[d..2 * d];
            out.iter_mut().zip(c.iter().zip(conv)).for_each(|(o, (&c, &v))| *o = c * v);
        }
        project(self.file, Input::AttentionOut(l), gated, quantized, &layer.w_out, &mut block_out[..n * d])
    }

    /// Granite 4.0-H's Mamba-2 layer, as llama.cpp's `build_mamba2_layer`: `[z, xBC, dt] = W_in ·
    /// h`; `xBC` through the causal convolution, its bias and SiLU; the scan of each token in
    /// turn over the state carried in the cache; `y ⊙ silu(z)` normalized group by group;
    /// `BlockOut = W_out · y`.
    fn mamba2(&mut self, layer: &Mamba2Weights) -> Result<(), ModelError> {
        let (c, l, n) = (self.config, self.layer, self.rows);
        let shape = c.mamba2.expect("Mamba-2 layers have a shape");
        let (d, inner, conv_dim, in_dim) = (c.n_embd, shape.inner, shape.conv_dim(), shape.in_dim());
        let m = &mut self.s.mamba2;
        let zxbcdt = &mut m.zxbcdt[..n * in_dim];
        let (xbc, convolved, y) =
            (&mut m.xbc[..n * conv_dim], &mut m.convolved[..n * conv_dim], &mut m.y[..n * inner]);
        let Bufs { normed, block_out, .. } = &mut self.s.bufs;
        let quantized = &mut self.s.quantized;
        project(self.file, Input::AttentionIn(l), &normed[..n * d], quantized, &layer.w_in, zxbcdt)?;
        for (row, out) in zxbcdt.chunks_exact(in_dim).zip(xbc.chunks_exact_mut(conv_dim)) {
            out.copy_from_slice(&row[inner..inner + conv_dim]);
        }
        let (conv_state, ssm_state) = self.cache.recurrent_layer(l);
        causal_conv(
            conv_dim,
            shape.conv_kernel,
            conv_state,
            &layer.conv,
            xbc,
            convolved,
            &mut m.window,
            |v| v,
        );
        for row in convolved.chunks_exact_mut(conv_dim) {
            if let Some(bias) = &layer.conv_bias {
                add_in_place(row, bias);
            }
            row.iter_mut().for_each(|v| *v = silu(*v));
        }
        let weights = ScanWeights { dt_bias: &layer.dt_bias, a: &layer.a, d: &layer.d };
        let bc = shape.groups * shape.state;
        for ((row, xbc), y) in
            zxbcdt.chunks_exact(in_dim).zip(convolved.chunks_exact(conv_dim)).zip(y.chunks_exact_mut(inner))
        {
            let (x, rest) = xbc.split_at(inner);
            let inputs = ScanInputs { x, b: &rest[..bc], c: &rest[bc..], dt: &row[inner + conv_dim..] };
            scan_step(&shape, &weights, &inputs, ssm_state, y);
            // `silu(z) ⊙ y` (ggml's swiglu), then RMSNorm over each group of heads.
            y.iter_mut().zip(&row[..inner]).for_each(|(y, &z)| *y *= silu(z));
            let width = inner / shape.groups;
            for (group, norm) in y.chunks_exact_mut(width).zip(layer.norm.chunks_exact(width)) {
                rms_norm_in_place(group, norm, c.rms_eps);
            }
        }
        project(self.file, Input::AttentionOut(l), y, quantized, &layer.w_out, &mut block_out[..n * d])
    }

    /// Gemma 4's per-layer input block on the rows held, which are the batch's positions
    /// `first..first + rows`: `X += norm(W_proj · (gelu(W_gate · X) ⊙ input))`.
    fn per_layer(&mut self, weights: &PerLayerWeights) -> Result<(), ModelError> {
        let (c, l, n, first) = (self.config, self.layer, self.rows, self.first);
        let d = c.n_embd;
        let width = weights.gate.rows;
        let all = width * c.n_layer;
        let hidden = &mut self.s.per_layer.hidden[..n * width];
        let Bufs { x, block_out, .. } = &mut self.s.bufs;
        let quantized = &mut self.s.quantized;
        project(self.file, Input::LayerOut(l), &x[..n * d], quantized, &weights.gate, hidden)?;
        let inputs = &self.s.per_layer.inputs[first * all..(first + n) * all];
        for (row, input) in hidden.chunks_exact_mut(width).zip(inputs.chunks_exact(all)) {
            let input = &input[l * width..(l + 1) * width];
            row.iter_mut().zip(input).for_each(|(h, &i)| *h = gelu(*h) * i);
        }
        let out = &mut block_out[..n * d];
        project(self.file, Input::PerLayerHidden(l), hidden, quantized, &weights.proj, out)?;
        rms_norm_in_place(out, &weights.post_norm, c.rms_eps);
        add_in_place(&mut x[..n * d], out);
        Ok(())
    }

    fn keep_rows(&mut self, rows: Range<usize>) {
        let d = self.config.n_embd;
        self.s.bufs.x.copy_within(rows.start * d..rows.end * d, 0);
        self.rows = rows.len();
        self.first = rows.start;
    }

    fn commit(&mut self) {
        self.cache.set_len(self.start + self.n);
    }

    fn logits(&mut self, out: &mut [f32], head: &LogitsHead) -> Result<(), ModelError> {
        let normed = &self.s.bufs.normed[..self.rows * self.config.n_embd];
        let Some(output) = &self.weights.output else {
            return Err(ModelError::EmbeddingOnly(self.config.architecture.name().into()));
        };
        project(self.file, Input::OutputNorm, normed, &mut self.s.quantized, &output.matrix, out)?;
        // Granite divides its logits (llama.cpp: a scale by the reciprocal).
        if let Some(divisor) = head.divisor {
            let factor = 1.0 / divisor;
            out.iter_mut().for_each(|v| *v *= factor);
        }
        // Gemma 2's final soft cap, as llama.cpp's graph spells it: scale, tanh, scale.
        if let Some(cap) = head.softcap {
            let inverse = 1.0 / cap;
            out.iter_mut().for_each(|v| *v = (*v * inverse).tanh() * cap);
        }
        Ok(())
    }
}

/// The position in its sequence of a batch's row `t`, the batch starting at cache slot `start`
/// (see [`Cpu::sequence_starts`]).
fn position_in_sequence(start: usize, sequence_starts: Option<&[usize]>, t: usize) -> usize {
    start + t - sequence_starts.map_or(0, |s| s[t])
}

/// The tokens' embeddings (rows of `token_embd`, scaled where the architecture scales them)
/// into `x`, a row per token: what every backend's [`Backend::embed`] starts from.
pub(crate) fn embeddings(
    config: &Config,
    weights: &Weights,
    file: &ModelBytes,
    tokens: &[u32],
    x: &mut [f32],
) -> Result<(), ModelError> {
    let table = &weights.token_embd;
    for (&token, row) in tokens.iter().zip(x.chunks_exact_mut(config.n_embd)) {
        dequantize_row(table.weight_type, table.row_bytes(file, token as usize), row)?;
        if let Some(scale) = config.embedding_scale {
            row.iter_mut().for_each(|v| *v *= scale);
        }
    }
    Ok(())
}

/// Causal (and for sliding layers, windowed) attention of layer `l`'s queries `q` at cache
/// slots `start..` over the cached keys and values it reads from slot `first` on (where
/// sequences are packed, their own), with grouped KV heads. An encoder's queries, which attend
/// to their whole sequence, must be all of it.
#[allow(clippy::too_many_arguments)]
fn attend(
    c: &Config,
    l: usize,
    (attention, precision): (&LayerAttention, AttentionPrecision),
    cache: &Cache,
    [keys32, values32]: [&mut Vec<f32>; 2],
    q: &[f32],
    out: &mut [f32],
    start: usize,
    first: usize,
) {
    let shape = c.layer(l);
    let (hd, kvd) = (shape.head_dim, shape.kv_dim());
    let qd = c.n_head * hd;
    let n = q.len() / qd;
    let end = start + n;
    let scoring = Scoring::new(attention.score_scale, attention.softcap);
    let window = attention.window;
    let first_needed = window.map_or(first, |w| (start + 1).saturating_sub(w).max(first));
    let (keys, values) = cache.layer(attention.kv_layer, end);
    let group = c.n_head / shape.n_head_kv;
    // The keys query `t` sees: from `first` (or the window's start, if later) to its own, or
    // (encoders) to its sequence's last, which is the last of these queries.
    let keys_of = |t: usize| {
        let slot = start + t;
        let last = if attention.causal { slot + 1 } else { end };
        window.map_or(first, |w| (slot + 1).saturating_sub(w).max(first))..last
    };
    // llama.cpp's tiled kernel takes F16 or F32 caches whose keys and values are of one type;
    // every other batch goes through the one-pass kernel.
    let tiled = match (keys, values) {
        _ if n < TILED_MIN_QUERIES => None,
        (KvRows::F16(keys16), KvRows::F16(values16)) => {
            // The tiled kernel reads every key and value once per query: widen them to f32 once,
            // for every head and query. (The one-pass kernel reads the cached halves in place.)
            widen(&keys16[first_needed * kvd..], &mut keys32[first_needed * kvd..end * kvd]);
            widen(&values16[first_needed * kvd..], &mut values32[first_needed * kvd..end * kvd]);
            Some((&keys32[..], &values32[..]))
        }
        (KvRows::F32(keys), KvRows::F32(values)) => Some((keys, values)),
        _ => None,
    };
    if let Some((keys, values)) = tiled {
        // One task per run of (query, head) pairs: each writes only its heads' outputs.
        parallel::for_each_part(out, hd, MIN_HEADS_PER_PART, |first_head, part_out| {
            for (j, head_out) in part_out.chunks_exact_mut(hd).enumerate() {
                let (t, h) = ((first_head + j) / c.n_head, (first_head + j) % c.n_head);
                let query = &q[t * qd + h * hd..][..hd];
                let kv = HeadView { keys, values, stride: kvd, offset: (h / group) * hd, head_dim: hd };
                let sink = attention.sinks.map(|sinks| sinks[h]);
                attend_head_f32(query, &kv, keys_of(t), scoring, sink, head_out);
            }
        });
        return;
    }
    let one_pass = OnePass {
        c,
        n_head_kv: shape.n_head_kv,
        hd,
        kvd,
        q,
        keys_of,
        scoring,
        sinks: attention.sinks,
        precision,
    };
    macro_rules! typed {
        ($rows:expr, $typed:ident => $body:expr) => {
            match $rows {
                KvRows::F16($typed) => $body,
                KvRows::F32($typed) => $body,
                KvRows::Q8_0($typed) => $body,
            }
        };
    }
    typed!(keys, keys => typed!(values, values => one_pass.run(keys, values, out)));
}

/// What [`attend`] hands the one-pass kernel, whatever types the cache keeps.
struct OnePass<'a, F> {
    c: &'a Config,
    n_head_kv: usize,
    hd: usize,
    kvd: usize,
    q: &'a [f32],
    keys_of: F,
    scoring: Scoring,
    sinks: Option<&'a [f32]>,
    precision: AttentionPrecision,
}

impl<F: Fn(usize) -> Range<usize> + Sync> OnePass<'_, F> {
    fn run<K: CachedKey, V: CachedValue>(&self, keys: &[K], values: &[V], out: &mut [f32]) {
        let OnePass { c, n_head_kv, hd, kvd, q, scoring, sinks, precision, .. } = *self;
        let (n, qd, group) = (q.len() / (c.n_head * hd), c.n_head * hd, c.n_head / n_head_kv);
        // One task per run of units: the query heads of one KV head's group for one query,
        // adjacent in `q` and `out`, which read each cached row once between them; or, where
        // those units would leave threads unevenly loaded, equal shares of the group's heads.
        let groups = n * n_head_kv;
        let threads = parallel::threads();
        let even = |units: usize| units.is_multiple_of(threads) || units >= 4 * threads;
        let shares = (1..=group).find(|&s| group.is_multiple_of(s) && even(groups * s)).unwrap_or(group);
        let unit_heads = group / shares;
        let (unit_width, units_per_query) = (unit_heads * hd, c.n_head / unit_heads);
        let min_units = MIN_HEADS_PER_PART.div_ceil(unit_heads);
        parallel::for_each_part(out, unit_width, min_units, |first, part_out| {
            let mut scratch = GroupScratch::default();
            for (j, unit_out) in part_out.chunks_exact_mut(unit_width).enumerate() {
                // Units run query by query, then head by head.
                let (t, first_head) =
                    ((first + j) / units_per_query, (first + j) % units_per_query * unit_heads);
                let queries = &q[t * qd + first_head * hd..][..unit_width];
                let offset = (first_head / group) * hd;
                let kv = HeadView { keys, values, stride: kvd, offset, head_dim: hd };
                let sinks = sinks.map(|sinks| &sinks[first_head..first_head + unit_heads]);
                let positions = (self.keys_of)(t);
                attend_group_one_pass(
                    queries,
                    &kv,
                    positions,
                    scoring,
                    sinks,
                    precision,
                    &mut scratch,
                    unit_out,
                );
            }
        });
    }
}

/// `out (rows × matrix.rows) = input (rows × matrix.cols) · matrixᵀ`, with `input` quantized
/// for the matrix's type unless it already is.
fn project(
    file: &ModelBytes,
    name: Input,
    input: &[f32],
    quantized: &mut QuantizedInput,
    matrix: &Matrix,
    out: &mut [f32],
) -> Result<(), ModelError> {
    project_many(file, name, input, quantized, [(matrix, out)])
}

/// [`project`] for several matrices that read the same input (Q, K, V; gate, up): one parallel
/// job for all of them when they take the same activation format, one each otherwise.
fn project_many<const M: usize>(
    file: &ModelBytes,
    name: Input,
    input: &[f32],
    quantized: &mut QuantizedInput,
    matrices: [(&Matrix, &mut [f32]); M],
) -> Result<(), ModelError> {
    let Some(wanted) = matrices.first().map(|(m, _)| m.weight_type.activation_type()) else { return Ok(()) };
    if matrices.iter().any(|(m, _)| m.weight_type.activation_type() != wanted) {
        for (matrix, out) in matrices {
            project(file, name, input, quantized, matrix, out)?;
        }
        return Ok(());
    }
    let cols = matrices[0].0.cols;
    let activations = quantized.of(name, input, wanted, input.len() / cols, cols)?;
    let operands = matrices
        .into_iter()
        .map(|(matrix, out)| MatmulOperand {
            weights: matrix.bytes(file),
            weight_type: matrix.weight_type,
            layout: matrix.layout,
            rows_out: matrix.rows,
            out,
        })
        .collect();
    matmul_many(operands, activations)?;
    Ok(())
}

/// One expert's rows of a group, quantized for its projections.
struct ExpertActivations {
    input: QuantizedActivations,
    /// The input again where `up` takes another format than `gate` (none in real files).
    input_for_up: QuantizedActivations,
    hidden: QuantizedActivations,
}

impl ExpertActivations {
    fn new() -> Result<ExpertActivations, ModelError> {
        let empty = || QuantizedActivations::quantize(ActivationType::F32, &[], 0, 0);
        Ok(ExpertActivations { input: empty()?, input_for_up: empty()?, hidden: empty()? })
    }

    /// At most 4 bytes a value, as [`Scratch::bytes`] counts quantized activations.
    fn bytes(&self) -> usize {
        [&self.input, &self.input_for_up, &self.hidden].iter().map(|a| 4 * a.rows() * a.row_len()).sum()
    }
}

/// A group of experts over their rows: `group` names each expert and its rows' range (from
/// `base`) in `input` (`rows × n_embd`, the rows of one expert after another); `output`
/// receives each row's expert output. The gate and up projections of every expert are one
/// parallel job, the down projections another.
#[allow(clippy::too_many_arguments)]
fn run_experts(
    file: &ModelBytes,
    weights: &ExpertWeights,
    group: &[(usize, Range<usize>)],
    base: usize,
    input: &[f32],
    (gate, up): (&mut [f32], &mut [f32]),
    activation: Activation,
    activations: &mut Vec<ExpertActivations>,
    output: &mut [f32],
) -> Result<(), ModelError> {
    let (d, ff) = (weights.down[0].rows, weights.up[0].rows);
    while activations.len() < group.len() {
        activations.push(ExpertActivations::new()?);
    }
    let span = |range: &Range<usize>| (range.start - base)..(range.end - base);
    let (gate_type, up_type) =
        (weights.gate[0].weight_type.activation_type(), weights.up[0].weight_type.activation_type());
    for ((_, range), a) in group.iter().zip(activations.iter_mut()) {
        let rows = span(range);
        let values = &input[rows.start * d..rows.end * d];
        a.input.requantize(gate_type, values, rows.len(), d)?;
        if up_type != gate_type {
            a.input_for_up.requantize(up_type, values, rows.len(), d)?;
        }
    }
    let mut jobs = Vec::with_capacity(2 * group.len());
    let (mut gate_rest, mut up_rest) = (&mut *gate, &mut *up);
    for ((e, range), a) in group.iter().zip(activations.iter()) {
        let m = range.len();
        let (g, rest) = std::mem::take(&mut gate_rest).split_at_mut(m * ff);
        gate_rest = rest;
        let (u, rest) = std::mem::take(&mut up_rest).split_at_mut(m * ff);
        up_rest = rest;
        let operand = |matrix: &'_ Matrix, out| MatmulOperand {
            weights: matrix.bytes(file),
            weight_type: matrix.weight_type,
            layout: matrix.layout,
            rows_out: matrix.rows,
            out,
        };
        if up_type == gate_type {
            jobs.push((vec![operand(&weights.gate[*e], g), operand(&weights.up[*e], u)], &a.input));
        } else {
            jobs.push((vec![operand(&weights.gate[*e], g)], &a.input));
            jobs.push((vec![operand(&weights.up[*e], u)], &a.input_for_up));
        }
    }
    matmul_groups(jobs)?;
    if let Some(biases) = &weights.biases {
        for (e, range) in group {
            let rows = span(range);
            add_rows_bias(&mut gate[rows.start * ff..rows.end * ff], &biases.gate[e * ff..(e + 1) * ff]);
            add_rows_bias(&mut up[rows.start * ff..rows.end * ff], &biases.up[e * ff..(e + 1) * ff]);
        }
    }
    gated(activation, gate, up);
    let down_type = weights.down[0].weight_type.activation_type();
    for ((_, range), a) in group.iter().zip(activations.iter_mut()) {
        let rows = span(range);
        a.hidden.requantize(down_type, &gate[rows.start * ff..rows.end * ff], rows.len(), ff)?;
    }
    let mut jobs = Vec::with_capacity(group.len());
    let mut out_rest = &mut *output;
    for ((e, range), a) in group.iter().zip(activations.iter()) {
        let (o, rest) = std::mem::take(&mut out_rest).split_at_mut(range.len() * d);
        out_rest = rest;
        let down = &weights.down[*e];
        let operand = MatmulOperand {
            weights: down.bytes(file),
            weight_type: down.weight_type,
            layout: down.layout,
            rows_out: down.rows,
            out: o,
        };
        jobs.push((vec![operand], &a.hidden));
    }
    matmul_groups(jobs)?;
    if let Some(biases) = &weights.biases {
        let mut at = 0;
        for (e, range) in group {
            let rows = range.len() * d;
            add_rows_bias(&mut output[at..at + rows], &biases.down[e * d..(e + 1) * d]);
            at += rows;
        }
    }
    Ok(())
}

/// `rows += bias`, in every row of `bias.len()`.
fn add_rows_bias(rows: &mut [f32], bias: &[f32]) {
    rows.chunks_exact_mut(bias.len()).for_each(|row| add_in_place(row, bias));
}

/// The gate and up projections' outputs of a feed-forward network, each at least
/// `rows × width` long.
struct Hidden<'a> {
    gate: &'a mut [f32],
    up: &'a mut [f32],
}

/// `out (rows × d) = ffn(h)` for the rows of `h`; `names` are what `h` and the hidden state are
/// (the quantization of one serves every projection of it).
#[allow(clippy::too_many_arguments)]
fn ffn_rows(
    file: &ModelBytes,
    activation: Activation,
    ffn: FfnParts,
    h: &[f32],
    (input, hidden_name): (Input, Input),
    hidden: Hidden,
    quantized: &mut QuantizedInput,
    out: &mut [f32],
) -> Result<(), ModelError> {
    let (ff, n) = (ffn.up.rows, h.len() / ffn.up.cols);
    let (gate, up) = (&mut hidden.gate[..n * ff], &mut hidden.up[..n * ff]);
    let hidden = match (ffn.gate, activation) {
        (Some(w_gate), Activation::SwiGlu | Activation::GeGlu) => {
            project_many(file, input, h, quantized, [(w_gate, &mut *gate), (ffn.up, &mut *up)])?;
            gated(activation, gate, up);
            gate
        }
        _ => {
            project(file, input, h, quantized, ffn.up, up)?;
            if let Some(bias) = ffn.b_up {
                add_rows_bias(up, bias);
            }
            up.iter_mut().for_each(|v| *v = gelu(*v));
            up
        }
    };
    project(file, hidden_name, hidden, quantized, ffn.down, out)?;
    if let Some(bias) = ffn.b_down {
        add_rows_bias(out, bias);
    }
    Ok(())
}

/// Whether batches of up to `max_batch` tokens widen a cache kept as `types` to f32 for the
/// tiled kernel (F16 keys and values only: F32 ones it reads in place, others never reach it).
fn widens_cache(types: KvTypes, max_batch: usize) -> bool {
    types.keys == KvType::F16 && types.values == KvType::F16 && max_batch >= TILED_MIN_QUERIES
}

/// Converts cached f16 keys or values to f32, in parallel parts for long contexts.
fn widen(src: &[f16], dst: &mut [f32]) {
    parallel::for_each_part(dst, 1, 64 * 1024, |first, dst| kv_rows::widen(&src[first..], dst));
}
