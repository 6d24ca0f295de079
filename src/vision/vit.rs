//! The vision transformers (ViTs) and the projectors behind them, read top to bottom as
//! llama.cpp's mtmd builds them (`clip.cpp`'s `build_vit`, `models/siglip.cpp`,
//! `models/gemma4v.cpp`, `models/qwen2vl.cpp`, `models/qwen3vl.cpp`), so an image's embeddings
//! agree with mtmd's to the tolerance the goldens state: SigLIP with Gemma 3's, SmolVLM's
//! (`idefics3`) and LFM2-VL's projectors, Gemma 4's own encoder and projector (`gemma4v`), and
//! Qwen's encoders and merger (`qwen2vl_merger`, `qwen2.5vl_merger`, `qwen3vl_merger`).
//!
//! picture → the encoder's squares (Gemma 3: one, the picture fitted on black; SmolVLM: tiles
//! of the picture enlarged to its longest side, then the whole picture squeezed; LFM2-VL, Gemma 4
//! and Qwen: the picture at its own aspect, LFM2-VL's large ones in tiles) → for each: patches
//! (the convolution as a matmul over each patch's pixels; Qwen's two frames' kernels added, its
//! patches then in 2 × 2 blocks, Qwen2.5-VL's then window by window) + learned positions (where
//! the file has them) → layers of [norm → attention over every patch (Qwen2.5-VL: within its
//! window, but in every few layers) → residual → norm → feed-forward → residual] → the projector
//! to the language model's width. SigLIP's, Qwen2-VL's and Qwen3-VL's norms are LayerNorms and
//! their feed-forward GELU (quick GELU for Qwen2-VL; Qwen's heads turned by a vision M-RoPE);
//! Qwen2.5-VL's are RMS norms and its feed-forward gated SiLU; Gemma 4's norms are RMS norms,
//! with Q/K norms, post norms, a 2D RoPE, a gated feed-forward and clamped linears (the parts a
//! file lacks are skipped, as `build_vit` skips them). The projectors: Gemma 3's average pool →
//! RMS norm → projection; Gemma 4's average pool → standardization → RMS norm → projection;
//! SmolVLM's n × n patches side by side in one row → projection; LFM2-VL's the same → LayerNorm
//! → GELU feed-forward; Qwen's 2 × 2 block in one row → GELU feed-forward (rows put back in
//! reading order after Qwen2.5-VL's windows).
//!
//! Where llama.cpp rounds, so do we: its matmuls over F16 weights take f16 activations (the
//! patches' pixels too, through `im2col`), and its default CPU attention (flash attention)
//! keeps keys and values in f16 and runs the tiled kernel with an f32 query.

use std::ops::Range;

use half::f16;

use super::ProjectorFacts;
use super::backend::{CpuVision, OwnMatrix, VisionBackend, ZEROS};
use super::image::{Filter, RgbImage};
use crate::model::ops::{apply_rope, gelu, gelu_quick, rope_table, silu};
use crate::model::{Matrix, ModelBytes, ModelError, Norm, Rope, RopeStyle, Tensors};
use crate::tensor::{WeightLayout, WeightType};

/// A matrix, its bias, and the bounds Gemma 4 clamps its input and output to.
pub(crate) struct Linear {
    pub matrix: Matrix,
    pub bias: Option<Vec<f32>>,
    pub clamp: Option<Clamp>,
}

/// Gemma 4's `Gemma4ClippableLinear`: the input clamped before the product, the output after
/// it and before any bias (ggml's `clamp`, `max(min(x, high), low)`); a bound the file does not
/// give is ±`f32::MAX`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Clamp {
    pub input: (f32, f32),
    pub output: (f32, f32),
}

pub(crate) fn clamp_all(x: &mut [f32], (low, high): (f32, f32)) {
    x.iter_mut().for_each(|v| *v = v.min(high).max(low));
}

/// One encoder layer, as clip.cpp's `build_vit` runs it: the parts a file lacks are skipped
/// (SigLIP has no Q/K norms, post norms, gate or output scale; Gemma 4 has them all).
struct Layer {
    norm1: Norm,
    qkv: Qkv,
    /// Q and K normalized per head (a head's width of weights) or whole (the encoder's).
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    out: Linear,
    attn_post_norm: Option<Vec<f32>>,
    norm2: Norm,
    /// The feed-forward is gated (`act(gate) · up`) where the file has a gate.
    gate: Option<Linear>,
    up: Linear,
    down: Linear,
    ffn_post_norm: Option<Vec<f32>>,
    /// The whole residual stream scaled after the layer (Gemma 4's `layer_scalar`).
    out_scale: Option<f32>,
    /// Qwen3-VL's deepstack: the layer's output, merged as the merger merges it, through a
    /// feed-forward of its own, goes beside the picture's embeddings (the language model adds
    /// it after one of its first layers).
    deepstack: Option<Deepstack>,
}

/// A deepstack merger: each 2 × 2 block of the layer's output in one row, a LayerNorm, then a
/// GELU feed-forward to the language model's width.
struct Deepstack {
    norm: Norm,
    up: Linear,
    down: Linear,
}

/// The attention's Q, K and V projections: three matrices, or one of three times the width whose
/// output rows hold Q, K and V side by side (Qwen-VL's `attn_qkv`).
enum Qkv {
    Separate(Box<[Linear; 3]>),
    Fused(Linear),
}

/// The feed-forward's activation, as clip.cpp picks it: `clip.use_gelu` GELU, `clip.use_silu`
/// SiLU (Qwen2.5-VL's), otherwise quick GELU, which Gemma 4's and Qwen2-VL's files get, their
/// converters writing neither key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum FeedForward {
    Gelu,
    GeluQuick,
    Silu,
}

impl FeedForward {
    pub(crate) fn apply(self, x: f32) -> f32 {
        match self {
            FeedForward::Gelu => gelu(x),
            FeedForward::GeluQuick => gelu_quick(x),
            FeedForward::Silu => silu(x),
        }
    }

    /// `gate = act(gate) · up`, rows `width` wide. ggml's SwiGLU takes each row's first
    /// multiple of 8 through its vectorized SiLU and the rest through libm's `expf`
    /// (Qwen2.5-VL's feed-forward is 3420 wide).
    pub(crate) fn gated(self, gate: &mut [f32], up: &[f32], width: usize) {
        let vectorized = if self == FeedForward::Silu { width / 8 * 8 } else { width };
        for (gate, up) in gate.chunks_exact_mut(width).zip(up.chunks_exact(width)) {
            let (body, tail) = gate.split_at_mut(vectorized);
            // Branch-free, so that the compiler runs it lanes at a time.
            body.iter_mut().zip(up).for_each(|(g, u)| *g = self.apply(*g) * u);
            tail.iter_mut().zip(&up[vectorized..]).for_each(|(g, u)| *g = *g / (1.0 + (-*g).exp()) * u);
        }
    }
}

/// Which norm an encoder's layers take: LayerNorm (SigLIP, Qwen2-VL, Qwen3-VL) or RMS norm
/// (Gemma 4, Qwen2.5-VL), each times its weight, plus a bias where the file has one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum NormKind {
    Layer,
    Rms,
}

/// Qwen2.5-VL's window attention: the merged grid cut into windows of `units × units` 2 × 2
/// blocks (the last of a row or column smaller), the patches run window by window; every
/// `every`-th layer attends over the whole picture, the others each patch within its window.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Windows {
    every: usize,
    units: usize,
}

/// How the encoder's patch outputs become the language model's embeddings.
enum Projector {
    /// Gemma 4: average pools of `pool × pool` patches scaled by √width, the optional
    /// standardization `(x − bias) · scale`, an RMS norm, then a (clamped) projection; pictures
    /// at their own aspect (see [`VisionEncoder::layout`]).
    Gemma4 { pool: usize, standardize: Option<(Vec<f32>, Vec<f32>)>, projection: Linear },
    /// LFM2-VL: the same pixel unshuffle as SmolVLM's, an optional LayerNorm, then a GELU
    /// feed-forward; pictures at their own aspect, large ones in tiles (see
    /// [`VisionEncoder::layout`]).
    Lfm2 { scale: usize, norm: Option<Norm>, up: Linear, down: Linear },
    /// SmolVLM (idefics3): each `scale × scale` square of patches side by side in one row (a
    /// pixel shuffle), then a linear map; pictures in tiles (see [`VisionEncoder::layout`]).
    Idefics3 {
        scale: usize,
        fc: Linear,
        /// The side a picture's longer side is resized to before it is cut into tiles.
        longest_edge: usize,
    },
    /// Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Qwen3.5 (`qwen2vl_merger`, `qwen2.5vl_merger`,
    /// `qwen3vl_merger`): each 2 × 2 block of patches (already side by side: the encoder runs its
    /// patches block by block) in one row, then a GELU feed-forward; pictures at their own aspect
    /// (see [`VisionEncoder::layout`]).
    QwenMerger { up: Linear, down: Linear },
    /// Gemma 3: average pools of `merge × merge` patches, an RMS norm, then a projection.
    Gemma3 {
        merge: usize,
        norm: Vec<f32>,
        /// `mm.input_projection.weight` transposed (clip.cpp multiplies by its transpose): one
        /// row per output element, in the file's element type.
        projection: Vec<u8>,
        projection_type: WeightType,
    },
}

/// The encoder's shape and its picture's preparation.
#[derive(Clone, Debug)]
pub struct EncoderShape {
    pub image_size: usize,
    pub patch_size: usize,
    pub width: usize,
    pub heads: usize,
    pub eps: f32,
    pub mean: [f32; 3],
    pub std: [f32; 3],
    /// Embeddings per square the encoder takes (for LFM2-VL, whose squares differ in size, the
    /// most one may give), and their width (the language model's).
    pub tokens: usize,
    pub output_width: usize,
    pub feed_forward: usize,
    /// The most squares one picture becomes (SmolVLM's tiles and its whole picture; 1 for
    /// Gemma 3), and the most pixels its preparation holds at once besides the picture.
    pub max_squares: usize,
    pub preparation_pixels: usize,
    /// The most patches one square may have (its side over the patch side, squared, where every
    /// square is the encoder's image size).
    pub max_patches: usize,
}

impl EncoderShape {
    /// The most bytes an encoding holds at once besides the weights, from the shape alone (the
    /// fitted picture, its patches, the residual stream and a layer's buffers): what a caller
    /// sets aside before encoding, and the bound the fuzz target holds an encoding to.
    pub fn work_bytes(&self) -> usize {
        self.work_bytes_for(self.max_patches)
    }

    /// [`work_bytes`](Self::work_bytes) where a picture's largest square has `patches` patches
    /// (what encoding a given picture holds; the shape's bound is for the largest it may take).
    pub fn work_bytes_for(&self, patches: usize) -> usize {
        let feed_forward = self.feed_forward;
        let n = patches.min(self.max_patches);
        let squares = self.max_squares * n * self.patch_size * self.patch_size * 3;
        let patches = n * self.patch_values() * 4;
        // x, h, q, k, v, the rounded keys and values, the attention's output and its projection,
        // the feed-forward's three (gate, up, down), and the activations quantized for a matmul
        // (at most f32's) with their clamped copy.
        let rows = n * (9 * self.width + 3 * feed_forward) * 4 + 2 * n * self.width.max(feed_forward) * 4;
        // A square's rows through the projector (its input, twice for a pixel shuffle), and the
        // embeddings of every square of the picture.
        let projector = n * self.width * 4 * 3 + self.tokens * (self.width + self.output_width) * 8;
        let embeddings = self.max_squares * self.tokens * self.output_width * 4;
        self.preparation_pixels * 3 + squares + patches + rows + projector + embeddings
    }

    pub fn patches_per_side(&self) -> usize {
        self.image_size / self.patch_size
    }

    fn patch_values(&self) -> usize {
        3 * self.patch_size * self.patch_size
    }
}

/// A vision projector file loaded for encoding: its bytes, and views of its tensors.
pub struct VisionEncoder {
    bytes: ModelBytes,
    facts: ProjectorFacts,
    shape: EncoderShape,
    /// The patch convolution's kernel in F16, one row per output channel: llama.cpp's
    /// `ggml_conv_2d` multiplies in F16 whatever the file holds (its `im2col` is F16, which
    /// makes ggml round an F32 kernel to F16 too).
    patch_embd: Vec<u8>,
    /// Qwen-VL's second kernel: its convolution spans two frames, which the converter splits
    /// into two kernels; a still picture goes through both and the two are added.
    patch_embd_second_frame: Option<Vec<u8>>,
    patch_bias: Option<Vec<f32>>,
    /// Learned position embeddings, one row per patch of a `position_side` square grid; for
    /// Gemma 4, two tables of `position_side` rows, one by column and one by row. Qwen2-VL and
    /// Qwen2.5-VL have none (their heads' rotation alone places a patch).
    positions: Option<Vec<f32>>,
    position_side: usize,
    /// Gemma 4's encoder: values normalized per head, pixels in −1..1, and each head's two
    /// halves rotated by the patch's column and row.
    gemma4: bool,
    /// Qwen-VL's encoder: patches run in 2 × 2 blocks (each block's four in reading order, the
    /// blocks row by row), the learned positions (where the file has them) resized to the
    /// picture (bilinear, corners aligned) and each head rotated by the patch's row and column
    /// (vision M-RoPE).
    qwen: bool,
    norm_kind: NormKind,
    /// Qwen2.5-VL's window attention, where the file asks for it.
    windows: Option<Windows>,
    feed_forward: FeedForward,
    /// The least and most rows of output a picture takes, for projectors that size pictures at
    /// their own aspect (Gemma 4, LFM2-VL), and the projector's own (the most buffers are sized
    /// for); `None` for the others.
    image_tokens: Option<(usize, usize)>,
    own_image_tokens: Option<(usize, usize)>,
    layers: Vec<Layer>,
    post_norm: Option<Norm>,
    projector: Projector,
}

/// A picture's embeddings: `tokens` rows of the language model's width.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageEmbeddings {
    pub tokens: usize,
    pub width: usize,
    pub values: Vec<f32>,
    /// The rows' grid (columns, rows), where the language model places them by it (Qwen-VL's
    /// M-RoPE: a row at column x and row y of a picture starting at position p takes positions
    /// (p, p + y, p + x), and the text after it starts at p + the grid's longer side).
    pub grid: Option<[usize; 2]>,
}

/// A square's embeddings as a backend leaves them ([`VisionEncoder::run_square`]): the
/// projector's rows, then each deepstack layer's (Qwen3-VL), `tokens` rows each.
pub(crate) struct SquareRows<R> {
    pub parts: Vec<R>,
    pub tokens: usize,
    /// The embeddings' width: all the parts' together.
    pub width: usize,
    pub grid: Option<[usize; 2]>,
}

impl<R> SquareRows<R> {
    /// The embeddings from the parts' values: each row the projector's, then each deepstack
    /// layer's, in layer order.
    pub(crate) fn assemble(&self, mut parts: Vec<Vec<f32>>) -> ImageEmbeddings {
        let (tokens, width, grid) = (self.tokens, self.width, self.grid);
        if parts.len() == 1 {
            let values = parts.pop().unwrap_or_default();
            return ImageEmbeddings { tokens, width, values, grid };
        }
        let values = (0..tokens)
            .flat_map(|t| {
                parts.iter().flat_map(move |p| {
                    let part_width = p.len() / tokens.max(1);
                    &p[t * part_width..][..part_width]
                })
            })
            .copied()
            .collect();
        ImageEmbeddings { tokens, width, values, grid }
    }
}

/// A picture as it goes into a prompt, in order: the projector's marker text and the squares
/// the encoder takes (as mtmd lays them out).
#[derive(Clone, Debug, PartialEq)]
pub enum PicturePart {
    /// Text, tokenized with special tokens parsed (`<start_of_image>`, `<row_1_col_2>`, `\n`).
    Text(String),
    /// A square the encoder takes: [`EncoderShape::tokens`] rows of embeddings in the prompt.
    Square(RgbImage),
}

/// A picture encoded for a prompt: its layout, each square's rows in order in the embeddings.
pub struct EncodedPicture {
    pub parts: Vec<PromptPart>,
    pub embeddings: ImageEmbeddings,
}

/// A picture being encoded square by square ([`VisionEncoder::begin`]).
pub struct PictureEncoding {
    /// The layout's parts, each taken once it is encoded.
    parts: Vec<Option<PicturePart>>,
    next: usize,
    /// Squares left, and in all.
    left: usize,
    total: usize,
    encoded: Vec<PromptPart>,
    values: Vec<f32>,
    width: usize,
    grid: Option<[usize; 2]>,
}

impl PictureEncoding {
    /// Squares still to encode.
    pub fn squares_left(&self) -> usize {
        self.left
    }

    /// Squares in all.
    pub fn squares(&self) -> usize {
        self.total
    }

    /// The next square to encode (the layout's text before it taken), none when all are: a
    /// device encodes it, and [`add_square`](Self::add_square) takes its embeddings.
    pub fn next_square(&mut self) -> Option<RgbImage> {
        while let Some(slot) = self.parts.get_mut(self.next) {
            self.next += 1;
            match slot.take() {
                Some(PicturePart::Text(text)) => self.encoded.push(PromptPart::Text(text)),
                Some(PicturePart::Square(square)) => return Some(square),
                None => {}
            }
        }
        None
    }

    /// The embeddings of the square [`next_square`](Self::next_square) gave.
    pub fn add_square(&mut self, rows: ImageEmbeddings) {
        self.encoded.push(PromptPart::Rows(rows.tokens));
        self.values.extend_from_slice(&rows.values);
        // A picture placed by its grid is one square.
        self.grid = rows.grid;
        self.left = self.left.saturating_sub(1);
    }

    /// The encoded picture, once [`squares_left`](Self::squares_left) is 0: the layout's text
    /// after the last square is taken here.
    pub fn finish(mut self) -> EncodedPicture {
        for part in self.parts.drain(self.next..).flatten() {
            if let PicturePart::Text(text) = part {
                self.encoded.push(PromptPart::Text(text));
            }
        }
        let width = self.width;
        let tokens = self.values.len() / width.max(1);
        EncodedPicture {
            parts: self.encoded,
            embeddings: ImageEmbeddings { tokens, width, values: self.values, grid: self.grid },
        }
    }
}

/// One part of an encoded picture's place in a prompt.
#[derive(Clone, Debug, PartialEq)]
pub enum PromptPart {
    Text(String),
    /// The next `n` rows of the picture's embeddings.
    Rows(usize),
}

/// The largest square an encoder may take, and the most patches it may cut it into (real ones:
/// 896 px in 4,096 patches for Gemma 3, 1,024 for SmolVLM's 512 px).
const MAX_IMAGE_SIZE: usize = 4096;
const MAX_PATCHES: usize = 1 << 16;
/// The most tiles a picture may be cut into (SmolVLM's 2048 px in tiles of 512: 16;
/// Idefics3-8B's 1820 in 364: 25).
const MAX_TILES: usize = 64;

/// Gemma 4's preparation (clip.cpp's limits): pictures at their own aspect with 70 to 1120 rows
/// of output, its pool's default, and its RoPE's base.
const GEMMA4_MIN_TOKENS: usize = 70;
const GEMMA4_MAX_TOKENS: usize = 1120;
const GEMMA4_POOL: usize = 3;
const GEMMA4_ROPE_BASE: f32 = 100.0;
/// Qwen-VL's preparation (clip.cpp's limits): pictures at their own aspect with 8 to 4096 rows
/// of output, in 2 × 2 blocks of patches.
const QWEN_MIN_TOKENS: usize = 8;
const QWEN_MAX_TOKENS: usize = 4096;
const QWEN_MERGE: usize = 2;
const QWEN_ROPE_BASE: f32 = 10_000.0;
/// Qwen2.5-VL's attention window in pixels (clip.cpp's default, which its files do not override).
const QWEN25_WINDOW_PIXELS: usize = 112;
/// The most rows a Gemma 4 position table may claim.
const GEMMA4_MAX_POSITIONS: usize = 1 << 16;

/// LFM2-VL's preparation (mtmd's, from its processor_config.json): pictures at their own aspect
/// with 64 to 256 rows of output, or, past twice that, in tiles of 512 px (2 to 10 of them, the
/// grid closest to the picture's aspect) and a thumbnail.
const LFM2_MIN_TOKENS: usize = 64;
const LFM2_MAX_TOKENS: usize = 256;
const LFM2_TILE: usize = 512;
const LFM2_TILES: std::ops::RangeInclusive<usize> = 2..=10;

fn required(value: Option<u64>, what: &str) -> Result<usize, ModelError> {
    value
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| ModelError::BadProjector(format!("the file does not say its {what}")))
}

impl VisionEncoder {
    /// Loads a projector file (its whole bytes). Refused with a typed error unless it is a
    /// projector of a type Inferno encodes, every fact it needs is present and sane, and every
    /// tensor has the name, shape, type and size the encoder needs.
    pub fn load(bytes: ModelBytes) -> Result<VisionEncoder, ModelError> {
        let header = bytes.header()?;
        let facts = ProjectorFacts::of(&header).ok_or_else(|| {
            ModelError::BadProjector(
                "the file is not a vision projector (general.architecture is not clip)".into(),
            )
        })?;
        if !facts.problems.is_empty() {
            return Err(ModelError::BadProjector(facts.problems.join("; ")));
        }
        if !super::ENCODED_PROJECTORS.contains(&facts.projector.as_str()) {
            let family = facts.family.map(|f| format!(" ({f})")).unwrap_or_default();
            return Err(ModelError::UnsupportedProjector(format!(
                "type `{}`{family} is not encoded yet; Inferno encodes Gemma 3's (gemma3), \
                 Gemma 4's (gemma4v), SmolVLM's (idefics3), LFM2-VL's (lfm2), Qwen2-VL's \
                 (qwen2vl_merger), Qwen2.5-VL's and Qwen2.5-Omni's pictures (qwen2.5vl_merger, \
                 qwen2.5o) and Qwen3.5's and Qwen3-VL's (qwen3vl_merger)",
                facts.projector
            )));
        }
        let kind = super::vision_type(&facts.projector);
        let idefics3 = kind == "idefics3";
        let lfm2 = kind == "lfm2";
        let gemma4 = kind == "gemma4v";
        let qwen3 = kind == "qwen3vl_merger";
        let qwen25 = kind == "qwen2.5vl_merger";
        // Qwen2-VL's and Qwen2.5-VL's encoders: no learned positions, no patch bias.
        let qwen2 = kind == "qwen2vl_merger" || qwen25;
        let qwen = qwen2 || qwen3;
        let norm_kind = if gemma4 || qwen25 { NormKind::Rms } else { NormKind::Layer };
        let metadata = &header.metadata;
        let flag = |key: &str| metadata.get(key).and_then(|v| v.as_bool()) == Some(true);
        // clip.cpp: `use_gelu` picks GELU, `use_silu` SiLU, neither quick GELU.
        let feed_forward = match (flag("clip.use_gelu"), flag("clip.use_silu")) {
            (true, false) => FeedForward::Gelu,
            (false, false) => FeedForward::GeluQuick,
            (false, true) => FeedForward::Silu,
            (true, true) => {
                return Err(ModelError::BadProjector(
                    "it asks for both GELU and SiLU (clip.use_gelu and clip.use_silu)".into(),
                ));
            }
        };
        let width = required(facts.encoder_width, "encoder width")?;
        let heads = required(facts.encoder_heads, "head count")?;
        let ffn = required(facts.encoder_feed_forward, "feed-forward width")?;
        let n_layers = required(facts.encoder_layers, "layer count")?;
        let image_size = required(facts.image_size, "image size")?;
        let patch_size = required(facts.patch_size, "patch size")?;
        let output_width = required(facts.output_width, "output width")?;
        let per_side = required(facts.patches_per_side, "patches per side")?;
        // Every buffer of an encoding is sized by these: a file may not claim more.
        if image_size > MAX_IMAGE_SIZE || per_side * per_side > MAX_PATCHES {
            return Err(ModelError::BadProjector(format!(
                "an image of {image_size} px in {per_side} × {per_side} patches is beyond what Inferno \
                 encodes ({MAX_IMAGE_SIZE} px, {MAX_PATCHES} patches)"
            )));
        }
        if !width.is_multiple_of(heads) {
            return Err(ModelError::BadProjector(format!(
                "width {width} is not a whole number of {heads} heads"
            )));
        }
        // Gemma 4 rotates each half of a head by its own position, pairs within each half; Qwen
        // a quarter of the head by the row, a quarter by the column, pairs half a head apart.
        if (gemma4 || qwen) && !(width / heads).is_multiple_of(4) {
            return Err(ModelError::BadProjector(format!(
                "heads of {} cannot be rotated in two halves of pairs",
                width / heads
            )));
        }
        let positive = |key: &str| -> Result<Option<usize>, ModelError> {
            metadata
                .get(key)
                .map(|v| {
                    v.as_u64()
                        .and_then(|m| usize::try_from(m).ok())
                        .filter(|&m| m > 0)
                        .ok_or_else(|| ModelError::BadProjector(format!("{key} is not a positive number")))
                })
                .transpose()
        };
        // clip.cpp's default for Gemma 3, which a file may override; SmolVLM's files say theirs
        // (clip.cpp has no default for them); LFM2-VL's converter writes 2 where the model says
        // nothing.
        let merge = match positive("clip.vision.projector.scale_factor")? {
            _ if qwen => match positive("clip.vision.spatial_merge_size")? {
                None | Some(QWEN_MERGE) => QWEN_MERGE,
                Some(other) => {
                    return Err(ModelError::UnsupportedProjector(format!(
                        "its patches merge in blocks of {other} × {other}; clip.cpp's Qwen-VL graph \
                         (and Inferno's) takes 2 × 2"
                    )));
                }
            },
            Some(merge) => merge,
            None if gemma4 => GEMMA4_POOL,
            None if lfm2 => 2,
            None if !idefics3 => 4,
            None => {
                return Err(ModelError::BadProjector(
                    "the file lacks clip.vision.projector.scale_factor, which SmolVLM's pixel shuffle needs"
                        .into(),
                ));
            }
        };
        // Gemma 4's and Qwen's image size is unused (pictures keep their aspect); their sides are
        // bounded by the most rows of output instead.
        let own_image_tokens = own_image_tokens(kind);
        let dyn_size_tokens = own_image_tokens.filter(|_| gemma4 || qwen).map(|(_, most)| most);
        let pixels_at_most = patch_size
            .checked_mul(merge)
            .and_then(|align| align.checked_mul(align))
            .and_then(|area| area.checked_mul(dyn_size_tokens.unwrap_or(0)));
        if dyn_size_tokens.is_some()
            && pixels_at_most.is_none_or(|pixels| pixels > MAX_IMAGE_SIZE * MAX_IMAGE_SIZE)
        {
            return Err(ModelError::BadProjector(format!(
                "{patch_size}-pixel patches merged by {merge} make pictures beyond what Inferno encodes"
            )));
        }
        if (dyn_size_tokens.is_none() && !per_side.is_multiple_of(merge)) || ((idefics3 || lfm2) && merge < 2)
        {
            return Err(ModelError::BadProjector(format!(
                "{per_side} patches per side do not merge in squares of {merge}"
            )));
        }
        // SmolVLM: the longest side a picture is resized to before it is cut into tiles. Older
        // conversions lack it, and mtmd then slices otherwise (llava-uhd's way), which Inferno
        // does not.
        let longest_edge = if idefics3 {
            let edge = positive("clip.vision.preproc_image_size")?.ok_or_else(|| {
                ModelError::UnsupportedProjector(
                    "this SmolVLM projector lacks clip.vision.preproc_image_size (an older \
                     conversion, which mtmd slices another way); convert it again with a current \
                     llama.cpp"
                        .into(),
                )
            })?;
            if edge.div_ceil(image_size).pow(2) > MAX_TILES {
                return Err(ModelError::BadProjector(format!(
                    "pictures resized to {edge} px make more than {MAX_TILES} tiles of {image_size} px"
                )));
            }
            edge
        } else {
            image_size
        };
        // Qwen2.5-VL's windows (clip.cpp requires the pattern of its files, and takes a window of
        // 112 pixels whatever the file says); Qwen2-VL's graph would take windows whose inputs
        // clip.cpp never sets, so a file that asks for them is refused.
        let windows = match positive("clip.vision.n_wa_pattern") {
            _ if !qwen2 => None,
            Ok(Some(every)) if qwen25 => {
                let units = QWEN25_WINDOW_PIXELS / patch_size / QWEN_MERGE;
                // (The cap on a picture's pixels refuses such patches first; a window of no
                // blocks would never end.)
                if units == 0 {
                    return Err(ModelError::BadProjector(format!(
                        "{patch_size}-pixel patches are wider than half of Qwen2.5-VL's window of \
                         {QWEN25_WINDOW_PIXELS} pixels"
                    )));
                }
                Some(Windows { every, units })
            }
            Ok(Some(_)) => {
                return Err(ModelError::UnsupportedProjector(
                    "a Qwen2-VL projector with window attention (clip.vision.n_wa_pattern), which \
                     clip.cpp does not run"
                        .into(),
                ));
            }
            Ok(None) if qwen25 => {
                return Err(ModelError::BadProjector(
                    "the file lacks clip.vision.n_wa_pattern, which Qwen2.5-VL's window attention needs"
                        .into(),
                ));
            }
            Ok(None) => None,
            Err(_) if metadata.get("clip.vision.n_wa_pattern").and_then(|v| v.as_u64()) == Some(0) => None,
            Err(error) => return Err(error),
        };
        let eps =
            match metadata.get("clip.vision.attention.layer_norm_epsilon") {
                None => 1e-6,
                Some(v) => v.as_f64().filter(|e| e.is_finite() && *e >= 0.0).ok_or_else(|| {
                    ModelError::BadProjector("its layer norm epsilon is not a number".into())
                })? as f32,
            };
        let channels = |values: Option<[f64; 3]>, what| {
            values
                .map(|v| v.map(|x| x as f32))
                .ok_or_else(|| ModelError::BadProjector(format!("the file lacks its {what}")))
        };
        let mut shape = EncoderShape {
            image_size,
            patch_size,
            width,
            heads,
            eps,
            mean: channels(facts.image_mean, "image mean")?,
            std: channels(facts.image_std, "image std")?,
            tokens: (per_side / merge) * (per_side / merge),
            output_width,
            feed_forward: ffn,
            max_squares: if idefics3 {
                longest_edge.div_ceil(image_size).pow(2) + 1
            } else if lfm2 {
                LFM2_TILES.end() + 1
            } else {
                1
            },
            // SmolVLM's picture at its longest side, then in whole tiles; LFM2-VL's tiles on their
            // black canvas; Gemma 3's resized one.
            preparation_pixels: if idefics3 {
                2 * (longest_edge.div_ceil(image_size) * image_size).pow(2)
            } else if let Some(most) = dyn_size_tokens {
                most * (patch_size * merge).pow(2)
            } else if lfm2 {
                LFM2_TILES.end() * LFM2_TILE * LFM2_TILE
            } else {
                image_size * image_size
            },
            max_patches: if lfm2 {
                lfm2_max_patches(patch_size, merge)
            } else if let Some(most) = dyn_size_tokens {
                most * merge * merge
            } else {
                per_side * per_side
            },
        };
        if let Some(most) = dyn_size_tokens {
            shape.tokens = most;
        }
        if lfm2 {
            // Rows per square: at most a tile's, or the most a thumbnail may give.
            shape.tokens = shape.max_patches / (merge * merge);
            if shape.max_patches > MAX_PATCHES {
                return Err(ModelError::BadProjector(format!(
                    "{patch_size}-pixel patches make squares of more than {MAX_PATCHES} patches"
                )));
            }
        }

        let tensors = Tensors::new(&header, Some(&bytes));
        let optional_vector = |name: &str, len: usize| -> Result<Option<Vec<f32>>, ModelError> {
            match header.tensor(name) {
                Some(_) => tensors.vector(name, len).map(Some),
                None => Ok(None),
            }
        };
        // A scalar (a tensor of one element) where the file has it.
        let scalar = |name: &str| -> Result<Option<f32>, ModelError> {
            let value = optional_vector(name, 1)?.map(|v| v[0]);
            match value {
                Some(v) if v.is_nan() => Err(ModelError::BadProjector(format!("{name} is not a number"))),
                _ => Ok(value),
            }
        };
        let linear = |name: &str, rows: usize, cols: usize| -> Result<Linear, ModelError> {
            let matrix = tensors.matrix(&format!("{name}.weight"), rows, cols)?;
            let bias = optional_vector(&format!("{name}.bias"), rows)?;
            // clip.cpp reads Gemma 4's clamps for every matrix that has them.
            // clip.cpp clamps every Gemma 4 linear, to ±FLT_MAX where the file gives no bound
            // (which turns an infinity or a NaN into a finite value).
            let clamp = if gemma4 {
                let bound =
                    |key: &str, open: f32| scalar(&format!("{name}.{key}")).map(|v| v.unwrap_or(open));
                let input = (bound("input_min", f32::MIN)?, bound("input_max", f32::MAX)?);
                let output = (bound("output_min", f32::MIN)?, bound("output_max", f32::MAX)?);
                Some(Clamp { input, output })
            } else {
                None
            };
            // clip.cpp does not repack its weights: llama.cpp's plain kernels multiply them.
            Ok(Linear { matrix: Matrix { layout: WeightLayout::Plain, ..matrix }, bias, clamp })
        };
        // RMS norms (Gemma 4, Qwen2.5-VL) take a bias only where the file has one; LayerNorms
        // always do.
        let norm = |prefix: &str| -> Result<Norm, ModelError> {
            if norm_kind == NormKind::Rms {
                let weight = tensors.vector(&format!("{prefix}.weight"), width)?;
                Ok(Norm { weight, bias: optional_vector(&format!("{prefix}.bias"), width)? })
            } else {
                tensors.layer_norm(prefix, width)
            }
        };
        let kernel = |name: &str| -> Result<Vec<u8>, ModelError> {
            let kernel = tensors.flattened_matrix(name, &[patch_size, patch_size, 3, width])?;
            match kernel.weight_type {
                WeightType::F16 => Ok(kernel.bytes(&bytes).to_vec()),
                WeightType::F32 => Ok(kernel
                    .bytes(&bytes)
                    .chunks_exact(4)
                    .flat_map(|b| f16::from_f32(f32::from_le_bytes([b[0], b[1], b[2], b[3]])).to_le_bytes())
                    .collect()),
                _ => Err(ModelError::BadProjector(format!(
                    "{name} must be F16 or F32 (llama.cpp's convolution takes no other type)"
                ))),
            }
        };
        let patch_embd = kernel("v.patch_embd.weight")?;
        let patch_embd_second_frame = if qwen { Some(kernel("v.patch_embd.weight.1")?) } else { None };
        // clip.cpp's Gemma 4 graph adds no patch bias, whatever the file holds; its Qwen2-VL
        // graph asserts there is none.
        let patch_bias = if gemma4 { None } else { optional_vector("v.patch_embd.bias", width)? };
        if qwen2 && patch_bias.is_some() {
            return Err(ModelError::BadProjector(
                "it has a patch bias (v.patch_embd.bias), which clip.cpp's Qwen2-VL graph refuses".into(),
            ));
        }
        // LFM2-VL resizes its grid of positions to each square's patches, whatever its size
        // (clip.cpp takes the side from the tensor); the others' grid is the image's.
        let position_side = match header.tensor("v.position_embd.weight").map(|t| t.dims.as_slice()) {
            Some([_, count, 2]) if gemma4 => match usize::try_from(*count) {
                Ok(count) if (1..=GEMMA4_MAX_POSITIONS).contains(&count) => count,
                _ => {
                    return Err(ModelError::BadProjector(format!(
                        "v.position_embd.weight claims {count} positions per axis"
                    )));
                }
            },
            Some([_, count]) if lfm2 || qwen3 => {
                let side = (*count as f64).sqrt() as usize;
                if side == 0 || (side * side) as u64 != *count {
                    return Err(ModelError::BadProjector(format!(
                        "v.position_embd.weight has {count} positions, not a square grid"
                    )));
                }
                side
            }
            _ => per_side,
        };
        let positions = if gemma4 {
            Some(tensors.decoded("v.position_embd.weight", &[width, position_side, 2])?)
        } else if qwen2 {
            // clip.cpp's Qwen2-VL graph reads none, whatever the file holds.
            None
        } else {
            Some(tensors.decoded("v.position_embd.weight", &[width, position_side * position_side])?)
        };
        let head_dim = width / heads;
        // Q/K norms: per head, or across the whole width.
        // Q/K norms: per head where the Q norm is a head wide, else across the whole width
        // (clip.cpp decides by the Q norm alone; the K norm must then be as wide).
        let qk_norm = |name: &str, per_head: bool| -> Result<Option<Vec<f32>>, ModelError> {
            match header.tensor(name) {
                None => Ok(None),
                Some(_) => tensors.vector(name, if per_head { head_dim } else { width }).map(Some),
            }
        };
        // A feed-forward's width: its first matrix's rows (ggml's ne[1]).
        let hidden_of = |name: &str| -> Result<usize, ModelError> {
            match header.tensor(name).map(|t| t.dims.as_slice()) {
                Some(&[_, rows]) if (1..=1 << 16).contains(&rows) => Ok(rows as usize),
                Some(_) => Err(ModelError::BadProjector(format!("{name} is not a matrix of sane size"))),
                None => Err(ModelError::BadProjector(format!("the file lacks {name}"))),
            }
        };
        // Qwen3-VL's output rows hold the merger's embedding, then each deepstack layer's.
        let has_deepstack =
            |i: usize| header.tensor(&format!("{}{i}.fc1.weight", super::DEEPSTACK_PREFIX)).is_some();
        let deepstack_layers = (0..n_layers).filter(|&i| qwen && has_deepstack(i)).count();
        if header.tensors.iter().any(|t| t.name.starts_with(super::DEEPSTACK_PREFIX))
            && (!qwen || deepstack_layers == 0)
        {
            return Err(ModelError::BadProjector(
                "it has deepstack tensors, which only a Qwen3-VL merger with their fc1 takes".into(),
            ));
        }
        // The file's output width counts its deepstack layers as clip.cpp does (every fc2); the
        // encoder's must come to the same.
        let embedding_width = output_width / (1 + deepstack_layers);
        if embedding_width * (1 + deepstack_layers) != output_width {
            return Err(ModelError::BadProjector(format!(
                "its output width {output_width} is not its embedding and {deepstack_layers} deepstack \
                 layers of one width"
            )));
        }
        let merged = width * QWEN_MERGE * QWEN_MERGE;
        let mut layers = Vec::with_capacity(n_layers);
        for i in 0..n_layers {
            let p = format!("v.blk.{i}");
            let deepstack = match qwen && has_deepstack(i) {
                true => {
                    let d = format!("{}{i}", super::DEEPSTACK_PREFIX);
                    let hidden = hidden_of(&format!("{d}.fc1.weight"))?;
                    Some(Deepstack {
                        norm: tensors.layer_norm(&format!("{d}.norm"), merged)?,
                        up: linear(&format!("{d}.fc1"), hidden, merged)?,
                        down: linear(&format!("{d}.fc2"), embedding_width, hidden)?,
                    })
                }
                false => None,
            };
            let (up_name, down_name) = feed_forward_names(&header, kind, i, width);
            let up = linear(&format!("{p}.{up_name}"), ffn, width);
            let down = linear(&format!("{p}.{down_name}"), width, ffn);
            let gate = match header.tensor(&format!("{p}.ffn_gate.weight")) {
                Some(_) => Some(linear(&format!("{p}.ffn_gate"), ffn, width)?),
                None => None,
            };
            let out_scale = scalar(&format!("{p}.out_scale.weight"))?;
            let per_head = header
                .tensor(&format!("{p}.attn_q_norm.weight"))
                .is_some_and(|t| t.dims.as_slice() == [head_dim as u64]);
            // Parts of clip.cpp's ViT no encoder here has: refused rather than left out.
            for part in ["ls1", "ls2"] {
                if header.tensor(&format!("{p}.{part}.weight")).is_some() {
                    return Err(ModelError::UnsupportedProjector(format!(
                        "{p}.{part}.weight (a layer scale) is not applied by Inferno's encoders"
                    )));
                }
            }
            let qkv = match header.tensor(&format!("{p}.attn_qkv.weight")) {
                Some(_) => Qkv::Fused(linear(&format!("{p}.attn_qkv"), 3 * width, width)?),
                None => Qkv::Separate(Box::new([
                    linear(&format!("{p}.attn_q"), width, width)?,
                    linear(&format!("{p}.attn_k"), width, width)?,
                    linear(&format!("{p}.attn_v"), width, width)?,
                ])),
            };
            layers.push(Layer {
                norm1: norm(&format!("{p}.ln1"))?,
                qkv,
                q_norm: qk_norm(&format!("{p}.attn_q_norm.weight"), per_head)?,
                k_norm: qk_norm(&format!("{p}.attn_k_norm.weight"), per_head)?,
                out: linear(&format!("{p}.attn_out"), width, width)?,
                attn_post_norm: optional_vector(&format!("{p}.attn_post_norm.weight"), width)?,
                norm2: norm(&format!("{p}.ln2"))?,
                gate,
                up: up?,
                down: down?,
                ffn_post_norm: optional_vector(&format!("{p}.ffn_post_norm.weight"), width)?,
                out_scale,
                deepstack,
            });
        }
        if header.tensor("v.pre_ln.weight").is_some() {
            return Err(ModelError::UnsupportedProjector(
                "v.pre_ln (a norm before the first layer) is not applied by Inferno's encoders".into(),
            ));
        }
        let post_norm = match header.tensor("v.post_ln.weight") {
            Some(_) => Some(norm("v.post_ln")?),
            None => None,
        };
        let projector = if qwen {
            let hidden = hidden_of("mm.0.weight")?;
            Projector::QwenMerger {
                up: linear("mm.0", hidden, merged)?,
                down: linear("mm.2", embedding_width, hidden)?,
            }
        } else if gemma4 {
            // clip.cpp standardizes only where the file has both.
            let standardize =
                match (optional_vector("v.std_bias", width)?, optional_vector("v.std_scale", width)?) {
                    (Some(bias), Some(scale)) => Some((bias, scale)),
                    _ => None,
                };
            // clip.cpp's Gemma 4 graph adds no bias to the projection, whatever the file holds.
            let projection = Linear { bias: None, ..linear("mm.input_projection", output_width, width)? };
            Projector::Gemma4 { pool: merge, standardize, projection }
        } else if lfm2 {
            let shuffled = width * merge * merge;
            let norm = match header.tensor("mm.input_norm.weight") {
                Some(_) => Some(tensors.layer_norm("mm.input_norm", shuffled)?),
                None => None,
            };
            let hidden = hidden_of("mm.1.weight")?;
            Projector::Lfm2 {
                scale: merge,
                norm,
                up: linear("mm.1", hidden, shuffled)?,
                down: linear("mm.2", output_width, hidden)?,
            }
        } else if idefics3 {
            let fc = linear("mm.model.fc", output_width, width * merge * merge)?;
            Projector::Idefics3 { scale: merge, fc, longest_edge }
        } else {
            let norm = tensors.vector("mm.soft_emb_norm.weight", width)?;
            // ggml dims [output, width]: `width` rows of `output`, which clip.cpp transposes.
            let stored = tensors.matrix("mm.input_projection.weight", width, output_width)?;
            let (projection, projection_type) = transposed(&stored, &bytes)?;
            Projector::Gemma3 { merge, norm, projection, projection_type }
        };
        Ok(VisionEncoder {
            bytes,
            facts,
            shape,
            patch_embd,
            patch_embd_second_frame,
            patch_bias,
            positions,
            position_side,
            gemma4,
            qwen,
            norm_kind,
            windows,
            feed_forward,
            image_tokens: own_image_tokens,
            own_image_tokens,
            layers,
            post_norm,
            projector,
        })
    }

    /// The projector file, which the encoder's matrices view.
    #[cfg_attr(not(feature = "gpu"), allow(dead_code, reason = "the GPU's encoder reads it"))]
    pub(crate) fn file(&self) -> &ModelBytes {
        &self.bytes
    }

    /// What the file says about itself.
    pub fn facts(&self) -> &ProjectorFacts {
        &self.facts
    }

    pub fn shape(&self) -> &EncoderShape {
        &self.shape
    }

    /// The least and most rows of output a picture takes now, for projectors that size pictures
    /// at their own aspect (Gemma 4, LFM2-VL); `None` for those whose pictures have a fixed size.
    pub fn image_tokens(&self) -> Option<(usize, usize)> {
        self.image_tokens
    }

    /// Limits the rows a picture takes (mtmd's `image_min_tokens` and `image_max_tokens`), each
    /// `None` for the projector's own; returns the limits now in force. A projector whose pictures
    /// have a fixed size takes none (`None`, as mtmd ignores them). Refused, the limits as they
    /// were, below 1 row, with the least above the most, or with the most above the projector's
    /// own (what the encoder's buffers are bounded by).
    pub fn set_image_tokens(
        &mut self,
        min: Option<usize>,
        max: Option<usize>,
    ) -> Result<Option<(usize, usize)>, String> {
        let Some(own) = self.own_image_tokens else { return Ok(None) };
        let (min, max) = image_token_limits(&self.facts.projector, own, min, max)?;
        self.image_tokens = Some((min, max));
        self.facts.image_tokens = Some([min as u64, max as u64]);
        Ok(self.image_tokens)
    }

    /// Whether a picture's rows attend to each other both ways in a language model of width
    /// `model_width` (mtmd's `mtmd_decode_use_non_causal`): Gemma 3's do; Gemma 4's do except in
    /// E2B and E4B (widths 1536 and 2560), which mtmd runs causally; SmolVLM's and LFM2-VL's
    /// do not.
    pub fn attends_both_ways(&self, model_width: usize) -> bool {
        match self.projector {
            Projector::Gemma3 { .. } => true,
            Projector::Gemma4 { .. } => !matches!(model_width, 1536 | 2560),
            Projector::Idefics3 { .. } | Projector::Lfm2 { .. } | Projector::QwenMerger { .. } => false,
        }
    }

    /// A picture as mtmd puts it into a prompt: marker text and the squares the encoder takes.
    /// - Gemma 3: `<start_of_image>`, the picture fitted on a black square, `<end_of_image>`.
    /// - SmolVLM: the picture's longer side resized to the projector's longest side (the other
    ///   in proportion, made even), both sides then stretched to whole tiles, and the tiles row
    ///   by row, each after `<fake_token_around_image><row_R_col_C>`, rows apart by a newline;
    ///   then the whole picture squeezed to one tile, between `\n\n<fake_token_around_image>
    ///   <global-img>` and `<fake_token_around_image>`. Every resize is Lanczos.
    ///
    /// Refused (`bad_image`) where a side would shrink to nothing.
    pub fn layout(&self, image: &RgbImage) -> Result<Vec<PicturePart>, ModelError> {
        let size = self.shape.image_size;
        let longest_edge = match &self.projector {
            Projector::Lfm2 { scale, .. } => return self.lfm2_layout(image, *scale),
            Projector::Gemma4 { pool, .. } => return self.gemma4_layout(image, *pool),
            Projector::QwenMerger { .. } => {
                let tokens = self.image_tokens.unwrap_or((QWEN_MIN_TOKENS, QWEN_MAX_TOKENS));
                let square = self.dyn_size_square(image, QWEN_MERGE, tokens, "Qwen-VL")?;
                return Ok(vec![
                    PicturePart::Text("<|vision_start|>".into()),
                    PicturePart::Square(square),
                    PicturePart::Text("<|vision_end|>".into()),
                ]);
            }
            Projector::Gemma3 { .. } => {
                return Ok(vec![
                    PicturePart::Text("<start_of_image>".into()),
                    PicturePart::Square(image.fit_on_black(size, size, Filter::Bilinear)),
                    PicturePart::Text("<end_of_image>".into()),
                ]);
            }
            Projector::Idefics3 { longest_edge, .. } => *longest_edge,
        };
        let (width, height) = (image.width(), image.height());
        // mtmd's arithmetic: the ratio in f64, the shorter side truncated, then made even.
        let aspect = width as f64 / height as f64;
        let even = |side: usize| side + side % 2;
        let (new_width, new_height) = if width >= height {
            (longest_edge, even((longest_edge as f64 / aspect) as usize))
        } else {
            (even((longest_edge as f64 * aspect) as usize), longest_edge)
        };
        if new_width == 0 || new_height == 0 {
            return Err(ModelError::BadImage(format!(
                "a {width} × {height} picture is too narrow for this projector: resized to \
                 {longest_edge} px on its longer side, its shorter side would be 0"
            )));
        }
        let (cols, rows) = (new_width.div_ceil(size), new_height.div_ceil(size));
        let refined = image.resized(new_width, new_height, Filter::Lanczos).resized(
            cols * size,
            rows * size,
            Filter::Lanczos,
        );
        let mut parts = Vec::with_capacity(2 * cols * rows + 3);
        for row in 0..rows {
            for col in 0..cols {
                parts.push(PicturePart::Text(format!(
                    "<fake_token_around_image><row_{}_col_{}>",
                    row + 1,
                    col + 1
                )));
                parts.push(PicturePart::Square(refined.crop(col * size, row * size, size, size)));
            }
            if row + 1 < rows {
                parts.push(PicturePart::Text("\n".into()));
            }
        }
        parts.push(PicturePart::Text("\n\n<fake_token_around_image><global-img>".into()));
        parts.push(PicturePart::Square(refined.resized(size, size, Filter::Lanczos)));
        parts.push(PicturePart::Text("<fake_token_around_image>".into()));
        Ok(parts)
    }

    /// LFM2-VL's layout (mtmd's `mtmd_image_preprocessor_lfm2`), bilinear throughout: a picture
    /// whose sides, rounded to whole output rows, hold at most twice [`LFM2_MAX_TOKENS`] rows
    /// goes whole, resized to its own aspect with 64 to 256 rows ([`lfm2_size`]), between
    /// `<|image_start|>` and `<|image_end|>`. A larger one is fitted on black to the grid of
    /// 512 px tiles closest to its aspect ([`lfm2_grid`]), the tiles each after
    /// `<|img_row_R_col_C|>`, then the whole picture resized as above after `<|img_thumbnail|>`.
    fn lfm2_layout(&self, image: &RgbImage, merge: usize) -> Result<Vec<PicturePart>, ModelError> {
        let (patch, align) = (self.shape.patch_size, self.shape.patch_size * merge);
        let (width, height) = (image.width(), image.height());
        let tokens = self.image_tokens.unwrap_or((LFM2_MIN_TOKENS, LFM2_MAX_TOKENS));
        let (new_width, new_height) = lfm2_size(width, height, align, tokens);
        let patches = (new_width / patch) * (new_height / patch);
        if patches > self.shape.max_patches {
            return Err(ModelError::BadImage(format!(
                "a {width} × {height} picture is too long and thin for this projector: resized as \
                 LFM2-VL resizes it, {new_width} × {new_height}, it would be {patches} patches, over \
                 the {} Inferno encodes in one square",
                self.shape.max_patches
            )));
        }
        let whole = image.resized(new_width, new_height, Filter::Bilinear);
        let mut parts = vec![PicturePart::Text("<|image_start|>".into())];
        if let Some((cols, rows)) = lfm2_grid(width, height, patch, align, tokens.1) {
            let refined = image.fit_on_black(cols * LFM2_TILE, rows * LFM2_TILE, Filter::Bilinear);
            for row in 0..rows {
                for col in 0..cols {
                    parts.push(PicturePart::Text(format!("<|img_row_{}_col_{}|>", row + 1, col + 1)));
                    let tile = refined.crop(col * LFM2_TILE, row * LFM2_TILE, LFM2_TILE, LFM2_TILE);
                    parts.push(PicturePart::Square(tile));
                }
            }
            parts.push(PicturePart::Text("<|img_thumbnail|>".into()));
        }
        parts.push(PicturePart::Square(whole));
        parts.push(PicturePart::Text("<|image_end|>".into()));
        Ok(parts)
    }

    /// Gemma 4's layout (mtmd's `dyn_size` preprocessing): the picture fitted on black (bicubic)
    /// to its own aspect with sides multiples of a patch times the pool and 70 to 1120 rows of
    /// output ([`smart_size`]), between `<|image>` and `<image|>`. Refused (`bad_image`) where a
    /// very thin picture, its short side raised to one pool, would have more patches than the
    /// encoder takes, or a side more than the position tables have rows (mtmd reads past them).
    fn gemma4_layout(&self, image: &RgbImage, pool: usize) -> Result<Vec<PicturePart>, ModelError> {
        let patch = self.shape.patch_size;
        let (width, height) = (image.width(), image.height());
        let tokens = self.image_tokens.unwrap_or((GEMMA4_MIN_TOKENS, GEMMA4_MAX_TOKENS));
        let square = self.dyn_size_square(image, pool, tokens, "Gemma 4")?;
        let (new_width, new_height) = (square.width(), square.height());
        let longest = (new_width / patch).max(new_height / patch);
        if longest > self.position_side {
            return Err(ModelError::BadImage(format!(
                "a {width} × {height} picture is too long and thin for this projector: resized as \
                 Gemma 4 resizes it, {new_width} × {new_height}, a side would have {longest} patches, \
                 past its {} positions",
                self.position_side
            )));
        }
        Ok(vec![
            PicturePart::Text("<|image>".into()),
            PicturePart::Square(square),
            PicturePart::Text("<image|>".into()),
        ])
    }

    /// mtmd's `dyn_size` preprocessing (Gemma 4's and Qwen-VL's): the picture fitted on black
    /// (bicubic) to its own aspect with sides multiples of a patch times `merge` and `min..=max`
    /// rows of output ([`smart_size`]). Refused (`bad_image`) where a very thin picture, its short
    /// side raised to one block, would have more patches than the encoder takes.
    fn dyn_size_square(
        &self,
        image: &RgbImage,
        merge: usize,
        (min, max): (usize, usize),
        family: &str,
    ) -> Result<RgbImage, ModelError> {
        let (patch, align) = (self.shape.patch_size, self.shape.patch_size * merge);
        let (width, height) = (image.width(), image.height());
        let (new_width, new_height) =
            smart_size(width, height, align, min * align * align, max * align * align);
        let patches = (new_width / patch) * (new_height / patch);
        if patches > self.shape.max_patches {
            return Err(ModelError::BadImage(format!(
                "a {width} × {height} picture is too long and thin for this projector: resized as \
                 {family} resizes it, {new_width} × {new_height}, it would be {patches} patches, over \
                 the {} Inferno encodes",
                self.shape.max_patches
            )));
        }
        Ok(image.fit_on_black(new_width, new_height, Filter::Bicubic))
    }

    /// A picture encoded for a prompt: every square of its [`layout`](Self::layout) encoded,
    /// their rows in order.
    pub fn encode_for_prompt(&self, image: &RgbImage) -> Result<EncodedPicture, ModelError> {
        let mut encoding = self.begin(image)?;
        while encoding.squares_left() > 0 {
            self.encode_next(&mut encoding)?;
        }
        Ok(encoding.finish())
    }

    /// A picture laid out for encoding square by square ([`VisionEncoder::encode_next`]), so
    /// that a caller can report progress and stop between squares (a tiled picture is up to 17
    /// encodings).
    pub fn begin(&self, image: &RgbImage) -> Result<PictureEncoding, ModelError> {
        let parts = self.layout(image)?;
        let squares = parts.iter().filter(|part| matches!(part, PicturePart::Square(_))).count();
        Ok(PictureEncoding {
            parts: parts.into_iter().map(Some).collect(),
            next: 0,
            left: squares,
            total: squares,
            encoded: Vec::with_capacity(2 * squares + 1),
            values: Vec::new(),
            width: self.shape.output_width,
            grid: None,
        })
    }

    /// Encodes the next square of `encoding` (none when all are), on the CPU.
    pub fn encode_next(&self, encoding: &mut PictureEncoding) -> Result<(), ModelError> {
        if let Some(square) = encoding.next_square() {
            let rows = self.encode_square(&square)?;
            encoding.add_square(rows);
        }
        Ok(())
    }

    /// A picture's embeddings, to go into the language model in place of its image tokens:
    /// every square's rows, in the prompt's order.
    pub fn encode(&self, image: &RgbImage) -> Result<ImageEmbeddings, ModelError> {
        self.encode_for_prompt(image).map(|encoded| encoded.embeddings)
    }

    /// The embeddings of one square of a picture's [`layout`](Self::layout), on the CPU.
    pub fn encode_square(&self, square: &RgbImage) -> Result<ImageEmbeddings, ModelError> {
        let mut rows = self.run_square(&mut CpuVision { bytes: &self.bytes }, square)?;
        let parts = std::mem::take(&mut rows.parts);
        Ok(rows.assemble(parts))
    }

    /// Whether the encoder takes `square` as it is: an error naming its size if not.
    fn check_square(&self, square: &RgbImage) -> Result<(), ModelError> {
        let shape = &self.shape;
        let (grid_width, grid_height) =
            (square.width() / shape.patch_size, square.height() / shape.patch_size);
        let n = grid_width * grid_height;
        // LFM2-VL takes any whole number of patches; Gemma 4 whole pools within its position
        // tables; the others their image size.
        let fits = match self.projector {
            Projector::Lfm2 { .. } => {
                square.width().is_multiple_of(shape.patch_size)
                    && square.height().is_multiple_of(shape.patch_size)
                    && (1..=shape.max_patches).contains(&n)
            }
            Projector::QwenMerger { .. } => {
                square.width().is_multiple_of(shape.patch_size * QWEN_MERGE)
                    && square.height().is_multiple_of(shape.patch_size * QWEN_MERGE)
                    && (1..=shape.max_patches).contains(&n)
            }
            Projector::Gemma4 { pool, .. } => {
                square.width().is_multiple_of(shape.patch_size * pool)
                    && square.height().is_multiple_of(shape.patch_size * pool)
                    && (1..=shape.max_patches).contains(&n)
                    && grid_width.max(grid_height) <= self.position_side
            }
            _ => (square.width(), square.height()) == (shape.image_size, shape.image_size),
        };
        if !fits {
            return Err(ModelError::BadImage(format!(
                "the encoder does not take a {} × {} square",
                square.width(),
                square.height()
            )));
        }
        Ok(())
    }

    /// One square through the encoder and the projector on `b`: the one sequence of operations
    /// both devices run (the CPU's at once, the GPU's recorded).
    pub(crate) fn run_square<B: VisionBackend>(
        &self,
        b: &mut B,
        square: &RgbImage,
    ) -> Result<SquareRows<B::Rows>, ModelError> {
        self.check_square(square)?;
        let shape = &self.shape;
        let d = shape.width;
        let (grid_width, grid_height) =
            (square.width() / shape.patch_size, square.height() / shape.patch_size);
        let n = grid_width * grid_height;
        let pixels = b.rows(self.patches(square))?;

        // The patch embedding: each patch's pixels times each output channel's kernel. ggml
        // multiplies the patches (its first operand) by the kernel: llamafile's GEMM takes the
        // product only for a patch count that is a multiple of 4, `vec_dot` otherwise.
        let layout = if n.is_multiple_of(4) { WeightLayout::Plain } else { WeightLayout::VecDot };
        let kernel = |bytes| OwnMatrix {
            bytes,
            weight_type: WeightType::F16,
            layout,
            rows: d,
            cols: shape.patch_values(),
        };
        let mut x = b.matmul(kernel(&self.patch_embd[..]), &pixels, n)?;
        if let Some(second) = &self.patch_embd_second_frame {
            let y = b.matmul(kernel(&second[..]), &pixels, n)?;
            b.add(&mut x, &y);
        }
        drop(pixels);
        if self.qwen {
            x = b.gather(&x, d, &in_blocks_order(grid_width, grid_height));
        }
        if let Some(bias) = &self.patch_bias {
            b.add_bias(&mut x, bias);
        }
        let side = self.position_side;
        match &self.positions {
            None => {}
            Some(table) if self.gemma4 => {
                // The column's row of the first table, then the row's of the second (two adds).
                let (by_column, by_row) = table.split_at(side * d);
                for (table, by_column) in [(by_column, true), (by_row, false)] {
                    let rows = (0..n)
                        .flat_map(|i| {
                            let at = if by_column { i % grid_width } else { i / grid_width };
                            &table[at * d..][..d]
                        })
                        .copied()
                        .collect();
                    let rows = b.rows(rows)?;
                    b.add(&mut x, &rows);
                }
            }
            Some(table) => {
                let resized = match (grid_width, grid_height) == (side, side) {
                    true => table.clone(),
                    false if self.qwen => resize_positions_aligned(table, side, d, grid_width, grid_height),
                    false => resize_positions(table, side, d, grid_width, grid_height),
                };
                let mut rows = b.rows(resized)?;
                if self.qwen {
                    rows = b.gather(&rows, d, &in_blocks_order(grid_width, grid_height));
                }
                b.add(&mut x, &rows);
            }
        }
        // Qwen2.5-VL runs its patches window by window (each block's four together), its
        // positions and rotations going with them.
        let windows = self
            .windows
            .map(|windows| WindowOrder::new(grid_width / QWEN_MERGE, grid_height / QWEN_MERGE, windows));
        let block = QWEN_MERGE * QWEN_MERGE;
        if let Some(order) = &windows {
            x = b.gather(&x, block * d, &as_sources(&order.units));
        }

        let head_dim = d / shape.heads;
        // Gemma 4 attends at scale 1 over normalized heads; SigLIP at 1/√head.
        let kq_scale = if self.gemma4 { 1.0 } else { 1.0 / (head_dim as f32).sqrt() };
        let rope = if self.gemma4 {
            Some(PatchRope::halves(grid_width, grid_height, head_dim))
        } else if self.qwen {
            let mut rope = PatchRope::quarters_in_blocks(grid_width, grid_height, head_dim);
            if let Some(order) = &windows {
                rope.places = order.to_windows(&rope.places, block);
            }
            Some(rope)
        } else {
            None
        };
        let norm_kind = self.norm_kind;
        let mut deepstacked = Vec::new();
        for (l, layer) in self.layers.iter().enumerate() {
            // Qwen2.5-VL's windowed layers: each patch attends within its window.
            let spans = match (&windows, self.windows) {
                (Some(order), Some(Windows { every, .. })) if (l + 1) % every != 0 => Some(&order.spans),
                _ => None,
            };
            let mut h = b.copy(&x);
            b.norm(&mut h, norm_kind, &layer.norm1.weight, layer.norm1.bias.as_deref(), shape.eps);
            let [mut q, mut k, v] = match &layer.qkv {
                Qkv::Separate(separate) => {
                    let [q, k, v] = &**separate;
                    b.linears([q, k, v], &h, n)?
                }
                Qkv::Fused(qkv) => {
                    let [fused] = b.linears([qkv], &h, n)?;
                    std::array::from_fn(|part| {
                        let sources: Vec<u32> = (0..n).map(|t| (3 * t + part) as u32).collect();
                        b.gather(&fused, d, &sources)
                    })
                }
            };
            drop(h);
            for (x, norm) in [(&mut q, &layer.q_norm), (&mut k, &layer.k_norm)] {
                if let Some(weight) = norm {
                    b.norm(x, norm_kind, weight, None, shape.eps);
                }
            }
            if let Some(rope) = &rope {
                b.rope(&mut q, rope);
                b.rope(&mut k, rope);
            }
            let mut v = v;
            if self.gemma4 {
                b.rms_unweighted(&mut v, head_dim, shape.eps);
            }
            let attended = b.attention(&q, &k, &v, (n, d, shape.heads), kq_scale, spans.map(Vec::as_slice));
            drop((q, k, v));
            let [mut projected] = b.linears([&layer.out], &attended, n)?;
            drop(attended);
            if let Some(weight) = &layer.attn_post_norm {
                b.norm(&mut projected, norm_kind, weight, None, shape.eps);
            }
            b.add(&mut x, &projected);
            drop(projected);

            let mut h = b.copy(&x);
            b.norm(&mut h, norm_kind, &layer.norm2.weight, layer.norm2.bias.as_deref(), shape.eps);
            let activated = match &layer.gate {
                Some(gate) => {
                    let width = gate.matrix.rows;
                    let [mut gate, up] = b.linears([gate, &layer.up], &h, n)?;
                    b.gated(&mut gate, &up, self.feed_forward, width);
                    gate
                }
                None => {
                    let [mut up] = b.linears([&layer.up], &h, n)?;
                    b.activate(&mut up, self.feed_forward);
                    up
                }
            };
            drop(h);
            let [mut down] = b.linears([&layer.down], &activated, n)?;
            drop(activated);
            if let Some(weight) = &layer.ffn_post_norm {
                b.norm(&mut down, norm_kind, weight, None, shape.eps);
            }
            b.add(&mut x, &down);
            drop(down);
            if let Some(scale) = layer.out_scale {
                b.scale(&mut x, scale);
            }
            if let Some(deepstack) = &layer.deepstack {
                // Each block's four rows, side by side, are one (as the merger takes them).
                let tokens = n / block;
                let mut merged = b.copy(&x);
                let norm = &deepstack.norm;
                b.norm(&mut merged, NormKind::Layer, &norm.weight, norm.bias.as_deref(), shape.eps);
                let [mut hidden] = b.linears([&deepstack.up], &merged, tokens)?;
                b.activate(&mut hidden, FeedForward::Gelu);
                let [out] = b.linears([&deepstack.down], &hidden, tokens)?;
                deepstacked.push(out);
            }
        }
        if let Some(norm) = &self.post_norm {
            b.norm(&mut x, norm_kind, &norm.weight, norm.bias.as_deref(), shape.eps);
        }

        let output_width = shape.output_width;
        let (tokens, main, grid) = match &self.projector {
            Projector::QwenMerger { up, down } => {
                // The rows run block by block: each block's four rows, side by side, are one.
                let tokens = n / block;
                let [mut hidden] = b.linears([up], &x, tokens)?;
                b.activate(&mut hidden, FeedForward::Gelu);
                let [mut main] = b.linears([down], &hidden, tokens)?;
                if let Some(order) = &windows {
                    main = b.gather(&main, down.matrix.rows, &as_sources(&reading_order(&order.units)));
                }
                (tokens, main, Some([grid_width / QWEN_MERGE, grid_height / QWEN_MERGE]))
            }
            Projector::Gemma4 { pool, standardize, projection } => {
                let mut pooled = b.average_pool(&x, (grid_width, grid_height, d), *pool);
                let tokens = n / (pool * pool);
                b.scale(&mut pooled, (d as f32).sqrt());
                if let Some((bias, std_scale)) = standardize {
                    b.standardize(&mut pooled, bias, std_scale);
                }
                b.rms_unweighted(&mut pooled, d, shape.eps);
                let [values] = b.linears([projection], &pooled, tokens)?;
                (tokens, values, None)
            }
            Projector::Idefics3 { scale, fc, .. } => {
                let (sources, tokens) = pixel_shuffle_order(grid_width, grid_height, *scale);
                let shuffled = b.gather(&x, d, &sources);
                let [values] = b.linears([fc], &shuffled, tokens)?;
                (tokens, values, None)
            }
            Projector::Lfm2 { scale, norm, up, down } => {
                let (sources, tokens) = pixel_shuffle_order(grid_width, grid_height, *scale);
                let mut shuffled = b.gather(&x, d, &sources);
                if let Some(norm) = norm {
                    // clip.cpp's epsilon for this norm, whatever the encoder's.
                    b.norm(&mut shuffled, NormKind::Layer, &norm.weight, norm.bias.as_deref(), 1e-5);
                }
                let [mut hidden] = b.linears([up], &shuffled, tokens)?;
                b.activate(&mut hidden, FeedForward::Gelu);
                let [values] = b.linears([down], &hidden, tokens)?;
                (tokens, values, None)
            }
            Projector::Gemma3 { merge, norm, projection, projection_type } => {
                let mut pooled = b.average_pool(&x, (grid_width, grid_height, d), *merge);
                let tokens = n / (merge * merge);
                b.norm(&mut pooled, NormKind::Rms, norm, None, shape.eps);
                let projection = OwnMatrix {
                    bytes: projection,
                    weight_type: *projection_type,
                    layout: WeightLayout::Plain,
                    rows: output_width,
                    cols: d,
                };
                (tokens, b.matmul(projection, &pooled, tokens)?, None)
            }
        };
        // Each row: the projector's embedding, then each deepstack layer's, in layer order.
        let parts = std::iter::once(main).chain(deepstacked).collect();
        Ok(SquareRows { parts, tokens, width: output_width, grid })
    }

    /// The prepared picture as rows of patch values, patches row by row, each patch's values
    /// channel by channel, then row by row: the order of the kernel's elements (ggml's
    /// `im2col`), normalized as mtmd normalizes (`x / 255`, then `(x − mean) / std`, in f32).
    fn patches(&self, image: &RgbImage) -> Vec<f32> {
        let shape = &self.shape;
        let p = shape.patch_size;
        let (grid_width, grid_height) = (image.width() / p, image.height() / p);
        let mut out = Vec::with_capacity(grid_width * grid_height * shape.patch_values());
        for py in 0..grid_height {
            for px in 0..grid_width {
                for c in 0..3 {
                    for ky in 0..p {
                        for kx in 0..p {
                            let value = f32::from(image.at(px * p + kx, py * p + ky, c)) / 255.0;
                            let normalized = (value - shape.mean[c]) / shape.std[c];
                            // Gemma 4 then maps its pixels to 2x − 1 (clip.cpp's `scale_bias`).
                            out.push(if self.gemma4 { normalized * 2.0 - 1.0 } else { normalized });
                        }
                    }
                }
            }
        }
        out
    }
}

/// A 2D RoPE over a grid of patches, each head turned by the patch's column and row.
/// - Gemma 4 (its `add_pos`: two NeoX rotations of ggml's): the first half of each head rotated
///   by the column, the second by the row, each half's pairs a quarter of the head apart, base 100.
/// - Qwen-VL (ggml's `GGML_ROPE_TYPE_VISION` with four equal sections): one rotation of pairs half
///   a head apart, the first half of the pairs by the row, the second by the column, base 10000.
pub(crate) struct PatchRope {
    pub head_dim: usize,
    /// Each patch's column and row, in the order the encoder runs them.
    pub places: Vec<(usize, usize)>,
    /// The cos/sin pairs of each column, and of each row (a quarter of a head's width each).
    columns: Vec<Vec<(f32, f32)>>,
    rows: Vec<Vec<(f32, f32)>>,
    /// Gemma 4's halves rotated apart, or Qwen's one rotation.
    pub halves: bool,
}

impl PatchRope {
    fn new(
        grid_width: usize,
        grid_height: usize,
        head_dim: usize,
        base: f32,
        places: Vec<(usize, usize)>,
    ) -> PatchRope {
        let rope = Rope { base, freq_scale: 1.0, attn_factor: 1.0, yarn: None };
        let tables = |count: usize| -> Vec<Vec<(f32, f32)>> {
            (0..count)
                .map(|position| {
                    let mut table = Vec::new();
                    rope_table(&mut table, position, rope, head_dim / 2, None);
                    table
                })
                .collect()
        };
        PatchRope { head_dim, places, columns: tables(grid_width), rows: tables(grid_height), halves: false }
    }

    /// Gemma 4's, the patches in reading order.
    fn halves(grid_width: usize, grid_height: usize, head_dim: usize) -> PatchRope {
        let places = (0..grid_width * grid_height).map(|i| (i % grid_width, i / grid_width)).collect();
        PatchRope {
            halves: true,
            ..PatchRope::new(grid_width, grid_height, head_dim, GEMMA4_ROPE_BASE, places)
        }
    }

    /// Qwen-VL's, the patches in 2 × 2 blocks ([`in_blocks`]).
    fn quarters_in_blocks(grid_width: usize, grid_height: usize, head_dim: usize) -> PatchRope {
        let mut places = Vec::with_capacity(grid_width * grid_height);
        for block_y in (0..grid_height).step_by(QWEN_MERGE) {
            for block_x in (0..grid_width).step_by(QWEN_MERGE) {
                for y in block_y..block_y + QWEN_MERGE {
                    places.extend((block_x..block_x + QWEN_MERGE).map(|x| (x, y)));
                }
            }
        }
        PatchRope::new(grid_width, grid_height, head_dim, QWEN_ROPE_BASE, places)
    }

    /// Each patch's cos/sin pairs in the order a head's pairs take them (Qwen: the row's, then
    /// the column's; Gemma 4: the column's for the first half, the row's for the second), as
    /// `[cos, sin]` after each other: the GPU's table.
    #[cfg_attr(not(feature = "gpu"), allow(dead_code, reason = "the GPU's encoder reads it"))]
    pub(crate) fn table(&self) -> Vec<f32> {
        let mut table = Vec::with_capacity(self.places.len() * self.head_dim);
        for &(column, row) in &self.places {
            let (column, row) = (&self.columns[column], &self.rows[row]);
            let halves = if self.halves { [column, row] } else { [row, column] };
            table.extend(halves.into_iter().flatten().flat_map(|&(cos, sin)| [cos, sin]));
        }
        table
    }

    /// Rotates `x`, rows of the patches in order, each of whole heads.
    pub(crate) fn apply(&self, x: &mut [f32]) {
        let half = self.head_dim / 2;
        let per_patch = x.len() / self.places.len().max(1);
        let mut both = Vec::with_capacity(half);
        for (patch, &(column, row)) in x.chunks_exact_mut(per_patch).zip(&self.places) {
            let (column, row) = (&self.columns[column], &self.rows[row]);
            if !self.halves {
                both.clear();
                both.extend_from_slice(row);
                both.extend_from_slice(column);
            }
            for head in patch.chunks_exact_mut(self.head_dim) {
                if self.halves {
                    let (first, second) = head.split_at_mut(half);
                    apply_rope(first, half, column, RopeStyle::Neox);
                    apply_rope(second, half, row, RopeStyle::Neox);
                } else {
                    apply_rope(head, self.head_dim, &both, RopeStyle::Neox);
                }
            }
        }
    }
}

/// The rows of a `width × height` grid (reading order) in Qwen-VL's order, as gather sources:
/// 2 × 2 blocks row by row, each block's four rows in reading order (clip.cpp's spatial merge
/// permute).
fn in_blocks_order(width: usize, height: usize) -> Vec<u32> {
    let mut order = Vec::with_capacity(width * height);
    for block_y in (0..height).step_by(QWEN_MERGE) {
        for block_x in (0..width).step_by(QWEN_MERGE) {
            for y in block_y..block_y + QWEN_MERGE {
                order.extend((block_x..block_x + QWEN_MERGE).map(|x| (y * width + x) as u32));
            }
        }
    }
    order
}

/// Indices as a gather's sources.
fn as_sources(indices: &[usize]) -> Vec<u32> {
    indices.iter().map(|&i| i as u32).collect()
}

/// The inverse of a permutation: where each place's item came from, given where each item went.
fn reading_order(units: &[usize]) -> Vec<usize> {
    let mut places = vec![0; units.len()];
    for (place, &unit) in units.iter().enumerate() {
        places[unit] = place;
    }
    places
}

/// Qwen2.5-VL's window order (clip.cpp's `window_idx`, `inv_window_idx` and window mask): the
/// units of a merged grid (each a 2 × 2 block of patches) window by window, windows row by row
/// and each window's units in reading order.
struct WindowOrder {
    /// The unit at each place of the window order (`inv_window_idx`).
    units: Vec<usize>,
    /// The patches each patch attends to, in the window order: its window's run.
    spans: Vec<Range<usize>>,
}

impl WindowOrder {
    fn new(width: usize, height: usize, Windows { units: side, .. }: Windows) -> WindowOrder {
        let per_unit = QWEN_MERGE * QWEN_MERGE;
        let mut units = Vec::with_capacity(width * height);
        let mut spans = Vec::with_capacity(width * height * per_unit);
        for y in (0..height).step_by(side) {
            for x in (0..width).step_by(side) {
                let first = units.len();
                for row in y..(y + side).min(height) {
                    units.extend((x..(x + side).min(width)).map(|column| row * width + column));
                }
                let span = first * per_unit..units.len() * per_unit;
                spans.extend(std::iter::repeat_n(span.clone(), span.len()));
            }
        }
        WindowOrder { units, spans }
    }

    /// Rows of `x` (each unit `stride` values, reading order) in the window order.
    fn to_windows<T: Copy>(&self, x: &[T], stride: usize) -> Vec<T> {
        self.units.iter().flat_map(|&unit| &x[unit * stride..][..stride]).copied().collect()
    }
}

/// A `side × side` grid of position rows (`d` wide) resized to `width × height` as ggml's
/// `interpolate` does it with `GGML_SCALE_FLAG_ALIGN_CORNERS` (Qwen-VL's learned positions):
/// bilinear between the four nearest, the corners of both grids aligned, in f32.
fn resize_positions_aligned(
    positions: &[f32],
    side: usize,
    d: usize,
    width: usize,
    height: usize,
) -> Vec<f32> {
    use crate::tensor::kv_rows::mul_add;
    // Per axis: the scale with corners aligned (ggml keeps the plain ratio for a side of 1).
    let scale = |out: usize| {
        if out > 1 && side > 1 { (out - 1) as f32 / (side - 1) as f32 } else { out as f32 / side as f32 }
    };
    let (scale_x, scale_y) = (scale(width), scale(height));
    let last = side as i64 - 1;
    // The two source indices around `at` (clamped to the grid) and the weight of the second.
    let around = |at: f32| {
        let first = at.floor() as i64;
        let (low, high) = (first.clamp(0, last), (first + 1).clamp(0, last));
        (low as usize, high as usize, (at - low as f32).clamp(0.0, 1.0))
    };
    let mut out = vec![0.0; width * height * d];
    for oy in 0..height {
        let (y0, y1, dy) = around(oy as f32 / scale_y);
        for ox in 0..width {
            let (x0, x1, dx) = around(ox as f32 / scale_x);
            let at = |x: usize, y: usize| &positions[(y * side + x) * d..][..d];
            let (a, b, c, e) = (at(x0, y0), at(x1, y0), at(x0, y1), at(x1, y1));
            for (i, value) in out[(oy * width + ox) * d..][..d].iter_mut().enumerate() {
                // ggml's `a(1−dx)(1−dy) + b·dx(1−dy) + c(1−dx)dy + d·dx·dy` as GCC contracts it:
                // the first term's last product fused onto the second, each later one's onto
                // the sum (found by comparing every element with ggml's).
                let sum = mul_add(a[i] * (1.0 - dx), 1.0 - dy, b[i] * dx * (1.0 - dy));
                let sum = mul_add(c[i] * (1.0 - dx), dy, sum);
                *value = mul_add(e[i] * dx, dy, sum);
            }
        }
    }
    out
}

/// SmolVLM's and LFM2-VL's pixel shuffle (clip.cpp's `build_patch_merge_permute`): each
/// `scale × scale` square of a `width × height` grid of rows `d` wide (the grid padded with
/// zeros to whole squares) becomes one row of its patches side by side, row by row; the squares
/// in reading order. Returns each patch's source (as a gather's, rows `d` wide) and the rows.
fn pixel_shuffle_order(width: usize, height: usize, scale: usize) -> (Vec<u32>, usize) {
    let (out_width, out_height) = (width.div_ceil(scale), height.div_ceil(scale));
    let mut sources = Vec::with_capacity(out_width * out_height * scale * scale);
    for oy in 0..out_height {
        for ox in 0..out_width {
            for y in oy * scale..(oy + 1) * scale {
                for x in ox * scale..(ox + 1) * scale {
                    sources.push(if y < height && x < width { (y * width + x) as u32 } else { ZEROS });
                }
            }
        }
    }
    (sources, out_width * out_height)
}

/// A `side × side` grid of position rows (`d` wide) resized to `width × height` as ggml's
/// `interpolate` does it in clip.cpp's `resize_position_embeddings`: bilinear with antialiasing
/// (a triangle widened when shrinking, weights normalized), in f32 and its summing order.
fn resize_positions(positions: &[f32], side: usize, d: usize, width: usize, height: usize) -> Vec<f32> {
    use crate::tensor::kv_rows::mul_add;
    // Per axis: the scale, the filter's support (at least a pixel) and its inverse.
    let axis = |out: usize| {
        let scale = out as f32 / side as f32;
        let support = (1.0 / scale).max(1.0);
        (scale, support, 1.0 / support)
    };
    let ((scale_x, support_x, inv_x), (scale_y, support_y, inv_y)) = (axis(width), axis(height));
    let triangle = |x: f32| (1.0 - x.abs()).max(0.0);
    // The source range of an output pixel at `center`: truncated as C converts a float.
    let range = |center: f32, support: f32| {
        let first = ((center - support + 0.5) as i64).max(0) as usize;
        let end = ((center + support + 0.5) as i64).min(side as i64).max(0) as usize;
        first..end
    };
    let mut out = vec![0.0; width * height * d];
    for oy in 0..height {
        let y = (oy as f32 + 0.5) / scale_y;
        for ox in 0..width {
            let x = (ox as f32 + 0.5) / scale_x;
            let row = &mut out[(oy * width + ox) * d..][..d];
            for (c, value) in row.iter_mut().enumerate() {
                let (mut sum, mut total) = (0.0f32, 0.0f32);
                for sy in range(y, support_y) {
                    let weight_y = triangle((sy as f32 - y + 0.5) * inv_y);
                    for sx in range(x, support_x) {
                        let weight = triangle((sx as f32 - x + 0.5) * inv_x) * weight_y;
                        if weight <= 0.0 {
                            continue;
                        }
                        sum = mul_add(positions[(sy * side + sx) * d + c], weight, sum);
                        total += weight;
                    }
                }
                *value = if total > 0.0 { sum / total } else { sum };
            }
        }
    }
    out
}

/// The names of layer `layer`'s feed-forward matrices, up then down. Old conversions of Gemma 3,
/// SmolVLM, Qwen2-VL and Qwen2.5-VL named the two the other way round; clip.cpp swaps them back
/// for those types where `ffn_down` maps from the encoder's `width`.
pub(crate) fn feed_forward_names(
    header: &crate::gguf::GgufHeader,
    projector: &str,
    layer: usize,
    width: usize,
) -> (&'static str, &'static str) {
    let swaps_old_names = matches!(projector, "gemma3" | "idefics3" | "qwen2vl_merger" | "qwen2.5vl_merger");
    let swapped = swaps_old_names
        && header
            .tensor(&format!("v.blk.{layer}.ffn_down.weight"))
            .is_some_and(|t| t.dims.first() == Some(&(width as u64)));
    if swapped { ("ffn_down", "ffn_up") } else { ("ffn_up", "ffn_down") }
}

/// The limits on a picture's rows a projector whose own are `own` takes (each `None`: its own),
/// or why not: below 1 row, the least above the most, or the most above its own (what the
/// encoder's buffers are bounded by). The one rule for an attached projector and for a file's
/// before it is loaded.
pub fn image_token_limits(
    projector: &str,
    (own_min, own_max): (usize, usize),
    min: Option<usize>,
    max: Option<usize>,
) -> Result<(usize, usize), String> {
    let (min, max) = (min.unwrap_or(own_min), max.unwrap_or(own_max));
    if min == 0 || min > max {
        return Err(format!("a picture's rows cannot be limited to between {min} and {max}"));
    }
    if max > own_max {
        return Err(format!(
            "this projector ({projector}) takes at most {own_max} rows a picture, not {max}"
        ));
    }
    Ok((min, max))
}

/// The least and most rows a picture takes by clip.cpp's bounds, for the projectors that size
/// pictures at their own aspect (`set_limit_image_tokens`): Gemma 4's and LFM2-VL's.
pub(crate) fn own_image_tokens(projector: &str) -> Option<(usize, usize)> {
    match projector {
        "gemma4v" => Some((GEMMA4_MIN_TOKENS, GEMMA4_MAX_TOKENS)),
        "lfm2" => Some((LFM2_MIN_TOKENS, LFM2_MAX_TOKENS)),
        "qwen2vl_merger" | "qwen2.5vl_merger" | "qwen3vl_merger" => Some((QWEN_MIN_TOKENS, QWEN_MAX_TOKENS)),
        _ => None,
    }
}

/// LFM2-VL's size for a whole picture: [`smart_size`] with `min..=max` rows of output (64 to
/// 256 unless limited).
fn lfm2_size(width: usize, height: usize, align: usize, (min, max): (usize, usize)) -> (usize, usize) {
    smart_size(width, height, align, min * align * align, max * align * align)
}

/// A picture's size at its own aspect (mtmd's `calc_size_preserved_ratio`, Qwen-VL's "smart
/// resize", in f32 as mtmd computes it), for LFM2-VL's whole pictures and Gemma 4's: the sides
/// rounded to multiples of `align` (a patch times the merge), then scaled, keeping the aspect,
/// to between `min_pixels` and `max_pixels` (so many rows of output times `align²`).
fn smart_size(
    width: usize,
    height: usize,
    align: usize,
    min_pixels: usize,
    max_pixels: usize,
) -> (usize, usize) {
    let (w, h, a) = (width as f32, height as f32, align as f32);
    let round_by = |x: f32| ((x / a).round() as usize) * align;
    let floor_by = |x: f32| ((x / a).floor() as usize) * align;
    let ceil_by = |x: f32| ((x / a).ceil() as usize) * align;
    let (w_bar, h_bar) = (round_by(w).max(align), round_by(h).max(align));
    if w_bar * h_bar > max_pixels {
        let beta = (h * w / max_pixels as f32).sqrt();
        (floor_by(w / beta).max(align), floor_by(h / beta).max(align))
    } else if w_bar * h_bar < min_pixels {
        let beta = (min_pixels as f32 / (h * w)).sqrt();
        (ceil_by(w * beta), ceil_by(h * beta))
    } else {
        (w_bar, h_bar)
    }
}

/// Whether LFM2-VL cuts a picture into tiles, and its grid (columns, rows) if so: where its
/// sides, rounded to multiples of `align` (each at least a patch), make more than twice the
/// most pixels (`max_tokens` rows of output); then the grid of [`LFM2_TILES`] tiles closest to its aspect, the larger of two
/// equally close where the picture is over half its area (mtmd's `find_closest_aspect_ratio`).
fn lfm2_grid(
    width: usize,
    height: usize,
    patch: usize,
    align: usize,
    max_tokens: usize,
) -> Option<(usize, usize)> {
    // nearbyint of a double: halves to even.
    let round_by = |x: usize| ((x as f64 / align as f64).round_ties_even() as usize * align).max(patch);
    let max_pixels = (max_tokens * align * align) as f64;
    if round_by(width) as f64 * round_by(height) as f64 <= max_pixels * 2.0 {
        return None;
    }
    let mut ratios: Vec<(usize, usize)> = Vec::new();
    for n in LFM2_TILES {
        for cols in 1..=n {
            for rows in 1..=n {
                if LFM2_TILES.contains(&(cols * rows)) && !ratios.contains(&(cols, rows)) {
                    ratios.push((cols, rows));
                }
            }
        }
    }
    ratios.sort_by_key(|(cols, rows)| cols * rows);
    let aspect = width as f32 / height as f32;
    let area = (width * height) as f32;
    let (mut best, mut best_diff) = ((1, 1), f32::INFINITY);
    for (cols, rows) in ratios {
        let diff = (aspect - cols as f32 / rows as f32).abs();
        if diff < best_diff {
            (best, best_diff) = ((cols, rows), diff);
        } else if diff == best_diff && area > 0.5 * (LFM2_TILE * LFM2_TILE * cols * rows) as f32 {
            best = (cols, rows);
        }
    }
    Some(best)
}

/// The most patches an LFM2-VL square may have: four times a tile's or a thumbnail's most (a
/// long, thin picture's thumbnail has more; beyond this one is refused, not encoded).
fn lfm2_max_patches(patch: usize, merge: usize) -> usize {
    let tile = (LFM2_TILE / patch).pow(2);
    let thumbnail = LFM2_MAX_TOKENS * merge * merge;
    4 * tile.max(thumbnail)
}

/// The bytes of `matrix` transposed: its columns as rows, in its own element type (F16 or
/// F32, whose elements can be moved one by one; a block-quantized projection cannot).
fn transposed(matrix: &Matrix, file: &ModelBytes) -> Result<(Vec<u8>, WeightType), ModelError> {
    let size = match matrix.weight_type {
        WeightType::F16 => 2,
        WeightType::F32 => 4,
        other => {
            return Err(ModelError::BadProjector(format!(
                "{} is {}; Inferno takes it as F16 or F32 (llama.cpp transposes it, which a \
                 block-quantized type cannot be)",
                matrix.name,
                other.name()
            )));
        }
    };
    let bytes = matrix.bytes(file);
    let (rows, cols) = (matrix.rows, matrix.cols);
    let mut out = vec![0u8; bytes.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[(c * rows + r) * size..][..size].copy_from_slice(&bytes[(r * cols + c) * size..][..size]);
        }
    }
    Ok((out, matrix.weight_type))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LFM2-VL's sizes at its real shape (16-pixel patches merged 2 × 2, so rows of 32 × 32
    /// pixels): rounded sides kept within 64 to 256 rows, tiles past twice 256, and the grid
    /// closest to the picture's aspect (the figures make_vision_goldens.py's port of mtmd's
    /// formulas gives at this shape).
    #[test]
    fn lfm2_vl_sizes_pictures_as_mtmd_does() {
        // 640 × 480 rounds to 640 × 480 = 300 rows: over 256, so scaled by √(300 / 256) and floored.
        assert_eq!(lfm2_size(640, 480, 32, (LFM2_MIN_TOKENS, LFM2_MAX_TOKENS)), (576, 416));
        // 100 × 100 rounds to 96 × 96 = 9 rows: under 64, so scaled up to 64 rows and ceiled.
        assert_eq!(lfm2_size(100, 100, 32, (LFM2_MIN_TOKENS, LFM2_MAX_TOKENS)), (256, 256));
        assert_eq!(lfm2_size(512, 512, 32, (LFM2_MIN_TOKENS, LFM2_MAX_TOKENS)), (512, 512));
        // Twice 256 rows is 524,288 pixels: 736 × 704 stays whole; 1024 × 768 is cut 3 × 2 (4 × 3
        // would be its aspect, but 12 tiles are over the 10).
        assert_eq!(lfm2_grid(736, 704, 16, 32, LFM2_MAX_TOKENS), None);
        assert_eq!(lfm2_grid(1024, 768, 16, 32, LFM2_MAX_TOKENS), Some((3, 2)));
        assert_eq!(lfm2_grid(3000, 1000, 16, 32, LFM2_MAX_TOKENS), Some((3, 1)));
        // A square picture: 2 × 2 and 3 × 3 are equally close; the larger where the picture is
        // over half its area.
        assert_eq!(lfm2_grid(1000, 1000, 16, 32, LFM2_MAX_TOKENS), Some((2, 2)));
        assert_eq!(lfm2_grid(1300, 1300, 16, 32, LFM2_MAX_TOKENS), Some((3, 3)));
    }

    /// Gemma 4 at its real shape (16-pixel patches pooled 3 × 3: sides multiples of 48, 70 to
    /// 1120 rows), figures from make_vision_goldens.py's port of mtmd's arithmetic.
    #[test]
    fn gemma4_sizes_pictures_as_mtmd_does() {
        let size = |w, h| smart_size(w, h, 48, 70 * 48 * 48, 1120 * 48 * 48);
        // 640 × 480 rounds to 624 × 480 (130 rows): within bounds, as it is.
        assert_eq!(size(640, 480), (624, 480));
        // 100 × 100 rounds to 96 × 96 (4 rows): scaled up to 70 rows and ceiled.
        assert_eq!(size(100, 100), (432, 432));
        // 4000 × 3000 (5208 rows): scaled down and floored.
        assert_eq!(size(4000, 3000), (1824, 1344));
        // 1080 is 22.5 times 48: rounded away from zero, as C rounds (920 rows, within).
        assert_eq!(size(1920, 1080), (1920, 1104));
    }

    /// Gemma 4's RoPE: position 0 leaves a head as it is; elsewhere the first half turns with
    /// the column, the second with the row, each in pairs a quarter of the head apart.
    #[test]
    fn gemma4_rotates_each_half_of_a_head_by_its_own_axis() {
        let rope = PatchRope::halves(3, 2, 8);
        let head: Vec<f32> = (1..=8).map(|v| v as f32).collect();
        let mut x: Vec<f32> = head.iter().cycle().take(6 * 8).copied().collect();
        rope.apply(&mut x);
        // Patch 0 (column 0, row 0): unchanged.
        assert_eq!(&x[..8], &head[..]);
        // Patch 1 (column 1, row 0): the second half unchanged, the first rotated: its pair
        // (0, 2) turned by 1 radian, (1, 3) by 1/100^(1/2) = 0.1.
        assert_eq!(&x[8 + 4..16], &head[4..]);
        let (c, s) = (1f32.cos(), 1f32.sin());
        assert!((x[8] - (1.0 * c - 3.0 * s)).abs() < 1e-6 && (x[10] - (1.0 * s + 3.0 * c)).abs() < 1e-6);
        let (c, s) = (0.1f32.cos(), 0.1f32.sin());
        assert!((x[9] - (2.0 * c - 4.0 * s)).abs() < 1e-6 && (x[11] - (2.0 * s + 4.0 * c)).abs() < 1e-6);
        // Patch 3 (column 0, row 1): the first half unchanged, the second rotated.
        assert_eq!(&x[24..28], &head[..4]);
        assert!((x[28] - (5.0 * 1f32.cos() - 7.0 * 1f32.sin())).abs() < 1e-6);
    }

    /// The longest, thinnest picture the caps allow makes a thumbnail of 16,384 patches at the
    /// real shape, four times the most a square may have: refused, not encoded.
    #[test]
    fn a_thumbnail_past_the_patch_cap_is_beyond_lfm2_vl() {
        let (width, height) =
            lfm2_size(1, crate::vision::image::MAX_SIDE, 32, (LFM2_MIN_TOKENS, LFM2_MAX_TOKENS));
        assert_eq!((width, height), (32, 131_072));
        assert!((width / 16) * (height / 16) > lfm2_max_patches(16, 2));
        assert_eq!(lfm2_max_patches(16, 2), 4096);
    }

    /// Qwen2.5-VL's window order over a 5 × 3 grid of blocks in windows of 2 × 2: windows row by
    /// row (the last column and row of windows narrower), each window's blocks in reading order
    /// (clip.cpp's `inv_window_idx`); each patch attends to its window's run of patches.
    #[test]
    fn qwen25_windows_run_as_clip_cpp_orders_them() {
        let order = WindowOrder::new(5, 3, Windows { every: 2, units: 2 });
        assert_eq!(order.units, [0, 1, 5, 6, 2, 3, 7, 8, 4, 9, 10, 11, 12, 13, 14]);
        // The first window's 4 blocks are patches 0..16, the third's (2 blocks) 32..40.
        assert_eq!((order.spans[0].clone(), order.spans[15].clone()), (0..16, 0..16));
        assert_eq!((order.spans[32].clone(), order.spans[39].clone()), (32..40, 32..40));
        assert_eq!(order.spans[59].clone(), 56..60);
        let rows: Vec<usize> = (0..15).collect();
        let windows = order.to_windows(&rows, 1);
        assert_eq!(windows, order.units);
        let back: Vec<usize> = reading_order(&order.units).iter().map(|&place| windows[place]).collect();
        assert_eq!(back, rows);
    }

    /// The pixel shuffle of a 3 × 2 grid by 2: padded with zeros to 4 × 2, two rows of four
    /// patches each, in reading order within each square.
    #[test]
    fn the_pixel_shuffle_pads_a_ragged_grid_with_zeros() {
        let x: Vec<f32> = (1..=6).map(|v| v as f32).collect();
        let (sources, count) = pixel_shuffle_order(3, 2, 2);
        assert_eq!(count, 2);
        let rows = CpuVision { bytes: &ModelBytes::from(Vec::new()) }.gather(&x, 1, &sources);
        assert_eq!(rows, [1.0, 2.0, 4.0, 5.0, 3.0, 0.0, 6.0, 0.0]);
    }

    /// Positions resized to their own grid are themselves; to twice it, each source value is
    /// spread over four, the weights normalized (a constant stays constant, to the rounding of
    /// the normalization).
    #[test]
    fn positions_resize_as_ggml_interpolates() {
        let grid: Vec<f32> = (0..4).map(|v| v as f32).collect();
        assert_eq!(resize_positions(&grid, 2, 1, 2, 2), grid);
        let constant = resize_positions(&[3.0; 4], 2, 1, 5, 3);
        assert!(constant.iter().all(|&v| (v - 3.0).abs() < 1e-6), "{constant:?}");
        let doubled = resize_positions(&grid, 2, 1, 4, 4);
        assert_eq!(doubled[0], 0.0);
        assert_eq!(doubled[15], 3.0);
        assert_eq!(doubled[1], 0.25);
    }
}
