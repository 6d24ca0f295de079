//! Decoding picture files natively (PNG, JPEG, WebP, GIF's first frame) with the `image` crate;
//! in the browser the worker decodes with `createImageBitmap` and hands over RGBA.

use std::io::Cursor;

use image::{ImageDecoder, ImageReader, Limits};

use super::image::{MAX_PIXELS, RgbImage};
use crate::model::ModelError;

/// The width and height a picture file's header claims (what [`decode`] checks against the caps
/// before it decodes), if the file is a picture at all.
pub fn dimensions(bytes: &[u8]) -> Option<(usize, usize)> {
    let reader = ImageReader::new(Cursor::new(bytes)).with_guessed_format().ok()?;
    reader.format()?;
    let (width, height) = reader.into_dimensions().ok()?;
    Some((width as usize, height as usize))
}

/// A picture file's bytes decoded to RGB (alpha dropped, as llama.cpp's loader drops it). Its
/// size is checked against [`MAX_PIXELS`] from the header, before anything is decoded.
pub fn decode(bytes: &[u8]) -> Result<RgbImage, ModelError> {
    let bad = |e: image::ImageError| ModelError::BadImage(e.to_string());
    let reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| ModelError::BadImage(e.to_string()))?;
    if reader.format().is_none() {
        return Err(ModelError::BadImage("not a PNG, JPEG, WebP or GIF file".into()));
    }
    let mut decoder = reader.into_decoder().map_err(bad)?;
    let (width, height) = decoder.dimensions();
    RgbImage::check_size(width as usize, height as usize)?;
    let mut limits = Limits::default();
    // The decoded pixels (up to 16 bits and 4 channels each) and the decoder's own buffers.
    limits.max_alloc = Some((MAX_PIXELS as u64) * 8 + (64 << 20));
    decoder.set_limits(limits).map_err(bad)?;
    let decoded = image::DynamicImage::from_decoder(decoder).map_err(bad)?;
    let rgb = decoded.into_rgb8();
    RgbImage::new(width as usize, height as usize, rgb.into_raw())
}
