//! The model's tensors: matrices stay in the file's bytes (a byte range plus a type), small
//! vectors (norm weights) are decoded to f32 once. Every tensor's presence, shape and type is
//! checked here, so the forward pass never meets a surprise.

use std::ops::Range;

use super::arch::{Activation, Bias, Family, Positions, QkNorm};
use super::bytes::ModelBytes;
use super::config::{Config, DeltaNet, Experts, Mamba2};
use super::error::ModelError;
use crate::gguf::{GgufHeader, TensorInfo};
use crate::tensor::{WeightLayout, WeightType, dequantize_row};

/// A matrix of `rows` rows of `cols` elements, stored in the model bytes at `range`.
#[derive(Clone, Debug)]
pub struct Matrix {
    pub name: String,
    pub range: Range<usize>,
    pub weight_type: WeightType,
    pub rows: usize,
    pub cols: usize,
    /// How llama.cpp would hold it, which decides the order matmuls sum in: repacked where its
    /// x86 CPU backend repacks, except for `token_embd` (and so a tied output projection),
    /// which stays plain because its first use is a row lookup.
    pub layout: WeightLayout,
}

impl Matrix {
    /// Consecutive row ranges of this matrix as matrices of their own (a fused tensor's parts),
    /// `N` parts of the given row counts, which add up to `rows`. Each keeps the fused tensor's
    /// layout where its row count allows (llama.cpp repacks the fused tensor whole).
    pub fn split_rows<const N: usize>(&self, parts: [usize; N]) -> [Matrix; N] {
        debug_assert_eq!(parts.iter().sum::<usize>(), self.rows);
        let row_bytes = self.range.len() / self.rows;
        let mut start = self.range.start;
        parts.map(|rows| {
            let range = start..start + rows * row_bytes;
            start = range.end;
            let layout = self.layout.of_part(rows);
            Matrix {
                name: self.name.clone(),
                range,
                weight_type: self.weight_type,
                rows,
                cols: self.cols,
                layout,
            }
        })
    }

    /// Its bytes (empty only if `file` is not the one it was loaded from).
    pub fn bytes<'a>(&self, file: &'a ModelBytes) -> &'a [u8] {
        file.get(self.range.clone()).unwrap_or(&[])
    }

    /// The bytes of row `row` (checked by the caller against `rows`).
    pub fn row_bytes<'a>(&self, file: &'a ModelBytes, row: usize) -> &'a [u8] {
        let row_len = self.range.len() / self.rows;
        let start = self.range.start + row * row_len;
        file.get(start..start + row_len).unwrap_or(&[])
    }
}

/// A norm's learned parameters: RMSNorm's weight, or LayerNorm's weight and bias (encoders).
pub struct Norm {
    pub weight: Vec<f32>,
    pub bias: Option<Vec<f32>>,
}

pub struct LayerWeights {
    /// The attention block's norm: of its input, or for encoders of the residual sum after
    /// it (`attn_output_norm`).
    pub attn_norm: Norm,
    /// Gemma 4's per-layer input block, after the feed-forward block.
    pub per_layer: Option<PerLayerWeights>,
    /// Gemma 4's scale of the layer's output (`layer_output_scale`).
    pub out_scale: Option<f32>,
    /// What mixes positions: attention over the KV cache, or a gated DeltaNet.
    pub mixer: Mixer,
    /// Norm of the mixer's output before the residual add (Gemma 3).
    pub post_attn_norm: Option<Vec<f32>>,
    /// The feed-forward block's input norm (Qwen3.5 names it `post_attention_norm`), or for
    /// encoders the norm of the residual sum after it (`layer_output_norm`).
    pub ffn_norm: Norm,
    pub ffn: Ffn,
    /// Norm of the FFN output before the residual add (Gemma 3).
    pub post_ffn_norm: Option<Vec<f32>>,
}

/// A layer's feed-forward block: one FFN, or a mixture of experts.
pub enum Ffn {
    Dense(FeedForward),
    Experts(ExpertWeights),
}

/// A feed-forward network: `W_down · (act(W_gate · h) ⊙ (W_up · h))`, or without a gate
/// `W_down · gelu(W_up · h + b_up) + b_down`.
pub struct FeedForward {
    /// The gate's projection; none where the FFN has no gate ([`Activation::Gelu`]).
    pub w_gate: Option<Matrix>,
    pub w_up: Matrix,
    pub w_down: Matrix,
    /// Biases of the up and down projections (BERT).
    pub b_up: Option<Vec<f32>>,
    pub b_down: Option<Vec<f32>>,
}

impl FeedForward {
    pub fn matrices(&self) -> impl Iterator<Item = &Matrix> {
        self.w_gate.iter().chain([&self.w_up, &self.w_down])
    }

    pub fn parts(&self) -> FfnParts<'_> {
        FfnParts {
            gate: self.w_gate.as_ref(),
            up: &self.w_up,
            down: &self.w_down,
            b_up: self.b_up.as_deref(),
            b_down: self.b_down.as_deref(),
        }
    }
}

/// A feed-forward network's parts, borrowed.
#[derive(Clone, Copy)]
pub struct FfnParts<'a> {
    pub gate: Option<&'a Matrix>,
    pub up: &'a Matrix,
    pub down: &'a Matrix,
    pub b_up: Option<&'a [f32]>,
    pub b_down: Option<&'a [f32]>,
}

/// A mixture-of-experts block (llama.cpp's names in brackets): a router, and each expert's
/// gated FFN as views into the three stacked tensors, which stay where they are in the file.
pub struct ExpertWeights {
    /// `count × n_embd` (`ffn_gate_inp`).
    pub router: Matrix,
    /// Expert `e`'s projections (`ffn_gate_exps`, `ffn_up_exps`, `ffn_down_exps`).
    pub gate: Vec<Matrix>,
    pub up: Vec<Matrix>,
    pub down: Vec<Matrix>,
    /// The shared expert, run for every token and added to the chosen ones' sum (`*_shexp`).
    pub shared: Option<FeedForward>,
    /// Added to the probabilities to choose experts, not to weigh them (`exp_probs_b`).
    pub selection_bias: Option<Vec<f32>>,
    /// Added to the router's scores before anything else (`ffn_gate_inp.bias`, gpt-oss).
    pub router_bias: Option<Vec<f32>>,
    /// Each expert's projection biases (gpt-oss).
    pub biases: Option<Box<ExpertBiases>>,
}

/// The biases of every expert's projections, one row per expert (`ffn_{gate,up,down}_exps.bias`).
pub struct ExpertBiases {
    /// `count × width` each.
    pub gate: Vec<f32>,
    pub up: Vec<f32>,
    /// `count × n_embd`.
    pub down: Vec<f32>,
}

impl ExpertWeights {
    /// Every matrix, the experts' views included.
    pub fn matrices(&self) -> impl Iterator<Item = &Matrix> {
        let experts = self.gate.iter().chain(&self.up).chain(&self.down);
        std::iter::once(&self.router).chain(experts).chain(self.shared.iter().flat_map(FeedForward::matrices))
    }
}

/// Gemma 4's per-layer input: `x += norm(W_proj · (gelu(W_gate · x) ⊙ input_l))`.
pub struct PerLayerWeights {
    /// `inp_gate`: `n_embd → per_layer_input`.
    pub gate: Matrix,
    /// `proj`: `per_layer_input → n_embd`.
    pub proj: Matrix,
    pub post_norm: Vec<f32>,
}

/// Gemma 4's per-layer token embeddings and the projection of the embedding added to them.
pub struct PerLayerInput {
    /// `per_layer_token_embd`: one row per token of `n_layer × per_layer_input` (read a row at
    /// a time, as `token_embd`: the table is large).
    pub token_embd: Matrix,
    /// `per_layer_model_proj`: `n_embd → n_layer × per_layer_input`.
    pub model_proj: Matrix,
    pub proj_norm: Vec<f32>,
}

pub enum Mixer {
    Attention(AttentionWeights),
    DeltaNet(DeltaNetWeights),
    ShortConv(ShortConvWeights),
    Mamba2(Mamba2Weights),
}

/// A Mamba-2 layer's tensors (llama.cpp's names in brackets).
pub struct Mamba2Weights {
    /// `[z, xBC, dt]` (`ssm_in`).
    pub w_in: Matrix,
    /// Taps, `conv_dim × kernel` (`ssm_conv1d`), and their bias where the file has one.
    pub conv: Vec<f32>,
    pub conv_bias: Option<Vec<f32>>,
    /// Per head: the time step's bias (`ssm_dt.bias`), the decay rate `A = -exp(A_log)`
    /// (`ssm_a`) and the skip weight `D` (`ssm_d`).
    pub dt_bias: Vec<f32>,
    pub a: Vec<f32>,
    pub d: Vec<f32>,
    /// The gated output's norm, `inner / groups` per group (`ssm_norm`).
    pub norm: Vec<f32>,
    pub w_out: Matrix,
}

/// An LFM2 short convolution layer's tensors (llama.cpp's names in brackets).
pub struct ShortConvWeights {
    /// `[b, c, x]`, each `n_embd` rows (`shortconv.in_proj`).
    pub w_in: Matrix,
    /// Taps, `n_embd × kernel` (`shortconv.conv`).
    pub conv: Vec<f32>,
    pub w_out: Matrix,
}

pub struct AttentionWeights {
    /// Queries; with [`Config::gated_attention`], each head's query followed by its gate.
    pub wq: Matrix,
    /// Keys and values; none where the layer reads another layer's (Gemma 4's shared
    /// layers). Without `wv` the values are the keys' projection (Gemma 4).
    pub wk: Option<Matrix>,
    pub wv: Option<Matrix>,
    pub wo: Matrix,
    /// Biases added to the Q, K and V projections (Qwen2; optional in Llama files), and to the
    /// output projection (encoders).
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    pub bo: Option<Vec<f32>>,
    /// Per-head RMSNorm of queries and keys (Qwen3, Gemma 3, Qwen3.5).
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    /// Each query head's sink logit (`attn_sinks`, gpt-oss).
    pub sinks: Option<Vec<f32>>,
}

/// A gated DeltaNet layer's tensors (llama.cpp's names in brackets).
pub struct DeltaNetWeights {
    /// Queries, keys and values before the convolution (`attn_qkv`).
    pub wqkv: Matrix,
    /// The output gate `z` (`attn_gate`).
    pub wz: Matrix,
    /// Per-head beta (`ssm_beta`) and decay (`ssm_alpha`) projections.
    pub w_beta: Matrix,
    pub w_alpha: Matrix,
    /// Convolution taps, `conv_dim × conv_kernel` (`ssm_conv1d`).
    pub conv: Vec<f32>,
    /// Decay bias and rate per value head (`ssm_dt.bias`, `ssm_a` = -exp(A_log)).
    pub dt_bias: Vec<f32>,
    pub a: Vec<f32>,
    /// RMSNorm weight of each value head's output (`ssm_norm`).
    pub norm: Vec<f32>,
    pub w_out: Matrix,
}

/// What turns the last layer's output into logits; encoders have none.
pub struct OutputHead {
    pub norm: Vec<f32>,
    /// The output projection; `token_embd` itself when the file ties them.
    pub matrix: Matrix,
}

/// What an encoder adds to the token embeddings before its first layer, and their norm (BERT).
pub struct EncoderInput {
    /// Learned positions (`position_embd`: a row per position of the context), where the
    /// architecture learns them.
    pub positions: Option<Matrix>,
    /// Token type 0's row of `token_types`: llama.cpp embeds every token as "sentence A".
    pub token_type: Option<Vec<f32>>,
    /// `token_embd_norm`.
    pub norm: Norm,
}

pub struct Weights {
    pub token_embd: Matrix,
    /// Encoders' additions to the embeddings.
    pub encoder_input: Option<EncoderInput>,
    pub layers: Vec<LayerWeights>,
    pub output: Option<OutputHead>,
    /// Gemma 4's per-layer token embeddings, where the file has them.
    pub per_layer_input: Option<PerLayerInput>,
    /// Llama 3-style per-dimension RoPE frequency divisors (`rope_freqs.weight`), if present.
    pub rope_freqs: Option<Vec<f32>>,
    /// LongRoPE's divisors (Phi-3): the long ones for caches past the original context.
    pub rope_factors_long: Option<Vec<f32>>,
    pub rope_factors_short: Option<Vec<f32>>,
}

impl Weights {
    /// Every matrix a forward pass multiplies by, each once (the token embedding is only
    /// looked up, unless it is also the output): what the GPU uploads and must have kernels
    /// for, and what a decode step streams on either backend.
    pub fn decode_matrices(&self) -> impl Iterator<Item = &Matrix> {
        let w = self;
        let layers = w.layers.iter().flat_map(|layer| {
            let mut matrices = match &layer.mixer {
                Mixer::Attention(a) => vec![Some(&a.wq), a.wk.as_ref(), a.wv.as_ref(), Some(&a.wo)],
                Mixer::DeltaNet(d) => [&d.wqkv, &d.wz, &d.w_beta, &d.w_alpha, &d.w_out].map(Some).to_vec(),
                Mixer::ShortConv(s) => vec![Some(&s.w_in), Some(&s.w_out)],
                Mixer::Mamba2(m) => vec![Some(&m.w_in), Some(&m.w_out)],
            };
            match &layer.ffn {
                Ffn::Dense(ffn) => matrices.extend(ffn.matrices().map(Some)),
                Ffn::Experts(experts) => matrices.extend(experts.matrices().map(Some)),
            }
            let per_layer = layer.per_layer.as_ref();
            matrices.extend([per_layer.map(|p| &p.gate), per_layer.map(|p| &p.proj)]);
            matrices.into_iter().flatten()
        });
        let per_layer_input = w.per_layer_input.as_ref().map(|input| &input.model_proj);
        let output = w.output.as_ref().map(|head| &head.matrix);
        output.into_iter().chain(per_layer_input).chain(layers)
    }

    /// The RoPE frequency divisors for a cache past the original context (`long`) or not, as
    /// llama.cpp's `get_rope_factors` picks them.
    pub fn rope_factors(&self, long: bool) -> Option<&[f32]> {
        let longrope = if long { &self.rope_factors_long } else { &self.rope_factors_short };
        self.rope_freqs.as_deref().or(longrope.as_deref())
    }

    /// Finds and checks every tensor `config` needs. `file` is the whole file; without it only
    /// the header is checked (the vectors come back empty).
    pub fn load(
        header: &GgufHeader,
        file: Option<&ModelBytes>,
        config: &Config,
    ) -> Result<Weights, ModelError> {
        let tensors = Tensors { header, file };
        let d = config.n_embd;
        let spec = config.spec();
        let has_post_norms = spec.post_norms;
        let bias_required = spec.qkv_bias == Bias::Required;
        let bias_allowed = spec.qkv_bias != Bias::Ignored;

        // llama.cpp's first use of token_embd is GET_ROWS, so it never enters the repack buffer;
        // an output projection tied to it is multiplied with the plain kernels.
        let token_embd = Matrix {
            layout: WeightLayout::Plain,
            ..tensors.matrix("token_embd.weight", config.vocab_size, d)?
        };
        let encoder = spec.family == Family::Encoder;
        // Gemma 2 always ties them (llama.cpp ignores an `output.weight` there).
        let output = match header.tensor("output.weight") {
            _ if encoder => None,
            Some(_) if !spec.always_tied_output => {
                Some(tensors.matrix("output.weight", config.vocab_size, d)?)
            }
            _ => Some(token_embd.clone()),
        };
        let output = match output {
            Some(matrix) => {
                Some(OutputHead { norm: tensors.vector(&format!("{}.weight", spec.output_norm), d)?, matrix })
            }
            None => None,
        };
        let encoder_input = match encoder {
            true => Some(EncoderInput {
                positions: match spec.positions {
                    Positions::Learned => {
                        let table = tensors.matrix("position_embd.weight", config.context_length, d)?;
                        Some(Matrix { layout: WeightLayout::Plain, ..table })
                    }
                    Positions::Rope => None,
                },
                token_type: match header.tensor("token_types.weight") {
                    Some(_) => Some(tensors.first_row("token_types.weight", d)?),
                    None => None,
                },
                norm: tensors.layer_norm("token_embd_norm", d)?,
            }),
            false => None,
        };
        let mut layers = Vec::with_capacity(config.n_layer);
        for i in 0..config.n_layer {
            let shape = config.layer(i);
            let (q, kv, ff, hd) =
                (config.n_head * shape.head_dim, shape.kv_dim(), shape.n_ff, shape.head_dim);
            // Gated attention's query projection holds a gate after each head's query.
            let q_rows = if config.gated_attention { 2 * q } else { q };
            let keeps_kv = config.keeps_kv(i);
            let name = |suffix: &str| format!("blk.{i}.{suffix}.weight");
            let optional_vector =
                |suffix: &str, len: usize, wanted: bool| -> Result<Option<Vec<f32>>, ModelError> {
                    if wanted { tensors.vector(&name(suffix), len).map(Some) } else { Ok(None) }
                };
            let bias = |suffix: &str, len: usize| -> Result<Option<Vec<f32>>, ModelError> {
                let name = format!("blk.{i}.{suffix}.bias");
                match header.tensor(&name) {
                    Some(_) if bias_allowed => tensors.vector(&name, len).map(Some),
                    None if bias_required => Err(ModelError::MissingTensor(name)),
                    _ => Ok(None),
                }
            };
            // Encoders' other biases, read wherever the file has them (as llama.cpp's graphs
            // use them: the output projection's always, the FFN's for BERT's plain GELU).
            let encoder_bias =
                |suffix: &str, len: usize, wanted: bool| -> Result<Option<Vec<f32>>, ModelError> {
                    let name = format!("blk.{i}.{suffix}.bias");
                    match header.tensor(&name) {
                        Some(_) if encoder && wanted => tensors.vector(&name, len).map(Some),
                        _ => Ok(None),
                    }
                };
            let plain_ffn = spec.activation == Activation::Gelu;
            let has_qk_norm = spec.qk_norm != QkNorm::None;
            // A per-head norm's weight is a head wide; OLMoE's spans the whole projection.
            let qk_norm_width = |head: usize, whole: usize| match spec.qk_norm {
                QkNorm::WholeRow => whole,
                _ => head,
            };
            let mixer = match (config.delta_net, config.short_conv, config.mamba2) {
                (Some(shape), ..) if config.is_recurrent(i) => {
                    Mixer::DeltaNet(tensors.delta_net(i, shape, d)?)
                }
                (_, _, Some(shape)) if config.is_recurrent(i) => Mixer::Mamba2(tensors.mamba2(i, shape, d)?),
                (_, Some(shape), _) if config.is_recurrent(i) => Mixer::ShortConv(ShortConvWeights {
                    w_in: tensors.matrix(&name("shortconv.in_proj"), 3 * d, d)?,
                    conv: tensors.decoded(&name("shortconv.conv"), &[shape.kernel, d])?,
                    w_out: tensors.matrix(&name("shortconv.out_proj"), d, d)?,
                }),
                _ => {
                    let (wq, wk, wv, (bq, bk, bv)) = match header.tensor(&name("attn_qkv")) {
                        // Fused QKV (Phi-3, and any file converted that way): one matrix whose
                        // first q rows are Q, then K, then V. Rows are independent dot
                        // products, so views of its row ranges compute exactly what the fused
                        // matmul does.
                        Some(_) => {
                            let [wq, wk, wv] = tensors
                                .matrix(&name("attn_qkv"), q_rows + 2 * kv, d)?
                                .split_rows([q_rows, kv, kv]);
                            let bias_name = format!("blk.{i}.attn_qkv.bias");
                            let biases = match header.tensor(&bias_name) {
                                Some(_) => {
                                    let b = tensors.vector(&bias_name, q_rows + 2 * kv)?;
                                    let (bq, rest) = b.split_at(q_rows);
                                    let (bk, bv) = rest.split_at(kv);
                                    (Some(bq.to_vec()), Some(bk.to_vec()), Some(bv.to_vec()))
                                }
                                None => (None, None, None),
                            };
                            (wq, Some(wk), Some(wv), biases)
                        }
                        // Gemma 4's shared layers project only queries.
                        None if !keeps_kv => {
                            (tensors.matrix(&name("attn_q"), q_rows, d)?, None, None, (None, None, None))
                        }
                        None => {
                            // Gemma 4 may leave out `attn_v`: the keys' projection serves as values.
                            let wv = match header.tensor(&name("attn_v")) {
                                None if spec.optional_values => None,
                                _ => Some(tensors.matrix(&name("attn_v"), kv, d)?),
                            };
                            (
                                tensors.matrix(&name("attn_q"), q_rows, d)?,
                                Some(tensors.matrix(&name("attn_k"), kv, d)?),
                                wv,
                                (bias("attn_q", q)?, bias("attn_k", kv)?, bias("attn_v", kv)?),
                            )
                        }
                    };
                    Mixer::Attention(AttentionWeights {
                        wq,
                        wk,
                        wv,
                        wo: tensors.matrix(&name("attn_output"), d, q)?,
                        bq,
                        bk,
                        bv,
                        // The family's output bias, or an encoder's wherever its file has one.
                        bo: match (spec.output_bias, header.tensor(&format!("blk.{i}.attn_output.bias"))) {
                            (Bias::Required, _) | (Bias::Optional, Some(_)) => {
                                tensors.vector(&format!("blk.{i}.attn_output.bias"), d).map(Some)?
                            }
                            _ => encoder_bias("attn_output", d, true)?,
                        },
                        q_norm: optional_vector("attn_q_norm", qk_norm_width(hd, q), has_qk_norm)?,
                        k_norm: optional_vector(
                            "attn_k_norm",
                            qk_norm_width(hd, kv),
                            has_qk_norm && keeps_kv,
                        )?,
                        sinks: match spec.attention_sinks {
                            true => Some(tensors.vector(&name("attn_sinks"), config.n_head)?),
                            false => None,
                        },
                    })
                }
            };
            let ffn = match config.experts {
                Some(experts) if config.has_experts(i) => Ffn::Experts(tensors.experts(i, experts, d)?),
                _ => {
                    // Phi-3's `ffn_up` holds gate and up: the first ff rows go through SiLU.
                    let (w_gate, w_up) = if spec.fused_gate_up {
                        let [gate, up] = tensors.matrix(&name("ffn_up"), 2 * ff, d)?.split_rows([ff, ff]);
                        (Some(gate), up)
                    } else if plain_ffn {
                        (None, tensors.matrix(&name("ffn_up"), ff, d)?)
                    } else {
                        (
                            Some(tensors.matrix(&name("ffn_gate"), ff, d)?),
                            tensors.matrix(&name("ffn_up"), ff, d)?,
                        )
                    };
                    // Granite's optional FFN biases (llama.cpp reads them) are not applied here:
                    // refused by name rather than left out.
                    if let Some(bias) = ["ffn_gate", "ffn_up", "ffn_down"]
                        .map(|part| format!("blk.{i}.{part}.bias"))
                        .into_iter()
                        .find(|bias| spec.granite_scales && header.tensor(bias).is_some())
                    {
                        return Err(ModelError::BadTensor {
                            name: bias,
                            reason: "is a feed-forward bias, which this engine does not apply yet".into(),
                        });
                    }
                    if header.tensor(&name("ffn_gate_inp")).is_some() {
                        return Err(ModelError::BadTensor {
                            name: name("ffn_gate_inp"),
                            reason: format!(
                                "is a mixture-of-experts router, which {} files do not have here",
                                spec.name
                            ),
                        });
                    }
                    Ffn::Dense(FeedForward {
                        w_gate,
                        w_up,
                        w_down: tensors.matrix(&name("ffn_down"), d, ff)?,
                        b_up: encoder_bias("ffn_up", ff, plain_ffn)?,
                        b_down: encoder_bias("ffn_down", d, plain_ffn)?,
                    })
                }
            };
            // An encoder's norms follow its residual adds, with biases; a decoder's precede its
            // blocks.
            let (attn_norm, ffn_norm) = match encoder {
                true => (
                    tensors.layer_norm(&format!("blk.{i}.attn_output_norm"), d)?,
                    tensors.layer_norm(&format!("blk.{i}.layer_output_norm"), d)?,
                ),
                false => (
                    Norm { weight: tensors.vector(&name("attn_norm"), d)?, bias: None },
                    Norm { weight: tensors.vector(&name(spec.ffn_norm), d)?, bias: None },
                ),
            };
            let post_attn_norm = optional_vector("post_attention_norm", d, has_post_norms)?;
            let per_layer = match config.per_layer_input {
                Some(width) => Some(PerLayerWeights {
                    gate: tensors.matrix(&name("inp_gate"), width, d)?,
                    proj: tensors.matrix(&name("proj"), d, width)?,
                    post_norm: tensors.vector(&name("post_norm"), d)?,
                }),
                None => None,
            };
            let out_scale = match header.tensor(&name("layer_output_scale")) {
                Some(_) if spec.layer_output_scale => {
                    let scale = tensors.vector(&name("layer_output_scale"), 1)?;
                    Some(scale.first().copied().unwrap_or(1.0))
                }
                _ => None,
            };
            layers.push(LayerWeights {
                attn_norm,
                per_layer,
                out_scale,
                mixer,
                post_attn_norm,
                ffn_norm,
                ffn,
                post_ffn_norm: optional_vector("post_ffw_norm", d, has_post_norms)?,
            });
        }
        let optional = |name: &str| match header.tensor(name) {
            Some(_) => tensors.vector(name, config.rope_dims / 2).map(Some),
            None => Ok(None),
        };
        let per_layer_input = match config.per_layer_input {
            Some(width) => {
                let all_layers = width * config.n_layer;
                Some(PerLayerInput {
                    token_embd: Matrix {
                        layout: WeightLayout::Plain,
                        ..tensors.matrix("per_layer_token_embd.weight", config.vocab_size, all_layers)?
                    },
                    model_proj: tensors.matrix("per_layer_model_proj.weight", all_layers, d)?,
                    proj_norm: tensors.vector("per_layer_proj_norm.weight", width)?,
                })
            }
            None => None,
        };
        Ok(Weights {
            per_layer_input,
            token_embd,
            encoder_input,
            layers,
            output,
            rope_freqs: optional("rope_freqs.weight")?,
            rope_factors_long: optional("rope_factors_long.weight")?,
            rope_factors_short: optional("rope_factors_short.weight")?,
        })
    }
}

/// A file's tensors, found and checked by name, shape and size (a model's, or a vision
/// projector's).
pub(crate) struct Tensors<'a> {
    header: &'a GgufHeader,
    /// `None`: checking a header alone.
    file: Option<&'a ModelBytes>,
}

impl<'a> Tensors<'a> {
    pub(crate) fn new(header: &'a GgufHeader, file: Option<&'a ModelBytes>) -> Tensors<'a> {
        Tensors { header, file }
    }

    fn find(&self, name: &str, expected: &[usize]) -> Result<(&TensorInfo, WeightType), ModelError> {
        let info = self.header.tensor(name).ok_or_else(|| ModelError::MissingTensor(name.to_string()))?;
        let expected: Vec<u64> = expected.iter().map(|&n| n as u64).collect();
        // ggml pads every shape with 1s: `[n]` and `[n, 1]` are one shape (a writer may drop a
        // trailing 1, as for a Mamba-2 norm of one group).
        let trimmed = |dims: &[u64]| dims.len() - dims.iter().rev().take_while(|&&d| d == 1).count();
        if info.dims[..trimmed(&info.dims)] != expected[..trimmed(&expected)] {
            return Err(ModelError::TensorShape { name: name.into(), expected, found: info.dims.clone() });
        }
        let weight_type = WeightType::from_ggml_type_id(info.ggml_type.id()).ok_or_else(|| {
            ModelError::UnsupportedTensorType { name: name.into(), ggml_type: info.ggml_type.name().into() }
        })?;
        Ok((info, weight_type))
    }

    /// Where the tensor's bytes are; an empty range when checking a header alone (the parser
    /// has already placed every tensor inside the file, and a 32-bit build that inspects a file
    /// over 4 GiB cannot address it, which only the 64-bit build that loads it needs to).
    fn range(&self, info: &TensorInfo) -> Result<Range<usize>, ModelError> {
        let truncated =
            || ModelError::BadTensor { name: info.name.clone(), reason: "lies outside the file".into() };
        let start = self.header.data_offset.checked_add(info.offset).ok_or_else(truncated)?;
        let end = start.checked_add(info.n_bytes).ok_or_else(truncated)?;
        let Some(file) = self.file else { return Ok(0..0) };
        let range = usize::try_from(start).map_err(|_| truncated())?
            ..usize::try_from(end).map_err(|_| truncated())?;
        if file.get(range.clone()).is_none() && !file.is_on_device(&range) {
            return Err(truncated());
        }
        Ok(range)
    }

    /// A `rows × cols` matrix (ggml dims `[cols, rows]`).
    pub(crate) fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<Matrix, ModelError> {
        self.flattened_matrix(name, &[cols, rows])
    }

    /// A tensor of ggml dims `dims` read as a matrix of rows `dims[..len - 1]` wide, one per
    /// index of the last dimension (a convolution's kernels, one row per output channel).
    pub(crate) fn flattened_matrix(&self, name: &str, dims: &[usize]) -> Result<Matrix, ModelError> {
        let (&rows, inner) = dims.split_last().unwrap_or((&0, &[]));
        let cols = inner.iter().product();
        let (info, weight_type) = self.find(name, dims)?;
        let row_bytes = weight_type.row_bytes(cols)?;
        let range = self.range(info)?;
        if (rows as u64).checked_mul(row_bytes as u64) != Some(info.n_bytes) {
            return Err(ModelError::BadTensor {
                name: name.into(),
                reason: "byte size does not match its shape".into(),
            });
        }
        let layout = WeightLayout::for_matmul(weight_type, rows);
        Ok(Matrix { name: name.into(), range, weight_type, rows, cols, layout })
    }

    /// Layer `layer`'s mixture of experts.
    fn experts(&self, layer: usize, shape: Experts, d: usize) -> Result<ExpertWeights, ModelError> {
        let name = |suffix: &str| format!("blk.{layer}.{suffix}.weight");
        let router = self.matrix(&name("ffn_gate_inp"), shape.count, d)?;
        let (count, width) = (shape.count, shape.width);
        let gate = self.expert_stack(&name("ffn_gate_exps"), count, width, d)?;
        let up = self.expert_stack(&name("ffn_up_exps"), count, width, d)?;
        let down = self.expert_stack(&name("ffn_down_exps"), count, d, width)?;
        let selection_bias = match shape.selection_bias {
            true => Some(self.vector(&format!("blk.{layer}.exp_probs_b.bias"), count)?),
            false => None,
        };
        let shared = match shape.shared_width {
            Some(ff) => Some(FeedForward {
                w_gate: Some(self.matrix(&name("ffn_gate_shexp"), ff, d)?),
                w_up: self.matrix(&name("ffn_up_shexp"), ff, d)?,
                w_down: self.matrix(&name("ffn_down_shexp"), d, ff)?,
                b_up: None,
                b_down: None,
            }),
            None => None,
        };
        let bias =
            |suffix: &str, width: usize| self.decoded(&format!("blk.{layer}.{suffix}.bias"), &[width, count]);
        let (router_bias, biases) = match shape.biases {
            true => (
                Some(self.vector(&format!("blk.{layer}.ffn_gate_inp.bias"), count)?),
                Some(Box::new(ExpertBiases {
                    gate: bias("ffn_gate_exps", width)?,
                    up: bias("ffn_up_exps", width)?,
                    down: bias("ffn_down_exps", d)?,
                })),
            ),
            false => (None, None),
        };
        Ok(ExpertWeights { router, gate, up, down, shared, selection_bias, router_bias, biases })
    }

    /// A stack of `count` matrices of `rows × cols` (ggml dims `[cols, rows, count]`), as a
    /// view per expert: each a row range of the stack read as its own matrix, laid out and
    /// multiplied as llama.cpp's `MUL_MAT_ID` holds and multiplies the stack.
    fn expert_stack(
        &self,
        name: &str,
        count: usize,
        rows: usize,
        cols: usize,
    ) -> Result<Vec<Matrix>, ModelError> {
        let (info, weight_type) = self.find(name, &[cols, rows, count])?;
        let row_bytes = weight_type.row_bytes(cols)?;
        let range = self.range(info)?;
        let stack_rows = (rows as u64).checked_mul(count as u64);
        if stack_rows.and_then(|r| r.checked_mul(row_bytes as u64)) != Some(info.n_bytes) {
            return Err(ModelError::BadTensor {
                name: name.into(),
                reason: "byte size does not match its shape".into(),
            });
        }
        let expert_bytes = rows * row_bytes;
        let layout = WeightLayout::for_expert(weight_type, rows);
        Ok((0..count)
            .map(|e| {
                // A header-only check has an empty range: every view is empty too.
                let start = if range.is_empty() { range.start } else { range.start + e * expert_bytes };
                let end = if range.is_empty() { start } else { start + expert_bytes };
                Matrix { name: format!("{name}[{e}]"), range: start..end, weight_type, rows, cols, layout }
            })
            .collect())
    }

    /// Layer `layer`'s gated DeltaNet tensors, for a model `d` wide.
    fn delta_net(&self, layer: usize, shape: DeltaNet, d: usize) -> Result<DeltaNetWeights, ModelError> {
        let name = |suffix: &str| format!("blk.{layer}.{suffix}");
        let (heads, value_dim) = (shape.v_heads, shape.value_dim());
        Ok(DeltaNetWeights {
            wqkv: self.matrix(&name("attn_qkv.weight"), shape.conv_dim(), d)?,
            wz: self.matrix(&name("attn_gate.weight"), value_dim, d)?,
            w_beta: self.matrix(&name("ssm_beta.weight"), heads, d)?,
            w_alpha: self.matrix(&name("ssm_alpha.weight"), heads, d)?,
            conv: self.decoded(&name("ssm_conv1d.weight"), &[shape.conv_kernel, shape.conv_dim()])?,
            dt_bias: self.vector(&name("ssm_dt.bias"), heads)?,
            a: self.vector(&name("ssm_a"), heads)?,
            norm: self.vector(&name("ssm_norm.weight"), shape.head_dim)?,
            w_out: self.matrix(&name("ssm_out.weight"), d, value_dim)?,
        })
    }

    /// Layer `layer`'s Mamba-2 tensors, for a model `d` wide.
    fn mamba2(&self, layer: usize, shape: Mamba2, d: usize) -> Result<Mamba2Weights, ModelError> {
        let name = |suffix: &str| format!("blk.{layer}.{suffix}");
        let (heads, conv_dim) = (shape.heads, shape.conv_dim());
        Ok(Mamba2Weights {
            w_in: self.matrix(&name("ssm_in.weight"), shape.in_dim(), d)?,
            conv: self.decoded(&name("ssm_conv1d.weight"), &[shape.conv_kernel, conv_dim])?,
            conv_bias: match self.header.tensor(&name("ssm_conv1d.bias")) {
                Some(_) => Some(self.vector(&name("ssm_conv1d.bias"), conv_dim)?),
                None => None,
            },
            dt_bias: self.vector(&name("ssm_dt.bias"), heads)?,
            a: self.decoded(&name("ssm_a"), &[1, heads])?,
            d: self.decoded(&name("ssm_d"), &[1, heads])?,
            norm: self.decoded(&name("ssm_norm.weight"), &[shape.inner / shape.groups, shape.groups])?,
            w_out: self.matrix(&name("ssm_out.weight"), d, shape.inner)?,
        })
    }

    /// LayerNorm `{prefix}.weight` and `{prefix}.bias`, `d` wide.
    pub(crate) fn layer_norm(&self, prefix: &str, d: usize) -> Result<Norm, ModelError> {
        Ok(Norm {
            weight: self.vector(&format!("{prefix}.weight"), d)?,
            bias: Some(self.vector(&format!("{prefix}.bias"), d)?),
        })
    }

    /// Row 0 of a table of rows `cols` wide (any number of them), decoded to f32.
    fn first_row(&self, name: &str, cols: usize) -> Result<Vec<f32>, ModelError> {
        let rows = self.header.tensor(name).and_then(|t| t.dims.get(1).copied()).unwrap_or(0);
        let table = self.matrix(name, usize::try_from(rows).unwrap_or(0).max(1), cols)?;
        let Some(file) = self.file else { return Ok(Vec::new()) };
        let mut row = vec![0.0; cols];
        dequantize_row(table.weight_type, table.row_bytes(file, 0), &mut row)?;
        Ok(row)
    }

    /// A vector of `len` elements, decoded to f32.
    pub(crate) fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
        self.decoded(name, &[len])
    }

    /// A small tensor of ggml dimensions `dims` (a vector, or a table such as convolution
    /// taps), decoded to f32 in its storage order.
    pub(crate) fn decoded(&self, name: &str, dims: &[usize]) -> Result<Vec<f32>, ModelError> {
        let len = dims.iter().product();
        let (info, weight_type) = self.find(name, dims)?;
        let range = self.range(info)?;
        if weight_type.row_bytes(len)? as u64 != info.n_bytes {
            return Err(ModelError::BadTensor {
                name: name.into(),
                reason: "byte size does not match its shape".into(),
            });
        }
        let Some(file) = self.file else { return Ok(Vec::new()) };
        let mut out = vec![0.0; len];
        dequantize_row(weight_type, file.get(range).unwrap_or(&[]), &mut out)?;
        Ok(out)
    }
}
