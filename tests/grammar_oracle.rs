//! llama.cpp's llguidance cases (tests/test-grammar-llguidance.cpp at 0c1e570, turned into
//! .cache/llguidance-cases.json by scripts/llguidance_cases.py): each grammar, or schema as
//! `start: %json SCHEMA`, compiled by our grammar engine against a real vocabulary must accept
//! every string the C++ test accepts and reject every string it rejects. A string is accepted
//! as the C++ test decides: its tokens are allowed one by one, then an end of generation is.

#![cfg(not(target_family = "wasm"))]

mod common;

use inferno::gguf::Gguf;
use inferno::grammar::{GrammarCompiler, GrammarSpec};
use inferno::tokenizer::{EncodeOptions, Tokenizer};
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    line: usize,
    description: String,
    grammar: String,
    accept: Vec<String>,
    reject: Vec<String>,
}

fn matches(compiler: &GrammarCompiler, tokenizer: &Tokenizer, grammar: &str, input: &str) -> bool {
    let mut constraint = compiler.compile(&GrammarSpec::Lark(grammar.to_owned())).unwrap();
    let options = EncodeOptions { add_special: false, parse_special: false };
    for token in tokenizer.encode(input, options) {
        if !constraint.mask().unwrap().allows(token) {
            return false;
        }
        constraint.accept(token).unwrap();
    }
    let end = tokenizer.end_of_generation_tokens()[0];
    constraint.mask().unwrap().allows(end)
}

#[test]
fn llama_cpp_llguidance_cases_accept_and_reject_the_same_strings() {
    let cases = std::fs::read(common::made("llguidance-cases.json")).unwrap();
    let cases: Vec<Case> = serde_json::from_slice(&cases).unwrap();
    let vocab = std::fs::read(common::model("qwen3-vocab.gguf")).unwrap();
    let tokenizer = Tokenizer::from_metadata(Gguf::parse(&vocab).unwrap().metadata()).unwrap();
    let compiler = GrammarCompiler::new(&tokenizer).unwrap();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for case in &cases {
        for (strings, expected) in [(&case.accept, true), (&case.reject, false)] {
            for input in strings {
                checked += 1;
                if matches(&compiler, &tokenizer, &case.grammar, input) != expected {
                    let verb = if expected { "accept" } else { "reject" };
                    wrong
                        .push(format!("line {} ({}): did not {verb} {input:?}", case.line, case.description));
                }
            }
        }
    }
    assert!(cases.len() >= 42 && checked >= 344, "{} cases, {checked} strings", cases.len());
    assert!(wrong.is_empty(), "{} of {checked} strings judged otherwise:\n{}", wrong.len(), wrong.join("\n"));
}
