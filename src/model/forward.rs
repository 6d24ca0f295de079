//! The forward pass, top to bottom: embed → for each layer (a mixer block: attention or gated
//! DeltaNet; a feed-forward block) → final norm → logits (an encoder, BERT, stops at its last
//! layer's output: it only embeds). It is written once, over the
//! operations of a [`Backend`], as one layer builder per family of architectures; where
//! architectures of a family differ (Q/K norm, biases, gates, RoPE, soft caps) the row of
//! [`super::arch::ARCHITECTURES`] says so through [`Config`].
//!
//! A call processes a batch of tokens at once: every projection is a matrix × matrix product
//! (each weight block is read once for all rows), so prefill costs far less per token than decode.

use std::ops::Range;

use super::Model;
use super::arch::Family;
use super::backend::{Backend, Buf, Input, LayerAttention, LayerRope, LogitsHead, QkHeads};
use super::cache::Cache;
use super::config::Config;
use super::cpu::{Cpu, Scratch};
use super::error::ModelError;
use super::weights::{AttentionWeights, Ffn, LayerWeights, Mixer, Weights};
use crate::parallel;

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

/// What a batch's rows are made of.
#[derive(Clone, Copy, Debug)]
pub(crate) enum BatchInput<'a> {
    /// Tokens, looked up in the embedding table (and scaled where the model scales them).
    Tokens(&'a [u32]),
    /// Rows given whole, [`Config::input_width`] each (an image's embeddings, and Qwen3-VL's
    /// deepstack slices after them), taken as they are; where `causal` is false they attend to
    /// each other both ways.
    Rows { rows: &'a [f32], causal: bool },
}

impl BatchInput<'_> {
    /// Rows in the batch, rows given whole being `row_width` wide.
    pub(crate) fn len(&self, row_width: usize) -> usize {
        match self {
            BatchInput::Tokens(tokens) => tokens.len(),
            BatchInput::Rows { rows, .. } => rows.len() / row_width.max(1),
        }
    }
}

/// Columns `from..from + width` of each of `rows` (rows `stride` wide), side by side.
fn columns(rows: &[f32], stride: usize, from: usize, width: usize) -> Vec<f32> {
    rows.chunks_exact(stride).flat_map(|row| &row[from..from + width]).copied().collect()
}

/// Where a batch's rows stand in the model's positions, where those are not their cache slots:
/// under M-RoPE (Qwen3.5) a picture's rows stand at its first position along the text and at
/// their row and column of its grid across, and the text after it moves on by the grid's longer
/// side only (mtmd's `MTMD_POS_TYPE_MROPE`). Attention still runs over cache slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Row `t` at position `start + t` in every stream.
    Text { start: usize },
    /// A picture's rows: row `t` is row `first_row + t` of a grid `width` wide (reading order), at
    /// `(start, start + its row, start + its column)`.
    Grid { start: usize, width: usize, first_row: usize },
}

impl Placement {
    /// The positions `[text, row, column]` of the batch's row `t`.
    pub fn streams(self, t: usize) -> [usize; 3] {
        match self {
            Placement::Text { start } => [start + t; 3],
            Placement::Grid { start, width, first_row } => {
                let cell = first_row + t;
                [start, start + cell / width.max(1), start + cell % width.max(1)]
            }
        }
    }

    /// Where the rows from `rows` on stand: the same placement `rows` further on.
    pub fn after(self, rows: usize) -> Placement {
        match self {
            Placement::Text { start } => Placement::Text { start: start + rows },
            Placement::Grid { start, width, first_row } => {
                Placement::Grid { start, width, first_row: first_row + rows }
            }
        }
    }
}

/// What a forward pass gives for the rows it is asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Head {
    /// The output projection's logits.
    Logits,
    /// The output norm's rows, before the projection (llama.cpp's `t_embd`: what embeddings
    /// pool).
    Hidden,
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
        self.run(cache, scratch, BatchInput::Tokens(tokens), None, logits_for, Head::Logits)
    }

    /// As [`Model::forward`] for tokens or rows at `placement` (`None`: their cache slots; see
    /// [`Placement`]).
    pub(crate) fn forward_placed<'s>(
        &self,
        cache: &mut Cache,
        scratch: &'s mut Scratch,
        input: BatchInput,
        placement: Option<Placement>,
        logits_for: LogitsFor,
    ) -> Result<&'s [f32], ModelError> {
        if let BatchInput::Rows { rows, .. } = input {
            self.check_rows(rows)?;
        }
        self.run(cache, scratch, input, placement, logits_for, Head::Logits)
    }

    /// As [`Model::forward`] for rows given whole instead of tokens (`n_embd` each: an image's
    /// embeddings, which a language model takes unscaled), in one batch; `causal: false` lets
    /// them attend to each other both ways, as Gemma 3's image tokens do.
    pub fn forward_rows<'s>(
        &self,
        cache: &mut Cache,
        scratch: &'s mut Scratch,
        rows: &[f32],
        causal: bool,
        logits_for: LogitsFor,
    ) -> Result<&'s [f32], ModelError> {
        self.check_rows(rows)?;
        self.run(cache, scratch, BatchInput::Rows { rows, causal }, None, logits_for, Head::Logits)
    }

    fn check_rows(&self, rows: &[f32]) -> Result<(), ModelError> {
        let d = self.config.input_width();
        if rows.is_empty() || !rows.len().is_multiple_of(d) {
            return Err(ModelError::BadImage(format!(
                "{} values are not rows of the model's width {d}",
                rows.len()
            )));
        }
        Ok(())
    }

    /// As [`Model::forward`], but returns the final hidden states (`n_embd` per requested
    /// position, after the output norm) instead of logits: what an embedding pools.
    pub fn hidden_states<'s>(
        &self,
        cache: &mut Cache,
        scratch: &'s mut Scratch,
        tokens: &[u32],
        rows_for: LogitsFor,
    ) -> Result<&'s [f32], ModelError> {
        self.run(cache, scratch, BatchInput::Tokens(tokens), None, rows_for, Head::Hidden)
    }

    /// The final hidden states (after the output norm) of every row of several independent
    /// sequences, run as one batch into the empty `cache`: each with its own positions from 0,
    /// attending to its own tokens only (llama.cpp's sequence ids). What embeddings of short
    /// texts run as, so that every weight block is read once for all of them. Together they
    /// must fit one batch of `scratch` and the cache; a model with recurrent layers (whose
    /// state would run on from one sequence into the next) is not packed by its callers.
    pub fn hidden_states_packed<'s>(
        &self,
        cache: &mut Cache,
        scratch: &'s mut Scratch,
        sequences: &[&[u32]],
    ) -> Result<&'s [f32], ModelError> {
        let tokens: Vec<u32> = sequences.concat();
        self.check_tokens(&tokens)?;
        cache.truncate(0);
        cache.check_room(tokens.len())?;
        if tokens.len() > scratch.max_batch() {
            return Err(ModelError::ContextFull { needed: tokens.len(), capacity: scratch.max_batch() });
        }
        let starts: Vec<usize> = sequences
            .iter()
            .scan(0, |first, sequence| {
                let start = *first;
                *first += sequence.len();
                Some(std::iter::repeat_n(start, sequence.len()))
            })
            .flatten()
            .collect();
        let mut out = std::mem::take(&mut scratch.logits);
        out.clear();
        let n = tokens.len();
        let mut run = || {
            let mut cpu = Cpu::packed(self, cache, scratch, &starts);
            forward_batch(&mut cpu, self, BatchInput::Tokens(&tokens), Some(0..n), None)
        };
        match n {
            1 => parallel::decode_step(run)?,
            _ => run()?,
        }
        out.extend_from_slice(scratch.normed(n * self.config.n_embd));
        scratch.logits = out;
        Ok(&scratch.logits)
    }

    fn check_tokens(&self, tokens: &[u32]) -> Result<(), ModelError> {
        let vocab_size = self.config.vocab_size;
        match tokens.iter().find(|&&t| t as usize >= vocab_size) {
            Some(&token) => Err(ModelError::TokenOutOfRange { token, vocab_size }),
            None => Ok(()),
        }
    }

    fn run<'s>(
        &self,
        cache: &mut Cache,
        scratch: &'s mut Scratch,
        input: BatchInput,
        placement: Option<Placement>,
        logits_for: LogitsFor,
        head: Head,
    ) -> Result<&'s [f32], ModelError> {
        let (vocab, d) = (self.config.vocab_size, self.config.n_embd);
        let row_width = self.config.input_width();
        if let BatchInput::Tokens(tokens) = input {
            self.check_tokens(tokens)?;
        }
        let n = input.len(row_width);
        cache.check_room(n)?;
        if head == Head::Logits && self.weights.output.is_none() {
            return Err(ModelError::EmbeddingOnly(self.config.architecture.name().into()));
        }
        // Attention over the whole text (or a block of rows attended both ways) needs all of
        // it in one batch.
        let both_ways = !self.config.causal || matches!(input, BatchInput::Rows { causal: false, .. });
        if both_ways && n > scratch.max_batch() {
            return Err(ModelError::ContextFull { needed: n, capacity: scratch.max_batch() });
        }
        let rows_wanted = match logits_for {
            LogitsFor::Last => n.min(1),
            LogitsFor::All => n,
            LogitsFor::None => 0,
        };
        let width = match head {
            Head::Logits => vocab,
            Head::Hidden => d,
        };
        let mut out = std::mem::take(&mut scratch.logits);
        out.clear();
        out.try_reserve_exact(rows_wanted * width)
            .map_err(|_| ModelError::OutOfMemory { what: "logits", bytes: rows_wanted * width * 4 })?;
        let max_batch = scratch.max_batch();
        let batches: Vec<BatchInput> = match input {
            BatchInput::Tokens(tokens) => tokens.chunks(max_batch).map(BatchInput::Tokens).collect(),
            BatchInput::Rows { rows, causal } => {
                rows.chunks(max_batch * row_width).map(|rows| BatchInput::Rows { rows, causal }).collect()
            }
        };
        let chunks = batches.len();
        let mut done = 0;
        for (i, batch) in batches.into_iter().enumerate() {
            let len = batch.len(row_width);
            let placement = placement.map(|p| p.after(done));
            done += len;
            let wanted = match logits_for {
                LogitsFor::Last if i + 1 < chunks => None,
                LogitsFor::Last => Some(len - 1..len),
                LogitsFor::All => Some(0..len),
                LogitsFor::None => None,
            };
            let rows = wanted.as_ref().map_or(0, |r| r.len());
            let run = || {
                let mut cpu = Cpu::new(self, cache, scratch, len);
                cpu.place(placement);
                let logits = (head == Head::Logits).then_some(&mut out);
                forward_batch(&mut cpu, self, batch, wanted, logits)
            };
            match len {
                1 => parallel::decode_step(run)?,
                _ => run()?,
            }
            if head == Head::Hidden {
                out.extend_from_slice(scratch.normed(rows * width));
            }
        }
        scratch.logits = out;
        Ok(&scratch.logits)
    }
}

/// One batch through every layer on backend `b`; the logits of the batch's rows `logit_rows`
/// are appended to `logits`. Without `logits`, the pass stops at the output norm of those
/// rows (`Normed`), for the caller to read.
pub(crate) fn forward_batch(
    b: &mut impl Backend,
    model: &Model,
    input: BatchInput,
    logit_rows: Option<Range<usize>>,
    logits: Option<&mut Vec<f32>>,
) -> Result<(), ModelError> {
    let (c, w) = (&model.config, &model.weights);
    let causal = match input {
        BatchInput::Tokens(tokens) => {
            b.embed(tokens)?;
            if w.per_layer_input.is_some() {
                b.per_layer_inputs(tokens)?;
            }
            c.causal
        }
        BatchInput::Rows { rows, causal } => {
            match c.deepstack_layers {
                0 => b.embed_rows(rows)?,
                _ => b.embed_rows(&columns(rows, c.input_width(), 0, c.n_embd))?,
            }
            if w.per_layer_input.is_some() {
                // llama.cpp gives rows without tokens (an image's) the per-layer inputs of
                // token 0, its padding token, beside their own projection.
                b.per_layer_inputs(&vec![0; rows.len() / c.n_embd.max(1)])?;
            }
            causal && c.causal
        }
    };
    // Qwen3-VL's deepstack: after layer l, a picture's rows take their slice l + 1 (tokens'
    // slices are zeros in llama.cpp, which leaves them as they are).
    let deepstack = match input {
        BatchInput::Rows { rows, .. } if c.deepstack_layers > 0 => Some(rows),
        _ => None,
    };
    if let Some(input) = &w.encoder_input {
        b.encoder_input(input)?;
        b.layer_norm(Buf::X, &input.norm);
    }
    let last = w.layers.len().saturating_sub(1);
    for (l, layer) in w.layers.iter().enumerate() {
        b.layer(l);
        // As llama.cpp's graphs (`inp_out_ids`): the last layer's feed-forward block runs only
        // on the rows whose logits are wanted. The kernels a matmul takes depend on its row
        // count, so this is also what keeps their bits.
        let keep = (l == last).then(|| logit_rows.clone().unwrap_or(0..0));
        let at = Layer::new(c, w, l, b.capacity(), causal);
        match c.spec().family {
            Family::PreNorm => pre_norm_layer(b, &at, layer, keep)?,
            Family::Sandwich => sandwich_layer(b, &at, layer, keep)?,
            Family::Encoder => encoder_layer(b, &at, layer, keep)?,
        }
        if let Some(rows) = deepstack.filter(|_| l < c.deepstack_layers) {
            b.add_rows(&columns(rows, c.input_width(), (l + 1) * c.n_embd, c.n_embd))?;
        }
    }
    b.commit();
    let Some(rows) = logit_rows else { return Ok(()) };
    match &w.output {
        Some(head) => {
            b.norm(Buf::Normed, Buf::X, &head.norm);
            if let Some(logits) = logits {
                let at = logits.len();
                logits.resize(at + rows.len() * c.vocab_size, 0.0);
                let head = LogitsHead { divisor: c.logit_scale, softcap: c.final_softcap };
                b.logits(&mut logits[at..], &head)?;
            }
        }
        // An encoder's hidden states are its last layer's output.
        None if logits.is_none() => b.copy(Buf::Normed, Buf::X),
        None => return Err(ModelError::EmbeddingOnly(c.architecture.name().into())),
    }
    Ok(())
}

/// What a layer of this pass is, resolved once from the architecture, the layer's index and the
/// cache's size: the backends only apply it.
struct Layer<'a> {
    c: &'a Config,
    l: usize,
    rope: Option<LayerRope<'a>>,
    /// The attention's facts but its score scale (which the block decides).
    attention: LayerAttention<'a>,
}

impl<'a> Layer<'a> {
    fn new(c: &'a Config, w: &'a Weights, l: usize, capacity: usize, causal: bool) -> Layer<'a> {
        let shape = c.layer(l);
        let rope = c.uses_rope(l).then(|| LayerRope {
            rope: c.rope_for_layer(l),
            dims: shape.rope_dims,
            // llama.cpp's `get_rope_factors`: LongRoPE's long factors once the cache passes the
            // original context.
            factors: w.rope_factors(capacity > c.rope_original_context).filter(|_| c.uses_rope_factors(l)),
            streams: &c.rope_streams,
            style: c.rope_style,
        });
        let attention = LayerAttention {
            score_scale: c.attention_scale,
            softcap: c.attn_softcap,
            window: if c.is_sliding(l) { c.sliding_window } else { None },
            kv_layer: shape.kv_from,
            sinks: match &w.layers[l].mixer {
                Mixer::Attention(attention) => attention.sinks.as_deref(),
                _ => None,
            },
            causal,
        };
        Layer { c, l, rope, attention }
    }
}

/// Llama-like layers (Qwen3, Qwen2, Llama, SmolLM3, Phi-3) and the Qwen3.5 hybrid, whose
/// mixer is attention in some layers and a gated DeltaNet in the others:
/// `x += mixer(norm(x))`, then `x += ffn(norm(x))`.
fn pre_norm_layer(
    b: &mut impl Backend,
    at: &Layer,
    layer: &LayerWeights,
    keep: Option<Range<usize>>,
) -> Result<(), ModelError> {
    b.norm(Buf::Normed, Buf::X, &layer.attn_norm.weight);
    mixer(b, at, layer, BlockEnd::Residual)?;
    if !rows_left(b, keep) {
        return Ok(());
    }
    b.norm(Buf::Normed, Buf::X, &layer.ffn_norm.weight);
    ffn_block(b, at.c, &layer.ffn, BlockEnd::Residual)
}

/// Where a block's output goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockEnd {
    /// It stays in `BlockOut` (for a norm, or an encoder's add, after it).
    BlockOut,
    /// It is added to `X` (scaled first where the architecture scales blocks' outputs).
    Residual,
}

impl BlockEnd {
    /// Whether the block's last projection can add into `X` itself: the residual add with
    /// nothing between it and the projection.
    fn direct(self, c: &Config) -> bool {
        self == BlockEnd::Residual && c.residual_scale.is_none()
    }
}

/// Finishes a block whose output is in `BlockOut`: `X += BlockOut` where it ends in the
/// residual stream, scaled first where the architecture scales blocks' outputs (Granite).
fn end_block(b: &mut impl Backend, c: &Config, end: BlockEnd) {
    if end == BlockEnd::BlockOut {
        return;
    }
    if let Some(scale) = c.residual_scale {
        b.scale(Buf::BlockOut, scale);
    }
    b.add(Buf::X, Buf::BlockOut);
}

/// The layer's feed-forward block of `Normed` (one FFN, or a mixture of experts), ending as
/// `end` says.
fn ffn_block(b: &mut impl Backend, c: &Config, ffn: &Ffn, end: BlockEnd) -> Result<(), ModelError> {
    match ffn {
        Ffn::Dense(ffn) if end.direct(c) => return b.feed_forward_residual(ffn),
        Ffn::Dense(ffn) => b.feed_forward(ffn)?,
        Ffn::Experts(experts) => b.experts(experts)?,
    }
    end_block(b, c, end);
    Ok(())
}

/// BERT-like encoders, normalized after each residual add (LayerNorm with a bias):
/// `x = norm(x + attention(x))`, then `x = norm(x + ffn(x))`.
fn encoder_layer(
    b: &mut impl Backend,
    at: &Layer,
    layer: &LayerWeights,
    keep: Option<Range<usize>>,
) -> Result<(), ModelError> {
    // The blocks read `Normed`, which an encoder's input is without a norm of its own.
    b.copy(Buf::Normed, Buf::X);
    mixer(b, at, layer, BlockEnd::BlockOut)?;
    b.add(Buf::X, Buf::BlockOut);
    if !rows_left(b, keep) {
        return Ok(());
    }
    b.layer_norm(Buf::X, &layer.attn_norm);
    b.copy(Buf::Normed, Buf::X);
    ffn_block(b, at.c, &layer.ffn, BlockEnd::BlockOut)?;
    b.add(Buf::X, Buf::BlockOut);
    b.layer_norm(Buf::X, &layer.ffn_norm);
    Ok(())
}

/// Gemma 2, 3 and 4: each block's output normalized again before its residual add, GeGLU,
/// and for Gemma 4 a per-layer input block and a scale of the layer's output:
/// `x += norm(attention(norm(x)))`, `x += norm(ffn(norm(x)))`, `x += per_layer(x)`, `x *= s`.
fn sandwich_layer(
    b: &mut impl Backend,
    at: &Layer,
    layer: &LayerWeights,
    keep: Option<Range<usize>>,
) -> Result<(), ModelError> {
    b.norm(Buf::Normed, Buf::X, &layer.attn_norm.weight);
    mixer(b, at, layer, BlockEnd::BlockOut)?;
    if let Some(weight) = &layer.post_attn_norm {
        b.norm(Buf::BlockOut, Buf::BlockOut, weight);
    }
    b.add(Buf::X, Buf::BlockOut);
    if !rows_left(b, keep) {
        return Ok(());
    }
    b.norm(Buf::Normed, Buf::X, &layer.ffn_norm.weight);
    ffn_block(b, at.c, &layer.ffn, BlockEnd::BlockOut)?;
    if let Some(weight) = &layer.post_ffn_norm {
        b.norm(Buf::BlockOut, Buf::BlockOut, weight);
    }
    b.add(Buf::X, Buf::BlockOut);
    if let Some(per_layer) = &layer.per_layer {
        b.per_layer(per_layer)?;
    }
    if let Some(scale) = layer.out_scale {
        b.scale(Buf::X, scale);
    }
    Ok(())
}

/// The layer's mixer of `Normed` (attention, a gated DeltaNet, a short convolution or
/// Mamba-2), ending as `end` says.
fn mixer(b: &mut impl Backend, at: &Layer, layer: &LayerWeights, end: BlockEnd) -> Result<(), ModelError> {
    match &layer.mixer {
        Mixer::Attention(attention) => return attention_block(b, at, attention, end),
        Mixer::DeltaNet(delta_net) => b.delta_net(delta_net)?,
        Mixer::ShortConv(short_conv) => b.short_conv(short_conv)?,
        Mixer::Mamba2(mamba2) => b.mamba2(mamba2)?,
    }
    end_block(b, at.c, end);
    Ok(())
}

/// In the last layer (`keep` given), keeps only the rows whose logits are wanted; whether any
/// row is left for the rest of the layer.
fn rows_left(b: &mut impl Backend, keep: Option<Range<usize>>) -> bool {
    if let Some(rows) = keep {
        b.keep_rows(rows);
    }
    b.rows() > 0
}

/// `Wo · attention(rope(norm(Wq·h)), rope(norm(Wk·h)), Wv·h)` for the normalized input `h`
/// (times `sigmoid(gate)` where queries come with a gate), ending as `end` says.
fn attention_block(
    b: &mut impl Backend,
    at: &Layer,
    w: &AttentionWeights,
    end: BlockEnd,
) -> Result<(), ModelError> {
    let (c, l) = (at.c, at.l);
    // Gated attention projects each head's query and gate together; the queries are then
    // gathered out of that.
    let q = if c.gated_attention { Buf::QGate } else { Buf::Q };
    let input = Input::AttentionIn(l);
    match (&w.wk, &w.wv) {
        (Some(wk), Some(wv)) => b.project(Buf::Normed, input, [(&w.wq, q), (wk, Buf::K), (wv, Buf::V)])?,
        // Gemma 4 without `attn_v`: the values are the keys' projection, before its norm.
        (Some(wk), None) => {
            b.project(Buf::Normed, input, [(&w.wq, q), (wk, Buf::K)])?;
            b.copy(Buf::V, Buf::K);
        }
        // A layer that reads another's keys and values projects only its queries.
        _ => b.project(Buf::Normed, input, [(&w.wq, q)])?,
    }
    let keeps_kv = w.wk.is_some();
    if c.gated_attention {
        b.split_gate();
    }
    // Qwen2 adds biases to the projections (llama.cpp: ggml_add after each mul_mat).
    for (bias, buf) in [(&w.bq, Buf::Q), (&w.bk, Buf::K), (&w.bv, Buf::V)] {
        if let Some(bias) = bias {
            b.add_bias(buf, bias);
        }
    }
    // Gemma 4 normalizes each value head, without a weight.
    if c.normalize_values && keeps_kv {
        b.norm_unweighted(Buf::V, c.layer(l).head_dim);
    }
    // Qwen3 and Gemma 3 normalize each head of Q and K before RoPE.
    b.qk_heads(&QkHeads {
        q_norm: w.q_norm.as_deref(),
        k_norm: w.k_norm.as_deref(),
        rope: at.rope.as_ref(),
        keys: keeps_kv,
    });
    let score_scale = if c.scale_queries {
        b.scale(Buf::Q, c.attention_scale);
        1.0
    } else {
        c.attention_scale
    };
    b.attend(keeps_kv, &LayerAttention { score_scale, ..at.attention });
    if c.gated_attention {
        b.apply_gate();
    }
    if end.direct(c) && w.bo.is_none() {
        return b.project_residual(Buf::Attn, Input::AttentionOut(l), &w.wo);
    }
    b.project(Buf::Attn, Input::AttentionOut(l), [(&w.wo, Buf::BlockOut)])?;
    if let Some(bias) = &w.bo {
        b.add_bias(Buf::BlockOut, bias);
    }
    end_block(b, c, end);
    Ok(())
}
