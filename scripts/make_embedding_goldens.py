#!/usr/bin/env python3
"""Write the micro embedding model and llama.cpp's embeddings of it (the goldens the embedding
tests hold Inferno to).

  pip install gguf numpy llama-cpp-python==0.3.36   (built as scripts/make_goldens.py says)
  python3 scripts/make_embedding_goldens.py

Model: tests/fixtures/models/qwen3-embed-micro-q8_0.gguf is tests/fixtures/models/
qwen3-micro-q8_0.gguf with Qwen3-Embedding's metadata: `qwen3.pooling_type = 3` (last token)
and an EOS (`<|endoftext|>`, id 8000 of the micro vocabulary) appended to every text.

Goldens: tests/fixtures/golden/qwen3-embed-micro-q8_0.embeddings.json holds, for each pooling
(the file's last, and mean and CLS forced through llama.cpp's `pooling_type`), each text's
token ids and its pooled vector before normalization, from llama-cpp-python's `embed`
(`embedding=True`, flash attention on as in the chat goldens and llama.cpp's CPU default, one
thread, one text per batch).
"""
import json
from pathlib import Path

import gguf
from gguf import GGUFReader, GGUFValueType
from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata
import llama_cpp
from llama_cpp import Llama

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "tests" / "fixtures" / "models" / "qwen3-micro-q8_0.gguf"
MODEL = REPO / "tests" / "fixtures" / "models" / "qwen3-embed-micro-q8_0.gguf"
GOLDEN = REPO / "tests" / "fixtures" / "golden" / "qwen3-embed-micro-q8_0.embeddings.json"
TEXTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "What is the capital of France? Paris is the capital and largest city of France.",
    "<|im_start|>user is plain text here",
    "x",
    "Inferno runs GGUF models inside a web page; nothing leaves the machine. " * 3,
]
POOLINGS = {
    "last": llama_cpp.LLAMA_POOLING_TYPE_LAST,
    "mean": llama_cpp.LLAMA_POOLING_TYPE_MEAN,
    "cls": llama_cpp.LLAMA_POOLING_TYPE_CLS,
}


def write_model():
    reader = GGUFReader(str(SOURCE))
    arch = reader.fields["general.architecture"]
    arch = bytes(arch.parts[arch.data[0]]).decode()
    writer = gguf.GGUFWriter(str(MODEL), arch=arch, endianess=reader.endianess)
    new = {
        "general.name": MetadataDetails(GGUFValueType.STRING, "qwen3-embed-micro-synthetic"),
        f"{arch}.pooling_type": MetadataDetails(GGUFValueType.UINT32, 3),
        "tokenizer.ggml.eos_token_id": MetadataDetails(GGUFValueType.UINT32, 8000),
        "tokenizer.ggml.add_eos_token": MetadataDetails(GGUFValueType.BOOL, True),
    }
    copy_with_new_metadata(reader, writer, new, [])


def main():
    write_model()
    results = {}
    for name, pooling in POOLINGS.items():
        llm = Llama(
            model_path=str(MODEL),
            embedding=True,
            pooling_type=pooling,
            n_ctx=512,
            n_batch=512,
            n_ubatch=512,
            n_seq_max=1,
            flash_attn=True,
            n_threads=1,
            n_threads_batch=1,
            verbose=False,
        )
        rows = []
        for text in TEXTS:
            tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
            vector = llm.embed(text, normalize=False)
            rows.append({"text": text, "tokens": tokens, "embedding": [float(v) for v in vector]})
        results[name] = rows
        del llm
    GOLDEN.write_text(
        json.dumps(
            {
                "model": MODEL.name,
                "oracle": "llama-cpp-python 0.3.36 (llama.cpp 0c1e570), embed(normalize=False), AVX2 build",
                "poolings": results,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {MODEL} and {GOLDEN}")


if __name__ == "__main__":
    main()
