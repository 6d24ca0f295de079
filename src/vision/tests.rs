use super::*;
use crate::gguf::{Array, Gguf, GgufHeader, Value, writer::GgufWriter};

/// The micro Gemma 3 projector (scripts/make_micro_mmproj.py).
fn micro_bytes() -> Vec<u8> {
    micro_bytes_of("gemma3")
}

/// A micro projector of scripts/make_micro_mmproj.py: `gemma3` or `idefics3`.
fn micro_bytes_of(projector: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/models/clip-{projector}-micro.gguf", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(path).unwrap()
}

/// The micro Gemma 3 projector with its metadata changed by `edit` (`None` drops the key) and
/// the tensor `dropped` left out.
fn edited(edit: impl Fn(&str, &Value) -> Option<Value>, dropped: Option<&str>) -> GgufHeader {
    Gguf::parse(&edited_bytes(&micro_bytes(), edit, dropped)).unwrap().header
}

/// `bytes` (a projector file) with its metadata changed by `edit` and the tensor `dropped` left
/// out, as a whole file.
fn edited_bytes(
    bytes: &[u8],
    edit: impl Fn(&str, &Value) -> Option<Value>,
    dropped: Option<&str>,
) -> Vec<u8> {
    let file = Gguf::parse(bytes).unwrap();
    let mut writer = GgufWriter::new();
    for (key, value) in file.metadata().iter() {
        if let Some(value) = edit(key, value) {
            writer = writer.kv(key, value);
        }
    }
    for tensor in file.header.tensors.iter().filter(|t| Some(t.name.as_str()) != dropped) {
        writer =
            writer.tensor(&tensor.name, &tensor.dims, tensor.ggml_type, file.tensor_data(tensor).to_vec());
    }
    writer.to_bytes()
}

/// `bytes` with each tensor renamed by `rename`.
fn renamed_bytes(bytes: &[u8], rename: impl Fn(&str) -> String) -> Vec<u8> {
    let file = Gguf::parse(bytes).unwrap();
    let mut writer = GgufWriter::new();
    for (key, value) in file.metadata().iter() {
        writer = writer.kv(key, value.clone());
    }
    for tensor in &file.header.tensors {
        let data = file.tensor_data(tensor).to_vec();
        writer = writer.tensor(&rename(&tensor.name), &tensor.dims, tensor.ggml_type, data);
    }
    writer.to_bytes()
}

/// `bytes` with one more key and one more F32 vector.
fn with_additions(bytes: &[u8], key: Option<(&str, Value)>, vector: Option<(&str, &[f32])>) -> Vec<u8> {
    let file = Gguf::parse(bytes).unwrap();
    let mut writer = GgufWriter::new();
    for (key, value) in file.metadata().iter() {
        writer = writer.kv(key, value.clone());
    }
    if let Some((key, value)) = key {
        writer = writer.kv(key, value);
    }
    for tensor in &file.header.tensors {
        writer =
            writer.tensor(&tensor.name, &tensor.dims, tensor.ggml_type, file.tensor_data(tensor).to_vec());
    }
    if let Some((name, values)) = vector {
        writer = writer.tensor_f32(name, &[values.len() as u64], values);
    }
    writer.to_bytes()
}

fn with(key: &'static str, replacement: Option<Value>) -> impl Fn(&str, &Value) -> Option<Value> {
    move |k, v| if k == key { replacement.clone() } else { Some(v.clone()) }
}

fn facts(header: &GgufHeader) -> ProjectorFacts {
    ProjectorFacts::of(header).expect("a projector file")
}

#[test]
fn the_micro_gemma3_projector_reads_as_llama_cpp_reads_it() {
    let bytes = micro_bytes();
    let header = Gguf::parse(&bytes).unwrap().header;
    let facts = facts(&header);
    assert_eq!(facts.projector, "gemma3");
    assert_eq!(facts.family, Some("Gemma 3 (4B and up)"));
    assert_eq!(facts.model_architectures, ["gemma3"]);
    assert!(facts.has_vision && !facts.has_audio);
    assert_eq!((facts.image_size, facts.patch_size, facts.patches_per_side), (Some(224), Some(14), Some(16)));
    // CLIP's per-channel values (f32 in the file, read back as f64).
    assert_eq!(
        facts.image_mean.map(|m| m.map(|v| v as f32)),
        Some([0.481_454_66, 0.457_827_5, 0.408_210_73])
    );
    assert_eq!(facts.image_std.map(|m| m.map(|v| v as f32)), Some([0.268_629_54, 0.261_302_6, 0.275_777_1]));
    assert_eq!(
        (facts.encoder_width, facts.encoder_layers, facts.encoder_heads, facts.encoder_feed_forward),
        (Some(32), Some(2), Some(4), Some(64))
    );
    // mm.input_projection.weight is [640, 32]: clip.cpp's output width is its ne[0].
    assert_eq!(facts.output_width, Some(640));
    assert!(facts.problems.is_empty(), "{:?}", facts.problems);
}

#[test]
fn the_micro_smolvlm_projector_reads_and_loads_as_llama_cpp_reads_it() {
    let bytes = micro_bytes_of("idefics3");
    let f = facts(&Gguf::parse(&bytes).unwrap().header);
    assert_eq!((f.projector.as_str(), f.family), ("idefics3", Some("SmolVLM / Idefics3")));
    assert_eq!((f.image_size, f.patch_size, f.patches_per_side), (Some(64), Some(8), Some(8)));
    // mm.model.fc.weight is [128, 256]: its ne[1] is the output width.
    assert_eq!(f.output_width, Some(256));
    let encoder = VisionEncoder::load(crate::model::ModelBytes::from(bytes)).unwrap();
    let shape = encoder.shape();
    // 8 × 8 patches shuffled 2 × 2: 16 rows per square; 128 px makes at most 2 × 2 tiles.
    assert_eq!((shape.tokens, shape.output_width, shape.max_squares), (16, 256, 5));
    assert!(!encoder.attends_both_ways(256));
}

#[test]
fn the_micro_lfm2_vl_projector_reads_and_loads_as_llama_cpp_reads_it() {
    let bytes = micro_bytes_of("lfm2");
    let f = facts(&Gguf::parse(&bytes).unwrap().header);
    assert_eq!((f.projector.as_str(), f.family), ("lfm2", Some("LFM2-VL")));
    // mm.2.weight is [96, 256]: its ne[1] is the output width.
    assert_eq!(f.output_width, Some(256));
    let encoder = VisionEncoder::load(crate::model::ModelBytes::from(bytes)).unwrap();
    let shape = encoder.shape();
    // Squares of up to 4 × a 512 px tile's 64 × 64 patches; up to 10 tiles and a thumbnail.
    assert_eq!((shape.max_patches, shape.tokens, shape.max_squares), (16_384, 4096, 11));
    assert!(!encoder.attends_both_ways(256));
    // Without its feed-forward it is refused, naming what is missing.
    let file = edited_bytes(&micro_bytes_of("lfm2"), |_, v| Some(v.clone()), Some("mm.1.weight"));
    let err = VisionEncoder::load(crate::model::ModelBytes::from(file)).err().expect("refused");
    assert!(err.to_string().contains("mm.1.weight"), "{err}");
}

#[test]
fn the_micro_gemma4_projector_reads_and_loads_as_llama_cpp_reads_it() {
    let bytes = micro_bytes_of("gemma4v");
    let f = facts(&Gguf::parse(&bytes).unwrap().header);
    assert_eq!((f.projector.as_str(), f.family), ("gemma4v", Some("Gemma 4")));
    // mm.input_projection.weight is [32, 256]: its ne[1] is the output width.
    assert_eq!((f.output_width, f.image_tokens), (Some(256), Some([70, 1120])));
    let encoder = VisionEncoder::load(crate::model::ModelBytes::from(bytes.clone())).unwrap();
    // Up to 1120 rows, each 3 × 3 patches.
    assert_eq!((encoder.shape().max_patches, encoder.shape().tokens), (10_080, 1120));
    // Both ways, but causally in E2B and E4B, as mtmd attends them.
    assert!(
        encoder.attends_both_ways(256)
            && !encoder.attends_both_ways(1536)
            && !encoder.attends_both_ways(2560)
    );
    // A patch whose pictures would be beyond the caps, or overflow the arithmetic, is refused.
    for patch in [112, u32::MAX] {
        let file = edited_bytes(&bytes, with("clip.vision.patch_size", Some(Value::U32(patch))), None);
        let err = VisionEncoder::load(crate::model::ModelBytes::from(file)).err().expect("refused");
        assert_eq!(err.kind(), "bad_projector", "{patch}: {err}");
    }
}

#[test]
fn the_micro_qwen35_projector_reads_and_loads_as_llama_cpp_reads_it() {
    let bytes = micro_bytes_of("qwen3vl");
    let f = facts(&Gguf::parse(&bytes).unwrap().header);
    assert_eq!((f.projector.as_str(), f.family), ("qwen3vl_merger", Some("Qwen3-VL / Qwen3.5")));
    // mm.2.bias is [256]; no deepstack layers add to it.
    assert_eq!((f.output_width, f.image_tokens), (Some(256), Some([8, 4096])));
    let encoder = VisionEncoder::load(crate::model::ModelBytes::from(bytes.clone())).unwrap();
    // Up to 4096 rows, each a 2 × 2 block of patches; causal, as mtmd attends them.
    assert_eq!((encoder.shape().max_patches, encoder.shape().tokens), (16_384, 4096));
    assert!(!encoder.attends_both_ways(256));
    // Blocks of other than 2 × 2 are not clip.cpp's graph; the second frame's kernel is needed.
    let file = edited_bytes(&bytes, with("clip.vision.spatial_merge_size", Some(Value::U32(3))), None);
    let err = VisionEncoder::load(crate::model::ModelBytes::from(file)).err().expect("refused");
    assert_eq!(err.kind(), "unsupported_projector", "{err}");
    let file = edited_bytes(&bytes, |_, v| Some(v.clone()), Some("v.patch_embd.weight.1"));
    let err = VisionEncoder::load(crate::model::ModelBytes::from(file)).err().expect("refused");
    assert!(err.to_string().contains("v.patch_embd.weight.1"), "{err}");
    // Qwen3-VL's: two deepstack layers, so rows of 3 × 256 (clip_n_mmproj_embd's count).
    let deepstack = micro_bytes_of("qwen3vl-deepstack");
    assert_eq!(facts(&Gguf::parse(&deepstack).unwrap().header).output_width, Some(768));
    let encoder = VisionEncoder::load(crate::model::ModelBytes::from(deepstack.clone())).unwrap();
    assert_eq!(encoder.shape().output_width, 768);
    // A deepstack layer without its first matrix is none: the other layer's second matrix then
    // has the wrong width for the rows the file's output width makes.
    let file = edited_bytes(&deepstack, |_, v| Some(v.clone()), Some("v.deepstack.1.fc1.weight"));
    let err = VisionEncoder::load(crate::model::ModelBytes::from(file)).err().expect("refused");
    assert_eq!(err.kind(), "tensor_shape", "{err}");
    assert!(err.to_string().contains("v.deepstack.0.fc2.weight"), "{err}");
}

#[test]
fn the_micro_qwen2_vl_projectors_read_and_load_as_llama_cpp_reads_them() {
    for (name, projector, family) in
        [("qwen2vl", "qwen2vl_merger", "Qwen2-VL"), ("qwen25vl", "qwen2.5vl_merger", "Qwen2.5-VL")]
    {
        let bytes = micro_bytes_of(name);
        let f = facts(&Gguf::parse(&bytes).unwrap().header);
        assert_eq!((f.projector.as_str(), f.family), (projector, Some(family)));
        assert_eq!((f.output_width, f.image_tokens), (Some(256), Some([8, 4096])));
        let encoder = VisionEncoder::load(crate::model::ModelBytes::from(bytes.clone())).unwrap();
        assert_eq!((encoder.shape().max_patches, encoder.shape().tokens), (16_384, 4096));
        assert!(!encoder.attends_both_ways(256));
        // clip.cpp's Qwen2-VL graph asserts there is no patch bias.
        let with_bias = with_additions(&bytes, None, Some(("v.patch_embd.bias", &[0.0; 32])));
        let err = VisionEncoder::load(crate::model::ModelBytes::from(with_bias)).err().expect("refused");
        assert!(err.to_string().contains("v.patch_embd.bias"), "{name}: {err}");
    }
    // Qwen2-VL's converter writes the language model's width (1536 for 2B) as the encoder's
    // feed-forward, and old conversions 0, with its matrices named the other way round: clip.cpp
    // never reads the width and swaps the names back; we read the width from the up matrix.
    let bytes = micro_bytes_of("qwen2vl");
    let picture = RgbImage::new(61, 47, (0..61 * 47 * 3).map(|i| (i * 7 % 251) as u8).collect()).unwrap();
    let encode = |file: Vec<u8>| {
        VisionEncoder::load(crate::model::ModelBytes::from(file)).unwrap().encode(&picture).unwrap().values
    };
    let expected = encode(bytes.clone());
    let wide = edited_bytes(&bytes, with("clip.vision.feed_forward_length", Some(Value::U32(1536))), None);
    assert_eq!(facts(&Gguf::parse(&wide).unwrap().header).encoder_feed_forward, Some(64));
    assert_eq!(encode(wide), expected);
    let unsaid = edited_bytes(&bytes, with("clip.vision.feed_forward_length", Some(Value::U32(0))), None);
    let old = renamed_bytes(&unsaid, |name| {
        if name.contains(".ffn_up.") {
            name.replace(".ffn_up.", ".ffn_down.")
        } else {
            name.replace(".ffn_down.", ".ffn_up.")
        }
    });
    assert_eq!(encode(old), expected);
    // Qwen2.5-Omni's projector (`qwen2.5o`, with an audio encoder beside the image one): clip.cpp
    // encodes its pictures as Qwen2.5-VL's, and so do we.
    let qwen25 = micro_bytes_of("qwen25vl");
    let omni = edited_bytes(
        &qwen25,
        |key, value| match key {
            "clip.projector_type" => Some(Value::String("qwen2.5o".into())),
            "clip.has_audio_encoder" => Some(Value::Bool(true)),
            _ => Some(value.clone()),
        },
        None,
    );
    let f = facts(&Gguf::parse(&omni).unwrap().header);
    assert!(f.family.unwrap().starts_with("Qwen2.5-Omni") && f.has_audio && f.problems.is_empty(), "{f:?}");
    assert_eq!((f.encoder_feed_forward, f.image_tokens), (Some(60), Some([8, 4096])));
    assert_eq!(encode(omni), encode(qwen25.clone()));
    // Qwen2.5-VL's window pattern is required (clip.cpp throws without it).
    let bytes = micro_bytes_of("qwen25vl");
    let file = edited_bytes(&bytes, with("clip.vision.n_wa_pattern", None), None);
    let err = VisionEncoder::load(crate::model::ModelBytes::from(file)).err().expect("refused");
    assert!(err.to_string().contains("n_wa_pattern"), "{err}");
    // Qwen2-VL with windows: clip.cpp's graph would take inputs it never sets.
    let file =
        with_additions(&micro_bytes_of("qwen2vl"), Some(("clip.vision.n_wa_pattern", Value::U32(2))), None);
    let err = VisionEncoder::load(crate::model::ModelBytes::from(file)).err().expect("refused");
    assert_eq!(err.kind(), "unsupported_projector", "{err}");
}

/// SmolVLM's two keys are needed (clip.cpp has no default for the scale factor, and without
/// the longest side mtmd slices another way), and a longest side of too many tiles is refused.
#[test]
fn a_smolvlm_projector_without_its_keys_or_with_too_many_tiles_is_refused() {
    let bytes = micro_bytes_of("idefics3");
    let load = |edit: &dyn Fn(&str, &Value) -> Option<Value>| {
        let file = edited_bytes(&bytes, edit, None);
        VisionEncoder::load(crate::model::ModelBytes::from(file)).err().expect("refused")
    };
    let err = load(&with("clip.vision.projector.scale_factor", None));
    assert_eq!(err.kind(), "bad_projector", "{err}");
    assert!(err.to_string().contains("scale_factor"), "{err}");
    let err = load(&with("clip.vision.projector.scale_factor", Some(Value::U32(3))));
    assert!(err.to_string().contains("do not merge in squares of 3"), "{err}");
    let err = load(&with("clip.vision.preproc_image_size", None));
    assert_eq!(err.kind(), "unsupported_projector", "{err}");
    let err = load(&with("clip.vision.preproc_image_size", Some(Value::U32(64 * 9))));
    assert!(err.to_string().contains("more than 64 tiles"), "{err}");
    let err = load(&with("clip.vision.preproc_image_size", Some(Value::String("128".into()))));
    assert_eq!(err.kind(), "bad_projector", "{err}");
}

#[test]
fn a_language_model_is_no_projector() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/models/qwen3-micro-q8_0.gguf");
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(ProjectorFacts::of(&Gguf::parse(&bytes).unwrap().header), None);
}

#[test]
fn the_engine_refuses_a_projector_saying_what_it_is() {
    let bytes = micro_bytes();
    let header = Gguf::parse(&bytes).unwrap().header;
    let error = crate::engine::Engine::check_header(&header).unwrap_err();
    assert_eq!(error.kind(), "projector_file");
    let message = error.to_string();
    assert!(message.contains("vision projector (mmproj) for Gemma 3"), "{message}");
    assert!(message.contains("inferno generate MODEL --mmproj FILE"), "{message}");
}

#[test]
fn bad_values_are_named_and_left_out() {
    let header = edited(with("clip.vision.image_mean", Some(Value::Array(Array::F32(vec![0.5, 0.5])))), None);
    let f = facts(&header);
    assert_eq!(f.image_mean, None);
    assert!(f.problems.iter().any(|p| p.contains("image_mean has 2 values, not 3")), "{:?}", f.problems);

    let header =
        edited(with("clip.vision.image_std", Some(Value::Array(Array::F32(vec![0.5, 0.0, 0.5])))), None);
    let f = facts(&header);
    assert_eq!(f.image_std, None);
    assert!(f.problems.iter().any(|p| p.contains("positive finite")), "{:?}", f.problems);

    let header = edited(
        with("clip.vision.image_mean", Some(Value::Array(Array::F32(vec![0.5, f32::NAN, 0.5])))),
        None,
    );
    assert_eq!(facts(&header).image_mean, None);

    let header = edited(with("clip.vision.image_size", Some(Value::U32(230))), None);
    let f = facts(&header);
    assert_eq!((f.image_size, f.patches_per_side), (Some(230), None));
    assert!(
        f.problems.iter().any(|p| p.contains("not a whole number of 14-pixel patches")),
        "{:?}",
        f.problems
    );

    for absurd in [Value::U32(0), Value::U64(u64::MAX), Value::String("224".into())] {
        let f = facts(&edited(with("clip.vision.patch_size", Some(absurd.clone())), None));
        assert_eq!(f.patch_size, None, "{absurd:?}");
        assert_eq!(f.problems.len(), 1, "{absurd:?}: {:?}", f.problems);
    }
}

#[test]
fn missing_pieces_are_named() {
    let f = facts(&edited(with("clip.projector_type", None), None));
    assert_eq!((f.projector.as_str(), f.family), ("", None));
    assert!(f.problems.iter().any(|p| p.contains("names no projector type")));
    assert!(f.refusal().starts_with("a vision projector (mmproj):"), "{}", f.refusal());

    let f = facts(&edited(|_, v| Some(v.clone()), Some("mm.input_projection.weight")));
    assert_eq!(f.output_width, None);
    assert!(f.problems.iter().any(|p| p.contains("lacks mm.input_projection.weight")), "{:?}", f.problems);

    let f = facts(&edited(with("clip.has_vision_encoder", None), None));
    assert!(!f.has_vision);
    assert!(f.problems.iter().any(|p| p.contains("has no image encoder")));
}

#[test]
fn an_unknown_projector_type_is_named_without_a_family() {
    let f = facts(&edited(with("clip.projector_type", Some(Value::String("cogvlm".into()))), None));
    assert_eq!((f.projector.as_str(), f.family, f.output_width), ("cogvlm", None, None));
    assert!(f.problems.is_empty(), "{:?}", f.problems);
    assert!(f.refusal().contains("mmproj, type cogvlm"), "{}", f.refusal());
}

/// The sizes the header reader finds are the `image` crate's (the decoder native builds use),
/// for each format it writes, at sizes whose bytes differ by field; and a cut header is none.
#[test]
fn picture_headers_read_as_the_image_crate_reads_them() {
    use ::image::{ExtendedColorType, ImageEncoder, codecs};
    type Encode = fn(&mut Vec<u8>, &[u8], u32, u32);
    let encoders: [(&str, Encode); 4] = [
        ("png", |out, pixels, w, h| {
            codecs::png::PngEncoder::new(out).write_image(pixels, w, h, ExtendedColorType::Rgb8).unwrap()
        }),
        ("jpeg", |out, pixels, w, h| {
            codecs::jpeg::JpegEncoder::new(out).write_image(pixels, w, h, ExtendedColorType::Rgb8).unwrap()
        }),
        ("gif", |out, pixels, w, h| {
            codecs::gif::GifEncoder::new(out).encode(pixels, w, h, ExtendedColorType::Rgb8).unwrap()
        }),
        ("webp", |out, pixels, w, h| {
            codecs::webp::WebPEncoder::new_lossless(out)
                .write_image(pixels, w, h, ExtendedColorType::Rgb8)
                .unwrap()
        }),
    ];
    for (format, encode) in encoders {
        for (width, height) in [(1, 1), (300, 200), (257, 1031), (4099, 3)] {
            let pixels = vec![128u8; (width * height * 3) as usize];
            let mut file = Vec::new();
            encode(&mut file, &pixels, width, height);
            let header = picture_header(&file).unwrap_or_else(|| panic!("{format} {width}x{height}"));
            assert_eq!(
                (header.format, header.width, header.height),
                (format, width as usize, height as usize)
            );
            assert_eq!(dimensions(&file), Some((width as usize, height as usize)), "{format}");
            // A header cut short is no header (the JPEG's frame comes after its tables).
            let cut = if format == "jpeg" {
                file.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap() + 6
            } else if format == "gif" {
                9
            } else {
                20
            };
            assert_eq!(picture_header(&file[..cut]), None, "{format} cut");
        }
    }
    for name in ["gradient-224x224", "stripes-300x200", "tower-90x250", "noise-61x47"] {
        let file = std::fs::read(format!("tests/fixtures/images/{name}.png")).unwrap();
        let header = picture_header(&file).unwrap();
        assert_eq!(Some((header.width, header.height)), dimensions(&file), "{name}");
    }
}

/// BMP (both info headers, top-down too) and AVIF (the largest `ispe`), written by hand, and a
/// file of no known format.
#[test]
fn bmp_and_avif_headers_and_unknown_files() {
    let mut bmp = b"BM".to_vec();
    bmp.extend([0; 12]);
    bmp.extend(40u32.to_le_bytes());
    bmp.extend(640i32.to_le_bytes());
    bmp.extend((-480i32).to_le_bytes());
    assert_eq!(picture_header(&bmp), Some(PictureHeader { format: "bmp", width: 640, height: 480 }));
    let mut core = b"BM".to_vec();
    core.extend([0; 12]);
    core.extend(12u32.to_le_bytes());
    core.extend(33u16.to_le_bytes());
    core.extend(7u16.to_le_bytes());
    assert_eq!(picture_header(&core), Some(PictureHeader { format: "bmp", width: 33, height: 7 }));

    let ispe = |w: u32, h: u32| {
        [&20u32.to_be_bytes()[..], b"ispe", &[0; 4], &w.to_be_bytes(), &h.to_be_bytes()].concat()
    };
    let avif =
        [&24u32.to_be_bytes()[..], b"ftypavif", &[0; 12], b"meta", &ispe(20_000, 300), &ispe(64, 20_000)]
            .concat();
    assert_eq!(picture_header(&avif), Some(PictureHeader { format: "avif", width: 20_000, height: 20_000 }));

    assert_eq!(picture_header(b"<svg xmlns='http://www.w3.org/2000/svg'/>"), None);
    assert_eq!(picture_header(b""), None);
    assert_eq!(picture_header(&[0xFF, 0xD8, 0xFF, 0xDA, 0, 2]), None, "a JPEG's data before any frame");
}
