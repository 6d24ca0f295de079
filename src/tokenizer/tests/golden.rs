//! Token ids and texts compared with llama.cpp's, for every golden prompt and every model.
//!
//! `tests/fixtures/golden/*.json` (copied from the shared `golden/`) (see its README) hold llama.cpp's tokenization of three prompts and
//! the pieces/text of 24 generated tokens. `tests/fixtures/tokenizer/llama_cpp_cases.json`
//! (written by `make_llama_cpp_cases.py` beside it) holds llama.cpp's tokenization of harder
//! strings. Tests that need the real models (not in the repository) are the `real_model_*`
//! ones; they fail, saying what to fetch, when the files are missing.

use std::path::Path;
use std::time::Instant;

use serde_json::Value;

use super::super::{DecodeOptions, EncodeOptions, TokenId, Tokenizer};
use super::{
    fixtures_dir, golden_path, read, real_model, shared_model, tokenizer_from_file,
    tokenizer_from_file_with_pre,
};

const WITHOUT_SPECIAL: EncodeOptions = EncodeOptions { add_special: false, parse_special: false };

fn ids(value: &Value) -> Vec<TokenId> {
    value.as_array().expect("an array of ids").iter().map(|v| v.as_u64().expect("an id") as TokenId).collect()
}

/// Checks every prompt of a golden file; returns how many comparisons were made.
fn check_golden_file(golden: &Path, tokenizer: &Tokenizer) -> usize {
    let json: Value = serde_json::from_slice(&read(golden)).expect("golden JSON");
    let name = golden.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let mut failures = Vec::new();
    let mut checks = 0;
    let prompts = json["prompts"].as_object().expect("prompts");
    for (prompt_name, prompt) in prompts {
        let text = prompt["prompt"].as_str().expect("prompt text");
        let mut check = |what: &str, ok: bool, detail: String| {
            checks += 1;
            if !ok {
                failures.push(format!("{name} / {prompt_name} / {what}: {detail}"));
            }
        };

        let expected = ids(&prompt["prompt_ids"]);
        let got = tokenizer.encode(text, EncodeOptions::default());
        check("prompt_ids", got == expected, format!("got {got:?}, llama.cpp {expected:?}"));

        if let Some(without) = prompt.get("prompt_ids_without_special") {
            let expected = ids(without);
            let got = tokenizer.encode(text, WITHOUT_SPECIAL);
            check(
                "prompt_ids_without_special",
                got == expected,
                format!("got {got:?}, llama.cpp {expected:?}"),
            );
        }

        if let Some(pieces) = prompt.get("prompt_pieces") {
            let expected: Vec<&str> =
                pieces.as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
            let got: Vec<String> =
                ids(&prompt["prompt_ids"]).iter().map(|&id| tokenizer.token_text(id)).collect();
            check("prompt_pieces", got == expected, format!("got {got:?}, llama.cpp {expected:?}"));
        }

        if let Some(generated) = prompt.get("generated_ids") {
            let generated = ids(generated);
            if let Some(pieces) = prompt.get("generated_pieces") {
                let expected: Vec<&str> =
                    pieces.as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
                let got: Vec<String> = generated.iter().map(|&id| tokenizer.token_text(id)).collect();
                check("generated_pieces", got == expected, format!("got {got:?}, llama.cpp {expected:?}"));
            }
            if let Some(text) = prompt.get("generated_text") {
                let expected = text.as_str().unwrap();
                let got = tokenizer.decode(&generated);
                check("generated_text", got == expected, format!("got {got:?}, llama.cpp {expected:?}"));
                // Streaming gives the same text (llama.cpp's generated_text is the pieces
                // concatenated, which the detokenizer reproduces).
                let mut stream = tokenizer.detokenizer(false);
                let mut streamed: String = generated.iter().map(|&id| stream.push(id)).collect();
                streamed.push_str(&stream.finish());
                check("generated_text (streamed)", streamed == expected, format!("got {streamed:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} mismatches with llama.cpp:\n{}", failures.len(), failures.join("\n"));
    checks
}

#[test]
fn golden_qwen3_vocab() {
    let started = Instant::now();
    let tokenizer = tokenizer_from_file(&shared_model("qwen3-vocab.gguf"));
    eprintln!("qwen3-vocab tokenizer built in {:?}", started.elapsed());
    let checks = check_golden_file(&golden_path("qwen3-vocab.json"), &tokenizer);
    assert_eq!(checks, 3);
}

#[test]
fn golden_qwen3_micro_all_quantizations() {
    let mut files = 0;
    let golden_dir = golden_path("");
    for entry in std::fs::read_dir(&golden_dir).expect("golden dir") {
        let path = entry.expect("dir entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let Some(stem) = name.strip_prefix("qwen3-micro-").and_then(|n| n.strip_suffix(".json")) else {
            continue;
        };
        let tokenizer = tokenizer_from_file(&shared_model(&format!("qwen3-micro-{stem}.gguf")));
        check_golden_file(&path, &tokenizer);
        files += 1;
    }
    assert_eq!(files, 13, "expected the 13 qwen3-micro goldens");
}

#[test]
fn real_model_smollm2_golden() {
    let tokenizer = tokenizer_from_file(&real_model("SmolLM2-135M-Instruct.Q4_1.gguf"));
    check_golden_file(&golden_path("smollm2-135m-instruct-q4_1.json"), &tokenizer);
}

#[test]
fn real_model_gemma3_golden() {
    let started = Instant::now();
    let tokenizer = tokenizer_from_file(&real_model("gemma3-270m-q4_k_m.gguf"));
    eprintln!("gemma3 tokenizer built in {:?}", started.elapsed());
    check_golden_file(&golden_path("gemma3-270m-q4_k_m.json"), &tokenizer);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Replays `llama_cpp_cases.json` for the models whose file is at hand; returns the number of
/// cases checked per model.
fn check_cases(models: &[&str]) -> Vec<(String, usize)> {
    let json: Value =
        serde_json::from_slice(&read(&fixtures_dir().join("llama_cpp_cases.json"))).expect("cases JSON");
    let cases = json["cases"].as_array().expect("cases");
    let mut counts = Vec::new();
    let mut failures = Vec::new();
    for &model in models {
        let model_cases: Vec<&Value> = cases.iter().filter(|c| c["model"] == model).collect();
        assert!(!model_cases.is_empty(), "no cases for {model}");
        let file = model_cases[0]["file"].as_str().unwrap();
        let path = if file.starts_with("qwen3-") { shared_model(file) } else { real_model(file) };
        let tokenizer = match model_cases[0]["pre"].as_str() {
            Some(pre) => tokenizer_from_file_with_pre(&path, pre),
            None => tokenizer_from_file(&path),
        };
        let mut decode_checks = 0;
        for case in &model_cases {
            let text = case["text"].as_str().unwrap();
            for (field, options) in
                [("ids", EncodeOptions::default()), ("ids_no_special_no_bos", WITHOUT_SPECIAL)]
            {
                let expected = ids(&case[field]);
                let got = tokenizer.encode(text, options);
                if got != expected {
                    failures.push(format!(
                        "{model} {field} {text:?}:\n  got      {got:?}\n  llama.cpp {expected:?}"
                    ));
                }
            }
            let ids = ids(&case["ids"]);
            // llama_detokenize(ids, remove_special, unparse_special) for (F,F) (T,F) (F,T) (T,T).
            if let Some(decoded) = case["decoded_hex"].as_array() {
                let combos = [(false, false), (true, false), (false, true), (true, true)];
                for ((remove_special, render_special), expected) in combos.into_iter().zip(decoded) {
                    let options = DecodeOptions { remove_special, render_special };
                    let got = hex(&tokenizer.decode_bytes(&ids, options));
                    if got != expected.as_str().unwrap() {
                        failures.push(format!(
                            "{model} decode {options:?} {text:?}: got {got}, llama.cpp {expected}"
                        ));
                    }
                }
                decode_checks += 1;
            }
            if let Some(pieces) = case["pieces_hex"].as_array() {
                for (&id, expected) in ids.iter().zip(pieces) {
                    let got = hex(tokenizer.token_bytes(id, true));
                    if got != expected.as_str().unwrap() {
                        failures.push(format!("{model} piece of {id}: got {got}, llama.cpp {expected}"));
                    }
                }
            }
        }
        assert!(decode_checks > 0, "no decode cases for {model}");
        counts.push((model.to_owned(), model_cases.len()));
    }
    assert!(failures.is_empty(), "{} mismatches with llama.cpp:\n{}", failures.len(), failures.join("\n"));
    counts
}

#[test]
fn llama_cpp_cases_qwen3_and_other_pre_tokenizers() {
    let counts = check_cases(&[
        "qwen3-vocab",
        "qwen3-micro",
        "qwen3-vocab+default",
        "qwen3-vocab+gpt-2",
        "qwen3-vocab+llama-bpe",
        "qwen3-vocab+dbrx",
        "qwen3-vocab+starcoder",
    ]);
    eprintln!("{counts:?}");
}

#[test]
fn real_model_smollm2_llama_cpp_cases() {
    check_cases(&["smollm2"]);
}

#[test]
fn real_model_gemma3_llama_cpp_cases() {
    check_cases(&["gemma3"]);
}

/// The pre-tokenizers alone against llama.cpp's `unicode_regex_split` (see
/// `make_pretokenizer_cases.py`): word by word, for 417 strings.
#[test]
fn llama_cpp_pretokenizer_splits() {
    use super::super::PreTokenizer;

    let json: Value =
        serde_json::from_slice(&read(&fixtures_dir().join("pretokenizer_cases.json"))).expect("cases JSON");
    let texts: Vec<&str> = json["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let mut failures = Vec::new();
    for (name, pre) in [
        ("default", PreTokenizer::Default),
        ("gpt2", PreTokenizer::Gpt2),
        ("starcoder", PreTokenizer::StarCoder),
        ("llama3", PreTokenizer::Llama3),
        ("qwen2", PreTokenizer::Qwen2),
        ("gpt4o", PreTokenizer::Gpt4o),
        ("qwen35", PreTokenizer::Qwen35),
        ("deepseek-llm", PreTokenizer::DeepSeekLlm),
        ("deepseek-coder", PreTokenizer::DeepSeekCoder),
        ("falcon", PreTokenizer::Falcon),
        ("newlines", PreTokenizer::Newlines),
    ] {
        let expected = json["word_lengths"][name].as_array().expect("splits");
        assert_eq!(expected.len(), texts.len());
        for (text, expected) in texts.iter().zip(expected) {
            let expected: Vec<usize> =
                expected.as_array().unwrap().iter().map(|n| n.as_u64().unwrap() as usize).collect();
            let got: Vec<usize> = pre.split(text).into_iter().map(|r| r.len()).collect();
            if got != expected {
                failures.push(format!("{name} {text:?}: got {got:?}, llama.cpp {expected:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// GPT-4o's pre-tokenizer and the other names added with it, against llama.cpp
/// (`gpt4o_cases.json`, written by `make_gpt4o_cases.py`): for each name, the ids (with and
/// without special-token parsing) and the decoded text of hard texts with the Qwen3 vocabulary;
/// the ids of 500 random texts under `gpt-4o`; and the `gpt-4o` split of 3000 random texts,
/// word by word.
#[test]
fn llama_cpp_gpt4o_cases() {
    use super::super::PreTokenizer;

    let json: Value =
        serde_json::from_slice(&read(&fixtures_dir().join("gpt4o_cases.json"))).expect("cases JSON");
    let strings = |key: &str| -> Vec<String> {
        json[key].as_array().expect(key).iter().map(|t| t.as_str().unwrap().to_owned()).collect()
    };
    let (texts, randoms) = (strings("texts"), strings("random_texts"));
    let vocab = shared_model("qwen3-vocab.gguf");
    let with_special = EncodeOptions { add_special: false, parse_special: true };
    let mut failures = Vec::new();
    let mut checks = 0;
    for (pre, cases) in json["ids"].as_object().expect("ids") {
        let tokenizer = tokenizer_from_file_with_pre(&vocab, pre);
        let cases = cases.as_array().unwrap();
        assert_eq!(cases.len(), texts.len());
        for (text, case) in texts.iter().zip(cases) {
            for (field, options) in [("ids", with_special), ("ids_no_special", WITHOUT_SPECIAL)] {
                let (got, expected) = (tokenizer.encode(text, options), ids(&case[field]));
                if got != expected {
                    failures.push(format!(
                        "{pre} {field} {text:?}:\n  got       {got:?}\n  llama.cpp {expected:?}"
                    ));
                }
            }
            let options = DecodeOptions { remove_special: false, render_special: false };
            let decoded = hex(&tokenizer.decode_bytes(&ids(&case["ids"]), options));
            if decoded != case["decoded_hex"].as_str().unwrap() {
                failures
                    .push(format!("{pre} decode {text:?}: got {decoded}, llama.cpp {}", case["decoded_hex"]));
            }
            checks += 3;
        }
        if pre == "gpt-4o" {
            for (text, expected) in randoms.iter().zip(json["random_ids"].as_array().unwrap()) {
                let (got, expected) = (tokenizer.encode(text, with_special), ids(expected));
                if got != expected {
                    failures.push(format!("{pre} {text:?}:\n  got       {got:?}\n  llama.cpp {expected:?}"));
                }
                checks += 1;
            }
        }
    }
    let lengths = json["word_lengths"].as_array().unwrap();
    assert_eq!(lengths.len(), randoms.len());
    for (text, expected) in randoms.iter().zip(lengths) {
        let expected: Vec<usize> =
            expected.as_array().unwrap().iter().map(|n| n.as_u64().unwrap() as usize).collect();
        let got: Vec<usize> = PreTokenizer::Gpt4o.split(text).into_iter().map(|r| r.len()).collect();
        if got != expected {
            failures.push(format!("split {text:?}: got {got:?}, llama.cpp {expected:?}"));
        }
        checks += 1;
    }
    assert!(
        failures.is_empty(),
        "{} of {checks} differ from llama.cpp:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{checks} checks equal llama.cpp's");
}
