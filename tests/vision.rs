//! Pictures and the image encoder against llama.cpp's mtmd: the goldens of
//! scripts/make_vision_goldens.py (tests/fixtures/golden/clip-gemma3-micro.images.json) for the
//! micro Gemma 3 projector, and hostile pictures and projector files.

use std::path::PathBuf;

use inferno::model::{ModelBytes, ModelError};
use inferno::vision::{MAX_PIXELS, RgbImage, VisionEncoder, decode};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn golden() -> Value {
    let text = std::fs::read_to_string(fixtures().join("golden/clip-gemma3-micro.images.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn encoder() -> VisionEncoder {
    let bytes = std::fs::read(fixtures().join("models/clip-gemma3-micro.gguf")).unwrap();
    VisionEncoder::load(ModelBytes::from(bytes)).unwrap()
}

fn picture(entry: &Value) -> RgbImage {
    decode(&std::fs::read(fixtures().join(entry["file"].as_str().unwrap())).unwrap()).unwrap()
}

fn floats(file: &str) -> Vec<f32> {
    let bytes = std::fs::read(fixtures().join("golden").join(file)).unwrap();
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The largest difference relative to the largest magnitude of `expected`.
fn relative_error(ours: &[f32], expected: &[f32]) -> f32 {
    assert_eq!(ours.len(), expected.len());
    let scale = expected.iter().fold(0.0f32, |m, &v| m.max(v.abs()));
    let worst = ours.iter().zip(expected).fold(0.0f32, |m, (&a, &b)| m.max((a - b).abs()));
    worst / scale
}

#[test]
fn pictures_are_fitted_to_the_encoder_bit_for_bit_as_mtmd_fits_them() {
    let encoder = encoder();
    for entry in golden()["pictures"].as_array().unwrap() {
        let image = picture(entry);
        assert_eq!(
            (image.width() as u64, image.height() as u64),
            (entry["width"].as_u64().unwrap(), entry["height"].as_u64().unwrap())
        );
        let prepared = encoder.prepare(&image);
        assert_eq!((prepared.width(), prepared.height()), (224, 224));
        assert_eq!(
            hex_sha256(prepared.pixels()),
            entry["preprocessed_sha256"].as_str().unwrap(),
            "{}",
            entry["file"]
        );
    }
}

/// Within 1e-3 of mtmd's embeddings, relative to their largest magnitude, for llama.cpp's
/// default attention (flash attention, keys and values in f16), which ours follows, and for its
/// f32 attention, which differs from the default by about 2e-4. Measured: 1.3e-4 to 2.6e-4.
#[test]
fn image_embeddings_match_llama_cpp_mtmd() {
    let encoder = encoder();
    for entry in golden()["pictures"].as_array().unwrap() {
        let embeddings = encoder.encode(&picture(entry)).unwrap();
        assert_eq!(embeddings.tokens as u64, entry["tokens"].as_u64().unwrap());
        assert_eq!(embeddings.width, 640);
        let name = entry["file"].as_str().unwrap();
        let default = relative_error(&embeddings.values, &floats(entry["embeddings"].as_str().unwrap()));
        let f32_attention =
            relative_error(&embeddings.values, &floats(entry["embeddings_f32_attention"].as_str().unwrap()));
        eprintln!("{name}: {default:.2e} from mtmd's default, {f32_attention:.2e} from its f32 attention");
        assert!(default < 1e-3, "{name}: {default}");
        assert!(f32_attention < 1e-3, "{name}: {f32_attention}");
    }
}

#[test]
fn a_picture_over_the_pixel_cap_is_refused_before_it_is_decoded() {
    // A PNG whose header claims 20,000 × 20,000 pixels, with a few bytes of pixel data.
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut chunk = |kind: &[u8], data: &[u8]| {
        let body = [kind, data].concat();
        png.extend((data.len() as u32).to_be_bytes());
        png.extend(&body);
        png.extend(crc32(&body).to_be_bytes());
    };
    chunk(b"IHDR", &[&20_000u32.to_be_bytes()[..], &20_000u32.to_be_bytes(), &[8, 2, 0, 0, 0]].concat());
    chunk(b"IDAT", &[0x78, 0x9c, 0x63, 0x00, 0x00]);
    match decode(&png) {
        Err(ModelError::ImageTooLarge { width: 20_000, height: 20_000, max_pixels }) => {
            assert_eq!(max_pixels, MAX_PIXELS)
        }
        other => panic!("{:?}", other.map(|i| (i.width(), i.height()))),
    }
    assert!(matches!(RgbImage::check_size(20_000, 20_000), Err(ModelError::ImageTooLarge { .. })));
    assert!(matches!(RgbImage::check_size(usize::MAX, 2), Err(ModelError::ImageTooLarge { .. })));
}

#[test]
fn corrupt_and_foreign_files_are_bad_images() {
    let png = std::fs::read(fixtures().join("images/gradient-224x224.png")).unwrap();
    for (what, bytes) in [
        ("truncated PNG", png[..png.len() / 2].to_vec()),
        ("PNG with its pixels scrambled", {
            let mut b = png.clone();
            let n = b.len();
            b[n / 2..n - 20].iter_mut().for_each(|x| *x ^= 0x5a);
            b
        }),
        ("text", b"not a picture at all".to_vec()),
        ("empty", Vec::new()),
    ] {
        let err = decode(&bytes).expect_err(what);
        assert_eq!(err.kind(), "bad_image", "{what}: {err}");
    }
    assert_eq!(RgbImage::new(2, 2, vec![0; 11]).unwrap_err().kind(), "bad_image");
    assert_eq!(RgbImage::new(0, 5, Vec::new()).unwrap_err().kind(), "bad_image");
    assert_eq!(RgbImage::from_rgba(1, 1, &[1, 2, 3]).unwrap_err().kind(), "bad_image");
    assert_eq!(RgbImage::from_rgba(1, 1, &[1, 2, 3, 4]).unwrap().pixels(), [1, 2, 3]);
}

#[test]
fn a_truncated_or_foreign_projector_is_refused_with_its_reason() {
    let bytes = std::fs::read(fixtures().join("models/clip-gemma3-micro.gguf")).unwrap();
    // Cut inside the last tensor's data: the header is whole, a tensor lies outside the file.
    let cut = VisionEncoder::load(ModelBytes::from(bytes[..bytes.len() - 100].to_vec())).err().unwrap();
    assert!(matches!(cut, ModelError::Gguf(_) | ModelError::BadTensor { .. }), "{cut}");
    let text_model = std::fs::read(fixtures().join("models/qwen3-micro-q8_0.gguf")).unwrap();
    let foreign = VisionEncoder::load(ModelBytes::from(text_model)).err().unwrap();
    assert_eq!(foreign.kind(), "bad_projector", "{foreign}");
}

/// PNG's CRC-32, for the hand-made header above.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
        }
    }
    !crc
}
