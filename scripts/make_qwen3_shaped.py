#!/usr/bin/env python3
"""Write a GGUF with the exact shapes of Qwen3-0.6B or Qwen3-1.7B and random weights, for speed
measurements (speed depends on shapes and types, not on the values of the weights).

  pip install gguf numpy
  python3 scripts/make_qwen3_shaped.py OUT.gguf [--shape 0.6b|1.7b] [--type q8_0|q4_0|f16|bf16|f32]

Tokenizer, chat template and the remaining hyperparameters come from the committed
tests/fixtures/models/qwen3-vocab.gguf; the weights are seeded random normals (std 0.02,
norms near 1), so a file is the same on every run with the same numpy and gguf versions. Tied
embeddings, as the real models. Norm vectors stay F32; every matrix is of --type.
Adapted from ../shared/models/make_qwen3_0_6b.py (which writes the 0.6b Q8_0 and F16 files).
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

    def matrix(name, rows, cols):
        x = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(0.02)
        if args.type in ("q8_0", "q4_0"):
            kind = Q.Q8_0 if args.type == "q8_0" else Q.Q4_0
            writer.add_tensor(name, quantize(x, kind), raw_dtype=kind)
        elif args.type == "bf16":
            writer.add_tensor(name, quantize(x, Q.BF16), raw_dtype=Q.BF16)
        elif args.type == "f16":
            writer.add_tensor(name, x.astype(np.float16))
        else:
            writer.add_tensor(name, x)

    def norm(name, n):
        writer.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32))

    matrix("token_embd.weight", n_vocab, embd)
    for layer in range(layers):
        p = f"blk.{layer}."
        norm(p + "attn_norm.weight", embd)
        matrix(p + "attn_q.weight", heads * head_dim, embd)
        matrix(p + "attn_k.weight", kv_heads * head_dim, embd)
        matrix(p + "attn_v.weight", kv_heads * head_dim, embd)
        matrix(p + "attn_output.weight", embd, heads * head_dim)
        norm(p + "attn_q_norm.weight", head_dim)
        norm(p + "attn_k_norm.weight", head_dim)
        norm(p + "ffn_norm.weight", embd)
        matrix(p + "ffn_gate.weight", ffn, embd)
        matrix(p + "ffn_up.weight", ffn, embd)
        matrix(p + "ffn_down.weight", embd, ffn)
    norm("output_norm.weight", embd)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print("wrote", args.out)


if __name__ == "__main__":
    main()
