#!/usr/bin/env python3
"""Makes the micro Qwen3 test models that are not committed, from the committed F32 one.

    python3 scripts/make_micro_quants.py OUT_DIR [TYPE...]

tests/fixtures/models/qwen3-micro-f32.gguf (random weights, llama.cpp's goldens in
tests/fixtures/golden) is committed, and so are the K-quants (the `gguf` package only dequantizes
them), Q4_0 and Q8_0. F16, BF16, Q4_1, Q5_0 and Q5_1 are written here, byte for byte as
llama.cpp's `llama-quantize --pure` wrote the files its goldens came from: the same metadata
with `general.quantization_version` and `general.file_type` moved last, tensors sorted as
llama.cpp sorts them (those outside the blocks first, then block by block, each by name),
every matrix quantized by the `gguf` package's reference quantizers (which match ggml's), norms
kept in F32, data aligned to 32 bytes. Each file is checked against the sha256 its golden
records, and a file already there with that sha256 is left alone. Q8_0 and Q4_0 come out byte
for byte as the committed ones too: name them (scripts/gpu-check.sh does, to carry one file
fewer to a GPU machine).
"""

import hashlib
import json
import re
import struct
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
import gguf.quants

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "tests/fixtures/models/qwen3-micro-f32.gguf"
GOLDENS = REPO / "tests/fixtures/golden"
ALIGNMENT = 32
# name: (ggml type of every matrix, llama_ftype written as general.file_type)
TYPES = {
    "f16": (T.F16, 1),
    "bf16": (T.BF16, 32),
    "q4_1": (T.Q4_1, 3),
    "q5_0": (T.Q5_0, 8),
    "q5_1": (T.Q5_1, 9),
    "q8_0": (T.Q8_0, 7),
    "q4_0": (T.Q4_0, 2),
}
# What is not committed.
MADE_BY_DEFAULT = ["f16", "bf16", "q4_1", "q5_0", "q5_1"]


def gguf_string(text):
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def u32_field(key, value):
    return gguf_string(key) + struct.pack("<II", 4, value)  # 4: GGUF's uint32 value type


def llama_cpp_order(tensor):
    block = re.match(r"blk\.(\d+)\.", tensor.name)
    return (int(block.group(1)) if block else -1, tensor.name)


def quantized(source, matrix_type, file_type):
    fields = [
        b"".join(part.tobytes() for part in field.parts)
        for field in source.fields.values()
        if not field.name.startswith("GGUF.") and field.name != "general.file_type"
    ]
    fields += [u32_field("general.quantization_version", 2), u32_field("general.file_type", file_type)]
    infos, blobs, offset = [], [], 0
    for tensor in sorted(source.tensors, key=llama_cpp_order):
        values = np.asarray(tensor.data, dtype=np.float32).reshape([int(d) for d in reversed(tensor.shape)])
        if len(tensor.shape) < 2:
            kind, data = T.F32, values.tobytes()
        elif matrix_type == T.F16:
            kind, data = T.F16, values.astype(np.float16).tobytes()
        else:
            kind, data = matrix_type, gguf.quants.quantize(values, matrix_type).tobytes()
        dims = b"".join(struct.pack("<Q", int(d)) for d in tensor.shape)
        infos.append(gguf_string(tensor.name) + struct.pack("<I", len(tensor.shape)) + dims + struct.pack("<IQ", int(kind), offset))
        data += b"\0" * (-len(data) % ALIGNMENT)
        blobs.append(data)
        offset += len(data)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(fields)) + b"".join(fields) + b"".join(infos)
    head += b"\0" * (-len(head) % ALIGNMENT)
    return head + b"".join(blobs)


def main(out_dir, names):
    out_dir.mkdir(parents=True, exist_ok=True)
    source = None
    for name in names:
        if name not in TYPES:
            sys.exit(f"make_micro_quants: no type {name!r} ({', '.join(TYPES)})")
        matrix_type, file_type = TYPES[name]
        golden = json.loads((GOLDENS / f"qwen3-micro-{name}.json").read_text())
        target = out_dir / golden["file"]
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == golden["sha256"]:
            continue
        source = source or GGUFReader(str(SOURCE))
        data = quantized(source, matrix_type, file_type)
        got = hashlib.sha256(data).hexdigest()
        if got != golden["sha256"]:
            sys.exit(f"make_micro_quants: {golden['file']} came out with sha256 {got}, not the golden's {golden['sha256']}")
        partial = target.with_suffix(".part")
        partial.write_bytes(data)
        partial.replace(target)
        print(f"make_micro_quants: {golden['file']} ready")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), sys.argv[2:] or MADE_BY_DEFAULT)
