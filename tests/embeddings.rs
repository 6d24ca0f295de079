//! Embeddings against llama.cpp: the micro Qwen3-Embedding, BERT and Nomic BERT files' vectors
//! for every pooling (`tests/fixtures/golden/*.embeddings.json`, written by
//! `scripts/make_embedding_goldens.py` from llama-cpp-python's `embed`), with the bound:
//! cosine ≥ 0.9999 to llama.cpp's vector, and the same token ids. (Natively the vectors are
//! llama.cpp's to the bit; the bound leaves room for other summing orders, as the browser's.)

mod common;

use std::path::PathBuf;

use inferno::embedding::{EmbedOptions, Pooling, cosine};
use inferno::engine::Engine;
use serde::Deserialize;

#[derive(Deserialize)]
struct Golden {
    model: String,
    poolings: std::collections::BTreeMap<String, Vec<GoldenText>>,
}

#[derive(Deserialize)]
struct GoldenText {
    text: String,
    tokens: Vec<u32>,
    embedding: Vec<f32>,
}

const MIN_COSINE: f64 = 0.9999;

fn fixtures() -> PathBuf {
    common::fixture("")
}

/// The embedding goldens, and the pooling each model's file declares.
const GOLDENS: [(&str, Pooling); 3] = [
    ("qwen3-embed-micro-q8_0", Pooling::Last),
    ("bert-micro-q8_0", Pooling::Mean),
    ("nomic-bert-micro-q8_0", Pooling::Cls),
];

fn golden_of(name: &str) -> Golden {
    let path = fixtures().join(format!("golden/{name}.embeddings.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn golden() -> Golden {
    golden_of(GOLDENS[0].0)
}

fn engine(name: &str) -> Engine {
    Engine::load(std::fs::read(fixtures().join("models").join(name)).unwrap()).unwrap()
}

fn raw(pooling: Pooling) -> EmbedOptions {
    EmbedOptions { pooling: Some(pooling), raw: true, ..EmbedOptions::default() }
}

#[test]
fn every_pooling_matches_llama_cpp() {
    for (name, declared) in GOLDENS {
        let golden = golden_of(name);
        let engine = engine(&golden.model);
        assert_eq!(engine.embedding_pooling(None).unwrap(), declared, "{name}: the file's pooling");
        assert!(engine.is_embedding_model());
        assert!(golden.poolings.len() >= 2);
        for (pooling_name, texts) in &golden.poolings {
            let pooling = Pooling::from_name(pooling_name).unwrap();
            let inputs: Vec<&str> = texts.iter().map(|t| t.text.as_str()).collect();
            let got = engine.embed(&inputs, raw(pooling)).unwrap();
            assert_eq!(got.pooling, pooling);
            assert_eq!(got.prompt_tokens, texts.iter().map(|t| t.tokens.len()).sum::<usize>());
            for (text, vector) in texts.iter().zip(&got.vectors) {
                let encoded = engine.tokenizer().encode(
                    &text.text,
                    inferno::tokenizer::EncodeOptions { add_special: true, parse_special: false },
                );
                let what = format!("{name}, {pooling_name}: {:?}", text.text);
                assert_eq!(encoded, text.tokens, "{what}: tokens");
                let similarity = cosine(vector, &text.embedding);
                let exact =
                    vector.iter().zip(&text.embedding).filter(|(a, b)| a.to_bits() == b.to_bits()).count();
                eprintln!("{what}: cosine {similarity}, {exact} of {} values exact", vector.len());
                assert!(similarity >= MIN_COSINE, "{what}: cosine {similarity}");
                let scale = vector.iter().map(|v| v.abs()).sum::<f32>()
                    / text.embedding.iter().map(|v| v.abs()).sum::<f32>();
                assert!((scale - 1.0).abs() < 1e-3, "{what}: raw vectors are unscaled, found ×{scale}");
            }
        }
    }
}

#[test]
fn vectors_have_unit_length_and_dimensions_cut_before_scaling() {
    let golden = golden();
    let engine = engine(&golden.model);
    let text = &golden.poolings["last"][1];
    let full = engine.embed(&[&text.text], EmbedOptions::default()).unwrap();
    let length = full.vectors[0].iter().map(|v| v * v).sum::<f32>().sqrt();
    assert!((length - 1.0).abs() < 1e-5, "length {length}");
    assert!(cosine(&full.vectors[0], &text.embedding) >= MIN_COSINE);

    let cut = engine
        .embed(&[&text.text], EmbedOptions { dimensions: Some(64), ..EmbedOptions::default() })
        .unwrap();
    assert_eq!(cut.vectors[0].len(), 64);
    let length = cut.vectors[0].iter().map(|v| v * v).sum::<f32>().sqrt();
    assert!((length - 1.0).abs() < 1e-5, "length {length}");
    assert!(cosine(&cut.vectors[0], &text.embedding[..64]) >= MIN_COSINE);
}

#[test]
fn one_request_of_many_texts_equals_one_text_at_a_time() {
    let golden = golden();
    let engine = engine(&golden.model);
    let texts: Vec<&str> = golden.poolings["mean"].iter().map(|t| t.text.as_str()).collect();
    let together = engine.embed(&texts, raw(Pooling::Mean)).unwrap();
    for (text, vector) in texts.iter().zip(&together.vectors) {
        assert_eq!(&engine.embed(&[text], raw(Pooling::Mean)).unwrap().vectors[0], vector);
    }
}

#[test]
fn bad_requests_get_typed_errors() {
    let engine = engine("qwen3-embed-micro-q8_0.gguf");
    let kind = |texts: &[&str], options: EmbedOptions| engine.embed(texts, options).unwrap_err().kind();
    assert_eq!(kind(&["a", ""], EmbedOptions::default()), "empty_input");
    assert_eq!(kind(&["a"], EmbedOptions { dimensions: Some(0), ..Default::default() }), "bad_dimensions");
    assert_eq!(kind(&["a"], EmbedOptions { dimensions: Some(257), ..Default::default() }), "bad_dimensions");
    assert_eq!(
        kind(&["a"], EmbedOptions { pooling: Some(Pooling::Rank), ..Default::default() }),
        "no_pooling"
    );
    let long = "word ".repeat(5000);
    let error = engine.embed(&["a", &long], EmbedOptions::default()).unwrap_err();
    assert_eq!(error.kind(), "input_too_long");
    assert!(error.to_string().starts_with("input 1 has 5002 tokens"), "{error}");
    assert!(engine.embed(&[], EmbedOptions::default()).unwrap().vectors.is_empty());

    // A chat model declares no pooling: it embeds only when asked how.
    let chat = self::engine("qwen3-micro-q8_0.gguf");
    assert!(!chat.is_embedding_model());
    let error = chat.embed(&["a"], EmbedOptions::default()).unwrap_err();
    assert_eq!(error.kind(), "no_pooling");
    assert!(error.to_string().contains("declares no pooling"), "{error}");
    let mean =
        chat.embed(&["a"], EmbedOptions { pooling: Some(Pooling::Mean), ..Default::default() }).unwrap();
    assert_eq!(mean.vectors[0].len(), 256);
}

/// Texts packed into one batch (each its own sequence: positions from 0, its own keys only)
/// give the vectors they give alone, bit for bit: on a model with sliding-window layers
/// (Gemma 2 micro: window 8, texts longer than it), on one with recurrent layers (Qwen3.5
/// micro, which is never packed), and on the encoders (attention over each whole text, learned
/// positions or RoPE from each text's start).
#[test]
fn packed_texts_embed_as_they_do_alone_on_every_layer_kind() {
    let texts = [
        "a short one",
        "The quick brown fox jumps over the lazy dog, twice, and then a third time.",
        "x",
        "Sliding windows see only the last few keys of their own sequence.",
    ];
    let files = [
        "gemma2-micro-q8_0.gguf",
        "qwen35-micro-q8_0.gguf",
        "smollm3-micro-q8_0.gguf",
        "bert-micro-q8_0.gguf",
        "nomic-bert-micro-q8_0.gguf",
    ];
    for file in files {
        let engine = engine(file);
        let together = engine.embed(&texts, raw(Pooling::Mean)).unwrap();
        for (text, vector) in texts.iter().zip(&together.vectors) {
            let alone = engine.embed(&[text], raw(Pooling::Mean)).unwrap();
            assert_eq!(&alone.vectors[0], vector, "{file}: {text:?}");
        }
        let last = engine.embed(&texts, raw(Pooling::Last)).unwrap();
        assert_eq!(last.vectors[2], engine.embed(&["x"], raw(Pooling::Last)).unwrap().vectors[0], "{file}");
    }
}

/// An encoder loads to embed and refuses to generate, by kind; a text longer than its context
/// (BERT's learned positions end there) is refused before it runs.
#[test]
fn encoders_embed_only() {
    for file in ["bert-micro-q8_0.gguf", "nomic-bert-micro-q8_0.gguf"] {
        let engine = engine(file);
        let model = engine.model();
        assert!(model.weights().output.is_none(), "{file}");
        let (mut cache, mut scratch) = model.new_state(16, 16, Default::default()).unwrap();
        let error =
            model.forward(&mut cache, &mut scratch, &[2, 5, 3], inferno::model::LogitsFor::Last).unwrap_err();
        assert_eq!(error.kind(), "embedding_only", "{file}");
        assert!(error.to_string().contains("is an encoder"), "{error}");
        // Attention over the whole text needs it in one batch.
        let tokens = [2, 5, 6, 7, 3];
        let mut small = model.new_state(16, 4, Default::default()).unwrap();
        let error = model.hidden_states(&mut small.0, &mut small.1, &tokens, inferno::model::LogitsFor::All);
        assert_eq!(error.unwrap_err().kind(), "context_full", "{file}");

        let long = "word ".repeat(200);
        let error = engine.embed(&[&long], EmbedOptions::default()).unwrap_err();
        assert_eq!(error.kind(), "input_too_long", "{file}");
        assert!(error.to_string().contains("128"), "{error}");
    }
}
