//! Pictures and the image encoder against llama.cpp's mtmd: the goldens of
//! scripts/make_vision_goldens.py (tests/fixtures/golden/clip-gemma3-micro.images.json and
//! clip-idefics3-micro.images.json) for the micro Gemma 3 and SmolVLM projectors, and hostile
//! pictures and projector files.

mod common;

use std::path::PathBuf;

use inferno::engine::{Engine, IMAGE_IDS, Session};
use inferno::model::{AttentionPrecision, ModelBytes, ModelError};
use inferno::sampler::{Sampler, SamplerSettings};
use inferno::vision::{MAX_PIXELS, PicturePart, PromptPart, RgbImage, VisionEncoder, decode};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn golden() -> Value {
    golden_of("clip-gemma3-micro")
}

fn golden_of(projector: &str) -> Value {
    let text = std::fs::read_to_string(fixtures().join(format!("golden/{projector}.images.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn encoder() -> VisionEncoder {
    encoder_of("clip-gemma3-micro")
}

fn encoder_of(projector: &str) -> VisionEncoder {
    let bytes = std::fs::read(fixtures().join(format!("models/{projector}.gguf"))).unwrap();
    VisionEncoder::load(ModelBytes::from(bytes)).unwrap()
}

/// A micro language model (tests/fixtures/models/`model`.gguf) with a micro projector beside it.
fn micro_vision_engine(model: &str, projector: &str) -> Engine {
    let mut engine =
        Engine::load(std::fs::read(fixtures().join(format!("models/{model}.gguf"))).unwrap()).unwrap();
    engine
        .attach_projector(std::fs::read(fixtures().join(format!("models/{projector}.gguf"))).unwrap())
        .unwrap();
    engine
}

/// The squares of a picture's layout, in order.
fn squares(encoder: &VisionEncoder, image: &RgbImage) -> Vec<RgbImage> {
    let parts = encoder.layout(image).unwrap();
    parts
        .into_iter()
        .filter_map(|part| match part {
            PicturePart::Square(square) => Some(square),
            PicturePart::Text(_) => None,
        })
        .collect()
}

/// mtmd's chunks as prompt ids: a text chunk's ids, `None` for each row of an image chunk.
fn chunk_ids(chunks: &Value) -> Vec<Option<u32>> {
    let mut expected = Vec::new();
    for chunk in chunks.as_array().unwrap() {
        match chunk.get("text_ids") {
            Some(text) => {
                expected.extend(text.as_array().unwrap().iter().map(|id| Some(id.as_u64().unwrap() as u32)))
            }
            None => {
                expected.extend(std::iter::repeat_n(None, chunk["image_tokens"].as_u64().unwrap() as usize))
            }
        }
    }
    expected
}

fn assert_ids_match_chunks(ids: &[u32], chunks: &Value) {
    let expected = chunk_ids(chunks);
    assert_eq!(ids.len(), expected.len(), "{ids:?}");
    for (ours, theirs) in ids.iter().zip(&expected) {
        match theirs {
            Some(token) => assert_eq!(ours, token, "{ids:?}"),
            None => assert!(*ours >= IMAGE_IDS, "{ids:?}"),
        }
    }
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
        // The browser's test reads this one's pixels raw (it decodes no PNG).
        if let Ok(raw) =
            std::fs::read(fixtures().join(entry["file"].as_str().unwrap().replace(".png", ".rgb")))
        {
            assert_eq!(image.pixels(), raw, "{}", entry["file"]);
        }
        let [prepared] = &squares(&encoder, &image)[..] else { panic!("one square") };
        assert_eq!((prepared.width(), prepared.height()), (224, 224));
        assert_eq!(
            hex_sha256(prepared.pixels()),
            entry["preprocessed_sha256"].as_str().unwrap(),
            "{}",
            entry["file"]
        );
    }
}

/// Bit for bit against mtmd's embeddings with llama.cpp's default attention (flash attention:
/// keys and values in f16, the tiled kernel), natively, where our kernels sum in llama.cpp's
/// AVX2 orders (F16 matmuls as llamafile's GEMM where rows are multiples of 8, else as
/// `ggml_vec_dot_f16`); and within 1e-3 of its f32 attention, relative to the largest
/// magnitude (the two references differ by about 2e-4).
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
        assert_eq!(default, 0.0, "{name}");
        assert!(f32_attention < 1e-3, "{name}: {f32_attention}");
    }
}

/// Gemma 3 270M with the micro projector (its width, 640, is 270M's), as mtmd runs an image
/// prompt: the same chunks (mtmd's tokenizer: BOS, the text, `<start_of_image>`, 16 rows,
/// `<end_of_image>`, the rest), the image attended both ways, then greedy steps. The logits of
/// steps 0-3 within the real models' bound of the text goldens (0.1; measured: 0, the encoder
/// and the language model both bit for bit), every greedy token equal.
#[test]
fn an_image_prompt_on_gemma3_270m_matches_llama_cpp() {
    let golden = golden();
    let chat = &golden["chat"];
    let mut engine = Engine::load(std::fs::read(common::model("gemma3-270m-q4_k_m.gguf")).unwrap()).unwrap();
    engine.set_attention_precision(AttentionPrecision::Exact);
    engine
        .attach_projector(std::fs::read(fixtures().join("models/clip-gemma3-micro.gguf")).unwrap())
        .unwrap();
    let worst = run_image_prompt(&engine, chat);
    eprintln!("image prompt on Gemma 3 270M: max |Δ| {worst:.4} over the top 20 of steps 0-3");
    assert!(worst < 0.1, "{worst}");
    assert_eq!(engine.images_encoded(), 1);
}

/// Runs a golden's image prompt as mtmd ran it (its chunks checked against our prompt ids),
/// then its greedy steps: each token equal, and the largest |Δ| over the top logits of the
/// steps the golden kept.
fn run_image_prompt(engine: &Engine, chat: &Value) -> f32 {
    let image = decode(&std::fs::read(fixtures().join(chat["picture"].as_str().unwrap())).unwrap()).unwrap();
    let ids =
        engine.encode_with_images(chat["prompt"].as_str().unwrap(), std::slice::from_ref(&image)).unwrap();
    assert_ids_match_chunks(&ids, &chat["chunks"]);

    let mut session = Session::with_prefill_batch(engine, 512, 512).unwrap();
    session.sync(engine, &ids).unwrap();
    let mut sampler = Sampler::new(SamplerSettings::greedy()).unwrap();
    let steps = chat["steps"].as_array().unwrap();
    let mut worst = 0.0f32;
    for (k, theirs) in chat["generated_ids"].as_array().unwrap().iter().enumerate() {
        if let Some(step) = steps.get(k) {
            session.advance(engine).unwrap(); // runs the token sampled last, for these logits
            let row = session.logits().unwrap();
            for top in step["top"].as_array().unwrap() {
                let delta =
                    (row[top["id"].as_u64().unwrap() as usize] - top["logit"].as_f64().unwrap() as f32).abs();
                if std::env::var_os("INFERNO_PARITY_STEPS").is_some() {
                    eprintln!(
                        "step {k} id {} ours {} theirs {}",
                        top["id"],
                        row[top["id"].as_u64().unwrap() as usize],
                        top["logit"]
                    );
                }
                worst = worst.max(delta);
            }
        }
        let ours = session.step(engine, &mut sampler, None, 0).unwrap().token;
        assert_eq!(u64::from(ours), theirs.as_u64().unwrap(), "greedy step {k}");
    }
    worst
}

/// SmolVLM's preprocessing, bit for bit: the picture's longer side to 128 and the other in
/// proportion (made even), both stretched to whole tiles of 64, cut row by row, then the whole
/// picture squeezed to one tile; Lanczos throughout (Pillow's, which mtmd ports).
#[test]
fn smolvlm_cuts_pictures_into_tiles_bit_for_bit_as_mtmd_does() {
    let encoder = encoder_of("clip-idefics3-micro");
    for entry in golden_of("clip-idefics3-micro")["pictures"].as_array().unwrap() {
        let name = entry["file"].as_str().unwrap();
        let squares = squares(&encoder, &picture(entry));
        let hashes: Vec<String> = squares.iter().map(|s| hex_sha256(s.pixels())).collect();
        let expected: Vec<&str> =
            entry["tiles"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
        assert_eq!(hashes, expected, "{name}");
        let grid = &entry["grid"];
        assert_eq!(squares.len() as u64, grid[0].as_u64().unwrap() * grid[1].as_u64().unwrap() + 1, "{name}");
    }
}

/// Each picture alone (`<__media__>`) against mtmd: the same prompt ids (the tiles'
/// `<fake_token_around_image><row_R_col_C>`, newlines between rows, `\n\n` and `<global-img>`
/// before the whole picture), and every square's embeddings bit for bit natively (the patch
/// kernel is F32 here, as SmolVLM's converter writes it, and llama.cpp's convolution rounds it
/// to F16: so do we; before we did, the embeddings were 5e-4 apart).
#[test]
fn smolvlm_pictures_match_llama_cpp_mtmd() {
    let golden = golden_of("clip-idefics3-micro");
    let engine = micro_vision_engine("llama-micro-smolvlm", "clip-idefics3-micro");
    let encoder = engine.projector().unwrap();
    for entry in golden["pictures"].as_array().unwrap() {
        let name = entry["file"].as_str().unwrap();
        let image = picture(entry);
        let embeddings = encoder.encode(&image).unwrap();
        assert_eq!(embeddings.tokens as u64, entry["tokens"].as_u64().unwrap(), "{name}");
        assert_eq!(embeddings.width, 256);
        let error = relative_error(&embeddings.values, &floats(entry["embeddings"].as_str().unwrap()));
        eprintln!("{name}: {error:.2e} from mtmd's embeddings");
        assert_eq!(error, 0.0, "{name}");
        let ids = engine.encode_with_images("<__media__>", std::slice::from_ref(&image)).unwrap();
        assert_ids_match_chunks(&ids, &entry["chunks"]);
    }
    assert_eq!(engine.images_encoded(), golden["pictures"].as_array().unwrap().len());
}

/// The micro SmolVLM language model with the micro projector, as mtmd runs an image prompt: five
/// squares' rows (four tiles and the whole picture) among their markers, attended causally,
/// then greedy steps. The logits of steps 0-3 within the Q8_0 text bound (0.02; measured: 0), with llama.cpp's
/// CPU attention bits.
#[test]
fn an_image_prompt_on_the_micro_smolvlm_matches_llama_cpp() {
    let golden = golden_of("clip-idefics3-micro");
    let mut engine = micro_vision_engine("llama-micro-smolvlm", "clip-idefics3-micro");
    engine.set_attention_precision(AttentionPrecision::Exact);
    let worst = run_image_prompt(&engine, &golden["chat"]);
    eprintln!("image prompt on the micro SmolVLM: max |Δ| {worst:.5} over the top 20 of steps 0-3");
    assert!(worst < 0.02, "{worst}");
    assert_eq!(engine.images_encoded(), 1);
}

/// A picture so narrow that its shorter side resizes to nothing is refused, as mtmd refuses it,
/// and the engine goes on.
#[test]
fn a_picture_too_narrow_for_smolvlm_is_a_bad_image() {
    let engine = micro_vision_engine("llama-micro-smolvlm", "clip-idefics3-micro");
    let sliver = RgbImage::new(300, 1, vec![128; 900]).unwrap();
    let err = engine.encode_with_images("<__media__>", &[sliver]).unwrap_err();
    assert_eq!(err.kind(), "bad_image", "{err}");
    let fine = RgbImage::new(3, 1, vec![128; 9]).unwrap();
    assert!(engine.encode_with_images("<__media__>", &[fine]).is_ok());
}

/// Limits on a picture's rows, as mtmd's `image_min_tokens` and `image_max_tokens`: the wide
/// picture, 300 rows by default, limited to 40-80 takes mtmd's 70 rows, its square's pixels and
/// embeddings bit for bit; the pictures held before are encoded again under the new limits.
/// Limits a projector cannot take are `bad_request`, the limits as they were; a projector whose
/// pictures have a fixed size takes none.
#[test]
fn limits_on_a_pictures_rows_are_as_mtmds() {
    let golden = golden_of("clip-gemma4v-micro");
    let limited = &golden["limited"];
    let mut engine = micro_vision_engine("gemma4-vl-micro-q8_0", "clip-gemma4v-micro");
    let image = picture(limited);
    engine.encode_with_images("<__media__>", std::slice::from_ref(&image)).unwrap();
    let encoded = engine.images_encoded();

    assert_eq!(engine.set_image_tokens(Some(40), Some(80)).unwrap(), Some((40, 80)));
    let encoder = engine.projector().unwrap();
    let [square] = squares(encoder, &image).try_into().unwrap();
    let theirs = &limited["squares"][0];
    assert_eq!(
        (square.width() as u64, square.height() as u64),
        (theirs["width"].as_u64().unwrap(), theirs["height"].as_u64().unwrap())
    );
    assert_eq!(hex_sha256(square.pixels()), theirs["sha256"].as_str().unwrap());
    let embeddings = encoder.encode(&image).unwrap();
    assert_eq!(relative_error(&embeddings.values, &floats(limited["embeddings"].as_str().unwrap())), 0.0);
    let ids = engine.encode_with_images("<__media__>", std::slice::from_ref(&image)).unwrap();
    assert_ids_match_chunks(&ids, &limited["chunks"]);
    assert_eq!(engine.images_encoded(), encoded + 1, "encoded again under the new limits");

    for (min, max) in [(Some(0), None), (Some(90), Some(80)), (None, Some(1121))] {
        let err = engine.set_image_tokens(min, max).unwrap_err();
        assert_eq!(err.kind(), "bad_request", "{err}");
    }
    assert_eq!(engine.projector().unwrap().image_tokens(), Some((40, 80)));
    assert_eq!(engine.set_image_tokens(None, None).unwrap(), Some((70, 1120)));
    let mut smolvlm = micro_vision_engine("llama-micro-smolvlm", "clip-idefics3-micro");
    assert_eq!(smolvlm.set_image_tokens(Some(1), Some(2)).unwrap(), None);
}

/// Qwen3.5's limits (mtmd's image_min_tokens / image_max_tokens): the wide picture, 690 rows by
/// default, limited to 16-64 takes mtmd's 54, its square and embeddings bit for bit; an image
/// prompt under them (the stripes, 54 rows in a 9 × 6 grid) gives llama.cpp's logits and tokens.
#[test]
fn limits_on_a_qwen_pictures_rows_are_as_mtmds() {
    let golden = golden_of("clip-qwen3vl-micro");
    let limited = &golden["limited"];
    let mut engine = micro_vision_engine("qwen35-micro-q8_0", "clip-qwen3vl-micro");
    assert_eq!(engine.projector().unwrap().image_tokens(), Some((8, 4096)));
    assert_eq!(engine.set_image_tokens(Some(16), Some(64)).unwrap(), Some((16, 64)));
    let encoder = engine.projector().unwrap();
    let image = picture(limited);
    let [square] = squares(encoder, &image).try_into().unwrap();
    let theirs = &limited["squares"][0];
    assert_eq!(
        (square.width() as u64, square.height() as u64),
        (theirs["width"].as_u64().unwrap(), theirs["height"].as_u64().unwrap())
    );
    assert_eq!(hex_sha256(square.pixels()), theirs["sha256"].as_str().unwrap());
    let embeddings = encoder.encode(&image).unwrap();
    assert_eq!(embeddings.grid, Some([9, 6]));
    assert_eq!(relative_error(&embeddings.values, &floats(limited["embeddings"].as_str().unwrap())), 0.0);
    let ids = engine.encode_with_images("<__media__>", std::slice::from_ref(&image)).unwrap();
    assert_ids_match_chunks(&ids, &limited["chunks"]);
    engine.set_attention_precision(AttentionPrecision::Exact);
    let worst = run_image_prompt(&engine, &limited["chat"]);
    assert!(worst < 0.02, "{worst}");
}

/// A picture so long and thin that Gemma 4's resize would give a side more patches than its
/// position tables have rows (mtmd would read past them) is a bad image; the engine goes on.
#[test]
fn a_picture_too_long_for_gemma4s_positions_is_a_bad_image() {
    let engine = micro_vision_engine("gemma4-vl-micro-q8_0", "clip-gemma4v-micro");
    let long = RgbImage::new(4000, 10, vec![128; 4000 * 10 * 3]).unwrap();
    let err = engine.encode_with_images("<__media__>", &[long]).unwrap_err();
    assert_eq!(err.kind(), "bad_image", "{err}");
    assert!(err.to_string().contains("501 patches"), "{err}");
    let fine = RgbImage::new(120, 30, vec![128; 120 * 30 * 3]).unwrap();
    assert!(engine.encode_with_images("<__media__>", &[fine]).is_ok());
}

/// LFM2-VL's preprocessing, bit for bit: small pictures whole at their own aspect (sides
/// multiples of 16 making 64 to 256 rows of output), the larger wide-480x360 fitted on black to
/// 3 × 2 tiles of 512 and cut, then the whole picture as a thumbnail; bilinear throughout.
#[test]
fn lfm2_vl_prepares_pictures_bit_for_bit_as_mtmd_does() {
    assert_squares_are_mtmds("clip-lfm2-micro");
}

/// Gemma 4's preprocessing (mtmd's dyn_size), bit for bit: each picture fitted on black, with
/// Pillow's bicubic filter (which mtmd ports), to its own aspect with sides multiples of 24 and
/// 70 to 1120 rows of output.
#[test]
fn gemma4_prepares_pictures_bit_for_bit_as_mtmd_does() {
    assert_squares_are_mtmds("clip-gemma4v-micro");
}

/// Every golden picture's squares: their sizes and pixels' SHA-256s.
fn assert_squares_are_mtmds(projector: &str) {
    let encoder = encoder_of(projector);
    for entry in golden_of(projector)["pictures"].as_array().unwrap() {
        let name = entry["file"].as_str().unwrap();
        let squares = squares(&encoder, &picture(entry));
        let expected = entry["squares"].as_array().unwrap();
        assert_eq!(squares.len(), expected.len(), "{name}");
        for (square, theirs) in squares.iter().zip(expected) {
            assert_eq!(
                (square.width() as u64, square.height() as u64),
                (theirs["width"].as_u64().unwrap(), theirs["height"].as_u64().unwrap()),
                "{name}"
            );
            assert_eq!(hex_sha256(square.pixels()), theirs["sha256"].as_str().unwrap(), "{name}");
        }
    }
}

/// Each picture alone against mtmd: the same prompt ids (`<|image_start|>`, each tile's
/// `<|img_row_R_col_C|>`, `<|img_thumbnail|>`, `<|image_end|>`: where the micro vocabulary lacks
/// a row-and-column token, both sides spell it in text), and every square's embeddings (its
/// first 16 rows for the tiled picture, whose squares are 1,024 rows each) bit for bit natively:
/// positions resized to each square's grid by ggml's antialiased bilinear, the pixel unshuffle,
/// the LayerNorm and the GELU feed-forward.
#[test]
fn lfm2_vl_pictures_match_llama_cpp_mtmd() {
    assert_pictures_are_mtmds("lfm2-vl-micro-q8_0", "clip-lfm2-micro");
}

/// Each picture alone against mtmd: `<|image>`, the picture's rows, `<image|>`, and its
/// embeddings bit for bit natively: pixels in −1..1, x and y position tables, RMS norms, per-head
/// Q/K norms and normalized values, the 2D RoPE, attention at scale 1, post norms, the gated
/// quick-GELU feed-forward, each layer's output scale, the clamped linears, the 3 × 3 pool scaled
/// by √width, the standardization, the RMS norm and the clamped projection.
#[test]
fn gemma4_pictures_match_llama_cpp_mtmd() {
    assert_pictures_are_mtmds("gemma4-vl-micro-q8_0", "clip-gemma4v-micro");
}

/// Qwen3.5's preprocessing (mtmd's dyn_size with Qwen-VL's numbers), bit for bit: each picture
/// fitted on black, bicubic, to its own aspect with sides multiples of 16 and 8 to 4096 rows.
#[test]
fn qwen_vl_prepares_pictures_bit_for_bit_as_mtmd_does() {
    assert_squares_are_mtmds("clip-qwen3vl-micro");
}

/// Each picture alone against mtmd: `<|vision_start|>`, the picture's rows, `<|vision_end|>`,
/// and its embeddings bit for bit natively: both frames' kernels, the patches in 2 × 2 blocks,
/// the learned positions resized with corners aligned, LayerNorms, the fused Q/K/V, vision
/// M-RoPE (rows, then columns), the GELU feed-forward, and the merger.
#[test]
fn qwen_vl_pictures_match_llama_cpp_mtmd() {
    assert_pictures_are_mtmds("qwen35-micro-q8_0", "clip-qwen3vl-micro");
}

/// Qwen3-VL's projector: the same encoder with deepstack layers, each layer's output merged
/// and through its own LayerNorm and GELU feed-forward beside the picture's embedding (rows of 3
/// × 256), bit for bit.
#[test]
fn qwen3_vl_deepstack_pictures_match_llama_cpp_mtmd() {
    assert_pictures_are_mtmds("qwen3vl-micro-q8_0", "clip-qwen3vl-deepstack-micro");
}

/// Qwen2-VL's preprocessing in its own 14-pixel patches (sides multiples of 28), bit for bit.
#[test]
fn qwen2_vl_prepares_pictures_bit_for_bit_as_mtmd_does() {
    assert_squares_are_mtmds("clip-qwen2vl-micro");
}

/// Qwen2-VL's encoder against mtmd, bit for bit: both frames' kernels, no patch bias and no
/// learned positions, LayerNorms, separate Q/K/V with biases, vision M-RoPE, the quick-GELU
/// feed-forward, and the merger.
#[test]
fn qwen2_vl_pictures_match_llama_cpp_mtmd() {
    assert_pictures_are_mtmds("qwen2vl-micro-q8_0", "clip-qwen2vl-micro");
}

/// Qwen2.5-VL's encoder against mtmd, bit for bit: RMS norms, the gated SiLU feed-forward (60
/// wide: each row's last 4 through libm, as ggml's SwiGLU), and window attention: the patches
/// reordered window by window (windows of 4 × 4 blocks, ragged at the right and bottom), their
/// rotations with them, layers 0 and 2 attending within each window (the one-pass kernel for
/// the 48-patch picture, the tiled one for the others) and layer 1 over the whole picture, the
/// merger's rows put back in reading order.
#[test]
fn qwen2_5_vl_pictures_match_llama_cpp_mtmd() {
    assert_pictures_are_mtmds("qwen2vl-micro-q8_0", "clip-qwen25vl-micro");
}

fn assert_pictures_are_mtmds(model: &str, projector: &str) {
    let golden = golden_of(projector);
    let engine = micro_vision_engine(model, projector);
    let encoder = engine.projector().unwrap();
    for entry in golden["pictures"].as_array().unwrap() {
        let name = entry["file"].as_str().unwrap();
        let image = picture(entry);
        let encoded = encoder.encode_for_prompt(&image).unwrap();
        let kept = entry.get("rows_kept").and_then(|k| k.as_u64()).map(|k| k as usize);
        let width = encoded.embeddings.width;
        let mut ours = Vec::new();
        let mut first = 0;
        for part in &encoded.parts {
            if let PromptPart::Rows(n) = part {
                let rows = kept.unwrap_or(*n).min(*n);
                ours.extend_from_slice(&encoded.embeddings.values[first * width..(first + rows) * width]);
                first += n;
            }
        }
        let error = relative_error(&ours, &floats(entry["embeddings"].as_str().unwrap()));
        eprintln!("{name}: {error:.2e} from mtmd's embeddings");
        assert_eq!(error, 0.0, "{name}");
        let ids = engine.encode_with_images("<__media__>", std::slice::from_ref(&image)).unwrap();
        assert_ids_match_chunks(&ids, &entry["chunks"]);
    }
}

/// The micro LFM2-VL language model (short convolutions and attention) with the micro
/// projector, as mtmd runs an image prompt: 247 rows of the whole picture, attended causally,
/// then greedy steps, the logits of steps 0-3 within the Q8_0 text bound (0.02; measured: 0).
#[test]
fn an_image_prompt_on_the_micro_lfm2_vl_matches_llama_cpp() {
    let worst = image_prompt_error("lfm2-vl-micro-q8_0", "clip-lfm2-micro");
    assert!(worst < 0.02, "{worst}");
}

/// The micro Gemma 4 language model with the micro projector, as mtmd runs an image prompt: the
/// picture's 104 rows attended both ways (its width is neither E2B's nor E4B's), each with the
/// per-layer inputs of token 0 beside its own projection (llama.cpp's for rows without tokens),
/// then greedy steps, the logits of steps 0-3 within the Q8_0 text bound (0.02).
#[test]
fn an_image_prompt_on_the_micro_gemma4_matches_llama_cpp() {
    let worst = image_prompt_error("gemma4-vl-micro-q8_0", "clip-gemma4v-micro");
    assert!(worst < 0.02, "{worst}");
}

/// The micro Qwen3.5 language model (gated DeltaNet and attention layers with interleaved
/// M-RoPE) with the micro Qwen3.5 projector, as mtmd runs an image prompt: the picture's 247 rows
/// (a 19 × 13 grid) at M-RoPE's positions, each at the picture's first position along the text
/// and at its row and column across, the text after it 19 positions on (mtmd's n_past 37 after
/// 265 rows), causal; then greedy steps, the logits of steps 0-3 within the Q8_0 text bound
/// (0.02). With positions by cache slot instead, greedy step 10 already differs.
#[test]
fn an_image_prompt_on_the_micro_qwen35_matches_llama_cpp() {
    let golden = golden_of("clip-qwen3vl-micro");
    assert_eq!(golden["chat"]["n_past"], 37);
    let worst = image_prompt_error("qwen35-micro-q8_0", "clip-qwen3vl-micro");
    assert!(worst < 0.02, "{worst}");
}

/// The micro Qwen3-VL language model (Qwen3's layers, interleaved M-RoPE over whole heads) with
/// the micro deepstack projector: the picture's rows at M-RoPE's positions, their deepstack
/// slices added after layers 0 and 1, as llama.cpp runs them; the logits of steps 0-3 within the
/// Q8_0 text bound (0.02). Without the deepstack adds greedy step 0 already differs.
#[test]
fn an_image_prompt_on_the_micro_qwen3_vl_matches_llama_cpp() {
    let worst = image_prompt_error("qwen3vl-micro-q8_0", "clip-qwen3vl-deepstack-micro");
    assert!(worst < 0.02, "{worst}");
}

/// The micro Qwen2-VL language model (Qwen2's layers, M-RoPE in sections) with each of the micro
/// Qwen2-VL and Qwen2.5-VL projectors: the picture's 77 rows (an 11 × 7 grid) at M-RoPE's
/// positions, the text after it 11 on (mtmd's n_past 29 after 95 rows); the logits of steps 0-3
/// within 0.002 (measured: 0; Qwen3-VL's interleaved sections instead give 0.015 and 0.020).
#[test]
fn an_image_prompt_on_the_micro_qwen2_vl_matches_llama_cpp() {
    for projector in ["clip-qwen2vl-micro", "clip-qwen25vl-micro"] {
        assert_eq!(golden_of(projector)["chat"]["n_past"], 29);
        let worst = image_prompt_error("qwen2vl-micro-q8_0", projector);
        assert!(worst < 0.002, "{projector}: {worst}");
    }
}

/// The largest |Δ| of a micro pair's chat golden's top logits (Exact attention), its greedy
/// tokens asserted equal.
fn image_prompt_error(model: &str, projector: &str) -> f32 {
    let golden = golden_of(projector);
    let mut engine = micro_vision_engine(model, projector);
    engine.set_attention_precision(AttentionPrecision::Exact);
    let worst = run_image_prompt(&engine, &golden["chat"]);
    eprintln!("image prompt on {model}: max |Δ| {worst:.5} over the top 20 of steps 0-3");
    worst
}

/// A picture added square by square (the browser's worker reports each square and takes a stop
/// between them) gives what one call gives: the same ids and rows, one encoding counted; a
/// picture encoded before has no square to encode; an unfinished one is refused.
#[test]
fn a_tiled_picture_encodes_square_by_square_as_in_one_call() {
    let load = || micro_vision_engine("llama-micro-smolvlm", "clip-idefics3-micro");
    let image = picture(&golden_of("clip-idefics3-micro")["pictures"][1]);
    let whole = load().image_ids(&image).unwrap();
    let engine = load();
    let mut pending = engine.begin_picture(&image).unwrap();
    assert_eq!((pending.squares(), pending.squares_left()), (5, 5), "four tiles and the whole picture");
    let unfinished = engine.begin_picture(&image).unwrap();
    for left in (0..5).rev() {
        engine.encode_next_square(&mut pending).unwrap();
        assert_eq!(pending.squares_left(), left);
    }
    assert_eq!(engine.finish_picture(pending).unwrap(), whole);
    assert_eq!(engine.images_encoded(), 1);
    let again = engine.begin_picture(&image).unwrap();
    assert_eq!(again.squares_left(), 0, "found by its content hash");
    assert_eq!(engine.finish_picture(again).unwrap(), whole);
    assert_eq!(engine.images_encoded(), 1);
    // Begun before the picture was held, it still has squares to encode: refused unfinished.
    assert_eq!(engine.finish_picture(unfinished).unwrap_err().kind(), "bad_image");
}

/// A follow-up turn sends the same picture again: found by its content hash, not encoded
/// again, and the session keeps its cached rows (only the new text is evaluated).
#[test]
fn a_follow_up_question_reuses_the_pictures_encoding_and_cache() {
    let mut engine = Engine::load(std::fs::read(common::model("gemma3-270m-q4_k_m.gguf")).unwrap()).unwrap();
    engine
        .attach_projector(std::fs::read(fixtures().join("models/clip-gemma3-micro.gguf")).unwrap())
        .unwrap();
    let entries = golden()["pictures"].as_array().unwrap().clone();
    let image = picture(&entries[1]);
    let first = "<start_of_turn>user\n<__media__>What is this?<end_of_turn>\n<start_of_turn>model\n";
    let ids = engine.encode_with_images(first, std::slice::from_ref(&image)).unwrap();
    let mut session = Session::new(&engine, 256).unwrap();
    session.sync(&engine, &ids).unwrap();
    let follow_up = format!(
        "{first}Stripes.<end_of_turn>\n<start_of_turn>user\nWhat colour?<end_of_turn>\n<start_of_turn>model\n"
    );
    let more = engine.encode_with_images(&follow_up, std::slice::from_ref(&image)).unwrap();
    let report = session.sync(&engine, &more).unwrap();
    assert_eq!(engine.images_encoded(), 1);
    assert_eq!(report.reused, ids.len());
    assert_eq!(report.evaluated, more.len() - ids.len());
    // Another picture is another encoding, with other ids.
    let other = engine.encode_with_images(first, &[picture(&entries[2])]).unwrap();
    assert_eq!(engine.images_encoded(), 2);
    assert_ne!(other, ids);
    // A picture without its marker, or a marker without a picture, is refused.
    assert_eq!(
        engine.encode_with_images("no marker", std::slice::from_ref(&image)).unwrap_err().kind(),
        "bad_request"
    );
    assert_eq!(engine.encode_with_images("<__media__>", &[]).unwrap_err().kind(), "bad_request");
}

/// Under Qwen3.5's M-RoPE the text after a picture stands apart from its cache slots, and a
/// session works its positions out from the ids it holds: a follow-up question with a second
/// picture, run on the cached first turn, and the same after a rollback into the second turn
/// (through the DeltaNet layers' checkpoints), give the logits a fresh session gives for the
/// whole prompt at once, within batch splits' rounding (measured: 0); positions counted by slot
/// after the first picture would be far off.
#[test]
fn qwen35_positions_after_pictures_survive_follow_ups_and_rollbacks() {
    let engine = micro_vision_engine("qwen35-micro-q8_0", "clip-qwen3vl-micro");
    let entries = golden_of("clip-qwen3vl-micro")["pictures"].as_array().unwrap().clone();
    let (stripes, tower) = (picture(&entries[1]), picture(&entries[2]));
    let first = "<|im_start|>user\n<__media__>What is this?<|im_end|>\n<|im_start|>assistant\n";
    let ids = engine.encode_with_images(first, std::slice::from_ref(&stripes)).unwrap();
    let follow_up = format!(
        "{first}Stripes.<|im_end|>\n<|im_start|>user\n<__media__>And this one?<|im_end|>\n<|im_start|>assistant\n"
    );
    let both = [stripes.clone(), tower.clone()];
    let more = engine.encode_with_images(&follow_up, &both).unwrap();
    let mut fresh = Session::new(&engine, 1024).unwrap();
    fresh.sync(&engine, &more).unwrap();
    let expected = fresh.logits().unwrap().to_vec();
    let gap = |session: &Session| {
        let row = session.logits().unwrap();
        row.iter().zip(&expected).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max)
    };

    let mut session = Session::new(&engine, 1024).unwrap();
    session.sync(&engine, &ids).unwrap();
    let report = session.sync(&engine, &more).unwrap();
    assert_eq!(report.reused, ids.len());
    let after_follow_up = gap(&session);
    // Back into the second turn's text, and on again.
    session.truncate(ids.len() + 3);
    session.sync(&engine, &more).unwrap();
    let after_rollback = gap(&session);
    eprintln!("follow-up: max |Δ| {after_follow_up:.5}; after a rollback: {after_rollback:.5}");
    assert!(after_follow_up < 1e-3 && after_rollback < 1e-3, "{after_follow_up} {after_rollback}");
}

#[test]
fn a_projector_for_another_width_or_no_projector_is_a_typed_error() {
    // The micro projector is 640 wide; the micro Qwen3 is 256.
    let mut engine =
        Engine::load(std::fs::read(fixtures().join("models/qwen3-micro-q8_0.gguf")).unwrap()).unwrap();
    let image = RgbImage::new(1, 1, vec![9, 9, 9]).unwrap();
    assert_eq!(
        engine.encode_with_images("<__media__>", std::slice::from_ref(&image)).unwrap_err().kind(),
        "no_mmproj"
    );
    let mmproj = std::fs::read(fixtures().join("models/clip-gemma3-micro.gguf")).unwrap();
    let err = engine.attach_projector(mmproj).unwrap_err();
    assert_eq!(err.kind(), "mmproj_mismatch", "{err}");
    assert!(err.to_string().contains("640") && err.to_string().contains("256"), "{err}");
    assert!(engine.projector().is_none());
    // Text still runs after the refusals.
    let ids = engine.encode("Hello");
    Session::new(&engine, 32).unwrap().sync(&engine, &ids).unwrap();
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
