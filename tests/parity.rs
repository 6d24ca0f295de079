//! Logit parity with llama.cpp: teacher-forced on each golden prompt plus its greedy
//! continuation, our top-20 logits must match llama.cpp's within the tolerance of the file's
//! weight type (0.02 for F32/F16/BF16/Q8_0, 0.1 for 2- to 6-bit types), and the top-1 token
//! must agree wherever llama.cpp's own top-2 are further apart than that tolerance. Real models
//! (SmolLM2, Gemma 3) must also reproduce the 24-token greedy continuation exactly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use inferno::model::{LogitsFor, Model};
use serde::Deserialize;

#[derive(Deserialize)]
struct Golden {
    file: String,
    prompts: BTreeMap<String, GoldenPrompt>,
}

#[derive(Deserialize)]
struct GoldenPrompt {
    prompt_ids: Vec<u32>,
    generated_ids: Vec<u32>,
    steps: Vec<GoldenStep>,
}

#[derive(Deserialize)]
struct GoldenStep {
    step: usize,
    top: Vec<GoldenLogit>,
}

#[derive(Deserialize)]
struct GoldenLogit {
    id: u32,
    logit: f32,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn golden(name: &str) -> Golden {
    let path = repo().join("tests/fixtures/golden").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Where a model file is: the committed fixtures, `../shared/models`, or `.cache/models`
/// (real models fetched by `./build.sh models`).
fn find_model(file: &str) -> Option<PathBuf> {
    let shared =
        std::env::var_os("INFERNO_SHARED").map(PathBuf::from).unwrap_or_else(|| repo().join("../shared"));
    [repo().join("tests/fixtures/models"), shared.join("models"), repo().join(".cache/models")]
        .into_iter()
        .map(|dir| dir.join(file))
        .find(|p| p.is_file())
}

struct Parity {
    max_delta: f32,
    /// (steps compared, steps whose top-1 agreed or were within tolerance of a tie)
    steps: usize,
    top1_agree: usize,
    top1_failures: Vec<String>,
}

impl Parity {
    fn report(&self, file: &str, tolerance: f32) {
        eprintln!(
            "{file:<34} max |Δlogit| {:.4} (tolerance {tolerance}), top-1 {}/{} steps",
            self.max_delta, self.top1_agree, self.steps
        );
    }

    fn assert_within(&self, file: &str, tolerance: f32) {
        assert!(self.top1_failures.is_empty(), "{file}: top-1 differs: {:?}", self.top1_failures);
        assert!(self.max_delta <= tolerance, "{file}: max |Δlogit| {} > {tolerance}", self.max_delta);
    }
}

fn load(path: &Path) -> Model {
    Model::load(std::fs::read(path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn teacher_forced(model: &Model, golden: &Golden, tolerance: f32) -> Parity {
    let mut parity = Parity { max_delta: 0.0, steps: 0, top1_agree: 0, top1_failures: Vec::new() };
    let vocab = model.config().vocab_size;
    for (name, prompt) in &golden.prompts {
        let last_step = prompt.steps.iter().map(|s| s.step).max().unwrap();
        let mut tokens = prompt.prompt_ids.clone();
        tokens.extend_from_slice(&prompt.generated_ids[..last_step]);
        let (mut cache, mut scratch) = model.new_state(tokens.len(), 64).unwrap();
        let logits = model.forward(&mut cache, &mut scratch, &tokens, LogitsFor::All).unwrap();
        for step in &prompt.steps {
            let row = &logits[(prompt.prompt_ids.len() - 1 + step.step) * vocab..][..vocab];
            for expected in &step.top {
                parity.max_delta = parity.max_delta.max((row[expected.id as usize] - expected.logit).abs());
            }
            let ours = argmax(row);
            let near_tie = step.top[0].logit - step.top[1].logit < tolerance;
            if ours != step.top[0].id && !near_tie {
                parity
                    .top1_failures
                    .push(format!("{name} step {}: ours {ours}, llama.cpp {}", step.step, step.top[0].id));
            }
            parity.steps += 1;
            parity.top1_agree += usize::from(ours == step.top[0].id);
        }
    }
    parity
}

fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best as u32
}

/// Greedy decoding one token at a time after a batched prompt, as llama.cpp's golden run did.
fn greedy(model: &Model, prompt: &[u32], steps: usize) -> Vec<u32> {
    let (mut cache, mut scratch) = model.new_state(prompt.len() + steps, 64).unwrap();
    let mut token = argmax(model.forward(&mut cache, &mut scratch, prompt, LogitsFor::Last).unwrap());
    let mut out = vec![token];
    while out.len() < steps {
        token = argmax(model.forward(&mut cache, &mut scratch, &[token], LogitsFor::Last).unwrap());
        out.push(token);
    }
    out
}

const MICRO: [(&str, f32); 13] = [
    ("f32", 0.02),
    ("f16", 0.02),
    ("bf16", 0.02),
    ("q8_0", 0.02),
    ("q4_0", 0.1),
    ("q4_1", 0.1),
    ("q5_0", 0.1),
    ("q5_1", 0.1),
    ("q2_k", 0.1),
    ("q3_k_s", 0.1),
    ("q4_k_s", 0.1),
    ("q5_k_s", 0.1),
    ("q6_k", 0.1),
];

#[test]
fn synthetic_qwen3_logits_match_llama_cpp_for_every_weight_type() {
    let mut checked = Vec::new();
    let mut failures = Vec::new();
    for (quant, tolerance) in MICRO {
        let golden = golden(&format!("qwen3-micro-{quant}.json"));
        let Some(path) = find_model(&golden.file) else {
            eprintln!("{}: not at hand (only in ../shared/models), skipped", golden.file);
            continue;
        };
        let parity = teacher_forced(&load(&path), &golden, tolerance);
        parity.report(&golden.file, tolerance);
        failures.extend(parity.top1_failures.iter().map(|f| format!("{}: {f}", golden.file)));
        if parity.max_delta > tolerance {
            failures.push(format!("{}: max |Δlogit| {} > {tolerance}", golden.file, parity.max_delta));
        }
        checked.push(quant);
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // The committed fixtures guarantee these run everywhere.
    for quant in ["q4_0", "q8_0", "q4_k_s", "q6_k"] {
        assert!(checked.contains(&quant), "qwen3-micro-{quant} was not checked");
    }
}

/// `file`: the name `./build.sh models` gives the model in `.cache/models`.
fn real_model(golden_name: &str, file: &str, tolerance: f32) {
    let golden = golden(golden_name);
    let path = find_model(file).unwrap_or_else(|| panic!("{file} not found: run ./build.sh models first"));
    let model = load(&path);
    let parity = teacher_forced(&model, &golden, tolerance);
    parity.report(&golden.file, tolerance);
    for (name, prompt) in &golden.prompts {
        let ours = greedy(&model, &prompt.prompt_ids, prompt.generated_ids.len());
        let same = ours.iter().zip(&prompt.generated_ids).take_while(|(a, b)| a == b).count();
        eprintln!("{} {name}: greedy agrees for {same}/{} tokens", golden.file, ours.len());
        assert_eq!(ours, prompt.generated_ids, "{} {name}: greedy continuation differs", golden.file);
    }
    parity.assert_within(&golden.file, tolerance);
}

#[test]
fn smollm2_matches_llama_cpp_logits_and_greedy_text() {
    real_model("smollm2-135m-instruct-q4_1.json", "SmolLM2-135M-Instruct.Q4_1.gguf", 0.1);
}

#[test]
fn gemma3_matches_llama_cpp_logits_and_greedy_text() {
    real_model("gemma3-270m-q4_k_m.json", "gemma3-270m-q4_k_m.gguf", 0.1);
}
