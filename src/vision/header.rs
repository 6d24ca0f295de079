//! The size a picture file's header claims, read without decoding it: what the browser's
//! worker checks against the caps before `createImageBitmap` decodes (and allocates for) the
//! whole picture. A 1 KB PNG may claim 20,000 × 20,000 pixels; its size is refused here.
//!
//! The formats are those browsers decode for an `<img>`: PNG, JPEG, GIF, WebP, BMP and AVIF.
//! Native builds decode with the `image` crate, which reads the same headers
//! (`src/vision/tests.rs` holds the two to each other).

use serde::Serialize;

/// What a picture file's header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PictureHeader {
    /// "png", "jpeg", "gif", "webp", "bmp" or "avif".
    pub format: &'static str,
    pub width: usize,
    pub height: usize,
}

/// The formats [`picture_header`] reads, for an error message.
pub const PICTURE_FORMATS: &str = "PNG, JPEG, GIF, WebP, BMP or AVIF";

/// The header of a picture file, if `bytes` start one of the formats read here and the header
/// is whole; the size is the one claimed (a corrupt body is the decoder's to find).
pub fn picture_header(bytes: &[u8]) -> Option<PictureHeader> {
    let (format, width, height) = if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        // The first chunk is IHDR: width and height, big-endian.
        (bytes.get(12..16)? == b"IHDR").then_some(())?;
        ("png", be32(bytes, 16)?, be32(bytes, 20)?)
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        // The logical screen, which every frame lies within.
        ("gif", le16(bytes, 6)?, le16(bytes, 8)?)
    } else if bytes.starts_with(&[0xFF, 0xD8]) {
        let (width, height) = jpeg_size(bytes)?;
        ("jpeg", width, height)
    } else if bytes.get(0..4)? == b"RIFF" && bytes.get(8..12)? == b"WEBP" {
        let (width, height) = webp_size(bytes)?;
        ("webp", width, height)
    } else if bytes.starts_with(b"BM") {
        let (width, height) = bmp_size(bytes)?;
        ("bmp", width, height)
    } else if bytes.get(4..8)? == b"ftyp" && matches!(bytes.get(8..12)?, b"avif" | b"avis") {
        let (width, height) = avif_size(bytes)?;
        ("avif", width, height)
    } else {
        return None;
    };
    Some(PictureHeader { format, width, height })
}

fn be16(bytes: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?) as usize)
}

fn le16(bytes: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?) as usize)
}

fn be32(bytes: &[u8], at: usize) -> Option<usize> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as usize)
}

fn le32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn le24(bytes: &[u8], at: usize) -> Option<usize> {
    let b = bytes.get(at..at + 3)?;
    Some(b[0] as usize | (b[1] as usize) << 8 | (b[2] as usize) << 16)
}

/// A JPEG's size from its first start-of-frame segment (SOF0 to SOF15 but DHT, JPG and DAC),
/// walking the segments from the start of the file.
fn jpeg_size(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut at = 2;
    loop {
        // Markers may be padded with any number of 0xFF bytes.
        while *bytes.get(at)? == 0xFF && *bytes.get(at + 1)? == 0xFF {
            at += 1;
        }
        (*bytes.get(at)? == 0xFF).then_some(())?;
        let marker = *bytes.get(at + 1)?;
        at += 2;
        match marker {
            // Standalone markers carry no length.
            0x01 | 0xD0..=0xD7 => continue,
            0xC0..=0xCF if !matches!(marker, 0xC4 | 0xC8 | 0xCC) => {
                // Length, precision, then height and width.
                return Some((be16(bytes, at + 5)?, be16(bytes, at + 3)?));
            }
            // The image data starts (or the file ends) before any frame header.
            0xD9 | 0xDA => return None,
            _ => at += be16(bytes, at)?,
        }
    }
}

/// A WebP's size from its first chunk: lossy (VP8), lossless (VP8L) or extended (VP8X).
fn webp_size(bytes: &[u8]) -> Option<(usize, usize)> {
    match bytes.get(12..16)? {
        // The key frame's start code, then 14-bit sides (the top 2 bits are a scale).
        b"VP8 " => {
            (bytes.get(23..26)? == [0x9D, 0x01, 0x2A]).then_some(())?;
            Some((le16(bytes, 26)? & 0x3FFF, le16(bytes, 28)? & 0x3FFF))
        }
        // A signature byte, then 14 bits each of width - 1 and height - 1.
        b"VP8L" => {
            (*bytes.get(20)? == 0x2F).then_some(())?;
            let bits = le32(bytes, 21)?;
            Some(((bits & 0x3FFF) as usize + 1, ((bits >> 14) & 0x3FFF) as usize + 1))
        }
        // The canvas: 24 bits each of width - 1 and height - 1.
        b"VP8X" => Some((le24(bytes, 24)? + 1, le24(bytes, 27)? + 1)),
        _ => None,
    }
}

/// A BMP's size from its info header: 16-bit sides in the old core header, else signed 32-bit
/// ones (a negative height is a top-down picture).
fn bmp_size(bytes: &[u8]) -> Option<(usize, usize)> {
    if le32(bytes, 14)? == 12 {
        return Some((le16(bytes, 18)?, le16(bytes, 20)?));
    }
    let width = le32(bytes, 18)? as i32;
    let height = le32(bytes, 22)? as i32;
    Some((width.unsigned_abs() as usize, height.unsigned_abs() as usize))
}

/// An AVIF's size: the largest of its `ispe` (image spatial extent) properties, searched for in
/// the first 64 KiB where the metadata lives. The largest, so that no item the browser might
/// decode is bigger than the size checked.
fn avif_size(bytes: &[u8]) -> Option<(usize, usize)> {
    let head = &bytes[..bytes.len().min(1 << 16)];
    let mut size: Option<(usize, usize)> = None;
    for at in (0..head.len().saturating_sub(4)).filter(|&at| &head[at..at + 4] == b"ispe") {
        // The box's version and flags, then width and height.
        if let (Some(width), Some(height)) = (be32(head, at + 8), be32(head, at + 12)) {
            let (w, h) = size.unwrap_or((0, 0));
            size = Some((w.max(width), h.max(height)));
        }
    }
    size
}
