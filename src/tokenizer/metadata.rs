//! Reading `tokenizer.ggml.*` from GGUF metadata into a [`TokenizerSpec`], checking types.

use crate::gguf::{Array, Metadata, Value};

use super::TokenizerSpec;
use super::error::TokenizerError;
use super::vocab::{SpecialRole, check_vocabulary_size};

const MODEL: &str = "tokenizer.ggml.model";
const PRE: &str = "tokenizer.ggml.pre";
const TOKENS: &str = "tokenizer.ggml.tokens";
const SCORES: &str = "tokenizer.ggml.scores";
const TOKEN_TYPES: &str = "tokenizer.ggml.token_type";
const MERGES: &str = "tokenizer.ggml.merges";
const ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
const ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
const ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
const LOWERCASE: &str = "tokenizer.ggml.normalizer.lowercase";
const STRIP_ACCENTS: &str = "tokenizer.ggml.normalizer.strip_accents";

/// Older names of the fill-in-the-middle ids, read after (and so winning over) the new ones,
/// as llama.cpp does.
const DEPRECATED_FIM_KEYS: [(&str, SpecialRole); 3] = [
    ("tokenizer.ggml.prefix_token_id", SpecialRole::FimPre),
    ("tokenizer.ggml.suffix_token_id", SpecialRole::FimSuf),
    ("tokenizer.ggml.middle_token_id", SpecialRole::FimMid),
];

/// The length of `tokenizer.ggml.tokens`, if the file has that array: what a model's embedding
/// rows are compared with before any tokenizer is built.
pub fn token_count(md: &Metadata) -> Option<usize> {
    match md.get(TOKENS) {
        Some(Value::Array(Array::String(tokens))) => Some(tokens.len()),
        _ => None,
    }
}

pub(super) fn spec_from_metadata(md: &Metadata) -> Result<TokenizerSpec<'_>, TokenizerError> {
    let model = string(md, MODEL)?.ok_or(TokenizerError::MissingKey(MODEL))?;
    let tokens = match md.get(TOKENS) {
        None => return Err(TokenizerError::MissingKey(TOKENS)),
        Some(Value::Array(Array::String(tokens))) => tokens.as_slice(),
        Some(_) => return Err(wrong_type(TOKENS, "an array of strings")),
    };
    check_vocabulary_size(tokens.len())?;
    let scores = match md.get(SCORES) {
        None => None,
        Some(Value::Array(Array::F32(scores))) => Some(scores.clone()),
        Some(Value::Array(Array::I32(scores))) => Some(scores.iter().map(|&s| s as f32).collect()),
        Some(_) => return Err(wrong_type(SCORES, "an array of f32 or i32")),
    };
    let token_types = match md.get(TOKEN_TYPES) {
        None => None,
        Some(Value::Array(Array::I32(types))) => Some(types.as_slice()),
        Some(_) => return Err(wrong_type(TOKEN_TYPES, "an array of i32")),
    };
    let merges = match md.get(MERGES) {
        None => None,
        Some(Value::Array(Array::String(merges))) => Some(merges.as_slice()),
        Some(_) => return Err(wrong_type(MERGES, "an array of strings")),
    };

    let mut special_ids = Vec::new();
    let keys = SpecialRole::ALL.iter().map(|&role| (role.metadata_key(), role)).chain(DEPRECATED_FIM_KEYS);
    for (key, role) in keys {
        if let Some(value) = md.get(key) {
            let id = value.as_u64().ok_or_else(|| wrong_type(key, "a non-negative integer"))?;
            special_ids.push((role, id));
        }
    }

    Ok(TokenizerSpec {
        model,
        pre: string(md, PRE)?,
        tokens,
        scores,
        token_types,
        merges,
        add_bos: boolean(md, ADD_BOS)?,
        add_eos: boolean(md, ADD_EOS)?,
        add_space_prefix: boolean(md, ADD_SPACE_PREFIX)?,
        lowercase: boolean(md, LOWERCASE)?,
        strip_accents: boolean(md, STRIP_ACCENTS)?,
        special_ids,
        model_name: md.get_str("general.name"),
    })
}

fn wrong_type(key: &'static str, expected: &'static str) -> TokenizerError {
    TokenizerError::WrongType { key, expected }
}

fn string<'m>(md: &'m Metadata, key: &'static str) -> Result<Option<&'m str>, TokenizerError> {
    match md.get(key) {
        None => Ok(None),
        Some(value) => value.as_str().map(Some).ok_or_else(|| wrong_type(key, "a string")),
    }
}

fn boolean(md: &Metadata, key: &'static str) -> Result<Option<bool>, TokenizerError> {
    match md.get(key) {
        None => Ok(None),
        Some(value) => value.as_bool().map(Some).ok_or_else(|| wrong_type(key, "a bool")),
    }
}
