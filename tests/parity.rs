//! Logit parity with llama.cpp, following the golden run exactly (the prompt in one batch,
//! then one token at a time), against `tests/fixtures/golden` (llama.cpp 0c1e570, CPU, its
//! default flash attention).
//!
//! Our kernels reproduce llama.cpp's x86 arithmetic for the 32-element formats (AVX2 lane
//! order), its two CPU flash-attention kernels, its vectorized `expf` in SwiGLU and softmax,
//! the FMAs GCC forms in RoPE, for Q2_K/Q5_K/Q6_K the tiled kernel llama.cpp uses from 8 rows
//! on, and for Q4_0 and Q4_K matrices of a multiple of 8 rows the repacked 8x8 GEMM/GEMV
//! llama.cpp runs them through. Where that covers a whole model the logits are identical bit for
//! bit: SmolLM2 Q4_1, Gemma 3 270M Q4_K_M and the Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q6_K synthetic files
//! show |Δ| = 0 on every golden step (Q4_0 was 0.035 before its repacked order). What is
//! asserted:
//! - Synthetic Qwen3 files: max |Δlogit| over the top-20 within the tolerance (0.02 for
//!   F32/F16/BF16/Q8_0, 0.1 for 2- to 6-bit types) and top-1 agreement except at near-ties.
//! - SmolLM2 and Gemma 3: the same 0.1 bound, and the 24-token greedy continuation of every
//!   prompt exactly. (Before the repacked Q4_K order, Gemma 3 was off by up to 0.59 and parted
//!   from llama.cpp's text on one prompt: this model amplifies last-bit differences, and
//!   llama.cpp itself moves its logits by ~1 when only its batching changes.)
//!
//! `INFERNO_PARITY_STEPS=1` prints every step's max |Δ|.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use inferno::model::{KvType, KvTypes, LogitsFor, Model};
use serde::Deserialize;

#[derive(Deserialize)]
struct Golden {
    file: String,
    settings: GoldenSettings,
    prompts: BTreeMap<String, GoldenPrompt>,
}

#[derive(Deserialize)]
struct GoldenSettings {
    /// The context llama.cpp ran with, where it matters (LongRoPE); absent in the shared goldens.
    n_ctx: Option<usize>,
    /// What llama.cpp kept its KV cache as (`-ctk`/`-ctv`), where not F16.
    cache_types: Option<GoldenCacheTypes>,
}

#[derive(Deserialize)]
struct GoldenCacheTypes {
    keys: String,
    values: String,
}

impl GoldenSettings {
    fn kv_types(&self) -> KvTypes {
        let kind = |name: &str| KvType::from_name(name).unwrap_or_else(|| panic!("cache type {name:?}"));
        self.cache_types
            .as_ref()
            .map_or_else(KvTypes::default, |t| KvTypes { keys: kind(&t.keys), values: kind(&t.values) })
    }
}

#[derive(Deserialize)]
struct GoldenPrompt {
    prompt: String,
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
    common::repo()
}

fn golden(name: &str) -> Golden {
    let path = repo().join("tests/fixtures/golden").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Where a model file is: the committed fixtures, or `.cache/models` (what `./build.sh models`
/// makes); a missing file fails the test with that command.
fn find_model(file: &str) -> PathBuf {
    common::model(file)
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

/// Follows the golden run: the prompt in one batch (logits of its last token), then each
/// generated token on its own. llama.cpp picks its attention kernel by batch size, so the
/// batching is part of what is compared.
fn teacher_forced(model: &Model, golden: &Golden, tolerance: f32) -> Parity {
    let mut parity = Parity { max_delta: 0.0, steps: 0, top1_agree: 0, top1_failures: Vec::new() };
    for (name, prompt) in &golden.prompts {
        let last_step = prompt.steps.iter().map(|s| s.step).max().unwrap();
        let context = golden.settings.n_ctx.unwrap_or(prompt.prompt_ids.len() + last_step);
        let types = golden.settings.kv_types();
        let (mut cache, mut scratch) = model.new_state(context, prompt.prompt_ids.len(), types).unwrap();
        let mut row =
            model.forward(&mut cache, &mut scratch, &prompt.prompt_ids, LogitsFor::Last).unwrap().to_vec();
        for step in 0..=last_step {
            if step > 0 {
                let token = prompt.generated_ids[step - 1];
                row = model.forward(&mut cache, &mut scratch, &[token], LogitsFor::Last).unwrap().to_vec();
            }
            let Some(expected) = prompt.steps.iter().find(|s| s.step == step) else { continue };
            let mut step_delta = 0.0f32;
            for logit in &expected.top {
                step_delta = step_delta.max((row[logit.id as usize] - logit.logit).abs());
            }
            if std::env::var_os("INFERNO_PARITY_STEPS").is_some() {
                eprintln!("  {name} step {step}: max |Δ| {step_delta:.5}");
            }
            parity.max_delta = parity.max_delta.max(step_delta);
            let ours = argmax(&row);
            let near_tie = expected.top[0].logit - expected.top[1].logit < tolerance;
            if ours != expected.top[0].id && !near_tie {
                parity
                    .top1_failures
                    .push(format!("{name} step {step}: ours {ours}, llama.cpp {}", expected.top[0].id));
            }
            parity.steps += 1;
            parity.top1_agree += usize::from(ours == expected.top[0].id);
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
/// Returns each step's chosen token and its logits row.
fn greedy(model: &Model, prompt: &[u32], steps: usize, types: KvTypes) -> Vec<(u32, Vec<f32>)> {
    let (mut cache, mut scratch) = model.new_state(prompt.len() + steps, prompt.len(), types).unwrap();
    let mut row = model.forward(&mut cache, &mut scratch, prompt, LogitsFor::Last).unwrap().to_vec();
    let mut out = Vec::new();
    loop {
        let token = argmax(&row);
        out.push((token, row));
        if out.len() == steps {
            return out;
        }
        row = model.forward(&mut cache, &mut scratch, &[token], LogitsFor::Last).unwrap().to_vec();
    }
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
    let mut failures = Vec::new();
    for (quant, tolerance) in MICRO {
        let golden = golden(&format!("qwen3-micro-{quant}.json"));
        let path = find_model(&golden.file);
        let parity = teacher_forced(&load(&path), &golden, tolerance);
        parity.report(&golden.file, tolerance);
        failures.extend(parity.top1_failures.iter().map(|f| format!("{}: {f}", golden.file)));
        if parity.max_delta > tolerance {
            failures.push(format!("{}: max |Δlogit| {} > {tolerance}", golden.file, parity.max_delta));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `file`: the name `./build.sh models` gives the model in `.cache/models`. The greedy text
/// must equal llama.cpp's for every generated token.
fn real_model(golden_name: &str, file: &str, tolerance: f32) {
    let golden = golden(golden_name);
    let path = find_model(file);
    let model = load(&path);
    let parity = teacher_forced(&model, &golden, tolerance);
    parity.report(&golden.file, tolerance);
    for (name, prompt) in &golden.prompts {
        let ours = greedy(&model, &prompt.prompt_ids, prompt.generated_ids.len(), golden.settings.kv_types());
        let same = ours.iter().zip(&prompt.generated_ids).take_while(|((a, _), b)| a == *b).count();
        eprintln!("{} {name}: greedy agrees for {same}/{} tokens", golden.file, ours.len());
        if let Some((token, row)) = ours.get(same) {
            let theirs = prompt.generated_ids[same];
            let margin = row[*token as usize] - row[theirs as usize];
            panic!(
                "{} {name}: greedy parts from llama.cpp at step {same} ({token} vs {theirs}) with a margin of {margin}",
                golden.file
            );
        }
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

/// KV caches kept as llama.cpp's `-ctk`/`-ctv` types, against its logits with the same cache
/// (`scripts/make_goldens.py --cache-type-k/-v`, in `tests/fixtures/golden/kv-cache`).
/// - Q8_0 keys and values, and Q8_0 keys beside F16 values: llama.cpp turns queries, keys and
///   values by a Walsh-Hadamard matrix around a quantized cache, quantizes the query for the
///   Q8_0 keys' dot, and sums decoded Q8_0 values in f32; ours does the same, bit for bit on the
///   micro file (|Δ| = 0), within the bounds on SmolLM2 and Gemma 3 with their greedy
///   text exactly.
/// - F32: llama.cpp's flash attention casts an F32 cache to F16 before reading it (its F32
///   logits equal its F16 ones), so the reference is its attention without flash attention,
///   which reads F32 rows as they are. Prompts that run through our one-pass kernel match it to
///   |Δ| = 0; the 106-token one, whose batch goes through the tiled kernel, sums its softmax in
///   another order and lands 0.031 away (an F16 cache is 0.054 away and picks other top tokens
///   in 3 of the 32 steps).
#[test]
fn kv_cache_types_match_llama_cpp() {
    for (name, tolerance) in [
        ("qwen3-micro-q8_0.q8_0", 1e-4),
        ("qwen3-micro-q8_0.q8_0-f16", 1e-4),
        ("qwen3-micro-q8_0.f32", 0.035),
    ] {
        let golden = golden(&format!("kv-cache/{name}.json"));
        assert!(golden.settings.cache_types.is_some(), "{name}: the golden names its cache types");
        let parity = teacher_forced(&load(&find_model(&golden.file)), &golden, tolerance);
        parity.report(name, tolerance);
        parity.assert_within(name, tolerance);
        assert_eq!(parity.top1_agree, parity.steps, "{name}: every top-1 token");
    }
    real_model("kv-cache/smollm2-135m-instruct-q4_1.q8_0.json", "SmolLM2-135M-Instruct.Q4_1.gguf", 0.1);
    real_model("kv-cache/gemma3-270m-q4_k_m.q8_0.json", "gemma3-270m-q4_k_m.gguf", 0.1);
}

/// Micro files of the architectures beyond Qwen3 (`scripts/make_micro_models.py`, committed
/// under tests/fixtures/models) against goldens from `scripts/make_goldens.py` (the same
/// llama.cpp, AVX2, flash attention): our tokenizer gives llama.cpp's prompt ids, and the
/// logits follow the golden run. The bound for Q8_0 is 0.02, but these files run bit
/// for bit like llama.cpp, and random weights make architectural mistakes small (SmolLM3 with
/// RoPE in every layer is off by only 0.014): the bound asserted is 1e-4. The Phi-3 file runs
/// twice: with a 512-token context (LongRoPE's short factors) and an 8192-token one (past its
/// original 4096: the long factors).
#[test]
fn micro_models_of_other_architectures_match_llama_cpp() {
    let goldens = [
        "qwen2-micro-q8_0",
        "smollm3-micro-q8_0",
        "phi3-micro-q8_0",
        "phi3-micro-q8_0-ctx8192",
        "gemma2-micro-q8_0",
        "llama-micro-iq4_nl",
        "llama-micro-iq4_xs",
        "llama-micro-iq2_xxs",
        "llama-micro-iq3_xxs",
        "llama-micro-iq3_s",
        "llama-micro-iq2_xs",
        "llama-micro-iq2_s",
        "llama-micro-iq1_s",
        "llama-micro-iq1_m",
        "llama-micro-llama3",
        "llama-micro-mxfp4",
        "gemma4-micro-q8_0",
        "qwen3moe-micro-q8_0",
        "olmoe-micro-q8_0",
        "granitemoe-micro-q8_0",
        "granite-micro-q8_0",
        "lfm2-micro-q8_0",
        "lfm2moe-micro-q8_0",
        "gpt-oss-micro-q8_0",
        "granitehybrid-micro-q8_0",
        "qwen3vl-micro-q8_0",
        "qwen2vl-micro-q8_0",
    ];
    for (name, tolerance) in goldens.map(|name| (name, 1e-4)) {
        let golden = golden(&format!("{name}.json"));
        let path = find_model(&golden.file);
        let engine = inferno::engine::Engine::load(std::fs::read(&path).unwrap()).unwrap();
        for (prompt_name, prompt) in &golden.prompts {
            assert_eq!(engine.encode(&prompt.prompt), prompt.prompt_ids, "{name} {prompt_name}: prompt ids");
        }
        let parity = teacher_forced(engine.model(), &golden, tolerance);
        parity.report(&golden.file, tolerance);
        parity.assert_within(&golden.file, tolerance);
    }
}

/// Qwen3.5's hybrid layers against llama.cpp. Prompts that fit in one chunk of the chunked
/// delta rule (64 tokens) match to 1e-4 like the other micro files. Past one chunk, llama.cpp's
/// chunk formula (cumulative decays folded into the keys, a triangular solve) and ours
/// (forward substitution with decay differences) round differently, and this random model
/// magnifies rounding: its random queries and keys make each head's output a small difference
/// of much larger terms (|o| ≈ 0.003 against |δ| ≈ 0.1), which RMSNorm then scales back up. The
/// 106-token prompt lands within 0.02 (the Q8_0 bound) with the same top token at every
/// step; our own token-by-token and chunked rules differ by as much on it.
#[test]
fn qwen35_micro_matches_llama_cpp() {
    let mut golden = golden("qwen35-micro-q8_0.json");
    let path = find_model(&golden.file);
    let engine = inferno::engine::Engine::load(std::fs::read(&path).unwrap()).unwrap();
    for (prompt_name, prompt) in &golden.prompts {
        assert_eq!(engine.encode(&prompt.prompt), prompt.prompt_ids, "qwen35 {prompt_name}: prompt ids");
    }
    let parity = teacher_forced(engine.model(), &golden, 0.02);
    parity.report(&golden.file, 0.02);
    parity.assert_within(&golden.file, 0.02);
    golden.prompts.retain(|_, prompt| prompt.prompt_ids.len() <= 64);
    assert_eq!(golden.prompts.len(), 3, "the short prompts");
    let parity = teacher_forced(engine.model(), &golden, 1e-4);
    parity.report("qwen35-micro-q8_0.gguf, one chunk", 1e-4);
    parity.assert_within(&golden.file, 1e-4);
}
