#!/usr/bin/env python3
"""Write a small random-weight vision projector (mmproj) GGUF, with the keys and tensor names
llama.cpp's tools/mtmd/clip.cpp reads, for the inspector's tests and, later, the encoders'.

  pip install gguf numpy
  python3 scripts/make_micro_mmproj.py OUT.gguf [--projector gemma3|idefics3|lfm2|gemma4v|qwen3vl|qwen3vl-deepstack|qwen2vl|qwen25vl] [--shape micro|base]
                                                [--type f16|q8_0]

tests/fixtures/models/clip-gemma3-micro.gguf, clip-idefics3-micro.gguf, clip-lfm2-micro.gguf and
clip-gemma4v-micro.gguf, clip-qwen3vl-micro.gguf, clip-qwen2vl-micro.gguf and clip-qwen25vl-micro.gguf
are its micro outputs
(named, as every micro file, after their general.architecture, then the projector).

gemma3: a SigLIP ViT (224 x 224 images in 14-pixel patches, so 16 x 16 patches; 2 layers, 32
wide, 4 heads, feed-forward 64, GELU, layer norms with biases) and Gemma 3's projector (4 x 4
average pooling, an RMS norm, then mm.input_projection to 640 wide: the embedding length of
Gemma 3 270M, the real model the image goldens pair it with). Weights are seeded random normals,
F16 for matrices and F32 for vectors, as llama.cpp's converter writes them; their spreads (0.1 for
matrices, 0.5 for the learned positions, norm weights near 1) keep attention far from uniform
and make every patch's place matter, so a wrong order or a transposed pool cannot pass.

idefics3 (SmolVLM): the same kind of SigLIP at 64 x 64 in 8-pixel patches (8 x 8 patches; 2 layers,
32 wide, 4 heads, feed-forward 64), its patch and position embeddings F32 as llama.cpp's SmolVLM
converter forces them, then SmolVLM's projector: a pixel shuffle of 2 x 2 patches into one row of
128 (clip.vision.projector.scale_factor) and mm.model.fc.weight to 256 wide, the micro SmolVLM
language model's width (make_micro_models.py --arch llama-smolvlm). clip.vision.preproc_image_size
128 makes mtmd cut a picture into at most 2 x 2 tiles of 64 px plus the whole picture at 64 px.

lfm2 (LFM2-VL): the same SigLIP, its 8 x 8 learned positions resized to each picture's patch grid
(mtmd's antialiased bilinear), pictures at their own aspect (sides multiples of 16, between 64
and 256 rows of output), larger ones in 512 px tiles plus a thumbnail; then LFM2-VL's projector:
the 2 x 2 pixel unshuffle, a LayerNorm (mm.input_norm), and a GELU feed-forward of 96 (mm.1,
mm.2) to 256 wide, the micro LFM2-VL language model's width (make_micro_models.py --arch lfm2-vl).

gemma4v (Gemma 4): its ViT in 8-pixel patches at each picture's own aspect (mtmd's dyn_size: sides
multiples of 24, 70 to 1120 rows of output, bicubic, fitted on black), x and y position tables of
64 each, 2 layers 32 wide with 4 heads of 8: RMS norms, per-head Q/K norms, V normalized, 2D NeoX
RoPE (x on the first half of each head, y on the second, base 100), attention at scale 1, post
norms after attention and the gated feed-forward (no clip.use_gelu: clip.cpp's quick GELU, as the
converter writes Gemma 4's files), each layer's output scaled; then a 3 x 3 average pool scaled by
sqrt(32), the std bias and scale, an RMS norm and mm.input_projection to 256, the micro Gemma 4
language model's width (make_micro_models.py --arch gemma4-vl). Some linears carry Gemma 4's
clamps (.input_min/.input_max/.output_min/.output_max) tight enough to bite.

qwen3vl (Qwen3.5's qwen3vl_merger, and Qwen3-VL's without deepstack): Qwen's ViT in 8-pixel patches
at each picture's own aspect (sides multiples of 16, 8 to 4096 rows of output, bicubic, fitted on
black), the temporal convolution's two kernels (a still picture goes through both), a patch bias,
an 8 x 8 grid of learned positions resized to each picture (bilinear, corners aligned), patches
in 2 x 2 blocks, 2 layers 32 wide with 2 heads of 16: LayerNorms, fused Q/K/V with biases, vision
M-RoPE (ggml's GGML_ROPE_TYPE_VISION: element i of a head turned with element i + 8, the first 4
pairs by the patch's row, the next 4 by its column, base 10000), a GELU feed-forward; then the merger: v.post_ln, each 2 x 2 block in one row of 128, mm.0, GELU, mm.2 to
256, the micro Qwen3.5 language model's width (qwen35-micro-q8_0.gguf, whose vocabulary has
<|vision_start|> and <|vision_end|>). qwen3vl-deepstack (clip-qwen3vl-deepstack-micro.gguf) is
Qwen3-VL's: the same with both layers deepstack layers (v.deepstack.N: each layer's output
merged 2 x 2, a LayerNorm, a GELU feed-forward of 128 to 256), so its rows are 3 x 256 wide, for
the micro Qwen3-VL language model (make_micro_models.py --arch qwen3vl).

qwen2vl (Qwen2-VL's qwen2vl_merger): Qwen's ViT as above in Qwen's real 14-pixel patches (sides
multiples of 28), without a patch bias or learned positions, 2 layers 32 wide with 2 heads of 16:
LayerNorms, separate Q/K/V with biases (the converter splits Qwen's fused one), vision M-RoPE, a
quick-GELU feed-forward (the converter writes neither clip.use_gelu nor clip.use_silu); then the
merger (v.post_ln, 2 x 2 blocks in one row of 128, mm.0 to 128, GELU, mm.2 to 256) for the micro
Qwen2-VL language model (make_micro_models.py --arch qwen2vl). qwen25vl (Qwen2.5-VL's
qwen2.5vl_merger): the same with 3 layers, RMS norms without biases, a gated SiLU feed-forward of 60
(not a multiple of 8, as Qwen2.5-VL's 3420 is not: ggml's SwiGLU takes each row's last 4 values
through libm), and window attention (clip.vision.n_wa_pattern 2: layer 1 attends over the whole
picture, layers 0 and 2 within windows of 112 pixels, 4 x 4 blocks of patches).

--shape base writes the encoder benchmark's file instead (scripts/bench_vision.py): SigLIP-base
at 512 px (16-pixel patches, so 32 x 32; 12 layers, 768 wide, 12 heads, feed-forward 3072: 93M
parameters), with the same projector to 640, matrices spread as 1/sqrt(fan-in) so activations
stay finite through the layers; --type q8_0 writes its matrices as Q8_0, as llama.cpp's
quantizer does (the patch convolution stays F16).
"""
import argparse

import gguf
import numpy as np

SHAPES = {
    # image, patch, width, layers, heads, feed-forward, output
    "micro": (224, 14, 32, 2, 4, 64, 640),
    "base": (512, 16, 768, 12, 12, 3072, 640),
}
IDEFICS3_MICRO = (64, 8, 32, 2, 4, 64, 256)
LFM2_SCALE, LFM2_HIDDEN = 2, 96
# Gemma 4: image (unused), patch, width, layers, heads, feed-forward, output; pool; positions.
GEMMA4V_MICRO = (224, 8, 32, 2, 4, 64, 256)
GEMMA4V_POOL, GEMMA4V_POSITIONS = 3, 64
# Linears clamped as Gemma4ClippableLinear: name -> (input min, input max, output min, output max).
GEMMA4V_CLAMPS = {
    "v.blk.0.attn_q": (-1.5, 1.5, -0.6, 0.6),
    "v.blk.1.ffn_down": (-0.05, 0.05, -0.02, 0.02),
    "mm.input_projection": (-1.0, 1.0, -0.6, 0.8),
}
# Qwen3-VL / Qwen3.5 (qwen3vl_merger): image (its learned positions' grid, 8 x 8), patch, width,
# layers, heads (of 16: four sections of M-RoPE pairs), feed-forward, output (the micro Qwen3.5's
# width); the merger's hidden width.
QWEN3VL_MICRO = (64, 8, 32, 2, 2, 64, 256)
QWEN3VL_MERGE, QWEN3VL_HIDDEN = 2, 128
# Qwen2-VL and Qwen2.5-VL: image (unused), patch (Qwen's own 14), width, layers, heads, feed-forward
# (Qwen2.5-VL's gated SiLU: not a multiple of 8), output; Qwen2.5-VL's full-attention period.
QWEN2VL_MICRO = (560, 14, 32, 2, 2, 64, 256)
QWEN25VL_MICRO = (560, 14, 32, 3, 2, 60, 256)
QWEN25VL_WA_PATTERN = 2
# SmolVLM's pixel shuffle and the longest side mtmd resizes a picture to before cutting tiles.
IDEFICS3_SCALE, IDEFICS3_LONGEST_EDGE = 2, 128


def add_encoder_shape(w, image, patch, width, layers, heads, ffn, output):
    """The encoder's shape keys, as clip.cpp reads them (and in the order the files hold them)."""
    w.add_uint32("clip.vision.image_size", image)
    w.add_uint32("clip.vision.patch_size", patch)
    w.add_uint32("clip.vision.embedding_length", width)
    w.add_uint32("clip.vision.feed_forward_length", ffn)
    w.add_uint32("clip.vision.block_count", layers)
    w.add_uint32("clip.vision.projection_dim", output)
    w.add_uint32("clip.vision.attention.head_count", heads)


def write_gemma4v(path, shape="micro", weight_type="f16"):
    """The micro gemma4v projector (see the module's docstring), or with --shape base the encoder
    benchmark's: Gemma 4's encoder at SigLIP-base's size (16-pixel patches, 12 layers, 768 wide,
    12 heads, feed-forward 3072), no clamps, matrices spread as 1/sqrt(fan-in)."""
    micro = shape == "micro"
    IMAGE, PATCH, WIDTH, LAYERS, HEADS, FFN, OUTPUT = GEMMA4V_MICRO if micro else (224, *SHAPES["base"][1:])
    positions = GEMMA4V_POSITIONS if micro else 256
    head = WIDTH // HEADS
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(path, "clip")
    w.add_string("general.name", f"{'micro' if micro else 'SigLIP-base-shaped ' + weight_type.upper()} Gemma 4 mmproj (random weights)")
    # As Gemma 4's converter writes it: the type per modality.
    w.add_string("clip.vision.projector_type", "gemma4v")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.has_audio_encoder", False)
    add_encoder_shape(w, IMAGE, PATCH, WIDTH, LAYERS, HEADS, FFN, OUTPUT)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    w.add_array("clip.vision.image_mean", [0.48145466, 0.4578275, 0.40821073])
    w.add_array("clip.vision.image_std", [0.26862954, 0.26130258, 0.27577711])

    def f32(name, values):
        w.add_tensor(name, np.asarray(values, dtype=np.float32))

    def linear(name, rows, cols):
        values = rng.standard_normal((rows, cols)) * (0.1 if micro else cols**-0.5)
        if weight_type == "q8_0":
            quantized = gguf.quants.quantize(values.astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(f"{name}.weight", quantized, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(f"{name}.weight", values.astype(np.float16))
        if micro and name in GEMMA4V_CLAMPS:
            for key, value in zip(("input_min", "input_max", "output_min", "output_max"), GEMMA4V_CLAMPS[name]):
                f32(f"{name}.{key}", [value])

    def norm(name, n, around=1.0):
        f32(name, around + rng.standard_normal(n) * 0.1)

    w.add_tensor("v.patch_embd.weight", (rng.standard_normal((WIDTH, 3, PATCH, PATCH)) * 0.05).astype(np.float16))
    # ne = [WIDTH, positions, 2]: the x table, then the y table.
    f32("v.position_embd.weight", rng.standard_normal((2, positions, WIDTH)) * 0.5)
    for layer in range(LAYERS):
        p = f"v.blk.{layer}"
        norm(f"{p}.ln1.weight", WIDTH)
        for proj in ("attn_q", "attn_k", "attn_v", "attn_out"):
            linear(f"{p}.{proj}", WIDTH, WIDTH)
        # Near 0.5: attention at scale 1 over normalized heads of 8 stays far from one-hot.
        norm(f"{p}.attn_q_norm.weight", head, 0.5)
        norm(f"{p}.attn_k_norm.weight", head, 0.5)
        norm(f"{p}.attn_post_norm.weight", WIDTH)
        norm(f"{p}.ln2.weight", WIDTH)
        linear(f"{p}.ffn_gate", FFN, WIDTH)
        linear(f"{p}.ffn_up", FFN, WIDTH)
        linear(f"{p}.ffn_down", WIDTH, FFN)
        norm(f"{p}.ffn_post_norm.weight", WIDTH)
        f32(f"{p}.out_scale.weight", rng.uniform(0.6, 1.0, 1))
    f32("v.std_bias", rng.standard_normal(WIDTH) * 0.5)
    f32("v.std_scale", rng.uniform(0.5, 1.5, WIDTH))
    # ne = [WIDTH, OUTPUT]: a plain linear, its ne[1] the output width.
    linear("mm.input_projection", OUTPUT, WIDTH)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def qwen_tensors(w, rng, micro, weight_type):
    """The Qwen projectors' two kinds of tensors: matrices (spread 0.1 in the micro shape, as
    1/sqrt(fan-in) in the base one; F16, or Q8_0 as llama.cpp's quantizer writes it) and F32
    vectors of a given mean and spread."""

    def matrix(name, rows, cols):
        values = rng.standard_normal((rows, cols)) * (0.1 if micro else cols**-0.5)
        if weight_type == "q8_0":
            quantized = gguf.quants.quantize(values.astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, quantized, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, values.astype(np.float16))

    def vector(name, n, around=0.0, std=0.05):
        w.add_tensor(name, (around + rng.standard_normal(n) * std).astype(np.float32))

    return matrix, vector


def write_qwen3vl(path, deepstack=False, shape="micro", weight_type="f16"):
    """The micro qwen3vl_merger projector (see the module's docstring); with `deepstack`,
    Qwen3-VL's: both layers also deepstack layers. With --shape base the encoder benchmark's:
    Qwen's encoder at SigLIP-base's size (16-pixel patches, 12 layers, 768 wide, 12 heads,
    feed-forward 3072, a 48 x 48 grid of positions as Qwen3-VL's), the merger to 640, matrices
    spread as 1/sqrt(fan-in)."""
    micro = shape == "micro"
    IMAGE, PATCH, WIDTH, LAYERS, HEADS, FFN, OUTPUT = QWEN3VL_MICRO if micro else (768, *SHAPES["base"][1:])
    hidden = QWEN3VL_HIDDEN if micro else WIDTH * QWEN3VL_MERGE**2
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(path, "clip")
    name = "micro" if micro else f"SigLIP-base-shaped {weight_type.upper()}"
    w.add_string("general.name", f"{name} {'Qwen3-VL' if deepstack else 'Qwen3.5'} mmproj (random weights)")
    w.add_string("clip.projector_type", "qwen3vl_merger")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.has_audio_encoder", False)
    w.add_bool("clip.use_gelu", True)
    add_encoder_shape(w, IMAGE, PATCH, WIDTH, LAYERS, HEADS, FFN, OUTPUT)
    w.add_uint32("clip.vision.spatial_merge_size", QWEN3VL_MERGE)
    if deepstack:
        w.add_array("clip.vision.is_deepstack_layers", [True] * LAYERS)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    # Qwen's are 0.5 for every channel; CLIP's differ by channel, which catches a swap.
    w.add_array("clip.vision.image_mean", [0.48145466, 0.4578275, 0.40821073])
    w.add_array("clip.vision.image_std", [0.26862954, 0.26130258, 0.27577711])

    matrix, vector = qwen_tensors(w, rng, micro, weight_type)

    # The converter splits the temporal convolution's two frames into two 2D kernels.
    for name in ("v.patch_embd.weight", "v.patch_embd.weight.1"):
        w.add_tensor(name, (rng.standard_normal((WIDTH, 3, PATCH, PATCH)) * 0.05).astype(np.float16))
    vector("v.patch_embd.bias", WIDTH)
    w.add_tensor("v.position_embd.weight", (rng.standard_normal(((IMAGE // PATCH) ** 2, WIDTH)) * 0.5).astype(np.float32))
    for layer in range(LAYERS):
        p = f"v.blk.{layer}"
        for norm in ("ln1", "ln2"):
            vector(f"{p}.{norm}.weight", WIDTH, 1.0)
            vector(f"{p}.{norm}.bias", WIDTH)
        # Q, K and V in one matrix, as Qwen's attention holds them.
        matrix(f"{p}.attn_qkv.weight", 3 * WIDTH, WIDTH)
        vector(f"{p}.attn_qkv.bias", 3 * WIDTH)
        matrix(f"{p}.attn_out.weight", WIDTH, WIDTH)
        vector(f"{p}.attn_out.bias", WIDTH)
        matrix(f"{p}.ffn_up.weight", FFN, WIDTH)
        vector(f"{p}.ffn_up.bias", FFN)
        matrix(f"{p}.ffn_down.weight", WIDTH, FFN)
        vector(f"{p}.ffn_down.bias", WIDTH)
    # The merger: its norm (v.post_ln), then 2 x 2 patches in one row through mm.0, GELU, mm.2.
    vector("v.post_ln.weight", WIDTH, 1.0)
    vector("v.post_ln.bias", WIDTH)
    matrix("mm.0.weight", hidden, WIDTH * QWEN3VL_MERGE**2)
    vector("mm.0.bias", hidden)
    matrix("mm.2.weight", OUTPUT, hidden)
    vector("mm.2.bias", OUTPUT)
    merged = WIDTH * QWEN3VL_MERGE**2
    for layer in range(LAYERS if deepstack else 0):
        # Each layer's output merged 2 x 2, normalized, through its own GELU feed-forward.
        p = f"v.deepstack.{layer}"
        vector(f"{p}.norm.weight", merged, 1.0)
        vector(f"{p}.norm.bias", merged)
        matrix(f"{p}.fc1.weight", merged, merged)
        vector(f"{p}.fc1.bias", merged)
        matrix(f"{p}.fc2.weight", OUTPUT, merged)
        vector(f"{p}.fc2.bias", OUTPUT)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_qwen2vl(path, version, shape="micro", weight_type="f16"):
    """The micro qwen2vl_merger (version "2") or qwen2.5vl_merger ("2.5") projector (see the
    module's docstring). With --shape base the encoder benchmark's: SigLIP-base's size
    (16-pixel patches, 12 layers, 768 wide, 12 heads, feed-forward 3072; Qwen2.5-VL's windows
    of 3 x 3 blocks and full attention every fourth layer), the merger to 640, matrices spread
    as 1/sqrt(fan-in)."""
    micro = shape == "micro"
    qwen25 = version == "2.5"
    if micro:
        IMAGE, PATCH, WIDTH, LAYERS, HEADS, FFN, OUTPUT = QWEN2VL_MICRO if version == "2" else QWEN25VL_MICRO
    else:
        IMAGE, PATCH, WIDTH, LAYERS, HEADS, FFN, OUTPUT = (512, *SHAPES["base"][1:])
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(path, "clip")
    name = "micro" if micro else f"SigLIP-base-shaped {weight_type.upper()}"
    w.add_string("general.name", f"{name} Qwen{version}-VL mmproj (random weights)")
    w.add_string("clip.projector_type", "qwen2.5vl_merger" if qwen25 else "qwen2vl_merger")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.has_audio_encoder", False)
    if qwen25:
        # The converter's: a gated SiLU feed-forward, full attention in every second layer.
        w.add_bool("clip.use_silu", True)
        w.add_uint32("clip.vision.n_wa_pattern", QWEN25VL_WA_PATTERN if micro else 4)
    add_encoder_shape(w, IMAGE, PATCH, WIDTH, LAYERS, HEADS, FFN, OUTPUT)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    w.add_array("clip.vision.image_mean", [0.48145466, 0.4578275, 0.40821073])
    w.add_array("clip.vision.image_std", [0.26862954, 0.26130258, 0.27577711])

    matrix, vector = qwen_tensors(w, rng, micro, weight_type)

    def norm(name):
        vector(f"{name}.weight", WIDTH, 1.0)
        if not qwen25:  # Qwen2.5-VL's RMS norms have no bias
            vector(f"{name}.bias", WIDTH)

    # No patch bias and no learned positions: the heads' rotation alone places a patch.
    for name in ("v.patch_embd.weight", "v.patch_embd.weight.1"):
        w.add_tensor(name, (rng.standard_normal((WIDTH, 3, PATCH, PATCH)) * 0.05).astype(np.float16))
    for layer in range(LAYERS):
        p = f"v.blk.{layer}"
        norm(f"{p}.ln1")
        norm(f"{p}.ln2")
        # The converter splits Qwen's fused Q/K/V into three.
        for part in ("attn_q", "attn_k", "attn_v", "attn_out"):
            matrix(f"{p}.{part}.weight", WIDTH, WIDTH)
            vector(f"{p}.{part}.bias", WIDTH)
        for part in ("ffn_gate", "ffn_up") if qwen25 else ("ffn_up",):
            matrix(f"{p}.{part}.weight", FFN, WIDTH)
            vector(f"{p}.{part}.bias", FFN)
        matrix(f"{p}.ffn_down.weight", WIDTH, FFN)
        vector(f"{p}.ffn_down.bias", WIDTH)
    norm("v.post_ln")
    merged = WIDTH * QWEN3VL_MERGE**2
    matrix("mm.0.weight", merged, merged)
    vector("mm.0.bias", merged)
    matrix("mm.2.weight", OUTPUT, merged)
    vector("mm.2.bias", OUTPUT)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_projector(path, projector="gemma3", shape="micro", weight_type="f16"):
    if projector == "gemma4v":
        return write_gemma4v(path, shape, weight_type)
    if projector in ("qwen3vl", "qwen3vl-deepstack"):
        return write_qwen3vl(path, projector == "qwen3vl-deepstack", shape, weight_type)
    if projector in ("qwen2vl", "qwen25vl"):
        return write_qwen2vl(path, "2" if projector == "qwen2vl" else "2.5", shape, weight_type)
    idefics3, lfm2 = projector == "idefics3", projector == "lfm2"
    IMAGE, PATCH, WIDTH, LAYERS, HEADS, FFN, OUTPUT = IDEFICS3_MICRO if idefics3 or lfm2 else SHAPES[shape]
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(path, "clip")
    name = "micro" if shape == "micro" else f"SigLIP-base-shaped {weight_type.upper()}"
    family = {"idefics3": "SmolVLM", "lfm2": "LFM2-VL"}.get(projector, "Gemma 3")
    w.add_string("general.name", f"{name} {family} mmproj (random weights)")
    w.add_string("clip.projector_type", projector)
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.has_audio_encoder", False)
    w.add_bool("clip.use_gelu", True)
    add_encoder_shape(w, IMAGE, PATCH, WIDTH, LAYERS, HEADS, FFN, OUTPUT)
    # SmolVLM's converter writes its layer_norm_eps (1e-5 by default); Gemma 3's files say 1e-6.
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-5 if idefics3 or lfm2 else 1e-6)
    if lfm2:
        w.add_uint32("clip.vision.projector.scale_factor", LFM2_SCALE)
    if idefics3:
        w.add_uint32("clip.vision.projector.scale_factor", IDEFICS3_SCALE)
        w.add_uint32("clip.vision.preproc_image_size", IDEFICS3_LONGEST_EDGE)
    # Gemma 3's are 0.5 for every channel; CLIP's differ by channel, which catches a swap.
    w.add_array("clip.vision.image_mean", [0.48145466, 0.4578275, 0.40821073])
    w.add_array("clip.vision.image_std", [0.26862954, 0.26130258, 0.27577711])

    def matrix(name, rows, cols, quantize=True):
        # numpy shape (rows, cols) is ggml's ne = [cols, rows].
        std = 0.1 if shape == "micro" else cols**-0.5
        values = rng.standard_normal((rows, cols)) * std
        if weight_type == "q8_0" and quantize:
            quantized = gguf.quants.quantize(values.astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, quantized, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, values.astype(np.float16))

    def vector(name, n, around=0.0, std=0.05):
        w.add_tensor(name, (around + rng.standard_normal(n) * std).astype(np.float32))

    patches = (IMAGE // PATCH) ** 2
    w.add_tensor(
        "v.patch_embd.weight",
        (rng.standard_normal((WIDTH, 3, PATCH, PATCH)) * 0.05).astype(np.float32 if idefics3 else np.float16),
    )
    vector("v.patch_embd.bias", WIDTH)
    # F32, as llama.cpp's converter keeps it: ggml's CPU add takes no F16 operand here.
    w.add_tensor("v.position_embd.weight", (rng.standard_normal((patches, WIDTH)) * 0.5).astype(np.float32))
    for layer in range(LAYERS):
        p = f"v.blk.{layer}"
        for norm in ("ln1", "ln2"):
            vector(f"{p}.{norm}.weight", WIDTH, 1.0)
            vector(f"{p}.{norm}.bias", WIDTH)
        for proj in ("attn_q", "attn_k", "attn_v", "attn_out"):
            matrix(f"{p}.{proj}.weight", WIDTH, WIDTH)
            vector(f"{p}.{proj}.bias", WIDTH)
        matrix(f"{p}.ffn_up.weight", FFN, WIDTH)
        vector(f"{p}.ffn_up.bias", FFN)
        matrix(f"{p}.ffn_down.weight", WIDTH, FFN)
        vector(f"{p}.ffn_down.bias", WIDTH)
    vector("v.post_ln.weight", WIDTH, 1.0)
    vector("v.post_ln.bias", WIDTH)
    if lfm2:
        vector("mm.input_norm.weight", WIDTH * LFM2_SCALE**2, 1.0)
        vector("mm.input_norm.bias", WIDTH * LFM2_SCALE**2)
        matrix("mm.1.weight", LFM2_HIDDEN, WIDTH * LFM2_SCALE**2)
        vector("mm.1.bias", LFM2_HIDDEN)
        matrix("mm.2.weight", OUTPUT, LFM2_HIDDEN)
        vector("mm.2.bias", OUTPUT)
    elif idefics3:
        # ne = [WIDTH * scale², OUTPUT]: a plain linear from the shuffled rows.
        matrix("mm.model.fc.weight", OUTPUT, WIDTH * IDEFICS3_SCALE**2)
    else:
        vector("mm.soft_emb_norm.weight", WIDTH, 1.0)
        # ne = [OUTPUT, WIDTH]: clip.cpp transposes it, and its ne[0] is the output width.
        # Never quantized: clip.cpp transposes it, which a block-quantized type cannot be.
        matrix("mm.input_projection.weight", WIDTH, OUTPUT, quantize=False)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--projector", choices=["gemma3", "idefics3", "lfm2", "gemma4v", "qwen3vl", "qwen3vl-deepstack", "qwen2vl", "qwen25vl"], default="gemma3")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="micro")
    parser.add_argument("--type", choices=["f16", "q8_0"], default="f16")
    args = parser.parse_args()
    if args.projector not in ("gemma3", "gemma4v", "qwen3vl", "qwen25vl") and args.shape != "micro":
        parser.error(f"{args.projector} has the micro shape only")
    write_projector(args.out, args.projector, args.shape, args.type)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
