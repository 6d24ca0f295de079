//! The native CLI as a user runs it: exit codes, JSON on stdout, errors on stderr.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use common::fixture;
use serde_json::Value as Json;

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

fn micro_q4_0() -> (String, Json) {
    let golden: Json =
        serde_json::from_slice(&std::fs::read(fixture("golden/qwen3-micro-q4_0.json")).unwrap()).unwrap();
    (fixture("models/qwen3-micro-q4_0.gguf").to_str().unwrap().to_owned(), golden)
}

/// JSON lines: one object per generated token, then a summary.
fn json_lines(out: &Output) -> Vec<Json> {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn greedy_generate_reproduces_llama_cpp_and_traces_each_step() {
    let (model, golden) = micro_q4_0();
    let capital = &golden["prompts"]["capital"];
    let out = inferno(&[
        "generate",
        &model,
        "--prompt",
        capital["prompt"].as_str().unwrap(),
        "-n",
        "24",
        "--temp",
        "0",
        "--ignore-eos",
        "--trace",
        "5",
        "--json",
    ]);
    let lines = json_lines(&out);
    let (summary, tokens) = lines.split_last().unwrap();
    // Equal to llama.cpp's continuation until, at most, a near-tie (its token within 0.1 of ours).
    let expected = capital["generated_ids"].as_array().unwrap();
    let same = tokens.iter().zip(expected).take_while(|(t, e)| &t["token"] == *e).count();
    assert!(same >= 16, "only {same} tokens agree");
    if let Some(token) = tokens.get(same) {
        let candidates = token["trace"]["candidates"].as_array().unwrap();
        let logit =
            |id: &Json| candidates.iter().find(|c| &c["id"] == id).map(|c| c["logit"].as_f64().unwrap());
        let margin = logit(&token["token"]).unwrap() - logit(&expected[same]).unwrap_or(f64::NEG_INFINITY);
        assert!(margin < 0.1, "parted at step {same} by {margin}");
    }
    for token in tokens {
        let trace = &token["trace"];
        assert_eq!(trace["candidates"].as_array().unwrap().len(), 5);
        assert_eq!(trace["pieces"].as_array().unwrap().len(), 5);
        assert_eq!(trace["chosen"], token["token"]);
        assert_eq!(trace["nucleus_size"], 1, "greedy keeps one token");
    }
    assert_eq!(summary["generated"], 24);
    assert_eq!(summary["stop"], "max_tokens");
    assert_eq!(summary["prompt_tokens"], capital["prompt_ids"].as_array().unwrap().len());
}

#[test]
fn sampled_generate_is_reproducible_for_a_seed_and_stops_at_end_of_generation() {
    let (model, _) = micro_q4_0();
    let run = |seed: &str| {
        let out = inferno(&[
            "generate", &model, "--prompt", "Hello", "--chat", "-n", "16", "--seed", seed, "--json",
        ]);
        let lines = json_lines(&out);
        let tokens: Vec<Json> = lines[..lines.len() - 1].iter().map(|t| t["token"].clone()).collect();
        (tokens, lines.last().unwrap().clone())
    };
    let (first, summary) = run("11");
    assert_eq!(run("11").0, first);
    assert_ne!(run("12").0, first);
    // The random model rarely ends on its own; when it does, the last token says so.
    if summary["stop"] == "end" {
        assert!(first.len() <= 16);
    } else {
        assert_eq!(summary["stop"], "max_tokens");
    }
}

#[test]
fn generate_ends_at_the_token_that_completes_a_stop_string_and_prints_the_text_before_it() {
    let (model, _) = micro_q4_0();
    let args = [
        "generate",
        &model,
        "--prompt",
        "The capital of France is",
        "-n",
        "24",
        "--temp",
        "0",
        "--ignore-eos",
    ];
    let lines = json_lines(&inferno(&[&args[..], &["--json"]].concat()));
    let texts: Vec<&str> = lines[..lines.len() - 1].iter().map(|l| l["text"].as_str().unwrap()).collect();
    // Two characters across the middle steps' texts; it may appear earlier too.
    let k = (texts.len() / 2..texts.len() - 1)
        .find(|&k| !texts[k].is_empty() && !texts[k + 1].is_empty())
        .unwrap();
    let stop = format!("{}{}", texts[k].chars().last().unwrap(), texts[k + 1].chars().next().unwrap());
    let whole = texts.concat();
    let at = whole.find(&stop).unwrap();
    let mut end = 0;
    let completing = texts.iter().position(|t| {
        end += t.len();
        end >= at + stop.len()
    });
    let stopped =
        json_lines(&inferno(&[&args[..], &["--json", "--stop", "never seen", "--stop", &stop]].concat()));
    let summary = stopped.last().unwrap();
    assert_eq!(summary["stop"], "stop_string");
    assert_eq!(summary["stop_string"], stop.as_str());
    assert_eq!(summary["generated"], completing.unwrap() + 1, "decoding ended at the completing token");
    assert_eq!(summary["content"], &whole[..at]);
    // Text mode prints the answer up to the stop string.
    let out = inferno(&[&args[..], &["--stop", &stop]].concat());
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{}\n", &whole[..at]));
}

#[test]
fn logits_after_the_prompt_match_llama_cpp() {
    let (model, golden) = micro_q4_0();
    let capital = &golden["prompts"]["capital"];
    let ids: Vec<String> = capital["prompt_ids"].as_array().unwrap().iter().map(|v| v.to_string()).collect();
    let out = stdout_json(&inferno(&["logits", &model, "--tokens", &ids.join(","), "--json"]));
    let positions = out.as_array().unwrap();
    assert_eq!(positions.len(), ids.len());
    let last = positions.last().unwrap()["top"].as_array().unwrap();
    assert_eq!(last.len(), 20);
    for (ours, theirs) in last.iter().zip(capital["steps"][0]["top"].as_array().unwrap()) {
        assert_eq!(ours["id"], theirs["id"]);
        let delta = (ours["logit"].as_f64().unwrap() - theirs["logit"].as_f64().unwrap()).abs();
        assert!(delta < 0.1, "{ours} vs {theirs}");
    }
}

/// `logits --golden` follows llama.cpp's golden run of a file (every prompt, every step) and
/// says how close it came; it fails when another file's golden is far from what it computes.
#[test]
fn logits_follow_a_golden_file_and_fail_outside_its_tolerance() {
    let model = fixture("models/qwen3-micro-q8_0.gguf").to_str().unwrap().to_owned();
    let golden = fixture("golden/qwen3-micro-q8_0.json").to_str().unwrap().to_owned();
    let report =
        stdout_json(&inferno(&["logits", &model, "--golden", &golden, "--tolerance", "0.02", "--json"]));
    let all = &report["all"];
    // Three prompts, eight golden steps each (after the prompt, then after generated tokens).
    assert_eq!(all["steps"], 24, "{report}");
    assert_eq!(all["top1_agree"], 24, "{report}");
    assert!(all["max_delta"].as_f64().unwrap() <= 0.02, "{report}");
    assert_eq!(report["within"], true);
    assert_eq!(report["device"], "CPU");

    // The Q4_0 file's golden against the Q8_0 file: its logits differ by more than 0.02.
    let other = fixture("golden/qwen3-micro-q4_0.json").to_str().unwrap().to_owned();
    let out = inferno(&["logits", &model, "--golden", &other, "--tolerance", "0.02", "--json"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("inferno: ") && stderr.contains("outside the tolerance 0.02"), "{stderr}");
    let report: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["within"], false);
    assert!(report["all"]["max_delta"].as_f64().unwrap() > 0.02);

    // A file that is no golden is an error that names it, not a panic.
    let out = inferno(&["logits", &model, "--golden", &model]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("qwen3-micro-q8_0.gguf"));
}

#[test]
fn attention_precision_is_exact_for_logits_and_fast_when_asked_within_llama_cpps_own_spread() {
    // `logits` is exact unless told: llama.cpp's flash attention bit for bit. `fast` keeps the
    // one-pass kernel's sums in f32, as far from llama.cpp's flash attention as llama.cpp's own
    // other CPU attention is (no flash attention: 0.059 on qwen3-micro-q8_0, 0.082 on
    // llama-micro-iq4_xs, 0.67 on SmolLM2; scripts/make_goldens.py --no-flash-attn), so the
    // bound is 0.1, with near ties allowed to go either way.
    for name in ["qwen3-micro-q8_0", "gemma2-micro-q8_0", "gpt-oss-micro-q8_0", "llama-micro-iq4_xs"] {
        let model = fixture(&format!("models/{name}.gguf")).to_str().unwrap().to_owned();
        let golden = fixture(&format!("golden/{name}.json")).to_str().unwrap().to_owned();
        let run = |extra: &[&str]| {
            let args =
                [&["logits", model.as_str(), "--golden", &golden, "--tolerance", "0.1", "--json"], extra]
                    .concat();
            let out = inferno(&args);
            assert!(out.status.success(), "{name} {extra:?}: {}", String::from_utf8_lossy(&out.stderr));
            stdout_json(&out)
        };
        assert_eq!(run(&[])["all"]["max_delta"], 0.0, "{name}: logits are exact by default");
        assert_eq!(run(&["--precision", "exact"])["all"]["max_delta"], 0.0);
        let fast = run(&["--precision", "fast"]);
        let delta = fast["all"]["max_delta"].as_f64().unwrap();
        assert!(delta > 0.0 && delta <= 0.1, "{name}: fast is {delta} from llama.cpp");
        assert_eq!(fast["all"]["misses"].as_array().unwrap().len(), 0, "{fast}");
    }
    let out = inferno(&["logits", "x.gguf", "--tokens", "1", "--precision", "half"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--precision takes exact or fast"));
}

#[test]
fn cache_types_follow_llama_cpps_own_ctk_and_ctv() {
    // llama.cpp with `-ctk q8_0 -ctv q8_0`, bit for bit; the same file's F16 golden is not.
    let model = fixture("models/qwen3-micro-q8_0.gguf").to_str().unwrap().to_owned();
    let golden = fixture("golden/kv-cache/qwen3-micro-q8_0.q8_0.json").to_str().unwrap().to_owned();
    let run = |types: &[&str]| {
        let args = [&["logits", model.as_str(), "--golden", &golden, "--json"], types].concat();
        let out = inferno(&args);
        assert!(out.status.success(), "{types:?}: {}", String::from_utf8_lossy(&out.stderr));
        stdout_json(&out)["all"]["max_delta"].as_f64().unwrap()
    };
    assert_eq!(run(&["--cache-type-k", "q8_0", "--cache-type-v", "q8_0"]), 0.0);
    assert!(run(&[]) > 0.01, "an F16 cache differs from llama.cpp's Q8_0 one");
    let out = inferno(&["logits", "x.gguf", "--tokens", "1", "--cache-type-v", "q4_0"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--cache-type-v takes f16, q8_0 or f32, not \"q4_0\"")
    );
}

#[test]
fn bench_reports_positive_speeds() {
    let (model, _) = micro_q4_0();
    for threads in ["1", "2"] {
        let args =
            ["bench", &model, "--pp", "16", "--tg", "4", "--runs", "1", "--threads", threads, "--json"];
        let out = stdout_json(&inferno(&args));
        assert!(out["prefill_tok_s"].as_f64().unwrap() > 0.0, "{out}");
        assert!(out["decode_tok_s"].as_f64().unwrap() > 0.0, "{out}");
        assert_eq!(out["threads"].to_string(), threads);
    }
}

/// `--device gpu` (the native suite builds with the GPU backend; lavapipe here): the greedy
/// answer follows llama.cpp's, and bench prints the adapter and both bandwidths. A device
/// that does not exist is an error; without the backend, `gpu` says how to build one.
#[test]
fn the_gpu_generates_and_benchmarks_from_the_command_line() {
    let (model, golden) = micro_q4_0();
    let capital = &golden["prompts"]["capital"];
    let prompt = capital["prompt"].as_str().unwrap();
    let args =
        ["generate", &model, "--prompt", prompt, "-n", "6", "--temp", "0", "--device", "gpu", "--json"];
    let out = inferno(&args);
    if cfg!(not(feature = "gpu")) {
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("--features gpu"));
        return;
    }
    let lines = json_lines(&out);
    let expected = capital["generated_ids"].as_array().unwrap();
    let (_, tokens) = lines.split_last().unwrap();
    let same = tokens.iter().zip(expected).take_while(|(t, e)| &t["token"] == *e).count();
    assert!(same >= 4, "only {same} of 6 tokens agree with llama.cpp");
    let bench = ["bench", &model, "--pp", "8", "--tg", "2", "--runs", "1", "--device", "gpu", "--json"];
    let out = stdout_json(&inferno(&bench));
    let gpu = &out["gpu"];
    assert!(!gpu["adapter"].as_str().unwrap().is_empty(), "{out}");
    for key in ["copy_gb_s", "decode_weight_gb_s"] {
        assert!(gpu[key].as_f64().unwrap() > 0.0, "{key}: {out}");
    }
    assert!(out["decode_tok_s"].as_f64().unwrap() > 0.0, "{out}");
    let out = inferno(&["bench", &model, "--device", "tpu"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--device takes cpu, gpu, gpu-q8 or gpu-float"));
}

/// Threads split matmul rows, attention heads and a batch's rows in the element-wise steps
/// (norms, SwiGLU, quantization), never a sum: the real SmolLM2 file (whose larger matrices are
/// split) gives the same logits, to the bit, on 1 and 3 threads.
#[test]
fn thread_count_does_not_change_the_logits() {
    // 70 tokens: the prefill crosses the 64-query attention kernel switch.
    let tokens: Vec<u32> = (0..70).map(|i| 100 + i * 37).collect();
    let [one, three] = logits_on_threads("SmolLM2-135M-Instruct.Q4_1.gguf", &tokens, ["1", "3"]);
    assert_eq!(one, three);
    assert!(one.to_string().len() > 1000, "{one}");
}

/// The same for a mixture of experts: threads split each expert's rows, and the experts' outputs
/// are added in one order whatever the thread count.
#[test]
fn thread_count_does_not_change_the_logits_of_experts() {
    let tokens: Vec<u32> = (0..40).map(|i| 100 + i * 97).collect();
    let [one, two] = logits_on_threads("olmoe-micro-q8_0.gguf", &tokens, ["1", "2"]);
    assert_eq!(one, two);
    assert!(one.to_string().len() > 500, "{one}");
}

/// `inferno logits --json` of `tokens` on `file`, once per thread count.
fn logits_on_threads<const N: usize>(file: &str, tokens: &[u32], threads: [&str; N]) -> [Json; N] {
    let model = common::model(file);
    let model = model.to_str().unwrap();
    let tokens: Vec<String> = tokens.iter().map(u32::to_string).collect();
    let tokens = tokens.join(",");
    threads.map(|threads| {
        stdout_json(&inferno(&[
            "logits",
            model,
            "--tokens",
            &tokens,
            "--top",
            "8",
            "--threads",
            threads,
            "--json",
        ]))
    })
}

#[test]
fn generation_options_are_checked() {
    let (model, _) = micro_q4_0();
    let cases: [&[&str]; 6] = [
        &["bench", &model, "--threads", "0"],
        &["generate", &model],
        &["generate", &model, "--prompt", "x", "--temp", "warm"],
        &["generate", &model, "--prompt", "x", "--top-p", "0"],
        &["logits", &model, "--tokens", "1,x"],
        &["logits", &model, "--tokens", "99999999"],
    ];
    for args in cases {
        let out = inferno(args);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("inferno: "), "{args:?}");
    }
}

/// Metadata is untrusted: an escape sequence in a key or a value (here ESC[2J, which clears a
/// terminal, and a carriage return) reaches the terminal written out, never raw.
#[test]
fn inspect_never_prints_the_files_control_characters() {
    use inferno::gguf::Value;
    use inferno::gguf::writer::GgufWriter;
    let bytes = GgufWriter::new()
        .kv("general.architecture", Value::String("llama".into()))
        .kv("general.name", Value::String("evil\u{1b}[2J\rname".into()))
        .kv("evil.\u{1b}[31mkey", Value::U32(1))
        .to_bytes();
    let path = std::env::temp_dir().join(format!("inferno-cli-escapes-{}.gguf", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    let out = inferno(&["inspect", path.to_str().unwrap()]);
    std::fs::remove_file(&path).unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\u{1b}') && !text.contains('\r'), "raw control characters in:\n{text}");
    assert!(text.contains("evil\\u{1b}[2J\\u{d}name"), "{text}");
    assert!(text.contains("evil.\\u{1b}[31mkey"), "{text}");
    // Whether it can chat, and why not: this header has no tensors at all.
    assert!(text.contains("chat             no: model tensors: `token_embd.weight` is missing"), "{text}");
}

/// `--json-schema` constrains the answer: at temperature 1, whatever the seed, the micro model
/// (random weights, no idea of JSON) answers with an object the schema accepts, and the last
/// JSON line carries it whole. A schema the engine cannot use is an error before any token.
#[test]
fn generate_follows_a_json_schema_whatever_the_seed() {
    let (model, _) = micro_q4_0();
    let dir = std::env::temp_dir().join(format!("inferno-cli-schema-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let schema = dir.join("schema.json");
    std::fs::write(
        &schema,
        r#"{"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer"}},
            "required": ["ok", "n"], "additionalProperties": false}"#,
    )
    .unwrap();
    for seed in ["1", "2", "3"] {
        let out = inferno(&[
            "generate",
            &model,
            "--prompt",
            "Answer in JSON:",
            "-n",
            "200",
            "--temp",
            "1",
            "--seed",
            seed,
            "--json-schema",
            schema.to_str().unwrap(),
            "--json",
        ]);
        let lines = json_lines(&out);
        let summary = lines.last().unwrap();
        assert_eq!(summary["stop"], "end", "seed {seed}: {summary}");
        let content = summary["content"].as_str().unwrap();
        let value: Json =
            serde_json::from_str(content).unwrap_or_else(|e| panic!("seed {seed}: {e}: {content}"));
        assert!(value["ok"].is_boolean() && value["n"].is_i64(), "seed {seed}: {content}");
        assert_eq!(value.as_object().unwrap().len(), 2, "seed {seed}: {content}");
    }
    // A keyword the engine cannot enforce: left out with a warning, or with --strict refused.
    std::fs::write(&schema, r#"{"type": "array", "items": {"type": "integer"}, "uniqueItems": true}"#)
        .unwrap();
    let args = ["generate", &model, "--prompt", "x", "-n", "40", "--json-schema", schema.to_str().unwrap()];
    let out = inferno(&[&args[..], &["--json"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(stderr.contains("not fully enforced") && stderr.contains("uniqueItems"), "{stderr}");
    let summary = json_lines(&out).pop().unwrap();
    assert!(summary["warnings"][0].as_str().unwrap().contains("uniqueItems"), "{summary}");
    let out = inferno(&[&args[..], &["--strict"]].concat());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("uniqueItems"));
    std::fs::write(&schema, r#"{"type": "object", "required": 7}"#).unwrap();
    let out = inferno(&["generate", &model, "--prompt", "x", "--json-schema", schema.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("JSON schema"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `--tools` with `--chat`: a required call (Qwen3's `<tool_call>` format, held by a grammar)
/// comes back in the last JSON line's `tool_calls` with arguments the schema accepts, and the
/// reasoning and content apart; tool mistakes and `--tools` without `--chat` are errors.
#[test]
fn generate_calls_a_tool() {
    let (model, _) = micro_q4_0();
    let dir = std::env::temp_dir().join(format!("inferno-cli-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tools = dir.join("tools.json");
    std::fs::write(
        &tools,
        r#"[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"enum": ["Paris", "Oslo"]}}, "required": ["city"]}}}]"#,
    )
    .unwrap();
    let tools = tools.to_str().unwrap();
    for seed in ["1", "2"] {
        let out = inferno(&[
            "generate",
            &model,
            "--chat",
            "--prompt",
            "Weather in Oslo?",
            "-n",
            "200",
            "--temp",
            "1",
            "--seed",
            seed,
            "--tools",
            tools,
            "--tool-choice",
            "required",
            "--one-call",
            "--json",
        ]);
        let summary = json_lines(&out).pop().unwrap();
        assert_eq!(summary["stop"], "end", "seed {seed}: {summary}");
        let call = &summary["tool_calls"][0];
        assert_eq!(call["name"], "get_weather", "seed {seed}: {summary}");
        let arguments: Json = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
        assert!(["Paris", "Oslo"].contains(&arguments["city"].as_str().unwrap()), "seed {seed}: {summary}");
    }
    let refused = |args: &[&str], why: &str| {
        let out = inferno(args);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(why), "{stderr}");
    };
    refused(&["generate", &model, "--prompt", "x", "--tools", tools], "--tools needs --chat");
    refused(
        &["generate", &model, "--chat", "--prompt", "x", "--tools", tools, "--tool-choice", "nope"],
        "nope",
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `embed --json` gives OpenAI's shape with llama.cpp's vectors (unit length); a chat model
/// without `--pooling` is refused with the way out in the message.
#[test]
fn embed_json_is_openai_shaped_and_matches_llama_cpp() {
    let golden: Json = serde_json::from_slice(
        &std::fs::read(fixture("golden/qwen3-embed-micro-q8_0.embeddings.json")).unwrap(),
    )
    .unwrap();
    let model = fixture("models/qwen3-embed-micro-q8_0.gguf");
    let texts = &golden["poolings"]["last"].as_array().unwrap()[..2];
    let mut args = vec!["embed", model.to_str().unwrap(), "--json"];
    args.extend(texts.iter().map(|t| t["text"].as_str().unwrap()));
    let out = stdout_json(&inferno(&args));
    assert_eq!(out["object"], "list");
    assert_eq!(out["pooling"], "last");
    let tokens: usize = texts.iter().map(|t| t["tokens"].as_array().unwrap().len()).sum();
    assert_eq!(out["usage"]["prompt_tokens"], tokens);
    let data = out["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    for (i, (item, text)) in data.iter().zip(texts).enumerate() {
        assert_eq!(item["index"], i);
        let floats = |v: &Json| v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect::<Vec<_>>();
        let (ours, theirs) = (floats(&item["embedding"]), floats(&text["embedding"]));
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        assert!((dot(&ours, &ours) - 1.0).abs() < 1e-5, "unit length");
        let cosine = dot(&ours, &theirs) / dot(&theirs, &theirs).sqrt();
        assert!(cosine >= 0.9999, "cosine {cosine}");
    }

    let chat = fixture("models/qwen3-micro-q8_0.gguf");
    let out = inferno(&["embed", chat.to_str().unwrap(), "hello"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("declares no pooling"));
    let out = inferno(&["embed", chat.to_str().unwrap(), "hello", "there", "--pooling", "mean"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("mean pooling, 256 values each, unit length"), "{text}");
    assert!(text.contains("cosine similarities:"), "{text}");
}

/// Any shard of a split model names the whole model: the CLI finds the others beside it by
/// gguf-split's naming rule, and `inspect` shows one model across them.
#[test]
fn a_shard_path_loads_and_inspects_the_whole_split_model() {
    let whole = fixture("models/qwen3-micro-q8_0.gguf");
    let shard = fixture("models/split/qwen3-micro-q8_0-llama-split-00002-of-00003.gguf");
    let args = |model: &PathBuf| {
        vec![
            "logits".to_string(),
            model.to_str().unwrap().into(),
            "--tokens".into(),
            "1,2,3,4".into(),
            "--json".into(),
        ]
    };
    let run = |model: &PathBuf| {
        let args = args(model);
        stdout_json(&inferno(&args.iter().map(String::as_str).collect::<Vec<_>>()))
    };
    assert_eq!(run(&shard), run(&whole));
    let report = stdout_json(&inferno(&["inspect", shard.to_str().unwrap(), "--json"]));
    assert_eq!(report["gguf"]["shards"], 3);
    assert_eq!(report["gguf"]["tensor_count"], 25);
    assert_eq!(report["runs"]["ok"], true);
}

/// A vision projector (mmproj) is inspected as one: its own card in text, `vision` in JSON,
/// and a refusal that says what it is, where loading it as a model would name a missing tensor.
#[test]
fn a_vision_projector_is_inspected_and_refused_as_one() {
    let mmproj = fixture("models/clip-gemma3-micro.gguf");
    let mmproj = mmproj.to_str().unwrap();
    let out = inferno(&["inspect", mmproj]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "Vision projector",
        "fits             Gemma 3 (4B and up)",
        "image            224 x 224 px, patches of 14 px (16 x 16)",
        "output width     640",
        "mean (RGB)       0.48145467, 0.4578275, 0.40821072",
        "purpose          vision projector",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    let report = stdout_json(&inferno(&["inspect", mmproj, "--json"]));
    assert_eq!(report["vision"]["projector"], "gemma3");
    let mean = report["vision"]["image_mean"].as_array().unwrap();
    assert_eq!(
        mean.iter().map(|v| v.as_f64().unwrap() as f32).collect::<Vec<_>>(),
        [0.481_454_66, 0.457_827_5, 0.408_210_73]
    );
    assert_eq!(report["runs"]["ok"], false);

    let out = inferno(&["generate", mmproj, "--prompt", "hi"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("vision projector (mmproj) for Gemma 3"), "{stderr}");
    // Every other file has no vision card.
    let report = stdout_json(&inferno(&[
        "inspect",
        fixture("models/qwen3-micro-q8_0.gguf").to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(report["vision"], Json::Null);
}

/// `--image-max-tokens` and `--image-min-tokens` bound a picture's rows as llama.cpp's options
/// do: the wide picture takes Gemma 4's 300 rows, or 70 limited to 40-80 (mtmd's count,
/// tests/vision.rs); limits the projector cannot take, or without a projector, are refused.
#[test]
fn generate_limits_a_pictures_rows() {
    let model = fixture("models/gemma4-vl-micro-q8_0.gguf");
    let mmproj = fixture("models/clip-gemma4v-micro.gguf");
    let picture = fixture("images/wide-480x360.png");
    let (model, mmproj, picture) =
        (model.to_str().unwrap(), mmproj.to_str().unwrap(), picture.to_str().unwrap());
    let base =
        ["generate", model, "--mmproj", mmproj, "--image", picture, "--prompt", "<__media__>Hi", "-n", "1"];
    let prompt_tokens = |limits: &[&str]| {
        let out = inferno(&[&base[..], limits, &["--json"]].concat());
        json_lines(&out).last().unwrap()["prompt_tokens"].as_u64().unwrap()
    };
    // The picture's rows, its two markers, "Hi" and the BOS.
    assert_eq!(prompt_tokens(&[]), 300 + 4);
    assert_eq!(prompt_tokens(&["--image-min-tokens", "40", "--image-max-tokens", "80"]), 70 + 4);
    let out = inferno(&[&base[..], &["--image-max-tokens", "2000"]].concat());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 1120 rows"), "{out:?}");
    let out = inferno(&["generate", model, "--image", picture, "--prompt", "x", "--image-max-tokens", "80"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("need --mmproj"), "{out:?}");
}

/// `generate --mmproj --image` as llama-mtmd-cli runs it: the picture where the prompt has
/// `<__media__>` (or first, without one), its greedy tokens llama.cpp's (the golden of
/// scripts/make_vision_goldens.py on Gemma 3 270M with the micro projector); a picture that is
/// not one, or one with no projector, is refused with the reason.
#[test]
fn generate_with_a_picture_follows_llama_cpp_mtmd() {
    let golden: Json =
        serde_json::from_slice(&std::fs::read(fixture("golden/clip-gemma3-micro.images.json")).unwrap())
            .unwrap();
    let chat = &golden["chat"];
    let model = common::model("gemma3-270m-q4_k_m.gguf");
    let (model, mmproj) = (model.to_str().unwrap(), fixture("models/clip-gemma3-micro.gguf"));
    let picture = fixture(chat["picture"].as_str().unwrap());
    let (mmproj, picture) = (mmproj.to_str().unwrap(), picture.to_str().unwrap());
    let prompt = chat["prompt"].as_str().unwrap();
    let run = |prompt: &str| {
        let args = ["generate", model, "--mmproj", mmproj, "--image", picture, "--prompt", prompt];
        let out = inferno(
            &[&args[..], &["-n", "8", "--temp", "0", "--ignore-eos", "--json", "--precision", "exact"]]
                .concat(),
        );
        let lines = json_lines(&out);
        lines[..lines.len() - 1].iter().map(|t| t["token"].as_u64().unwrap()).collect::<Vec<_>>()
    };
    let expected: Vec<u64> =
        chat["generated_ids"].as_array().unwrap()[..8].iter().map(|t| t.as_u64().unwrap()).collect();
    assert_eq!(run(prompt), expected);
    // Without a marker the picture goes first: a different prompt, still a run.
    assert_eq!(run("Describe it.").len(), 8);

    let png = fixture("golden/clip-gemma3-micro.images.json"); // not a picture
    let out =
        inferno(&["generate", model, "--mmproj", mmproj, "--image", png.to_str().unwrap(), "--prompt", "x"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the picture cannot be read"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = inferno(&["generate", model, "--image", picture, "--prompt", "x"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("without a vision projector"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `bench MMPROJ --image PICTURE` times the encoder alone and says what it timed: the micro
/// projector's shape, its 16 embeddings, a time; a picture that is no picture is refused.
#[test]
fn bench_times_a_vision_encoder() {
    let mmproj = fixture("models/clip-gemma3-micro.gguf");
    let picture = fixture("images/tower-90x250.png");
    let (mmproj, picture) = (mmproj.to_str().unwrap(), picture.to_str().unwrap());
    let out = inferno(&["bench", mmproj, "--image", picture, "--runs", "2", "--threads", "1", "--json"]);
    let result = stdout_json(&out);
    assert_eq!(result["projector"], "gemma3");
    assert_eq!(result["weight_type"], "F16");
    assert_eq!((result["image_size"].as_u64(), result["patches"].as_u64()), (Some(224), Some(256)));
    assert_eq!((result["layers"].as_u64(), result["tokens"].as_u64()), (Some(2), Some(16)));
    assert!(result["encode_ms"].as_f64().unwrap() > 0.0);
    let not_a_picture = fixture("golden/clip-gemma3-micro.images.json");
    let out = inferno(&["bench", mmproj, "--image", not_a_picture.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("the picture cannot be read"));
}
