//! Every way the supported architectures differ, as one table row each ([`ARCHITECTURES`]).
//! Config and weight loading read the row; nothing else asks which architecture a model is.
//! (llama.cpp keeps the same facts in `llama-arch.cpp`'s tables and `llama-model.cpp`'s
//! per-architecture cases.) A new architecture of a known family is a new row.

use serde::Serialize;

use super::config::RopeStyle;

/// The architectures this crate runs (`general.architecture`), in the table's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    Qwen3,
    Qwen2,
    Llama,
    Smollm3,
    Phi3,
    Gemma2,
    Gemma3,
    Qwen35,
    Gemma4,
    Bert,
    NomicBert,
    Qwen3Moe,
    Olmoe,
    GraniteMoe,
    Lfm2,
    Lfm2Moe,
    Granite,
    GptOss,
    GraniteHybrid,
    Qwen3Vl,
    Qwen2Vl,
}

/// How M-RoPE (`rope.dimension_sections`, four counts of pairs) assigns a head's rotated pairs
/// to the position streams (text, a picture's row, its column, a fourth), as ggml's
/// `ggml_mrope_cache_init` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mrope {
    /// Plain RoPE at the text position.
    None,
    /// Qwen2-VL (`LLAMA_ROPE_TYPE_MROPE`): the first section's pairs by the text stream, the
    /// next section's by the row, and so on.
    Sectioned,
    /// Qwen3-VL and Qwen3.5 (`LLAMA_ROPE_TYPE_IMROPE`): the streams take turns pair by pair while
    /// each has pairs left.
    Interleaved,
}

/// Which layer builder of `forward.rs` runs an architecture's layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Norm, mixer, residual add; norm, feed-forward, residual add (Llama-like, Qwen3.5).
    PreNorm,
    /// Each block's output normalized again before its add, plus Gemma 4's per-layer input
    /// and output scale (Gemma 2, 3, 4).
    Sandwich,
    /// BERT's encoder: LayerNorm (with a bias) after each residual add, attention over the
    /// whole text, the embeddings normalized too, no output head (it only embeds).
    Encoder,
}

/// The feed-forward block's gate: `act(W_gate · h) ⊙ (W_up · h)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// SiLU gate (llama.cpp `LLM_FFN_SILU`).
    SwiGlu,
    /// GELU gate, tanh approximation (llama.cpp `LLM_FFN_GELU`).
    GeGlu,
    /// No gate: `W_down · gelu(W_up · h)`, biases added after both (BERT).
    Gelu,
    /// gpt-oss's clamped SwiGLU (llama.cpp `LLM_FFN_SWIGLU_OAI_MOE`): the gate capped at 7,
    /// the up projection clamped to ±7, `gate · sigmoid(1.702 · gate) · (up + 1)`.
    SwiGluOai,
}

/// How a token's position enters the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positions {
    /// Rotary embeddings of queries and keys.
    Rope,
    /// A learned row per position added to the token embeddings (`position_embd`, BERT).
    Learned,
}

/// Per-head RMSNorm of queries and keys before RoPE (`attn_q_norm`, `attn_k_norm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QkNorm {
    None,
    /// Each head normalized on its own, one weight of a head's size (Qwen3, Gemma 3).
    PerHead,
    /// All of a token's queries (and all its keys) normalized together, one weight as wide as
    /// the projection (OLMoE).
    WholeRow,
}

/// How a router's scores become the probabilities experts are chosen by and weighted with
/// (llama.cpp's `llama_expert_gating_func_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Gating {
    Softmax,
    Sigmoid,
    /// The raw scores choose; the chosen ones' softmax weighs them (gpt-oss).
    #[serde(rename = "softmax_weight")]
    SoftmaxWeight,
}

/// Where an expert's FFN width comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpertWidth {
    /// `expert_feed_forward_length`, else `feed_forward_length / expert_used_count` (Qwen3-MoE).
    ExpertKeyOrShare,
    /// `feed_forward_length` (OLMoE, Granite MoE).
    FeedForwardLength,
}

/// A mixture-of-experts feed-forward block, as the family's graph calls llama.cpp's
/// `build_moe_ffn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpertSpec {
    /// The family's gating, or `None`: the file's `expert_gating_func` (required).
    pub gating: Option<Gating>,
    /// The chosen experts' weights divided by their sum.
    pub normalize: bool,
    pub width: ExpertWidth,
    /// A shared expert (`ffn_*_shexp`, always run) where the file gives its width
    /// (`expert_shared_feed_forward_length`).
    pub shared: bool,
    /// A per-expert bias added to the probabilities to choose, not to weigh
    /// (`exp_probs_b.bias`, LFM2-MoE).
    pub selection_bias: bool,
    /// The first `leading_dense_block_count` layers have a dense FFN instead (LFM2-MoE).
    pub leading_dense: bool,
    /// A file without experts (`expert_count` absent or 0) has dense FFNs instead (Granite
    /// 4.0-H's dense sizes).
    pub optional: bool,
    /// Biases on the router's scores and on every expert's three projections (gpt-oss:
    /// `ffn_gate_inp.bias`, `ffn_{gate,up,down}_exps.bias`).
    pub biases: bool,
}

/// The defaults of an expert row: a renormalized softmax router, nothing more.
const SOFTMAX_EXPERTS: ExpertSpec = ExpertSpec {
    gating: Some(Gating::Softmax),
    normalize: true,
    width: ExpertWidth::FeedForwardLength,
    shared: false,
    selection_bias: false,
    leading_dense: false,
    biases: false,
    optional: false,
};

/// Whether a projection's bias is read (`blk.N.attn_{q,k,v}.bias`, `blk.N.attn_output.bias`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bias {
    /// Never read, even where a file has them.
    Ignored,
    /// Read where the file has them.
    Optional,
    /// A file without them is refused.
    Required,
}

/// What queries are scaled by before their dot products with keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionScale {
    /// `1 / sqrt(head size)`.
    InverseSqrtHeadDim,
    /// 1: queries and keys are normalized (Gemma 4).
    One,
    /// `1 / sqrt(n_embd / n_head)` for the 46-layer Gemma 2 27B, else `1 / sqrt(head size)`
    /// (llama.cpp, after gemma_pytorch).
    Gemma2,
}

/// Which layers attend within a sliding window, and with what RoPE.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sliding {
    /// Every layer attends globally.
    None,
    /// Of every `period` layers, all but the last are local.
    Periodic { period: usize, window: Window, local_rope: LocalRope },
    /// Every attention layer is local where the file gives a window (LFM2), with the global
    /// RoPE.
    Every,
    /// The file lists the local layers (`attention.sliding_window_pattern`); they have their own
    /// head size and rotated dimensions (`*_swa` keys), and the last `attention.shared_kv_layers`
    /// layers read an earlier layer's keys and values.
    Listed { local_rope: LocalRope },
}

/// The window of local layers (`attention.sliding_window`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// From the file; without the key no layer is local.
    Optional,
    /// From the file, else this many positions.
    Default(usize),
    /// A file without it is refused.
    Required,
}

/// RoPE of the local layers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LocalRope {
    /// This base, unscaled (Gemma 3: llama.cpp does not read it from the file).
    Base(f32),
    /// The global RoPE with `rope.freq_base_swa` as its base where the file gives one.
    SwaBaseOrGlobal,
}

/// Output logits squashed by `cap · tanh(logit / cap)` (`final_logit_softcapping`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FinalSoftcap {
    None,
    /// From the file, else this cap.
    Default(f32),
    /// Only where the file asks for it.
    FromFile,
}

/// One architecture's row: everything the loader and the forward pass do differently for it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArchSpec {
    pub architecture: Architecture,
    /// `general.architecture`, and the prefix of its metadata keys.
    pub name: &'static str,
    pub family: Family,
    pub positions: Positions,
    pub rope_style: RopeStyle,
    pub activation: Activation,
    pub qk_norm: QkNorm,
    pub qkv_bias: Bias,
    /// The attention output projection's bias (encoders read theirs wherever a file has one).
    pub output_bias: Bias,
    /// Norms of the attention and FFN outputs before their residual adds
    /// (`post_attention_norm`, `post_ffw_norm`).
    pub post_norms: bool,
    /// The FFN input norm's tensor (Qwen3.5 calls it `post_attention_norm`).
    pub ffn_norm: &'static str,
    /// `ffn_up` holds the gate's rows, then the up projection's (Phi-3).
    pub fused_gate_up: bool,
    /// The output projection is `token_embd`, whatever the file holds (Gemma 2).
    pub always_tied_output: bool,
    /// Without `attn_v`, the keys' projection serves as values (Gemma 4).
    pub optional_values: bool,
    /// A learned scale of each layer's output (`layer_output_scale`, Gemma 4).
    pub layer_output_scale: bool,
    /// Token embeddings multiplied by `sqrt(n_embd)`.
    pub scaled_embeddings: bool,
    /// Queries are multiplied by the attention scale before attention, which then uses scale 1
    /// (rather than the scores after): the same product, rounded where llama.cpp rounds it.
    pub scale_queries: bool,
    pub attention_scale: AttentionScale,
    pub sliding: Sliding,
    /// Whether local layers divide their RoPE frequencies by the file's factors too (Gemma 4's
    /// factors shape only its global layers' "proportional" RoPE).
    pub local_rope_factors: bool,
    /// Attention scores squashed by `cap · tanh(score / cap)`, from
    /// `attn_logit_softcapping`, else this cap.
    pub attn_softcap: Option<f32>,
    pub final_softcap: FinalSoftcap,
    /// The query projection also yields a per-head output gate, `sigmoid(gate) ⊙ attention`.
    pub gated_attention: bool,
    /// Values are RMS-normalized (no weight) before they are cached.
    pub normalize_values: bool,
    /// Per-layer token embeddings (`embedding_length_per_layer_input`) and the block that adds
    /// them in each layer.
    pub per_layer_inputs: bool,
    /// Gated DeltaNet layers (`ssm.*` keys) between the attention layers.
    pub delta_net: bool,
    /// LFM2's short convolution layers (`shortconv.l_cache`) wherever a layer has no KV heads.
    pub short_conv: bool,
    /// Mamba-2 layers (`ssm.*` keys) wherever a layer has no KV heads (Granite 4.0-H).
    pub mamba2: bool,
    /// The final norm's tensor (LFM2's files call it `token_embd_norm`).
    pub output_norm: &'static str,
    /// M-RoPE (`rope.dimension_sections`): each rotated pair turns by one of four position
    /// streams, the pairs of the stream that text leaves at position 0 unrotated.
    pub mrope: Mrope,
    /// Deepstack (`n_deepstack_layers`, Qwen3-VL): a picture's rows come with that many more
    /// slices of the model's width, each added to the hidden state after one of the first layers.
    pub deepstack: bool,
    /// Every this-many-th layer attends without RoPE (llama.cpp fixes 4 for SmolLM3).
    pub no_rope_every: Option<usize>,
    /// Files with experts (`expert_count` > 0) are refused by name: only dense sizes run.
    pub dense_only: bool,
    /// Every layer's feed-forward block is a mixture of experts.
    pub experts: Option<ExpertSpec>,
    /// Granite's multipliers from the file: of the embeddings (`embedding_scale`), of each
    /// block's output before its residual add (`residual_scale`), of the attention scores
    /// (`attention.scale`), and the logits divided by `logit_scale`.
    pub granite_scales: bool,
    /// A learned logit per query head that joins every softmax of its attention scores and
    /// takes its share of the weight (`attn_sinks`, gpt-oss).
    pub attention_sinks: bool,
}

/// The defaults of a row: a Llama-like decoder (Qwen3's neighbours differ in a few fields).
const LLAMA_LIKE: ArchSpec = ArchSpec {
    architecture: Architecture::Llama,
    name: "llama",
    family: Family::PreNorm,
    positions: Positions::Rope,
    rope_style: RopeStyle::Neox,
    activation: Activation::SwiGlu,
    qk_norm: QkNorm::None,
    qkv_bias: Bias::Ignored,
    output_bias: Bias::Ignored,
    post_norms: false,
    ffn_norm: "ffn_norm",
    fused_gate_up: false,
    always_tied_output: false,
    optional_values: false,
    layer_output_scale: false,
    scaled_embeddings: false,
    scale_queries: false,
    attention_scale: AttentionScale::InverseSqrtHeadDim,
    sliding: Sliding::None,
    local_rope_factors: true,
    attn_softcap: None,
    final_softcap: FinalSoftcap::None,
    gated_attention: false,
    normalize_values: false,
    per_layer_inputs: false,
    delta_net: false,
    short_conv: false,
    mamba2: false,
    output_norm: "output_norm",
    mrope: Mrope::None,
    deepstack: false,
    no_rope_every: None,
    dense_only: false,
    experts: None,
    granite_scales: false,
    attention_sinks: false,
};

/// Gemma's common ground: scaled embeddings, post-norms, GeGLU.
const GEMMA: ArchSpec = ArchSpec {
    family: Family::Sandwich,
    activation: Activation::GeGlu,
    post_norms: true,
    scaled_embeddings: true,
    scale_queries: true,
    ..LLAMA_LIKE
};

/// BERT's encoder: learned positions, biases wherever the file has them, plain GELU FFN.
const ENCODER: ArchSpec = ArchSpec {
    family: Family::Encoder,
    positions: Positions::Learned,
    activation: Activation::Gelu,
    qkv_bias: Bias::Optional,
    ..LLAMA_LIKE
};

/// Every architecture, in the order people meet them in messages (and [`Architecture`]'s).
pub const ARCHITECTURES: [ArchSpec; 21] = [
    // Qwen3: per-head Q/K RMSNorm, NeoX RoPE, GQA, SwiGLU.
    ArchSpec { architecture: Architecture::Qwen3, name: "qwen3", qk_norm: QkNorm::PerHead, ..LLAMA_LIKE },
    // Qwen2, Qwen2.5 (and DeepSeek-R1-Distill-Qwen): Q/K/V biases.
    ArchSpec { architecture: Architecture::Qwen2, name: "qwen2", qkv_bias: Bias::Required, ..LLAMA_LIKE },
    // Llama (SmolLM2, Llama 2/3): interleaved ("normal") RoPE.
    ArchSpec {
        architecture: Architecture::Llama,
        name: "llama",
        rope_style: RopeStyle::Normal,
        qkv_bias: Bias::Optional,
        ..LLAMA_LIKE
    },
    // SmolLM3: Llama whose every fourth layer attends without RoPE ("NoPE").
    ArchSpec {
        architecture: Architecture::Smollm3,
        name: "smollm3",
        rope_style: RopeStyle::Normal,
        qkv_bias: Bias::Optional,
        no_rope_every: Some(4),
        ..LLAMA_LIKE
    },
    // Phi-3, Phi-3.5, Phi-4-mini: fused QKV (read wherever a file has it) and gate/up, LongRoPE
    // factors, queries scaled before attention.
    ArchSpec {
        architecture: Architecture::Phi3,
        name: "phi3",
        fused_gate_up: true,
        scale_queries: true,
        ..LLAMA_LIKE
    },
    // Gemma 2: attention and final logits soft-capped, every other layer local.
    ArchSpec {
        architecture: Architecture::Gemma2,
        name: "gemma2",
        always_tied_output: true,
        attention_scale: AttentionScale::Gemma2,
        sliding: Sliding::Periodic {
            period: 2,
            window: Window::Default(4096),
            local_rope: LocalRope::SwaBaseOrGlobal,
        },
        attn_softcap: Some(50.0),
        final_softcap: FinalSoftcap::Default(30.0),
        ..GEMMA
    },
    // Gemma 3: Q/K norm, five local layers for every global one.
    ArchSpec {
        architecture: Architecture::Gemma3,
        name: "gemma3",
        qk_norm: QkNorm::PerHead,
        sliding: Sliding::Periodic {
            period: 6,
            window: Window::Optional,
            local_rope: LocalRope::Base(10_000.0),
        },
        ..GEMMA
    },
    // Qwen3.5: gated DeltaNet layers (a recurrent state instead of a KV cache) with full
    // attention every few layers (gated queries, Q/K norm, partial interleaved M-RoPE).
    ArchSpec {
        architecture: Architecture::Qwen35,
        name: "qwen35",
        qk_norm: QkNorm::PerHead,
        ffn_norm: "post_attention_norm",
        gated_attention: true,
        delta_net: true,
        mrope: Mrope::Interleaved,
        ..LLAMA_LIKE
    },
    // Gemma 4 (dense): Gemma 3's layout with listed local layers that have their own head
    // size, KV heads and RoPE; normalized values; shared keys and values in the last layers;
    // per-layer token embeddings; a scale per layer; soft-capped logits where the file asks.
    ArchSpec {
        architecture: Architecture::Gemma4,
        name: "gemma4",
        qk_norm: QkNorm::PerHead,
        optional_values: true,
        layer_output_scale: true,
        scale_queries: false,
        attention_scale: AttentionScale::One,
        sliding: Sliding::Listed { local_rope: LocalRope::SwaBaseOrGlobal },
        local_rope_factors: false,
        final_softcap: FinalSoftcap::FromFile,
        normalize_values: true,
        per_layer_inputs: true,
        dense_only: true,
        ..GEMMA
    },
    // BERT (bge, all-MiniLM): the encoder as it was published.
    ArchSpec { architecture: Architecture::Bert, name: "bert", ..ENCODER },
    // Nomic Embed: BERT's encoder with NeoX RoPE instead of learned positions, fused QKV and
    // a SwiGLU FFN without biases.
    ArchSpec {
        architecture: Architecture::NomicBert,
        name: "nomic-bert",
        positions: Positions::Rope,
        activation: Activation::SwiGlu,
        ..ENCODER
    },
    // Qwen3-MoE (Qwen3-30B-A3B): Qwen3's attention, a softmax router whose chosen weights are
    // renormalized.
    ArchSpec {
        architecture: Architecture::Qwen3Moe,
        name: "qwen3moe",
        qk_norm: QkNorm::PerHead,
        experts: Some(ExpertSpec { width: ExpertWidth::ExpertKeyOrShare, ..SOFTMAX_EXPERTS }),
        ..LLAMA_LIKE
    },
    // OLMoE: queries and keys normalized across all heads at once, chosen weights kept as the
    // softmax gave them.
    ArchSpec {
        architecture: Architecture::Olmoe,
        name: "olmoe",
        qk_norm: QkNorm::WholeRow,
        experts: Some(ExpertSpec { normalize: false, ..SOFTMAX_EXPERTS }),
        ..LLAMA_LIKE
    },
    // Granite 3.x MoE: Llama's interleaved RoPE, Granite's four multipliers, renormalized
    // softmax routing, and a shared expert where the file has one.
    ArchSpec {
        architecture: Architecture::GraniteMoe,
        name: "granitemoe",
        rope_style: RopeStyle::Normal,
        output_bias: Bias::Optional,
        experts: Some(ExpertSpec { shared: true, ..SOFTMAX_EXPERTS }),
        granite_scales: true,
        ..LLAMA_LIKE
    },
    // LFM2, LFM2.5: short convolution layers (a gated causal convolution over 3 positions,
    // its last inputs kept as state) between attention layers with per-head Q/K norm; every
    // attention layer local where the file gives a window; the final norm named
    // `token_embd_norm`.
    ArchSpec {
        architecture: Architecture::Lfm2,
        name: "lfm2",
        qk_norm: QkNorm::PerHead,
        short_conv: true,
        output_norm: "token_embd_norm",
        sliding: Sliding::Every,
        ..LLAMA_LIKE
    },
    // LFM2-MoE (LFM2-8B-A1B): LFM2's layers, dense FFNs in the first layers, then experts
    // chosen by the file's gating (sigmoid) plus a selection bias, renormalized.
    ArchSpec {
        architecture: Architecture::Lfm2Moe,
        name: "lfm2moe",
        qk_norm: QkNorm::PerHead,
        short_conv: true,
        output_norm: "token_embd_norm",
        sliding: Sliding::Every,
        experts: Some(ExpertSpec {
            gating: None,
            width: ExpertWidth::ExpertKeyOrShare,
            selection_bias: true,
            leading_dense: true,
            ..SOFTMAX_EXPERTS
        }),
        ..LLAMA_LIKE
    },
    // Granite 3.x and 4.0 dense: Llama with Granite's four multipliers, and RoPE switched off
    // where `rope.scaling.finetuned` says false.
    ArchSpec {
        architecture: Architecture::Granite,
        name: "granite",
        rope_style: RopeStyle::Normal,
        qkv_bias: Bias::Optional,
        output_bias: Bias::Optional,
        granite_scales: true,
        ..LLAMA_LIKE
    },
    // gpt-oss: every layer's FFN a mixture of experts (raw router scores with a bias choose,
    // their softmax weighs; biased experts through the clamped SwiGLU), biases on every
    // attention projection, a sink logit per head, every other layer local, YaRN RoPE.
    ArchSpec {
        architecture: Architecture::GptOss,
        name: "gpt-oss",
        activation: Activation::SwiGluOai,
        qkv_bias: Bias::Required,
        output_bias: Bias::Required,
        ffn_norm: "post_attention_norm",
        sliding: Sliding::Periodic {
            period: 2,
            window: Window::Required,
            local_rope: LocalRope::SwaBaseOrGlobal,
        },
        experts: Some(ExpertSpec {
            gating: Some(Gating::SoftmaxWeight),
            normalize: false,
            width: ExpertWidth::ExpertKeyOrShare,
            biases: true,
            ..SOFTMAX_EXPERTS
        }),
        attention_sinks: true,
        ..LLAMA_LIKE
    },
    // Granite 4.0-H: Mamba-2 layers (wherever a layer has no KV heads) between attention layers
    // that may skip RoPE (`rope.scaling.finetuned`), Granite's multipliers, and a mixture of
    // experts with a shared expert where the file has experts (dense FFNs otherwise).
    ArchSpec {
        architecture: Architecture::GraniteHybrid,
        name: "granitehybrid",
        rope_style: RopeStyle::Normal,
        qkv_bias: Bias::Optional,
        output_bias: Bias::Optional,
        mamba2: true,
        experts: Some(ExpertSpec { shared: true, optional: true, ..SOFTMAX_EXPERTS }),
        granite_scales: true,
        ..LLAMA_LIKE
    },
    // Qwen3-VL's language model: Qwen3 with interleaved M-RoPE and deepstack (a picture's rows
    // carry slices added after each of the first layers).
    ArchSpec {
        architecture: Architecture::Qwen3Vl,
        name: "qwen3vl",
        qk_norm: QkNorm::PerHead,
        mrope: Mrope::Interleaved,
        deepstack: true,
        ..LLAMA_LIKE
    },
    // Qwen2-VL's and Qwen2.5-VL's language model: Qwen2 (Q/K/V biases) with M-RoPE in sections
    // (a run of pairs per stream).
    ArchSpec {
        architecture: Architecture::Qwen2Vl,
        name: "qwen2vl",
        qkv_bias: Bias::Required,
        mrope: Mrope::Sectioned,
        ..LLAMA_LIKE
    },
];

// Row i describes variant i, so a variant finds its row by index.
const _: () = {
    let mut i = 0;
    while i < ARCHITECTURES.len() {
        assert!(ARCHITECTURES[i].architecture as usize == i);
        i += 1;
    }
};

impl Architecture {
    pub fn from_name(name: &str) -> Option<Self> {
        ARCHITECTURES.iter().find(|spec| spec.name == name).map(|spec| spec.architecture)
    }

    /// Every architecture this crate runs, in the table's order.
    pub fn all() -> impl Iterator<Item = Architecture> {
        ARCHITECTURES.iter().map(|spec| spec.architecture)
    }

    pub fn spec(self) -> &'static ArchSpec {
        &ARCHITECTURES[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }
}
