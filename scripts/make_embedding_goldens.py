#!/usr/bin/env python3
"""Write the micro embedding models and llama.cpp's embeddings of them (the goldens the embedding
tests hold Inferno to).

  pip install gguf numpy llama-cpp-python==0.3.36   (built as scripts/make_goldens.py says)
  python3 scripts/make_embedding_goldens.py

Model: tests/fixtures/models/qwen3-embed-micro-q8_0.gguf is tests/fixtures/models/
qwen3-micro-q8_0.gguf with Qwen3-Embedding's metadata: `qwen3.pooling_type = 3` (last token)
and an EOS (`<|endoftext|>`, id 8000 of the micro vocabulary) appended to every text.

Encoders: tests/fixtures/models/bert-micro-q8_0.gguf (`bert`: learned positions in F16, token
types, LayerNorm with biases everywhere, biased Q/K/V/O and FFN, GELU, mean pooling) and
nomic-bert-micro-q8_0.gguf (`nomic-bert`: fused QKV without biases, NeoX RoPE base 1000,
SwiGLU, CLS pooling), both 2 layers of 64 wide, 4 heads, a context of 128, and a WordPiece
vocabulary of the texts' words and single characters (`[PAD] [UNK] [CLS] [SEP] [MASK]` first,
written as llama.cpp's converter writes BERT's).
Matrices Q8_0 with a std of 0.08 (so attention is not near uniform), norms near 1, biases std 0.1.

Goldens: tests/fixtures/golden/<model>.embeddings.json holds, for each pooling
(the file's last, and mean and CLS forced through llama.cpp's `pooling_type`), each text's
token ids and its pooled vector before normalization, from llama-cpp-python's `embed`
(`embedding=True`, flash attention on as in the chat goldens and llama.cpp's CPU default, one
thread, one text per batch).
"""
import json
import re
from pathlib import Path

import gguf
from gguf import GGUFReader, GGUFValueType
from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata
import llama_cpp
from llama_cpp import Llama

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf.quants import quantize

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "tests" / "fixtures" / "models"
SOURCE = MODELS / "qwen3-micro-q8_0.gguf"
MODEL = MODELS / "qwen3-embed-micro-q8_0.gguf"
GOLDENS = REPO / "tests" / "fixtures" / "golden"
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


ENCODER_TEXTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "What is the capital of France? Paris is the capital and largest city of France.",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9, and an unknownword: xyzzy!",
    "x",
    "Inferno runs GGUF models inside a web page; nothing leaves the machine. " * 3,
]
ENCODER_EMBD, ENCODER_HEADS, ENCODER_FFN, ENCODER_LAYERS, ENCODER_CONTEXT = 64, 4, 128, 2, 128


def wordpiece_vocab():
    """Special tokens, then every single character and its `##` continuation, then the
    texts' lowercased words (a few suffixes split off), sorted."""
    chars = "abcdefghijklmnopqrstuvwxyz0123456789.,;:!?'\"-()"
    words = set()
    for text in ENCODER_TEXTS:
        for word in re.findall(r"[a-z]+", text.lower()):
            if word in ("unknownword", "xyzzy"):
                continue
            words.add(word)
            if word.endswith("s") and len(word) > 3:
                words.add(word[:-1])
                words.add("##s")
    pieces = {c for c in chars} | {"##" + c for c in chars} | words | {"##ing", "##ed", "##er"}
    # As llama.cpp's converter writes BERT's vocabulary: a word start gets "\u2581" before it, a
    # "##" continuation loses its "##".
    pieces = [p[2:] if p.startswith("##") else "\u2581" + p for p in sorted(pieces)]
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + pieces


def write_encoder(path, arch, rng):
    """A micro `bert` or `nomic-bert` file (see the module's text)."""
    nomic = arch == "nomic-bert"
    tokens = wordpiece_vocab()
    d, ff = ENCODER_EMBD, ENCODER_FFN
    writer = gguf.GGUFWriter(str(path), arch=arch)
    writer.add_name(f"{arch}-micro-synthetic")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_block_count(ENCODER_LAYERS)
    writer.add_context_length(ENCODER_CONTEXT)
    writer.add_embedding_length(d)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(ENCODER_HEADS)
    writer.add_layer_norm_eps(1e-12)
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.CLS if nomic else gguf.PoolingType.MEAN)
    if nomic:
        writer.add_rope_freq_base(1000.0)
    writer.add_tokenizer_model("bert")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t.startswith("[") else 1 for t in tokens])
    writer.add_token_type_count(2)
    for add, name in [
        (writer.add_bos_token_id, "[CLS]"),
        (writer.add_sep_token_id, "[SEP]"),
        (writer.add_unk_token_id, "[UNK]"),
        (writer.add_pad_token_id, "[PAD]"),
        (writer.add_mask_token_id, "[MASK]"),
    ]:
        add(tokens.index(name))

    def matrix(name, rows, cols):
        x = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(0.08)
        writer.add_tensor(name, quantize(x, Q.Q8_0), raw_dtype=Q.Q8_0)

    def vector(name, n, mean, std):
        writer.add_tensor(name, (mean + std * rng.standard_normal(n, dtype=np.float32)).astype(np.float32))

    def layer_norm(name):
        vector(name + ".weight", d, 1.0, 0.1)
        vector(name + ".bias", d, 0.0, 0.1)

    matrix("token_embd.weight", len(tokens), d)
    types = rng.standard_normal((2, d), dtype=np.float32) * np.float32(0.5)
    writer.add_tensor("token_types.weight", types)
    if not nomic:
        positions = rng.standard_normal((ENCODER_CONTEXT, d), dtype=np.float32) * np.float32(0.5)
        writer.add_tensor("position_embd.weight", positions.astype(np.float16))
    layer_norm("token_embd_norm")
    for i in range(ENCODER_LAYERS):
        p = f"blk.{i}."
        if nomic:
            matrix(p + "attn_qkv.weight", 3 * d, d)
        else:
            for part in ("q", "k", "v"):
                matrix(p + f"attn_{part}.weight", d, d)
                vector(p + f"attn_{part}.bias", d, 0.0, 0.1)
        matrix(p + "attn_output.weight", d, d)
        if not nomic:
            vector(p + "attn_output.bias", d, 0.0, 0.1)
        layer_norm(p + "attn_output_norm")
        if nomic:
            matrix(p + "ffn_gate.weight", ff, d)
        matrix(p + "ffn_up.weight", ff, d)
        matrix(p + "ffn_down.weight", d, ff)
        if not nomic:
            vector(p + "ffn_up.bias", ff, 0.0, 0.1)
            vector(p + "ffn_down.bias", d, 0.0, 0.1)
        layer_norm(p + "layer_output_norm")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def embeddings_of(model, texts, poolings):
    """llama.cpp's unnormalized vectors of `texts` under each pooling."""
    results = {}
    for name, pooling in poolings.items():
        llm = Llama(
            model_path=str(model),
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
        for text in texts:
            tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
            vector = llm.embed(text, normalize=False)
            rows.append({"text": text, "tokens": tokens, "embedding": [float(v) for v in vector]})
        results[name] = rows
        del llm
    golden = GOLDENS / model.name.replace(".gguf", ".embeddings.json")
    golden.write_text(
        json.dumps(
            {
                "model": model.name,
                "oracle": "llama-cpp-python 0.3.36 (llama.cpp 0c1e570), embed(normalize=False), AVX2 build",
                "poolings": results,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {model} and {golden}")


def main():
    write_model()
    embeddings_of(MODEL, TEXTS, POOLINGS)
    for seed, arch in enumerate(["bert", "nomic-bert"]):
        path = MODELS / f"{arch}-micro-q8_0.gguf"
        write_encoder(path, arch, np.random.default_rng(4000 + seed))
        embeddings_of(path, ENCODER_TEXTS, {"mean": POOLINGS["mean"], "cls": POOLINGS["cls"]})


if __name__ == "__main__":
    main()
