#!/usr/bin/env python3
"""Write the split-model fixtures: tests/fixtures/models/qwen3-micro-q8_0.gguf cut into shards,
by gguf-py and by llama.cpp's own llama-gguf-split (from the llama-cpp-python 0.3.36 sdist, the
llama.cpp of the goldens), into tests/fixtures/models/split/.

  pip install gguf
  python3 scripts/make_split_fixtures.py [PATH/TO/llama-gguf-split]

gguf-py: `GGUFWriter(split_max_tensors=10)`: 3 shards of 10, 10 and 5 tensors, every one with
split.no/count/tensors.count, the model's metadata in the first only.
llama-gguf-split (built from the sdist: cmake -B build -DGGML_NATIVE=OFF && cmake --build build
--target llama-gguf-split): `--split --split-max-tensors 12`: 3 shards of 12, 12 and 1.
"""
import subprocess
import sys
from pathlib import Path

import gguf
from gguf import GGUFReader
from gguf.scripts.gguf_new_metadata import copy_with_new_metadata

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "tests" / "fixtures" / "models" / "qwen3-micro-q8_0.gguf"
OUT = REPO / "tests" / "fixtures" / "models" / "split"


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(OUT / "qwen3-micro-q8_0-gguf-py.gguf"), arch="qwen3", split_max_tensors=10)
    copy_with_new_metadata(GGUFReader(str(SOURCE)), writer, {}, [])
    if len(sys.argv) > 1:
        prefix = OUT / "qwen3-micro-q8_0-llama-split"
        subprocess.run([sys.argv[1], "--split", "--split-max-tensors", "12", str(SOURCE), str(prefix)], check=True)
    for path in sorted(OUT.glob("*.gguf")):
        print(path.name, path.stat().st_size)


if __name__ == "__main__":
    main()
