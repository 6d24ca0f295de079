//! The wasm API, exercised in the browsers (`./build.sh test` runs these through
//! wasm-bindgen-test-runner: the SIMD128 build in WebKitGTK, relaxed SIMD in Chromium, Memory64
//! in Firefox). One test binary with the GPU's tests as a module, so that each build links the
//! engine into a test module once.
#![cfg(target_family = "wasm")]

#[cfg(feature = "gpu")]
mod gpu;

use inferno::gguf::writer::GgufWriter;
use inferno::gguf::{GgmlType, Value};
use inferno::web::{ReadProbe, engine_info, inspect_prefix, memory_for_model};
use js_sys::Reflect;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn get(object: &JsValue, key: &str) -> JsValue {
    Reflect::get(object, &key.into()).expect("property read")
}

fn small_model() -> Vec<u8> {
    GgufWriter::new()
        .kv("general.architecture", Value::String("llama".into()))
        .kv("general.name", Value::String("tiny".into()))
        .kv("llama.block_count", Value::U32(1))
        .tensor_f32("token_embd.weight", &[4, 2], &[0.5; 8])
        .tensor("blk.0.attn_q.weight", &[32, 1], GgmlType::Q8_0, vec![0; 34])
        .to_bytes()
}

#[wasm_bindgen_test]
fn reports_a_valid_file() {
    let bytes = small_model();
    let outcome = inspect_prefix(&bytes, bytes.len() as f64, false).expect("valid file");
    assert_eq!(get(&outcome, "status"), "complete");
    let report = get(&outcome, "report");
    let summary = get(&report, "summary");
    assert_eq!(get(&summary, "architecture"), "llama");
    assert_eq!(get(&summary, "parameter_count").as_f64(), Some(40.0));
    let gguf = get(&report, "gguf");
    assert_eq!(get(&gguf, "tensor_count").as_f64(), Some(2.0));
    let tensors: js_sys::Array = get(&report, "tensors").into();
    let second = tensors.get(1);
    assert_eq!(get(&second, "type"), "Q8_0");
    assert_eq!(get(&second, "layer").as_f64(), Some(0.0));
}

#[wasm_bindgen_test]
fn asks_for_more_bytes_when_the_prefix_ends_inside_the_header() {
    let bytes = small_model();
    let outcome = inspect_prefix(&bytes[..40], bytes.len() as f64, false).expect("prefix is fine so far");
    assert_eq!(get(&outcome, "status"), "need_more");
    let at_least = get(&outcome, "at_least").as_f64().expect("number");
    assert!(at_least > 40.0 && at_least <= bytes.len() as f64, "at_least = {at_least}");
}

fn error_kind(bytes: &[u8]) -> (String, String) {
    let error = inspect_prefix(bytes, bytes.len() as f64, false).expect_err("must be rejected");
    assert!(error.is_instance_of::<js_sys::Error>(), "errors are real JS Error objects");
    assert_eq!(get(&error, "name"), "GgufError");
    let kind = get(&error, "kind").as_string().expect("kind");
    let message = get(&error, "message").as_string().expect("message");
    (kind, message)
}

#[wasm_bindgen_test]
fn rejects_bad_magic() {
    let mut bytes = small_model();
    bytes[..4].copy_from_slice(b"GGML");
    let (kind, message) = error_kind(&bytes);
    assert_eq!(kind, "bad_magic");
    assert!(message.contains("not a GGUF file"), "{message}");
}

#[wasm_bindgen_test]
fn rejects_a_truncated_file() {
    let bytes = small_model();
    let header = inferno::gguf::Gguf::parse(&bytes).unwrap().header;
    let last = &header.tensors[1];
    let inside_last_tensor = (header.data_offset + last.offset + last.n_bytes - 1) as usize;
    let (kind, _) = error_kind(&bytes[..inside_last_tensor]);
    assert_eq!(kind, "tensor_past_end");
    let inside_name = bytes.windows(4).position(|w| w == b"tiny").unwrap() + 2;
    let (kind, message) = error_kind(&bytes[..inside_name]);
    assert_eq!(kind, "length_past_end");
    assert!(message.contains("offset"), "{message}");
}

#[wasm_bindgen_test]
fn rejects_an_unknown_tensor_type() {
    let (mut bytes, layout) = GgufWriter::new().tensor_f32("a", &[2], &[1.0, 2.0]).to_bytes_with_layout();
    let at = layout.at("tensor[0].type");
    bytes[at..at + 4].copy_from_slice(&77u32.to_le_bytes());
    assert_eq!(error_kind(&bytes).0, "unknown_tensor_type");
}

#[wasm_bindgen_test]
fn rejects_a_size_that_is_not_a_byte_count() {
    let bytes = small_model();
    let error = inspect_prefix(&bytes, -1.0, false).expect_err("negative size");
    assert_eq!(get(&error, "name"), "RangeError");
}

/// The benchmark's memory probe reads every byte of its buffer each pass (the checksum of
/// 1,000 bytes of 0x5A is 250 words of 0x5A5A5A5A), and refuses sizes it should not allocate.
#[wasm_bindgen_test]
fn the_read_probe_reads_its_whole_buffer_and_refuses_bad_sizes() {
    let probe = ReadProbe::new(1000.0).expect("a small probe");
    let pass = 250u32.wrapping_mul(0x5A5A_5A5A);
    assert_eq!(probe.read(1), pass);
    assert_eq!(probe.read(3), pass.wrapping_mul(3));
    for bad in [-1.0, 0.5, 2f64.powi(31)] {
        let error = ReadProbe::new(bad).err().expect("refused");
        assert_eq!(get(&error, "name"), "RangeError", "size {bad}");
        assert_eq!(get(&error, "kind"), "invalid", "size {bad}");
    }
}

#[wasm_bindgen_test]
fn reports_simd128_build() {
    let info = engine_info().expect("info");
    assert_eq!(get(&info, "simd128"), JsValue::TRUE);
}

/// Every kernel of the build's table (SIMD128, or relaxed SIMD) against its scalar reference on
/// seeded random rows, in the browser.
#[wasm_bindgen_test]
fn simd_kernels_match_the_scalar_reference() {
    inferno::tensor::kernel_checks::check_kernels_match_scalar().unwrap();
}

/// The test build must really be a SIMD128 build, or the kernel test above silently vanishes.
#[wasm_bindgen_test]
fn the_test_build_has_simd128() {
    const { assert!(cfg!(target_feature = "simd128"), "the wasm build must enable SIMD128") };
}

/// llama.cpp parity inside the browser, with the SIMD128 (or relaxed) kernels: a committed
/// micro file, teacher-forced on its golden prompts (prompt in one batch, then one token at a
/// time), must give llama.cpp's prompt ids, keep its top-1 (except at its own near-ties) and
/// stay within `tolerance`. Returns the number of steps compared.
fn assert_follows_golden(file: &[u8], golden: &str, tolerance: f32) -> usize {
    use inferno::engine::Engine;
    use inferno::model::LogitsFor;
    let engine = Engine::load(file.to_vec()).unwrap();
    let golden: serde_json::Value = serde_json::from_str(golden).unwrap();
    let file_name = golden["file"].as_str().unwrap_or("?").to_owned();
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
    };
    let model = engine.model();
    // The KV cache as llama.cpp kept it, where not F16 (the kv-cache goldens).
    let cache_types = golden["settings"]["cache_types"].as_object().map_or_else(Default::default, |t| {
        let kind = |part: &str| inferno::model::KvType::from_name(t[part].as_str().unwrap()).unwrap();
        inferno::model::KvTypes { keys: kind("keys"), values: kind("values") }
    });
    let mut steps = 0;
    for (name, prompt) in golden["prompts"].as_object().unwrap() {
        let (prompt_ids, generated) = (ids(&prompt["prompt_ids"]), ids(&prompt["generated_ids"]));
        assert_eq!(engine.encode(prompt["prompt"].as_str().unwrap()), prompt_ids, "{file_name} {name}");
        let (mut cache, mut scratch) =
            model.new_state(prompt_ids.len() + 8, prompt_ids.len(), cache_types).unwrap();
        let mut row = model.forward(&mut cache, &mut scratch, &prompt_ids, LogitsFor::Last).unwrap().to_vec();
        for step in prompt["steps"].as_array().unwrap() {
            let k = step["step"].as_u64().unwrap() as usize;
            if k > 0 {
                row = model
                    .forward(&mut cache, &mut scratch, &[generated[k - 1]], LogitsFor::Last)
                    .unwrap()
                    .to_vec();
            }
            let top = step["top"].as_array().unwrap();
            let best = (0..row.len()).fold(0, |b, i| if row[i] > row[b] { i } else { b });
            let gap = top[0]["logit"].as_f64().unwrap() - top[1]["logit"].as_f64().unwrap();
            if gap >= f64::from(tolerance) {
                // Closer than the tolerance, llama.cpp's own top two may swap.
                assert_eq!(best as u64, top[0]["id"].as_u64().unwrap(), "{file_name} {name} step {k}");
            }
            for entry in top {
                let ours = row[entry["id"].as_u64().unwrap() as usize];
                let delta = (ours - entry["logit"].as_f64().unwrap() as f32).abs();
                assert!(delta <= tolerance, "{file_name} {name} step {k}: |Δ| {delta}");
            }
            steps += 1;
        }
    }
    steps
}

/// The Q4_0 micro Qwen3 file within the 4-bit tolerance of 0.1.
#[wasm_bindgen_test]
fn engine_logits_match_llama_cpp_with_simd128() {
    let steps = assert_follows_golden(
        include_bytes!("../fixtures/models/qwen3-micro-q4_0.gguf"),
        include_str!("../fixtures/golden/qwen3-micro-q4_0.json"),
        0.1,
    );
    assert_eq!(steps, 24);
}

/// The micro files of the other architectures and types (scripts/make_micro_models.py): Qwen2
/// (Q/K/V biases), SmolLM3 (no RoPE in layer 3), Phi-3 (fused QKV and gate/up, LongRoPE's short
/// factors, whitespace stripped after special tokens), Gemma 2 (soft caps, alternate
/// sliding-window layers), Qwen3.5 (gated DeltaNet and gated attention; chunked prefill), Gemma 4
/// (per-layer head sizes, shared KV, per-layer inputs) within the 8-bit tolerance of 0.02; IQ4_NL, IQ4_XS and MXFP4 (SIMD128 table
/// lookups), the lattice i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, and
/// Q2_K and Q3_K (the Qwen3 Q2_K and Q3_K_S micro files) within the 4-bit tolerance of 0.1.
/// Four golden prompts of 8 steps each (three for the Qwen3 micro files).
#[wasm_bindgen_test]
fn micro_files_of_other_architectures_and_types_match_llama_cpp_in_the_browser() {
    macro_rules! micro {
        ($name:literal, $tolerance:expr) => {
            micro!($name, $tolerance, 32)
        };
        ($name:literal, $tolerance:expr, $steps:expr) => {
            (
                $name,
                include_bytes!(concat!("../fixtures/models/", $name, ".gguf")).as_slice(),
                include_str!(concat!("../fixtures/golden/", $name, ".json")),
                $tolerance,
                $steps,
            )
        };
    }
    let files = [
        micro!("qwen2-micro-q8_0", 0.02),
        micro!("smollm3-micro-q8_0", 0.02),
        micro!("phi3-micro-q8_0", 0.02),
        micro!("gemma2-micro-q8_0", 0.02),
        micro!("qwen35-micro-q8_0", 0.02),
        micro!("gemma4-micro-q8_0", 0.02),
        micro!("qwen3moe-micro-q8_0", 0.02),
        micro!("olmoe-micro-q8_0", 0.02),
        micro!("granitemoe-micro-q8_0", 0.02),
        micro!("granite-micro-q8_0", 0.02),
        micro!("lfm2-micro-q8_0", 0.02),
        micro!("lfm2moe-micro-q8_0", 0.02),
        micro!("gpt-oss-micro-q8_0", 0.1),
        micro!("granitehybrid-micro-q8_0", 0.02),
        micro!("qwen3vl-micro-q8_0", 0.02),
        micro!("qwen2vl-micro-q8_0", 0.02),
        micro!("llama-micro-iq4_nl", 0.1),
        micro!("llama-micro-iq4_xs", 0.1),
        micro!("llama-micro-mxfp4", 0.1),
        micro!("llama-micro-iq2_xxs", 0.1),
        micro!("llama-micro-iq3_xxs", 0.1),
        micro!("llama-micro-iq3_s", 0.1),
        micro!("llama-micro-iq2_xs", 0.1),
        micro!("llama-micro-iq2_s", 0.1),
        micro!("llama-micro-iq1_s", 0.1),
        micro!("llama-micro-iq1_m", 0.1),
        micro!("qwen3-micro-q2_k", 0.1, 24),
        micro!("qwen3-micro-q3_k_s", 0.1, 24),
    ];
    for (name, file, golden, tolerance, steps) in files {
        assert_eq!(assert_follows_golden(file, golden, tolerance), steps, "{name}");
    }
}

/// KV caches kept as llama.cpp's `-ctk`/`-ctv` types in the browser: Q8_0 keys and values (turned
/// by the Walsh-Hadamard matrix), Q8_0 keys beside F16 values, and F32 (against llama.cpp without
/// flash attention, which reads an F32 cache as it is). Natively the first two are bit for bit;
/// wasm's sums add without FMA, and a key or query a last bit off can then quantize to another
/// Q8_0 step, which this random micro model magnifies: one step lands 0.021 away in the relaxed
/// build and 0.037 in the plain SIMD128 one, so the bound is 0.05 (a cache without llama.cpp's
/// Walsh-Hadamard turns is 0.083 away natively, an F16 cache 0.44).
#[wasm_bindgen_test]
fn kv_cache_types_match_llama_cpp_in_the_browser() {
    let file = include_bytes!("../fixtures/models/qwen3-micro-q8_0.gguf");
    for golden in [
        include_str!("../fixtures/golden/kv-cache/qwen3-micro-q8_0.q8_0.json"),
        include_str!("../fixtures/golden/kv-cache/qwen3-micro-q8_0.q8_0-f16.json"),
        include_str!("../fixtures/golden/kv-cache/qwen3-micro-q8_0.f32.json"),
    ] {
        assert_eq!(assert_follows_golden(file, golden, 0.05), 32);
    }
}

/// Same seed, same tokens, native or wasm: the sequence pinned by the native sampler test.
#[wasm_bindgen_test]
fn seeded_sampling_draws_the_native_sequence() {
    use inferno::sampler::{Sampler, SamplerSettings};
    let logits: Vec<f32> = (0..1000).map(|i| ((i * 7919) % 1000) as f32 / 200.0).collect();
    let mut sampler = Sampler::new(SamplerSettings { seed: 9, ..SamplerSettings::default() }).unwrap();
    let tokens: Vec<u32> = (0..12).map(|_| sampler.sample(&logits, &[], 0).unwrap().token).collect();
    assert_eq!(tokens, [321, 889, 605, 667, 235, 988, 25, 99, 926, 457, 988, 198]);
}

/// An answer runs one `next_events` call at a time; its events, in order, to its `done`.
fn run_answer(engine: &mut inferno::web::WebEngine) -> Vec<JsValue> {
    let mut events = Vec::new();
    while events.last().is_none_or(|e| get(e, "type").as_string().unwrap() != "done") {
        events.extend(js_sys::Array::from(&engine.next_events().unwrap()).iter());
    }
    events
}

/// The worker-facing API end to end: a file streamed in chunks, a chat turn streamed step by
/// step with traces, a follow-up turn that reuses the cache, branching, and clear errors.
#[wasm_bindgen_test]
fn worker_api_loads_in_chunks_chats_and_branches() {
    use inferno::web::ModelLoader;
    let bytes = include_bytes!("../fixtures/models/qwen3-micro-q4_0.gguf");
    let mut loader = ModelLoader::new(bytes.len() as f64).unwrap();
    for chunk in bytes.chunks(1 << 16) {
        loader.push_bytes(chunk).unwrap();
    }
    assert_eq!(loader.received(), bytes.len() as f64);
    assert!(loader.push_bytes(&[0]).is_err(), "more bytes than announced");
    let mut engine = loader.finish().unwrap();
    assert_eq!(get(&engine.info().unwrap(), "architecture").as_string().unwrap(), "qwen3");
    assert_eq!(engine.tokenize("Hello", None, None), vec![39, 4791], "as `inferno tokenize` splits it");
    // Special tokens: parsed as one control token by default, spelt out as text when not.
    let im_end = engine.tokenize("<|im_end|>", Some(false), None);
    assert_eq!(im_end.len(), 1, "one control token: {im_end:?}");
    assert!(engine.tokenize("<|im_end|>", Some(false), Some(false)).len() > 1);
    assert_eq!(engine.detokenize(vec![39, 4791], None).unwrap(), "Hello");
    assert_eq!(engine.detokenize(im_end.clone(), None).unwrap(), "", "control tokens are left out");
    assert_eq!(engine.detokenize(im_end, Some(true)).unwrap(), "<|im_end|>");
    let bad = engine.detokenize(vec![39, u32::MAX], None).unwrap_err();
    assert_eq!(js_sys::Reflect::get(&bad, &"kind".into()).unwrap().as_string().unwrap(), "bad_token");
    let report = engine.inspect().unwrap();
    assert_eq!(get(&get(&report, "summary"), "architecture").as_string().unwrap(), "qwen3");

    let request = |json: &str| js_sys::JSON::parse(json).unwrap();
    let run = run_answer;
    let of_type = |events: &[JsValue], kind: &str| -> Vec<JsValue> {
        events.iter().filter(|e| get(e, "type").as_string().unwrap() == kind).cloned().collect()
    };
    let first = r#"{"messages":[{"role":"user","content":"Hello"}],"settings":{"temperature":0},"context":128,"max_tokens":6,"trace_top":5}"#;
    engine.start_chat(request(first)).unwrap();
    let events = run(&mut engine);
    let prompt = get(&of_type(&events, "prepared")[0], "prompt");
    let prompt_tokens = get(&prompt, "prompt_tokens").as_f64().unwrap();
    assert_eq!(get(&prompt, "context_size").as_f64().unwrap(), 128.0);
    assert_eq!(get(&prompt, "reused").as_f64().unwrap(), 0.0);
    assert_eq!(get(&prompt, "evaluated").as_f64().unwrap(), prompt_tokens);
    let tokens = of_type(&events, "token");
    assert_eq!(tokens.len(), 6);
    let mut answer = String::new();
    for event in &tokens {
        let step = get(event, "step");
        let trace = get(&step, "trace");
        assert_eq!(get(&trace, "chosen").as_f64().unwrap(), get(&step, "token").as_f64().unwrap());
        assert_eq!(js_sys::Array::from(&get(&trace, "pieces")).length(), 5);
        assert_eq!(get(&trace, "nucleus_size").as_f64().unwrap(), 1.0, "greedy");
        answer += &get(&step, "text").as_string().unwrap();
    }
    let done = events.last().unwrap();
    assert_eq!(get(done, "finish").as_string().unwrap(), "max_tokens");
    assert_eq!(get(done, "finish_reason").as_string().unwrap(), "length");
    assert_eq!(get(&get(done, "usage"), "completion_tokens").as_f64().unwrap(), 6.0);
    assert_eq!(engine.context_used(), prompt_tokens + 6.0);

    // The next turn re-renders the whole conversation; only its new tokens are evaluated.
    let follow_up = format!(
        r#"{{"messages":[{{"role":"user","content":"Hello"}},{{"role":"assistant","content":{}}},{{"role":"user","content":"More"}}],"settings":{{"temperature":0}},"context":128,"max_tokens":4}}"#,
        serde_json::to_string(&answer).unwrap()
    );
    engine.start_chat(request(&follow_up)).unwrap();
    let events = run(&mut engine);
    let prompt = get(&of_type(&events, "prepared")[0], "prompt");
    let reused = get(&prompt, "reused").as_f64().unwrap();
    assert!(reused >= prompt_tokens - 1.0, "reused {reused} of a {prompt_tokens}-token first prompt");
    assert!(get(&prompt, "evaluated").as_f64().unwrap() < get(&prompt, "prompt_tokens").as_f64().unwrap());

    // Branching: the engine keeps the answer; a step it does not have is refused, and a branch
    // keeps the steps before its step, forces its token and goes on.
    let kind = |e: JsValue| get(&e, "kind").as_string().unwrap();
    let used = engine.context_used();
    assert_eq!(kind(engine.start_branch(request(r#"{"step":4,"token":42}"#)).unwrap_err()), "bad_request");
    engine.start_branch(request(r#"{"step":2,"token":42,"max_tokens":3,"trace_top":3}"#)).unwrap();
    let events = run(&mut engine);
    let branched = &of_type(&events, "branched")[0];
    assert_eq!(js_sys::Array::from(&get(branched, "kept")).length(), 2);
    let forced = get(&of_type(&events, "token")[0], "step");
    assert_eq!(get(&forced, "token").as_f64().unwrap(), 42.0);
    assert!(get(&forced, "forced").as_bool().unwrap());
    assert_eq!(of_type(&events, "token").len(), 1, "max_tokens counts the kept steps");
    assert_eq!(engine.context_used(), used - 1.0);

    // A file held in pieces (as files over 2 GiB are) generates the same tokens.
    // Pieces of at most 1.2 MB: the largest tensor of this 3.5 MB file is 1,155,744 bytes.
    // Fed as JS arrays, the way the worker feeds it: each chunk is copied straight into place,
    // across the piece boundaries.
    let mut pieces = ModelLoader::with_piece_limit(bytes.len() as f64, 1_200_000).unwrap();
    for chunk in bytes.chunks(40_000) {
        pieces.push(&js_sys::Uint8Array::from(chunk)).unwrap();
    }
    assert!(pieces.piece_count() >= 2, "{} pieces", pieces.piece_count());
    let mut pieced = pieces.finish().unwrap();
    let greedy_tokens = |engine: &mut inferno::web::WebEngine| -> Vec<f64> {
        engine.set_sampling(request(r#"{"temperature":0}"#)).unwrap();
        engine.prepare_tokens(vec![1, 2, 3, 4, 5], Some(32)).unwrap();
        (0..6).map(|_| get(&engine.step(0, None).unwrap(), "token").as_f64().unwrap()).collect()
    };
    assert_eq!(greedy_tokens(&mut pieced), greedy_tokens(&mut engine));

    // Attention's precision: fast unless set, exact on request, nothing else.
    assert_eq!(engine.attention_precision(), "fast");
    engine.set_attention_precision("exact").unwrap();
    assert_eq!(engine.attention_precision(), "exact");
    assert_eq!(kind(engine.set_attention_precision("half").err().unwrap()), "bad_request");
    assert_eq!(engine.attention_precision(), "exact");

    // KV cache types: F16 unless set; a Q8_0 cache takes 34 bytes per 32 values of F16's 64 and
    // still generates; anything else is a bad_request that changes nothing.
    assert_eq!(engine.cache_types(), ["f16", "f16"]);
    engine.open_session(Some(64)).unwrap();
    let f16_bytes = engine.cache_bytes();
    engine.set_cache_types("q8_0", "q8_0").unwrap();
    assert_eq!(engine.cache_types(), ["q8_0", "q8_0"]);
    engine.open_session(Some(64)).unwrap();
    assert_eq!(engine.cache_bytes(), f16_bytes / 64.0 * 34.0);
    assert_eq!(greedy_tokens(&mut engine).len(), 6);
    assert_eq!(kind(engine.set_cache_types("q4_0", "f16").err().unwrap()), "bad_request");
    assert_eq!(engine.cache_types(), ["q8_0", "q8_0"]);
    engine.set_cache_types("f16", "f16").unwrap();

    // Errors are typed JS errors.
    assert_eq!(kind(ModelLoader::new(1e15).err().unwrap()), "too_large");
    #[cfg(target_pointer_width = "32")]
    {
        // Past what a 4 GiB memory can hold with room for inference: refused before any
        // allocation.
        assert_eq!(kind(ModelLoader::new(4.0e9).err().unwrap()), "too_large");
        // Over 2 GiB a file is planned in pieces from its header; nothing is reserved before
        // that, and a header whose tensors cannot be split into 2 GiB pieces is refused.
        let mut three_gb = ModelLoader::new(3.0e9).unwrap();
        assert_eq!(kind(three_gb.push_bytes(&bytes[..1 << 20]).err().unwrap()), "too_large");
    }
    let mut bad = ModelLoader::new(8.0).unwrap();
    bad.push_bytes(b"GGUFxxxx").unwrap();
    assert!(bad.finish().is_err());
    let bad_request =
        engine.start_chat(request(r#"{"messages":[{"role":"robot","content":"x"}]}"#)).err().unwrap();
    assert_eq!(kind(bad_request), "chat_template");
    let bad_settings = r#"{"messages":[{"role":"user","content":"x"}],"settings":{"top_p":0}}"#;
    assert_eq!(kind(engine.start_chat(request(bad_settings)).err().unwrap()), "sampler");

    // A fixed token prefill (the benchmark page's path), and token ids checked against the vocabulary.
    engine.reset();
    let prepared = engine.prepare_tokens(vec![1, 2, 3, 4], Some(32)).unwrap();
    assert_eq!(get(&prepared, "evaluated").as_f64().unwrap(), 4.0);
    assert_eq!(get(&prepared, "context_size").as_f64().unwrap(), 32.0);
    assert_eq!(kind(engine.prepare_tokens(vec![1, 1 << 30], None).err().unwrap()), "bad_token");
    let recommended = get(&engine.info().unwrap(), "recommended_sampling");
    assert!((get(&recommended, "temperature").as_f64().unwrap() - 0.8).abs() < 1e-6, "llama.cpp's default");
}

/// The longest operator chains a chat template may hold (`MAX_TAG_OPERATORS` links: `~`,
/// `not`, filters, attributes, subscripts) compile and render on the browser's stack; longer
/// ones are refused before minijinja's compiler recurses through them.
#[wasm_bindgen_test]
fn the_longest_template_chains_allowed_fit_the_browsers_stack() {
    use inferno::chat::{ChatTemplate, MAX_TAG_OPERATORS, RenderOptions, TemplateSource};
    let links = MAX_TAG_OPERATORS;
    let chains = [
        format!("{{{{ 'a'{} }}}}", " ~ 'a'".repeat(links)),
        format!("{{{{ {}1 }}}}", "not ".repeat(links)),
        format!("{{{{ 'a'{} }}}}", "|trim".repeat(links)),
        format!("{{{{ x{} }}}}", ".a".repeat(links)),
        format!("{{{{ x{} }}}}", "[0]".repeat(links)),
    ];
    let options = RenderOptions { add_generation_prompt: true, ..RenderOptions::default() };
    for text in &chains {
        let template = ChatTemplate::new(text, TemplateSource::File, String::new(), String::new()).unwrap();
        let _ = template.render(&[], options); // undefined `x` may fail to render; it must not trap
    }
    let rendered = ChatTemplate::new(&chains[0], TemplateSource::File, String::new(), String::new())
        .unwrap()
        .render(&[], options)
        .unwrap();
    assert_eq!(rendered.len(), links + 1);
    let too_long = format!("{{{{ 'a'{} }}}}", " ~ 'a'".repeat(links + 1));
    assert!(ChatTemplate::new(&too_long, TemplateSource::File, String::new(), String::new()).is_err());
}

#[wasm_bindgen_test]
fn files_over_4_gib_go_to_the_64_bit_build_where_the_browser_has_one() {
    let error_message = |e: JsValue| {
        assert_eq!(get(&e, "kind"), "too_large");
        get(&e, "message").as_string().unwrap()
    };
    assert_eq!(memory_for_model(1e9, false).unwrap(), "wasm32");
    assert_eq!(memory_for_model(1e9, true).unwrap(), "wasm32", "small files stay on wasm32");
    assert_eq!(memory_for_model(5e9, true).unwrap(), "memory64");
    let without = error_message(memory_for_model(5e9, false).unwrap_err());
    assert!(without.contains("64-bit memory") && without.contains("4.66 GiB"), "{without}");
    let beyond = error_message(memory_for_model(20e9, true).unwrap_err());
    assert!(beyond.contains("16 GiB"), "{beyond}");
    assert!(memory_for_model(-1.0, true).is_err());

    // The inspector's "can it chat" line says the same (the header of a model that runs, as if
    // its file were 5 GB long).
    let bytes = include_bytes!("../fixtures/models/qwen3-micro-q4_0.gguf");
    // A refusal for memory alone is marked `too_large` (the worker may then find the GPU).
    let runs = |size: f64, memory64: bool| {
        let outcome = inspect_prefix(bytes, size, memory64).expect("the header parses");
        let runs = get(&get(&outcome, "report"), "runs");
        let flag = |name: &str| get(&runs, name).as_bool().unwrap();
        (flag("ok"), flag("too_large"), get(&runs, "reason").as_string().unwrap_or_default())
    };
    assert_eq!(runs(bytes.len() as f64, false), (true, false, String::new()));
    assert_eq!(runs(5e9, true), (true, false, String::new()));
    let (ok, too_large, reason) = runs(5e9, false);
    assert!(!ok && too_large && reason.contains("64-bit memory"), "{reason}");
}

/// The micro Gemma 3 projector encodes a picture in the browser (SIMD128 kernels, which sum in
/// their own order) within 1e-3 of llama.cpp mtmd's embeddings, relative to their largest
/// magnitude, as the issue bounds it (natively, where the kernels keep llama.cpp's orders, they
/// are equal: tests/vision.rs).
#[wasm_bindgen_test]
fn the_image_encoder_matches_llama_cpp_mtmd_in_the_browser() {
    let worst = image_embeddings_error(
        include_bytes!("../fixtures/models/clip-gemma3-micro.gguf"),
        include_bytes!("../fixtures/golden/clip-gemma3-micro.noise-61x47.f32"),
    );
    web_sys::console::log_1(
        &format!("Gemma 3 image embeddings in the browser: {worst:.2e} from mtmd's").into(),
    );
    assert!(worst < 1e-3, "{worst}");
}

/// The micro SmolVLM projector too: the picture cut into four tiles and squeezed whole (Lanczos,
/// its sines from Rust's libm here), five squares encoded, within the same bound.
#[wasm_bindgen_test]
fn smolvlm_tiles_match_llama_cpp_mtmd_in_the_browser() {
    let worst = image_embeddings_error(
        include_bytes!("../fixtures/models/clip-idefics3-micro.gguf"),
        include_bytes!("../fixtures/golden/clip-idefics3-micro.noise-61x47.f32"),
    );
    web_sys::console::log_1(
        &format!("SmolVLM image embeddings in the browser: {worst:.2e} from mtmd's").into(),
    );
    assert!(worst < 1e-3, "{worst}");
}

/// And LFM2-VL's: the picture resized to 160 × 128 (bilinear), its positions resized to the
/// 20 × 16 grid, the pixel unshuffle and its feed-forward.
#[wasm_bindgen_test]
fn lfm2_vl_matches_llama_cpp_mtmd_in_the_browser() {
    let worst = image_embeddings_error(
        include_bytes!("../fixtures/models/clip-lfm2-micro.gguf"),
        include_bytes!("../fixtures/golden/clip-lfm2-micro.noise-61x47.f32"),
    );
    web_sys::console::log_1(
        &format!("LFM2-VL image embeddings in the browser: {worst:.2e} from mtmd's").into(),
    );
    assert!(worst < 1e-3, "{worst}");
}

/// And Gemma 4's: the picture fitted to 240 × 192 (bicubic), 720 patches through RMS norms,
/// the 2D RoPE, attention at scale 1, the gated quick GELU and the clamped linears, pooled 3 × 3.
#[wasm_bindgen_test]
fn gemma4_matches_llama_cpp_mtmd_in_the_browser() {
    let worst = image_embeddings_error(
        include_bytes!("../fixtures/models/clip-gemma4v-micro.gguf"),
        include_bytes!("../fixtures/golden/clip-gemma4v-micro.noise-61x47.f32"),
    );
    web_sys::console::log_1(
        &format!("Gemma 4 image embeddings in the browser: {worst:.2e} from mtmd's").into(),
    );
    assert!(worst < 1e-3, "{worst}");
}

/// And Qwen3.5's: the picture fitted to 64 × 48 (bicubic), 48 patches in 2 × 2 blocks through
/// vision M-RoPE and llama.cpp's one-pass attention (fewer than 64 queries), merged to 12 rows.
#[wasm_bindgen_test]
fn qwen35_matches_llama_cpp_mtmd_in_the_browser() {
    let worst = image_embeddings_error(
        include_bytes!("../fixtures/models/clip-qwen3vl-micro.gguf"),
        include_bytes!("../fixtures/golden/clip-qwen3vl-micro.noise-61x47.f32"),
    );
    web_sys::console::log_1(
        &format!("Qwen3.5 image embeddings in the browser: {worst:.2e} from mtmd's").into(),
    );
    assert!(worst < 1e-3, "{worst}");
}

/// And Qwen2.5-VL's: the picture fitted to 112 × 84 in 14-pixel patches, RMS norms, the gated
/// SiLU feed-forward (60 wide: ggml's SwiGLU rounds each row's last 4 through libm, here Rust's)
/// and its window order (the 4 × 3 blocks fit in one window of 4 × 4).
#[wasm_bindgen_test]
fn qwen2_5_vl_matches_llama_cpp_mtmd_in_the_browser() {
    let worst = image_embeddings_error(
        include_bytes!("../fixtures/models/clip-qwen25vl-micro.gguf"),
        include_bytes!("../fixtures/golden/clip-qwen25vl-micro.noise-61x47.f32"),
    );
    web_sys::console::log_1(
        &format!("Qwen2.5-VL image embeddings in the browser: {worst:.2e} from mtmd's").into(),
    );
    assert!(worst < 1e-3, "{worst}");
}

/// The 61 × 47 noise picture's embeddings by `mmproj`, against mtmd's (`golden`): the largest
/// difference relative to the largest magnitude.
fn image_embeddings_error(mmproj: &[u8], golden: &[u8]) -> f32 {
    use inferno::model::ModelBytes;
    use inferno::vision::{RgbImage, VisionEncoder};
    let encoder = VisionEncoder::load(ModelBytes::from(mmproj.to_vec())).unwrap();
    let pixels = include_bytes!("../fixtures/images/noise-61x47.rgb").to_vec();
    let embeddings = encoder.encode(&RgbImage::new(61, 47, pixels).unwrap()).unwrap();
    let golden: Vec<f32> =
        golden.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    assert_eq!(embeddings.values.len(), golden.len());
    let scale = golden.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    embeddings.values.iter().zip(&golden).fold(0.0f32, |m, (a, b)| m.max((a - b).abs())) / scale
}

/// The worker checks a picture file's claimed size before the browser decodes it: a PNG's
/// size read, a 1 KB file that claims 20,000 × 20,000 pixels refused as too large, and a file
/// of no picture format refused as a bad picture.
#[wasm_bindgen_test]
fn picture_headers_are_checked_before_decoding() {
    let png = include_bytes!("../fixtures/images/tower-90x250.png");
    let header = inferno::web::picture_header(png).unwrap();
    assert_eq!(get(&header, "format").as_string().unwrap(), "png");
    assert_eq!((get(&header, "width").as_f64(), get(&header, "height").as_f64()), (Some(90.0), Some(250.0)));
    let mut huge = png[..33].to_vec();
    huge[16..24].copy_from_slice(&[0, 0, 0x4E, 0x20, 0, 0, 0x4E, 0x20]);
    huge.resize(1024, 0);
    let kind = |e: JsValue| get(&e, "kind").as_string().unwrap();
    assert_eq!(kind(inferno::web::picture_header(&huge).unwrap_err()), "image_too_large");
    assert_eq!(kind(inferno::web::picture_header(b"GIF8").unwrap_err()), "bad_image");
}

/// The micro Gemma 3 projector re-made to project to `width` (its `mm.input_projection.weight`
/// replaced by a `[width, 32]` F16 one), for a micro model of that width.
fn micro_projector_of_width(width: usize) -> Vec<u8> {
    let bytes = include_bytes!("../fixtures/models/clip-gemma3-micro.gguf");
    let file = inferno::gguf::Gguf::parse(bytes).unwrap();
    let mut writer = GgufWriter::new();
    for (key, value) in file.metadata().iter() {
        writer = writer.kv(key, value.clone());
    }
    for tensor in &file.header.tensors {
        writer = if tensor.name == "mm.input_projection.weight" {
            let cols = tensor.dims[1] as usize;
            let data: Vec<u8> = (0..width * cols)
                .flat_map(|i| {
                    half::f16::from_f32(((i * 7919 % 997) as f32 / 997.0 - 0.5) * 0.2).to_le_bytes()
                })
                .collect();
            writer.tensor(&tensor.name, &[width as u64, cols as u64], GgmlType::F16, data)
        } else {
            writer.tensor(&tensor.name, &tensor.dims, tensor.ggml_type, file.tensor_data(tensor).to_vec())
        };
    }
    writer.to_bytes()
}

/// The 61 × 47 noise picture added as the worker adds one: laid out, each square encoded, added.
fn add_picture(engine: &mut inferno::web::WebEngine, rgba: &js_sys::Uint8Array) {
    let mut left = engine.add_image(61, 47, rgba).unwrap();
    while left > 0 {
        left = engine.encode_square().unwrap();
    }
    engine.finish_image().unwrap();
}

/// Pictures through the worker's engine API: a projector attached beside the model (refused for
/// another model's width, the engine going on), a picture added as a canvas gives its pixels
/// (RGBA) and encoded square by square (`add_image`, `encode_square`, `finish_image`), a chat
/// whose message holds `<__media__>` where it goes, its 16 rows counted in the prompt; a
/// follow-up question with the same picture does not encode it again and evaluates only its
/// new tokens.
#[wasm_bindgen_test]
fn worker_api_attaches_a_projector_and_chats_about_a_picture() {
    use inferno::web::ModelLoader;
    let bytes = include_bytes!("../fixtures/models/qwen3-micro-q4_0.gguf");
    let mut loader = ModelLoader::new(bytes.len() as f64).unwrap();
    loader.push_bytes(bytes).unwrap();
    let mut engine = loader.finish().unwrap();
    let kind = |e: JsValue| get(&e, "kind").as_string().unwrap();
    let request = |json: &str| js_sys::JSON::parse(json).unwrap();
    let run = run_answer;
    let mmproj = include_bytes!("../fixtures/models/clip-gemma3-micro.gguf").to_vec();
    assert_eq!(kind(engine.attach_projector(mmproj, None, None).unwrap_err()), "mmproj_mismatch");
    let rgb = include_bytes!("../fixtures/images/noise-61x47.rgb");
    let rgba: Vec<u8> = rgb.chunks_exact(3).flat_map(|p| [p[0], p[1], p[2], 255]).collect();
    let rgba = js_sys::Uint8Array::from(&rgba[..]);
    let ask = r#"{"messages":[{"role":"user","content":"<__media__>What is this?"}],"settings":{"temperature":0},"context":128,"max_tokens":3}"#;
    assert_eq!(kind(engine.add_image(61, 47, &rgba).unwrap_err()), "no_mmproj");

    let facts = engine.attach_projector(micro_projector_of_width(256), None, None).unwrap();
    assert_eq!(get(&facts, "output_width").as_f64().unwrap(), 256.0);
    assert_eq!(kind(engine.add_image(61, 47, &rgba.subarray(4, rgba.length())).unwrap_err()), "bad_image");
    assert_eq!(
        kind(engine.start_chat(request(ask)).unwrap_err()),
        "bad_request",
        "a marker without a picture"
    );
    assert_eq!(kind(engine.encode_square().unwrap_err()), "bad_request", "no picture begun");
    assert_eq!(engine.add_image(61, 47, &rgba).unwrap(), 1, "one square to encode");
    assert_eq!(engine.images_encoded(), 0, "laid out, not encoded yet");
    assert_eq!(engine.encode_square().unwrap(), 0);
    assert_eq!(engine.finish_image().unwrap(), 16, "the picture's rows");
    assert_eq!(engine.images_encoded(), 1);
    assert_eq!(kind(engine.finish_image().unwrap_err()), "bad_request", "added once");
    // A picture added for a request that then failed is not carried into the next one.
    assert_eq!(engine.add_image(61, 47, &rgba).unwrap(), 0, "found by its hash: nothing to encode");
    engine.finish_image().unwrap();
    engine.clear_images();
    add_picture(&mut engine, &rgba);
    assert_eq!(engine.images_encoded(), 1, "found again by its hash");
    engine.start_chat(request(ask)).unwrap();
    let events = run(&mut engine);
    let done = events.last().unwrap();
    let first_prompt = get(&get(done, "usage"), "prompt_tokens").as_f64().unwrap();
    let text_only =
        engine.tokenize("<|im_start|>user\nWhat is this?<|im_end|>\n<|im_start|>assistant\n", None, None);
    assert!(
        first_prompt >= text_only.len() as f64 + 16.0,
        "{first_prompt} tokens: the picture's 16 rows and the text"
    );
    assert_eq!(engine.images_encoded(), 1);

    let answer: String = events
        .iter()
        .filter(|e| get(e, "type").as_string().unwrap() == "token")
        .map(|e| get(&get(e, "step"), "text").as_string().unwrap())
        .collect();
    let follow_up = format!(
        r#"{{"messages":[{{"role":"user","content":"<__media__>What is this?"}},{{"role":"assistant","content":{}}},{{"role":"user","content":"And?"}}],"settings":{{"temperature":0}},"context":128,"max_tokens":2}}"#,
        serde_json::to_string(&answer).unwrap()
    );
    add_picture(&mut engine, &rgba);
    engine.start_chat(request(&follow_up)).unwrap();
    let events = run(&mut engine);
    let prompt = get(
        &events.iter().find(|e| get(e, "type").as_string().unwrap() == "prepared").unwrap().clone(),
        "prompt",
    );
    assert!(get(&prompt, "reused").as_f64().unwrap() >= first_prompt - 1.0);
    assert_eq!(engine.images_encoded(), 1, "the same picture is not encoded again");
}
