#!/usr/bin/env python3
"""Write a GGUF with the exact shapes of Qwen3-0.6B or Qwen3-1.7B and random weights, for speed
measurements (speed depends on shapes and types, not on the values of the weights).

  pip install gguf numpy
  python3 scripts/make_qwen3_shaped.py OUT.gguf [--shape 0.6b|1.7b]
      [--type q8_0|q4_0|q4_1|q4_k_m|q6_k|f16|bf16|f32]

Tokenizer, chat template and the remaining hyperparameters come from the committed
tests/fixtures/models/qwen3-vocab.gguf; the weights are seeded random normals (std 0.02,
norms near 1), so a file is the same on every run with the same numpy and gguf versions. Tied
embeddings, as the real models. Norm vectors stay F32; every matrix is of --type, except in
q4_k_m, which mixes types as llama-quantize's Q4_K_M does (Q6_K for the tied embedding and for
attn_v and ffn_down in the layers llama.cpp gives more bits, Q4_K elsewhere). The K-quant
matrices are random blocks (every quant, sub-block scale and minimum random, the f16 block
scales fixed so weights land near std 0.02): the `gguf` package cannot quantize K-quants, and
writing blocks takes seconds where quantizing 600M weights in numpy takes minutes.
scripts/gpu-check.sh writes its speed files with it, on the GPU machine.
"""
import argparse
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFValueType
from gguf.quants import quantize

# (layers, embedding, query heads, kv heads, head dim, ffn)
SHAPES = {
    "0.6b": (28, 1024, 16, 8, 128, 3072),
    "1.7b": (28, 2048, 16, 8, 128, 6144),
}
FILE_TYPES = {
    "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
    "q4_1": gguf.LlamaFileType.MOSTLY_Q4_1,
    "q4_k_m": gguf.LlamaFileType.MOSTLY_Q4_K_M,
    "q6_k": gguf.LlamaFileType.MOSTLY_Q6_K,
    "f16": gguf.LlamaFileType.MOSTLY_F16,
    "bf16": gguf.LlamaFileType.MOSTLY_BF16,
    "f32": gguf.LlamaFileType.ALL_F32,
}
# Keys this script sets itself instead of copying from the vocabulary file.
SHAPE_KEYS = {
    "qwen3.block_count",
    "qwen3.embedding_length",
    "qwen3.feed_forward_length",
    "qwen3.attention.head_count",
    "qwen3.attention.head_count_kv",
    "qwen3.attention.key_length",
    "qwen3.attention.value_length",
}


# Bytes per 256-weight block, and where its f16 scales sit: Q4_K is d, dmin, 12 bytes of 6-bit
# scales and minimums, 128 of 4-bit quants; Q6_K is 128 + 64 bytes of 6-bit quants, 16 int8
# scales, then d. Weights are d * scale * q (- dmin * min): these give std near 0.02, mean near 0.
K_BLOCKS = {
    Q.Q4_K: (144, {0: 8.0e-5, 2: 6.0e-4}),
    Q.Q6_K: (210, {208: 1.5e-5}),
}


def random_k_blocks(rng, rows, cols, kind):
    block_bytes, scales = K_BLOCKS[kind]
    blocks = rng.integers(0, 256, size=(rows, cols // 256, block_bytes), dtype=np.uint8)
    for offset, d in scales.items():
        blocks[:, :, offset : offset + 2] = np.frombuffer(np.float16(d).tobytes(), dtype=np.uint8)
    return blocks.reshape(rows, -1)


def more_bits(layer, layers):
    """llama-quantize's use_more_bits: the layers whose attn_v and ffn_down Q4_K_M keeps in Q6_K."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def copy_metadata(writer, reader):
    skip = {"general.architecture", "general.name", "general.file_type"} | SHAPE_KEYS
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name in skip:
            continue
        kind = field.types[0]
        if kind == GGUFValueType.ARRAY:
            if field.types[1] == GGUFValueType.STRING:
                values = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
            else:
                values = [field.parts[i][0].item() for i in field.data]
            writer.add_array(name, values)
        elif kind == GGUFValueType.STRING:
            writer.add_string(name, bytes(field.parts[field.data[0]]).decode("utf-8"))
        else:
            writer.add_key_value(name, field.parts[field.data[0]][0].item(), kind)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="0.6b")
    parser.add_argument("--type", choices=sorted(FILE_TYPES), default="q8_0")
    args = parser.parse_args()
    layers, embd, heads, kv_heads, head_dim, ffn = SHAPES[args.shape]

    vocab = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "models" / "qwen3-vocab.gguf"
    reader = GGUFReader(str(vocab))
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    rng = np.random.default_rng(600)
    writer = gguf.GGUFWriter(args.out, arch="qwen3")
    writer.add_name(f"qwen3-{args.shape}-shaped-synthetic")
    writer.add_file_type(FILE_TYPES[args.type])
    copy_metadata(writer, reader)
    writer.add_block_count(layers)
    writer.add_embedding_length(embd)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)

    def matrix(name, rows, cols, more_bits=False):
        if args.type in ("q4_k_m", "q6_k"):
            kind = Q.Q6_K if args.type == "q6_k" or more_bits else Q.Q4_K
            writer.add_tensor(name, random_k_blocks(rng, rows, cols, kind), raw_dtype=kind)
            return
        x = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(0.02)
        if args.type in ("q8_0", "q4_0", "q4_1"):
            kind = {"q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q4_1": Q.Q4_1}[args.type]
            writer.add_tensor(name, quantize(x, kind), raw_dtype=kind)
        elif args.type == "bf16":
            writer.add_tensor(name, quantize(x, Q.BF16), raw_dtype=Q.BF16)
        elif args.type == "f16":
            writer.add_tensor(name, x.astype(np.float16))
        else:
            writer.add_tensor(name, x)

    def norm(name, n):
        writer.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32))

    matrix("token_embd.weight", n_vocab, embd, more_bits=True)
    for layer in range(layers):
        bits = more_bits(layer, layers)
        p = f"blk.{layer}."
        norm(p + "attn_norm.weight", embd)
        matrix(p + "attn_q.weight", heads * head_dim, embd)
        matrix(p + "attn_k.weight", kv_heads * head_dim, embd)
        matrix(p + "attn_v.weight", kv_heads * head_dim, embd, more_bits=bits)
        matrix(p + "attn_output.weight", embd, heads * head_dim)
        norm(p + "attn_q_norm.weight", head_dim)
        norm(p + "attn_k_norm.weight", head_dim)
        norm(p + "ffn_norm.weight", embd)
        matrix(p + "ffn_gate.weight", ffn, embd)
        matrix(p + "ffn_up.weight", ffn, embd)
        matrix(p + "ffn_down.weight", embd, ffn, more_bits=bits)
    norm("output_norm.weight", embd)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print("wrote", args.out)


if __name__ == "__main__":
    main()
