//! Models split with gguf-split, loaded from all their shards: the fixtures are
//! `tests/fixtures/models/qwen3-micro-q8_0.gguf` cut by gguf-py and by llama.cpp's own
//! `llama-gguf-split` (`scripts/make_split_fixtures.py`). The shards, given in any order, must
//! run the model exactly as the whole file does; a missing, repeated or foreign shard gets a
//! typed error that names it.

mod common;

use std::path::PathBuf;

use inferno::engine::{Engine, EngineError};
use inferno::model::{LogitsFor, ModelBytes};

fn fixture(name: &str) -> PathBuf {
    common::fixture("models").join(name)
}

fn shard(set: &str, no: usize) -> ModelBytes {
    ModelBytes::from(
        std::fs::read(fixture(&format!("split/qwen3-micro-q8_0-{set}-{no:05}-of-00003.gguf"))).unwrap(),
    )
}

fn load(files: Vec<ModelBytes>) -> Result<Engine, EngineError> {
    Engine::load(ModelBytes::from_files(files))
}

fn logits(engine: &Engine) -> Vec<f32> {
    let (mut cache, mut scratch) = engine.model().new_state(64, 64, Default::default()).unwrap();
    let tokens = engine.encode("<|im_start|>user\nThe capital of France is");
    engine.model().forward(&mut cache, &mut scratch, &tokens, LogitsFor::All).unwrap().to_vec()
}

const SETS: [&str; 2] = ["gguf-py", "llama-split"];

#[test]
fn shards_in_any_order_run_as_the_whole_file() {
    let whole = Engine::load(std::fs::read(fixture("qwen3-micro-q8_0.gguf")).unwrap()).unwrap();
    let expected = logits(&whole);
    for set in SETS {
        for order in [[1, 2, 3], [3, 1, 2], [2, 3, 1]] {
            let engine = load(order.iter().map(|&no| shard(set, no)).collect()).unwrap();
            assert_eq!(engine.model().header().shards, 3);
            assert_eq!(engine.model().header().tensors.len(), whole.model().header().tensors.len());
            assert_eq!(logits(&engine), expected, "{set} in the order {order:?}");
        }
    }
}

#[test]
fn a_missing_repeated_or_foreign_shard_is_named() {
    for set in SETS {
        let error = |files: Vec<ModelBytes>| {
            let error = load(files).err().expect("refused");
            (error.kind(), error.to_string())
        };
        let (kind, message) = error(vec![shard(set, 1), shard(set, 3)]);
        assert_eq!(
            (kind, message.as_str()),
            ("missing_shard", "shard 2 of 3 of this split model is missing")
        );
        let (kind, message) = error(vec![shard(set, 1), shard(set, 2), shard(set, 2), shard(set, 3)]);
        assert_eq!((kind, message.as_str()), ("duplicate_shard", "shard 2 was given twice (files 2 and 3)"));
        let whole = ModelBytes::from(std::fs::read(fixture("qwen3-micro-q8_0.gguf")).unwrap());
        let (kind, message) = error(vec![shard(set, 1), whole, shard(set, 3)]);
        assert_eq!(kind, "shard_mismatch");
        assert!(message.starts_with("file 2 is not a shard of a split model"), "{message}");
        let garbage = ModelBytes::from(b"not a gguf file at all".to_vec());
        let (kind, message) = error(vec![shard(set, 1), shard(set, 2), garbage]);
        assert_eq!(kind, "shard_mismatch");
        assert!(message.starts_with("file 3 is not a valid GGUF file"), "{message}");
        // A lone shard says what it is.
        let (kind, message) = error(vec![shard(set, 2)]);
        assert_eq!(
            (kind, message.as_str()),
            (
                "split_file",
                "this file is shard 2 of 3 of a model split with gguf-split: give all 3 files together"
            )
        );
        let lone = Engine::load(shard(set, 1)).err().expect("refused");
        assert_eq!(lone.kind(), "split_file");
    }
    // Shards of two different cuts of the same model: tensors in two shards, or a count that
    // does not add up.
    let (kind, message) = {
        let error =
            load(vec![shard("gguf-py", 1), shard("llama-split", 2), shard("llama-split", 3)]).err().unwrap();
        (error.kind(), error.to_string())
    };
    assert_eq!(kind, "shard_mismatch", "{message}");
}
