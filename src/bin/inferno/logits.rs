//! `inferno logits`: the highest logits after each position of a given token sequence
//! (teacher-forced), or a run that follows one of llama.cpp's golden files and says how close
//! it came, on the CPU or (`--device gpu`) the GPU.

use std::collections::BTreeMap;

use inferno::engine::{Engine, Session};
use inferno::model::{AttentionPrecision, LogitsFor};
use serde::{Deserialize, Serialize};

use crate::args::Args;
use crate::generate::load_engine;

pub fn run(args: &[String]) -> Result<(), String> {
    let options = [
        "--tokens",
        "--top",
        "--threads",
        "--device",
        "--golden",
        "--tolerance",
        "--precision",
        "--cache-type-k",
        "--cache-type-v",
    ];
    let args = Args::parse("logits", args, &options, &["--json"])?;
    let path = args.model()?;
    args.start_threads()?;
    match (args.text("--golden"), args.text("--tokens")) {
        (Some(golden), None) => follow_golden(&args, path, golden),
        (None, Some(list)) => top_logits(&args, path, list),
        (Some(_), Some(_)) => Err("logits: give --tokens or --golden, not both".into()),
        (None, None) => Err("logits: missing --tokens (comma-separated ids) or --golden FILE".into()),
    }
}

fn on_gpu(engine: &Engine) -> bool {
    #[cfg(all(feature = "gpu", not(target_family = "wasm")))]
    return engine.gpu().is_some();
    #[cfg(not(all(feature = "gpu", not(target_family = "wasm"))))]
    {
        let _ = engine;
        false
    }
}

/// Where the run happens, as the reports name it: "CPU" or "GPU (adapter, backend)".
fn device_name(engine: &Engine) -> String {
    #[cfg(all(feature = "gpu", not(target_family = "wasm")))]
    if let Some(gpu) = engine.gpu() {
        let facts = gpu.facts();
        return format!("GPU ({}, {}, {})", facts.name, facts.backend, facts.device_type);
    }
    let _ = engine;
    "CPU".into()
}

fn top_logits(args: &Args, path: &str, list: &str) -> Result<(), String> {
    let tokens: Vec<u32> = list
        .split(',')
        .map(|t| t.trim().parse().map_err(|_| format!("logits: {t:?} is not a token id")))
        .collect::<Result<_, _>>()?;
    if tokens.is_empty() {
        return Err("logits: --tokens is empty".into());
    }
    let top: usize = args.number("--top", 20)?;
    let engine = engine_for_logits(args, path)?;
    let vocab = engine.model().config().vocab_size;
    let error = |e: &dyn std::fmt::Display| format!("logits: {e}");
    let rows: Vec<f32> = if !on_gpu(&engine) {
        // Every position's logits from one batch.
        let model = engine.model();
        let (mut cache, mut scratch) =
            model.new_state(tokens.len(), tokens.len(), engine.cache_types()).map_err(|e| error(&e))?;
        scratch.set_attention_precision(engine.attention_precision());
        model.forward(&mut cache, &mut scratch, &tokens, LogitsFor::All).map_err(|e| error(&e))?.to_vec()
    } else {
        // The GPU returns the last position's logits of a batch: one decode step a position.
        let mut session = engine.new_session(tokens.len()).map_err(|e| error(&e))?;
        let mut rows = Vec::with_capacity(tokens.len() * vocab);
        for end in 1..=tokens.len() {
            rows.extend_from_slice(logits_after(&engine, &mut session, &tokens[..end])?);
        }
        rows
    };

    #[derive(Serialize)]
    struct Logit {
        id: u32,
        logit: f32,
    }
    #[derive(Serialize)]
    struct Position {
        position: usize,
        token: u32,
        top: Vec<Logit>,
    }
    let positions: Vec<Position> = tokens
        .iter()
        .zip(rows.chunks_exact(vocab))
        .enumerate()
        .map(|(position, (&token, row))| Position {
            position,
            token,
            top: highest(row, top).into_iter().map(|(id, logit)| Logit { id, logit }).collect(),
        })
        .collect();
    if args.switch("--json") {
        println!("{}", serde_json::to_string(&positions).map_err(|e| e.to_string())?);
    } else {
        for p in &positions {
            let best: Vec<String> =
                p.top.iter().map(|l| format!("{} {:?} {:.4}", l.id, engine.piece(l.id), l.logit)).collect();
            println!("{:>4} after {:>7}: {}", p.position, p.token, best.join(" | "));
        }
    }
    Ok(())
}

/// The `n` highest logits of `row`, best first (ties by id).
fn highest(row: &[f32], n: usize) -> Vec<(u32, f32)> {
    let mut ranked: Vec<(u32, f32)> = row.iter().enumerate().map(|(i, &l)| (i as u32, l)).collect();
    let n = n.min(ranked.len());
    if n > 0 && n < ranked.len() {
        ranked.select_nth_unstable_by(n - 1, |a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    }
    ranked.truncate(n);
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked
}

/// The engine on `--device`, its attention `--precision` exact unless asked otherwise: these
/// logits are for comparing with llama.cpp's.
fn engine_for_logits(args: &Args, path: &str) -> Result<Engine, String> {
    args.configure(AttentionPrecision::Exact, || load_engine(path))
}

/// The session's logits after exactly `tokens` (it evaluates only what it does not hold).
fn logits_after<'s>(engine: &Engine, session: &'s mut Session, tokens: &[u32]) -> Result<&'s [f32], String> {
    session.sync(engine, tokens).map_err(|e| format!("logits: {e}"))?;
    session.logits().ok_or_else(|| "logits: the model gave no logits".to_owned())
}

/// One of llama.cpp's golden files (scripts/make_goldens.py): per prompt, its token ids, the
/// greedy continuation, and the top logits after the prompt (step 0) and after each generated
/// token.
#[derive(Deserialize)]
struct Golden {
    #[serde(default)]
    settings: GoldenSettings,
    prompts: BTreeMap<String, GoldenPrompt>,
}

#[derive(Deserialize, Default)]
struct GoldenSettings {
    /// The context llama.cpp ran with, where it matters (LongRoPE's factors).
    n_ctx: Option<usize>,
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

/// How close one prompt's run came to llama.cpp's.
#[derive(Serialize, Default)]
struct Closeness {
    steps: usize,
    /// Over every step, the largest difference at any of llama.cpp's top ids.
    max_delta: f32,
    /// Steps where our best token is llama.cpp's.
    top1_agree: usize,
    /// Steps where it is not although llama.cpp's own top two are further apart than the
    /// tolerance (so not a near tie).
    misses: Vec<Miss>,
}

#[derive(Serialize, Clone)]
struct Miss {
    prompt: String,
    step: usize,
    ours: u32,
    theirs: u32,
    /// llama.cpp's gap between its first and second logit.
    gap: f32,
}

#[derive(Serialize)]
struct GoldenReport {
    model: String,
    golden: String,
    device: String,
    tolerance: f32,
    prompts: BTreeMap<String, Closeness>,
    all: Closeness,
    within: bool,
}

/// Runs every prompt of the golden file as llama.cpp's golden run did (the prompt in one batch,
/// then each generated token on its own, from a fresh cache), and compares each step's logits
/// at llama.cpp's top ids. Fails when the largest difference exceeds `--tolerance` (default
/// 0.1) or a step picks another token than llama.cpp where its top two are further apart.
fn follow_golden(args: &Args, path: &str, golden_path: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(golden_path).map_err(|e| format!("logits: {golden_path}: {e}"))?;
    let golden: Golden = serde_json::from_str(&text).map_err(|e| format!("logits: {golden_path}: {e}"))?;
    let tolerance: f32 = args.number("--tolerance", 0.1)?;
    let engine = engine_for_logits(args, path)?;
    let vocab = engine.model().config().vocab_size;
    let mut prompts = BTreeMap::new();
    let mut all = Closeness::default();
    for (name, prompt) in &golden.prompts {
        let bad = |why: String| format!("logits: {golden_path}: prompt {name:?}: {why}");
        let last_step = prompt.steps.iter().map(|s| s.step).max().unwrap_or(0);
        if last_step > prompt.generated_ids.len() || prompt.prompt_ids.is_empty() {
            return Err(bad(format!("step {last_step} after {} generated ids", prompt.generated_ids.len())));
        }
        let fed = prompt.prompt_ids.len() + last_step;
        let context = golden.settings.n_ctx.unwrap_or(fed).max(fed);
        let mut session = Session::with_prefill_batch(&engine, context, prompt.prompt_ids.len())
            .map_err(|e| bad(e.to_string()))?;
        let tokens: Vec<u32> =
            prompt.prompt_ids.iter().chain(&prompt.generated_ids[..last_step]).copied().collect();
        let mut closeness = Closeness::default();
        for expected in &prompt.steps {
            let row =
                logits_after(&engine, &mut session, &tokens[..prompt.prompt_ids.len() + expected.step])?;
            let (Some(first), Some(second)) = (expected.top.first(), expected.top.get(1)) else {
                return Err(bad(format!("step {} lists fewer than two logits", expected.step)));
            };
            for logit in &expected.top {
                let ours = *row
                    .get(logit.id as usize)
                    .ok_or_else(|| bad(format!("id {} ≥ vocabulary {vocab}", logit.id)))?;
                closeness.max_delta = closeness.max_delta.max((ours - logit.logit).abs());
            }
            let ours = highest(row, 1)[0].0;
            closeness.steps += 1;
            closeness.top1_agree += usize::from(ours == first.id);
            let gap = first.logit - second.logit;
            if ours != first.id && gap >= tolerance {
                closeness.misses.push(Miss {
                    prompt: name.clone(),
                    step: expected.step,
                    ours,
                    theirs: first.id,
                    gap,
                });
            }
        }
        all.steps += closeness.steps;
        all.max_delta = all.max_delta.max(closeness.max_delta);
        all.top1_agree += closeness.top1_agree;
        all.misses.extend(closeness.misses.iter().cloned());
        prompts.insert(name.clone(), closeness);
    }
    let within = all.max_delta <= tolerance && all.misses.is_empty();
    let report = GoldenReport {
        model: path.to_owned(),
        golden: golden_path.to_owned(),
        device: device_name(&engine),
        tolerance,
        prompts,
        all,
        within,
    };
    if args.switch("--json") {
        println!("{}", serde_json::to_string(&report).map_err(|e| e.to_string())?);
    } else {
        println!("{} on the {} against llama.cpp's {}:", report.model, report.device, report.golden);
        let line = |name: &str, c: &Closeness| {
            println!(
                "  {name:<12} {:>4} steps  max |Δlogit| {:.4}  top-1 {}/{}",
                c.steps, c.max_delta, c.top1_agree, c.steps
            )
        };
        report.prompts.iter().for_each(|(name, c)| line(name, c));
        line("all", &report.all);
        for miss in &report.all.misses {
            println!(
                "  {} step {}: ours {}, llama.cpp {} ahead of its second by {:.4}",
                miss.prompt, miss.step, miss.ours, miss.theirs, miss.gap
            );
        }
    }
    if !report.within {
        return Err(format!(
            "{path}: outside the tolerance {tolerance} (max |Δlogit| {:.4}, {} top-1 misses beyond a near tie)",
            report.all.max_delta,
            report.all.misses.len()
        ));
    }
    Ok(())
}
