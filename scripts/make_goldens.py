#!/usr/bin/env python3
"""Write llama.cpp's reference outputs ("goldens") for a GGUF file, in the format of
tests/fixtures/golden/README.md: for each prompt, llama.cpp's token ids, 24 greedy steps, and
the 20 highest raw logits at steps 0-7, the prompt in one batch and then one token at a time.

  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \\
      -DGGML_AVX512=OFF" pip install llama-cpp-python==0.3.36
  python3 scripts/make_goldens.py MODEL.gguf OUT.json [N_CTX] [--vulkan] [--no-flash-attn]
      [--cache-type-k f16|q8_0|f32] [--cache-type-v f16|q8_0|f32]

With --vulkan every layer runs on llama.cpp's Vulkan backend (GGML_VK_VISIBLE_DEVICES=0 lets
it take lavapipe): the GPU oracle, for a llama-cpp-python built with -DGGML_VULKAN=ON from
the same sdist (Debian 12 needs the patch scripts/build-llama-vulkan.sh applies). Not a
golden the tests read: where a GPU engine lands, beside ours on the same adapter.

With --no-flash-attn llama.cpp runs its other attention (the softmax in f32, then the values
times it with f32 sums): a second reference for `precision: 'fast'`, whose sums are f32 too.

--cache-type-k and --cache-type-v keep llama.cpp's KV cache as that type (its -ctk/-ctv; F16
by default): the reference for Inferno's `cache_type_k`/`cache_type_v`.

The oracle is the llama.cpp vendored in llama-cpp-python 0.3.36 (commit 0c1e570, the same one
the shared goldens come from), built for AVX2 without AVX-512 (the lane orders our kernels
reproduce), run on one thread with flash attention on (llama.cpp's CPU default). The prompts
are those of the committed Qwen3 goldens (tests/fixtures/golden/qwen3-micro-q8_0.json) plus
`chat_specials`: special tokens with whitespace around them (Phi-3's by-name RSTRIP rule).
"""
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from llama_cpp import Llama

REPO = Path(__file__).resolve().parent.parent
PROMPTS_FROM = REPO / "tests" / "fixtures" / "golden" / "qwen3-micro-q8_0.json"
N_PREDICT, TOP_STEPS, TOP_K = 24, 8, 20
# ggml's ids of the KV cache types (ggml.h's enum ggml_type).
GGML_TYPES = {"f32": 0, "f16": 1, "q8_0": 8}
EXTRA_PROMPTS = {
    "chat_specials": "<|im_start|>user\n Hi <tool_call>  x</tool_call>\n<|im_end|> \n<|user|>\n ok</s>  <|end|>\n<|im_start|>assistant\n",
}


def metadata_value(reader, key):
    field = reader.fields.get(key)
    if field is None:
        return None
    return field.parts[field.data[0]][0].item()


def top(row, k):
    ids = np.argsort(-row, kind="stable")[:k]
    logsumexp = float(np.log(np.sum(np.exp(row.astype(np.float64) - row.max()))) + row.max())
    return [
        {"id": int(i), "logit": float(row[i]), "prob": float(np.exp(float(row[i]) - logsumexp))}
        for i in ids
    ], logsumexp


def main():
    vulkan = "--vulkan" in sys.argv
    # llama.cpp's other CPU attention (no flash attention: softmax in f32, then V times it with
    # f32 sums), a second reference for Inferno's `precision: 'fast'`.
    flash = "--no-flash-attn" not in sys.argv
    argv = sys.argv[1:]
    cache_types = {"keys": "f16", "values": "f16"}
    for option, part in (("--cache-type-k", "keys"), ("--cache-type-v", "values")):
        if option in argv:
            at = argv.index(option)
            cache_types[part] = argv[at + 1]
            del argv[at : at + 2]
    args = [a for a in argv if a not in ("--vulkan", "--no-flash-attn")]
    model_path, out_path = Path(args[0]), Path(args[1])
    # The context changes results only where the model depends on it (LongRoPE's long
    # factors past the original context).
    n_ctx = int(args[2]) if len(args) > 2 else 512
    reader = GGUFReader(str(model_path))
    add_bos = bool(metadata_value(reader, "tokenizer.ggml.add_bos_token") or False)
    llm = Llama(
        model_path=str(model_path),
        n_ctx=n_ctx,
        n_batch=512,
        n_ubatch=512,
        n_threads=1,
        n_threads_batch=1,
        flash_attn=flash,
        type_k=GGML_TYPES[cache_types["keys"]],
        type_v=GGML_TYPES[cache_types["values"]],
        n_gpu_layers=-1 if vulkan else 0,
        verbose=False,
    )
    prompts = json.loads(PROMPTS_FROM.read_text())["prompts"]
    prompts.update({name: {"prompt": text} for name, text in EXTRA_PROMPTS.items()})
    out_prompts = {}
    for name, source in prompts.items():
        text = source["prompt"]
        ids = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)
        ids_plain = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=False)
        llm.reset()
        llm.eval(ids)
        steps, generated = [], []
        for step in range(N_PREDICT):
            # Only the batch's last position has logits (llama-cpp-python keeps no scores
            # unless logits_all, which would change how llama.cpp batches the prompt).
            row = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float32)
            if step < TOP_STEPS:
                best, logsumexp = top(row, TOP_K)
                steps.append({"step": step, "top": best, "logsumexp": logsumexp, "logit_std": float(row.std())})
            token = int(np.argmax(row))  # ties: the lowest id
            generated.append(token)
            llm.eval([token])
        pieces = [llm.detokenize([t]).decode("utf-8", errors="replace") for t in generated]
        eog = [i for i, t in enumerate(generated) if t == llm.token_eos()]
        out_prompts[name] = {
            "prompt": text,
            "prompt_ids": ids,
            "prompt_ids_without_special": ids_plain,
            "generated_ids": generated,
            "generated_pieces": pieces,
            "generated_text": "".join(pieces),
            "eog_steps": eog,
            "steps": steps,
        }
        print(f"{name}: {len(ids)} prompt tokens, greedy {generated[:8]}...")
    data = model_path.read_bytes()
    golden = {
        "model": model_path.stem,
        "file": model_path.name,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "settings": {
            "n_predict": N_PREDICT,
            "top_steps": TOP_STEPS,
            "top_k": TOP_K,
            "sampling": "greedy argmax over raw logits (ties -> lowest id); does not stop at end-of-generation tokens",
            "prompt_processing": "whole prompt in one batch; logits of the last position",
            "n_ctx": n_ctx,
            "oracle": "llama-cpp-python 0.3.36 (llama.cpp 0c1e570), "
            + ("every layer on its Vulkan backend" if vulkan else "AVX2 without AVX-512, 1 thread")
            + (", flash attention on" if flash else ", flash attention off")
            + ("" if cache_types == {"keys": "f16", "values": "f16"} else
               f", KV cache keys {cache_types['keys']}, values {cache_types['values']}"),
            "cache_types": cache_types,
        },
        "n_vocab": llm.n_vocab(),
        "add_bos": add_bos,
        "bos_id": llm.token_bos(),
        "eos_id": llm.token_eos(),
        "prompts": out_prompts,
    }
    out_path.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    print("wrote", out_path)


if __name__ == "__main__":
    main()
