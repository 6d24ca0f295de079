#!/usr/bin/env python3
"""Write the golden fixtures for the tensor kernels (src/tensor/) into tests/fixtures/tensor/.

Expected values come from llama.cpp's own Python package (`pip install gguf numpy`): its
`gguf.quants` (de)quantizers mirror ggml-quants.c. Two kinds of fixture per weight type:

* `<type>_random.bin`: a few blocks made with a fixed seed. Where `gguf.quants` can quantize the
  type, the blocks are quantized random floats; otherwise (K-quants) they are random bytes with
  sane f16 super-block scales.
* `<type>_real.bin`: the first row of `blk.0.ffn_down.weight` from the committed test models in
  shared/models (real llama.cpp output from `llama-quantize`).

Plus `q8_0_quantize.bin`: random floats and the Q8_0 bytes that `gguf.quants.quantize` (bit-exact
with ggml's quantize_row_q8_0_ref) makes of them, to check activation quantization.

File layout (all little-endian):
    magic  b"IFXT"
    u32    ggml type id of the quantized data
    u32    rows
    u32    elements per row
    u32    number of bytes of quantized data
    u8[]   quantized data (rows * row_bytes)
    f32[]  expected values (rows * elements): the dequantized data, or for q8_0_quantize the
           source floats that were quantized

Usage: python3 scripts/make_tensor_fixtures.py [--models DIR] [--out DIR]
"""

import argparse
import struct
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf.quants import dequantize, quantize

REPO = Path(__file__).resolve().parent.parent
QK_K = 256

# name used in file names -> (type, model file suffix)
FORMATS = {
    "f32": (T.F32, None),
    "f16": (T.F16, "f16"),
    "bf16": (T.BF16, "bf16"),
    "q4_0": (T.Q4_0, "q4_0"),
    "q4_1": (T.Q4_1, "q4_1"),
    "q5_0": (T.Q5_0, "q5_0"),
    "q5_1": (T.Q5_1, "q5_1"),
    "q8_0": (T.Q8_0, "q8_0"),
    "q2_k": (T.Q2_K, "q2_k"),
    "q3_k": (T.Q3_K, "q3_k_s"),
    "q4_k": (T.Q4_K, "q4_k_s"),
    "q5_k": (T.Q5_K, "q5_k_s"),
    "q6_k": (T.Q6_K, "q6_k"),
    # gguf.quants cannot quantize the i-quants and no llama-quantize output is at hand: random
    # blocks only, dequantized by gguf.quants (ports of ggml's dequantize_row_iq4_*).
    "iq4_nl": (T.IQ4_NL, None),
    "iq4_xs": (T.IQ4_XS, None),
    "iq2_xxs": (T.IQ2_XXS, None),
    "iq3_xxs": (T.IQ3_XXS, None),
    "iq3_s": (T.IQ3_S, None),
    "iq2_xs": (T.IQ2_XS, None),
    "iq2_s": (T.IQ2_S, None),
    "iq1_s": (T.IQ1_S, None),
    "iq1_m": (T.IQ1_M, None),
    # gguf.quants quantizes MXFP4 (ggml's quantize_row_mxfp4_ref): random floats, quantized.
    "mxfp4": (T.MXFP4, None),
}

# The lattice i-quants: block bytes after the leading f16 d, and each type's own seed (so the
# fixtures written before stay as they were). Random bytes cover every grid index, sign and
# scale; the f16 d is set to a sane value.
LATTICE = {
    T.IQ2_XXS: (64, 6),
    T.IQ3_XXS: (96, 7),
    T.IQ3_S: (108, 8),
    T.IQ2_XS: (72, 9),
    T.IQ2_S: (80, 10),
    T.IQ1_S: (48, 11),
    T.IQ1_M: (56, 12),  # no leading d: its f16 goes into the top nibbles of the last 8 bytes
}


def iq1_m_with_d(raw: np.ndarray, d_bytes: np.ndarray) -> np.ndarray:
    """IQ1_M blocks from 56 random bytes each, the f16 `d` spread over the top nibbles of the
    four u16 scale words (bytes 48..56), as ggml stores it."""
    words = raw[:, 48:56].copy().view("<u2")
    bits = d_bytes.copy().view("<u2").reshape(-1, 1)
    nibbles = (bits >> (4 * np.arange(4, dtype=np.uint16))) & 0xF
    words[:] = (words & 0x0FFF) | (nibbles << 12)
    out = raw.copy()
    out[:, 48:56] = words.view(np.uint8)
    return out


def write_fixture(path: Path, qtype: T, rows: int, row_len: int, data: np.ndarray, values: np.ndarray):
    data = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
    values = np.ascontiguousarray(values, dtype="<f4").reshape(-1)
    assert values.size == rows * row_len, (path, values.size, rows, row_len)
    header = b"IFXT" + struct.pack("<4I", int(qtype), rows, row_len, data.size)
    path.write_bytes(header + data.tobytes() + values.tobytes())
    print(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}: {path.stat().st_size} bytes")


def f16_bytes(rng: np.random.Generator, n_blocks: int, low: float, high: float) -> np.ndarray:
    """Random f16 scales with random sign, as (n_blocks, 2) bytes."""
    magnitude = rng.uniform(low, high, size=n_blocks)
    sign = rng.choice([-1.0, 1.0], size=n_blocks)
    return (magnitude * sign).astype("<f2").view(np.uint8).reshape(n_blocks, 2)


def random_k_blocks(qtype: T, rng: np.random.Generator, n_blocks: int) -> np.ndarray:
    """Random K-quant blocks: random quant and scale bytes, f16 super-block scales of sane size."""

    def rand_bytes(n):
        return rng.integers(0, 256, size=(n_blocks, n), dtype=np.uint8)

    if qtype == T.Q2_K:  # scales[16], qs[64], d, dmin
        parts = [rand_bytes(16), rand_bytes(64), f16_bytes(rng, n_blocks, 1e-3, 0.1), f16_bytes(rng, n_blocks, 1e-3, 0.1)]
    elif qtype == T.Q3_K:  # hmask[32], qs[64], scales[12], d
        parts = [rand_bytes(32), rand_bytes(64), rand_bytes(12), f16_bytes(rng, n_blocks, 1e-3, 0.1)]
    elif qtype == T.Q4_K:  # d, dmin, scales[12], qs[128]
        parts = [f16_bytes(rng, n_blocks, 1e-3, 0.1), f16_bytes(rng, n_blocks, 1e-3, 0.1), rand_bytes(12), rand_bytes(128)]
    elif qtype == T.Q5_K:  # d, dmin, scales[12], qh[32], qs[128]
        parts = [f16_bytes(rng, n_blocks, 1e-3, 0.1), f16_bytes(rng, n_blocks, 1e-3, 0.1), rand_bytes(12), rand_bytes(32), rand_bytes(128)]
    elif qtype == T.Q6_K:  # ql[128], qh[64], scales[16] (int8), d
        parts = [rand_bytes(128), rand_bytes(64), rand_bytes(16), f16_bytes(rng, n_blocks, 1e-3, 0.1)]
    else:
        raise ValueError(qtype)
    return np.concatenate(parts, axis=1)


def random_fixture(name: str, qtype: T, rng: np.random.Generator, out: Path):
    if qtype == T.IQ4_NL:  # d, qs[16]
        rng = np.random.default_rng(4)  # its own stream: the fixtures written before stay as they were
        n_blocks = 8
        data = np.concatenate([f16_bytes(rng, n_blocks, 1e-3, 0.1), rng.integers(0, 256, size=(n_blocks, 16), dtype=np.uint8)], axis=1)
        row_len = n_blocks * 32
    elif qtype == T.IQ4_XS:  # d, scales_h[2], scales_l[4], qs[128]
        rng = np.random.default_rng(5)  # its own stream, as IQ4_NL's
        n_blocks = 2
        data = np.concatenate([f16_bytes(rng, n_blocks, 1e-3, 0.1), rng.integers(0, 256, size=(n_blocks, 134), dtype=np.uint8)], axis=1)
        row_len = n_blocks * QK_K
    elif qtype in LATTICE:
        rest, seed = LATTICE[qtype]
        rng = np.random.default_rng(seed)
        n_blocks = 3
        data = np.concatenate([f16_bytes(rng, n_blocks, 1e-3, 0.1), rng.integers(0, 256, size=(n_blocks, rest), dtype=np.uint8)], axis=1)
        if qtype == T.IQ1_M:
            data = iq1_m_with_d(data[:, 2:], data[:, :2])
        row_len = n_blocks * QK_K
    elif qtype == T.MXFP4:  # e, qs[16]: quantized floats, from its own stream as the i-quants'
        rng = np.random.default_rng(13)
        row_len = 256
        data = quantize((rng.standard_normal(row_len) * 0.05).astype(np.float32).reshape(1, -1), qtype)
    elif qtype in (T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K):
        n_blocks = 4
        data = random_k_blocks(qtype, rng, n_blocks)
        row_len = n_blocks * QK_K
    else:
        row_len = 256
        floats = rng.standard_normal(row_len).astype(np.float32)
        # a few larger outliers, as real weights have
        floats[rng.integers(0, row_len, size=4)] *= 8
        data = floats if qtype == T.F32 else quantize(floats.reshape(1, -1), qtype)
    values = dequantize(np.asarray(data).view(np.uint8).reshape(1, -1) if qtype != T.F32 else data, qtype)
    write_fixture(out / f"{name}_random.bin", qtype, 1, row_len, data, values)


def real_fixture(name: str, qtype: T, suffix: str, models: Path, out: Path):
    reader = GGUFReader(models / f"qwen3-micro-{suffix}.gguf")
    tensor = next(t for t in reader.tensors if t.name == "blk.0.ffn_down.weight")
    assert tensor.tensor_type == qtype, (tensor.name, tensor.tensor_type)
    row_len = int(tensor.shape[0])
    first_row = np.array(tensor.data[0:1]).view(np.uint8).reshape(1, -1)
    values = dequantize(first_row, qtype)
    write_fixture(out / f"{name}_real.bin", qtype, 1, row_len, first_row, values)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=Path, default=REPO.parent / "shared" / "models")
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "tensor")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    rng = np.random.default_rng(20240611)
    for name, (qtype, suffix) in FORMATS.items():
        random_fixture(name, qtype, rng, args.out)
        if suffix is not None:
            real_fixture(name, qtype, suffix, args.models, args.out)

    # Activation quantization golden: Q8_0 via gguf's bit-exact port of quantize_row_q8_0_ref.
    floats = (rng.standard_normal(256) * 3).astype(np.float32)
    floats[:4] = [0.0, 1.0, -1.0, 0.5]
    floats[32:64] = 0.0  # an all-zero block must give d = 0 and zero quants
    floats[64] = 127.0  # amax 127 makes d = 1, so the halves below are exact rounding ties
    floats[65:96] = np.arange(-15, 16, dtype=np.float32) + 0.5
    q = quantize(floats.reshape(1, -1), T.Q8_0)
    write_fixture(args.out / "q8_0_quantize.bin", T.Q8_0, 1, 256, q, floats)


if __name__ == "__main__":
    main()
