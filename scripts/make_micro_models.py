#!/usr/bin/env python3
"""Write small random-weight GGUF files of the architectures Inferno runs beyond the shared
Qwen3 ones, with llama.cpp's own tensor names and metadata, for parity tests against
llama.cpp (scripts/make_goldens.py) and page tests.

  pip install gguf numpy
  python3 scripts/make_micro_models.py OUT_DIR [--arch qwen2]

The tokenizer and chat template come from tests/fixtures/models/qwen3-micro-q4_0.gguf (Qwen's
byte-level BPE cut to 8,026 tokens, ChatML template); the shapes are those of the Qwen3 micro
files (2 layers, 256 wide, 4 query heads and 2 KV heads of 64, FFN 768). Weights are seeded
random normals (std 0.02; norms near 1; biases std 0.1), so a file is the same on every run
with the same numpy and gguf versions. Matrices are Q8_0 (the tightest parity bound, 0.02);
norms and biases stay F32, as llama.cpp's converter writes them.

Architectures:
  qwen2    Qwen2/Qwen2.5 (and DeepSeek-R1-Distill-Qwen): Q/K/V biases, NeoX RoPE base 1e6, no
           Q/K norm, tied embeddings (as Qwen2.5-0.5B/1.5B).
  smollm3  SmolLM3: Llama with interleaved RoPE (base 5e6) skipped in every fourth layer; 4
           layers here so layer 3 is one of those; tied embeddings.
  phi3     Phi-3.5-mini's layout: fused attn_qkv and ffn_up (gate rows first), LongRoPE
           (rope_factors_short/long, attention factor 1.19, original context 4096 of 131072),
           a separate output matrix; named phi3, so llama.cpp strips whitespace after its
           special tokens (six unused Qwen control tokens become <unk>, <s>, </s>, <|user|>,
           <|assistant|>, <|end|>).
  llama-iq4_nl, llama-iq4_xs  Llama with every matrix in IQ4_NL or IQ4_XS (random 4-bit codes
           on their non-linear table, f16 scales near what llama-quantize gives random
           weights, random 6-bit group scales for IQ4_XS: gguf.quants cannot quantize these
           types), for the i-quant kernels against llama.cpp.
  llama-iq2_xxs, llama-iq2_xs, llama-iq2_s, llama-iq3_xxs, llama-iq3_s, llama-iq1_s,
  llama-iq1_m  Llama with every matrix in one of the lattice
           i-quants: random bytes (every grid index, sign and sub-block scale) with an f16 d
           chosen so the weights' std is near 0.02 (gguf.quants cannot quantize these types;
           IQ1_M keeps its d in the top nibbles of its scale words).
  llama-smolvlm  SmolVLM's language model: Llama with six unused Qwen control tokens renamed to
           SmolVLM's picture markers (<fake_token_around_image>, <global-img>, <row_1_col_1> to
           <row_2_col_2>), for the micro idefics3 projector's image prompts (make_vision_goldens.py);
           its width, 256, is the projector's output.
  llama-mxfp4  Llama with every matrix in MXFP4 (gpt-oss's expert format: FP4 levels with a
           power-of-two scale per 32), quantized by gguf.quants from the usual random normals.
  llama-llama3  Llama 3.x's layout: the llama-bpe pre-tokenizer on this vocabulary, RoPE base
           500000 with a `rope_freqs` tensor of per-dimension divisors (as llama.cpp's converter
           writes for Llama 3.1+); file llama-micro-llama3.gguf.
  gemma2   Gemma 2: post-attention and post-FFN norms, GeGLU, scaled embeddings, 3 layers with
           a sliding window of 8 in layers 0 and 2, and soft caps small enough to bite on
           random weights (attention 0.05, final logits 1.0).
  qwen35   Qwen3.5's hybrid layout: 4 layers, full attention every second one (layers 1, 3:
           gated queries, Q/K norm, partial NeoX rotation of 16 of 64 dimensions with
           interleaved M-RoPE sections [3, 3, 2, 0]) and gated DeltaNet in the others (fused
           attn_qkv into a causal convolution of width 4, 2 key heads and 4 value heads of 32,
           decay and beta gates, gated RMSNorm); post_attention_norm as the FFN's norm; the
           qwen35 pre-tokenizer; tied embeddings.
  qwen3vl  Qwen3-VL's language model: 3 of Qwen3's layers with interleaved M-RoPE over whole
           heads (sections [12, 10, 10, 0]) and n_deepstack_layers 2, for the micro deepstack
           projector's image prompts (make_vision_goldens.py); its vocabulary has
           <|vision_start|> and <|vision_end|>.
  qwen2vl  Qwen2-VL's and Qwen2.5-VL's language model: 3 of Qwen2's layers (Q/K/V biases) with
           M-RoPE in sections over whole heads ([8, 12, 12, 0]), tied embeddings, for the micro
           Qwen2-VL and Qwen2.5-VL projectors' image prompts (make_vision_goldens.py).
  gemma4   Gemma 4's dense layout: 5 layers [local, local, global, local, global] with a window
           of 8; local layers have heads of 32 (2 KV heads, RoPE base 10000, all rotated),
           global ones heads of 64 (1 KV head, base 1e6, `rope_freqs` leaving 24 of 32 pairs
           unrotated); layer 1 has no `attn_v` (values are the keys' projection); the last 2
           layers read layers 1 and 2's KV and have a double-wide FFN; per-layer inputs of 32
           per layer; `layer_output_scale`; final logits capped at 2. Q/K norm weights near
           0.25: with norm weights near 1, attention at scale 1 over random heads is so sharp that
           a one-ulp change of the embeddings moved logits by 0.1 (the browser's summing order
           then missed llama.cpp by 0.03); near 0.25 the same change moves none.
  gemma4-vl  Gemma 4's language model as above with two unused Qwen control tokens renamed to
           Gemma 4's picture markers (<|image>, <image|>), for the micro gemma4v projector's image
           prompts (make_vision_goldens.py); file gemma4-vl-micro-q8_0.gguf. Its width, 256, is
           neither E2B's nor E4B's, so mtmd attends its picture rows both ways.
  qwen3moe Qwen3-MoE: Qwen3's attention (per-head Q/K norm, NeoX RoPE) with 8 experts of
           width 128 (`expert_feed_forward_length`), 2 used, softmax routing renormalized.
  olmoe    OLMoE: Q/K norm across all heads at once (so 4 KV heads, as its files have), 8
           experts of width 128 (`feed_forward_length`), 3 used, softmax weights not
           renormalized; a separate output matrix.
  granite  Granite 3.x/4.0 dense: granitemoe's multipliers and layout with a dense FFN and an
           attention output bias (llama.cpp reads one where the file has it).
  granitemoe  Granite 3.x MoE: interleaved RoPE, Granite's multipliers (embeddings 12,
           residual 0.22, attention 1/64, logits divided by 6, as granite-3.1-1b-a400m), 6
           experts of width 128, 2 used, renormalized, and a shared expert of width 192.
  lfm2     LFM2: 5 layers [conv, conv, attention, conv, attention]: short convolutions of 3
           taps (shortconv.l_cache; in_proj to b, c, x; F32 taps of std 0.5 so earlier tokens
           matter) between attention layers with per-head Q/K norm (4 query, 2 KV heads; 0 KV
           heads mark the conv layers); the final norm named token_embd_norm; tied embeddings.
  lfm2-vl  LFM2-VL's language model: lfm2 with seven unused Qwen control tokens renamed to
           LFM2-VL's picture markers (<|image_start|>, <|image_end|>, <|img_thumbnail|>,
           <|img_row_1_col_1|> to <|img_row_2_col_2|>), for the micro lfm2 projector's image
           prompts (make_vision_goldens.py); file lfm2-vl-micro-q8_0.gguf.
  lfm2moe  LFM2-MoE: lfm2's layers; layer 0 dense (leading_dense_block_count 1), the others 8
           experts of width 128 (expert_feed_forward_length), 2 used, sigmoid gating
           (expert_gating_func 2), an exp_probs_b selection bias of std 0.5 (large enough to
           move choices), renormalized.
  gpt-oss  gpt-oss: 4 layers, the even ones local with a window of 8; Q/K/V and output biases,
           a sink logit per query head (std 1, so sinks take a real share of the weight);
           post_attention_norm as the FFN's norm; RoPE base 150000 scaled by YaRN (factor 32,
           original context 4096, so pairs 8 to 18 of 32 lie on its ramp); 8 experts of width
           128 in MXFP4 with F32 biases (std 0.1) on the router and every projection, 4 used,
           chosen by raw scores and weighed by their softmax; the gpt-4o pre-tokenizer and
           gpt-oss's harmony chat template (.cache/templates, scripts/fetch-models.sh).
  granitehybrid  Granite 4.0-H: 4 layers [mamba2, mamba2, attention, mamba2]; Mamba-2 layers
           (wherever head_count_kv is 0) with an inner size of 512 in 8 heads of 64, 2 groups of
           B and C with states of 64, a convolution of 4 taps (F32, std 0.5) with a bias, dt
           biases, A and D initialized as Mamba-2 does them, a norm per group; Granite's
           multipliers; every FFN 8 experts of width 128, 2 used, with a shared expert of 192.
  The experts' routers are F32 (llama.cpp's converter leaves `ffn_gate_inp` unquantized) with
  weights of std 0.1, so that router scores are seldom near a tie; the experts are Q8_0 stacks.
"""
import argparse
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFValueType
from gguf.quants import quantize

EMBD, HEADS, KV_HEADS, HEAD_DIM, FFN = 256, 4, 2, 64, 768

# Lattice i-quants: bytes per block of 256 after the leading f16 d, and the d that gives random
# blocks a weight std near 0.02 (measured with gguf.quants.dequantize).
LATTICE = {
    Q.IQ2_XXS: (64, 0.000375),
    Q.IQ3_XXS: (96, 0.00014),
    Q.IQ3_S: (108, 0.00014),
    Q.IQ2_XS: (72, 0.00036),
    Q.IQ2_S: (80, 0.00036),
    Q.IQ1_S: (48, 0.0028),
    Q.IQ1_M: (56, 0.0028),  # all 56 bytes random, then d into the scale words' top nibbles
}
REPO = Path(__file__).resolve().parent.parent
TOKENIZER_SOURCE = REPO / "tests" / "fixtures" / "models" / "qwen3-micro-q4_0.gguf"


# Phi-3 files get llama.cpp's by-name token rules (whitespace after special tokens is
# stripped), which need these tokens: they replace some of Qwen's unused control tokens.
PHI3_TOKENS = {8003: "<unk>", 8004: "<s>", 8005: "</s>", 8006: "<|user|>", 8007: "<|assistant|>", 8008: "<|end|>"}
# LFM2-VL's picture markers (mtmd's lfm2 layout), for a grid of at most 2 x 2 tiles.
LFM2VL_TOKENS = {
    8003: "<|image_start|>",
    8004: "<|image_end|>",
    8005: "<|img_thumbnail|>",
    8006: "<|img_row_1_col_1|>",
    8007: "<|img_row_1_col_2|>",
    8008: "<|img_row_2_col_1|>",
    8009: "<|img_row_2_col_2|>",
}
# Gemma 4's picture markers (mtmd's gemma4v layout).
GEMMA4VL_TOKENS = {8003: "<|image>", 8004: "<image|>"}
# SmolVLM's picture markers (mtmd's idefics3 layout), for the micro projector's grid of at most
# 2 x 2 tiles.
SMOLVLM_TOKENS = {
    8003: "<fake_token_around_image>",
    8004: "<global-img>",
    8005: "<row_1_col_1>",
    8006: "<row_1_col_2>",
    8007: "<row_2_col_1>",
    8008: "<row_2_col_2>",
}


def copy_tokenizer(writer, reader, renamed=None, pre=None, pad_to=None, template=None):
    """The source's tokenizer keys; `renamed` tokens by id, another pre-tokenizer name, the
    token arrays padded with unused tokens to `pad_to` entries (make_moe_shaped.py), and another
    chat template."""
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        kind = field.types[0]
        if kind == GGUFValueType.ARRAY:
            if field.types[1] == GGUFValueType.STRING:
                values = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
                if name == "tokenizer.ggml.tokens":
                    values = [(renamed or {}).get(i, v) for i, v in enumerate(values)]
            else:
                values = [field.parts[i][0].item() for i in field.data]
            padding = max(0, (pad_to or 0) - len(values))
            if name == "tokenizer.ggml.tokens":
                values += [f"<|unused_{i}|>" for i in range(len(values), len(values) + padding)]
            elif name == "tokenizer.ggml.token_type":
                values += [int(gguf.TokenType.UNUSED)] * padding
            elif name == "tokenizer.ggml.scores":
                values += [0.0] * padding
            writer.add_array(name, values)
        elif kind == GGUFValueType.STRING:
            value = bytes(field.parts[field.data[0]]).decode("utf-8")
            if pre and name == "tokenizer.ggml.pre":
                value = pre
            elif template and name == "tokenizer.chat_template":
                value = template
            writer.add_string(name, value)
        else:
            writer.add_key_value(name, field.parts[field.data[0]][0].item(), kind)


def q8_writer(path, arch, layers, context=4096):
    """A writer for a Q8_0 micro file of `arch`, with the keys every one of them has."""
    writer = gguf.GGUFWriter(str(path), arch=arch)
    writer.add_name(f"{arch}-micro-synthetic")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_block_count(layers)
    writer.add_context_length(context)
    writer.add_embedding_length(EMBD)
    return writer


def random_tensors(writer, rng):
    """The two kinds of tensors the micro files are made of: Q8_0 matrices of std 0.02 and F32
    vectors (norms, biases) of a given mean and std."""

    def matrix(name, rows, cols):
        x = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(0.02)
        writer.add_tensor(name, quantize(x, Q.Q8_0), raw_dtype=Q.Q8_0)

    def vector(name, n, mean, std):
        writer.add_tensor(name, (mean + std * rng.standard_normal(n, dtype=np.float32)).astype(np.float32))

    return matrix, vector


def gated_feed_forward(matrix, prefix, n_ff):
    matrix(prefix + "ffn_gate.weight", n_ff, EMBD)
    matrix(prefix + "ffn_up.weight", n_ff, EMBD)
    matrix(prefix + "ffn_down.weight", EMBD, n_ff)


def attention(matrix, vector, p, qk_norm=False):
    """A layer's Q, K, V (4 query and 2 KV heads of 64), per-head Q/K norms if asked, output."""
    matrix(p + "attn_q.weight", HEADS * HEAD_DIM, EMBD)
    matrix(p + "attn_k.weight", KV_HEADS * HEAD_DIM, EMBD)
    matrix(p + "attn_v.weight", KV_HEADS * HEAD_DIM, EMBD)
    if qk_norm:
        vector(p + "attn_q_norm.weight", HEAD_DIM, 1.0, 0.1)
        vector(p + "attn_k_norm.weight", HEAD_DIM, 1.0, 0.1)
    matrix(p + "attn_output.weight", EMBD, HEADS * HEAD_DIM)


def finish(writer, vector):
    """The output norm, then the file."""
    vector("output_norm.weight", EMBD, 1.0, 0.1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_model(
    path, rng, reader, arch, layers, rope_base, biases, fused=False, qtype=Q.Q8_0, llama3=False, renamed=None
):
    gemma = arch == "gemma2"
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    writer = gguf.GGUFWriter(str(path), arch=arch)
    writer.add_name(f"{arch}-micro-synthetic")
    # llama-quantize names an MXFP4 file MXFP4_MOE (its experts are what it quantizes so).
    name = "MXFP4_MOE" if qtype == Q.MXFP4 else qtype.name
    file_type = getattr(gguf.LlamaFileType, f"MOSTLY_{name}", gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_file_type(file_type)
    writer.add_block_count(layers)
    writer.add_context_length(131072 if fused else 4096)
    writer.add_embedding_length(EMBD)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(rope_base)
    writer.add_layer_norm_rms_eps(1e-6)
    if gemma:
        writer.add_sliding_window(8)
        writer.add_attn_logit_softcapping(0.05)
        writer.add_final_logit_softcapping(1.0)
    if fused:
        writer.add_rope_dimension_count(HEAD_DIM)
        writer.add_rope_scaling_attn_factors(1.19)
        writer.add_rope_scaling_orig_ctx_len(4096)
    copy_tokenizer(writer, reader, PHI3_TOKENS if fused else renamed, pre="llama-bpe" if llama3 else None)
    q8_matrix, vector = random_tensors(writer, rng)

    def matrix(name, rows, cols):
        if qtype == Q.IQ4_NL:  # per block of 32: f16 d, then 16 bytes of two 4-bit codes
            blocks = rows * cols // 32
            d = (rng.uniform(0.0015, 0.0025, size=(blocks, 1))).astype("<f2").view(np.uint8)
            codes = rng.integers(0, 256, size=(blocks, 16), dtype=np.uint8)
            data = np.concatenate([d, codes], axis=1).reshape(rows, cols // 32 * 18)
            writer.add_tensor(name, data, raw_dtype=Q.IQ4_NL)
            return
        if qtype == Q.IQ4_XS:  # per block of 256: f16 d, scales_h, scales_l[4], qs[128]
            blocks = rows * cols // 256
            d = (rng.uniform(0.000062, 0.00008, size=(blocks, 1))).astype("<f2").view(np.uint8)
            # Group scales ls - 32 in -16..15 (high bits 1 or 2), so weights stay near the
            # other micro files' std of 0.02 instead of amplifying every rounding difference.
            high = rng.integers(1, 3, size=(blocks, 8)).astype(np.uint16)
            scales_h = (high << (2 * np.arange(8, dtype=np.uint16))).sum(axis=1).astype("<u2").view(np.uint8).reshape(blocks, 2)
            rest = rng.integers(0, 256, size=(blocks, 132), dtype=np.uint8)
            data = np.concatenate([d, scales_h, rest], axis=1).reshape(rows, cols // 256 * 136)
            writer.add_tensor(name, data, raw_dtype=Q.IQ4_XS)
            return
        if qtype == Q.MXFP4:  # gguf.quants quantizes it (ggml's quantize_row_mxfp4_ref)
            x = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(0.02)
            writer.add_tensor(name, quantize(x, Q.MXFP4), raw_dtype=Q.MXFP4)
            return
        if qtype in LATTICE:
            rest, d_center = LATTICE[qtype]
            blocks = rows * cols // 256
            d = rng.uniform(0.8 * d_center, 1.2 * d_center, size=(blocks, 1)).astype("<f2").view(np.uint8)
            data = np.concatenate([d, rng.integers(0, 256, size=(blocks, rest), dtype=np.uint8)], axis=1)
            if qtype == Q.IQ1_M:  # d goes into the top nibbles of the four u16 scale words
                words = data[:, 2 + 48 :].copy().view("<u2")
                nibbles = (data[:, :2].copy().view("<u2") >> (4 * np.arange(4, dtype=np.uint16))) & 0xF
                words[:] = (words & 0x0FFF) | (nibbles << 12)
                data = np.concatenate([data[:, 2 : 2 + 48], words.view(np.uint8)], axis=1)
            writer.add_tensor(name, data.reshape(rows, -1), raw_dtype=qtype)
            return
        q8_matrix(name, rows, cols)

    matrix("token_embd.weight", n_vocab, EMBD)
    if llama3:  # divisors between 1 and 8, as Llama 3.1's low/high frequency factors give
        writer.add_tensor("rope_freqs.weight", rng.uniform(1.0, 8.0, HEAD_DIM // 2).astype(np.float32))
    if fused:
        matrix("output.weight", n_vocab, EMBD)
        vector("rope_factors_short.weight", HEAD_DIM // 2, 1.5, 0.4)
        vector("rope_factors_long.weight", HEAD_DIM // 2, 8.0, 2.0)
    for layer in range(layers):
        p = f"blk.{layer}."
        vector(p + "attn_norm.weight", EMBD, 1.0, 0.1)
        if fused:
            matrix(p + "attn_qkv.weight", (HEADS + 2 * KV_HEADS) * HEAD_DIM, EMBD)
        else:
            for part, width in (("q", HEADS * HEAD_DIM), ("k", KV_HEADS * HEAD_DIM), ("v", KV_HEADS * HEAD_DIM)):
                matrix(p + f"attn_{part}.weight", width, EMBD)
                if biases:
                    vector(p + f"attn_{part}.bias", width, 0.0, 0.1)
        matrix(p + "attn_output.weight", EMBD, HEADS * HEAD_DIM)
        if gemma:
            vector(p + "post_attention_norm.weight", EMBD, 1.0, 0.1)
            vector(p + "post_ffw_norm.weight", EMBD, 1.0, 0.1)
        vector(p + "ffn_norm.weight", EMBD, 1.0, 0.1)
        if fused:
            matrix(p + "ffn_up.weight", 2 * FFN, EMBD)
            matrix(p + "ffn_down.weight", EMBD, FFN)
        else:
            gated_feed_forward(matrix, p, FFN)
    finish(writer, vector)


# Qwen3.5's gated DeltaNet layers: key heads (ssm.group_count), value heads (ssm.time_step_rank),
# the head size of both (ssm.state_size) and the convolution's width.
DN_K_HEADS, DN_V_HEADS, DN_HEAD, DN_CONV = 2, 4, 32, 4


def write_qwen35(path, rng, reader):
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    layers, interval, rope_dims = 4, 2, 16
    writer = q8_writer(path, "qwen35", layers)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_rope_freq_base(10_000_000.0)
    writer.add_rope_dimension_count(rope_dims)
    writer.add_rope_dimension_sections([3, 3, 2, 0])
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_full_attention_interval(interval)
    writer.add_ssm_conv_kernel(DN_CONV)
    writer.add_ssm_state_size(DN_HEAD)
    writer.add_ssm_group_count(DN_K_HEADS)
    writer.add_ssm_time_step_rank(DN_V_HEADS)
    writer.add_ssm_inner_size(DN_V_HEADS * DN_HEAD)
    copy_tokenizer(writer, reader, pre="qwen35")
    matrix, vector = random_tensors(writer, rng)

    key_dim, value_dim = DN_K_HEADS * DN_HEAD, DN_V_HEADS * DN_HEAD
    conv_dim = 2 * key_dim + value_dim
    matrix("token_embd.weight", n_vocab, EMBD)
    for layer in range(layers):
        p = f"blk.{layer}."
        vector(p + "attn_norm.weight", EMBD, 1.0, 0.1)
        if (layer + 1) % interval == 0:
            matrix(p + "attn_q.weight", 2 * HEADS * HEAD_DIM, EMBD)  # query and gate per head
            matrix(p + "attn_k.weight", KV_HEADS * HEAD_DIM, EMBD)
            matrix(p + "attn_v.weight", KV_HEADS * HEAD_DIM, EMBD)
            vector(p + "attn_q_norm.weight", HEAD_DIM, 1.0, 0.1)
            vector(p + "attn_k_norm.weight", HEAD_DIM, 1.0, 0.1)
            matrix(p + "attn_output.weight", EMBD, HEADS * HEAD_DIM)
        else:
            matrix(p + "attn_qkv.weight", conv_dim, EMBD)
            matrix(p + "attn_gate.weight", value_dim, EMBD)
            # Convolution taps large enough that earlier tokens matter; ssm_a = -exp(A_log)
            # and dt biases chosen so the decays exp(g) spread over (0.3, 1).
            writer.add_tensor(p + "ssm_conv1d.weight", (0.5 * rng.standard_normal((conv_dim, DN_CONV))).astype(np.float32))
            vector(p + "ssm_dt.bias", DN_V_HEADS, 0.0, 0.5)
            writer.add_tensor(p + "ssm_a", (-np.exp(rng.uniform(-1.5, 0.5, DN_V_HEADS))).astype(np.float32))
            matrix(p + "ssm_beta.weight", DN_V_HEADS, EMBD)
            matrix(p + "ssm_alpha.weight", DN_V_HEADS, EMBD)
            vector(p + "ssm_norm.weight", DN_HEAD, 1.0, 0.1)
            matrix(p + "ssm_out.weight", EMBD, value_dim)
        vector(p + "post_attention_norm.weight", EMBD, 1.0, 0.1)
        gated_feed_forward(matrix, p, FFN)
    finish(writer, vector)


def write_qwen3vl(path, rng, reader):
    """Qwen3-VL's language model: Qwen3's layers (per-head Q/K norm) with interleaved M-RoPE
    over all 64 dimensions of a head (sections [12, 10, 10, 0]) and 2 deepstack layers (a
    picture's rows carry two more slices, added after layers 0 and 1)."""
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    layers = 3
    writer = q8_writer(path, "qwen3vl", layers)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_rope_freq_base(5_000_000.0)
    writer.add_rope_dimension_count(HEAD_DIM)
    writer.add_rope_dimension_sections([12, 10, 10, 0])
    writer.add_uint32("qwen3vl.n_deepstack_layers", 2)
    writer.add_layer_norm_rms_eps(1e-6)
    copy_tokenizer(writer, reader)
    matrix, vector = random_tensors(writer, rng)
    matrix("token_embd.weight", n_vocab, EMBD)
    for layer in range(layers):
        p = f"blk.{layer}."
        vector(p + "attn_norm.weight", EMBD, 1.0, 0.1)
        attention(matrix, vector, p, qk_norm=True)
        vector(p + "ffn_norm.weight", EMBD, 1.0, 0.1)
        gated_feed_forward(matrix, p, FFN)
    finish(writer, vector)


def write_qwen2vl(path, rng, reader):
    """Qwen2-VL's and Qwen2.5-VL's language model: Qwen2's layers (Q/K/V biases) with M-RoPE in
    sections over all 64 dimensions of a head ([8, 12, 12, 0]: the first 8 pairs by the text
    position, the next 12 by a picture's row, the next 12 by its column). Its RMS epsilon is
    1e-30, as good as the 0 llama.cpp 0.3.36 runs qwen2vl's norms with (see below)."""
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    layers = 3
    writer = q8_writer(path, "qwen2vl", layers)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_rope_dimension_sections([8, 12, 12, 0])
    # llama.cpp 0.3.36's qwen2vl loader never reads this key and runs its RMS norms with eps 0
    # (Inferno takes the file's); 1e-30 vanishes against any mean square these rows reach, so
    # both compute the same.
    writer.add_layer_norm_rms_eps(1e-30)
    copy_tokenizer(writer, reader)
    matrix, vector = random_tensors(writer, rng)
    matrix("token_embd.weight", n_vocab, EMBD)
    for layer in range(layers):
        p = f"blk.{layer}."
        vector(p + "attn_norm.weight", EMBD, 1.0, 0.1)
        attention(matrix, vector, p)
        vector(p + "attn_q.bias", HEADS * HEAD_DIM, 0.0, 0.1)
        vector(p + "attn_k.bias", KV_HEADS * HEAD_DIM, 0.0, 0.1)
        vector(p + "attn_v.bias", KV_HEADS * HEAD_DIM, 0.0, 0.1)
        vector(p + "ffn_norm.weight", EMBD, 1.0, 0.1)
        gated_feed_forward(matrix, p, FFN)
    finish(writer, vector)


def write_gemma4(path, rng, reader, renamed=None):
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    swa = [True, True, False, True, False]
    layers, shared, per_layer, head_full, head_swa = len(swa), 2, 32, 64, 32
    kv_heads = [2 if local else 1 for local in swa]
    n_ff = [FFN // 2 if il < layers - shared else FFN for il in range(layers)]
    writer = q8_writer(path, "gemma4", layers)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_full)
    writer.add_value_length(head_full)
    writer.add_key_length_swa(head_swa)
    writer.add_value_length_swa(head_swa)
    writer.add_rope_dimension_count(head_full)
    writer.add_rope_dimension_count_swa(head_swa)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_rope_freq_base_swa(10_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_sliding_window(8)
    writer.add_sliding_window_pattern(swa)
    writer.add_shared_kv_layers(shared)
    writer.add_embedding_length_per_layer_input(per_layer)
    writer.add_final_logit_softcapping(2.0)
    copy_tokenizer(writer, reader, renamed)
    matrix, vector = random_tensors(writer, rng)

    matrix("token_embd.weight", n_vocab, EMBD)
    # "Proportional" RoPE of the global layers: a quarter of the pairs rotate, the rest get a
    # divisor of 1e30 (as llama.cpp's converter writes it).
    writer.add_tensor("rope_freqs.weight", np.array([1.0] * 8 + [1e30] * 24, dtype=np.float32))
    matrix("per_layer_token_embd.weight", n_vocab, per_layer * layers)
    matrix("per_layer_model_proj.weight", per_layer * layers, EMBD)
    vector("per_layer_proj_norm.weight", per_layer, 1.0, 0.1)
    for layer, local in enumerate(swa):
        p = f"blk.{layer}."
        head = head_swa if local else head_full
        vector(p + "attn_norm.weight", EMBD, 1.0, 0.1)
        matrix(p + "attn_q.weight", HEADS * head, EMBD)
        # Gemma 4 attends with scale 1 over normalized queries and keys: norm weights of 0.25
        # keep random heads' scores near those of a scale of 1/√64, not 64 times sharper.
        vector(p + "attn_q_norm.weight", head, 0.25, 0.025)
        if layer < layers - shared:
            matrix(p + "attn_k.weight", kv_heads[layer] * head, EMBD)
            if layer != 1:
                matrix(p + "attn_v.weight", kv_heads[layer] * head, EMBD)
            vector(p + "attn_k_norm.weight", head, 0.25, 0.025)
        matrix(p + "attn_output.weight", EMBD, HEADS * head)
        vector(p + "post_attention_norm.weight", EMBD, 1.0, 0.1)
        vector(p + "ffn_norm.weight", EMBD, 1.0, 0.1)
        gated_feed_forward(matrix, p, n_ff[layer])
        vector(p + "post_ffw_norm.weight", EMBD, 1.0, 0.1)
        matrix(p + "inp_gate.weight", per_layer, EMBD)
        matrix(p + "proj.weight", EMBD, per_layer)
        vector(p + "post_norm.weight", EMBD, 1.0, 0.1)
        writer.add_tensor(p + "layer_output_scale.weight", rng.uniform(0.6, 1.0, 1).astype(np.float32))
    finish(writer, vector)


# Mixture-of-experts micro files: arch -> (experts, used, KV heads, expert width key, shared
# expert width, Granite multipliers).
MOE = {
    "granite": dict(experts=0, used=0, kv_heads=KV_HEADS, expert_key=False, shared=0, granite=True),
    "qwen3moe": dict(experts=8, used=2, kv_heads=KV_HEADS, expert_key=True, shared=0, granite=False),
    "olmoe": dict(experts=8, used=3, kv_heads=HEADS, expert_key=False, shared=0, granite=False),
    "granitemoe": dict(experts=6, used=2, kv_heads=KV_HEADS, expert_key=False, shared=192, granite=True),
}
EXPERT_FFN = 128


def write_experts(writer, rng, prefix, n_expert, qtype=Q.Q8_0, biases=False):
    """A layer's router (F32, std 0.1) and its experts' gate, up and down stacks (Q8_0, or
    `qtype`); with `biases`, the router's and every expert projection's (F32, std 0.1)."""
    router = rng.standard_normal((n_expert, EMBD), dtype=np.float32) * np.float32(0.1)
    writer.add_tensor(prefix + "ffn_gate_inp.weight", router)
    if biases:
        writer.add_tensor(prefix + "ffn_gate_inp.bias", rng.standard_normal(n_expert, dtype=np.float32) * np.float32(0.1))
    for part, rows, cols in (("gate", EXPERT_FFN, EMBD), ("up", EXPERT_FFN, EMBD), ("down", EMBD, EXPERT_FFN)):
        x = rng.standard_normal((n_expert, rows, cols), dtype=np.float32) * np.float32(0.02)
        writer.add_tensor(prefix + f"ffn_{part}_exps.weight", quantize(x, qtype), raw_dtype=qtype)
        if biases:
            bias = rng.standard_normal((n_expert, rows), dtype=np.float32) * np.float32(0.1)
            writer.add_tensor(prefix + f"ffn_{part}_exps.bias", bias)


GPT_OSS_LAYERS = 4


def write_gpt_oss(path, rng, reader):
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    n_expert = 8
    # gpt-oss-20b's context and RoPE (base 150000, YaRN by 32 over an original 4096).
    writer = q8_writer(path, "gpt-oss", GPT_OSS_LAYERS, context=131072)
    writer.add_feed_forward_length(EXPERT_FFN)
    writer.add_expert_feed_forward_length(EXPERT_FFN)
    writer.add_expert_count(n_expert)
    writer.add_expert_used_count(4)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_rope_freq_base(150_000.0)
    writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    writer.add_rope_scaling_factor(32.0)
    writer.add_rope_scaling_orig_ctx_len(4096)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_sliding_window(8)
    # gpt-oss's own template (harmony), from llama.cpp's models/templates as fetch-models.sh
    # extracts them: its markers are text in this vocabulary, but the page and the CLI render,
    # parse and offer reasoning_effort as for the real model.
    template = (REPO / ".cache" / "templates" / "openai-gpt-oss-120b.jinja").read_text()
    copy_tokenizer(writer, reader, pre="gpt-4o", template=template)
    matrix, vector = random_tensors(writer, rng)

    matrix("token_embd.weight", n_vocab, EMBD)
    matrix("output.weight", n_vocab, EMBD)
    q_width, kv_width = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    for layer in range(GPT_OSS_LAYERS):
        p = f"blk.{layer}."
        vector(p + "attn_norm.weight", EMBD, 1.0, 0.1)
        for part, width in (("q", q_width), ("k", kv_width), ("v", kv_width)):
            matrix(p + f"attn_{part}.weight", width, EMBD)
            vector(p + f"attn_{part}.bias", width, 0.0, 0.1)
        matrix(p + "attn_output.weight", EMBD, q_width)
        vector(p + "attn_output.bias", EMBD, 0.0, 0.1)
        vector(p + "attn_sinks.weight", HEADS, 0.0, 1.0)
        vector(p + "post_attention_norm.weight", EMBD, 1.0, 0.1)
        write_experts(writer, rng, p, n_expert, Q.MXFP4, biases=True)
    finish(writer, vector)


def write_moe(path, rng, reader, arch):
    spec = MOE[arch]
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    layers, n_expert, kv_heads = 2, spec["experts"], spec["kv_heads"]
    writer = q8_writer(path, arch, layers)
    # Qwen3-MoE reads the experts' width from its own key; the others from feed_forward_length.
    dense = n_expert == 0
    writer.add_feed_forward_length(FFN if spec["expert_key"] or dense else EXPERT_FFN)
    if spec["expert_key"]:
        writer.add_expert_feed_forward_length(EXPERT_FFN)
    if not dense:
        writer.add_expert_count(n_expert)
        writer.add_expert_used_count(spec["used"])
    if spec["shared"]:
        writer.add_expert_shared_feed_forward_length(spec["shared"])
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    if spec["granite"]:
        writer.add_embedding_scale(12.0)
        writer.add_residual_scale(0.22)
        writer.add_attention_scale(1.0 / 64)
        writer.add_logit_scale(6.0)
    copy_tokenizer(writer, reader)
    matrix, vector = random_tensors(writer, rng)

    matrix("token_embd.weight", n_vocab, EMBD)
    if arch == "olmoe":
        matrix("output.weight", n_vocab, EMBD)
    q_width, kv_width = HEADS * HEAD_DIM, kv_heads * HEAD_DIM
    for layer in range(layers):
        p = f"blk.{layer}."
        vector(p + "attn_norm.weight", EMBD, 1.0, 0.1)
        matrix(p + "attn_q.weight", q_width, EMBD)
        matrix(p + "attn_k.weight", kv_width, EMBD)
        matrix(p + "attn_v.weight", kv_width, EMBD)
        if arch == "qwen3moe":
            vector(p + "attn_q_norm.weight", HEAD_DIM, 1.0, 0.1)
            vector(p + "attn_k_norm.weight", HEAD_DIM, 1.0, 0.1)
        elif arch == "olmoe":
            vector(p + "attn_q_norm.weight", q_width, 1.0, 0.1)
            vector(p + "attn_k_norm.weight", kv_width, 1.0, 0.1)
        matrix(p + "attn_output.weight", EMBD, q_width)
        vector(p + "ffn_norm.weight", EMBD, 1.0, 0.1)
        if dense:
            vector(p + "attn_output.bias", EMBD, 0.0, 0.1)
            gated_feed_forward(matrix, p, FFN)
            continue
        write_experts(writer, rng, p, n_expert)
        if spec["shared"]:
            matrix(p + "ffn_gate_shexp.weight", spec["shared"], EMBD)
            matrix(p + "ffn_up_shexp.weight", spec["shared"], EMBD)
            matrix(p + "ffn_down_shexp.weight", EMBD, spec["shared"])
    finish(writer, vector)


LFM2_LAYERS = ["conv", "conv", "attention", "conv", "attention"]


def write_lfm2(path, rng, reader, moe=False, renamed=None):
    arch = "lfm2moe" if moe else "lfm2"
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    layers, kernel, n_expert = len(LFM2_LAYERS), 3, 8
    writer = q8_writer(path, arch, layers)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv([KV_HEADS if kind == "attention" else 0 for kind in LFM2_LAYERS])
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_shortconv_l_cache(kernel)
    if moe:
        writer.add_leading_dense_block_count(1)
        writer.add_expert_count(n_expert)
        writer.add_expert_used_count(2)
        writer.add_expert_feed_forward_length(EXPERT_FFN)
        writer.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    copy_tokenizer(writer, reader, renamed)
    matrix, vector = random_tensors(writer, rng)

    matrix("token_embd.weight", n_vocab, EMBD)
    for layer, kind in enumerate(LFM2_LAYERS):
        p = f"blk.{layer}."
        vector(p + "attn_norm.weight", EMBD, 1.0, 0.1)
        if kind == "attention":
            attention(matrix, vector, p, qk_norm=True)
        else:
            matrix(p + "shortconv.in_proj.weight", 3 * EMBD, EMBD)
            writer.add_tensor(p + "shortconv.conv.weight", (0.5 * rng.standard_normal((EMBD, kernel))).astype(np.float32))
            matrix(p + "shortconv.out_proj.weight", EMBD, EMBD)
        vector(p + "ffn_norm.weight", EMBD, 1.0, 0.1)
        if moe and layer >= 1:
            write_experts(writer, rng, p, n_expert)
            writer.add_tensor(p + "exp_probs_b.bias", (0.5 * rng.standard_normal(n_expert)).astype(np.float32))
        else:
            gated_feed_forward(matrix, p, FFN)
    # LFM2's final norm is stored under the embedding norm's name (llama.cpp's "fix for wrong
    # tensor name"); finish() would write output_norm.
    vector("token_embd_norm.weight", EMBD, 1.0, 0.1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


GRANITE_HYBRID_LAYERS = ["mamba2", "mamba2", "attention", "mamba2"]
# Mamba-2's shape: state size, heads (64 values each of the 512 inner), groups, kernel.
SSM_STATE, SSM_HEADS, SSM_GROUPS, SSM_CONV = 64, 8, 2, 4


def write_granite_hybrid(path, rng, reader):
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    n_expert, inner = 8, 2 * EMBD
    conv_dim = inner + 2 * SSM_GROUPS * SSM_STATE
    writer = q8_writer(path, "granitehybrid", len(GRANITE_HYBRID_LAYERS))
    writer.add_feed_forward_length(EXPERT_FFN)
    writer.add_expert_count(n_expert)
    writer.add_expert_used_count(2)
    writer.add_expert_shared_feed_forward_length(192)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv([KV_HEADS if kind == "attention" else 0 for kind in GRANITE_HYBRID_LAYERS])
    writer.add_rope_freq_base(10_000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_ssm_conv_kernel(SSM_CONV)
    writer.add_ssm_inner_size(inner)
    writer.add_ssm_state_size(SSM_STATE)
    writer.add_ssm_time_step_rank(SSM_HEADS)
    writer.add_ssm_group_count(SSM_GROUPS)
    writer.add_embedding_scale(12.0)
    writer.add_residual_scale(0.22)
    writer.add_attention_scale(1.0 / 64)
    writer.add_logit_scale(6.0)
    copy_tokenizer(writer, reader)
    matrix, vector = random_tensors(writer, rng)

    matrix("token_embd.weight", n_vocab, EMBD)
    for layer, kind in enumerate(GRANITE_HYBRID_LAYERS):
        p = f"blk.{layer}."
        vector(p + "attn_norm.weight", EMBD, 1.0, 0.1)
        if kind == "attention":
            attention(matrix, vector, p)
        else:
            matrix(p + "ssm_in.weight", inner + conv_dim + SSM_HEADS, EMBD)
            writer.add_tensor(p + "ssm_conv1d.weight", (0.5 * rng.standard_normal((conv_dim, SSM_CONV))).astype(np.float32))
            vector(p + "ssm_conv1d.bias", conv_dim, 0.0, 0.1)
            # Time-step biases softplus⁻¹ of 0.001-0.1, A = -exp(A_log) for A_log = ln 1-16, D
            # near 1, as Mamba-2 initializes them.
            dt = rng.uniform(0.001, 0.1, SSM_HEADS)
            writer.add_tensor(p + "ssm_dt.bias", np.log(np.expm1(dt)).astype(np.float32))
            writer.add_tensor(p + "ssm_a", -rng.uniform(1.0, 16.0, (SSM_HEADS, 1)).astype(np.float32))
            writer.add_tensor(p + "ssm_d", (1.0 + 0.1 * rng.standard_normal((SSM_HEADS, 1))).astype(np.float32))
            writer.add_tensor(p + "ssm_norm.weight", (1.0 + 0.1 * rng.standard_normal((SSM_GROUPS, inner // SSM_GROUPS))).astype(np.float32))
            matrix(p + "ssm_out.weight", EMBD, inner)
        vector(p + "ffn_norm.weight", EMBD, 1.0, 0.1)
        write_experts(writer, rng, p, n_expert)
        matrix(p + "ffn_gate_shexp.weight", 192, EMBD)
        matrix(p + "ffn_up_shexp.weight", 192, EMBD)
        matrix(p + "ffn_down_shexp.weight", EMBD, 192)
    finish(writer, vector)


# arch: (layers, RoPE base, Q/K/V biases, fused QKV and gate/up with LongRoPE)
MODELS = {
    "qwen2": (2, 1_000_000.0, True, False),
    "smollm3": (4, 5_000_000.0, False, False),
    "phi3": (2, 10_000.0, False, True),
    "gemma2": (3, 10_000.0, False, False),
    "llama-iq4_nl": (2, 10_000.0, False, False, Q.IQ4_NL),
    "llama-iq4_xs": (2, 10_000.0, False, False, Q.IQ4_XS),
    "llama-iq2_xxs": (2, 10_000.0, False, False, Q.IQ2_XXS),
    "llama-iq3_xxs": (2, 10_000.0, False, False, Q.IQ3_XXS),
    "llama-iq3_s": (2, 10_000.0, False, False, Q.IQ3_S),
    "llama-iq2_xs": (2, 10_000.0, False, False, Q.IQ2_XS),
    "llama-iq2_s": (2, 10_000.0, False, False, Q.IQ2_S),
    "llama-iq1_s": (2, 10_000.0, False, False, Q.IQ1_S),
    "llama-iq1_m": (2, 10_000.0, False, False, Q.IQ1_M),
    "llama-llama3": (2, 500_000.0, False, False, Q.Q8_0, True),
    "llama-mxfp4": (2, 10_000.0, False, False, Q.MXFP4),
    "llama-smolvlm": (2, 10_000.0, False, False, Q.Q8_0, False, SMOLVLM_TOKENS),
}

# Architectures with writers of their own.
WRITERS = {
    "gpt-oss": write_gpt_oss,
    "granitehybrid": write_granite_hybrid,
    "qwen35": write_qwen35,
    "qwen3vl": write_qwen3vl,
    "qwen2vl": write_qwen2vl,
    "gemma4": write_gemma4,
    "gemma4-vl": lambda path, rng, reader: write_gemma4(path, rng, reader, renamed=GEMMA4VL_TOKENS),
    "lfm2": write_lfm2,
    "lfm2moe": lambda path, rng, reader: write_lfm2(path, rng, reader, moe=True),
    "lfm2-vl": lambda path, rng, reader: write_lfm2(path, rng, reader, renamed=LFM2VL_TOKENS),
    **{arch: (lambda path, rng, reader, arch=arch: write_moe(path, rng, reader, arch)) for arch in MOE},
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--arch", choices=sorted([*MODELS, *WRITERS]), action="append")
    args = parser.parse_args()
    reader = GGUFReader(str(TOKENIZER_SOURCE))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name in args.arch or sorted([*MODELS, *WRITERS]):
        if name in WRITERS:
            path = args.out_dir / f"{name}-micro-q8_0.gguf"
            WRITERS[name](path, np.random.default_rng(2), reader)
            print("wrote", path)
            continue
        arch, _, variant = name.partition("-")
        path = args.out_dir / f"{arch}-micro-{variant or 'q8_0'}.gguf"
        write_model(path, np.random.default_rng(2), reader, arch, *MODELS[name])
        print("wrote", path)


if __name__ == "__main__":
    main()
