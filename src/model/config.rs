//! Hyperparameters read from `{arch}.*` metadata, with llama.cpp's defaults and checks that
//! the numbers fit together before any buffer is sized from them.

use serde::Serialize;

use super::arch::{
    Activation, ArchSpec, Architecture, AttentionScale, ExpertSpec, ExpertWidth, Family, FinalSoftcap,
    Gating, LocalRope, Mrope, Positions, Sliding, Window,
};
use super::error::ModelError;
use crate::embedding::Pooling;
use crate::gguf::Metadata;

/// How RoPE pairs up the dimensions of a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RopeStyle {
    /// Adjacent pairs `(x[2i], x[2i+1])` (llama.cpp `LLAMA_ROPE_TYPE_NORM`).
    Normal,
    /// Halves `(x[i], x[i + n/2])` (llama.cpp `LLAMA_ROPE_TYPE_NEOX`).
    Neox,
}

/// RoPE parameters of one kind of layer.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rope {
    pub base: f32,
    /// Positions are multiplied by this (1 / linear scaling factor).
    pub freq_scale: f32,
    /// Cosines and sines are multiplied by this (`rope.scaling.attn_factor`, LongRoPE's
    /// attention factor; ggml's `mscale`, YaRN's magnitude correction included).
    pub attn_factor: f32,
    /// YaRN's blend of scaled and unscaled frequencies, where the file scales by YaRN.
    pub yarn: Option<Yarn>,
}

/// YaRN (`rope.scaling.type = yarn`), as ggml's `rope_yarn` with llama.cpp's defaults
/// (extrapolation factor 1, β_fast 32, β_slow 1, which llama.cpp does not read from files):
/// pairs that turn many times over the original context keep their unscaled angle, pairs that
/// turn less than once take the scaled one, and a linear ramp blends those between.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Yarn {
    /// The context the model was trained for before scaling
    /// (`rope.scaling.original_context_length`).
    pub original_context: usize,
}

impl Yarn {
    const BETA_FAST: f32 = 32.0;
    const BETA_SLOW: f32 = 1.0;

    /// The pair indices where the ramp starts and ends (`ggml_rope_yarn_corr_dims`), for
    /// `dims` rotated dimensions at `base`.
    pub fn ramp(self, dims: usize, base: f32) -> [f32; 2] {
        // The dimension whose pair turns `turns` times over the original context.
        let dim = |turns: f32| {
            dims as f32 * (self.original_context as f32 / (turns * 2.0 * std::f32::consts::PI)).ln()
                / (2.0 * base.ln())
        };
        [dim(Self::BETA_FAST).floor().max(0.0), dim(Self::BETA_SLOW).ceil().min(dims as f32 - 1.0)]
    }

    /// How much of pair `pair`'s angle stays unscaled (1 below the ramp, 0 past it).
    pub fn extrapolation(ramp: [f32; 2], pair: usize) -> f32 {
        let y = (pair as f32 - ramp[0]) / (ramp[1] - ramp[0]).max(0.001);
        1.0 - y.clamp(0.0, 1.0)
    }
}

/// The shape of a gated DeltaNet layer (Qwen3.5's `ssm.*` keys): a causal convolution over
/// the projected queries, keys and values, then the gated delta rule on a state of
/// `head_dim × head_dim` per value head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DeltaNet {
    /// Taps of the causal convolution (`ssm.conv_kernel`).
    pub conv_kernel: usize,
    /// Query and key heads (`ssm.group_count`).
    pub k_heads: usize,
    /// Value heads (`ssm.time_step_rank`), a multiple of `k_heads`; value head `h` reads key
    /// head `h % k_heads`, as llama.cpp tiles them.
    pub v_heads: usize,
    /// Size of every query, key and value head (`ssm.state_size`).
    pub head_dim: usize,
}

impl DeltaNet {
    pub fn key_dim(&self) -> usize {
        self.k_heads * self.head_dim
    }

    pub fn value_dim(&self) -> usize {
        self.v_heads * self.head_dim
    }

    /// Channels of the convolution: queries, keys, values.
    pub fn conv_dim(&self) -> usize {
        2 * self.key_dim() + self.value_dim()
    }

    /// Floats of the convolution's state: the last `conv_kernel - 1` inputs.
    pub fn conv_state_len(&self) -> usize {
        (self.conv_kernel - 1) * self.conv_dim()
    }

    /// Floats of the delta rule's state: one `head_dim × head_dim` matrix per value head.
    pub fn ssm_state_len(&self) -> usize {
        self.v_heads * self.head_dim * self.head_dim
    }
}

/// LFM2's short convolution layers: `W_out · (c ⊙ conv(b ⊙ x))` for `[b, c, x] = W_in · h`, the
/// convolution causal and per channel over the last `kernel` positions (`shortconv.l_cache`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ShortConv {
    pub kernel: usize,
}

/// A Mamba-2 layer's shape (Granite 4.0-H's `ssm.*` keys): `W_in` makes the gate `z`, the
/// convolution's input `xBC` (values `x`, then the groups' `B` and `C`) and a time step per
/// head; after the causal convolution, each head's state of `head_dim × state` decays by a
/// scalar per step and takes `B ⊗ x`, and `C` reads it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Mamba2 {
    /// Taps of the causal convolution (`ssm.conv_kernel`).
    pub conv_kernel: usize,
    /// Width of the values and the gate (`ssm.inner_size`).
    pub inner: usize,
    /// Size of each state row and of `B` and `C` (`ssm.state_size`).
    pub state: usize,
    /// Heads (`ssm.time_step_rank`), each `inner / heads` values wide.
    pub heads: usize,
    /// Groups of heads that share `B`, `C` and a norm (`ssm.group_count`).
    pub groups: usize,
}

impl Mamba2 {
    pub fn head_dim(&self) -> usize {
        self.inner / self.heads
    }

    /// Channels of the convolution: `x`, `B` and `C`.
    pub fn conv_dim(&self) -> usize {
        self.inner + 2 * self.groups * self.state
    }

    /// Rows of the input projection: `z`, `xBC`, and a time step per head.
    pub fn in_dim(&self) -> usize {
        self.inner + self.conv_dim() + self.heads
    }

    /// Floats of the convolution's state: the last `conv_kernel - 1` inputs.
    pub fn conv_state_len(&self) -> usize {
        (self.conv_kernel - 1) * self.conv_dim()
    }

    /// Floats of the scan's state: `head_dim × state` per head.
    pub fn ssm_state_len(&self) -> usize {
        self.inner * self.state
    }
}

/// A mixture-of-experts block's shape and routing (`expert_*` keys and the family's rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Experts {
    /// Experts per layer (`expert_count`).
    pub count: usize,
    /// Experts each token is routed to (`expert_used_count`).
    pub used: usize,
    /// Each expert's FFN width.
    pub width: usize,
    /// The shared expert's FFN width, where the layer has one.
    pub shared_width: Option<usize>,
    pub gating: Gating,
    /// The chosen experts' weights divided by their sum.
    pub normalize: bool,
    /// Layers before this one have a dense FFN (`leading_dense_block_count`, LFM2-MoE).
    pub dense_lead: usize,
    /// A per-expert bias moves the choice (`exp_probs_b`).
    pub selection_bias: bool,
    /// The router and every expert projection have biases (gpt-oss).
    pub biases: bool,
}

#[cfg(test)]
impl Experts {
    /// A shape with only routing's parts set (experts of width 1, no shared expert, no
    /// biases): what the routing tests, the CPU's and the GPU kernel's, route with.
    pub(crate) fn routing(count: usize, used: usize, gating: Gating, normalize: bool) -> Experts {
        Experts {
            count,
            used,
            width: 1,
            shared_width: None,
            gating,
            normalize,
            dense_lead: 0,
            selection_bias: false,
            biases: false,
        }
    }
}

/// What can differ from layer to layer (Gemma 4: sliding-window layers have their own head
/// size, KV heads and rotated dimensions; the last layers reuse earlier layers' keys and
/// values and have a wider FFN). Every other architecture repeats one shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LayerShape {
    pub head_dim: usize,
    pub n_head_kv: usize,
    pub n_ff: usize,
    /// Leading dimensions of each head that are rotated.
    pub rope_dims: usize,
    /// The layer whose keys and values this one attends over: itself, or for Gemma 4's shared
    /// layers the last earlier layer of the same kind that keeps its own.
    pub kv_from: usize,
}

impl LayerShape {
    pub fn kv_dim(&self) -> usize {
        self.n_head_kv * self.head_dim
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Config {
    pub architecture: Architecture,
    pub n_layer: usize,
    pub n_embd: usize,
    /// The widest layer's FFN (layers may differ: [`Config::layer`]).
    pub n_ff: usize,
    pub n_head: usize,
    /// The first layer's KV heads (layers may differ: [`Config::layer`]).
    pub n_head_kv: usize,
    /// The global layers' head size (Gemma 4's local layers differ: [`Config::layer`]).
    pub head_dim: usize,
    /// The widest layer's `n_head × head_dim` and `n_head_kv × head_dim`, each layer's
    /// checked against [`MAX_DIM`] when read.
    q_dim: usize,
    kv_dim: usize,
    pub rms_eps: f32,
    /// LayerNorm's epsilon (encoders, `attention.layer_norm_epsilon`; unused elsewhere).
    pub layer_norm_eps: f32,
    /// Whether a token attends only to itself and earlier tokens; encoders attend to the whole
    /// text (`attention.causal`, false in their files).
    pub causal: bool,
    pub rope_style: RopeStyle,
    /// Leading dimensions of each global layer's heads that are rotated (the rest pass
    /// through; each layer's in [`Config::layer`]).
    pub rope_dims: usize,
    pub rope_global: Rope,
    /// RoPE of the sliding-window layers (Gemma 3 uses base 10000 there; llama.cpp does not
    /// read it from the file).
    pub rope_local: Rope,
    /// The context the model was trained for; sessions may ask for less, never more.
    pub context_length: usize,
    /// Sliding-window size of local layers (Gemma 3), if any.
    pub sliding_window: Option<usize>,
    /// Every `global_layer_period`-th layer attends globally; the others use the window.
    pub global_layer_period: usize,
    /// The context RoPE was trained for (`rope.scaling.original_context_length`, else the
    /// context length): LongRoPE uses its long factors only for caches larger than this.
    pub rope_original_context: usize,
    /// Every `no_rope_layer_step`-th layer skips RoPE (SmolLM3: 4, fixed by llama.cpp).
    pub no_rope_layer_step: Option<usize>,
    /// No layer rotates (Granite files whose `rope.scaling.finetuned` is false).
    pub rope_off: bool,
    /// Multiplier applied to Q before the dot products with K.
    pub attention_scale: f32,
    /// Whether Q is multiplied by `attention_scale` before attention, which then uses scale 1
    /// (Gemma 3, Phi-3), rather than the scores after (the others): the same product, rounded
    /// where llama.cpp rounds it.
    pub scale_queries: bool,
    /// Attention scores squashed by `cap · tanh(score / cap)` (Gemma 2: 50).
    pub attn_softcap: Option<f32>,
    /// Output logits squashed the same way (Gemma 2: 30).
    pub final_softcap: Option<f32>,
    /// Multiplier applied to token embeddings (Gemma: sqrt(n_embd); Granite: from the file).
    pub embedding_scale: Option<f32>,
    /// Each block's output multiplied by this before its residual add (Granite).
    pub residual_scale: Option<f32>,
    /// Logits divided by this (Granite).
    pub logit_scale: Option<f32>,
    /// Every layer's feed-forward block is a mixture of experts of this shape.
    pub experts: Option<Experts>,
    /// The attention layers' query projection also yields a per-head output gate,
    /// `sigmoid(gate) ⊙ attention` (Qwen3.5).
    pub gated_attention: bool,
    /// Values are RMS-normalized (no weight) before they are cached (Gemma 4).
    pub normalize_values: bool,
    /// The feed-forward block's gate (the architecture's, so not reported again).
    #[serde(skip)]
    pub activation: Activation,
    /// Width of each layer's slice of the per-layer token embeddings (Gemma 4), if any.
    pub per_layer_input: Option<usize>,
    /// Per-layer shapes; see [`Config::layer`].
    layers: Vec<LayerShape>,
    /// Which layers use the sliding window, where the file lists them (Gemma 4).
    sliding_pattern: Option<Vec<bool>>,
    /// M-RoPE (Qwen2-VL, Qwen3-VL, Qwen3.5: `rope.dimension_sections`): the position stream of each
    /// rotated pair (0: the text's, where a picture's rows all stand at its first position; 1: a
    /// picture's rows; 2: its columns; 3: a fourth stream, 0 for text and pictures alike, so
    /// those pairs stay unrotated). Empty without M-RoPE.
    pub rope_streams: Vec<u8>,
    /// Deepstack slices a picture's rows carry beside their embedding (Qwen3-VL's
    /// `n_deepstack_layers`), each added to the hidden state after layer 0, 1, ...; 0 without.
    pub deepstack_layers: usize,
    /// Gated DeltaNet layers' shape (Qwen3.5), and which layers they are.
    pub delta_net: Option<DeltaNet>,
    /// Short convolution layers' shape (LFM2: the layers without KV heads).
    pub short_conv: Option<ShortConv>,
    /// Granite 4.0-H's Mamba-2 layers' shape (the layers without KV heads).
    pub mamba2: Option<Mamba2>,
    recurrent_layers: Vec<bool>,
    /// How the file pools hidden states into a sentence embedding (`pooling_type`), if it
    /// says; an embedding model says (Qwen3-Embedding: last).
    pub pooling: Option<Pooling>,
    pub vocab_size: usize,
}

/// Upper bounds that keep a hostile header from sizing huge buffers; far beyond real models.
const MAX_DIM: u64 = 1 << 20;
const MAX_LAYERS: u64 = 1 << 12;
const MAX_CONTEXT: u64 = 1 << 24;
/// Bound on a DeltaNet head: its state is `head_dim²` floats per head and layer.
const MAX_DELTA_NET_HEAD: u64 = 1 << 10;
const MAX_CONV_KERNEL: u64 = 64;
/// llama.cpp's `LLAMA_MAX_EXPERTS`.
pub const MAX_EXPERTS: u64 = 512;

impl Config {
    /// Reads the hyperparameters of `architecture`; `vocab_size` comes from the embedding tensor.
    pub fn from_metadata(metadata: &Metadata, vocab_size: usize) -> Result<Config, ModelError> {
        let arch_name =
            metadata.architecture().ok_or_else(|| ModelError::MissingKey("general.architecture".into()))?;
        let architecture = Architecture::from_name(arch_name)
            .ok_or_else(|| ModelError::UnsupportedArchitecture(arch_name.to_string()))?;
        let spec = architecture.spec();
        let keys = Keys { metadata, arch: arch_name };

        // Multi-token-prediction blocks (`nextn_predict_layers`, Qwen3.5's MTP head) come last
        // and are not part of the forward pass, as in llama.cpp.
        let blocks = keys.required_count("block_count", MAX_LAYERS)?;
        let prediction_blocks = match keys.metadata.get(&keys.key("nextn_predict_layers")) {
            None => 0,
            Some(value) => match value.as_u64() {
                Some(n) if n < blocks as u64 => n as usize,
                _ => {
                    return Err(
                        keys.bad("nextn_predict_layers", format!("must be below block_count {blocks}"))
                    );
                }
            },
        };
        let n_layer = blocks - prediction_blocks;
        let n_embd = keys.required_count("embedding_length", MAX_DIM)?;
        let n_ff_layers = keys.counts_per_layer("feed_forward_length", n_layer, MAX_DIM)?;
        let n_ff_layers = n_ff_layers.ok_or_else(|| keys.missing("feed_forward_length"))?;
        let n_ff = n_ff_layers.iter().copied().max().unwrap_or(0);
        let n_head = keys.required_count("attention.head_count", MAX_DIM)?;
        // LFM2's and Granite 4.0-H's layers without KV heads are their recurrent ones.
        let min_kv_heads = if spec.short_conv || spec.mamba2 { 0 } else { 1 };
        let n_head_kv_layers = keys
            .counts_per_layer_from("attention.head_count_kv", n_layer, min_kv_heads, MAX_DIM)?
            .unwrap_or_else(|| vec![n_head; n_layer]);
        if let Some(&bad) = n_head_kv_layers.iter().find(|&&kv| kv != 0 && n_head % kv != 0) {
            return Err(
                keys.bad("attention.head_count_kv", format!("= {bad} does not divide head_count {n_head}"))
            );
        }
        let n_head_kv = n_head_kv_layers.iter().copied().find(|&kv| kv > 0).unwrap_or(n_head);
        let default_head_dim = if n_embd % n_head == 0 { Some(n_embd / n_head) } else { None };
        let head_dim_k = keys.optional_count("attention.key_length", MAX_DIM)?.or(default_head_dim);
        let head_dim_v = keys.optional_count("attention.value_length", MAX_DIM)?.or(head_dim_k);
        let head_dim = head_dim_k.ok_or_else(|| keys.missing("attention.key_length"))?;
        if head_dim_v != Some(head_dim) {
            return Err(keys.bad("attention.value_length", format!("differs from key_length {head_dim}")));
        }
        if head_dim % 2 != 0 {
            return Err(keys.bad("attention.key_length", format!("= {head_dim} is odd; RoPE needs pairs")));
        }
        let rope_dims = keys.optional_count("rope.dimension_count", MAX_DIM)?.unwrap_or(head_dim);
        let check_rope = |rope_dims: usize, head_dim: usize, key: &str| {
            if rope_dims > head_dim || !rope_dims.is_multiple_of(2) {
                return Err(keys.bad(key, format!("= {rope_dims} must be even and ≤ head size {head_dim}")));
            }
            Ok(())
        };
        check_rope(rope_dims, head_dim, "rope.dimension_count")?;
        // Gemma 4's sliding-window layers: their own head size and rotated dimensions, the
        // pattern listed, and the last `shared_kv_layers` layers reading earlier layers' KV.
        let (sliding_pattern, head_dim_swa, rope_dims_swa, kv_layers) = if let Sliding::Listed { .. } =
            spec.sliding
        {
            let pattern = keys.bools_per_layer("attention.sliding_window_pattern", n_layer)?;
            let head_dim_swa = keys.required_count("attention.key_length_swa", MAX_DIM)?;
            if keys.optional_count("attention.value_length_swa", MAX_DIM)?.is_some_and(|v| v != head_dim_swa)
            {
                return Err(keys.bad(
                    "attention.value_length_swa",
                    format!("differs from key_length_swa {head_dim_swa}"),
                ));
            }
            let rope_dims_swa =
                keys.optional_count("rope.dimension_count_swa", MAX_DIM)?.unwrap_or(head_dim_swa);
            check_rope(rope_dims_swa, head_dim_swa, "rope.dimension_count_swa")?;
            let shared = match keys.metadata.get(&keys.key("attention.shared_kv_layers")) {
                None => 0,
                Some(value) => value.as_u64().filter(|&n| n < n_layer as u64).ok_or_else(|| {
                    keys.bad("attention.shared_kv_layers", format!("must be below block_count {n_layer}"))
                })? as usize,
            };
            (Some(pattern), head_dim_swa, rope_dims_swa, n_layer - shared)
        } else {
            (None, head_dim, rope_dims, n_layer)
        };
        let is_sliding_in_pattern = |l: usize| sliding_pattern.as_ref().is_some_and(|p| p[l]);
        let mut layers = Vec::with_capacity(n_layer);
        for l in 0..n_layer {
            let sliding = is_sliding_in_pattern(l);
            // llama.cpp's rule: a shared sliding layer reads the second-to-last layer that keeps
            // KV, a shared global one the last; both must be of its kind.
            let kv_from = if l < kv_layers {
                l
            } else {
                let source = kv_layers.checked_sub(if sliding { 2 } else { 1 });
                match source.filter(|&s| is_sliding_in_pattern(s) == sliding) {
                    Some(source) => source,
                    None => {
                        return Err(keys.bad(
                            "attention.shared_kv_layers",
                            format!(
                                "leaves layer {l} no earlier layer of its kind to share keys and values with"
                            ),
                        ));
                    }
                }
            };
            let (head_dim, rope_dims) =
                if sliding { (head_dim_swa, rope_dims_swa) } else { (head_dim, rope_dims) };
            layers.push(LayerShape {
                head_dim,
                n_head_kv: n_head_kv_layers[l],
                n_ff: n_ff_layers[l],
                rope_dims,
                kv_from,
            });
        }
        // Both factors of each width are bounded, their product is not: checked before
        // anything is sized by it (it would wrap on wasm32).
        let widest = |heads: &dyn Fn(&LayerShape) -> usize, key: &str| -> Result<usize, ModelError> {
            let mut widest = 0;
            for layer in &layers {
                let width = heads(layer)
                    .checked_mul(layer.head_dim)
                    .filter(|&w| w as u64 <= MAX_DIM)
                    .ok_or_else(|| {
                        keys.bad(
                            key,
                            format!(
                                "= {} heads of {} exceed {MAX_DIM} values per token",
                                heads(layer),
                                layer.head_dim
                            ),
                        )
                    })?;
                widest = widest.max(width);
            }
            Ok(widest)
        };
        let q_dim = widest(&|_| n_head, "attention.head_count")?;
        let kv_dim = widest(&|layer| layer.n_head_kv, "attention.head_count_kv")?;
        let rms_eps = keys.positive_float("attention.layer_norm_rms_epsilon")?.unwrap_or(1e-5);
        let encoder = spec.family == Family::Encoder;
        let layer_norm_eps = match keys.positive_float("attention.layer_norm_epsilon")? {
            Some(eps) => eps,
            None if encoder => return Err(keys.missing("attention.layer_norm_epsilon")),
            None => 1e-5,
        };
        let causal = match keys.metadata.get(&keys.key("attention.causal")) {
            None => !encoder,
            Some(value) => {
                value.as_bool().ok_or_else(|| keys.bad("attention.causal", "should be a boolean".into()))?
            }
        };
        let rope_base = keys.positive_float("rope.freq_base")?.unwrap_or(10_000.0);
        let context_length = keys.optional_count("context_length", MAX_CONTEXT)?.unwrap_or(4096);
        let rope_original_context = keys
            .optional_count("rope.scaling.original_context_length", MAX_CONTEXT)?
            .unwrap_or(context_length);
        let scaling_factor = || keys.positive_float("rope.scaling.factor").map(|f| f.unwrap_or(1.0));
        let (freq_scale, yarn) = match keys.metadata.get_str(&keys.key("rope.scaling.type")) {
            None | Some("none") => (1.0, None),
            Some("linear") => (1.0 / scaling_factor()?, None),
            Some("yarn") => (1.0 / scaling_factor()?, Some(Yarn { original_context: rope_original_context })),
            Some(other) => {
                return Err(keys.bad(
                    "rope.scaling.type",
                    format!("= `{other}` is not supported (only linear and yarn)"),
                ));
            }
        };
        let mut attn_factor = keys.positive_float("rope.scaling.attn_factor")?.unwrap_or(1.0);
        if yarn.is_some() {
            // llama.cpp's context sets ggml's mscale to `m(s) / (1 + 0.1 ln s)` times the file's
            // factor, m(s) = 1 + 0.1 ln s for s > 1, and ggml's rope multiplies by
            // `1 + 0.1 ln s` again (an FMA there): the same roundings, in the same order.
            let factor = 1.0 / freq_scale;
            let magnitude = if factor <= 1.0 { 1.0 } else { 0.1 * factor.ln() + 1.0 };
            let context_factor = magnitude * (1.0 / (1.0 + 0.1 * factor.ln()));
            attn_factor = context_factor * attn_factor * 0.1f32.mul_add((1.0 / freq_scale).ln(), 1.0);
        }
        let rope_global = Rope { base: rope_base, freq_scale, attn_factor, yarn };
        let local_rope = |local: LocalRope| -> Result<Rope, ModelError> {
            Ok(match local {
                LocalRope::Base(base) => Rope { base, freq_scale: 1.0, attn_factor: 1.0, yarn: None },
                LocalRope::SwaBaseOrGlobal => Rope {
                    base: keys.positive_float("rope.freq_base_swa")?.unwrap_or(rope_base),
                    ..rope_global
                },
            })
        };
        let window = |window: Window| -> Result<Option<usize>, ModelError> {
            let key = "attention.sliding_window";
            Ok(match window {
                Window::Optional => keys.optional_count(key, MAX_CONTEXT)?,
                Window::Default(size) => Some(keys.optional_count(key, MAX_CONTEXT)?.unwrap_or(size)),
                Window::Required => Some(keys.required_count(key, MAX_CONTEXT)?),
            })
        };
        let (sliding_window, global_layer_period, rope_local) = match spec.sliding {
            Sliding::None => (None, 1, rope_global),
            Sliding::Periodic { period, window: size, local_rope: local } => {
                (window(size)?, period, local_rope(local)?)
            }
            Sliding::Listed { local_rope: local } => (window(Window::Required)?, 1, local_rope(local)?),
            Sliding::Every => (window(Window::Optional)?, 1, rope_global),
        };
        // Every attention layer local: the pattern says so for each.
        let sliding_pattern = match spec.sliding {
            Sliding::Every if sliding_window.is_some() => Some(vec![true; n_layer]),
            _ => sliding_pattern,
        };
        let attention_scale = match spec.attention_scale {
            AttentionScale::Gemma2 if n_layer == 46 => 1.0 / ((n_embd / n_head) as f32).sqrt(),
            AttentionScale::One => 1.0,
            AttentionScale::InverseSqrtHeadDim | AttentionScale::Gemma2 => 1.0 / (head_dim as f32).sqrt(),
        };
        // Granite's multipliers (llama.cpp reads a 0 as "not given").
        let granite = |name: &str| -> Result<Option<f32>, ModelError> {
            if !spec.granite_scales {
                return Ok(None);
            }
            match keys.metadata.get(&keys.key(name)).and_then(|v| v.as_f64()) {
                None => Ok(None),
                Some(0.0) => Ok(None),
                Some(v) if v.is_finite() && v > 0.0 => Ok(Some(v as f32)),
                Some(_) => Err(keys.bad(name, "must be a positive number".into())),
            }
        };
        let attention_scale = granite("attention.scale")?.unwrap_or(attention_scale);
        let residual_scale = granite("residual_scale")?;
        let logit_scale = granite("logit_scale")?;
        if spec.granite_scales && logit_scale.is_none() {
            return Err(keys.missing("logit_scale"));
        }
        let has_experts =
            keys.metadata.get(&keys.key("expert_count")).and_then(|v| v.as_u64()).is_some_and(|n| n > 0);
        let experts = match spec.experts {
            Some(expert_spec) if has_experts || !expert_spec.optional => {
                Some(keys.experts(expert_spec, n_ff, n_layer)?)
            }
            _ => None,
        };
        let attn_softcap = match spec.attn_softcap {
            Some(cap) => Some(keys.positive_float("attn_logit_softcapping")?.unwrap_or(cap)),
            None => None,
        };
        let final_softcap = match spec.final_softcap {
            FinalSoftcap::None => None,
            FinalSoftcap::Default(cap) => {
                Some(keys.positive_float("final_logit_softcapping")?.unwrap_or(cap))
            }
            FinalSoftcap::FromFile => keys.positive_float("final_logit_softcapping")?,
        };
        if spec.dense_only && has_experts {
            return Err(keys.bad(
                "expert_count",
                format!("names a mixture-of-experts {arch_name}: only the dense sizes run"),
            ));
        }
        let per_layer_input = if spec.per_layer_inputs {
            match keys.metadata.get(&keys.key("embedding_length_per_layer_input")) {
                None => None,
                Some(value) => match value.as_u64() {
                    Some(0) => None,
                    Some(n) if n <= MAX_DIM => Some(n as usize),
                    _ => {
                        return Err(keys.bad(
                            "embedding_length_per_layer_input",
                            format!("should be at most {MAX_DIM}"),
                        ));
                    }
                },
            }
        } else {
            None
        };
        let embedding_scale = match spec.scaled_embeddings {
            true => Some((n_embd as f32).sqrt()),
            false => granite("embedding_scale")?,
        };
        let (delta_net, recurrent_layers) = if spec.delta_net {
            let (delta_net, recurrent) = keys.delta_net(n_layer)?;
            (Some(delta_net), recurrent)
        } else {
            (None, n_head_kv_layers.iter().map(|&kv| kv == 0).collect())
        };
        let short_conv = match spec.short_conv {
            true => {
                let kernel = keys.required_count("shortconv.l_cache", MAX_CONV_KERNEL)?;
                if kernel < 2 {
                    return Err(
                        keys.bad("shortconv.l_cache", format!("= {kernel}: the convolution needs 2 taps"))
                    );
                }
                Some(ShortConv { kernel })
            }
            false => None,
        };
        let mamba2 = if spec.mamba2 { Some(keys.mamba2(n_embd)?) } else { None };
        let rope_streams = keys.mrope_streams(spec.mrope, rope_dims)?;
        let deepstack_layers = match spec.deepstack {
            true => keys.optional_count("n_deepstack_layers", n_layer.saturating_sub(1) as u64)?.unwrap_or(0),
            false => 0,
        };
        if vocab_size == 0 {
            return Err(ModelError::BadTensor {
                name: "token_embd.weight".into(),
                reason: "has no rows".into(),
            });
        }
        Ok(Config {
            architecture,
            n_layer,
            n_embd,
            n_ff,
            n_head,
            n_head_kv,
            head_dim,
            q_dim,
            kv_dim,
            rms_eps,
            layer_norm_eps,
            causal,
            rope_style: spec.rope_style,
            rope_dims,
            rope_global,
            rope_local,
            context_length,
            sliding_window,
            global_layer_period,
            rope_original_context,
            no_rope_layer_step: spec.no_rope_every,
            // llama.cpp's Granite reads `rope.scaling.finetuned` as the switch for RoPE.
            rope_off: spec.granite_scales
                && keys.metadata.get(&keys.key("rope.scaling.finetuned")).and_then(|v| v.as_bool())
                    == Some(false),
            attention_scale,
            scale_queries: spec.scale_queries,
            attn_softcap,
            final_softcap,
            embedding_scale,
            residual_scale,
            logit_scale,
            experts,
            gated_attention: spec.gated_attention,
            normalize_values: spec.normalize_values,
            activation: spec.activation,
            per_layer_input,
            layers,
            sliding_pattern,
            rope_streams,
            deepstack_layers,
            delta_net,
            short_conv,
            mamba2,
            recurrent_layers,
            pooling: keys.pooling()?,
            vocab_size,
        })
    }

    /// Whether layer `layer` is a gated DeltaNet layer (a recurrent state, no KV cache).
    /// Whether layer `layer` runs a mixture of experts (rather than a dense FFN).
    pub fn has_experts(&self, layer: usize) -> bool {
        self.experts.is_some_and(|e| layer >= e.dense_lead)
    }

    /// Floats of one recurrent layer's state: its convolution's last inputs, and its delta
    /// rule's matrices (none for LFM2's short convolutions).
    pub fn recurrent_state_lens(&self) -> (usize, usize) {
        match (self.delta_net, self.short_conv, self.mamba2) {
            (Some(shape), ..) => (shape.conv_state_len(), shape.ssm_state_len()),
            (None, Some(conv), _) => ((conv.kernel - 1) * self.n_embd, 0),
            (None, None, Some(shape)) => (shape.conv_state_len(), shape.ssm_state_len()),
            (None, None, None) => (0, 0),
        }
    }

    pub fn is_recurrent(&self, layer: usize) -> bool {
        self.recurrent_layers.get(layer).copied().unwrap_or(false)
    }

    /// How many layers attend (and so keep keys and values).
    pub fn attention_layers(&self) -> usize {
        self.n_layer - self.recurrent_layers.iter().filter(|&&r| r).count()
    }

    /// The width of a row given whole (a picture's): the model's, and its deepstack slices'.
    pub fn input_width(&self) -> usize {
        self.n_embd * (1 + self.deepstack_layers)
    }

    /// The widest layer's `n_head × head_dim` (what scratch buffers are sized by).
    pub fn q_dim(&self) -> usize {
        self.q_dim
    }

    /// The widest layer's `n_head_kv × head_dim`.
    pub fn kv_dim(&self) -> usize {
        self.kv_dim
    }

    /// Layer `layer`'s head size, KV heads, FFN width, rotated dimensions and KV source.
    pub fn layer(&self, layer: usize) -> &LayerShape {
        &self.layers[layer]
    }

    /// Whether layer `layer` computes and caches its own keys and values.
    pub fn keeps_kv(&self, layer: usize) -> bool {
        self.layers[layer].kv_from == layer
    }

    /// Whether layer `layer` rotates its queries and keys (llama.cpp: SmolLM3's layers 3, 7,
    /// 11... do not).
    pub fn uses_rope(&self, layer: usize) -> bool {
        self.spec().positions == Positions::Rope
            && !self.rope_off
            && self.no_rope_layer_step.is_none_or(|step| !(layer + 1).is_multiple_of(step))
    }

    /// Whether layer `layer` attends only within the sliding window (llama.cpp: Gemma 3 layers
    /// 0–4 of every 6 are local, layer 5 is global).
    pub fn is_sliding(&self, layer: usize) -> bool {
        if let Some(pattern) = &self.sliding_pattern {
            return pattern[layer];
        }
        self.sliding_window.is_some() && layer % self.global_layer_period < self.global_layer_period - 1
    }

    /// Whether layer `layer` divides its RoPE frequencies by the file's factors
    /// (`rope_freqs`): every layer that rotates, except Gemma 4's sliding ones (its factors
    /// shape the global layers' "proportional" RoPE).
    pub fn uses_rope_factors(&self, layer: usize) -> bool {
        self.spec().local_rope_factors || !self.is_sliding(layer)
    }

    /// The architecture's row of [`super::arch::ARCHITECTURES`].
    pub fn spec(&self) -> &'static ArchSpec {
        self.architecture.spec()
    }

    pub fn rope_for_layer(&self, layer: usize) -> Rope {
        if self.is_sliding(layer) { self.rope_local } else { self.rope_global }
    }
}

/// Reads `{arch}.{name}` keys with typed errors.
struct Keys<'a> {
    metadata: &'a Metadata,
    arch: &'a str,
}

impl Keys<'_> {
    fn key(&self, name: &str) -> String {
        format!("{}.{name}", self.arch)
    }

    fn missing(&self, name: &str) -> ModelError {
        ModelError::MissingKey(self.key(name))
    }

    fn bad(&self, name: &str, reason: String) -> ModelError {
        ModelError::BadKey { key: self.key(name), reason }
    }

    fn optional_count(&self, name: &str, max: u64) -> Result<Option<usize>, ModelError> {
        let key = self.key(name);
        let Some(value) = self.metadata.get(&key) else { return Ok(None) };
        let n = value.as_u64().ok_or_else(|| {
            self.bad(name, format!("should be an unsigned integer, found {}", value.value_type()))
        })?;
        if n == 0 || n > max {
            return Err(self.bad(name, format!("= {n} is outside 1..={max}")));
        }
        usize::try_from(n).map(Some).map_err(|_| self.bad(name, format!("= {n} does not fit in memory")))
    }

    /// A mixture-of-experts block's shape, from the `expert_*` keys; `n_ff` is the file's
    /// `feed_forward_length`.
    fn experts(&self, spec: ExpertSpec, n_ff: usize, n_layer: usize) -> Result<Experts, ModelError> {
        let count = self.required_count("expert_count", MAX_EXPERTS)?;
        let used = self.required_count("expert_used_count", MAX_EXPERTS)?;
        if count == 0 {
            return Err(self.bad("expert_count", "is 0: a mixture of experts needs experts".into()));
        }
        if used == 0 || used > count {
            return Err(
                self.bad("expert_used_count", format!("= {used} must be between 1 and expert_count {count}"))
            );
        }
        let width = match spec.width {
            ExpertWidth::ExpertKeyOrShare => {
                self.optional_count("expert_feed_forward_length", MAX_DIM)?.unwrap_or(n_ff / used)
            }
            ExpertWidth::FeedForwardLength => n_ff,
        };
        if width == 0 {
            return Err(self.bad("expert_feed_forward_length", "gives experts no width".into()));
        }
        let shared_width = match spec.shared {
            // Granite MoE files without a shared expert may say so with a 0.
            true => {
                match self.metadata.get(&self.key("expert_shared_feed_forward_length")).map(|v| v.as_u64()) {
                    None | Some(Some(0)) => None,
                    Some(_) => self.optional_count("expert_shared_feed_forward_length", MAX_DIM)?,
                }
            }
            false => None,
        };
        let gating = match spec.gating {
            Some(gating) => gating,
            // llama.cpp's llama_expert_gating_func_type.
            None => match self.metadata.get(&self.key("expert_gating_func")).map(|v| v.as_u64()) {
                None => return Err(self.missing("expert_gating_func")),
                Some(Some(1)) => Gating::Softmax,
                Some(Some(2)) => Gating::Sigmoid,
                Some(Some(3)) => Gating::SoftmaxWeight,
                Some(other) => {
                    let found = other.map_or("not a number".into(), |n| n.to_string());
                    return Err(self.bad(
                        "expert_gating_func",
                        format!("= {found}: only 1 (softmax), 2 (sigmoid) and 3 (softmax of the chosen) run"),
                    ));
                }
            },
        };
        let dense_lead = match spec.leading_dense {
            true => match self.metadata.get(&self.key("leading_dense_block_count")).map(|v| v.as_u64()) {
                None => 0,
                Some(Some(n)) if n <= n_layer as u64 => n as usize,
                Some(_) => {
                    return Err(self
                        .bad("leading_dense_block_count", format!("must be at most block_count {n_layer}")));
                }
            },
            false => 0,
        };
        Ok(Experts {
            count,
            used,
            width,
            shared_width,
            gating,
            normalize: spec.normalize,
            dense_lead,
            selection_bias: spec.selection_bias,
            biases: spec.biases,
        })
    }

    fn pooling(&self) -> Result<Option<Pooling>, ModelError> {
        let Some(value) = self.metadata.get(&self.key("pooling_type")) else { return Ok(None) };
        let pooling = value.as_u64().and_then(Pooling::from_id);
        pooling.map(Some).ok_or_else(|| {
            self.bad("pooling_type", "should be 0-4 (none, mean, cls, last, rank)".to_string())
        })
    }

    fn required_count(&self, name: &str, max: u64) -> Result<usize, ModelError> {
        self.optional_count(name, max)?.ok_or_else(|| self.missing(name))
    }

    /// Qwen3.5's `ssm.*` keys, checked as llama.cpp assumes them (one head size for keys and
    /// values, value heads a multiple of key heads), and which layers are recurrent:
    /// `attention.recurrent_layers` if given, else all but every `full_attention_interval`-th
    /// (default 4).
    /// Granite 4.0-H's `ssm.*` keys, checked as llama.cpp assumes them (an inner size of twice
    /// the embedding, heads and groups that divide it, groups that divide the heads).
    fn mamba2(&self, n_embd: usize) -> Result<Mamba2, ModelError> {
        let conv_kernel = self.required_count("ssm.conv_kernel", MAX_CONV_KERNEL)?;
        let inner = self.required_count("ssm.inner_size", MAX_DIM)?;
        let state = self.required_count("ssm.state_size", MAX_DELTA_NET_HEAD)?;
        let heads = self.required_count("ssm.time_step_rank", MAX_DIM)?;
        let groups = self.required_count("ssm.group_count", MAX_DIM)?;
        if conv_kernel < 2 {
            return Err(self.bad("ssm.conv_kernel", format!("= {conv_kernel}: the convolution needs 2 taps")));
        }
        if inner != 2 * n_embd {
            return Err(
                self.bad("ssm.inner_size", format!("= {inner}: llama.cpp runs only twice embedding_length"))
            );
        }
        if inner % heads != 0 || heads % groups != 0 {
            return Err(self.bad(
                "ssm.time_step_rank",
                format!(
                    "= {heads} heads must divide inner_size {inner} and be a multiple of group_count {groups}"
                ),
            ));
        }
        Ok(Mamba2 { conv_kernel, inner, state, heads, groups })
    }

    fn delta_net(&self, n_layer: usize) -> Result<(DeltaNet, Vec<bool>), ModelError> {
        let conv_kernel = self.required_count("ssm.conv_kernel", MAX_CONV_KERNEL)?;
        let head_dim = self.required_count("ssm.state_size", MAX_DELTA_NET_HEAD)?;
        let k_heads = self.required_count("ssm.group_count", MAX_DIM)?;
        let v_heads = self.required_count("ssm.time_step_rank", MAX_DIM)?;
        let inner = self.required_count("ssm.inner_size", MAX_DIM)?;
        if v_heads % k_heads != 0 {
            return Err(self.bad(
                "ssm.time_step_rank",
                format!("= {v_heads} value heads is not a multiple of group_count {k_heads}"),
            ));
        }
        if v_heads.checked_mul(head_dim) != Some(inner) {
            return Err(self.bad(
                "ssm.inner_size",
                format!("= {inner} is not time_step_rank {v_heads} × state_size {head_dim}"),
            ));
        }
        if conv_kernel < 2 {
            return Err(self.bad("ssm.conv_kernel", format!("= {conv_kernel}: the convolution needs 2 taps")));
        }
        // Every width below is at most 3 × inner_size: key heads are at most as many as
        // value heads.
        let delta_net = DeltaNet { conv_kernel, k_heads, v_heads, head_dim };
        let recurrent = match self.metadata.get(&self.key("attention.recurrent_layers")) {
            Some(value) => match value.as_array() {
                Some(crate::gguf::Array::Bool(flags)) if flags.len() >= n_layer => flags[..n_layer].to_vec(),
                _ => {
                    return Err(self.bad(
                        "attention.recurrent_layers",
                        format!("should be an array of at least {n_layer} booleans"),
                    ));
                }
            },
            None => {
                let interval = self.optional_count("full_attention_interval", MAX_LAYERS)?.unwrap_or(4);
                (0..n_layer).map(|l| (l + 1) % interval != 0).collect()
            }
        };
        Ok((delta_net, recurrent))
    }

    /// M-RoPE's streams (`rope.dimension_sections`, four counts of pairs), one per rotated pair
    /// (ggml's `ggml_mrope_cache_init`): with pair `i` in sector `i mod Σ`, sectioned M-RoPE gives
    /// the first section's sectors to the text stream, the next to the row's, then the column's,
    /// then the fourth; interleaved gives sector `s` to stream `s mod 3` while that stream has
    /// sections left, and to the fourth otherwise. Text gives the first three streams the token's
    /// position and the fourth 0. Empty without M-RoPE.
    fn mrope_streams(&self, mrope: Mrope, rope_dims: usize) -> Result<Vec<u8>, ModelError> {
        let name = "rope.dimension_sections";
        if mrope == Mrope::None {
            return Ok(Vec::new());
        }
        // llama.cpp requires the key of every M-RoPE architecture.
        let Some(value) = self.metadata.get(&self.key(name)) else { return Err(self.missing(name)) };
        let sections: Vec<u64> = match value.as_array() {
            Some(crate::gguf::Array::I32(v)) => {
                v.iter().map(|&x| u64::try_from(x).unwrap_or(u64::MAX)).collect()
            }
            Some(crate::gguf::Array::U32(v)) => v.iter().map(|&x| u64::from(x)).collect(),
            _ => return Err(self.bad(name, "should be an array of integers".into())),
        };
        let [t, h, w, e] = match sections[..] {
            [t, h, w, e, ..] if [t, h, w, e].iter().all(|&s| s <= MAX_DIM) => {
                [t, h, w, e].map(|s| s as usize)
            }
            _ => return Err(self.bad(name, "should hold four section sizes".into())),
        };
        let total = t + h + w + e;
        if total == 0 || t + h + w == 0 {
            return Err(self.bad(name, "has no sections for text positions".into()));
        }
        Ok((0..rope_dims / 2)
            .map(|pair| {
                let sector = pair % total;
                match mrope {
                    Mrope::Sectioned => match sector {
                        s if s < t => 0,
                        s if s < t + h => 1,
                        s if s < t + h + w => 2,
                        _ => 3,
                    },
                    _ => {
                        let stream_has =
                            |stream: usize, size: usize| sector % 3 == stream && sector < 3 * size;
                        if stream_has(1, h) {
                            1
                        } else if stream_has(2, w) {
                            2
                        } else if stream_has(0, t) {
                            0
                        } else {
                            3
                        }
                    }
                }
            })
            .collect())
    }

    /// A count that is either one number for every layer or an array of one per layer (at
    /// least `n_layer` long; prediction blocks may follow).
    fn counts_per_layer(
        &self,
        name: &str,
        n_layer: usize,
        max: u64,
    ) -> Result<Option<Vec<usize>>, ModelError> {
        self.counts_per_layer_from(name, n_layer, 1, max)
    }

    /// [`Keys::counts_per_layer`] with counts from `min` (0 or 1).
    fn counts_per_layer_from(
        &self,
        name: &str,
        n_layer: usize,
        min: u64,
        max: u64,
    ) -> Result<Option<Vec<usize>>, ModelError> {
        let Some(value) = self.metadata.get(&self.key(name)) else { return Ok(None) };
        let Some(array) = value.as_array() else {
            if min == 0 && value.as_u64() == Some(0) {
                return Ok(Some(vec![0; n_layer]));
            }
            return Ok(self.optional_count(name, max)?.map(|n| vec![n; n_layer]));
        };
        let values: Vec<u64> = match array {
            crate::gguf::Array::U32(v) => v.iter().map(|&x| u64::from(x)).collect(),
            crate::gguf::Array::I32(v) => v.iter().map(|&x| u64::try_from(x).unwrap_or(0)).collect(),
            crate::gguf::Array::U64(v) => v.clone(),
            _ => return Err(self.bad(name, "should be a count or an array of counts".into())),
        };
        if values.len() < n_layer {
            return Err(self.bad(name, format!("has {} entries for {n_layer} layers", values.len())));
        }
        values[..n_layer]
            .iter()
            .map(|&n| match n {
                _ if n >= min && n <= max => Ok(n as usize),
                _ => Err(self.bad(name, format!("holds {n}, outside {min}..={max}"))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// A boolean per layer (an array at least `n_layer` long).
    fn bools_per_layer(&self, name: &str, n_layer: usize) -> Result<Vec<bool>, ModelError> {
        match self.metadata.get(&self.key(name)).and_then(|v| v.as_array()) {
            Some(crate::gguf::Array::Bool(flags)) if flags.len() >= n_layer => Ok(flags[..n_layer].to_vec()),
            Some(_) => Err(self.bad(name, format!("should be an array of at least {n_layer} booleans"))),
            None => Err(self.missing(name)),
        }
    }

    fn positive_float(&self, name: &str) -> Result<Option<f32>, ModelError> {
        let Some(value) = self.metadata.get(&self.key(name)) else { return Ok(None) };
        match value.as_f64() {
            Some(x) if x.is_finite() && x > 0.0 => Ok(Some(x as f32)),
            _ => Err(self.bad(name, "should be a positive finite number".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::Value;

    #[test]
    fn every_architecture_is_listed_and_named_as_in_its_files() {
        for architecture in Architecture::all() {
            assert_eq!(Architecture::from_name(architecture.name()), Some(architecture));
        }
        // A new variant stops this match from compiling until it is given a row.
        let row = |architecture: Architecture| match architecture {
            Architecture::Qwen3 => 0,
            Architecture::Qwen2 => 1,
            Architecture::Llama => 2,
            Architecture::Smollm3 => 3,
            Architecture::Phi3 => 4,
            Architecture::Gemma2 => 5,
            Architecture::Gemma3 => 6,
            Architecture::Qwen35 => 7,
            Architecture::Gemma4 => 8,
            Architecture::Bert => 9,
            Architecture::NomicBert => 10,
            Architecture::Qwen3Moe => 11,
            Architecture::Olmoe => 12,
            Architecture::GraniteMoe => 13,
            Architecture::Lfm2 => 14,
            Architecture::Lfm2Moe => 15,
            Architecture::Granite => 16,
            Architecture::GptOss => 17,
            Architecture::GraniteHybrid => 18,
            Architecture::Qwen3Vl => 19,
            Architecture::Qwen2Vl => 20,
        };
        assert_eq!(Architecture::all().map(row).collect::<Vec<_>>(), (0..21).collect::<Vec<_>>());
        let message = ModelError::UnsupportedArchitecture("mamba".into()).to_string();
        assert!(
            message
                .ends_with("(supported: qwen3, qwen2, llama, smollm3, phi3, gemma2, gemma3, qwen35, gemma4, bert, nomic-bert, qwen3moe, olmoe, granitemoe, lfm2, lfm2moe, granite, gpt-oss, granitehybrid, qwen3vl, qwen2vl)"),
            "{message}"
        );
    }

    fn metadata(pairs: &[(&str, Value)]) -> Metadata {
        let mut metadata = Metadata::default();
        for (key, value) in pairs {
            metadata.insert(key.to_string(), value.clone()).unwrap();
        }
        metadata
    }

    fn qwen3(heads: u32, kv_heads: u32, head_dim: u32) -> Metadata {
        metadata(&[
            ("general.architecture", Value::String("qwen3".into())),
            ("qwen3.block_count", Value::U32(2)),
            ("qwen3.embedding_length", Value::U32(256)),
            ("qwen3.feed_forward_length", Value::U32(768)),
            ("qwen3.attention.head_count", Value::U32(heads)),
            ("qwen3.attention.head_count_kv", Value::U32(kv_heads)),
            ("qwen3.attention.key_length", Value::U32(head_dim)),
        ])
    }

    #[test]
    fn head_widths_are_checked_products() {
        let config = Config::from_metadata(&qwen3(4, 2, 64), 100).unwrap();
        assert_eq!((config.q_dim(), config.kv_dim()), (256, 128));
        // Each factor is within bounds, the product (2^40) is not: a typed error naming the key,
        // not a width that wraps on wasm32 and sizes a buffer.
        let error = Config::from_metadata(&qwen3(1 << 20, 1 << 20, 1 << 20), 100).unwrap_err();
        assert!(
            matches!(&error, ModelError::BadKey { key, .. } if key == "qwen3.attention.head_count"),
            "{error}"
        );
        let error = Config::from_metadata(&qwen3(1 << 10, 1 << 10, 1 << 12), 100).unwrap_err();
        assert!(error.to_string().contains("exceed"), "{error}");
    }

    /// Qwen2-VL's sections run in order (the first `t` pairs by the text stream, the next `h` by a
    /// picture's row, ...), wrapping when they cover fewer pairs than a head rotates; Qwen3-VL's
    /// take turns. Without the key an M-RoPE architecture is refused, as llama.cpp refuses it.
    #[test]
    fn mrope_sections_assign_each_pair_its_stream() {
        let header = |arch: &str, sections: Option<[i32; 4]>| {
            let mut pairs = vec![
                ("general.architecture".to_string(), Value::String(arch.into())),
                (format!("{arch}.block_count"), Value::U32(1)),
                (format!("{arch}.embedding_length"), Value::U32(64)),
                (format!("{arch}.feed_forward_length"), Value::U32(128)),
                (format!("{arch}.attention.head_count"), Value::U32(2)),
                (format!("{arch}.attention.key_length"), Value::U32(16)),
            ];
            if let Some(sections) = sections {
                let value = Value::Array(crate::gguf::Array::I32(sections.to_vec()));
                pairs.push((format!("{arch}.rope.dimension_sections"), value));
            }
            let pairs: Vec<(&str, Value)> = pairs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            Config::from_metadata(&metadata(&pairs), 100)
        };
        let streams = |arch: &str, sections| header(arch, Some(sections)).unwrap().rope_streams;
        // 8 pairs a head.
        assert_eq!(streams("qwen2vl", [2, 3, 3, 0]), [0, 0, 1, 1, 1, 2, 2, 2]);
        assert_eq!(streams("qwen2vl", [1, 1, 1, 1]), [0, 1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(streams("qwen3vl", [2, 3, 3, 0]), [0, 1, 2, 0, 1, 2, 3, 1]);
        for arch in ["qwen2vl", "qwen3vl"] {
            let error = header(arch, None).unwrap_err();
            assert!(error.to_string().contains("rope.dimension_sections"), "{error}");
        }
    }

    /// A Qwen3-MoE header with these expert keys (absent where `None`).
    fn qwen3moe(count: Option<u32>, used: Option<u32>, width: Option<u32>) -> Metadata {
        let mut pairs = vec![
            ("general.architecture", Value::String("qwen3moe".into())),
            ("qwen3moe.block_count", Value::U32(2)),
            ("qwen3moe.embedding_length", Value::U32(256)),
            ("qwen3moe.feed_forward_length", Value::U32(768)),
            ("qwen3moe.attention.head_count", Value::U32(4)),
        ];
        let keys =
            ["qwen3moe.expert_count", "qwen3moe.expert_used_count", "qwen3moe.expert_feed_forward_length"];
        for (key, value) in keys.into_iter().zip([count, used, width]) {
            if let Some(value) = value {
                pairs.push((key, Value::U32(value)));
            }
        }
        metadata(&pairs)
    }

    #[test]
    fn expert_counts_are_checked_before_anything_is_sized_by_them() {
        let config = Config::from_metadata(&qwen3moe(Some(8), Some(2), Some(128)), 100).unwrap();
        let experts = config.experts.unwrap();
        assert_eq!((experts.count, experts.used, experts.width, experts.shared_width), (8, 2, 128, None));
        // Without its own key, an expert's width is the FFN's share per used expert.
        assert_eq!(
            Config::from_metadata(&qwen3moe(Some(8), Some(2), None), 100).unwrap().experts.unwrap().width,
            384
        );
        // k equal to the expert count is allowed: every expert runs.
        assert!(Config::from_metadata(&qwen3moe(Some(4), Some(4), Some(128)), 100).is_ok());
        let bad = |count, used, key: &str| {
            let error = Config::from_metadata(&qwen3moe(count, used, Some(128)), 100).unwrap_err();
            let named = match &error {
                ModelError::BadKey { key, .. } | ModelError::MissingKey(key) => key.clone(),
                other => panic!("{other}"),
            };
            assert_eq!(named, format!("qwen3moe.{key}"), "{error}");
        };
        bad(None, Some(2), "expert_count");
        bad(Some(8), None, "expert_used_count");
        bad(Some(0), Some(2), "expert_count");
        bad(Some(8), Some(9), "expert_used_count");
        bad(Some(100_000), Some(2), "expert_count");
    }

    #[test]
    fn yarn_scaling_is_read_as_llama_cpp_sets_it_up() {
        let yarn = |factor: Value| {
            let mut m = qwen3(4, 2, 64);
            m.insert("qwen3.rope.scaling.type".into(), Value::String("yarn".into())).unwrap();
            m.insert("qwen3.rope.scaling.factor".into(), factor).unwrap();
            m.insert("qwen3.rope.scaling.original_context_length".into(), Value::U32(4096)).unwrap();
            Config::from_metadata(&m, 100)
        };
        let rope = yarn(Value::F32(32.0)).unwrap().rope_global;
        assert_eq!(rope.freq_scale, 1.0 / 32.0);
        assert_eq!(rope.yarn, Some(Yarn { original_context: 4096 }));
        // llama.cpp's factor cancels its own inverse, then ggml multiplies by 1 + 0.1 ln 32.
        assert!((rope.attn_factor - (1.0 + 0.1 * 32f32.ln())).abs() < 1e-6, "{}", rope.attn_factor);
        // gpt-oss's ramp: pairs 8 to 18 of 32 at base 150000.
        assert_eq!(Yarn { original_context: 4096 }.ramp(64, 150_000.0), [8.0, 18.0]);
        assert_eq!(Yarn::extrapolation([8.0, 18.0], 3), 1.0);
        assert_eq!(Yarn::extrapolation([8.0, 18.0], 13), 0.5);
        assert_eq!(Yarn::extrapolation([8.0, 18.0], 30), 0.0);
        for factor in [Value::F32(0.0), Value::F32(f32::NAN), Value::String("x".into())] {
            let error = yarn(factor).unwrap_err();
            assert!(
                matches!(&error, ModelError::BadKey { key, .. } if key == "qwen3.rope.scaling.factor"),
                "{error}"
            );
        }
    }

    /// A Granite 4.0-H header: attention in layer 1 only, Mamba-2 keys as given.
    fn granite_hybrid(inner: u32, heads: u32, groups: u32) -> Metadata {
        metadata(&[
            ("general.architecture", Value::String("granitehybrid".into())),
            ("granitehybrid.block_count", Value::U32(2)),
            ("granitehybrid.embedding_length", Value::U32(256)),
            ("granitehybrid.feed_forward_length", Value::U32(512)),
            ("granitehybrid.attention.head_count", Value::U32(4)),
            ("granitehybrid.attention.head_count_kv", Value::Array(crate::gguf::Array::U32(vec![0, 2]))),
            ("granitehybrid.logit_scale", Value::F32(6.0)),
            ("granitehybrid.ssm.conv_kernel", Value::U32(4)),
            ("granitehybrid.ssm.inner_size", Value::U32(inner)),
            ("granitehybrid.ssm.state_size", Value::U32(64)),
            ("granitehybrid.ssm.time_step_rank", Value::U32(heads)),
            ("granitehybrid.ssm.group_count", Value::U32(groups)),
        ])
    }

    #[test]
    fn mamba2_keys_are_checked_and_a_file_without_experts_is_dense() {
        let config = Config::from_metadata(&granite_hybrid(512, 8, 2), 100).unwrap();
        let shape = config.mamba2.unwrap();
        assert_eq!((shape.head_dim(), shape.conv_dim(), shape.in_dim()), (64, 768, 1288));
        assert_eq!(config.recurrent_state_lens(), (3 * 768, 512 * 64));
        assert!(config.is_recurrent(0) && !config.is_recurrent(1));
        assert_eq!(config.experts, None);
        for (metadata, key) in [
            (granite_hybrid(384, 8, 2), "ssm.inner_size"), // not twice the embedding
            (granite_hybrid(512, 7, 1), "ssm.time_step_rank"), // heads do not divide 512
            (granite_hybrid(512, 8, 3), "ssm.time_step_rank"), // groups do not divide the heads
            (granite_hybrid(512, 8, 0), "ssm.group_count"),
        ] {
            let error = Config::from_metadata(&metadata, 100).unwrap_err();
            let named = match &error {
                ModelError::BadKey { key, .. } => key.clone(),
                other => panic!("{other}"),
            };
            assert_eq!(named, format!("granitehybrid.{key}"), "{error}");
        }
    }
}

#[cfg(test)]
mod prediction_block_tests {
    use super::*;
    use crate::gguf::Value;

    #[test]
    fn prediction_blocks_are_left_out_of_the_layers() {
        let with_prediction_blocks = |n: u32| {
            let mut metadata = Metadata::default();
            for (key, value) in [
                ("general.architecture", Value::String("qwen3".into())),
                ("qwen3.block_count", Value::U32(3)),
                ("qwen3.embedding_length", Value::U32(64)),
                ("qwen3.feed_forward_length", Value::U32(128)),
                ("qwen3.attention.head_count", Value::U32(2)),
                ("qwen3.nextn_predict_layers", Value::U32(n)),
            ] {
                metadata.insert(key.to_string(), value).unwrap();
            }
            Config::from_metadata(&metadata, 10)
        };
        assert_eq!(with_prediction_blocks(1).unwrap().n_layer, 2);
        let error = with_prediction_blocks(3).unwrap_err();
        assert!(
            matches!(&error, ModelError::BadKey { key, .. } if key == "qwen3.nextn_predict_layers"),
            "{error}"
        );
    }
}
