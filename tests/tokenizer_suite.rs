//! llama.cpp's own tokenizer test suite (`tests/test-tokenizer-0.cpp`) run through our tokenizer.
//!
//! llama.cpp ships, in `models/`, vocabulary-only GGUF files (`ggml-vocab-<name>.gguf`) with
//! test strings (`.inp`, separated by a `\n__ggml_vocab_test__\n` line) and the token ids its
//! tokenizer gives for each (`.out`, one line of space-separated ids per string). They are
//! tokenized with no BOS/EOS added and no special-token parsing (`add_special = false`,
//! `parse_special = false`), which is our
//! `EncodeOptions { add_special: false, parse_special: false }`.
//!
//! The files come from llama-cpp-python 0.3.36's sdist (the llama.cpp of the project's goldens),
//! extracted into `<repo>/.cache/vocab` by `./build.sh models` (`scripts/fetch-models.sh`);
//! `INFERNO_VOCAB` names another folder. Missing files fail the test: they are never skipped.
//!
//! Every vocabulary of the folder with `.inp`/`.out` files is run (15, BERT's WordPiece
//! `bert-bge` among them). A vocabulary that cannot be supported yet is listed in
//! [`EXPECTED_FAILURES`] with the reason; it still runs, and the test fails if it starts
//! passing, so the list stays true.

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use inferno::gguf::Gguf;
use inferno::tokenizer::{EncodeOptions, TokenId, Tokenizer};

/// The vocabularies of llama.cpp's suite that this test must find (a folder missing one of them
/// is an incomplete fetch, not a smaller suite).
const SUITE: &[&str] = &[
    "bert-bge",
    "command-r",
    "deepseek-coder",
    "deepseek-llm",
    "falcon",
    "gemma-4",
    "gpt-2",
    "llama-bpe",
    "llama-spm",
    "mpt",
    "phi-3",
    "qwen2",
    "qwen35",
    "refact",
    "starcoder",
];

/// Vocabularies with test files that are deliberately not run, and why.
const NOT_RUN: &[(&str, &str)] = &[];

/// Vocabularies expected to fail, with the reason. Empty when everything passes.
const EXPECTED_FAILURES: &[(&str, &str)] = &[];

const SEPARATOR: &str = "\n__ggml_vocab_test__\n";

fn vocab_dir() -> PathBuf {
    std::env::var_os("INFERNO_VOCAB").map(PathBuf::from).unwrap_or_else(|| common::made("vocab"))
}

fn fetch_hint(dir: &Path) -> String {
    format!(
        "llama.cpp's tokenizer test files are missing from {}: run `./build.sh models` (or \
         `scripts/fetch-models.sh`), which extracts them from llama-cpp-python 0.3.36's sdist, \
         or set INFERNO_VOCAB to a folder holding them",
        dir.display()
    )
}

/// The test strings and their expected ids, as `read_tests` in test-tokenizer-0.cpp reads them.
fn read_cases(inp: &str, out: &str) -> Vec<(String, Vec<TokenId>)> {
    let mut inputs = Vec::new();
    let mut rest = inp;
    while !rest.is_empty() {
        match rest.find(SEPARATOR) {
            Some(next) => {
                inputs.push(rest[..next].to_string());
                rest = &rest[next + SEPARATOR.len()..];
            }
            None => {
                inputs.push(rest.to_string());
                rest = "";
            }
        }
    }
    let outputs: Vec<Vec<TokenId>> = out
        .lines()
        .map(|line| {
            line.split_whitespace()
                .map(|id| id.parse().unwrap_or_else(|e| panic!("bad token id {id:?} in .out: {e}")))
                .collect()
        })
        .collect();
    assert_eq!(inputs.len(), outputs.len(), ".inp and .out have different numbers of tests");
    inputs.into_iter().zip(outputs).collect()
}

/// `ids` with each token's vocabulary text, for the diff.
fn show(tokenizer: &Tokenizer, ids: &[TokenId]) -> String {
    let pieces: Vec<String> = ids
        .iter()
        .map(|&id| format!("{id} {:?}", tokenizer.token_str(id).unwrap_or("<out of range>")))
        .collect();
    format!("[{}]", pieces.join(", "))
}

struct Outcome {
    cases: usize,
    failures: Vec<String>,
}

fn run_vocab(dir: &Path, name: &str) -> Result<Outcome, String> {
    let base = dir.join(format!("ggml-vocab-{name}.gguf"));
    let read = |path: &Path| std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()));
    let bytes = read(&base)?;
    let inp = String::from_utf8(read(&base.with_extension("gguf.inp"))?).map_err(|e| format!(".inp: {e}"))?;
    let out = String::from_utf8(read(&base.with_extension("gguf.out"))?).map_err(|e| format!(".out: {e}"))?;
    let gguf = Gguf::parse(&bytes).map_err(|e| format!("GGUF rejected: {e}"))?;
    let tokenizer =
        Tokenizer::from_metadata(gguf.metadata()).map_err(|e| format!("tokenizer rejected: {e}"))?;
    let cases = read_cases(&inp, &out);
    let options = EncodeOptions { add_special: false, parse_special: false };
    let mut failures = Vec::new();
    for (i, (text, expected)) in cases.iter().enumerate() {
        let got = tokenizer.encode(text, options);
        if &got != expected {
            failures.push(format!(
                "  case {i}: {text:?}\n    expected {}\n    got      {}",
                show(&tokenizer, expected),
                show(&tokenizer, &got)
            ));
        }
    }
    Ok(Outcome { cases: cases.len(), failures })
}

#[test]
fn llama_cpp_tokenizer_suite() {
    let dir = vocab_dir();
    assert!(dir.is_dir(), "{}", fetch_hint(&dir));

    // Every vocabulary in the folder with test files is in SUITE or NOT_RUN, so a new one in a
    // newer llama.cpp is not silently left out.
    let mut found: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter_map(|file| Some(file.strip_prefix("ggml-vocab-")?.strip_suffix(".gguf.inp")?.to_string()))
        .collect();
    found.sort();
    for name in &found {
        assert!(
            SUITE.contains(&name.as_str()) || NOT_RUN.iter().any(|(n, _)| n == name),
            "{}: ggml-vocab-{name} has test files but is neither in SUITE nor in NOT_RUN",
            dir.display()
        );
    }
    for name in SUITE {
        for ext in ["gguf", "gguf.inp", "gguf.out"] {
            let path = dir.join(format!("ggml-vocab-{name}.{ext}"));
            assert!(path.is_file(), "{} is missing. {}", path.display(), fetch_hint(&dir));
        }
    }

    let mut summary = String::new();
    let mut report = String::new();
    let mut unexpected = Vec::new();
    for &name in SUITE {
        let expected_failure = EXPECTED_FAILURES.iter().find(|(n, _)| *n == name).map(|(_, why)| *why);
        let (line, failed) = match run_vocab(&dir, name) {
            Ok(outcome) => {
                let passed = outcome.cases - outcome.failures.len();
                if !outcome.failures.is_empty() {
                    let _ = writeln!(
                        report,
                        "{name}: {} of {} cases differ",
                        outcome.failures.len(),
                        outcome.cases
                    );
                    for failure in &outcome.failures {
                        let _ = writeln!(report, "{failure}");
                    }
                }
                (format!("{passed}/{} cases", outcome.cases), !outcome.failures.is_empty())
            }
            Err(error) => {
                let _ = writeln!(report, "{name}: {error}");
                (format!("cannot load: {error}"), true)
            }
        };
        let verdict = match (failed, expected_failure) {
            (false, None) => "pass",
            (true, Some(_)) => "expected failure",
            (true, None) => {
                unexpected.push(format!("{name} fails"));
                "FAIL"
            }
            (false, Some(_)) => {
                unexpected.push(format!("{name} passes but is listed in EXPECTED_FAILURES: remove it"));
                "PASS (listed as expected failure)"
            }
        };
        let why = expected_failure.map(|why| format!(" ({why})")).unwrap_or_default();
        let _ = writeln!(summary, "  {name:<16} {verdict:<18} {line}{why}");
    }
    for (name, why) in NOT_RUN {
        let _ = writeln!(summary, "  {name:<16} not run            {why}");
    }
    eprintln!("llama.cpp tokenizer suite ({}):\n{summary}", dir.display());
    if !report.is_empty() {
        eprintln!("differences:\n{report}");
    }
    assert!(unexpected.is_empty(), "{}\n{summary}", unexpected.join("; "));
}
