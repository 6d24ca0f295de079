//! The native CLI as a user runs it: exit codes, JSON on stdout, errors on stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value as Json;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(relative: &str) -> PathBuf {
    repo().join("tests/fixtures").join(relative)
}

fn inferno(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_inferno")).args(args).output().expect("run inferno")
}

fn stdout_json(out: &Output) -> Json {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

/// Every golden prompt of the Qwen3 vocabulary file tokenizes to llama.cpp's ids.
#[test]
fn tokenize_json_matches_llama_cpp() {
    let golden: Json =
        serde_json::from_slice(&std::fs::read(fixture("golden/qwen3-vocab.json")).unwrap()).unwrap();
    let model = fixture("models/qwen3-vocab.gguf");
    let prompts = golden["prompts"].as_object().unwrap();
    assert_eq!(prompts.len(), 3);
    for (name, prompt) in prompts {
        let text = prompt["prompt"].as_str().unwrap();
        let out = stdout_json(&inferno(&["tokenize", model.to_str().unwrap(), "--text", text, "--json"]));
        assert_eq!(out["ids"], prompt["prompt_ids"], "prompt {name}");
        let pieces = out["tokens"].as_array().unwrap();
        assert_eq!(pieces.len(), out["ids"].as_array().unwrap().len());
    }
}

#[test]
fn tokenize_parses_special_tokens_unless_told_not_to() {
    let model = fixture("models/qwen3-vocab.gguf");
    let model = model.to_str().unwrap();
    let special = stdout_json(&inferno(&["tokenize", model, "--text", "<|im_end|>", "--json"]));
    assert_eq!(special["ids"], serde_json::json!([151645]));
    let plain =
        stdout_json(&inferno(&["tokenize", model, "--text", "<|im_end|>", "--json", "--no-parse-special"]));
    assert!(plain["ids"].as_array().unwrap().len() > 1, "{plain}");
}

#[test]
fn errors_go_to_stderr_with_a_failing_status() {
    let model = fixture("models/qwen3-vocab.gguf");
    let cases: [&[&str]; 5] = [
        &["tokenize", model.to_str().unwrap()],
        &["tokenize", model.to_str().unwrap(), "--text"],
        &["inspect", model.to_str().unwrap(), "--bogus"],
        &["inspect", "/nonexistent.gguf"],
        &["frobnicate"],
    ];
    for args in cases {
        let out = inferno(args);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("inferno: "), "{args:?}: {stderr}");
    }
    let truncated = std::env::temp_dir().join(format!("inferno-cli-truncated-{}.gguf", std::process::id()));
    std::fs::write(&truncated, &std::fs::read(&model).unwrap()[..4096]).unwrap();
    let out = inferno(&["inspect", truncated.to_str().unwrap()]);
    std::fs::remove_file(&truncated).ok();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"tokenizer.ggml.tokens\"") && stderr.contains("more than the remaining"),
        "{stderr}"
    );
}
