#!/usr/bin/env python3
"""Print the facts llama.cpp's own Python reader (the `gguf` package) finds in a GGUF file, as JSON.

    python3 scripts/gguf_facts.py MODEL.gguf          (its facts)
    python3 scripts/gguf_facts.py A.gguf B.gguf ...   ({path: facts})

tests/inspect_crosscheck.rs compares these with `inferno inspect --json`. Names follow inferno's
conventions so the two can be compared field by field:

- metadata value types are inferno's names (u8 … f64, bool, string, array);
- tensor dims are in ggml order (dims[0] is the row length). GGUFReader's `ReaderTensor.shape`
  is already in that order (it is the `ne` array exactly as stored); only `ReaderTensor.data`
  has the reversed, numpy order;
- tensor offsets are absolute file offsets (`ReaderTensor.data_offset`).

GGUFReader also lists the pseudo-fields GGUF.version, GGUF.tensor_count and GGUF.kv_count among
its fields; they are not metadata and are left out.
"""

import json
import math
import sys

import gguf

PSEUDO_FIELDS = {"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count"}
PREVIEW_LEN = 16  # inferno::inspect::ARRAY_PREVIEW_LEN

VT = gguf.GGUFValueType
TYPE_NAMES = {
    VT.UINT8: "u8",
    VT.INT8: "i8",
    VT.UINT16: "u16",
    VT.INT16: "i16",
    VT.UINT32: "u32",
    VT.INT32: "i32",
    VT.FLOAT32: "f32",
    VT.BOOL: "bool",
    VT.STRING: "string",
    VT.ARRAY: "array",
    VT.UINT64: "u64",
    VT.INT64: "i64",
    VT.FLOAT64: "f64",
}


def plain(value):
    """A JSON-safe scalar: numpy scalars to Python, non-finite floats to Rust's spelling."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def metadata_entry(field):
    main = field.types[0]
    entry = {"key": field.name, "type": TYPE_NAMES[main]}
    if main == VT.ARRAY:
        # parts = [key length, key, value type, element type, length, elements...]
        element_type = VT(int(field.parts[3][0]))
        length = int(field.parts[4][0])
        entry["element_type"] = TYPE_NAMES[element_type]
        entry["length"] = length
        if element_type != VT.ARRAY and length > 0:
            entry["preview"] = [plain(v) for v in field.contents(slice(0, PREVIEW_LEN))]
    else:
        entry["value"] = plain(field.contents())
    return entry


def facts(path):
    reader = gguf.GGUFReader(path)
    metadata = [metadata_entry(f) for name, f in reader.fields.items() if name not in PSEUDO_FIELDS]
    arch = reader.fields.get("general.architecture")
    tensors = [
        {
            "name": t.name,
            "type": gguf.GGMLQuantizationType(t.tensor_type).name,
            "dims": [int(d) for d in t.shape],
            "data_offset": int(t.data_offset),
            "n_elements": int(t.n_elements),
            "n_bytes": int(t.n_bytes),
        }
        for t in reader.tensors
    ]
    return {
        "version": int(reader.fields["GGUF.version"].parts[0][0]),
        "alignment": int(reader.alignment),
        "data_offset": int(reader.data_offset),
        "architecture": arch.contents() if arch is not None else None,
        "tensor_count": len(tensors),
        "metadata_count": len(metadata),
        "metadata_keys": [m["key"] for m in metadata],
        "metadata": metadata,
        "tensors": tensors,
    }


def main():
    paths = sys.argv[1:]
    if not paths:
        sys.exit("usage: gguf_facts.py MODEL.gguf [MORE.gguf ...]")
    # Several files: one object keyed by path, read in one process (numpy's import is most of
    # a file's time).
    found = facts(paths[0]) if len(paths) == 1 else {path: facts(path) for path in paths}
    json.dump(found, sys.stdout, indent=1, allow_nan=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
