#!/usr/bin/env python3
"""Write the test pictures and llama.cpp mtmd's reference outputs for them: the goldens the
image encoder and image prompts are held to.

  CMAKE_ARGS="... -DLLAVA_BUILD=ON" pip install llama_cpp_python-0.3.36.tar.gz  (as make_goldens.py,
      plus LLAVA_BUILD for libmtmd and its bindings, llama_cpp/mtmd_cpp.py)
  pip install pillow gguf numpy
  python3 scripts/make_vision_goldens.py [GEMMA3_270M.gguf]

Pictures (tests/fixtures/images/, PNG so that every decoder reads the same pixels): one at the
projector's own size, one wider and one taller than it, and a small one that is scaled up, so
that resizing, the black bars and both scale directions are all exercised. The small one is also
written as raw RGB (`.rgb`) for the browser's test, which decodes no PNG.

Goldens (tests/fixtures/golden/clip-gemma3-micro.images.json and its .f32 files), for the
micro projector tests/fixtures/models/clip-gemma3-micro.gguf:
- `preprocessed_sha256`: Pillow's bilinear resize to fit 224 x 224, centred on black, as
  mtmd's fixed-size preprocessor does it (mtmd's resizer is a port of Pillow's; it does not
  hand its pixels out, so Pillow stands in, and the embeddings check mtmd's own);
- `embeddings`: mtmd's image embeddings (`mtmd_encode_chunk`, then `mtmd_get_output_embd`),
  tokens x 640 little-endian f32, with the encoder's attention as llama.cpp runs it by default
  on the CPU (flash attention: K and V in f16) and, in `embeddings_f32_attention`, without it;
- `chat` (when Gemma 3 270M is given, as `./build.sh models` fetches it): a user turn with the
  picture and a question through mtmd's own tokenizer and `mtmd_helper_eval_chunks` (the image
  block attended non-causally, as mtmd does for Gemma 3), then 16 greedy steps with the 20
  highest logits at steps 0-3. 270M has Gemma 3's vocabulary and a 640-wide embedding, so the
  micro projector fits it; it was never trained on images, so only the numbers mean anything.

For the micro SmolVLM projector tests/fixtures/models/clip-idefics3-micro.gguf, with the micro
SmolVLM language model tests/fixtures/models/llama-micro-smolvlm.gguf (whose picture markers mtmd
looks up), tests/fixtures/golden/clip-idefics3-micro.images.json holds per picture:
- `grid` and `tiles`: mtmd's idefics3 preprocessing, in Pillow's Lanczos (as above, mtmd's is a
  port of it): the longest side to clip.vision.preproc_image_size (128; the other side in
  proportion, made even), then both sides up to whole tiles of 64, cut into tiles row by row, and
  the whole picture squeezed to one tile; a sha256 per tile, in prompt order (the tiles, then the
  whole picture, as mtmd places them for idefics3);
- `chunks`: mtmd's tokens for the picture alone (`<__media__>`), text and image chunks in order;
- `embeddings`: every image chunk's embeddings in that order (flash attention, as above);
- `chat`: as above, with the micro SmolVLM model and a ChatML prompt, the picture's rows causal.

For the micro LFM2-VL projector tests/fixtures/models/clip-lfm2-micro.gguf, with the micro LFM2-VL
language model tests/fixtures/models/lfm2-vl-micro-q8_0.gguf, clip-lfm2-micro.images.json holds
the same per picture, for mtmd's lfm2 preprocessing (Pillow's bilinear): a picture whose sides,
rounded to multiples of 16, make at most twice 256 rows of output is resized whole to its own
aspect (sides multiples of 16, between 64 and 256 rows: Qwen-VL's "smart resize"); a larger one
(the committed wide-480x360.png) is fitted on black to a grid of 512 px tiles (the grid of 2 to 10
tiles closest to its aspect) and cut, with the whole picture resized as above for a thumbnail
after the tiles. Each square's embeddings are kept whole for the small pictures and their first
16 rows (`rows_kept`) for the tiled one.

For the micro Gemma 4 projector tests/fixtures/models/clip-gemma4v-micro.gguf, with the micro
Gemma 4 language model tests/fixtures/models/gemma4-vl-micro-q8_0.gguf, clip-gemma4v-micro.images.json
holds the same per picture for mtmd's dyn_size preprocessing: the picture's sides rounded to
multiples of 24 (patch 8 x pool 3) and scaled, keeping the aspect, to between 70 and 1120 rows of
output (the same "smart resize" as LFM2-VL's), the picture fitted on black to that size with
Pillow's bicubic filter; one square per picture, every row kept. Its chat golden attends the
picture's rows both ways (mtmd does so for a Gemma 4 whose width is neither E2B's nor E4B's).

For the micro Qwen3.5 projector tests/fixtures/models/clip-qwen3vl-micro.gguf (qwen3vl_merger),
with the micro Qwen3.5 language model tests/fixtures/models/qwen35-micro-q8_0.gguf,
clip-qwen3vl-micro.images.json holds the same, mtmd's dyn_size preprocessing with Qwen-VL's
numbers (sides multiples of 16, 8 to 4096 rows; bicubic, fitted on black), the wide picture again
under limits of 16 to 64 rows (and a chat golden under them, for the page's setting), and a chat golden whose `n_past` is M-RoPE's: the picture's rows
take one position each along their rows and columns, so it advances by the longer side of the
merged grid, not by the rows. clip-qwen3vl-deepstack-micro.images.json holds the same for the micro
Qwen3-VL projector (both layers deepstack layers: rows of 3 x 256) with the micro Qwen3-VL
language model tests/fixtures/models/qwen3vl-micro-q8_0.gguf, for two pictures.

For the micro Qwen2-VL and Qwen2.5-VL projectors tests/fixtures/models/clip-qwen2vl-micro.gguf and
clip-qwen25vl-micro.gguf (14-pixel patches: sides multiples of 28; Qwen2.5-VL's windows of 4 x 4
blocks), with the micro Qwen2-VL language model tests/fixtures/models/qwen2vl-micro-q8_0.gguf
(sectioned M-RoPE), clip-qwen2vl-micro.images.json and clip-qwen25vl-micro.images.json hold the
same as the Qwen3.5 projector's, without the limits (`--only qwen2vl`, `--only qwen25vl`).

One thread, AVX2 build of the llama.cpp vendored in llama-cpp-python 0.3.36, as the text goldens.
"""
import ctypes
import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np
from PIL import Image

import llama_cpp
from llama_cpp import Llama
from llama_cpp import mtmd_cpp as mtmd

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
MMPROJ = FIXTURES / "models" / "clip-gemma3-micro.gguf"
GOLDEN = FIXTURES / "golden"
IMAGE_SIZE = 224
CHAT_PICTURE = "stripes-300x200"
RAW_PICTURE = "noise-61x47"
CHAT_PROMPT = "<start_of_turn>user\n<__media__>What is in this picture?<end_of_turn>\n<start_of_turn>model\n"
SMOLVLM_MMPROJ = FIXTURES / "models" / "clip-idefics3-micro.gguf"
SMOLVLM_MODEL = FIXTURES / "models" / "llama-micro-smolvlm.gguf"
SMOLVLM_TILE, SMOLVLM_LONGEST_EDGE, SMOLVLM_WIDTH = 64, 128, 256
LFM2_MMPROJ = FIXTURES / "models" / "clip-lfm2-micro.gguf"
LFM2_MODEL = FIXTURES / "models" / "lfm2-vl-micro-q8_0.gguf"
# patch 8 x merge 2; 64 to 256 rows of output; LFM2-VL's tiles and their counts.
LFM2_PATCH, LFM2_ALIGN, LFM2_MIN_PIXELS, LFM2_MAX_PIXELS = 8, 16, 64 * 16 * 16, 256 * 16 * 16
LFM2_TILE, LFM2_MIN_TILES, LFM2_MAX_TILES, LFM2_WIDTH = 512, 2, 10, 256
LFM2_TILED_PICTURE, LFM2_ROWS_KEPT = "wide-480x360", 16
LFM2_PROMPT = "<|im_start|>user\n<__media__>What is in this picture?<|im_end|>\n<|im_start|>assistant\n"
SMOLVLM_PROMPT = "<|im_start|>user\n<__media__>What is in this picture?<|im_end|>\n<|im_start|>assistant\n"
GEMMA4V_MMPROJ = FIXTURES / "models" / "clip-gemma4v-micro.gguf"
GEMMA4V_MODEL = FIXTURES / "models" / "gemma4-vl-micro-q8_0.gguf"
# patch 8 x pool 3; 70 to 1120 rows of output.
GEMMA4V_ALIGN, GEMMA4V_MIN_PIXELS, GEMMA4V_MAX_PIXELS, GEMMA4V_WIDTH = 24, 70 * 24 * 24, 1120 * 24 * 24, 256
GEMMA4V_LIMITS = (40, 80)
GEMMA4V_PROMPT = "<|im_start|>user\n<__media__>What is in this picture?<|im_end|>\n<|im_start|>assistant\n"
QWEN3VL_MMPROJ = FIXTURES / "models" / "clip-qwen3vl-micro.gguf"
QWEN3VL_MODEL = FIXTURES / "models" / "qwen35-micro-q8_0.gguf"
# patch 8 x merge 2; 8 to 4096 rows of output.
QWEN3VL_ALIGN, QWEN3VL_TOKENS, QWEN3VL_WIDTH, QWEN3VL_LIMITS = 16, (8, 4096), 256, (16, 64)
QWEN3VL_DEEPSTACK_MMPROJ = FIXTURES / "models" / "clip-qwen3vl-deepstack-micro.gguf"
QWEN3VL_DEEPSTACK_MODEL = FIXTURES / "models" / "qwen3vl-micro-q8_0.gguf"
QWEN2VL_MODEL = FIXTURES / "models" / "qwen2vl-micro-q8_0.gguf"
# patch 14 x merge 2.
QWEN2VL_ALIGN = 28
N_PREDICT, TOP_STEPS, TOP_K = 16, 4, 20


def pictures():
    """Deterministic test pictures: smooth gradients, hard edges and noise, none symmetric."""
    rng = np.random.default_rng(11)
    out = {}
    y, x = np.mgrid[0:224, 0:224].astype(np.float64)
    out["gradient-224x224"] = np.stack(
        [x / 223 * 255, y / 223 * 255, 128 + 100 * np.sin(x / 17) * np.cos(y / 29)], axis=-1
    )
    y, x = np.mgrid[0:200, 0:300].astype(np.float64)
    stripes = np.stack([((x // 12) % 2) * 230, ((y // 20) % 3) * 110, (x + 2 * y) % 256], axis=-1)
    stripes[60:140, 200:260] = [250, 40, 20]  # a red block off the centre
    out["stripes-300x200"] = stripes
    y, x = np.mgrid[0:250, 0:90].astype(np.float64)
    out["tower-90x250"] = np.stack([255 - y, np.full_like(x, 90) + 60 * (x > 45), x * 2.5], axis=-1)
    out["noise-61x47"] = rng.integers(0, 256, size=(47, 61, 3))
    return {name: np.clip(np.rint(a), 0, 255).astype(np.uint8) for name, a in out.items()}


def fit_on_black(rgb):
    """mtmd's fixed-size preprocessing of Gemma 3: scale to fit (sides rounded up, PAD_CEIL),
    Pillow's bilinear filter, centred on black."""
    h, w, _ = rgb.shape
    if (w, h) == (IMAGE_SIZE, IMAGE_SIZE):
        return rgb
    # mtmd computes the scale and the new sides in f32.
    scale = min(np.float32(IMAGE_SIZE) / np.float32(w), np.float32(IMAGE_SIZE) / np.float32(h))
    nw = min(int(np.ceil(np.float32(w) * scale)), IMAGE_SIZE)
    nh = min(int(np.ceil(np.float32(h) * scale)), IMAGE_SIZE)
    resized = np.asarray(Image.fromarray(rgb).resize((nw, nh), Image.BILINEAR))
    canvas = np.zeros((IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    ox, oy = (IMAGE_SIZE - nw) // 2, (IMAGE_SIZE - nh) // 2
    canvas[oy : oy + nh, ox : ox + nw] = resized
    return canvas


def idefics3_tiles(rgb):
    """mtmd's idefics3 preprocessing (mtmd_image_preprocessor_idefics3): the tiles row by row,
    then the whole picture, and the grid (columns, rows)."""
    h, w, _ = rgb.shape

    def resize(image, size):
        return image if image.size == size else image.resize(size, Image.LANCZOS)

    aspect = w / h
    if w >= h:
        size = (SMOLVLM_LONGEST_EDGE, int(SMOLVLM_LONGEST_EDGE / aspect))
        size = (size[0], size[1] + size[1] % 2)
    else:
        size = (int(SMOLVLM_LONGEST_EDGE * aspect), SMOLVLM_LONGEST_EDGE)
        size = (size[0] + size[0] % 2, size[1])
    cols, rows = (-(-size[0] // SMOLVLM_TILE), -(-size[1] // SMOLVLM_TILE))
    refined = resize(resize(Image.fromarray(rgb), size), (cols * SMOLVLM_TILE, rows * SMOLVLM_TILE))
    tiles = [
        refined.crop((x * SMOLVLM_TILE, y * SMOLVLM_TILE, (x + 1) * SMOLVLM_TILE, (y + 1) * SMOLVLM_TILE))
        for y in range(rows)
        for x in range(cols)
    ]
    tiles.append(resize(refined, (SMOLVLM_TILE, SMOLVLM_TILE)))
    return [np.asarray(t) for t in tiles], (cols, rows)


def c_round(x):
    """C's round(): halves away from zero."""
    x = float(x)
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def smart_size(w, h, align=LFM2_ALIGN, min_pixels=LFM2_MIN_PIXELS, max_pixels=LFM2_MAX_PIXELS):
    """mtmd's calc_size_preserved_ratio, its float arithmetic in float32."""
    f32, a = np.float32, np.float32(align)
    w_bar = max(align, c_round(f32(w) / a) * align)
    h_bar = max(align, c_round(f32(h) / a) * align)
    if h_bar * w_bar > max_pixels:
        beta = np.sqrt(f32(h) * f32(w) / f32(max_pixels))
        h_bar = max(align, math.floor((f32(h) / beta) / a) * align)
        w_bar = max(align, math.floor((f32(w) / beta) / a) * align)
    elif h_bar * w_bar < min_pixels:
        beta = np.sqrt(f32(min_pixels) / (f32(h) * f32(w)))
        h_bar = math.ceil((f32(h) * beta) / a) * align
        w_bar = math.ceil((f32(w) * beta) / a) * align
    return w_bar, h_bar


def lfm2_size(w, h):
    return smart_size(w, h)


def lfm2_grid(w, h):
    """mtmd's lfm2 tiling: None below twice the most pixels, else the grid (columns, rows)."""
    # nearbyint of a double: halves to even, as Python's round.
    h_bar = max(LFM2_PATCH, round(float(np.float32(h)) / LFM2_ALIGN) * LFM2_ALIGN)
    w_bar = max(LFM2_PATCH, round(float(np.float32(w)) / LFM2_ALIGN) * LFM2_ALIGN)
    if float(h_bar) * float(w_bar) <= float(LFM2_MAX_PIXELS) * 2.0:
        return None
    ratios = []
    for n in range(LFM2_MIN_TILES, LFM2_MAX_TILES + 1):
        for cols in range(1, n + 1):
            for rows in range(1, n + 1):
                if LFM2_MIN_TILES <= cols * rows <= LFM2_MAX_TILES and (cols, rows) not in ratios:
                    ratios.append((cols, rows))
    ratios.sort(key=lambda r: r[0] * r[1])
    aspect, area = np.float32(w) / np.float32(h), np.float32(w * h)
    best, best_diff = (1, 1), np.float32(np.inf)
    for cols, rows in ratios:
        diff = abs(aspect - np.float32(cols) / np.float32(rows))
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and area > np.float32(0.5) * np.float32(LFM2_TILE * LFM2_TILE * cols * rows):
            best = (cols, rows)
    return best


def gemma4v_square(rgb, image_tokens=(70, 1120), align=GEMMA4V_ALIGN):
    """mtmd's dyn_size preprocessing (gemma4v's, and Qwen-VL's with its own align and limits):
    the smart size, the picture fitted on black to it (PAD_CEIL) with Pillow's bicubic filter."""
    h, w, _ = rgb.shape
    low, high = (t * align * align for t in image_tokens)
    size = smart_size(w, h, align, low, high)
    if size == (w, h):
        return rgb
    return fit_on_black_to(Image.fromarray(rgb), *size, Image.BICUBIC)


def fit_on_black_to(image, width, height, resample=Image.BILINEAR):
    """mtmd's PAD_CEIL resize to a width x height canvas (bilinear unless said), centred on black."""
    w, h = image.size
    if (w, h) == (width, height):
        return np.asarray(image)
    scale = min(np.float32(width) / np.float32(w), np.float32(height) / np.float32(h))
    nw = min(int(np.ceil(np.float32(w) * scale)), width)
    nh = min(int(np.ceil(np.float32(h) * scale)), height)
    canvas = np.zeros((height, width, 3), dtype=np.uint8)
    ox, oy = (width - nw) // 2, (height - nh) // 2
    canvas[oy : oy + nh, ox : ox + nw] = np.asarray(image.resize((nw, nh), resample))
    return canvas


def lfm2_squares(rgb):
    """mtmd's lfm2 preprocessing: the squares in prompt order (the tiles, then the thumbnail; or
    the picture alone), and the grid (None when it is not cut)."""
    h, w, _ = rgb.shape
    image = Image.fromarray(rgb)
    size = lfm2_size(w, h)
    whole = np.asarray(image if image.size == size else image.resize(size, Image.BILINEAR))
    grid = lfm2_grid(w, h)
    if grid is None:
        return [whole], None
    cols, rows = grid
    refined = fit_on_black_to(image, cols * LFM2_TILE, rows * LFM2_TILE)
    tiles = [
        refined[y * LFM2_TILE : (y + 1) * LFM2_TILE, x * LFM2_TILE : (x + 1) * LFM2_TILE]
        for y in range(rows)
        for x in range(cols)
    ]
    return tiles + [whole], grid


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def mtmd_context(text_model, flash, mmproj=MMPROJ, image_tokens=None):
    params = mtmd.mtmd_context_params_default()
    if image_tokens:
        params.image_min_tokens, params.image_max_tokens = image_tokens
    params.use_gpu = False
    params.n_threads = 1
    params.warmup = False
    params.print_timings = False
    # llama.h's enum llama_flash_attn_type: -1 auto (on, for the CPU), 0 disabled, 1 enabled.
    params.flash_attn_type = 1 if flash else 0
    ctx = mtmd.mtmd_init_from_file(str(mmproj).encode(), text_model, params)
    if not ctx:
        sys.exit("mtmd_init_from_file failed")
    return ctx


def tokenize(ctx, text, rgb):
    h, w, _ = rgb.shape
    data = np.ascontiguousarray(rgb).tobytes()
    bitmap = mtmd.mtmd_bitmap_init(w, h, (ctypes.c_ubyte * len(data)).from_buffer_copy(data))
    chunks = mtmd.mtmd_input_chunks_init()
    encoded = text.encode()
    text_input = mtmd.mtmd_input_text(encoded, len(encoded), True, True)
    bitmaps = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
    if mtmd.mtmd_tokenize(ctx, chunks, ctypes.byref(text_input), bitmaps, 1) != 0:
        sys.exit("mtmd_tokenize failed")
    mtmd.mtmd_bitmap_free(bitmap)
    return chunks


def chunk_list(chunks):
    out = []
    for i in range(mtmd.mtmd_input_chunks_size(chunks)):
        chunk = mtmd.mtmd_input_chunks_get(chunks, i)
        if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
            n = ctypes.c_size_t()
            ids = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
            out.append((chunk, {"text_ids": [int(ids[k]) for k in range(n.value)]}))
        else:
            out.append((chunk, {"image_tokens": int(mtmd.mtmd_input_chunk_get_n_tokens(chunk))}))
    return out


def embeddings(ctx, rgb, width):
    chunks = tokenize(ctx, "<__media__>", rgb)
    [(chunk, facts)] = [c for c in chunk_list(chunks) if "image_tokens" in c[1]]
    if mtmd.mtmd_encode_chunk(ctx, chunk) != 0:
        sys.exit("mtmd_encode_chunk failed")
    n = facts["image_tokens"]
    out = np.ctypeslib.as_array(mtmd.mtmd_get_output_embd(ctx), shape=(n * width,)).copy()
    mtmd.mtmd_input_chunks_free(chunks)
    return out.astype("<f4").reshape(n, width)


def all_embeddings(ctx, rgb, width, rows_kept=None):
    """Every image chunk of the picture alone, encoded in prompt order (the first `rows_kept`
    rows of each, or all), and the chunks' layout."""
    chunks = tokenize(ctx, "<__media__>", rgb)
    layout, rows = [], []
    for chunk, facts in chunk_list(chunks):
        layout.append(facts)
        if "image_tokens" in facts:
            if mtmd.mtmd_encode_chunk(ctx, chunk) != 0:
                sys.exit("mtmd_encode_chunk failed")
            n = facts["image_tokens"]
            out = np.ctypeslib.as_array(mtmd.mtmd_get_output_embd(ctx), shape=(n * width,)).copy()
            rows.append(out[: (rows_kept or n) * width])
    mtmd.mtmd_input_chunks_free(chunks)
    return layout, np.concatenate(rows).astype("<f4").reshape(-1, width)


def top(row, k):
    ids = np.argsort(-row, kind="stable")[:k]
    logsumexp = float(np.log(np.sum(np.exp(row.astype(np.float64) - row.max()))) + row.max())
    return [{"id": int(i), "logit": float(row[i]), "prob": float(np.exp(float(row[i]) - logsumexp))} for i in ids]


def chat_golden(model_path, rgb, mmproj=MMPROJ, prompt=CHAT_PROMPT, image_tokens=None):
    llm = Llama(
        model_path=str(model_path),
        n_ctx=512,
        n_batch=512,
        n_ubatch=512,
        n_threads=1,
        n_threads_batch=1,
        flash_attn=True,
        verbose=False,
    )
    ctx = mtmd_context(llm._model.model, flash=True, mmproj=mmproj, image_tokens=image_tokens)
    chunks = tokenize(ctx, prompt, rgb)
    layout = [facts for _, facts in chunk_list(chunks)]
    n_past = llama_cpp.llama_pos(0)
    if mtmd.mtmd_helper_eval_chunks(ctx, llm._ctx.ctx, chunks, 0, 0, 512, True, ctypes.byref(n_past)) != 0:
        sys.exit("mtmd_helper_eval_chunks failed")
    n_vocab = llm.n_vocab()
    logits = lambda: np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(n_vocab,)).copy()
    llm.n_tokens = n_past.value
    steps, generated = [], []
    for step in range(N_PREDICT):
        row = logits()
        if step < TOP_STEPS:
            steps.append({"top": top(row, TOP_K)})
        token = int(np.argmax(row))
        generated.append(token)
        llm.eval([token])
    mtmd.mtmd_input_chunks_free(chunks)
    mtmd.mtmd_free(ctx)
    return {
        "model": model_path.name,
        "model_sha256": sha256(model_path.read_bytes()),
        "picture": f"images/{CHAT_PICTURE}.png",
        "prompt": prompt,
        "chunks": layout,
        "n_past": n_past.value,
        "generated_ids": generated,
        "steps": steps,
    }


def micro_pair(model, mmproj):
    """A micro language model and its micro projector loaded in mtmd (flash attention, as
    llama.cpp runs by default), and the start of their golden file."""
    params = llama_cpp.llama_model_default_params()
    text_model = llama_cpp.llama_model_load_from_file(str(model).encode(), params)
    golden = {
        "mmproj": f"models/{mmproj.name}",
        "mmproj_sha256": sha256(mmproj.read_bytes()),
        "model": f"models/{model.name}",
        "oracle": "llama.cpp mtmd (llama-cpp-python 0.3.36, commit 0c1e570), CPU, AVX2, one thread",
        "pictures": [],
    }
    return text_model, mtmd_context(text_model, True, mmproj), golden


def smolvlm_goldens():
    """The micro SmolVLM projector's goldens (see the module's docstring)."""
    text_model, ctx, golden = micro_pair(SMOLVLM_MODEL, SMOLVLM_MMPROJ)
    for name, rgb in pictures().items():
        tiles, grid = idefics3_tiles(rgb)
        layout, embd = all_embeddings(ctx, rgb, SMOLVLM_WIDTH)
        file = f"clip-idefics3-micro.{name}.f32"
        (GOLDEN / file).write_bytes(embd.tobytes())
        golden["pictures"].append(
            {
                "file": f"images/{name}.png",
                "grid": list(grid),
                "tiles": [sha256(t.tobytes()) for t in tiles],
                "chunks": layout,
                "tokens": embd.shape[0],
                "embeddings": file,
            }
        )
        print("idefics3", name, grid, embd.shape[0], "rows")
    mtmd.mtmd_free(ctx)
    llama_cpp.llama_model_free(text_model)
    golden["chat"] = chat_golden(SMOLVLM_MODEL, pictures()[CHAT_PICTURE], SMOLVLM_MMPROJ, SMOLVLM_PROMPT)
    golden["chat"]["model"] = "models/llama-micro-smolvlm.gguf"
    print("idefics3 chat:", golden["chat"]["generated_ids"])
    (GOLDEN / "clip-idefics3-micro.images.json").write_text(json.dumps(golden, indent=1) + "\n")


def lfm2_goldens():
    """The micro LFM2-VL projector's goldens (see the module's docstring)."""
    text_model, ctx, golden = micro_pair(LFM2_MODEL, LFM2_MMPROJ)
    y, x = np.mgrid[0:360, 0:480].astype(np.float64)
    wide = np.stack([x / 479 * 255, 255 - y / 359 * 255, 128 + 90 * np.sin(x / 23 + y / 31)], axis=-1)
    wide = np.clip(np.rint(wide), 0, 255).astype(np.uint8)
    path = FIXTURES / "images" / f"{LFM2_TILED_PICTURE}.png"
    Image.fromarray(wide).save(path, optimize=True)
    assert np.array_equal(np.asarray(Image.open(path).convert("RGB")), wide)
    for name, rgb in [*pictures().items(), (LFM2_TILED_PICTURE, wide)]:
        squares, grid = lfm2_squares(rgb)
        kept = LFM2_ROWS_KEPT if grid else None
        layout, embd = all_embeddings(ctx, rgb, LFM2_WIDTH, kept)
        file = f"clip-lfm2-micro.{name}.f32"
        (GOLDEN / file).write_bytes(embd.tobytes())
        entry = {
            "file": f"images/{name}.png",
            "grid": list(grid) if grid else None,
            "squares": [{"width": s.shape[1], "height": s.shape[0], "sha256": sha256(s.tobytes())} for s in squares],
            "chunks": layout,
            "embeddings": file,
        }
        if kept:
            entry["rows_kept"] = kept
        golden["pictures"].append(entry)
        print("lfm2", name, grid, [c.get("image_tokens") for c in layout if "image_tokens" in c])
    mtmd.mtmd_free(ctx)
    llama_cpp.llama_model_free(text_model)
    golden["chat"] = chat_golden(LFM2_MODEL, pictures()[CHAT_PICTURE], LFM2_MMPROJ, LFM2_PROMPT)
    golden["chat"]["model"] = "models/lfm2-vl-micro-q8_0.gguf"
    print("lfm2 chat:", golden["chat"]["generated_ids"])
    (GOLDEN / "clip-lfm2-micro.images.json").write_text(json.dumps(golden, indent=1) + "\n")


def gemma4v_goldens():
    """The micro Gemma 4 projector's goldens (see the module's docstring)."""
    text_model, ctx, golden = micro_pair(GEMMA4V_MODEL, GEMMA4V_MMPROJ)
    wide = np.asarray(Image.open(FIXTURES / "images" / f"{LFM2_TILED_PICTURE}.png").convert("RGB"))
    for name, rgb in [*pictures().items(), (LFM2_TILED_PICTURE, wide)]:
        square = gemma4v_square(rgb)
        layout, embd = all_embeddings(ctx, rgb, GEMMA4V_WIDTH)
        file = f"clip-gemma4v-micro.{name}.f32"
        (GOLDEN / file).write_bytes(embd.tobytes())
        golden["pictures"].append(
            {
                "file": f"images/{name}.png",
                "squares": [{"width": square.shape[1], "height": square.shape[0], "sha256": sha256(square.tobytes())}],
                "chunks": layout,
                "embeddings": file,
            }
        )
        print("gemma4v", name, square.shape[1], square.shape[0], embd.shape[0], "rows")
    mtmd.mtmd_free(ctx)
    # With mtmd's image_min_tokens / image_max_tokens: the wide picture (300 rows by default)
    # limited to 40-80 rows.
    ctx = mtmd_context(text_model, True, GEMMA4V_MMPROJ, GEMMA4V_LIMITS)
    square = gemma4v_square(wide, GEMMA4V_LIMITS)
    layout, embd = all_embeddings(ctx, wide, GEMMA4V_WIDTH)
    file = f"clip-gemma4v-micro.{LFM2_TILED_PICTURE}.limited.f32"
    (GOLDEN / file).write_bytes(embd.tobytes())
    golden["limited"] = {
        "image_tokens": list(GEMMA4V_LIMITS),
        "file": f"images/{LFM2_TILED_PICTURE}.png",
        "squares": [{"width": square.shape[1], "height": square.shape[0], "sha256": sha256(square.tobytes())}],
        "chunks": layout,
        "embeddings": file,
    }
    print("gemma4v limited", square.shape[1], square.shape[0], embd.shape[0], "rows")
    mtmd.mtmd_free(ctx)
    llama_cpp.llama_model_free(text_model)
    golden["chat"] = chat_golden(GEMMA4V_MODEL, pictures()[CHAT_PICTURE], GEMMA4V_MMPROJ, GEMMA4V_PROMPT)
    golden["chat"]["model"] = "models/gemma4-vl-micro-q8_0.gguf"
    print("gemma4v chat:", golden["chat"]["generated_ids"])
    (GOLDEN / "clip-gemma4v-micro.images.json").write_text(json.dumps(golden, indent=1) + "\n")


def qwen3vl_goldens():
    """The micro Qwen3.5 projector's goldens (see the module's docstring)."""
    text_model, ctx, golden = micro_pair(QWEN3VL_MODEL, QWEN3VL_MMPROJ)
    wide = np.asarray(Image.open(FIXTURES / "images" / f"{LFM2_TILED_PICTURE}.png").convert("RGB"))

    def entry(rgb, ctx, tokens):
        square = gemma4v_square(rgb, tokens, QWEN3VL_ALIGN)
        layout, embd = all_embeddings(ctx, rgb, QWEN3VL_WIDTH)
        squares = [{"width": square.shape[1], "height": square.shape[0], "sha256": sha256(square.tobytes())}]
        return {"squares": squares, "chunks": layout}, embd

    for name, rgb in [*pictures().items(), (LFM2_TILED_PICTURE, wide)]:
        facts, embd = entry(rgb, ctx, QWEN3VL_TOKENS)
        file = f"clip-qwen3vl-micro.{name}.f32"
        (GOLDEN / file).write_bytes(embd.tobytes())
        golden["pictures"].append({"file": f"images/{name}.png", **facts, "embeddings": file})
        print("qwen3vl", name, facts["squares"][0]["width"], facts["squares"][0]["height"], embd.shape[0], "rows")
    mtmd.mtmd_free(ctx)
    ctx = mtmd_context(text_model, True, QWEN3VL_MMPROJ, QWEN3VL_LIMITS)
    facts, embd = entry(wide, ctx, QWEN3VL_LIMITS)
    file = f"clip-qwen3vl-micro.{LFM2_TILED_PICTURE}.limited.f32"
    (GOLDEN / file).write_bytes(embd.tobytes())
    golden["limited"] = {
        "image_tokens": list(QWEN3VL_LIMITS),
        "file": f"images/{LFM2_TILED_PICTURE}.png",
        **facts,
        "embeddings": file,
    }
    print("qwen3vl limited", embd.shape[0], "rows")
    mtmd.mtmd_free(ctx)
    llama_cpp.llama_model_free(text_model)
    chat = chat_golden(QWEN3VL_MODEL, pictures()[CHAT_PICTURE], QWEN3VL_MMPROJ, GEMMA4V_PROMPT, QWEN3VL_LIMITS)
    golden["limited"]["chat"] = {**chat, "model": "models/qwen35-micro-q8_0.gguf"}
    print("qwen3vl limited chat:", chat["chunks"], chat["n_past"], chat["generated_ids"])
    golden["chat"] = chat_golden(QWEN3VL_MODEL, pictures()[CHAT_PICTURE], QWEN3VL_MMPROJ, GEMMA4V_PROMPT)
    golden["chat"]["model"] = "models/qwen35-micro-q8_0.gguf"
    print("qwen3vl chat:", golden["chat"]["n_past"], golden["chat"]["generated_ids"])
    (GOLDEN / "clip-qwen3vl-micro.images.json").write_text(json.dumps(golden, indent=1) + "\n")


def one_square_picture(ctx, rgb, name, stem, align, width):
    """A picture of one dyn_size square (Qwen-VL's preparation, 8 to 4096 rows): its golden entry
    (the square's size and pixels' SHA-256, mtmd's chunks, its embeddings written to
    `stem.name.f32`), the square and the embeddings."""
    square = gemma4v_square(rgb, QWEN3VL_TOKENS, align)
    layout, embd = all_embeddings(ctx, rgb, width)
    file = f"{stem}.{name}.f32"
    (GOLDEN / file).write_bytes(embd.tobytes())
    entry = {
        "file": f"images/{name}.png",
        "squares": [{"width": square.shape[1], "height": square.shape[0], "sha256": sha256(square.tobytes())}],
        "chunks": layout,
        "embeddings": file,
    }
    return entry, square, embd


def qwen3vl_deepstack_goldens():
    """The micro Qwen3-VL projector's goldens (see the module's docstring)."""
    text_model, ctx, golden = micro_pair(QWEN3VL_DEEPSTACK_MODEL, QWEN3VL_DEEPSTACK_MMPROJ)
    width = 3 * QWEN3VL_WIDTH
    for name in ("noise-61x47", "stripes-300x200"):
        entry, _, embd = one_square_picture(ctx, pictures()[name], name, "clip-qwen3vl-deepstack-micro", QWEN3VL_ALIGN, width)
        golden["pictures"].append(entry)
        print("qwen3vl deepstack", name, embd.shape)
    mtmd.mtmd_free(ctx)
    llama_cpp.llama_model_free(text_model)
    golden["chat"] = chat_golden(QWEN3VL_DEEPSTACK_MODEL, pictures()[CHAT_PICTURE], QWEN3VL_DEEPSTACK_MMPROJ, GEMMA4V_PROMPT)
    golden["chat"]["model"] = "models/qwen3vl-micro-q8_0.gguf"
    print("qwen3vl deepstack chat:", golden["chat"]["n_past"], golden["chat"]["generated_ids"])
    (GOLDEN / "clip-qwen3vl-deepstack-micro.images.json").write_text(json.dumps(golden, indent=1) + "\n")


def qwen2vl_goldens(kind):
    """The micro Qwen2-VL (`kind` "qwen2vl") or Qwen2.5-VL ("qwen25vl") projector's goldens (see
    the module's docstring)."""
    mmproj = FIXTURES / "models" / f"clip-{kind}-micro.gguf"
    text_model, ctx, golden = micro_pair(QWEN2VL_MODEL, mmproj)
    wide = np.asarray(Image.open(FIXTURES / "images" / f"{LFM2_TILED_PICTURE}.png").convert("RGB"))
    for name, rgb in [*pictures().items(), (LFM2_TILED_PICTURE, wide)]:
        entry, square, embd = one_square_picture(ctx, rgb, name, f"clip-{kind}-micro", QWEN2VL_ALIGN, QWEN3VL_WIDTH)
        golden["pictures"].append(entry)
        print(kind, name, square.shape[1], square.shape[0], embd.shape[0], "rows")
    mtmd.mtmd_free(ctx)
    llama_cpp.llama_model_free(text_model)
    golden["chat"] = chat_golden(QWEN2VL_MODEL, pictures()[CHAT_PICTURE], mmproj, GEMMA4V_PROMPT)
    golden["chat"]["model"] = "models/qwen2vl-micro-q8_0.gguf"
    print(kind, "chat:", golden["chat"]["n_past"], golden["chat"]["generated_ids"])
    (GOLDEN / f"clip-{kind}-micro.images.json").write_text(json.dumps(golden, indent=1) + "\n")


def main():
    only = {
        "qwen3vl-deepstack": qwen3vl_deepstack_goldens,
        "gemma4v": gemma4v_goldens,
        "qwen3vl": qwen3vl_goldens,
        "qwen2vl": lambda: qwen2vl_goldens("qwen2vl"),
        "qwen25vl": lambda: qwen2vl_goldens("qwen25vl"),
    }
    if sys.argv[1:2] == ["--only"] and len(sys.argv) == 3 and sys.argv[2] in only:
        return only[sys.argv[2]]()
    qwen2vl_goldens("qwen2vl")
    qwen2vl_goldens("qwen25vl")
    qwen3vl_goldens()
    qwen3vl_deepstack_goldens()
    gemma4v_goldens()
    lfm2_goldens()
    smolvlm_goldens()
    images = FIXTURES / "images"
    images.mkdir(exist_ok=True)
    width = 640
    model_path = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    # mtmd wants a text model to check the projector's output width against; Gemma 3 270M's is
    # 640. Without one given, the micro projector is still encoded (mtmd skips the check).
    text_model = None
    if model_path:
        params = llama_cpp.llama_model_default_params()
        text_model = llama_cpp.llama_model_load_from_file(str(model_path).encode(), params)
    contexts = {flash: mtmd_context(text_model, flash) for flash in (True, False)}
    golden = {
        "mmproj": "models/clip-gemma3-micro.gguf",
        "mmproj_sha256": sha256(MMPROJ.read_bytes()),
        "oracle": "llama.cpp mtmd (llama-cpp-python 0.3.36, commit 0c1e570), CPU, AVX2, one thread",
        "pictures": [],
    }
    for name, rgb in pictures().items():
        path = images / f"{name}.png"
        Image.fromarray(rgb).save(path, optimize=True)
        # The committed PNG is what the tests decode: check it round-trips.
        assert np.array_equal(np.asarray(Image.open(path).convert("RGB")), rgb)
        if name == RAW_PICTURE:
            # Its pixels as they are, for the browser's test, which has no PNG decoder.
            (images / f"{name}.rgb").write_bytes(rgb.tobytes())
        entry = {
            "file": f"images/{name}.png",
            "width": rgb.shape[1],
            "height": rgb.shape[0],
            "preprocessed_sha256": sha256(fit_on_black(rgb).tobytes()),
        }
        for flash, key in ((True, "embeddings"), (False, "embeddings_f32_attention")):
            embd = embeddings(contexts[flash], rgb, width)
            file = f"clip-gemma3-micro.{name}{'' if flash else '.f32-attention'}.f32"
            (GOLDEN / file).write_bytes(embd.tobytes())
            entry[key] = file
            entry["tokens"] = embd.shape[0]
        a = np.fromfile(GOLDEN / entry["embeddings"], dtype="<f4")
        b = np.fromfile(GOLDEN / entry["embeddings_f32_attention"], dtype="<f4")
        entry["flash_vs_f32_attention_max_relative"] = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
        golden["pictures"].append(entry)
        print(name, entry["tokens"], "tokens; flash vs f32 attention:", entry["flash_vs_f32_attention_max_relative"])
    for ctx in contexts.values():
        mtmd.mtmd_free(ctx)
    if model_path:
        llama_cpp.llama_model_free(text_model)
        golden["chat"] = chat_golden(model_path, pictures()[CHAT_PICTURE])
        print("chat:", golden["chat"]["chunks"], golden["chat"]["generated_ids"])
    (GOLDEN / "clip-gemma3-micro.images.json").write_text(json.dumps(golden, indent=1) + "\n")


if __name__ == "__main__":
    main()
