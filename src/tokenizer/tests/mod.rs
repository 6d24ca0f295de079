//! Tokenizer tests. Correctness is measured against llama.cpp: `golden.rs` replays llama.cpp's
//! own outputs; the other files test behaviour (hostile metadata, streaming, special tokens,
//! pathological input) on small hand-made vocabularies.
//!
//! Test data is found without relying on the crate's location (these files are also compiled
//! into a development crate elsewhere):
//! - goldens: `tests/fixtures/golden` (committed);
//! - small synthetic Qwen3 models: `tests/fixtures/models`, or `.cache/models` for the
//!   quantizations `./build.sh models` makes;
//! - real model files: `$INFERNO_MODELS`, else the first `.cache/models` in those ancestors.

mod behaviour;
mod golden;
mod hostile;

use std::path::{Path, PathBuf};

use super::{Tokenizer, TokenizerSpec};
use crate::gguf::Gguf;

/// Directories to search upwards from: the working directory and this file's directory.
fn search_roots() -> Vec<PathBuf> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    // `file!()` is relative to the crate root (= cargo's working directory for tests) or
    // absolute when this module is included by path.
    let source = Path::new(file!());
    let source = if source.is_absolute() { source.to_path_buf() } else { cwd.join(source) };
    let mut roots: Vec<PathBuf> = Vec::new();
    for start in [cwd.as_path(), source.as_path()] {
        for dir in start.ancestors() {
            roots.push(dir.to_path_buf());
        }
    }
    roots
}

/// `$env` if set, else the first `<ancestor>/<relative>` that is a directory.
fn find_dir(env: &str, relative: &str) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(env) {
        return Some(PathBuf::from(dir));
    }
    search_roots().into_iter().map(|root| root.join(relative)).find(|p| p.is_dir())
}

/// llama.cpp's outputs (`tests/fixtures/golden`, copied from the shared `golden/` folder).
pub(super) fn golden_path(name: &str) -> PathBuf {
    repo_dir("tests/fixtures/golden").join(name)
}

/// A small synthetic Qwen3 file: committed in `tests/fixtures/models`, or made into
/// `.cache/models` by `./build.sh models` (a missing one fails the test with that command).
pub(super) fn shared_model(file: &str) -> PathBuf {
    crate::test_files::model(file)
}

/// A directory of the repository, found above the working directory or this file.
fn repo_dir(relative: &str) -> PathBuf {
    search_roots()
        .into_iter()
        .map(|root| root.join(relative))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| panic!("{relative} not found above the working directory or this file"))
}

/// Where the real models are (may not exist).
pub(super) fn models_dir() -> Option<PathBuf> {
    find_dir("INFERNO_MODELS", ".cache/models")
}

/// This module's committed fixtures (`tests/fixtures/tokenizer` of the repository).
pub(super) fn fixtures_dir() -> PathBuf {
    repo_dir("tests/fixtures/tokenizer")
}

pub(super) fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

pub(super) fn tokenizer_from_file(path: &Path) -> Tokenizer {
    let bytes = read(path);
    let gguf = Gguf::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_metadata(gguf.metadata()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A tokenizer from `path` with `tokenizer.ggml.pre` replaced.
pub(super) fn tokenizer_from_file_with_pre(path: &Path, pre: &str) -> Tokenizer {
    let bytes = read(path);
    let gguf = Gguf::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut spec = super::metadata::spec_from_metadata(gguf.metadata()).expect("metadata");
    spec.pre = Some(pre);
    Tokenizer::from_spec(spec).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The real model at `models_dir()/name`; panics with instructions when it is missing.
pub(super) fn real_model(name: &str) -> PathBuf {
    let path = models_dir().map(|dir| dir.join(name));
    match path {
        Some(path) if path.is_file() => path,
        _ => panic!(
            "real model {name} not found: run `./build.sh models` (or set INFERNO_MODELS to the \
             directory holding it)"
        ),
    }
}

/// A small vocabulary for behaviour tests.
pub(super) struct SmallVocab {
    pub tokens: Vec<String>,
    pub types: Vec<i32>,
    pub scores: Vec<f32>,
    pub merges: Vec<String>,
}

impl SmallVocab {
    /// A byte-level BPE vocabulary: the 256 byte characters, then `extra` (normal tokens),
    /// then `specials` (control tokens), with merges building each extra token left to right.
    pub fn byte_level(extra: &[&str], specials: &[&str]) -> SmallVocab {
        let byte_chars = super::unicode::ByteChars::new();
        let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_chars.char_of(b).to_string()).collect();
        let mut merges = Vec::new();
        for &word in extra {
            let chars: Vec<char> = word.chars().collect();
            let mut prefix = chars[0].to_string();
            for &c in &chars[1..] {
                merges.push(format!("{prefix} {c}"));
                prefix.push(c);
                if !tokens.contains(&prefix) {
                    tokens.push(prefix.clone());
                }
            }
        }
        let n_normal = tokens.len();
        tokens.extend(specials.iter().map(|s| s.to_string()));
        let mut types = vec![1; n_normal];
        types.extend(std::iter::repeat_n(3, specials.len()));
        let scores = vec![0.0; tokens.len()];
        SmallVocab { tokens, types, scores, merges }
    }

    pub fn spec(&self) -> TokenizerSpec<'_> {
        TokenizerSpec {
            model: "gpt2",
            pre: Some("qwen2"),
            tokens: &self.tokens,
            scores: Some(self.scores.clone()),
            token_types: Some(&self.types),
            merges: Some(&self.merges),
            ..TokenizerSpec::default()
        }
    }

    pub fn id(&self, text: &str) -> u32 {
        self.tokens.iter().position(|t| t == text).expect("token in the small vocabulary") as u32
    }
}
