//! The forward pass, top to bottom: embed → for each layer (mixer block: attention or gated
//! DeltaNet; feed-forward block) → final norm → logits. Every architecture shares this one
//! function; where they differ (Q/K norm, RoPE pairing, gates, post-norms, activation,
//! sliding windows, recurrent layers) the step says so.
//!
//! A call processes a batch of tokens at once: every projection is a matrix × matrix product
//! (each weight block is read once for all rows), so prefill costs far less per token than decode.

use half::f16;

use super::bytes::ModelBytes;

use super::Model;
use super::arch::Activation;
use super::attention::{HeadView, Scoring, TILED_MIN_QUERIES, attend_head_f16_accumulator, attend_head_f32};
use super::cache::Cache;
use super::config::Config;
use super::delta_net::{DeltaInputs, causal_conv_silu, delta_rule, gates, l2_normalize_heads, sigmoid, silu};
use super::error::{ModelError, try_zeroed};
use super::ops::{
    add_in_place, apply_rope, geglu, gelu, rms_norm, rms_norm_in_place, rms_scale, rope_table, swiglu,
};
use super::weights::{AttentionWeights, DeltaNetWeights, LayerWeights, Matrix, Mixer, PerLayerWeights};
use crate::parallel;
use crate::tensor::{
    ActivationType, MatmulOperand, QuantizedActivations, dequantize_row, kv_rows, matmul_many,
};

/// Attention heads (times queries) below which a part is not worth a thread.
const MIN_HEADS_PER_PART: usize = 2;

/// Which positions of a batch need logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitsFor {
    /// Only the last token (generation).
    Last,
    /// Every token (teacher-forced parity checks, perplexity).
    All,
    /// None: a prefill cut into parts, all but the last (only the cache is wanted).
    None,
}

/// Working memory of forward passes: sized once for the largest batch, reused every call.
pub struct Scratch {
    max_batch: usize,
    /// Residual stream, `batch × n_embd`.
    x: Vec<f32>,
    /// Normalized input of a block, `batch × n_embd`.
    normed: Vec<f32>,
    /// Output of a block before the residual add, `batch × n_embd`.
    block_out: Vec<f32>,
    q: Vec<f32>,
    /// Gated attention's query projection: each head's query, then its gate.
    q_and_gate: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
    delta: DeltaScratch,
    per_layer: PerLayerScratch,
    gate: Vec<f32>,
    up: Vec<f32>,
    /// The layer's cached keys and values widened to f32, `context × kv_dim`.
    keys: Vec<f32>,
    values: Vec<f32>,
    rope: Vec<(f32, f32)>,
    quantized: QuantizedInput,
    logits: Vec<f32>,
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

/// The vector a projection reads. Projections of the same one (Q, K and V; gate and up) share
/// its quantization; a new batch forgets every one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Input {
    /// The normalized residual stream entering layer `l`'s attention.
    AttentionIn(usize),
    /// Layer `l`'s attention output, before `Wo`.
    AttentionOut(usize),
    /// The normalized residual stream entering layer `l`'s feed-forward block.
    FeedForwardIn(usize),
    /// Layer `l`'s gated hidden state, before `W_down`.
    FeedForwardHidden(usize),
    /// The final norm's output, before the output projection.
    OutputNorm,
    /// The scaled token embeddings (Gemma 4's per-layer projection reads them).
    Embeddings,
    /// Layer `l`'s output before its per-layer input block (Gemma 4).
    LayerOut(usize),
    /// Layer `l`'s gated per-layer hidden state, before `W_proj` (Gemma 4).
    PerLayerHidden(usize),
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
    pub fn new(config: &Config, context: usize, max_batch: usize) -> Result<Scratch, ModelError> {
        let max_batch = max_batch.max(1);
        let rows = |width: usize| try_zeroed::<f32>("scratch buffers", max_batch.saturating_mul(width));
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
        Ok(Scratch {
            max_batch,
            x: rows(config.n_embd)?,
            normed: rows(config.n_embd)?,
            block_out: rows(config.n_embd)?,
            q: rows(config.q_dim())?,
            q_and_gate: rows(if config.gated_attention { 2 * config.q_dim() } else { 0 })?,
            k: rows(config.kv_dim())?,
            v: rows(config.kv_dim())?,
            attn: rows(config.q_dim())?,
            delta,
            per_layer,
            gate: rows(config.n_ff)?,
            up: rows(config.n_ff)?,
            keys: try_zeroed("attention keys", context.saturating_mul(config.kv_dim()))?,
            values: try_zeroed("attention values", context.saturating_mul(config.kv_dim()))?,
            rope: Vec::with_capacity(config.rope_dims / 2),
            quantized: QuantizedInput {
                activations: QuantizedActivations::quantize(ActivationType::F32, &[], 0, 0)?,
                of: None,
            },
            logits: Vec::new(),
        })
    }

    pub fn max_batch(&self) -> usize {
        self.max_batch
    }

    /// The most these buffers hold at once for `config`: the fixed ones as allocated, plus
    /// what grows on first use (quantized activations of the widest row, at most 4 bytes a
    /// value, and one row of logits). With the KV cache, this is the memory a session costs.
    pub fn bytes(&self, config: &Config) -> usize {
        let d = &self.delta;
        let f32s =
            [&self.x, &self.normed, &self.block_out, &self.q, &self.q_and_gate, &self.k, &self.v, &self.attn]
                .into_iter()
                .chain([&self.gate, &self.up, &self.keys, &self.values])
                .chain([&d.qkv, &d.convolved, &d.z, &d.alpha, &d.beta, &d.out, &d.window, &d.by_head])
                .chain([&self.per_layer.inputs, &self.per_layer.row, &self.per_layer.hidden])
                .map(Vec::capacity)
                .sum::<usize>();
        let widest = config.n_embd.max(config.n_ff).max(config.q_dim());
        let grown = self.max_batch.saturating_mul(widest).saturating_add(config.vocab_size);
        f32s.saturating_add(grown).saturating_mul(4).saturating_add(self.rope.capacity() * 8)
    }
}

impl Model {
    /// Runs `tokens` at positions `cache.len()..`, appends their keys and values to `cache`, and
    /// returns logits (`vocab_size` per requested position, row-major).
    pub fn forward<'s>(
        &self,
        cache: &mut Cache,
        scratch: &'s mut Scratch,
        tokens: &[u32],
        logits_for: LogitsFor,
    ) -> Result<&'s [f32], ModelError> {
        let vocab = self.config.vocab_size;
        if let Some(&token) = tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(ModelError::TokenOutOfRange { token, vocab_size: vocab });
        }
        cache.check_room(tokens.len())?;
        let rows_wanted = match logits_for {
            LogitsFor::Last => tokens.len().min(1),
            LogitsFor::All => tokens.len(),
            LogitsFor::None => 0,
        };
        let mut logits = std::mem::take(&mut scratch.logits);
        logits.clear();
        logits
            .try_reserve_exact(rows_wanted * vocab)
            .map_err(|_| ModelError::OutOfMemory { what: "logits", bytes: rows_wanted * vocab * 4 })?;
        let chunks = tokens.len().div_ceil(scratch.max_batch);
        for (i, batch) in tokens.chunks(scratch.max_batch).enumerate() {
            let wanted = match logits_for {
                LogitsFor::Last if i + 1 < chunks => None,
                LogitsFor::Last => Some(batch.len() - 1..batch.len()),
                LogitsFor::All => Some(0..batch.len()),
                LogitsFor::None => None,
            };
            let run = || self.forward_batch(cache, scratch, batch, wanted, &mut logits);
            match batch.len() {
                1 => parallel::decode_step(run)?,
                _ => run()?,
            }
        }
        scratch.logits = logits;
        Ok(&scratch.logits)
    }

    fn forward_batch(
        &self,
        cache: &mut Cache,
        s: &mut Scratch,
        tokens: &[u32],
        logit_rows: Option<std::ops::Range<usize>>,
        logits: &mut Vec<f32>,
    ) -> Result<(), ModelError> {
        let c = &self.config;
        let n = tokens.len();
        let start = cache.len();
        s.quantized.of = None; // Its inputs are another batch's.
        self.embed(tokens, &mut s.x[..n * c.n_embd])?;
        self.per_layer_inputs(tokens, s)?;
        let last = self.weights.layers.len().saturating_sub(1);
        let mut ffn_rows = n;
        // The batch position of the first row the feed-forward block sees.
        let mut first_row = 0;
        for (l, layer) in self.weights.layers.iter().enumerate() {
            let d = c.n_embd;
            rms_norm(&mut s.normed[..n * d], &s.x[..n * d], &layer.attn_norm, c.rms_eps);
            match &layer.mixer {
                Mixer::Attention(attention) => self.attention_block(l, attention, cache, s, n, start)?,
                Mixer::DeltaNet(delta_net) => self.delta_net_block(l, delta_net, cache, s, n)?,
            }
            if let Some(w) = &layer.post_attn_norm {
                rms_norm_in_place(&mut s.block_out[..n * d], w, c.rms_eps);
            }
            add_in_place(&mut s.x[..n * d], &s.block_out[..n * d]);
            if l == last {
                // As llama.cpp's graphs (`inp_out_ids`): the last layer's FFN runs only on the
                // rows whose logits are wanted, moved to the front. The kernels a matmul takes
                // depend on its row count, so this is also what keeps their bits.
                let d = c.n_embd;
                let rows = logit_rows.clone().unwrap_or(0..0);
                s.x.copy_within(rows.start * d..rows.end * d, 0);
                ffn_rows = rows.len();
                first_row = rows.start;
            }
            if ffn_rows > 0 {
                self.feed_forward_block(l, layer, s, ffn_rows)?;
                if let Some(per_layer) = &layer.per_layer {
                    self.per_layer_block(l, per_layer, s, first_row, ffn_rows)?;
                }
                if let Some(scale) = layer.out_scale {
                    s.x[..ffn_rows * d].iter_mut().for_each(|v| *v *= scale);
                }
            }
        }
        cache.set_len(start + n);
        if let Some(rows) = logit_rows {
            let d = c.n_embd;
            let m = rows.len();
            rms_norm(&mut s.normed[..m * d], &s.x[..m * d], &self.weights.output_norm, c.rms_eps);
            let at = logits.len();
            logits.resize(at + m * c.vocab_size, 0.0);
            let normed = &s.normed[..m * d];
            let quantized = &mut s.quantized;
            project(
                self.file(),
                Input::OutputNorm,
                normed,
                quantized,
                &self.weights.output,
                &mut logits[at..],
            )?;
            // Gemma 2's final soft cap, as llama.cpp's graph spells it: scale, tanh, scale.
            if let Some(cap) = c.final_softcap {
                let inverse = 1.0 / cap;
                logits[at..].iter_mut().for_each(|v| *v = (*v * inverse).tanh() * cap);
            }
        }
        Ok(())
    }

    /// Token embeddings (rows of `token_embd`), scaled for Gemma.
    fn embed(&self, tokens: &[u32], x: &mut [f32]) -> Result<(), ModelError> {
        let table = &self.weights.token_embd;
        for (&token, row) in tokens.iter().zip(x.chunks_exact_mut(self.config.n_embd)) {
            dequantize_row(table.weight_type, table.row_bytes(self.file(), token as usize), row)?;
            if let Some(scale) = self.config.embedding_scale {
                row.iter_mut().for_each(|v| *v *= scale);
            }
        }
        Ok(())
    }

    /// `block_out = Wo · attention(rope(norm(Wq·h)), rope(norm(Wk·h)), Wv·h)` for the
    /// normalized input `h` (times `sigmoid(gate)` where queries come with a gate).
    fn attention_block(
        &self,
        l: usize,
        layer: &AttentionWeights,
        cache: &mut Cache,
        s: &mut Scratch,
        n: usize,
        start: usize,
    ) -> Result<(), ModelError> {
        let c = &self.config;
        let shape = c.layer(l);
        let (d, hd) = (c.n_embd, shape.head_dim);
        let (qd, kvd) = (c.n_head * hd, shape.kv_dim());
        let file = self.file();
        let h = &s.normed[..n * d];
        let (q, k, v) = (&mut s.q[..n * qd], &mut s.k[..n * kvd], &mut s.v[..n * kvd]);
        // Gated attention projects each head's query and gate together; the queries are
        // gathered out of that.
        let q_out = if c.gated_attention { &mut s.q_and_gate[..2 * n * qd] } else { &mut *q };
        let input = Input::AttentionIn(l);
        match (&layer.wk, &layer.wv) {
            (Some(wk), Some(wv)) => project_many(
                file,
                input,
                h,
                &mut s.quantized,
                [(&layer.wq, q_out), (wk, &mut *k), (wv, &mut *v)],
            )?,
            // Gemma 4 without `attn_v`: the values are the keys' projection, before its norm.
            (Some(wk), None) => {
                project_many(file, input, h, &mut s.quantized, [(&layer.wq, q_out), (wk, &mut *k)])?;
                v.copy_from_slice(k);
            }
            // A layer that reads another's keys and values projects only its queries.
            _ => project(file, input, h, &mut s.quantized, &layer.wq, q_out)?,
        }
        let keeps_kv = layer.wk.is_some();
        if c.gated_attention {
            for (query, both) in q.chunks_exact_mut(hd).zip(s.q_and_gate.chunks_exact(2 * hd)) {
                query.copy_from_slice(&both[..hd]);
            }
        }

        // Qwen2 adds biases to the projections (llama.cpp: ggml_add after each mul_mat).
        for (bias, out, width) in
            [(&layer.bq, &mut *q, qd), (&layer.bk, &mut *k, kvd), (&layer.bv, &mut *v, kvd)]
        {
            if let Some(bias) = bias {
                out.chunks_exact_mut(width).for_each(|row| add_in_place(row, bias));
            }
        }
        // Qwen3 and Gemma 3 normalize each head of Q and K before RoPE.
        if let Some(w) = &layer.q_norm {
            rms_norm_in_place(q, w, c.rms_eps);
        }
        if let Some(w) = &layer.k_norm {
            rms_norm_in_place(k, w, c.rms_eps);
        }
        // Gemma 4 normalizes each value head too, without a weight.
        if c.normalize_values && keeps_kv {
            for head in v.chunks_exact_mut(hd) {
                let scale = rms_scale(head, c.rms_eps);
                head.iter_mut().for_each(|x| *x *= scale);
            }
        }
        let rope = c.rope_for_layer(l);
        let freq_factors = self
            .weights
            .rope_factors(cache.capacity() > c.rope_original_context)
            .filter(|_| c.uses_rope_factors(l));
        for t in (0..n).filter(|_| c.uses_rope(l)) {
            rope_table(&mut s.rope, start + t, rope, shape.rope_dims, freq_factors);
            for &pair in &c.rope_unrotated_pairs {
                s.rope[pair] = (rope.attn_factor, 0.0);
            }
            apply_rope(&mut q[t * qd..(t + 1) * qd], hd, &s.rope, c.rope_style);
            if keeps_kv {
                apply_rope(&mut k[t * kvd..(t + 1) * kvd], hd, &s.rope, c.rope_style);
            }
        }
        let score_scale = if c.scale_queries {
            q.iter_mut().for_each(|v| *v *= c.attention_scale);
            1.0
        } else {
            c.attention_scale
        };

        if keeps_kv {
            cache.store(l, start, k, v);
        }
        let attn = &mut s.attn[..n * qd];
        self.attend(l, cache, [&mut s.keys, &mut s.values], q, attn, start, score_scale);

        if c.gated_attention {
            for (head, both) in attn.chunks_exact_mut(hd).zip(s.q_and_gate.chunks_exact(2 * hd)) {
                head.iter_mut().zip(&both[hd..]).for_each(|(a, &gate)| *a *= sigmoid(gate));
            }
        }
        let out = &mut s.block_out[..n * d];
        project(file, Input::AttentionOut(l), attn, &mut s.quantized, &layer.wo, out)?;
        Ok(())
    }

    /// Qwen3.5's gated DeltaNet: `block_out = W_out · (norm(delta_rule(q, k, v)) ⊙ silu(z))`,
    /// where q, k, v come from a causal convolution over `W_qkv · h`, and the rule's decay and
    /// beta from `W_alpha · h` and `W_beta · h`. The convolution's and the rule's state live
    /// in the cache and carry over from the previous batch.
    fn delta_net_block(
        &self,
        l: usize,
        layer: &DeltaNetWeights,
        cache: &mut Cache,
        s: &mut Scratch,
        n: usize,
    ) -> Result<(), ModelError> {
        let c = &self.config;
        let shape = c.delta_net.expect("recurrent layers have a DeltaNet shape");
        let (d, hd) = (c.n_embd, shape.head_dim);
        let b = &mut s.delta;
        let (qkv, z) = (&mut b.qkv[..n * shape.conv_dim()], &mut b.z[..n * shape.value_dim()]);
        let (alpha, beta) = (&mut b.alpha[..n * shape.v_heads], &mut b.beta[..n * shape.v_heads]);
        project_many(
            self.file(),
            Input::AttentionIn(l),
            &s.normed[..n * d],
            &mut s.quantized,
            [
                (&layer.wqkv, &mut *qkv),
                (&layer.wz, &mut *z),
                (&layer.w_beta, &mut *beta),
                (&layer.w_alpha, &mut *alpha),
            ],
        )?;
        gates(&layer.dt_bias, &layer.a, alpha, beta);

        let (conv_state, ssm_state) = cache.recurrent_layer(l);
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
        let block_out = &mut s.block_out[..n * d];
        project(self.file(), Input::AttentionOut(l), out, &mut s.quantized, &layer.w_out, block_out)?;
        Ok(())
    }

    /// Causal (and for sliding layers, windowed) attention of `n` queries at positions
    /// `start..start + n` over the cached keys and values, with grouped KV heads.
    #[allow(clippy::too_many_arguments)]
    fn attend(
        &self,
        l: usize,
        cache: &Cache,
        [keys32, values32]: [&mut Vec<f32>; 2],
        q: &[f32],
        out: &mut [f32],
        start: usize,
        scale: f32,
    ) {
        let c = &self.config;
        let shape = c.layer(l);
        let (hd, kvd) = (shape.head_dim, shape.kv_dim());
        let qd = c.n_head * hd;
        let n = q.len() / qd;
        let end = start + n;
        let scoring = Scoring::new(scale, c.attn_softcap);
        let window = if c.is_sliding(l) { c.sliding_window } else { None };
        let first_needed = window.map_or(0, |w| (start + 1).saturating_sub(w));
        let (keys16, values16) = cache.layer(l, end);
        let group = c.n_head / shape.n_head_kv;
        let tiled = n >= TILED_MIN_QUERIES;
        if tiled {
            // The tiled kernel reads every key and value once per query: widen them to f32 once,
            // for every head and query. (The one-pass kernel reads the cached halves in place.)
            widen(&keys16[first_needed * kvd..], &mut keys32[first_needed * kvd..end * kvd]);
            widen(&values16[first_needed * kvd..], &mut values32[first_needed * kvd..end * kvd]);
        }
        let (keys, values) = (&keys32[..], &values32[..]);
        // One task per run of (query, head) pairs: each writes only its heads' outputs.
        parallel::for_each_part(out, hd, MIN_HEADS_PER_PART, |first_head, part_out| {
            let mut scratch = vec![0.0f32; 2 * hd];
            let (query16, accumulator) = scratch.split_at_mut(hd);
            for (j, head_out) in part_out.chunks_exact_mut(hd).enumerate() {
                let (t, h) = ((first_head + j) / c.n_head, (first_head + j) % c.n_head);
                let pos = start + t;
                let positions = window.map_or(0, |w| (pos + 1).saturating_sub(w))..pos + 1;
                let (query, offset) = (&q[t * qd + h * hd..][..hd], (h / group) * hd);
                if tiled {
                    let kv = HeadView { keys, values, stride: kvd, offset };
                    attend_head_f32(query, &kv, positions, scoring, head_out);
                } else {
                    let kv = HeadView { keys: keys16, values: values16, stride: kvd, offset };
                    attend_head_f16_accumulator(
                        query,
                        &kv,
                        positions,
                        scoring,
                        query16,
                        accumulator,
                        head_out,
                    );
                }
            }
        });
    }

    /// `x += post_norm(W_down · (act(W_gate · h) ⊙ (W_up · h)))`, `h = norm(x)`.
    fn feed_forward_block(
        &self,
        l: usize,
        layer: &LayerWeights,
        s: &mut Scratch,
        n: usize,
    ) -> Result<(), ModelError> {
        let c = &self.config;
        let (d, ff) = (c.n_embd, c.layer(l).n_ff);
        let file = self.file();
        let h = &mut s.normed[..n * d];
        rms_norm(h, &s.x[..n * d], &layer.ffn_norm, c.rms_eps);
        let (gate, up) = (&mut s.gate[..n * ff], &mut s.up[..n * ff]);
        project_many(
            file,
            Input::FeedForwardIn(l),
            h,
            &mut s.quantized,
            [(&layer.w_gate, &mut *gate), (&layer.w_up, &mut *up)],
        )?;
        match c.activation {
            Activation::GeGlu => geglu(gate, up),
            Activation::SwiGlu => swiglu(gate, up),
        }
        let out = &mut s.block_out[..n * d];
        project(file, Input::FeedForwardHidden(l), gate, &mut s.quantized, &layer.w_down, out)?;
        if let Some(w) = &layer.post_ffn_norm {
            rms_norm_in_place(out, w, c.rms_eps);
        }
        add_in_place(&mut s.x[..n * d], out);
        Ok(())
    }

    /// Gemma 4's per-layer inputs of a batch (`n × n_layer × width`): each token's row of the
    /// per-layer embeddings, scaled by √width, plus the normalized projection of its scaled
    /// embedding (`x`), the sum scaled by 1/√2.
    fn per_layer_inputs(&self, tokens: &[u32], s: &mut Scratch) -> Result<(), ModelError> {
        let (c, Some(input)) = (&self.config, &self.weights.per_layer_input) else { return Ok(()) };
        let (d, n) = (c.n_embd, tokens.len());
        let width = input.proj_norm.len();
        let all = width * c.n_layer;
        let ple = &mut s.per_layer.inputs[..n * all];
        project(self.file(), Input::Embeddings, &s.x[..n * d], &mut s.quantized, &input.model_proj, ple)?;
        let projection_scale = 1.0 / (d as f32).sqrt();
        ple.iter_mut().for_each(|v| *v *= projection_scale);
        rms_norm_in_place(ple, &input.proj_norm, c.rms_eps);
        let (embedding_scale, input_scale) = ((width as f32).sqrt(), 1.0 / 2f32.sqrt());
        let row = &mut s.per_layer.row;
        row.resize(all, 0.0);
        for (&token, ple) in tokens.iter().zip(ple.chunks_exact_mut(all)) {
            dequantize_row(
                input.token_embd.weight_type,
                input.token_embd.row_bytes(self.file(), token as usize),
                row,
            )?;
            for (p, &e) in ple.iter_mut().zip(row.iter()) {
                *p = (*p + e * embedding_scale) * input_scale;
            }
        }
        Ok(())
    }

    /// Gemma 4's per-layer input block on `n` rows of the residual stream, which hold the
    /// batch's positions `first..first + n`: `x += norm(W_proj · (gelu(W_gate · x) ⊙ input))`.
    fn per_layer_block(
        &self,
        l: usize,
        weights: &PerLayerWeights,
        s: &mut Scratch,
        first: usize,
        n: usize,
    ) -> Result<(), ModelError> {
        let c = &self.config;
        let d = c.n_embd;
        let width = weights.gate.rows;
        let all = width * c.n_layer;
        let hidden = &mut s.per_layer.hidden[..n * width];
        let file = self.file();
        project(file, Input::LayerOut(l), &s.x[..n * d], &mut s.quantized, &weights.gate, hidden)?;
        let inputs = &s.per_layer.inputs[first * all..(first + n) * all];
        for (row, input) in hidden.chunks_exact_mut(width).zip(inputs.chunks_exact(all)) {
            let input = &input[l * width..(l + 1) * width];
            row.iter_mut().zip(input).for_each(|(h, &i)| *h = gelu(*h) * i);
        }
        let out = &mut s.block_out[..n * d];
        project(file, Input::PerLayerHidden(l), hidden, &mut s.quantized, &weights.proj, out)?;
        rms_norm_in_place(out, &weights.post_norm, c.rms_eps);
        add_in_place(&mut s.x[..n * d], out);
        Ok(())
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
    let wanted = matrices[0].0.weight_type.activation_type();
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

/// Converts cached f16 keys or values to f32, in parallel parts for long contexts.
fn widen(src: &[f16], dst: &mut [f32]) {
    parallel::for_each_part(dst, 1, 64 * 1024, |first, dst| kv_rows::widen(&src[first..], dst));
}
