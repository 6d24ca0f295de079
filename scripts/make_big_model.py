#!/usr/bin/env python3
"""Write a GGUF file over 4 GiB with random weights, for the test that files too large for
a 4 GiB wasm32 memory load and chat through the 64-bit-memory build
(tests/page/memory64.test.mjs).

  pip install gguf numpy
  python3 scripts/make_big_model.py OUT.gguf

A Llama-architecture model 4032 wide (32 query and 8 KV heads of 126, RoPE base 500000) with
Gemma 3's tokenizer and chat template (262,144 tokens; copied from the Gemma 3 270M file in
.cache/models, which build.sh fetches). Its F32 token embedding, 3.94 GiB, comes first, so the
Q4_0 output matrix lies across the first 4 GiB of the file and what follows it past them: 4.9 GB
(4.55 GiB) in all, yet a token costs only ~1.1 G multiply-adds (the output matrix; a prompt's
embedding rows are only looked up), so the test runs in seconds. Every tensor is under 4 GiB,
so that a 32-bit build can stream the file's weights to the GPU (tests/page/gpu.test.mjs): a
tensor's length must fit its 32-bit addresses.

Weights: seeded normals for the embedding; Q4_0 matrices with random codes 1..15 (weights
-7..7, mean zero: codes 0..15 would add a constant to every weight, which the residual stream
accumulates until every position looks alike) and one scale per matrix that keeps outputs
near unit size. The file is the same on every run, written tensor by tensor (peak memory ~4.1 GB).
"""
import sys
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader

REPO = Path(__file__).resolve().parent.parent
TOKENIZER_SOURCE = REPO / ".cache" / "models" / "gemma3-270m-q4_k_m.gguf"
LAYERS, EMBD, HEADS, KV_HEADS, FFN = 2, 4032, 32, 8, 1024
HEAD_DIM = EMBD // HEADS
Q4_0_BLOCK, Q4_0_BYTES = 32, 18

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_micro_models import copy_tokenizer  # noqa: E402


def q4_0_matrix(rng, rows, cols):
    """Random Q4_0 blocks: codes 1..15 (weights -7..7 times d), d = 1/(4.3·√cols), the
    standard deviation of the weights times the root of the row length, for unit outputs."""
    blocks = rows * cols // Q4_0_BLOCK
    codes = rng.integers(1, 16, size=(blocks, 2, Q4_0_BLOCK // 2), dtype=np.uint8)
    data = np.empty((blocks, Q4_0_BYTES), dtype=np.uint8)
    data[:, 2:] = codes[:, 0] | (codes[:, 1] << 4)
    data[:, 0:2] = np.frombuffer(np.float16(1.0 / (4.3 * np.sqrt(cols))).tobytes(), dtype=np.uint8)
    return data.reshape(rows, cols // Q4_0_BLOCK * Q4_0_BYTES)


def main():
    out = Path(sys.argv[1])
    reader = GGUFReader(str(TOKENIZER_SOURCE))
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    rng = np.random.default_rng(8)

    # (name, shape as ggml gives it: [columns, rows], type); data follows in the same order.
    tensors = [("token_embd.weight", (EMBD, n_vocab), Q.F32)]
    for layer in range(LAYERS):
        prefix = f"blk.{layer}"
        tensors += [
            (f"{prefix}.attn_norm.weight", (EMBD,), Q.F32),
            (f"{prefix}.attn_q.weight", (EMBD, HEADS * HEAD_DIM), Q.Q4_0),
            (f"{prefix}.attn_k.weight", (EMBD, KV_HEADS * HEAD_DIM), Q.Q4_0),
            (f"{prefix}.attn_v.weight", (EMBD, KV_HEADS * HEAD_DIM), Q.Q4_0),
            (f"{prefix}.attn_output.weight", (HEADS * HEAD_DIM, EMBD), Q.Q4_0),
            (f"{prefix}.ffn_norm.weight", (EMBD,), Q.F32),
            (f"{prefix}.ffn_gate.weight", (EMBD, FFN), Q.Q4_0),
            (f"{prefix}.ffn_up.weight", (EMBD, FFN), Q.Q4_0),
            (f"{prefix}.ffn_down.weight", (FFN, EMBD), Q.Q4_0),
        ]
    tensors += [("output_norm.weight", (EMBD,), Q.F32), ("output.weight", (EMBD, n_vocab), Q.Q4_0)]

    writer = gguf.GGUFWriter(str(out), arch="llama")
    writer.add_name("llama-8b-shaped-random-q4_0")
    writer.add_context_length(8192)
    writer.add_embedding_length(EMBD)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_dimension_count(HEAD_DIM)
    writer.add_rope_freq_base(500000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(2)  # MOSTLY_Q4_0 (the matrices; the embedding is F32)
    copy_tokenizer(writer, reader)
    for name, shape, kind in tensors:
        if kind == Q.F32:
            writer.add_tensor_info(name, shape[::-1], np.dtype(np.float32), int(np.prod(shape)) * 4)
        else:
            columns, rows = shape
            n_bytes = rows * columns // Q4_0_BLOCK * Q4_0_BYTES
            byte_shape = (rows, columns // Q4_0_BLOCK * Q4_0_BYTES)
            writer.add_tensor_info(name, byte_shape, np.dtype(np.uint8), n_bytes, raw_dtype=Q.Q4_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for name, shape, kind in tensors:
        if name == "token_embd.weight":  # 3.94 GiB at once: the writer takes whole tensors
            writer.write_tensor_data(rng.standard_normal((shape[1], EMBD), dtype=np.float32))
        elif kind == Q.F32:
            writer.write_tensor_data(np.ones(shape[0], dtype=np.float32))
        else:
            writer.write_tensor_data(q4_0_matrix(rng, shape[1], shape[0]))
    writer.close()
    print(f"{out}: {out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
