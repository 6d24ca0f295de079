//! Pictures as the encoders take them: 8-bit RGB, capped in size, resized as llama.cpp's mtmd
//! resizes them (`tools/mtmd/mtmd-image.cpp`, a port of Pillow's separable resampler with its
//! fixed-point arithmetic), so the same file gives the same pixels, bit for bit.

use crate::model::ModelError;

/// The most pixels a picture may have (2^25, 32 megapixels: a 48 MP phone's full-size shot is
/// refused, its usual 12 MP one is not). Its RGB bytes are then at most 96 MiB, the one
/// allocation sized by the picture; everything after works on the resized copy.
pub const MAX_PIXELS: usize = 1 << 25;

/// The longest side a picture may have, as mtmd's resizer takes it: beyond it a resize's
/// weights (a few per source pixel of the side) would outgrow the picture.
pub const MAX_SIDE: usize = 1 << 16;

/// An RGB picture, 8 bits per channel, rows top to bottom, pixels left to right.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RgbImage {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

/// How a resize weighs the source pixels around each target pixel (Pillow's filters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filter {
    /// Triangle of radius 1 (Gemma 3, LFM2-VL).
    Bilinear,
    /// Keys' cubic with a = -0.5, radius 2 (Pillow's; Gemma 4, Qwen-VL).
    Bicubic,
    /// Lanczos of radius 3, `sinc(x) · sinc(x / 3)` (SmolVLM's tiles and whole picture).
    Lanczos,
}

impl Filter {
    fn support(self) -> f64 {
        match self {
            Filter::Bilinear => 1.0,
            Filter::Bicubic => 2.0,
            Filter::Lanczos => 3.0,
        }
    }

    fn weight(self, x: f64) -> f64 {
        match self {
            Filter::Bilinear => (1.0 - x.abs()).max(0.0),
            Filter::Bicubic => {
                const A: f64 = -0.5;
                let x = x.abs();
                if x < 1.0 {
                    ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
                } else if x < 2.0 {
                    (((x - 5.0) * x + 8.0) * x - 4.0) * A
                } else {
                    0.0
                }
            }
            // On the signed distance: mtmd's (Pillow's) window is [-3, 3).
            Filter::Lanczos if (-3.0..3.0).contains(&x) => sinc(x) * sinc(x / 3.0),
            Filter::Lanczos => 0.0,
        }
    }
}

fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        return 1.0;
    }
    let pi_x = x * std::f64::consts::PI;
    pi_x.sin() / pi_x
}

impl RgbImage {
    /// A picture from its RGB bytes; refused (`bad_image`, `image_too_large`) unless they are
    /// `width × height × 3` bytes of a non-empty picture within [`MAX_PIXELS`] and [`MAX_SIDE`].
    pub fn new(width: usize, height: usize, pixels: Vec<u8>) -> Result<RgbImage, ModelError> {
        Self::check_bytes(width, height, pixels.len(), 3, "RGB")?;
        Ok(RgbImage { width, height, pixels })
    }

    /// A picture from RGBA bytes (a canvas's `getImageData`), alpha dropped as llama.cpp's
    /// decoder drops it when it asks for three channels.
    pub fn from_rgba(width: usize, height: usize, rgba: &[u8]) -> Result<RgbImage, ModelError> {
        Self::from_rgba_read(width, height, rgba.len(), |at, piece| {
            piece.copy_from_slice(&rgba[at..at + piece.len()])
        })
    }

    /// [`from_rgba`](Self::from_rgba) from `len` RGBA bytes that `read(at, piece)` copies in a
    /// piece at a time (from byte `at`), so that no whole RGBA copy is held beside the RGB
    /// one: the browser's canvas pixels are read out of JS this way.
    pub fn from_rgba_read(
        width: usize,
        height: usize,
        len: usize,
        mut read: impl FnMut(usize, &mut [u8]),
    ) -> Result<RgbImage, ModelError> {
        const PIECE: usize = 1 << 20; // A whole number of pixels.
        Self::check_bytes(width, height, len, 4, "RGBA")?;
        let mut pixels = Vec::with_capacity(width * height * 3);
        let mut piece = vec![0; len.min(PIECE)];
        for at in (0..len).step_by(PIECE) {
            let piece = &mut piece[..(len - at).min(PIECE)];
            read(at, piece);
            pixels.extend(piece.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]));
        }
        Ok(RgbImage { width, height, pixels })
    }

    /// The size within the caps, and `len` bytes exactly `width × height × channels`.
    fn check_bytes(
        width: usize,
        height: usize,
        len: usize,
        channels: usize,
        what: &str,
    ) -> Result<(), ModelError> {
        Self::check_size(width, height)?;
        let expected = width * height * channels;
        if len != expected {
            return Err(ModelError::BadImage(format!(
                "{len} bytes are not a {width} × {height} {what} picture ({expected} bytes)"
            )));
        }
        Ok(())
    }

    /// Refuses a size before anything is allocated for it: what a decoder calls with the
    /// dimensions a file's header claims.
    pub fn check_size(width: usize, height: usize) -> Result<(), ModelError> {
        if width == 0 || height == 0 {
            return Err(ModelError::BadImage(format!("a {width} × {height} picture has no pixels")));
        }
        match width.checked_mul(height) {
            Some(pixels) if pixels <= MAX_PIXELS && width.max(height) <= MAX_SIDE => Ok(()),
            _ => Err(ModelError::ImageTooLarge { width, height, max_pixels: MAX_PIXELS }),
        }
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn height(&self) -> usize {
        self.height
    }

    /// SHA-256 of its size and pixels, in hex: the same picture, however it came (a file, a
    /// paste, a data URL), has the same hash, which the prompt cache keys its encoding by.
    pub fn content_hash(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update((self.width as u64).to_le_bytes());
        hasher.update((self.height as u64).to_le_bytes());
        hasher.update(&self.pixels);
        hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The RGB bytes, row by row.
    pub fn pixels(&self) -> &[u8] {
        &self.pixels
    }

    /// Channel `c` of the pixel at column `x`, row `y`.
    #[inline]
    pub fn at(&self, x: usize, y: usize, c: usize) -> u8 {
        self.pixels[(y * self.width + x) * 3 + c]
    }

    /// Scaled to fit a `width × height` canvas, sides rounded up, centred on black: mtmd's
    /// resize with padding (`PAD_CEIL`), what Gemma 3's projector takes (a square) and LFM2-VL's
    /// tiles are cut from.
    pub fn fit_on_black(&self, width: usize, height: usize, filter: Filter) -> RgbImage {
        if (self.width, self.height) == (width, height) {
            return self.clone();
        }
        // mtmd computes the scale and the new sides in f32.
        let scale = (width as f32 / self.width as f32).min(height as f32 / self.height as f32);
        let new_width = ((self.width as f32 * scale).ceil() as usize).clamp(1, width);
        let new_height = ((self.height as f32 * scale).ceil() as usize).clamp(1, height);
        let resized = self.resized(new_width, new_height, filter);
        let mut canvas = RgbImage { width, height, pixels: vec![0; width * height * 3] };
        let (left, top) = ((width - new_width) / 2, (height - new_height) / 2);
        for y in 0..new_height {
            let row = &resized.pixels[y * new_width * 3..][..new_width * 3];
            canvas.pixels[((top + y) * width + left) * 3..][..new_width * 3].copy_from_slice(row);
        }
        canvas
    }

    /// The `width × height` part whose top left pixel is at column `x`, row `y` (which must lie
    /// within the picture).
    pub fn crop(&self, x: usize, y: usize, width: usize, height: usize) -> RgbImage {
        assert!(x + width <= self.width && y + height <= self.height, "a crop outside the picture");
        let mut pixels = Vec::with_capacity(width * height * 3);
        for row in y..y + height {
            pixels.extend_from_slice(&self.pixels[(row * self.width + x) * 3..][..width * 3]);
        }
        RgbImage { width, height, pixels }
    }

    /// Resampled to `width × height` (both at least 1) with `filter`, as Pillow does it: a
    /// horizontal pass, then a vertical one, each output channel a fixed-point sum (22
    /// fractional bits) of the source pixels under the filter, widened when shrinking.
    pub fn resized(&self, width: usize, height: usize, filter: Filter) -> RgbImage {
        let mut image = self.clone();
        if width != image.width {
            let taps = Taps::new(image.width, width, filter);
            let mut out = vec![0u8; width * image.height * 3];
            for (src, dst) in image.pixels.chunks_exact(image.width * 3).zip(out.chunks_exact_mut(width * 3))
            {
                for (x, pixel) in dst.chunks_exact_mut(3).enumerate() {
                    let (first, weights) = taps.of(x);
                    for (c, channel) in pixel.iter_mut().enumerate() {
                        let sum = weights
                            .iter()
                            .enumerate()
                            .fold(ROUNDING, |sum, (k, &w)| sum + i32::from(src[(first + k) * 3 + c]) * w);
                        *channel = clip8(sum);
                    }
                }
            }
            image = RgbImage { width, height: image.height, pixels: out };
        }
        if height != image.height {
            let taps = Taps::new(image.height, height, filter);
            let row_len = image.width * 3;
            let mut out = vec![0u8; row_len * height];
            let mut sums = vec![0i32; row_len];
            for (y, dst) in out.chunks_exact_mut(row_len).enumerate() {
                let (first, weights) = taps.of(y);
                sums.fill(ROUNDING);
                for (k, &w) in weights.iter().enumerate() {
                    let src = &image.pixels[(first + k) * row_len..][..row_len];
                    sums.iter_mut().zip(src).for_each(|(s, &p)| *s += i32::from(p) * w);
                }
                dst.iter_mut().zip(&sums).for_each(|(d, &s)| *d = clip8(s));
            }
            image = RgbImage { width: image.width, height, pixels: out };
        }
        image
    }
}

/// Fractional bits of the fixed-point weights: 32 less 8 for the pixel, less 2 of headroom.
const PRECISION_BITS: u32 = 22;
/// One half in fixed point: sums start from it, so the final shift rounds.
const ROUNDING: i32 = 1 << (PRECISION_BITS - 1);

fn clip8(sum: i32) -> u8 {
    (sum >> PRECISION_BITS).clamp(0, 255) as u8
}

/// The fixed-point weights of one dimension's resize: for each output pixel, the first source
/// pixel it reads and the weights of it and the ones after.
struct Taps {
    /// Weights per output pixel (the kernel's width; unused ones are zero).
    size: usize,
    bounds: Vec<(usize, usize)>,
    weights: Vec<i32>,
}

impl Taps {
    fn new(in_size: usize, out_size: usize, filter: Filter) -> Taps {
        let scale = in_size as f64 / out_size as f64;
        // Shrinking widens the filter, so every source pixel counts; enlarging does not.
        let filter_scale = scale.max(1.0);
        // Multiplied by its inverse, not divided by it, as Pillow does (the bits differ).
        let inverse_scale = 1.0 / filter_scale;
        let support = filter.support() * filter_scale;
        let size = support.ceil() as usize * 2 + 1;
        let mut bounds = Vec::with_capacity(out_size);
        let mut weights = vec![0i32; out_size * size];
        let mut row = vec![0.0f64; size];
        for (out, kernel) in weights.chunks_exact_mut(size).enumerate() {
            let center = (out as f64 + 0.5) * scale;
            // Truncation toward zero, as the C casts; negatives are clamped to 0 either way.
            let first = ((center - support + 0.5) as i64).max(0) as usize;
            let end = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
            let count = end.saturating_sub(first);
            let mut total = 0.0;
            for (k, w) in row.iter_mut().enumerate().take(count) {
                *w = filter.weight((k as f64 + first as f64 - center + 0.5) * inverse_scale);
                total += *w;
            }
            for (k, slot) in kernel.iter_mut().enumerate().take(count) {
                let w = if total != 0.0 { row[k] / total } else { row[k] };
                // Pillow adds ±0.5 and truncates.
                let fixed = w * f64::from(1u32 << PRECISION_BITS);
                *slot = (fixed + if w < 0.0 { -0.5 } else { 0.5 }) as i32;
            }
            bounds.push((first, count));
        }
        Taps { size, bounds, weights }
    }

    fn of(&self, out: usize) -> (usize, &[i32]) {
        let (first, count) = self.bounds[out];
        (first, &self.weights[out * self.size..][..count])
    }
}
