//! `inferno bench`: prompt-processing and decode speed, like `llama-bench -p PP -n TG`:
//! a prompt of PP tokens in one batch from an empty cache, then TG single-token decode steps
//! from an empty cache (or, with `--depth D`, like `llama-bench -d D`, both after a context of D
//! tokens, filled untimed); one warm-up, then the median of `--runs`, on `--threads` threads, or
//! with `--device gpu` on the GPU (a build with the `gpu` feature), where it also prints the
//! adapter's copy bandwidth and the weight bandwidth decode reached, and their ratio. With
//! `--json-schema FILE` it also times the grammar's mask, the sampler's first stage.
//!
//! `inferno bench MMPROJ --image PICTURE` times a vision projector's encoder instead: the
//! picture fitted, the ViT and the projector, as mtmd's `mtmd_encode_chunk` runs them
//! (scripts/bench_vision.py puts it beside mtmd's own); with `--device gpu`, on the GPU.

use std::time::Instant;

use inferno::model::{AttentionPrecision, Cache, LogitsFor, Model, Scratch};
use serde::Serialize;

use crate::args::Args;
use crate::generate::load_engine;

pub fn run(args: &[String]) -> Result<(), String> {
    let options = [
        "--pp",
        "--tg",
        "--depth",
        "--runs",
        "--threads",
        "--device",
        "--json-schema",
        "--precision",
        "--cache-type-k",
        "--cache-type-v",
        "--image",
    ];
    let args = Args::parse("bench", args, &options, &["--json"])?;
    let path = args.model()?;
    let pp: usize = args.number("--pp", 64)?;
    let tg: usize = args.number("--tg", 32)?;
    let depth: usize = args.number("--depth", 0)?;
    let runs: usize = args.number("--runs", 5)?;
    if runs == 0 {
        return Err("bench: --runs must be at least 1".into());
    }
    let threads = args.start_threads()?;
    if let Some(picture) = args.text("--image") {
        return bench_encoder(&args, path, picture, runs, threads);
    }
    let precision = args.precision(AttentionPrecision::Fast)?;
    let cache_types = args.cache_types()?;
    #[cfg(all(feature = "gpu", not(target_family = "wasm")))]
    let gpu = args.gpu()?;
    #[cfg(all(feature = "gpu", not(target_family = "wasm")))]
    if gpu.is_some() && !cache_types.is_default() {
        return Err("bench: the GPU keeps its KV cache in f16 only".into());
    }
    #[cfg(not(all(feature = "gpu", not(target_family = "wasm"))))]
    args.gpu()?;
    let load_started = Instant::now();
    let engine = load_engine(path)?;
    let load_ms = load_started.elapsed().as_secs_f64() * 1e3;
    let model = engine.model();
    // Any valid ids will do (llama-bench uses random ones); these avoid the special tokens at 0.
    let vocab = model.config().vocab_size as u32;
    let all: Vec<u32> =
        (0..(depth + pp.max(tg)) as u32).map(|i| 100 + (i * 7919) % (vocab - 100).max(1)).collect();
    let (context, tokens) = all.split_at(depth);

    let measure = |n: usize, batched: bool| -> Result<(f64, Option<Encoding>), String> {
        if n == 0 {
            return Ok((0.0, None));
        }
        let mut samples = Vec::with_capacity(runs);
        let tokens = &tokens[..n];
        #[cfg(all(feature = "gpu", not(target_family = "wasm")))]
        if let Some(gpu) = &gpu {
            return gpu_runs(gpu, model, (context, tokens), batched, runs);
        }
        let batch = if batched { n } else { 1 }.max(context.len().min(CONTEXT_BATCH));
        let (mut cache, mut scratch) =
            model.new_state(depth + n, batch, cache_types).map_err(|e| format!("bench: {e}"))?;
        scratch.set_attention_precision(precision);
        for part in context.chunks(CONTEXT_BATCH) {
            model
                .forward(&mut cache, &mut scratch, part, LogitsFor::Last)
                .map_err(|e| format!("bench: {e}"))?;
        }
        // A recurrent state goes back to the context's end only through a checkpoint there.
        cache.checkpoint(&[]).map_err(|e| format!("bench: {e}"))?;
        for run in 0..=runs {
            if cache.truncate(depth) != depth {
                return Err(format!(
                    "bench: the cache could not go back to its {depth} positions of context"
                ));
            }
            let seconds = time_tokens(model, (&mut cache, &mut scratch), tokens, batched)?;
            if run > 0 {
                samples.push(n as f64 / seconds);
            }
        }
        samples.sort_by(f64::total_cmp);
        Ok((samples[samples.len() / 2], None))
    };
    let (prefill_tok_s, prefill_encoding) = measure(pp, true)?;
    let (decode_tok_s, encoding) = measure(tg, false)?;
    #[cfg(all(feature = "gpu", not(target_family = "wasm")))]
    let gpu = gpu
        .as_deref()
        .map(|gpu| {
            let decode = (decode_tok_s, &tokens[..tg], runs);
            GpuFigures::measure(gpu, model, decode, &tokens[..pp], encoding, prefill_encoding)
        })
        .transpose()?;
    #[cfg(not(all(feature = "gpu", not(target_family = "wasm"))))]
    let _ = (encoding, prefill_encoding);
    #[cfg(not(all(feature = "gpu", not(target_family = "wasm"))))]
    let gpu = None;
    let grammar = match args.text("--json-schema") {
        Some(file) => Some(GrammarFigures::measure(&engine, file, decode_tok_s)?),
        None => None,
    };
    let result = BenchResult {
        model: path.to_owned(),
        load_ms,
        pp,
        tg,
        depth,
        runs,
        threads,
        prefill_tok_s,
        decode_tok_s,
        gpu,
        grammar,
    };
    if args.switch("--json") {
        println!("{}", serde_json::to_string(&result).map_err(|e| e.to_string())?);
    } else {
        if let Some(grammar) = &result.grammar {
            println!(
                "grammar adds {:.3} ms to a sampler step (median of {}; 90th percentile {:.3} ms; {} tokens; compiled in {:.0} ms): {:.1} % of a decode step",
                grammar.step_ms,
                grammar.steps,
                grammar.step_p90_ms,
                grammar.vocabulary,
                grammar.compile_ms,
                100.0 * grammar.of_decode_step
            );
        }
        println!("model   {}", result.model);
        println!("load    {:.0} ms", result.load_ms);
        let at = if depth > 0 { format!(" @ d{depth}") } else { String::new() };
        let (pp_label, tg_label) = (format!("pp{pp}{at}"), format!("tg{tg}{at}"));
        match &result.gpu {
            None => {
                println!(
                    "{pp_label:<7} {:>8.1} tok/s  (median of {runs}, {threads} threads)",
                    result.prefill_tok_s
                );
                println!(
                    "{tg_label:<7} {:>8.1} tok/s  (median of {runs}, {threads} threads)",
                    result.decode_tok_s
                );
            }
            Some(gpu) => {
                println!("{pp_label:<7} {:>8.1} tok/s  (median of {runs}, GPU)", result.prefill_tok_s);
                println!("{tg_label:<7} {:>8.1} tok/s  (median of {runs}, GPU)", result.decode_tok_s);
                let sums = if gpu.subgroups {
                    "rows summed in subgroups"
                } else {
                    "rows summed in workgroup memory"
                };
                println!(
                    "gpu     {} ({}, {}; {}; {sums})",
                    gpu.adapter, gpu.backend, gpu.device_type, gpu.driver
                );
                println!(
                    "decode reads {:.2} GB/s of weights ({:.1} MB a step); the adapter copies {:.2} GB/s; efficiency {:.2}",
                    gpu.decode_weight_gb_s,
                    gpu.decode_weight_bytes as f64 / 1e6,
                    gpu.copy_gb_s,
                    gpu.decode_weight_gb_s / gpu.copy_gb_s
                );
                println!(
                    "a decode step takes {:.2} ms of CPU to record and submit ({} dispatches)",
                    gpu.encode_ms_per_step, gpu.dispatches_per_step
                );
                let sampled = &gpu.sampled;
                let default = if sampled.best_by_default { "best" } else { "every" };
                println!(
                    "{tg_label} sampled (the page's settings, a trace of 20): every logit read back {:.1} tok/s, the best ranked on the device {:.1} tok/s ({:.2}×; this adapter's default: {default})",
                    sampled.every_tok_s,
                    sampled.best_tok_s,
                    sampled.best_tok_s / sampled.every_tok_s
                );
                let dots = &gpu.integer_dots;
                let this_run = if dots.q8_in_this_run { "8 bits" } else { "floats" };
                println!(
                    "{tg_label} with the products' inputs as floats {:.1} tok/s, as 8 bits for integer dot products {:.1} tok/s ({:.2}×); pp{pp} {:.1} and {:.1} tok/s ({:.2}×; this run's other figures: {this_run})",
                    dots.float_tok_s,
                    dots.q8_tok_s,
                    dots.q8_tok_s / dots.float_tok_s,
                    dots.float_pp_tok_s,
                    dots.q8_pp_tok_s,
                    dots.q8_pp_tok_s / dots.float_pp_tok_s
                );
                print_kernels(&format!("prefill of {pp}"), &gpu.prefill_kernels);
                print_kernels("decode step", &gpu.decode_kernels);
            }
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct BenchResult {
    model: String,
    load_ms: f64,
    pp: usize,
    tg: usize,
    /// Tokens of context before the timed ones.
    depth: usize,
    runs: usize,
    threads: usize,
    prefill_tok_s: f64,
    decode_tok_s: f64,
    /// With `--device gpu`: the adapter and the bandwidths.
    gpu: Option<GpuFigures>,
    /// With `--json-schema`: what the grammar's mask costs.
    grammar: Option<GrammarFigures>,
}

/// The grammar's cost: a sampler step with the schema's constraint (its mask computed, applied
/// to the logits, the token accepted) against the same step without, over a random walk
/// through the schema (each token drawn from random logits, a fresh answer whenever one
/// ends), set against a decode step's time.
#[derive(Serialize)]
struct GrammarFigures {
    vocabulary: usize,
    /// Building the vocabulary's trie and compiling the schema (the trie once per model).
    compile_ms: f64,
    /// Median and 90th percentile of what the grammar adds to a sampler step.
    step_ms: f64,
    step_p90_ms: f64,
    steps: usize,
    /// The median's share of a decode step (at the decode rate measured).
    of_decode_step: f64,
}

impl GrammarFigures {
    fn measure(
        engine: &inferno::engine::Engine,
        file: &str,
        decode_tok_s: f64,
    ) -> Result<GrammarFigures, String> {
        use inferno::grammar::GrammarSpec;
        use inferno::sampler::{Rng, Sampler, SamplerSettings};
        let text = std::fs::read_to_string(file).map_err(|e| format!("bench: {file}: {e}"))?;
        let schema = serde_json::from_str(&text).map_err(|e| format!("bench: {file}: {e}"))?;
        let spec = GrammarSpec::JsonSchema(schema);
        let error = |e: inferno::engine::EngineError| format!("bench: {e}");
        let sampling = |e: inferno::sampler::SamplerError| format!("bench: {e}");
        let compiling = Instant::now();
        let first = engine.constraint(&spec).map_err(error)?;
        let compile_ms = compiling.elapsed().as_secs_f64() * 1e3;
        let vocabulary = engine.tokenizer().vocab_size();
        let mut rng = Rng::new(7);
        let mut logits = vec![0.0f32; vocabulary];
        let mut constrained = Sampler::new(SamplerSettings::default()).map_err(sampling)?;
        let mut free = Sampler::new(SamplerSettings::default()).map_err(sampling)?;
        constrained.set_constraint(Some(first));
        let mut extra = Vec::new();
        for _ in 0..256 {
            logits.iter_mut().for_each(|l| *l = 8.0 * rng.next_f64() as f32);
            let started = Instant::now();
            free.sample(&logits, &[], 0).map_err(sampling)?;
            let unconstrained = started.elapsed().as_secs_f64();
            let started = Instant::now();
            let token = constrained.sample(&logits, &[], 0).map_err(sampling)?.token;
            extra.push((started.elapsed().as_secs_f64() - unconstrained) * 1e3);
            if engine.tokenizer().is_end_of_generation(token) {
                constrained.set_constraint(Some(engine.constraint(&spec).map_err(error)?));
            }
        }
        extra.sort_by(f64::total_cmp);
        let step_ms = extra[extra.len() / 2].max(0.0);
        let decode_step_ms = if decode_tok_s > 0.0 { 1e3 / decode_tok_s } else { f64::NAN };
        Ok(GrammarFigures {
            vocabulary,
            compile_ms,
            step_ms,
            step_p90_ms: extra[extra.len() * 9 / 10].max(0.0),
            steps: extra.len(),
            of_decode_step: step_ms / decode_step_ms,
        })
    }
}

#[derive(Serialize)]
struct GpuFigures {
    adapter: String,
    backend: String,
    /// `Cpu` for a software adapter, whose figures are no speed claim for a GPU.
    device_type: String,
    driver: String,
    /// Whether the matrix kernels sum rows through subgroup shuffles.
    subgroups: bool,
    /// A buffer copied in one submission: bytes read and written per second.
    copy_gb_s: f64,
    /// Bytes of weights one decode step reads, and that times the decode rate.
    decode_weight_bytes: u64,
    decode_weight_gb_s: f64,
    /// The CPU's share of a decode step: recording and submitting its dispatches (the median
    /// time of the call that does it, which returns before the GPU is done).
    encode_ms_per_step: f64,
    dispatches_per_step: usize,
    /// Device time by kernel, per call (the prefill's one batch, a decode step), from a run
    /// of its own with every dispatch timed (empty where the adapter cannot time them).
    prefill_kernels: Vec<KernelShare>,
    decode_kernels: Vec<KernelShare>,
    /// Decode steps that also sample, as an answer does.
    sampled: SampledDecode,
    /// Decode with the products' inputs as floats and as 8 bits.
    integer_dots: IntegerDots,
}

/// Decode steps and the prefill batch (without context) whose matrix products read their
/// inputs as floats, against quantized to 8 bits for integer dot products
/// (`Gpu::set_integer_dots`).
#[derive(Serialize)]
#[cfg_attr(
    not(all(feature = "gpu", not(target_family = "wasm"))),
    allow(dead_code, reason = "only the GPU's runs fill it")
)]
struct IntegerDots {
    float_tok_s: f64,
    q8_tok_s: f64,
    float_pp_tok_s: f64,
    q8_pp_tok_s: f64,
    /// Which of the two this run's other figures used (`--device gpu-q8` asks for 8 bits).
    q8_in_this_run: bool,
}

/// Decode steps that sample as the page does (its settings: temperature 0.8, top-k 40, top-p
/// 0.95, min-p 0.05, a trace of 20), each step's token fed to the next: reading back every
/// logit and sampling them, against ranking the best on the device and reading back those.
#[derive(Serialize)]
#[cfg_attr(
    not(all(feature = "gpu", not(target_family = "wasm"))),
    allow(dead_code, reason = "only the GPU's runs fill it")
)]
struct SampledDecode {
    every_tok_s: f64,
    best_tok_s: f64,
    /// Which of the two this adapter does by default (`Gpu::reads_best_logits`).
    best_by_default: bool,
}

/// One kernel's part of a call's device time.
#[derive(Clone, Serialize)]
#[cfg_attr(
    not(all(feature = "gpu", not(target_family = "wasm"))),
    allow(dead_code, reason = "only the GPU's runs fill it")
)]
struct KernelShare {
    kernel: String,
    dispatches: f64,
    ms: f64,
}

/// Prints where a call's device time goes, the longest kernels first.
fn print_kernels(call: &str, kernels: &[KernelShare]) {
    let total: f64 = kernels.iter().map(|k| k.ms).sum();
    if kernels.is_empty() || total <= 0.0 {
        return;
    }
    println!("device time of a {call}: {total:.2} ms (every dispatch timed in a pass of its own)");
    for kernel in kernels.iter().take(8) {
        println!(
            "  {:5.1} %  {:8.3} ms  {} ({} a call)",
            100.0 * kernel.ms / total,
            kernel.ms,
            kernel.kernel,
            kernel.dispatches
        );
    }
    let rest: f64 = kernels.iter().skip(8).map(|k| k.ms).sum();
    if kernels.len() > 8 {
        println!("  {:5.1} %  {rest:8.3} ms  {} other kernels", 100.0 * rest / total, kernels.len() - 8);
    }
}

/// What recording a GPU step costs the CPU: the median time, and the dispatches in a step;
/// and the device time by kernel of a profiled run, per call.
#[derive(Clone, Default)]
#[cfg_attr(
    not(all(feature = "gpu", not(target_family = "wasm"))),
    allow(dead_code, reason = "only the GPU's runs fill it")
)]
struct Encoding {
    ms: f64,
    dispatches: usize,
    kernels: Vec<KernelShare>,
}

#[cfg(all(feature = "gpu", not(target_family = "wasm")))]
impl GpuFigures {
    fn measure(
        gpu: &inferno::gpu::Gpu,
        model: &Model,
        (decode_tok_s, tokens, runs): (f64, &[u32], usize),
        prompt: &[u32],
        encoding: Option<Encoding>,
        prefill: Option<Encoding>,
    ) -> Result<GpuFigures, String> {
        let (encoding, tg) = (encoding.unwrap_or_default(), tokens.len());
        let q8_in_this_run = gpu.integer_dots();
        // Decode, then the prefill batch, each with floats and with 8 bits.
        let mut figures = [(tokens, false), (prompt, true)].map(|(tokens, batched)| {
            [false, true].map(|q8| {
                gpu.set_integer_dots(q8);
                match tokens {
                    [] => Ok(0.0),
                    _ => gpu_runs(gpu, model, (&[], tokens), batched, runs).map(|(tok_s, _)| tok_s),
                }
            })
        });
        gpu.set_integer_dots(q8_in_this_run);
        let [[float, q8], [float_pp, q8_pp]] =
            [0, 1].map(|i| [0, 1].map(|j| std::mem::replace(&mut figures[i][j], Ok(0.0))));
        let integer_dots = IntegerDots {
            float_tok_s: float?,
            q8_tok_s: q8?,
            float_pp_tok_s: float_pp?,
            q8_pp_tok_s: q8_pp?,
            q8_in_this_run,
        };
        let best_by_default = gpu.reads_best_logits();
        let mut sampled = [false, true].map(|best| {
            gpu.set_best_logits(best);
            sampled_decode(gpu, model, tg, runs)
        });
        gpu.set_best_logits(best_by_default);
        let [every, best] = [0, 1].map(|i| std::mem::replace(&mut sampled[i], Ok(0.0)));
        let sampled = SampledDecode { every_tok_s: every?, best_tok_s: best?, best_by_default };
        let facts = gpu.facts();
        let bytes = (256u64 << 20).min(facts.max_buffer);
        let repeats = 8;
        let mut seconds = Vec::new();
        for run in 0..4 {
            let started = Instant::now();
            gpu.copy_test(bytes, repeats).map_err(|e| format!("bench: {e}"))?;
            if run > 0 {
                seconds.push(started.elapsed().as_secs_f64());
            }
        }
        seconds.sort_by(f64::total_cmp);
        let decode_weight_bytes = model.decode_weight_bytes();
        Ok(GpuFigures {
            adapter: facts.name.clone(),
            backend: facts.backend.clone(),
            device_type: facts.device_type.clone(),
            driver: facts.driver.clone(),
            subgroups: facts.subgroups,
            copy_gb_s: 2.0 * (bytes * u64::from(repeats)) as f64 / seconds[1] / 1e9,
            decode_weight_bytes,
            decode_weight_gb_s: decode_weight_bytes as f64 * decode_tok_s / 1e9,
            encode_ms_per_step: encoding.ms,
            dispatches_per_step: encoding.dispatches,
            prefill_kernels: prefill.map(|p| p.kernels).unwrap_or_default(),
            decode_kernels: encoding.kernels,
            sampled,
            integer_dots,
        })
    }
}

/// The median tokens per second of `runs` runs of `steps` decode steps on the GPU that sample
/// as [`SampledDecode`] says, reading back what the GPU's setting makes of the sampler's ask.
#[cfg(all(feature = "gpu", not(target_family = "wasm")))]
fn sampled_decode(gpu: &inferno::gpu::Gpu, model: &Model, steps: usize, runs: usize) -> Result<f64, String> {
    use inferno::sampler::{ReadLogits, Sampler, SamplerSettings};
    let error = |e: &dyn std::fmt::Display| format!("bench: {e}");
    let mut state = inferno::gpu::GpuState::new(gpu, model, steps + 1, 1).map_err(|e| error(&e))?;
    let mut samples = Vec::with_capacity(runs);
    for run in 0..=runs {
        state.truncate(gpu, 0);
        let mut sampler = Sampler::new(SamplerSettings::default()).map_err(|e| error(&e))?;
        let read = sampler.logits_read(None, 20);
        let started = Instant::now();
        let mut token = 1;
        for _ in 0..steps {
            state.submit_reading(gpu, model, &[token], Some(read)).map_err(|e| error(&e))?;
            let sampled = match state.collect(gpu).map_err(|e| error(&e))? {
                Some(ReadLogits::Every(logits)) => sampler.sample(&logits, &[], 20),
                Some(ReadLogits::Best(best)) => sampler.sample_best(&best, 20),
                None => return Err("bench: a step read no logits".into()),
            };
            token = sampled.map_err(|e| error(&e))?.token;
        }
        if run > 0 {
            samples.push(steps as f64 / started.elapsed().as_secs_f64());
        }
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

/// The median tokens per second of `runs` runs of `tokens` on the GPU after `context` (after a
/// warm-up), the weights uploaded and the context run once, and the cache taken back to the
/// context between runs; and the median time a call took to record and submit its work, apart
/// from waiting for it.
#[cfg(all(feature = "gpu", not(target_family = "wasm")))]
fn gpu_runs(
    gpu: &inferno::gpu::Gpu,
    model: &Model,
    (context, tokens): (&[u32], &[u32]),
    batched: bool,
    runs: usize,
) -> Result<(f64, Option<Encoding>), String> {
    let batch = if batched { tokens.len() } else { 1 }.max(context.len().min(CONTEXT_BATCH));
    let error = |e: inferno::gpu::GpuError| format!("bench: {e}");
    let depth = context.len();
    let mut state = inferno::gpu::GpuState::new(gpu, model, depth + tokens.len(), batch).map_err(error)?;
    for part in context.chunks(CONTEXT_BATCH) {
        state.submit(gpu, model, part, true).map_err(error)?;
        state.collect(gpu).map_err(error)?;
    }
    // A recurrent state goes back to the context's end only through a checkpoint there.
    state.checkpoint(gpu, &[]).map_err(|e| format!("bench: {e}"))?;
    let back_to_context = |state: &mut inferno::gpu::GpuState| {
        if state.truncate(gpu, depth) == depth {
            Ok(())
        } else {
            Err(format!("bench: the cache could not go back to its {depth} positions of context"))
        }
    };
    let mut samples = Vec::with_capacity(runs);
    let mut submits = Vec::new();
    let calls: Vec<&[u32]> = if batched { vec![tokens] } else { tokens.chunks(1).collect() };
    for run in 0..=runs {
        back_to_context(&mut state)?;
        let started = Instant::now();
        for call in &calls {
            let submitting = Instant::now();
            state.submit(gpu, model, call, true).map_err(error)?;
            if run > 0 {
                submits.push(submitting.elapsed().as_secs_f64());
            }
            state.collect(gpu).map_err(error)?;
        }
        if run > 0 {
            samples.push(tokens.len() as f64 / started.elapsed().as_secs_f64());
        }
    }
    samples.sort_by(f64::total_cmp);
    submits.sort_by(f64::total_cmp);
    let dispatches = state.dispatches();
    // One more run, every dispatch timed: where the device's time goes, per call.
    let mut kernels = Vec::new();
    if gpu.facts().timestamps {
        state.profile_kernels(gpu, true).map_err(error)?;
        back_to_context(&mut state)?;
        for call in &calls {
            state.submit(gpu, model, call, true).map_err(error)?;
            state.collect(gpu).map_err(error)?;
        }
        let per_call = calls.len() as f64;
        kernels = state
            .kernel_times()
            .into_iter()
            .map(|k| KernelShare {
                kernel: k.kernel,
                dispatches: k.dispatches as f64 / per_call,
                ms: k.ms / per_call,
            })
            .collect();
    }
    let encoding = Encoding { ms: submits[submits.len() / 2] * 1e3, dispatches, kernels };
    Ok((samples[samples.len() / 2], Some(encoding)))
}

/// A context's tokens run this many at a time before the timed ones.
const CONTEXT_BATCH: usize = 512;

/// Seconds to run `tokens` after what `cache` holds: as one batch, or one token per call.
fn time_tokens(
    model: &Model,
    (cache, scratch): (&mut Cache, &mut Scratch),
    tokens: &[u32],
    batched: bool,
) -> Result<f64, String> {
    let started = Instant::now();
    if batched {
        model.forward(cache, scratch, tokens, LogitsFor::Last).map_err(|e| format!("bench: {e}"))?;
    } else {
        for token in tokens {
            model.forward(cache, scratch, &[*token], LogitsFor::Last).map_err(|e| format!("bench: {e}"))?;
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

/// What `inferno bench MMPROJ --image PICTURE` measures.
#[derive(Serialize)]
struct EncoderResult {
    projector: String,
    /// The file's matrices' type (the ViT's first attention projection's).
    weight_type: &'static str,
    image_size: usize,
    patches: usize,
    width: usize,
    layers: usize,
    tokens: usize,
    threads: usize,
    runs: usize,
    load_ms: f64,
    /// Where the squares were encoded: `cpu`, or the GPU adapter's name.
    device: String,
    /// The median time from the decoded picture to its embeddings.
    encode_ms: f64,
    /// The working memory encoding this picture holds besides the weights, at most
    /// (`EncoderShape::work_bytes_for` its largest square).
    work_bytes: usize,
}

/// Times `encode` of the picture `picture` with the projector at `path`: one warm-up, then the
/// median of `runs`.
fn bench_encoder(args: &Args, path: &str, picture: &str, runs: usize, threads: usize) -> Result<(), String> {
    use inferno::gguf::Gguf;
    use inferno::model::ModelBytes;
    use inferno::vision::VisionEncoder;

    let bytes = std::fs::read(path).map_err(|e| format!("bench: {path}: {e}"))?;
    let header = Gguf::parse(&bytes).map_err(|e| format!("bench: {path}: {e}"))?.header;
    let weight_type =
        header.tensor("v.blk.0.attn_q.weight").map_or("unknown", |tensor| tensor.ggml_type.name());
    let layers = header.tensors.iter().filter(|t| t.name.ends_with(".attn_q.weight")).count();
    let started = Instant::now();
    let encoder = VisionEncoder::load(ModelBytes::from(bytes)).map_err(|e| format!("bench: {path}: {e}"))?;
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let file = std::fs::read(picture).map_err(|e| format!("bench: {picture}: {e}"))?;
    let picture = inferno::vision::decode(&file).map_err(|e| format!("bench: {e}"))?;
    let shape = encoder.shape();
    // The picture's squares as the projector lays it out: their patches in all, and the largest.
    let square_patches: Vec<usize> = encoder
        .layout(&picture)
        .map_err(|e| format!("bench: {e}"))?
        .iter()
        .filter_map(|part| match part {
            inferno::vision::PicturePart::Square(square) => {
                Some((square.width() / shape.patch_size) * (square.height() / shape.patch_size))
            }
            inferno::vision::PicturePart::Text(_) => None,
        })
        .collect();
    // On the GPU (`--device gpu`) each square is submitted and waited for, as the engine does
    // natively; the warm-up run uploads the weights.
    #[cfg(all(feature = "gpu", not(target_family = "wasm")))]
    let (mut on_gpu, device) = match args.gpu()? {
        Some(gpu) => {
            (Some(inferno::gpu::GpuVision::new(std::sync::Arc::clone(&gpu))), gpu.facts().name.clone())
        }
        None => (None, "cpu".to_owned()),
    };
    #[cfg(not(all(feature = "gpu", not(target_family = "wasm"))))]
    let device = {
        args.gpu()?;
        "cpu".to_owned()
    };
    let mut samples = Vec::with_capacity(runs);
    let mut tokens = 0;
    for run in 0..=runs {
        let started = Instant::now();
        #[cfg(all(feature = "gpu", not(target_family = "wasm")))]
        let embeddings = match &mut on_gpu {
            Some(vision) => {
                let mut encoding = encoder.begin(&picture).map_err(|e| format!("bench: {e}"))?;
                while let Some(square) = encoding.next_square() {
                    let rows = vision.encode_square(&encoder, &square).map_err(|e| format!("bench: {e}"))?;
                    encoding.add_square(rows);
                }
                encoding.finish().embeddings
            }
            None => encoder.encode(&picture).map_err(|e| format!("bench: {e}"))?,
        };
        #[cfg(not(all(feature = "gpu", not(target_family = "wasm"))))]
        let embeddings = encoder.encode(&picture).map_err(|e| format!("bench: {e}"))?;
        tokens = embeddings.tokens;
        std::hint::black_box(&embeddings);
        if run > 0 {
            samples.push(started.elapsed().as_secs_f64() * 1e3);
        }
    }
    samples.sort_by(f64::total_cmp);
    let result = EncoderResult {
        projector: encoder.facts().projector.clone(),
        weight_type,
        image_size: shape.image_size,
        patches: square_patches.iter().sum(),
        width: shape.width,
        layers,
        tokens,
        threads,
        runs,
        load_ms,
        device,
        encode_ms: samples[samples.len() / 2],
        work_bytes: shape.work_bytes_for(square_patches.iter().copied().max().unwrap_or(0)),
    };
    if args.switch("--json") {
        println!("{}", serde_json::to_string(&result).map_err(|e| e.to_string())?);
    } else {
        println!("encoder {path} ({} projector, {} matrices)", result.projector, result.weight_type);
        println!(
            "shape   {} layers {} wide; this picture: {} patches in {} square(s), {} tokens out",
            result.layers,
            result.width,
            result.patches,
            square_patches.len(),
            result.tokens
        );
        println!("load    {:.0} ms", result.load_ms);
        println!(
            "encode  {:.1} ms  (median of {runs}, on {}; {threads} CPU threads; {:.0} MiB working memory)",
            result.encode_ms,
            result.device,
            result.work_bytes as f64 / (1 << 20) as f64
        );
    }
    Ok(())
}
