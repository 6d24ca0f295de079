#!/usr/bin/env python3
"""Write a GGUF with the shapes of a real mixture-of-experts model and random weights, for speed
measurements (speed depends on shapes and types, not on the values of the weights).

  pip install gguf numpy
  python3 scripts/make_moe_shaped.py OUT.gguf --shape granite-1b-a400m|olmoe-1b-7b|granite-4.0-h-tiny|gpt-oss-20b
      [--type q4_k_m|q8_0] [--layers N]

Shapes (from the models' config.json):
  granite-1b-a400m  granite-3.1-1b-a400m: 24 layers, 1024 wide, 16 query and 8 KV heads of 64,
                    32 experts of width 512, 8 used; Granite's multipliers; tied embeddings;
                    49,155 tokens.
  olmoe-1b-7b       OLMoE-1B-7B-0924: 16 layers, 2048 wide, 16 query and KV heads of 128, 64
                    experts of width 1024, 8 used; Q/K norm across heads; a separate output
                    matrix; 50,304 tokens.
  granite-4.0-h-tiny  Granite 4.0-H Tiny (its config.json as recalled here; the hub cannot be
                    reached): 40 layers, 1536 wide, attention in layers 5, 15, 25 and 35 (12
                    query and 4 KV heads of 128), Mamba-2 in the others (inner 3072 in 48 heads
                    of 64, 1 group, states of 128, 4 taps); 64 experts of width 512, 6 used,
                    and a shared expert of 1024; Granite's multipliers; tied embeddings;
                    100,352 tokens. Mamba-2's small tensors stay F32, as llama.cpp's converter
                    leaves them.
  gpt-oss-20b       gpt-oss-20b: 24 layers, 2880 wide, 64 query and 8 KV heads of 64 with biases
                    and sinks, every other layer local (window 128), YaRN RoPE; 32 experts of
                    width 2880 in MXFP4 (random FP4 codes, scales near 2^-7) with biases, 4
                    used; a separate output matrix; 201,088 tokens. Its 12 GiB do not fit this
                    machine's page beside the browser: `--layers 6` keeps the first 6 layers.

`--layers N` keeps the first N layers of the shape (a smaller file with the same per-layer cost).

The tokenizer is the micro files' (tests/fixtures/models/qwen3-micro-q4_0.gguf, 8,026 tokens)
padded with unused tokens to the model's vocabulary size, so the embedding and output matrices
have the real shapes. q4_k_m mixes types as llama-quantize's Q4_K_M does: Q6_K for the token
embedding (and output), for attn_v and for ffn_down_exps in the layers it gives more bits, Q4_K
elsewhere; routers stay F32. K-quant matrices are random blocks (make_qwen3_shaped.py's), so a
7B file is written in seconds.
"""
import argparse
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader
from gguf.quants import quantize

from make_micro_models import copy_tokenizer
from make_qwen3_shaped import more_bits, random_k_blocks

SHAPES = {
    # layers, embd, heads, kv heads, head dim, experts, used, expert width, vocab
    "granite-1b-a400m": dict(arch="granitemoe", layers=24, embd=1024, heads=16, kv=8, head=64, experts=32, used=8, ffn=512, vocab=49155),
    "olmoe-1b-7b": dict(arch="olmoe", layers=16, embd=2048, heads=16, kv=16, head=128, experts=64, used=8, ffn=1024, vocab=50304),
    "granite-4.0-h-tiny": dict(arch="granitehybrid", layers=40, embd=1536, heads=12, kv=4, head=128, experts=64, used=6, ffn=512, vocab=100352),
    "gpt-oss-20b": dict(arch="gpt-oss", layers=24, embd=2880, heads=64, kv=8, head=64, experts=32, used=4, ffn=2880, vocab=201088),
}
# Granite 4.0-H: its attention layers, Mamba-2's shape, the shared expert's width.
HYBRID = dict(attention=(5, 15, 25, 35), state=128, heads=48, groups=1, conv=4, shared=1024)
REPO = Path(__file__).resolve().parent.parent
TOKENIZER_SOURCE = REPO / "tests" / "fixtures" / "models" / "qwen3-micro-q4_0.gguf"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--shape", choices=sorted(SHAPES), required=True)
    parser.add_argument("--type", choices=["q4_k_m", "q8_0"], default="q4_k_m")
    parser.add_argument("--layers", type=int)
    args = parser.parse_args()
    s = SHAPES[args.shape]
    arch, layers, embd, n_vocab = s["arch"], args.layers or s["layers"], s["embd"], s["vocab"]
    gpt_oss = arch == "gpt-oss"
    q_width, kv_width = s["heads"] * s["head"], s["kv"] * s["head"]
    rng = np.random.default_rng(700)

    writer = gguf.GGUFWriter(args.out, arch=arch)
    writer.add_name(f"{args.shape}-shaped-synthetic")
    k_quants = args.type == "q4_k_m"
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M if k_quants else gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_block_count(layers)
    writer.add_context_length(4096)
    writer.add_embedding_length(embd)
    writer.add_feed_forward_length(s["ffn"])
    hybrid = arch == "granitehybrid"
    is_attention = [not hybrid or layer in HYBRID["attention"] for layer in range(layers)]
    writer.add_head_count(s["heads"])
    writer.add_head_count_kv([s["kv"] if attention else 0 for attention in is_attention] if hybrid else s["kv"])
    if gpt_oss:
        writer.add_key_length(s["head"])
        writer.add_value_length(s["head"])
        writer.add_expert_feed_forward_length(s["ffn"])
        writer.add_sliding_window(128)
        writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        writer.add_rope_scaling_factor(32.0)
        writer.add_rope_scaling_orig_ctx_len(4096)
    writer.add_rope_freq_base(150_000.0 if gpt_oss else 10_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_expert_count(s["experts"])
    writer.add_expert_used_count(s["used"])
    inner = 2 * embd
    conv_dim = inner + 2 * HYBRID["groups"] * HYBRID["state"]
    if hybrid:
        writer.add_ssm_conv_kernel(HYBRID["conv"])
        writer.add_ssm_inner_size(inner)
        writer.add_ssm_state_size(HYBRID["state"])
        writer.add_ssm_time_step_rank(HYBRID["heads"])
        writer.add_ssm_group_count(HYBRID["groups"])
        writer.add_expert_shared_feed_forward_length(HYBRID["shared"])
    if arch in ("granitemoe", "granitehybrid"):
        writer.add_embedding_scale(12.0)
        writer.add_residual_scale(0.22)
        writer.add_attention_scale(0.015625)
        writer.add_logit_scale(6.0)
    copy_tokenizer(writer, GGUFReader(str(TOKENIZER_SOURCE)), pad_to=n_vocab)

    def blocks(shape, more):
        """Random blocks of `shape` (… × rows × cols) in the file's type for this tensor."""
        *lead, rows, cols = shape
        count = int(np.prod(lead)) if lead else 1
        if k_quants:
            kind = Q.Q6_K if more else Q.Q4_K
            data = random_k_blocks(rng, count * rows, cols, kind)
        else:
            kind = Q.Q8_0
            x = rng.standard_normal((count * rows, cols), dtype=np.float32) * np.float32(0.02)
            data = quantize(x, kind)
        return data.reshape(*lead, rows, -1), kind

    def matrix(name, shape, more=False):
        data, kind = blocks(shape, more)
        writer.add_tensor(name, data, raw_dtype=kind)

    def norm(name, n):
        writer.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32))

    def bias(name, *shape):
        writer.add_tensor(name, (0.1 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32))

    def mxfp4_stack(name, count, rows, cols):
        """Random MXFP4 blocks: an E8M0 scale of 2^-7 or 2^-8, then 16 bytes of FP4 codes."""
        blocks = rng.integers(0, 256, size=(count, rows, cols // 32, 17), dtype=np.uint8)
        blocks[..., 0] = rng.integers(119, 121, size=(count, rows, cols // 32), dtype=np.uint8)
        writer.add_tensor(name, blocks.reshape(count, rows, -1), raw_dtype=Q.MXFP4)

    matrix("token_embd.weight", (n_vocab, embd), more=True)
    if arch in ("olmoe", "gpt-oss"):
        matrix("output.weight", (n_vocab, embd), more=True)
    experts, ffn = s["experts"], s["ffn"]
    for layer in range(layers):
        bits = more_bits(layer, layers)
        p = f"blk.{layer}."
        norm(p + "attn_norm.weight", embd)
        if not is_attention[layer]:
            heads = HYBRID["heads"]
            matrix(p + "ssm_in.weight", (inner + conv_dim + heads, embd))
            writer.add_tensor(p + "ssm_conv1d.weight", (0.5 * rng.standard_normal((conv_dim, HYBRID["conv"]))).astype(np.float32))
            writer.add_tensor(p + "ssm_conv1d.bias", (0.1 * rng.standard_normal(conv_dim)).astype(np.float32))
            writer.add_tensor(p + "ssm_dt.bias", np.log(np.expm1(rng.uniform(0.001, 0.1, heads))).astype(np.float32))
            writer.add_tensor(p + "ssm_a", -rng.uniform(1.0, 16.0, (heads, 1)).astype(np.float32))
            writer.add_tensor(p + "ssm_d", np.ones((heads, 1), dtype=np.float32))
            groups = HYBRID["groups"]
            ssm_norm = 1.0 + 0.1 * rng.standard_normal((groups, inner // groups), dtype=np.float32)
            writer.add_tensor(p + "ssm_norm.weight", ssm_norm.astype(np.float32))
            matrix(p + "ssm_out.weight", (embd, inner))
        else:
            matrix(p + "attn_q.weight", (q_width, embd))
            matrix(p + "attn_k.weight", (kv_width, embd))
            matrix(p + "attn_v.weight", (kv_width, embd), more=bits)
            matrix(p + "attn_output.weight", (embd, q_width))
        if arch == "olmoe":
            norm(p + "attn_q_norm.weight", q_width)
            norm(p + "attn_k_norm.weight", kv_width)
        if gpt_oss:
            for part, width in (("q", q_width), ("k", kv_width), ("v", kv_width), ("output", embd)):
                bias(p + f"attn_{part}.bias", width)
            bias(p + "attn_sinks.weight", s["heads"])
        norm(p + ("post_attention_norm.weight" if gpt_oss else "ffn_norm.weight"), embd)
        router = rng.standard_normal((experts, embd), dtype=np.float32) * np.float32(0.1)
        writer.add_tensor(p + "ffn_gate_inp.weight", router)
        if gpt_oss:
            bias(p + "ffn_gate_inp.bias", experts)
            for part, rows, cols in (("gate", ffn, embd), ("up", ffn, embd), ("down", embd, ffn)):
                mxfp4_stack(p + f"ffn_{part}_exps.weight", experts, rows, cols)
                bias(p + f"ffn_{part}_exps.bias", experts, rows)
            continue
        matrix(p + "ffn_gate_exps.weight", (experts, ffn, embd))
        matrix(p + "ffn_up_exps.weight", (experts, ffn, embd))
        matrix(p + "ffn_down_exps.weight", (experts, embd, ffn), more=bits)
        if hybrid:
            shared = HYBRID["shared"]
            matrix(p + "ffn_gate_shexp.weight", (shared, embd))
            matrix(p + "ffn_up_shexp.weight", (shared, embd))
            matrix(p + "ffn_down_shexp.weight", (embd, shared), more=bits)
    norm("output_norm.weight", embd)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print("wrote", args.out)


if __name__ == "__main__":
    main()
