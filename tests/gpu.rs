//! The forward pass on the GPU (natively, Mesa's lavapipe here) against the same pass on the
//! CPU, whose logits match llama.cpp's goldens (tests/parity.rs): a prompt in one batch, then
//! decode steps one token at a time over the GPU's own KV cache. Needs `--features gpu`.
//!
//! The bounds differ by what the CPU does that the GPU does not. With F32 or F16 weights the
//! CPU keeps activations in f32, and the two agree within 0.01 (the CPU's KV cache is f16, the
//! GPU's f32). With quantized weights the CPU, as llama.cpp's CPU backend, quantizes each
//! activation to 8 bits before a product, while the GPU multiplies f32 activations: logits then
//! differ by up to about 1 on the real models, and a near tie may resolve the other way, so
//! the GPU's choice must be the CPU's or score within `TIE` of it on the CPU.
#![cfg(all(feature = "gpu", not(target_family = "wasm")))]

mod common;

use std::process::Command;
use std::sync::Arc;

use inferno::engine::Engine;
use inferno::gpu::{DeviceWeights, Gpu, GpuError, GpuState, StreamError, WeightStream};
use inferno::model::{Ffn, KvType, KvTypes, LogitsFor, Model};
use inferno::sampler::{Sampler, SamplerSettings};

/// How far below the CPU's best logit the GPU's pick may score on the CPU.
const TIE: f32 = 1.0;

fn model(file: &str) -> Model {
    Model::load(std::fs::read(common::model(file)).unwrap()).unwrap()
}

fn argmax(logits: &[f32]) -> usize {
    logits.iter().enumerate().fold(0, |best, (i, &v)| if v > logits[best] { i } else { best })
}

/// Greedy from `prompt` for `steps` tokens on both backends (each step feeding the CPU's
/// choice, its attention in f32 as the GPU's): the GPU's logits within `tolerance` of the
/// CPU's, its choice the CPU's or a near tie on the CPU.
fn gpu_follows_cpu(file: &str, prompt: &[u32], steps: usize, tolerance: f32) {
    let model = model(file);
    let gpu = Gpu::new().expect("a GPU adapter (natively: apt-get install mesa-vulkan-drivers)");
    let capacity = prompt.len() + steps;
    let mut on_gpu = GpuState::new(&gpu, &model, capacity, prompt.len()).unwrap();
    let (mut cache, mut scratch) = model.new_state(capacity, prompt.len(), Default::default()).unwrap();
    // The GPU's attention sums in f32: the CPU's 'exact' F16 sums (llama.cpp's) part from it
    // by about 0.01 over 700 positions, where the two f32 ones agree within 1e-4.
    scratch.set_attention_precision(inferno::model::AttentionPrecision::Fast);
    let mut tokens = prompt.to_vec();
    for step in 0..steps {
        let fed = if step == 0 { &tokens[..] } else { &tokens[tokens.len() - 1..] };
        let cpu = model.forward(&mut cache, &mut scratch, fed, LogitsFor::Last).unwrap().to_vec();
        let gpu_logits = on_gpu.forward(&gpu, &model, fed).unwrap();
        assert_eq!(gpu_logits.len(), cpu.len());
        let delta = cpu.iter().zip(&gpu_logits).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        let (best, picked) = (argmax(&cpu), argmax(&gpu_logits));
        eprintln!("{file} step {step}: max |Δlogit| {delta:.4}, top-1 CPU {best} GPU {picked}");
        assert!(delta <= tolerance, "{file} step {step}: max |Δlogit| {delta} > {tolerance}");
        let short = cpu[best] - cpu[picked];
        assert!(short <= TIE, "{file} step {step}: the GPU picked {picked}, {short} below the CPU's {best}");
        tokens.push(best as u32);
    }
    assert_eq!(on_gpu.len(), capacity - 1);
}

const PROMPT: [u32; 6] = [1, 5, 9, 14, 3, 7];

#[test]
fn unquantized_weights_give_the_cpus_logits() {
    for file in ["qwen3-micro-f32.gguf", "qwen3-micro-f16.gguf"] {
        gpu_follows_cpu(file, &PROMPT, 4, 0.01);
    }
}

#[test]
fn long_prompts_and_decode_over_long_caches_follow_the_cpu() {
    // 700 positions: the prompt takes the tiled attention kernel (8 queries a workgroup) and
    // each decode step's range is split among workgroups whose sums are merged, over the f16
    // cache the pack kernel wrote at every position; Gemma 2 alternates sliding windows with
    // global layers.
    let prompt: Vec<u32> = (0..700u32).map(|i| 100 + (i * 7919) % 5000).collect();
    gpu_follows_cpu("qwen3-micro-f32.gguf", &prompt, 3, 0.001);
    gpu_follows_cpu("gemma2-micro-q8_0.gguf", &prompt, 3, 0.15);
}

#[test]
fn every_family_the_gpu_runs_follows_the_cpu() {
    // Qwen3 (Q/K norm), Qwen2 (biases), Phi-3 (fused QKV and gate/up), SmolLM3 (NoPE layers),
    // Llama 3 (RoPE factors), Gemma 2 (sandwich norms, soft caps, sliding windows), Gemma 4
    // (per-layer inputs, value norms, shared KV layers, layer output scales).
    for file in [
        "qwen3-micro-q8_0.gguf",
        "qwen2-micro-q8_0.gguf",
        "phi3-micro-q8_0.gguf",
        "smollm3-micro-q8_0.gguf",
        "llama-micro-llama3.gguf",
        "gemma2-micro-q8_0.gguf",
        "gemma4-micro-q8_0.gguf",
        "granite-micro-q8_0.gguf",
    ] {
        gpu_follows_cpu(file, &PROMPT, 3, 0.15);
    }
}

#[test]
fn every_weight_type_the_gpu_takes_runs_a_micro_model_as_the_cpu() {
    // One file per weight type with a GPU kernel (the float types are above), each the same
    // Qwen3 micro model quantized by llama-quantize, and the IQ4 Llama micro files.
    for file in [
        "qwen3-micro-bf16.gguf",
        "qwen3-micro-q4_0.gguf",
        "qwen3-micro-q4_1.gguf",
        "qwen3-micro-q5_0.gguf",
        "qwen3-micro-q5_1.gguf",
        "qwen3-micro-q2_k.gguf",
        "qwen3-micro-q3_k_s.gguf",
        "qwen3-micro-q4_k_s.gguf",
        "qwen3-micro-q5_k_s.gguf",
        "qwen3-micro-q6_k.gguf",
    ] {
        gpu_follows_cpu(file, &PROMPT, 3, 0.15);
    }
    // The Llama micro model's logits spread wider (its top logit is about 4× Qwen3's), and so
    // does what the CPU's 8-bit activations change.
    for file in ["llama-micro-iq4_nl.gguf", "llama-micro-iq4_xs.gguf", "llama-micro-mxfp4.gguf"] {
        gpu_follows_cpu(file, &PROMPT, 3, 0.4);
    }
}

#[test]
fn qwen35_hybrid_layers_follow_the_cpu() {
    // Gated DeltaNet layers (convolution, gates, the delta rule over the device's state), gated
    // attention and interleaved M-RoPE; a prompt in one batch, then token after token.
    gpu_follows_cpu("qwen35-micro-q8_0.gguf", &PROMPT, 6, 0.15);
    let long: Vec<u32> = (0..70).map(|i| (i * 37 + 11) % 4000).collect();
    gpu_follows_cpu("qwen35-micro-q8_0.gguf", &long, 3, 0.15);
}

#[test]
fn lfm2_short_convolutions_follow_the_cpu() {
    // Short convolutions (the gates around a convolution over the device's state) between
    // attention layers; a prompt in one batch, then token after token.
    gpu_follows_cpu("lfm2-micro-q8_0.gguf", &PROMPT, 6, 0.15);
    let long: Vec<u32> = (0..70).map(|i| (i * 37 + 11) % 4000).collect();
    gpu_follows_cpu("lfm2-micro-q8_0.gguf", &long, 3, 0.15);
}

#[test]
fn mixtures_of_experts_follow_the_cpu() {
    // Routing on the device (softmax, renormalized or not; sigmoid with a selection bias;
    // gpt-oss's softmax of the chosen scores with router biases), the chosen experts' rows
    // read through their ids, expert biases and the clamped SwiGLU (gpt-oss, with attention
    // sinks, YaRN and MXFP4 experts), and shared experts (Granite MoE); a prompt in one batch,
    // then token after token.
    for file in [
        "qwen3moe-micro-q8_0.gguf",
        "olmoe-micro-q8_0.gguf",
        "granitemoe-micro-q8_0.gguf",
        "lfm2moe-micro-q8_0.gguf",
        "gpt-oss-micro-q8_0.gguf",
    ] {
        gpu_follows_cpu(file, &PROMPT, 4, 0.15);
    }
    let long: Vec<u32> = (0..70).map(|i| (i * 37 + 11) % 4000).collect();
    gpu_follows_cpu("qwen3moe-micro-q8_0.gguf", &long, 3, 0.15);
}

#[test]
fn expert_stacks_larger_than_a_binding_go_up_in_slices_of_whole_experts() {
    let model = model("qwen3moe-micro-q8_0.gguf");
    let expert_bytes = model
        .weights()
        .layers
        .iter()
        .filter_map(|layer| match &layer.ffn {
            Ffn::Experts(e) => Some(e.gate[0].range.len().max(e.down[0].range.len())),
            Ffn::Dense(_) => None,
        })
        .max()
        .unwrap();
    let count = model.config().experts.unwrap().count;
    assert!(!count.is_multiple_of(3), "the last slice should hold fewer experts than the others");
    let whole_gpu = Gpu::new().unwrap();
    let mut sliced_gpu = Gpu::new().unwrap();
    sliced_gpu.limit_bindings(3 * expert_bytes as u64);
    let mut whole = GpuState::new(&whole_gpu, &model, 12, 6).unwrap();
    let mut sliced = GpuState::new(&sliced_gpu, &model, 12, 6).unwrap();
    // Three experts a slice, each pair's product in the dispatch of its expert's slice: the
    // same sums, the same bits.
    assert_eq!(
        whole.forward(&whole_gpu, &model, &PROMPT).unwrap(),
        sliced.forward(&sliced_gpu, &model, &PROMPT).unwrap()
    );
    assert_eq!(
        whole.forward(&whole_gpu, &model, &[11]).unwrap(),
        sliced.forward(&sliced_gpu, &model, &[11]).unwrap()
    );
    // A binding smaller than one expert's matrix: refused at load, with the sizes.
    let mut tiny_gpu = Gpu::new().unwrap();
    tiny_gpu.limit_bindings(expert_bytes as u64 - 4);
    match GpuState::new(&tiny_gpu, &model, 12, 6) {
        Err(GpuError::TooLarge { what, bytes, .. }) => {
            assert_eq!(what, "one expert's matrix");
            assert!(bytes as usize <= expert_bytes);
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("an expert larger than a binding was taken"),
    }
}

#[test]
fn granite_hybrid_mamba2_layers_follow_the_cpu() {
    // Mamba-2 layers (the convolution with its bias, the selective scan over the device's
    // state, the gate and the group norm) between attention layers, with experts and a shared
    // expert; a prompt in one batch, then token after token.
    // Granite's multipliers keep its logits small: the CPU and GPU agree within 0.003, and a
    // scan without its `D·x` is 0.17 off.
    gpu_follows_cpu("granitehybrid-micro-q8_0.gguf", &PROMPT, 6, 0.02);
    let long: Vec<u32> = (0..70).map(|i| (i * 37 + 11) % 4000).collect();
    gpu_follows_cpu("granitehybrid-micro-q8_0.gguf", &long, 3, 0.02);
}

#[test]
fn smollm2_runs_on_the_gpu_as_on_the_cpu() {
    // "<|im_start|>user\nWhat is the capital of France?" in SmolLM2's vocabulary.
    let prompt = [1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47];
    gpu_follows_cpu("SmolLM2-135M-Instruct.Q4_1.gguf", &prompt, 4, 1.5);
}

#[test]
fn gemma3_runs_on_the_gpu_as_on_the_cpu() {
    // Its 262,144-row embedding (178 MB) is larger than lavapipe binds at once: sliced.
    let prompt = [2, 105, 2364, 107, 3689, 563, 506, 5279, 529, 7001, 236881];
    gpu_follows_cpu("gemma3-270m-q4_k_m.gguf", &prompt, 3, 1.5);
}

#[test]
fn gpu_memory_is_the_weights_the_cache_and_at_most_64_mib_more() {
    // The GPU issue's bound, at a 4,096-position context and the engine's prefill batch, on the
    // two real models (Gemma 3's 262,144-token vocabulary has the widest logits).
    for file in ["SmolLM2-135M-Instruct.Q4_1.gguf", "gemma3-270m-q4_k_m.gguf"] {
        let model = model(file);
        let gpu = Gpu::new().unwrap();
        let context = 4096;
        let mut state = GpuState::new(&gpu, &model, context, inferno::engine::PREFILL_BATCH).unwrap();
        // A prompt, then a step: every weight either reads is on the device.
        state.forward(&gpu, &model, &[2, 3, 4, 5]).unwrap();
        state.forward(&gpu, &model, &[6]).unwrap();
        let memory = state.memory();
        eprintln!("{file}: {memory:?}");
        assert_eq!(state.bytes(), memory.weights + memory.cache + memory.scratch);
        let c = model.config();
        let kv_layers = (0..c.n_layer).filter(|&l| c.keeps_kv(l)).count() as u64;
        // Keys and values in f16.
        assert_eq!(memory.cache, 2 * kv_layers * (context * c.kv_dim() * 2) as u64, "{file}");
        // Each tensor once: at most the file's bytes, and most of them.
        let file_bytes = model.file().len() as u64;
        assert!(memory.weights <= file_bytes && memory.weights > file_bytes * 9 / 10, "{file}: {memory:?}");
        assert!(memory.scratch <= 64 << 20, "{file}: {memory:?}");
    }
}

#[test]
fn norms_store_their_rows_in_the_format_most_products_read() {
    // SmolLM2 Q4_1's products read Q8_1 blocks, its output (Q8_0) Q8_0 ones. The norms store
    // Q8_1 rows, so a decode step quantizes only the inputs no norm wrote (the attention's
    // output and the gated activation: two a layer) and the output's.
    let model = model("SmolLM2-135M-Instruct.Q4_1.gguf");
    let gpu = Gpu::new().unwrap();
    let mut state = GpuState::new(&gpu, &model, 4, 2).unwrap();
    state.profile_kernels(&gpu, true).unwrap();
    state.forward(&gpu, &model, &[1]).unwrap();
    let times = state.kernel_times();
    let dispatches = |kernel: &str| times.iter().find(|k| k.kernel == kernel).map_or(0, |k| k.dispatches);
    assert_eq!(dispatches("inputs to 8 bits"), 2 * model.config().n_layer + 1);
}

#[test]
fn a_profiled_step_times_every_dispatch_by_kernel_and_changes_nothing() {
    let model = model("qwen3-micro-q8_0.gguf");
    let gpu = Gpu::new().unwrap();
    assert!(gpu.facts().timestamps, "lavapipe has timestamp queries: the profile went untested");
    let mut plain = GpuState::new(&gpu, &model, 8, 6).unwrap();
    let mut profiled = GpuState::new(&gpu, &model, 8, 6).unwrap();
    profiled.profile_kernels(&gpu, true).unwrap();
    assert_eq!(
        plain.forward(&gpu, &model, &PROMPT).unwrap(),
        profiled.forward(&gpu, &model, &PROMPT).unwrap()
    );
    let prompt_dispatches: usize = profiled.kernel_times().iter().map(|k| k.dispatches).sum();
    assert_eq!(prompt_dispatches, profiled.dispatches());
    let want = plain.forward(&gpu, &model, &[11]).unwrap();
    assert_eq!(profiled.forward(&gpu, &model, &[11]).unwrap(), want);
    let times = profiled.kernel_times();
    // Every dispatch of both calls, each counted under its kernel, the longest first.
    assert_eq!(times.iter().map(|k| k.dispatches).sum::<usize>(), prompt_dispatches + profiled.dispatches());
    let names: Vec<&str> = times.iter().map(|k| k.kernel.as_str()).collect();
    // The products' inputs in 8 bits, the default where WGSL has dot4I8Packed (natively always).
    for kernel in [
        "matvec q8 Q8_0",
        "matvec batch q8 Q8_0",
        "matvec gated q8 Q8_0",
        "inputs to 8 bits",
        "rms_norm and its rows to 8 bits",
        "qk_heads (norms, rope, cache)",
        // Its query heads are grouped, two a KV head.
        "attention (a workgroup per KV head)",
    ] {
        assert!(names.contains(&kernel), "{kernel} missing from {names:?}");
    }
    assert!(!names.contains(&"other"), "{names:?}");
    assert!(times.iter().all(|k| k.ms >= 0.0) && times.iter().map(|k| k.ms).sum::<f64>() > 0.0);
    assert!(times.windows(2).all(|pair| pair[0].ms >= pair[1].ms));
    assert!(plain.kernel_times().is_empty());
}

#[test]
fn models_the_gpu_cannot_run_yet_are_refused_up_front() {
    let gpu = Gpu::new().unwrap();
    // IQ2_XXS has no GPU kernel: the engine keeps such a file on the CPU and says why.
    match GpuState::new(&gpu, &model("llama-micro-iq2_xxs.gguf"), 8, 4) {
        Err(GpuError::Unsupported(weight_type)) => assert_eq!(format!("{weight_type:?}"), "IQ2_XXS"),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("an IQ2_XXS file was taken by the GPU"),
    }
    // The GPU keeps F16 keys and values only: other cache types are refused either way round.
    let q8_0 = KvTypes { keys: KvType::Q8_0, values: KvType::Q8_0 };
    let mut engine = Engine::load(std::fs::read(common::model("qwen3-micro-q8_0.gguf")).unwrap()).unwrap();
    engine.set_cache_types(q8_0).unwrap();
    let refused = engine.use_gpu(Some(Arc::new(gpu))).unwrap_err().to_string();
    assert!(refused.contains("KV caches other than f16 do not run on the GPU"), "{refused}");
    let mut engine = engine_on_gpu("qwen3-micro-q8_0.gguf");
    assert!(engine.set_cache_types(q8_0).is_err());
    assert_eq!(engine.cache_types(), KvTypes::default());
}

#[test]
fn a_rolled_back_cache_continues_as_a_fresh_one() {
    // Branching: after the prompt and two answer tokens, back to the prompt and another token.
    let model = model("qwen3-micro-q8_0.gguf");
    let gpu = Gpu::new().unwrap();
    let mut branched = GpuState::new(&gpu, &model, 12, 6).unwrap();
    branched.forward(&gpu, &model, &PROMPT).unwrap();
    branched.forward(&gpu, &model, &[11]).unwrap();
    branched.forward(&gpu, &model, &[12]).unwrap();
    assert_eq!(branched.truncate(&gpu, PROMPT.len()), PROMPT.len());
    assert_eq!(branched.len(), PROMPT.len());
    let after_branch = branched.forward(&gpu, &model, &[13]).unwrap();
    let mut fresh = GpuState::new(&gpu, &model, 12, 6).unwrap();
    fresh.forward(&gpu, &model, &PROMPT).unwrap();
    assert_eq!(after_branch, fresh.forward(&gpu, &model, &[13]).unwrap());
}

fn golden(file: &str, prompt: &str) -> (Vec<u32>, Vec<u32>) {
    let path = common::fixture("golden").join(file);
    let golden: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let ids = |key: &str| -> Vec<u32> {
        let list = golden["prompts"][prompt][key].as_array().unwrap();
        list.iter().map(|v| v.as_u64().unwrap() as u32).collect()
    };
    (ids("prompt_ids"), ids("generated_ids"))
}

fn engine_on_gpu(file: &str) -> Engine {
    let mut engine = Engine::load(std::fs::read(common::model(file)).unwrap()).unwrap();
    engine.use_gpu(Some(Arc::new(Gpu::new().unwrap()))).unwrap();
    engine
}

/// A whole session on the GPU as the page drives one: llama.cpp's greedy continuation (parting
/// only at a near tie), a second turn that evaluates only its new tokens, and a branch from
/// an earlier step that continues as a fresh session would.
#[test]
fn a_session_on_the_gpu_follows_llama_cpp_reuses_its_cache_and_branches() {
    let engine = engine_on_gpu("qwen3-micro-q4_0.gguf");
    let (prompt, expected) = golden("qwen3-micro-q4_0.json", "capital");
    let mut session = engine.new_session(64).unwrap();
    assert!(session.gpu().is_some() && session.gpu_bytes() > 0);
    session.sync(&engine, &prompt).unwrap();
    let mut sampler = Sampler::new(SamplerSettings::greedy()).unwrap();
    let mut generated = Vec::new();
    for (i, &theirs) in expected.iter().enumerate() {
        let step = session.step(&engine, &mut sampler, None, 5).unwrap();
        if step.token != theirs {
            let trace = step.trace.unwrap();
            let logit =
                |id| trace.candidates.iter().find(|c| c.id == id).map_or(f32::NEG_INFINITY, |c| c.logit);
            let margin = logit(step.token) - logit(theirs);
            assert!(margin < 0.3, "parted from llama.cpp at step {i} by {margin}");
            assert!(i >= 8, "only {i} steps agree with llama.cpp");
            break;
        }
        generated.push(step.token);
    }
    // A second turn: the cache keeps everything but the token after the last step.
    let mut next_turn = session.tokens();
    next_turn.extend([1, 2, 3]);
    let report = session.sync(&engine, &next_turn).unwrap();
    assert_eq!((report.reused, report.evaluated), (next_turn.len() - 4, 4));
    // A branch: back to the prompt's end, forcing another first token, equals a fresh session.
    let forced = generated[0] ^ 1;
    session.truncate(prompt.len());
    let branched = session.step(&engine, &mut sampler, Some(forced), 0).unwrap();
    let after_branch = session.step(&engine, &mut sampler, None, 5).unwrap();
    let mut fresh = engine.new_session(64).unwrap();
    fresh.sync(&engine, &prompt).unwrap();
    fresh.step(&engine, &mut sampler, Some(forced), 0).unwrap();
    let fresh_next = fresh.step(&engine, &mut sampler, None, 5).unwrap();
    assert_eq!(branched.token, forced);
    assert_eq!(after_branch.token, fresh_next.token);
    let logits = |s: &inferno::engine::Step| {
        s.trace.as_ref().unwrap().candidates.iter().map(|c| c.logit).collect::<Vec<_>>()
    };
    assert_eq!(logits(&after_branch), logits(&fresh_next));
}

/// Where a step's settings need only the best logits (here T 0.8, top-k 40, top-p 0.95, min-p
/// 0.05 and a trace of 20), an answer on the GPU reads back only those with the softmax sums
/// (`Generation` asks for them), and draws and explains what reading every logit gives: the
/// same session steps after advances that read all of them, with the same seed.
#[test]
fn an_answer_reading_only_the_best_logits_draws_what_every_logit_draws() {
    use inferno::chat::ReplyFormat;
    use inferno::engine::{AnswerLimits, Event, Generation};
    use inferno::sampler::LogitsRead;
    let engine = engine_on_gpu("qwen3-micro-q4_0.gguf");
    let gpu = engine.gpu().unwrap();
    let software = gpu.facts().device_type == "Cpu";
    assert_eq!(gpu.reads_best_logits(), !software, "every logit read only on a software adapter");
    gpu.set_best_logits(true);
    let (prompt, _) = golden("qwen3-micro-q4_0.json", "capital");
    let settings = SamplerSettings { seed: 7, ..SamplerSettings::default() };
    let steps = 24;
    let sampler = Sampler::new(settings.clone()).unwrap();
    assert_eq!(sampler.logits_read(None, 20), LogitsRead::Best { temperature: 0.8 });
    let mut session = engine.new_session(64).unwrap();
    let limits =
        AnswerLimits { max_tokens: steps, trace_top: 20, ignore_eos: true, ..AnswerLimits::default() };
    let mut answer =
        Generation::new(prompt.clone(), ReplyFormat::default(), sampler, limits, &session, || 0.0).unwrap();
    let mut best_read = Vec::new();
    while !answer.is_done() {
        for event in answer.next(&engine, &mut session).unwrap() {
            if let Event::Token { step, .. } = event {
                best_read.push((step.token, step.trace.unwrap().trace));
            }
        }
        if best_read.len() == 2 {
            assert!(session.logits().is_none(), "a decode step read back only the best logits");
        }
    }
    let mut session = engine.new_session(64).unwrap();
    session.sync(&engine, &prompt).unwrap();
    let mut sampler = Sampler::new(settings).unwrap();
    for (i, (token, trace)) in best_read.iter().enumerate() {
        // Every logit read by the advance; the step samples from them all.
        session.advance(&engine).unwrap();
        assert!(session.logits().is_some());
        let every = session.step(&engine, &mut sampler, None, 20).unwrap();
        let want = every.trace.unwrap();
        assert_eq!(every.token, *token, "step {i}");
        let ranked = |t: &inferno::sampler::StepTrace| {
            t.candidates.iter().map(|c| (c.id, c.logit.to_bits(), c.in_nucleus)).collect::<Vec<_>>()
        };
        assert_eq!(ranked(trace), ranked(&want), "step {i}");
        assert_eq!(
            (trace.nucleus_size, trace.excluded, trace.chosen_rank),
            (want.nucleus_size, want.excluded, want.chosen_rank)
        );
        for (got, want) in trace.candidates.iter().zip(&want.candidates) {
            assert!(
                (got.probability - want.probability).abs() <= 1e-5 * want.probability.max(1e-3),
                "step {i}"
            );
        }
        assert!((trace.entropy_bits - want.entropy_bits).abs() < 1e-3, "step {i}");
    }
}

/// A lost device fails the request with `gpu_lost`, and the engine goes on on the CPU.
#[test]
fn a_lost_device_fails_the_step_and_the_cpu_takes_over() {
    let mut engine = engine_on_gpu("qwen3-micro-q8_0.gguf");
    let (prompt, _) = golden("qwen3-micro-q4_0.json", "capital");
    let mut session = engine.new_session(32).unwrap();
    session.sync(&engine, &prompt).unwrap();
    let mut sampler = Sampler::new(SamplerSettings::greedy()).unwrap();
    session.step(&engine, &mut sampler, None, 0).unwrap();
    engine.gpu().unwrap().destroy();
    let error = session.step(&engine, &mut sampler, None, 0).unwrap_err();
    assert_eq!(error.kind(), "gpu_lost", "{error}");
    engine.use_gpu(None).unwrap();
    let mut on_cpu = engine.new_session(32).unwrap();
    on_cpu.sync(&engine, &prompt).unwrap();
    on_cpu.step(&engine, &mut sampler, None, 0).unwrap();
}

/// Qwen3.5 on the GPU as the page drives it: llama.cpp's greedy continuation, and rollbacks
/// through checkpoints of the recurrent state kept on the device: a branch replays from the
/// prompt's checkpoint and sees what the CPU session sees, regenerating restores the prompt's
/// checkpoint with its logits (nothing runs), and the replays are counted as on the CPU.
#[test]
fn a_recurrent_session_on_the_gpu_follows_llama_cpp_and_rolls_back_through_checkpoints() {
    // Qwen3.5's DeltaNet state and Granite 4.0-H's Mamba-2 state.
    for name in ["qwen35-micro-q8_0", "granitehybrid-micro-q8_0"] {
        recurrent_session_rolls_back(name);
    }
}

fn recurrent_session_rolls_back(name: &str) {
    let file = format!("{name}.gguf");
    let engine = engine_on_gpu(&file);
    let mut cpu = Engine::load(std::fs::read(common::model(&file)).unwrap()).unwrap();
    cpu.set_attention_precision(inferno::model::AttentionPrecision::Exact);
    let (prompt, expected) = golden(&format!("{name}.json"), "capital");
    let mut session = engine.new_session(128).unwrap();
    session.sync(&engine, &prompt).unwrap();
    let (_, most, each) = session.checkpoints();
    assert!(most >= 2 && each > 0, "{most} checkpoints of {each} bytes");
    let mut sampler = Sampler::new(SamplerSettings::greedy()).unwrap();
    let mut tokens = prompt.clone();
    for (i, &theirs) in expected.iter().enumerate() {
        let step = session.step(&engine, &mut sampler, None, 5).unwrap();
        assert_eq!(step.token, theirs, "step {i} parted from llama.cpp");
        tokens.push(step.token);
    }
    for _ in expected.len()..40 {
        tokens.push(session.step(&engine, &mut sampler, None, 0).unwrap().token);
    }
    // The prompt's end and one generated stretch of CHECKPOINT_INTERVAL.
    assert_eq!(session.checkpoints().0, 2);

    // Branch from generated step 20: back to the prompt's checkpoint, 20 tokens replayed.
    session.truncate(prompt.len() + 20);
    let forced = (tokens[prompt.len() + 20] + 1) % 4000;
    session.step(&engine, &mut sampler, Some(forced), 0).unwrap();
    assert_eq!(session.replayed(), 20);
    let after_branch = session.step(&engine, &mut sampler, None, 5).unwrap();
    let branched = [&tokens[..prompt.len() + 20], &[forced]].concat();
    let mut on_cpu = cpu.new_session(128).unwrap();
    on_cpu.sync(&cpu, &branched).unwrap();
    // A longer trace on the CPU: the GPU's fifth candidate may be the CPU's sixth in a near tie.
    let cpu_step = on_cpu.step(&cpu, &mut sampler, None, 20).unwrap();
    // The same token, or one the CPU scores within a near tie of its own (Granite 4.0-H's
    // random weights leave two candidates 2e-4 apart there, which the GPU's rounding may swap).
    let cpu_logit = |id: u32| {
        let candidates = &cpu_step.trace.as_ref().unwrap().candidates;
        candidates.iter().find(|c| c.id == id).map(|c| c.logit)
    };
    if after_branch.token != cpu_step.token {
        let gap =
            cpu_logit(cpu_step.token).unwrap() - cpu_logit(after_branch.token).expect("a CPU candidate");
        assert!(gap < 0.02, "the GPU drew {}, {gap} below the CPU's {}", after_branch.token, cpu_step.token);
    }
    for candidate in &after_branch.trace.as_ref().unwrap().candidates {
        let on_cpu = cpu_logit(candidate.id).unwrap_or_else(|| {
            panic!("{candidate:?} is not among the CPU's {:?}", cpu_step.trace.as_ref().unwrap().candidates)
        });
        assert!((candidate.logit - on_cpu).abs() < 0.02, "{} vs {on_cpu}", candidate.logit);
    }

    // Regenerating the first answer: the prompt's checkpoint kept its logits, so nothing runs.
    let report = session.sync(&engine, &prompt).unwrap();
    assert_eq!((report.reused, report.evaluated, report.replayed), (prompt.len(), 0, 0));
    assert_eq!(session.step(&engine, &mut sampler, None, 0).unwrap().token, tokens[prompt.len()]);
}

/// The GPU against llama.cpp itself rather than the CPU: `inferno logits --golden --device gpu`
/// follows each golden run (the prompt in one batch, then token by token) within the GPU's
/// bounds (0.1 for Q8_0 files, 0.5 for the others: five times the CPU's, since the GPU
/// multiplies f32 activations where llama.cpp's CPU quantizes them to 8 bits) and picks
/// llama.cpp's token wherever its top two are further apart than that. One file per family
/// and per kind of kernel; scripts/gpu-check.sh runs every golden.
#[test]
fn the_gpu_follows_llama_cpps_goldens_within_its_bounds() {
    for (name, bound) in [
        ("qwen3-micro-q8_0", "0.1"),
        ("qwen3-micro-q4_k_s", "0.5"),
        ("qwen3-micro-q6_k", "0.5"),
        ("gemma4-micro-q8_0", "0.1"),
        ("qwen35-micro-q8_0", "0.1"),
        ("lfm2-micro-q8_0", "0.1"),
        ("granite-micro-q8_0", "0.1"),
        ("llama-micro-iq4_xs", "0.5"),
        ("llama-micro-mxfp4", "0.5"),
        ("qwen3moe-micro-q8_0", "0.1"),
        ("gpt-oss-micro-q8_0", "0.1"),
        // One decode step of `code_unicode` is 0.13 off, the steps around it 0.03 (0.20 and
        // 0.03 against the CPU): the signature of a token whose last chosen expert and the next
        // are a near tie that the CPU's 8-bit activations and the GPU's f32 ones break apart
        // (its random router and selection bias make such ties common).
        ("lfm2moe-micro-q8_0", "0.2"),
        ("granitehybrid-micro-q8_0", "0.1"),
        ("qwen2vl-micro-q8_0", "0.1"),
    ] {
        let golden = common::fixture("golden").join(format!("{name}.json"));
        let file = common::model(&format!("{name}.gguf"));
        let out = Command::new(env!("CARGO_BIN_EXE_inferno"))
            .args(["logits".as_ref(), file.as_os_str(), "--golden".as_ref(), golden.as_os_str()])
            .args(["--device", "gpu", "--tolerance", bound])
            .output()
            .unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        eprintln!("{stdout}");
        assert!(out.status.success(), "{name}: {stderr}");
        assert!(stdout.contains("on the GPU ("), "{name}: {stdout}");
    }
}

/// A picture on the GPU (the micro Gemma 3 projector with Gemma 3 270M): encoded there, its rows go up whole
/// and attend both ways, and the session's logits follow the CPU's, whose are llama.cpp's
/// (tests/vision.rs), with the same greedy tokens. Measured on lavapipe: max |Δlogit| 1.48-1.56
/// (text on this model: 0.78-0.95; random picture rows in a real model amplify every rounding),
/// where the picture's rows attended causally instead give 6.07: the bound of 2 tells them apart.
#[test]
fn a_picture_runs_on_the_gpu_as_on_the_cpu() {
    let mmproj = std::fs::read(common::fixture("models/clip-gemma3-micro.gguf")).unwrap();
    let picture =
        inferno::vision::decode(&std::fs::read(common::fixture("images/stripes-300x200.png")).unwrap())
            .unwrap();
    let prompt =
        "<start_of_turn>user\n<__media__>What is in this picture?<end_of_turn>\n<start_of_turn>model\n";
    let mut on_gpu = engine_on_gpu("gemma3-270m-q4_k_m.gguf");
    on_gpu.attach_projector(mmproj.clone()).unwrap();
    let mut on_cpu = Engine::load(std::fs::read(common::model("gemma3-270m-q4_k_m.gguf")).unwrap()).unwrap();
    on_cpu.attach_projector(mmproj).unwrap();
    let ids = on_gpu.encode_with_images(prompt, std::slice::from_ref(&picture)).unwrap();
    assert!(on_gpu.projector_gpu_bytes() > 0, "the picture was encoded on the GPU");
    assert_eq!(ids, on_cpu.encode_with_images(prompt, std::slice::from_ref(&picture)).unwrap());
    let (mut gpu_session, mut cpu_session) =
        (on_gpu.new_session(64).unwrap(), on_cpu.new_session(64).unwrap());
    gpu_session.sync(&on_gpu, &ids).unwrap();
    cpu_session.sync(&on_cpu, &ids).unwrap();
    let mut sampler = Sampler::new(SamplerSettings::greedy()).unwrap();
    for step in 0..3 {
        gpu_session.advance(&on_gpu).unwrap();
        cpu_session.advance(&on_cpu).unwrap();
        let (gpu, cpu) = (gpu_session.logits().unwrap(), cpu_session.logits().unwrap());
        let delta = cpu.iter().zip(gpu).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        eprintln!("picture on the GPU, step {step}: max |Δlogit| {delta:.4}");
        assert!(delta <= 2.0, "step {step}: {delta}");
        let theirs = cpu_session.step(&on_cpu, &mut sampler, None, 0).unwrap().token;
        assert_eq!(gpu_session.step(&on_gpu, &mut sampler, None, 0).unwrap().token, theirs, "step {step}");
    }
}

/// Gemma 4's picture rows on the GPU: the micro Gemma 4 and its micro projector, whose rows
/// take token 0's per-layer inputs beside their own projection, attended both ways. The GPU's
/// logits follow the CPU's (whose are llama.cpp's, tests/vision.rs) within 0.1 (measured on
/// lavapipe: 0.023-0.024), and its greedy tokens are llama.cpp's (the golden's).
#[test]
fn a_gemma4_picture_runs_on_the_gpu_as_on_the_cpu() {
    assert_micro_picture_on_gpu("gemma4-vl-micro-q8_0", "clip-gemma4v-micro");
}

/// Qwen3.5's picture rows on the GPU: the micro Qwen3.5 and its micro projector, the rows at
/// M-RoPE's positions (the shader's grid mode: each pair's stream from the factors' second half)
/// and the text after them at the picture's start plus its grid's longer side. The GPU's logits
/// follow the CPU's (llama.cpp's) within 0.1, and its greedy tokens are llama.cpp's.
#[test]
fn a_qwen35_picture_runs_on_the_gpu_as_on_the_cpu() {
    assert_micro_picture_on_gpu("qwen35-micro-q8_0", "clip-qwen3vl-micro");
}

/// Qwen3-VL's on the GPU: the micro Qwen3-VL and its deepstack projector, the picture's rows at
/// M-RoPE's positions and their deepstack slices added after layers 0 and 1 (each from a buffer
/// of its own, dispatched in the layer's place).
#[test]
fn a_qwen3_vl_picture_runs_on_the_gpu_as_on_the_cpu() {
    assert_micro_picture_on_gpu("qwen3vl-micro-q8_0", "clip-qwen3vl-deepstack-micro");
}

/// Qwen2.5-VL's on the GPU: the micro Qwen2-VL language model (Qwen2's layers, M-RoPE in
/// sections: the shader takes each pair's stream from the factors' second half, whichever way
/// the sections assign them) with the micro Qwen2.5-VL projector (window attention: each
/// query's span in the attention kernel).
#[test]
fn a_qwen2_5_vl_picture_runs_on_the_gpu_as_on_the_cpu() {
    assert_micro_picture_on_gpu("qwen2vl-micro-q8_0", "clip-qwen25vl-micro");
}

/// A micro pair's chat golden on the GPU (the picture encoded there too) and the CPU side by
/// side: the same prompt ids, the logits of three greedy steps within 0.1, the golden's tokens.
fn assert_micro_picture_on_gpu(model: &str, projector: &str) {
    let golden: serde_json::Value = serde_json::from_slice(
        &std::fs::read(common::fixture(&format!("golden/{projector}.images.json"))).unwrap(),
    )
    .unwrap();
    let chat = &golden["chat"];
    let mmproj = std::fs::read(common::fixture(&format!("models/{projector}.gguf"))).unwrap();
    let picture =
        inferno::vision::decode(&std::fs::read(common::fixture(chat["picture"].as_str().unwrap())).unwrap())
            .unwrap();
    let prompt = chat["prompt"].as_str().unwrap();
    let model = std::fs::read(common::fixture(&format!("models/{model}.gguf"))).unwrap();
    let mut on_gpu = Engine::load(model.clone()).unwrap();
    on_gpu.use_gpu(Some(Arc::new(Gpu::new().unwrap()))).unwrap();
    on_gpu.attach_projector(mmproj.clone()).unwrap();
    let mut on_cpu = Engine::load(model).unwrap();
    on_cpu.attach_projector(mmproj).unwrap();
    let ids = on_gpu.encode_with_images(prompt, std::slice::from_ref(&picture)).unwrap();
    assert!(on_gpu.projector_gpu_bytes() > 0, "the picture was encoded on the GPU");
    assert_eq!(ids, on_cpu.encode_with_images(prompt, std::slice::from_ref(&picture)).unwrap());
    let (mut gpu_session, mut cpu_session) =
        (on_gpu.new_session(512).unwrap(), on_cpu.new_session(512).unwrap());
    gpu_session.sync(&on_gpu, &ids).unwrap();
    cpu_session.sync(&on_cpu, &ids).unwrap();
    let mut sampler = Sampler::new(SamplerSettings::greedy()).unwrap();
    for (step, theirs) in chat["generated_ids"].as_array().unwrap().iter().take(3).enumerate() {
        gpu_session.advance(&on_gpu).unwrap();
        cpu_session.advance(&on_cpu).unwrap();
        let (gpu, cpu) = (gpu_session.logits().unwrap(), cpu_session.logits().unwrap());
        let delta = cpu.iter().zip(gpu).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        eprintln!("{projector} picture on the GPU, step {step}: max |Δlogit| {delta:.4}");
        assert!(delta <= 0.1, "step {step}: {delta}");
        let token = gpu_session.step(&on_gpu, &mut sampler, None, 0).unwrap().token;
        assert_eq!(u64::from(token), theirs.as_u64().unwrap(), "step {step}");
        assert_eq!(cpu_session.step(&on_cpu, &mut sampler, None, 0).unwrap().token, token);
    }
}

/// The projectors whose micro files and mtmd goldens tests/vision.rs holds the CPU to.
const PROJECTORS: [&str; 8] = [
    "clip-gemma3-micro",
    "clip-idefics3-micro",
    "clip-lfm2-micro",
    "clip-gemma4v-micro",
    "clip-qwen2vl-micro",
    "clip-qwen25vl-micro",
    "clip-qwen3vl-micro",
    "clip-qwen3vl-deepstack-micro",
];

/// mtmd's embeddings of a golden's picture.
fn mtmd_embeddings(entry: &serde_json::Value) -> Vec<f32> {
    let bytes = std::fs::read(common::fixture("golden").join(entry["embeddings"].as_str().unwrap())).unwrap();
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

/// Every projector's golden pictures encoded on the GPU, square by square, against mtmd's
/// embeddings (relative to their largest magnitude). The GPU rounds as llama.cpp's CPU does where
/// it matters (activations to f16 before F16 matrices, keys and values to f16 for attention) but
/// sums in its own order, so the bound is the 1e-3 for F32/F16 encoders, not 0 (measured
/// on lavapipe: 3.5e-5 to 6.2e-4, Gemma 4's the largest; without the f16 rounding Gemma 4's was
/// 1.2e-3). LFM2-VL's tiled picture is left out: its tiles are 4,096 patches, and lavapipe's
/// attention over them takes half a minute a tile (its first tile was 1.9e-4 from mtmd's; the
/// attention kernels' unit test holds a call of that length to the CPU's).
#[test]
fn pictures_encode_on_the_gpu_as_mtmd_encodes_them() {
    use inferno::gpu::GpuVision;
    use inferno::vision::{PicturePart, VisionEncoder, decode};
    let gpu = Arc::new(Gpu::new().expect("a GPU adapter (natively: apt-get install mesa-vulkan-drivers)"));
    for projector in PROJECTORS {
        let bytes = std::fs::read(common::fixture(&format!("models/{projector}.gguf"))).unwrap();
        let encoder = VisionEncoder::load(bytes.into()).unwrap();
        let mut vision = GpuVision::new(Arc::clone(&gpu));
        let golden: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(common::fixture(&format!("golden/{projector}.images.json"))).unwrap(),
        )
        .unwrap();
        for entry in golden["pictures"].as_array().unwrap() {
            let name = entry["file"].as_str().unwrap();
            let image = decode(&std::fs::read(common::fixture(name)).unwrap()).unwrap();
            if entry.get("rows_kept").is_some() {
                continue;
            }
            let expected = mtmd_embeddings(entry);
            let mut ours = Vec::new();
            for part in encoder.layout(&image).unwrap() {
                let PicturePart::Square(square) = part else { continue };
                let rows = vision.encode_square(&encoder, &square).map_err(|e| format!("{e:?}")).unwrap();
                ours.extend_from_slice(&rows.values);
            }
            assert_eq!(ours.len(), expected.len(), "{projector} {name}");
            let scale = expected.iter().fold(0.0f32, |m, &v| m.max(v.abs()));
            let worst = ours.iter().zip(&expected).fold(0.0f32, |m, (&a, &b)| m.max((a - b).abs()));
            let error = worst / scale;
            eprintln!("{projector} {name}: {error:.2e} from mtmd's embeddings on the GPU");
            assert!(error < 1e-3, "{projector} {name}: {error}");
        }
    }
}

/// `bytes` pushed into a [`WeightStream`] in chunks of `chunk`: the model, its weights on the
/// device, and the most memory the stream held at once.
fn stream(gpu: &Arc<Gpu>, bytes: &[u8], chunk: usize) -> Result<(Model, DeviceWeights, usize), StreamError> {
    let mut stream = WeightStream::new(Arc::clone(gpu), bytes.len() as u64)?;
    let mut most_held = 0;
    for piece in bytes.chunks(chunk) {
        stream.push(piece)?;
        most_held = most_held.max(stream.held_bytes());
    }
    let (model, weights) = stream.finish()?;
    Ok((model, weights, most_held))
}

#[test]
fn weights_streamed_to_the_gpu_give_the_logits_of_weights_uploaded_from_memory() {
    let gpu = Arc::new(Gpu::new().unwrap());
    // Tied and untied outputs, Gemma's scaled embedding, Q8_0 (clamped on the way) and F16
    // (checked on the way), a K-quant, expert stacks, DeltaNet; chunks of an odd size, so that
    // rows, blocks and words all straddle them.
    let files = [
        "qwen3-micro-q8_0.gguf",
        "qwen3-micro-f16.gguf",
        "qwen3-micro-q4_k_s.gguf",
        "llama-micro-llama3.gguf",
        "gemma2-micro-q8_0.gguf",
        "qwen3moe-micro-q8_0.gguf",
        "qwen35-micro-q8_0.gguf",
    ];
    for file in files {
        let bytes = std::fs::read(common::model(file)).unwrap();
        let resident = Model::load(bytes.clone()).unwrap();
        let (model, weights, most_held) = stream(&gpu, &bytes, 4099).unwrap();
        // Every matrix and the token embedding are on the device only; the rest is held.
        let w = model.weights();
        for matrix in model.decode_matrices().chain([&w.token_embd]) {
            assert!(model.file().get(matrix.range.clone()).is_none(), "{file}: {} is held", matrix.name);
        }
        let held = model.file().held_bytes();
        let on_device = resident.decode_matrices().chain([&resident.weights().token_embd]);
        let mut ranges: Vec<_> = on_device.map(|m| (m.range.start, m.range.end)).collect();
        ranges.sort_unstable();
        ranges.dedup();
        // Expert views are ranges of their stack: count each stack once.
        let device_bytes: usize =
            ranges
                .iter()
                .fold((0, 0), |(sum, end), &(s, e)| {
                    if s >= end { (sum + e - s, e) } else { (sum + e.saturating_sub(end), end.max(e)) }
                })
                .0;
        assert_eq!(held + device_bytes, bytes.len(), "{file}: the held and device bytes tile the file");
        // The held layout closes up what went to the device (which only has places past it).
        assert!(model.file().len() < bytes.len(), "{file}: {} held of {}", model.file().len(), bytes.len());
        // At most the header twice over while it arrives (a growing buffer), or what is kept
        // and a chunk or so of staging after.
        assert!(most_held <= 2 * held + 3 * 4099, "{file}: held {most_held} while streaming, {held} kept");
        eprintln!("{file}: {held} of {} bytes held, {} on the device", bytes.len(), weights.bytes());

        let capacity = PROMPT.len() + 2;
        let mut streamed =
            GpuState::with_weights(&gpu, &model, Some(&weights), capacity, PROMPT.len()).unwrap();
        let mut uploaded = GpuState::new(&gpu, &resident, capacity, PROMPT.len()).unwrap();
        let mut tokens = PROMPT.to_vec();
        for step in 0..3 {
            let fed = if step == 0 { &tokens[..] } else { &tokens[tokens.len() - 1..] };
            let expected = uploaded.forward(&gpu, &resident, fed).unwrap();
            let got = streamed.forward(&gpu, &model, fed).unwrap();
            let delta = expected.iter().zip(&got).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            eprintln!("{file} step {step}: max |Δlogit| {delta:.2e} streamed against uploaded");
            assert!(delta <= 1e-4, "{file} step {step}: {delta}");
            tokens.push(argmax(&expected) as u32);
        }
    }
}

#[test]
fn weights_streamed_into_slices_give_the_logits_of_whole_buffers() {
    // Bindings a third of the token embedding: the table (looked up on the device, slice by
    // slice) and the matrices and expert stacks larger than that stream into several buffers.
    for file in ["qwen3-micro-q8_0.gguf", "qwen3moe-micro-q8_0.gguf"] {
        let bytes = std::fs::read(common::model(file)).unwrap();
        let resident = Model::load(bytes.clone()).unwrap();
        let table = resident.weights().token_embd.range.len();
        let whole_gpu = Gpu::new().unwrap();
        let mut sliced_gpu = Gpu::new().unwrap();
        sliced_gpu.limit_bindings(table as u64 / 3);
        let sliced_gpu = Arc::new(sliced_gpu);
        let (model, weights, _) = stream(&sliced_gpu, &bytes, 100_003).unwrap();
        let mut sliced = GpuState::with_weights(&sliced_gpu, &model, Some(&weights), 12, 6).unwrap();
        let mut whole = GpuState::new(&whole_gpu, &resident, 12, 6).unwrap();
        // Tokens from every third of the vocabulary: rows of each slice of the table.
        let vocab = resident.config().vocab_size as u32;
        let prompt = [5, vocab / 3 + 7, vocab / 2, vocab - 1];
        for fed in [&prompt[..], &[2 * vocab / 3 + 1]] {
            let expected = whole.forward(&whole_gpu, &resident, fed).unwrap();
            let got = sliced.forward(&sliced_gpu, &model, fed).unwrap();
            let delta = expected.iter().zip(&got).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(delta <= 1e-4, "{file}: {delta}");
        }
    }
}

#[test]
fn an_engine_with_weights_on_the_gpu_only_stays_there() {
    let gpu = Arc::new(Gpu::new().unwrap());
    let bytes = std::fs::read(common::model("qwen3-micro-q8_0.gguf")).unwrap();
    let (model, weights, _) = stream(&gpu, &bytes, 1 << 16).unwrap();
    let mut engine = Engine::with_weights_on_gpu(model, Arc::clone(&gpu), weights).unwrap();
    assert!(engine.weights_on_gpu_only());
    let refused = engine.use_gpu(None).unwrap_err();
    assert_eq!(refused.kind(), "weights_on_gpu", "{refused}");
    let other = Arc::new(Gpu::new().unwrap());
    assert_eq!(engine.use_gpu(Some(other)).unwrap_err().kind(), "weights_on_gpu");
    engine.use_gpu(Some(Arc::clone(&gpu))).unwrap();
    // A session runs there, and answers as the same file loaded into memory does on the GPU.
    let mut session = engine.new_session(16).unwrap();
    let mut resident = Engine::load(bytes).unwrap();
    resident.use_gpu(Some(Arc::clone(&gpu))).unwrap();
    let mut reference = resident.new_session(16).unwrap();
    let prompt = [1u32, 5, 9];
    let mut logits = Vec::new();
    for (engine, session) in [(&engine, &mut session), (&resident, &mut reference)] {
        session.sync(engine, &prompt).unwrap();
        logits.push(session.logits().unwrap().to_vec());
    }
    let delta = logits[0].iter().zip(&logits[1]).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(delta <= 1e-4, "{delta}");
}

#[test]
fn a_streamed_file_is_checked_as_a_file_in_memory_is() {
    let gpu = Arc::new(Gpu::new().unwrap());
    let bytes = std::fs::read(common::model("qwen3-micro-f16.gguf")).unwrap();
    // A NaN in an F16 matrix: refused on the way to the device, as a load into memory refuses it.
    let header = Model::load(bytes.clone()).unwrap().header().clone();
    let range = header.tensor_range(header.tensor("blk.0.attn_q.weight").unwrap()).unwrap();
    let mut poisoned = bytes.clone();
    poisoned[range.start + 202..range.start + 204].copy_from_slice(&0x7e00u16.to_le_bytes());
    let in_memory = Model::load(poisoned.clone()).err().expect("refused in memory").to_string();
    let streamed = stream(&gpu, &poisoned, 777).err().expect("refused on the way").to_string();
    assert!(streamed.contains("blk.0.attn_q.weight") && streamed.contains("F16 element 101"), "{streamed}");
    assert_eq!(streamed, in_memory);
    // Too few bytes, too many, and a broken header.
    let short = WeightStream::new(Arc::clone(&gpu), bytes.len() as u64).and_then(|mut s| {
        s.push(&bytes[..bytes.len() - 1])?;
        s.finish()
    });
    assert_eq!(short.err().map(|e| e.kind()), Some("incomplete"));
    let mut long = WeightStream::new(Arc::clone(&gpu), 10).unwrap();
    assert_eq!(long.push(&bytes[..11]).err().map(|e| e.kind()), Some("too_many_bytes"));
    let mut garbage = bytes.clone();
    garbage[0] = b'X';
    assert_eq!(stream(&gpu, &garbage, 4096).err().map(|e| e.kind()), Some("bad_magic"));
}
