//! `inferno bench`: prompt-processing and decode speed, like `llama-bench -p PP -n TG`:
//! a prompt of PP tokens in one batch from an empty cache, then TG single-token decode steps
//! from an empty cache; one warm-up, then the median of `--runs`, on `--threads` threads.

use std::time::Instant;

use inferno::model::{LogitsFor, Model};
use serde::Serialize;

use crate::args::Args;
use crate::generate::load_engine;

pub fn run(args: &[String]) -> Result<(), String> {
    let args = Args::parse("bench", args, &["--pp", "--tg", "--runs", "--threads"], &["--json"])?;
    let path = args.model()?;
    let pp: usize = args.number("--pp", 64)?;
    let tg: usize = args.number("--tg", 32)?;
    let runs: usize = args.number("--runs", 5)?;
    if runs == 0 {
        return Err("bench: --runs must be at least 1".into());
    }
    let threads = args.start_threads()?;
    let load_started = Instant::now();
    let engine = load_engine(path)?;
    let load_ms = load_started.elapsed().as_secs_f64() * 1e3;
    let model = engine.model();
    // Any valid ids will do (llama-bench uses random ones); these avoid the special tokens at 0.
    let vocab = model.config().vocab_size as u32;
    let tokens: Vec<u32> = (0..pp.max(tg) as u32).map(|i| 100 + (i * 7919) % (vocab - 100).max(1)).collect();

    let measure = |n: usize, batched: bool| -> Result<f64, String> {
        if n == 0 {
            return Ok(0.0);
        }
        let mut samples = Vec::with_capacity(runs);
        for run in 0..=runs {
            let seconds = time_tokens(model, &tokens[..n], batched)?;
            if run > 0 {
                samples.push(n as f64 / seconds);
            }
        }
        samples.sort_by(f64::total_cmp);
        Ok(samples[samples.len() / 2])
    };
    let result = BenchResult {
        model: path.to_owned(),
        load_ms,
        pp,
        tg,
        runs,
        threads,
        prefill_tok_s: measure(pp, true)?,
        decode_tok_s: measure(tg, false)?,
    };
    if args.switch("--json") {
        println!("{}", serde_json::to_string(&result).map_err(|e| e.to_string())?);
    } else {
        println!("model   {}", result.model);
        println!("load    {:.0} ms", result.load_ms);
        println!("pp{:<5} {:>8.1} tok/s  (median of {runs}, {threads} threads)", pp, result.prefill_tok_s);
        println!("tg{:<5} {:>8.1} tok/s  (median of {runs}, {threads} threads)", tg, result.decode_tok_s);
    }
    Ok(())
}

#[derive(Serialize)]
struct BenchResult {
    model: String,
    load_ms: f64,
    pp: usize,
    tg: usize,
    runs: usize,
    threads: usize,
    prefill_tok_s: f64,
    decode_tok_s: f64,
}

/// Seconds to run `tokens` from an empty cache: as one batch, or one token per call.
fn time_tokens(model: &Model, tokens: &[u32], batched: bool) -> Result<f64, String> {
    let batch = if batched { tokens.len() } else { 1 };
    let (mut cache, mut scratch) = model.new_state(tokens.len(), batch).map_err(|e| format!("bench: {e}"))?;
    let started = Instant::now();
    if batched {
        model
            .forward(&mut cache, &mut scratch, tokens, LogitsFor::Last)
            .map_err(|e| format!("bench: {e}"))?;
    } else {
        for token in tokens {
            model
                .forward(&mut cache, &mut scratch, &[*token], LogitsFor::Last)
                .map_err(|e| format!("bench: {e}"))?;
        }
    }
    Ok(started.elapsed().as_secs_f64())
}
