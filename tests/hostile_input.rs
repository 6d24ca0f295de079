//! Untrusted input, measured natively: the allocation bound the README states ("Untrusted
//! input") on real models and on large hostile files, and every fuzz seed and crash input
//! replayed through its target's checks.
//!
//! The bound: loading any file and chatting with it allocates at most `FILE_MULTIPLE` × the
//! file, plus the session's state (KV cache, scratch, logits: set by the context asked for),
//! plus `FIXED_BYTES`, in total and in any one allocation. The fuzz target `generate` asserts
//! it for small mutated models; here it is measured on real models and on files built to cost
//! the most memory per byte (huge vocabularies of empty tokens, a million one-letter merges).
//!
//! The counting allocator is process-wide: the tests take `SERIAL` so that one test's
//! allocations never land in another's measurement. Native only: this measures the engine,
//! not the browser.

#![cfg(not(target_family = "wasm"))]

#[path = "../fuzz/src/lib.rs"]
mod fuzzing;

mod common;

use std::sync::Mutex;

use fuzzing::ALLOCATOR;
use fuzzing::counting::{FILE_MULTIPLE, allocation_bound};
use fuzzing::targets::TARGETS;
use inferno::chat::ChatMessage;
use inferno::engine::Engine;
use inferno::gguf::writer::GgufWriter;
use inferno::gguf::{Array, GgmlType, Value};
use inferno::sampler::{Sampler, SamplerSettings};

static SERIAL: Mutex<()> = Mutex::new(());

const CONTEXT: usize = 256;

/// Loads a copy of `file` and generates two tokens; returns (peak bytes, largest allocation, state bytes,
/// whether it loaded).
fn measure(file: &[u8]) -> (usize, usize, usize, Result<(), String>) {
    let baseline = ALLOCATOR.start();
    let mut state_bytes = 0;
    let outcome = (|| {
        // The engine owns its copy of the file, as the page's does (counted in the peak).
        let engine = Engine::load(file.to_vec()).map_err(|e| e.to_string())?;
        let messages = [ChatMessage::new("user", "Hello there")];
        let prompt = engine.chat_prompt(&messages, None, CONTEXT).map_err(|e| e.to_string())?;
        let mut session = engine.new_session(CONTEXT).map_err(|e| e.to_string())?;
        state_bytes = session.state_bytes(&engine);
        session.sync(&engine, &prompt).map_err(|e| e.to_string())?;
        let mut sampler = Sampler::new(SamplerSettings { seed: 3, ..SamplerSettings::default() }).unwrap();
        for _ in 0..2 {
            session.step(&engine, &mut sampler, None, 8).map_err(|e| e.to_string())?;
        }
        Ok(())
    })();
    let report = ALLOCATOR.report(baseline);
    (report.peak, report.largest, state_bytes, outcome)
}

/// A llama-shaped model 32 wide whose vocabulary has `tokens` entries (each `token_len` bytes
/// of 'x' plus its index), with `merges` BPE merges of one-letter tokens; Q4_0 embedding (the
/// fewest file bytes per vocabulary row).
fn hostile(tokens: usize, token_len: usize, merges: usize) -> Vec<u8> {
    let dim = 32u64;
    let mut texts: Vec<String> = (0..256).map(|b| char::from_u32(0x100 + b).unwrap().to_string()).collect();
    texts.extend(
        (texts.len()..tokens)
            .map(|i| if token_len == 0 { String::new() } else { format!("{}{i}", "x".repeat(token_len)) }),
    );
    texts.truncate(tokens);
    let merge_list: Vec<String> =
        (0..merges).map(|i| format!("{} {}", texts[i % 200], texts[(i / 200) % 200])).collect();
    let vocab = texts.len() as u64;
    let mut w = GgufWriter::new()
        .kv("general.architecture", Value::String("llama".into()))
        .kv("llama.block_count", Value::U32(1))
        .kv("llama.embedding_length", Value::U32(dim as u32))
        .kv("llama.feed_forward_length", Value::U32(dim as u32))
        .kv("llama.attention.head_count", Value::U32(1))
        .kv("tokenizer.ggml.model", Value::String("gpt2".into()))
        .kv("tokenizer.ggml.tokens", Value::Array(Array::String(texts)))
        .kv("tokenizer.ggml.merges", Value::Array(Array::String(merge_list)))
        .kv("tokenizer.ggml.eos_token_id", Value::U32(0));
    let q4 = |rows: u64| vec![0x11u8; (rows * dim / 32 * 18) as usize];
    w = w.tensor("token_embd.weight", &[dim, vocab], GgmlType::Q4_0, q4(vocab));
    w = w.tensor_f32("output_norm.weight", &[dim], &vec![1.0; dim as usize]);
    for name in ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"] {
        w = w.tensor(&format!("blk.0.{name}.weight"), &[dim, dim], GgmlType::Q4_0, q4(dim));
    }
    for name in ["attn_norm", "ffn_norm"] {
        w = w.tensor_f32(&format!("blk.0.{name}.weight"), &[dim], &vec![1.0; dim as usize]);
    }
    w.to_bytes()
}

fn real_model(path: &str) -> Vec<u8> {
    std::fs::read(path)
        .unwrap_or_else(|e| panic!("{path}: {e} (./build.sh models fetches the real test models)"))
}

#[test]
fn loading_and_chatting_stay_within_the_stated_allocation_bound() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let smollm2 = std::env::var("INFERNO_TEST_MODELS").unwrap_or_else(|_| ".cache/models".into())
        + "/SmolLM2-135M-Instruct.Q4_1.gguf";
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        ("qwen3-micro-q4_0", real_model("tests/fixtures/models/qwen3-micro-q4_0.gguf"), true),
        ("SmolLM2-135M Q4_1", real_model(&smollm2), true),
        ("2^20 empty tokens", hostile(1 << 20, 0, 0), false),
        ("2^20 one-byte-ish tokens", hostile(1 << 20, 1, 0), false),
        ("a million merges", hostile(1024, 1, 1_000_000), false),
    ];
    let mut table = String::new();
    for (name, file, must_load) in cases {
        let file_bytes = file.len();
        let (peak, largest, state, outcome) = measure(&file);
        let bound = allocation_bound(file_bytes, state);
        table += &format!(
            "{name:<26} file {file_bytes:>11}  state {state:>10}  peak {peak:>11} ({:.2}× file + state)  largest {largest:>10}  {}\n",
            peak.saturating_sub(state) as f64 / file_bytes as f64,
            outcome.as_ref().map_or_else(|e| format!("refused: {e}"), |()| "chatted".into()),
        );
        if must_load {
            outcome.unwrap_or_else(|e| panic!("{name} did not load and chat: {e}"));
        }
        assert!(
            peak <= bound,
            "{name}: {peak} bytes at once, bound {bound} ({FILE_MULTIPLE}× file + state + fixed)\n{table}"
        );
        assert!(largest <= bound, "{name}: one allocation of {largest}, bound {bound}\n{table}");
    }
    println!("{table}");
}

/// The committed seeds (`fuzz/seeds/TARGET/`) and every input that ever crashed a target
/// (`fuzz/regressions/TARGET/`, where a fixed crash's input goes) pass the target's checks.
#[test]
fn every_fuzz_seed_and_past_crash_passes_its_targets_checks() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let fuzz_dir = common::repo().join("fuzz");
    for (target, check) in TARGETS {
        let mut inputs = 0;
        for folder in ["seeds", "regressions"] {
            let Ok(entries) = std::fs::read_dir(fuzz_dir.join(folder).join(target)) else { continue };
            for entry in entries {
                let path = entry.unwrap().path();
                let data = std::fs::read(&path).unwrap();
                let outcome = std::panic::catch_unwind(|| check(&data));
                assert!(outcome.is_ok(), "{target} fails on {}", path.display());
                inputs += 1;
            }
        }
        assert!(
            inputs > 0,
            "no seeds for {target} in fuzz/seeds/{target} (cargo run --example seed_corpus in fuzz/)"
        );
    }
}
