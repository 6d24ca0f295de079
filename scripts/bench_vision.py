#!/usr/bin/env python3
"""The vision encoder's speed beside llama.cpp's mtmd, natively, in one run on one machine.

  python3 scripts/bench_vision.py [--runs 3] [--threads 1] [--projector gemma3|gemma4v|qwen3vl|qwen25vl]

For a SigLIP-base-shaped Gemma 3 projector (93M parameters: scripts/make_micro_mmproj.py
--shape base, random weights), or Gemma 4's encoder at the same size (--projector gemma4v: a 512
x 512 picture is 528 x 528 for it, 1,089 patches), or Qwen's (--projector qwen3vl: both frames'
kernels, 2 x 2 blocks, resized positions, fused Q/K/V, vision M-RoPE, the merger; 1,024 patches),
or Qwen2.5-VL's (--projector qwen25vl: RMS norms, gated SiLU feed-forward, window attention in
windows of 3 x 3 blocks with full attention every fourth layer; 1,024 patches),
in F16 and in Q8_0, on a 512 x 512 picture,
it times the picture's
embeddings (fitting, the ViT, the projector) with llama.cpp's mtmd (`mtmd_encode_chunk`, CPU,
flash attention on as its default for the CPU) and with `inferno bench MMPROJ --image PICTURE`,
each the median of --runs after one warm-up, and prints both and their ratio (mtmd's time over
Inferno's: above 1, Inferno is faster).

Needs llama-cpp-python built with libmtmd (LLAVA_BUILD=ON; see scripts/make_vision_goldens.py),
Pillow, gguf and numpy, and Gemma 3 270M in .cache/models (mtmd tokenizes with a text model's
vocabulary; its width, 640, is the projector's output).
"""
import argparse
import ctypes
import json
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = ROOT / ".cache" / "models"
TEXT_MODEL = MODELS / "gemma3-270m-q4_k_m.gguf"


def ensure_files(projector):
    files = {}
    for weight_type in ("f16", "q8_0"):
        path = MODELS / f"siglip-base-{projector}-{weight_type}.mmproj.gguf"
        if not path.exists():
            command = [sys.executable, str(ROOT / "scripts/make_micro_mmproj.py"), str(path), "--shape", "base"]
            subprocess.run(command + ["--type", weight_type, "--projector", projector], check=True)
        files[weight_type] = path
    picture = MODELS / "bench-512.png"
    if not picture.exists():
        y, x = np.mgrid[0:512, 0:512]
        noise = np.random.default_rng(3).integers(0, 32, (512, 512, 3), dtype=np.uint8)
        rgb = np.stack([x * 255 // 511, y * 255 // 511, (x + y) * 3 % 256], -1).astype(np.uint8) ^ noise
        Image.fromarray(rgb).save(picture)
    return files, picture


def mtmd_ms(mmproj, picture, runs, threads):
    import llama_cpp
    from llama_cpp import mtmd_cpp as mtmd

    model_params = llama_cpp.llama_model_default_params()
    model_params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(TEXT_MODEL).encode(), model_params)
    params = mtmd.mtmd_context_params_default()
    params.use_gpu = False
    params.n_threads = threads
    params.print_timings = False
    ctx = mtmd.mtmd_init_from_file(str(mmproj).encode(), model, params)
    if not ctx:
        sys.exit(f"mtmd could not load {mmproj}")
    rgb = np.asarray(Image.open(picture).convert("RGB"))
    height, width, _ = rgb.shape
    data = rgb.tobytes()

    def once():
        bitmap = mtmd.mtmd_bitmap_init(width, height, (ctypes.c_ubyte * len(data)).from_buffer_copy(data))
        chunks = mtmd.mtmd_input_chunks_init()
        text = b"<__media__>"
        text_input = mtmd.mtmd_input_text(text, len(text), False, True)
        bitmaps = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
        if mtmd.mtmd_tokenize(ctx, chunks, ctypes.byref(text_input), bitmaps, 1) != 0:
            sys.exit("mtmd_tokenize failed")
        ms = None
        for i in range(mtmd.mtmd_input_chunks_size(chunks)):
            chunk = mtmd.mtmd_input_chunks_get(chunks, i)
            if mtmd.mtmd_input_chunk_get_type(chunk) != mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
                started = time.perf_counter()
                if mtmd.mtmd_encode_chunk(ctx, chunk) != 0:
                    sys.exit("mtmd_encode_chunk failed")
                ms = (time.perf_counter() - started) * 1e3
        mtmd.mtmd_input_chunks_free(chunks)
        mtmd.mtmd_bitmap_free(bitmap)
        return ms

    samples = [once() for _ in range(runs + 1)][1:]
    mtmd.mtmd_free(ctx)
    llama_cpp.llama_model_free(model)
    return statistics.median(samples)


def inferno_result(mmproj, picture, runs, threads):
    command = ["cargo", "run", "--release", "--quiet", "--bin", "inferno", "--", "bench", str(mmproj)]
    command += ["--image", str(picture), "--runs", str(runs), "--threads", str(threads), "--json"]
    out = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--projector", choices=["gemma3", "gemma4v", "qwen3vl", "qwen25vl"], default="gemma3")
    args = parser.parse_args()
    if not TEXT_MODEL.exists():
        sys.exit(f"{TEXT_MODEL} is missing: ./build.sh models fetches it")
    files, picture = ensure_files(args.projector)
    family = {"gemma3": "Gemma 3 projector", "gemma4v": "Gemma 4 encoder", "qwen3vl": "Qwen3.5 encoder", "qwen25vl": "Qwen2.5-VL encoder"}[args.projector]
    print(f"SigLIP-base-shaped {family}, 512 x 512 picture, {args.threads} thread(s), median of {args.runs}")
    print(f"{'matrices':<9} {'mtmd ms':>9} {'inferno ms':>11} {'ratio':>7}  work memory")
    for weight_type, mmproj in files.items():
        reference = mtmd_ms(mmproj, picture, args.runs, args.threads)
        ours = inferno_result(mmproj, picture, args.runs, args.threads)
        ratio = reference / ours["encode_ms"]
        work = ours["work_bytes"] / (1 << 20)
        print(f"{weight_type:<9} {reference:>9.0f} {ours['encode_ms']:>11.0f} {ratio:>6.2f}x  {work:.0f} MiB")


if __name__ == "__main__":
    main()
