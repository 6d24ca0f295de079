//! The operations the forward pass is written in ([`Backend`]), over named activations
//! ([`Buf`]). `forward.rs` composes them into each family's layer; a backend runs them where
//! its memory is: [`super::cpu::Cpu`] with the crate's kernels on the wasm memory (or native
//! threads). A backend holds the batch's rows and the layer being run, so an operation names
//! only what it reads and writes.

use std::ops::Range;

use super::config::{Rope, RopeStyle};
use super::error::ModelError;
use super::weights::{
    DeltaNetWeights, EncoderInput, ExpertWeights, FeedForward, Mamba2Weights, Matrix, Norm, PerLayerWeights,
    ShortConvWeights,
};

/// A layer's rotary embedding, as `forward.rs` resolves it from the architecture, the layer
/// and the cache's size: a backend only applies it.
#[derive(Clone, Copy, Debug)]
pub struct LayerRope<'a> {
    /// Base, position scale and attention factor (the local or the global layers').
    pub rope: Rope,
    /// Dimensions of each head that rotate.
    pub dims: usize,
    /// Frequency divisors (`rope_freqs`, or LongRoPE's long or short ones for this cache),
    /// where the layer uses them.
    pub factors: Option<&'a [f32]>,
    /// Each pair's position stream under M-RoPE ([`super::Config::rope_streams`]; empty without).
    pub streams: &'a [u8],
    pub style: RopeStyle,
}

/// A layer's attention, resolved likewise.
#[derive(Clone, Copy, Debug)]
pub struct LayerAttention<'a> {
    /// Each score is multiplied by this (1 where the queries were scaled instead).
    pub score_scale: f32,
    /// Scores soft-capped (`cap · tanh(score / cap)`), Gemma 2's.
    pub softcap: Option<f32>,
    /// Only the last this many positions are attended to, in a sliding layer.
    pub window: Option<usize>,
    /// The layer whose cached keys and values it reads: itself, or the earlier layer it
    /// shares them with (Gemma 4's last layers).
    pub kv_layer: usize,
    /// Each query head's sink logit, a softmax term with no value (gpt-oss).
    pub sinks: Option<&'a [f32]>,
    /// Whether a query sees only the positions up to its own: the model's rule
    /// ([`super::Config::causal`]), but for a block of rows given whole that attends both ways
    /// (an image's, for Gemma 3: llama.cpp's `llama_set_causal_attn(false)` around it).
    pub causal: bool,
}

/// What readies a layer's query and key heads for attention: each head normalized with its
/// weights where the model normalizes them (Qwen3's and Gemma 3's Q/K norms), then rotated
/// where the layer uses RoPE.
#[derive(Clone, Copy, Debug)]
pub struct QkHeads<'a> {
    pub q_norm: Option<&'a [f32]>,
    pub k_norm: Option<&'a [f32]>,
    pub rope: Option<&'a LayerRope<'a>>,
    /// Whether the layer projected keys of its own (which rotate too).
    pub keys: bool,
}

impl QkHeads<'_> {
    /// The steps one after the other: Q's norm, K's norm, RoPE.
    pub fn one_by_one(&self, b: &mut (impl Backend + ?Sized)) {
        if let Some(weight) = self.q_norm {
            b.norm(Buf::Q, Buf::Q, weight);
        }
        if let Some(weight) = self.k_norm {
            b.norm(Buf::K, Buf::K, weight);
        }
        if let Some(rope) = self.rope {
            b.rope(self.keys, rope);
        }
    }
}

/// What becomes of the output projection's values, in this order.
#[derive(Clone, Copy, Debug)]
pub struct LogitsHead {
    /// Divided by this (Granite's `logit_scale`; llama.cpp scales by its reciprocal).
    pub divisor: Option<f32>,
    /// Soft-capped, `cap · tanh(logit / cap)` (Gemma 2's final cap).
    pub softcap: Option<f32>,
}

/// The activations a layer names, each `rows ×` its width at the current layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buf {
    /// The residual stream (`n_embd`).
    X,
    /// A block's normalized input (`n_embd`).
    Normed,
    /// A block's output before its residual add (`n_embd`).
    BlockOut,
    /// Queries (`n_head × head_dim`).
    Q,
    /// Gated attention's query projection: each head's query, then its gate (twice `Q`).
    QGate,
    /// Keys and values of the batch (`n_head_kv × head_dim`).
    K,
    V,
    /// The attention's output, before `Wo` (`n_head × head_dim`).
    Attn,
}

impl Buf {
    pub const COUNT: usize = 8;
}

/// The vector a projection reads. Projections of the same one (Q, K and V; gate and up) can
/// share its quantization; a new batch forgets every one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
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

/// What a forward pass asks of the machine that runs it. Every operation applies to the rows
/// the backend holds ([`Backend::rows`]) at the layer it was last given ([`Backend::layer`]).
pub trait Backend {
    /// Rows of the batch still being computed (fewer once [`Backend::keep_rows`] ran).
    fn rows(&self) -> usize;

    /// Positions the cache holds at most (LongRoPE picks its factors by it).
    fn capacity(&self) -> usize;

    /// Later operations are layer `l`'s.
    fn layer(&mut self, l: usize);

    /// `X` ← the tokens' embeddings (scaled where the architecture scales them).
    fn embed(&mut self, tokens: &[u32]) -> Result<(), ModelError>;

    /// `X` ← rows given whole (`n_embd` each, as many as the batch has): an image's
    /// embeddings, in place of tokens'.
    fn embed_rows(&mut self, rows: &[f32]) -> Result<(), ModelError>;

    /// `X += rows`, one row of the model's width per row held (Qwen3-VL's deepstack).
    fn add_rows(&mut self, rows: &[f32]) -> Result<(), ModelError>;

    /// Encoders: `X +=` token type 0's row and the learned rows of the batch's positions.
    fn encoder_input(&mut self, input: &EncoderInput) -> Result<(), ModelError>;

    /// Gemma 4's per-layer inputs of the tokens, kept for [`Backend::per_layer`].
    fn per_layer_inputs(&mut self, tokens: &[u32]) -> Result<(), ModelError>;

    /// `out` ← RMSNorm of `input` over every `weight.len()` values (a row, or a head), times
    /// `weight`; `out` may be `input`.
    fn norm(&mut self, out: Buf, input: Buf, weight: &[f32]);

    /// `buf` ← LayerNorm of each row (`n_embd`), times the weight, plus the bias (encoders).
    fn layer_norm(&mut self, buf: Buf, norm: &Norm);

    /// `buf` ← RMSNorm of each `width` values, with no weight.
    fn norm_unweighted(&mut self, buf: Buf, width: usize);

    /// `to += from`.
    fn add(&mut self, to: Buf, from: Buf);

    /// `buf += bias`, in every row.
    fn add_bias(&mut self, buf: Buf, bias: &[f32]);

    /// `buf *= factor`.
    fn scale(&mut self, buf: Buf, factor: f32);

    /// `to` ← `from` (same widths).
    fn copy(&mut self, to: Buf, from: Buf);

    /// For each `(matrix, out)`: `out` ← `input · matrixᵀ`. `input` is named by `which`, so a
    /// backend may reuse what it made of it for another projection of the same vector.
    fn project<const M: usize>(
        &mut self,
        input: Buf,
        which: Input,
        outputs: [(&Matrix, Buf); M],
    ) -> Result<(), ModelError>;

    /// `X += matrix · input`: a block's last projection straight into the residual stream
    /// (`BlockOut` may serve as scratch). A backend that can add as it stores saves a pass.
    fn project_residual(&mut self, input: Buf, which: Input, matrix: &Matrix) -> Result<(), ModelError> {
        self.project(input, which, [(matrix, Buf::BlockOut)])?;
        self.add(Buf::X, Buf::BlockOut);
        Ok(())
    }

    /// Gated attention: `Q` ← the queries of `QGate`.
    fn split_gate(&mut self);

    /// Gated attention: `Attn *= sigmoid(gate)`, the gates of `QGate`.
    fn apply_gate(&mut self);

    /// RoPE on `Q`, and on `K` if `keys`, at the batch's positions.
    fn rope(&mut self, keys: bool, rope: &LayerRope);

    /// `Q` and `K` readied for attention as `heads` says; a backend may do it in one pass.
    fn qk_heads(&mut self, heads: &QkHeads) {
        heads.one_by_one(self);
    }

    /// `Attn` ← attention of `Q` over the cached keys and values, causal unless the model is
    /// an encoder ([`super::Config::causal`]: then over its whole sequence in the batch), as
    /// `attention` says; with `store`, `K` and `V` are cached first.
    fn attend(&mut self, store: bool, attention: &LayerAttention);

    /// `BlockOut` ← `W_down · (act(W_gate · Normed) ⊙ (W_up · Normed))`, or without a gate
    /// `W_down · gelu(W_up · Normed + b_up) + b_down`.
    fn feed_forward(&mut self, ffn: &FeedForward) -> Result<(), ModelError>;

    /// `X += ffn(Normed)`, as [`Backend::project_residual`] for the down projection.
    fn feed_forward_residual(&mut self, ffn: &FeedForward) -> Result<(), ModelError> {
        self.feed_forward(ffn)?;
        self.add(Buf::X, Buf::BlockOut);
        Ok(())
    }

    /// `BlockOut` ← the mixture of experts of `Normed`: each row's chosen experts' FFNs
    /// ([`super::experts::route`]), weighted and summed best first, plus the shared expert's
    /// FFN where there is one. Each expert's rows are multiplied together, and a row is
    /// computed the same whichever rows share its batch.
    fn experts(&mut self, experts: &ExpertWeights) -> Result<(), ModelError>;

    /// `BlockOut` ← the gated DeltaNet of `Normed`, its states carried in the cache.
    fn delta_net(&mut self, weights: &DeltaNetWeights) -> Result<(), ModelError>;

    /// `BlockOut` ← LFM2's short convolution of `Normed`, its last inputs carried in the cache.
    fn short_conv(&mut self, weights: &ShortConvWeights) -> Result<(), ModelError>;

    /// `BlockOut` ← Granite 4.0-H's Mamba-2 layer of `Normed`, its convolution's last inputs and
    /// its scan's state carried in the cache.
    fn mamba2(&mut self, weights: &Mamba2Weights) -> Result<(), ModelError>;

    /// Gemma 4's per-layer input block: `X += norm(W_proj · (gelu(W_gate · X) ⊙ input))`.
    fn per_layer(&mut self, weights: &PerLayerWeights) -> Result<(), ModelError>;

    /// Keeps only the batch's rows `rows` of `X`, moved to the front (the last layer's
    /// feed-forward block runs only where logits are wanted, as in llama.cpp's graphs).
    fn keep_rows(&mut self, rows: Range<usize>);

    /// The batch's tokens are in the cache.
    fn commit(&mut self);

    /// `out` ← the logits of `Normed`, divided and soft-capped as `head` says.
    fn logits(&mut self, out: &mut [f32], head: &LogitsHead) -> Result<(), ModelError>;
}
