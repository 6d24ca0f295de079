//! The inspector's report: one serializable description of a GGUF header, shared by the CLI's
//! `--json` output and the page, so both always show the same facts.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value as Json;

use crate::gguf::{Array, GgufHeader, Metadata, Value};

/// How many elements of a long array the report shows.
pub const ARRAY_PREVIEW_LEN: usize = 16;
/// JavaScript numbers are exact up to 2^53; larger integers are reported as strings.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub file: FileFacts,
    pub gguf: FormatFacts,
    pub summary: Summary,
    pub metadata: Vec<MetadataEntry>,
    pub tensors: Vec<TensorRow>,
    pub types: Vec<TypeTotal>,
    pub hyperparameters: Vec<Hyperparameter>,
    pub tokenizer: Option<TokenizerFacts>,
    pub chat_template: Option<String>,
    /// A vision projector file's (mmproj's) own facts; `None` for every other file.
    pub vision: Option<crate::vision::ProjectorFacts>,
    /// Whether Inferno can load this file and chat with it, and if not, why.
    pub runs: Runs,
}

/// The inspector's "can it chat" line: every check loading does that the header can answer.
#[derive(Clone, Debug, Serialize)]
pub struct Runs {
    pub ok: bool,
    /// Why not, in the engine's words (the first check that fails).
    pub reason: Option<String>,
    /// It loads, but only to embed text: an encoder (BERT) has no output layer.
    pub embeds_only: bool,
    /// Refused only because this page's WebAssembly memory cannot hold the file (`reason`
    /// says why): where the page's GPU can take its weights instead, the worker says so.
    pub too_large: bool,
    /// It loads with its weights streamed into GPU memory, not WebAssembly memory (the
    /// worker's verdict for a file that is `too_large`).
    pub on_gpu: bool,
}

impl Runs {
    pub fn of(header: &GgufHeader) -> Runs {
        match crate::engine::Engine::check_header(header) {
            Ok(()) => {
                let architecture =
                    header.metadata.architecture().and_then(crate::model::Architecture::from_name);
                let embeds_only =
                    architecture.is_some_and(|a| a.spec().family == crate::model::Family::Encoder);
                Runs { ok: true, reason: None, embeds_only, too_large: false, on_gpu: false }
            }
            Err(e) => Runs::refused(e.to_string()),
        }
    }

    /// It does not run, for `reason`.
    pub fn refused(reason: String) -> Runs {
        Runs { ok: false, reason: Some(reason), embeds_only: false, too_large: false, on_gpu: false }
    }

    /// It would run, but this page's memory cannot hold a file this large, for `reason`.
    pub fn too_large(self, reason: String) -> Runs {
        Runs { ok: false, reason: Some(reason), too_large: true, ..self }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct FileFacts {
    pub size: u64,
    /// Bytes before the tensor data (what the page has to read).
    pub header_bytes: u64,
    pub tensor_bytes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct FormatFacts {
    pub version: u32,
    pub alignment: u64,
    pub data_offset: u64,
    pub tensor_count: usize,
    pub metadata_count: usize,
    /// Files of a model split with gguf-split (1 for a single file); the offsets then count
    /// from the start of the files laid end to end.
    pub shards: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub architecture: Option<String>,
    pub name: Option<String>,
    pub size_label: Option<String>,
    pub file_type: Option<String>,
    pub parameter_count: u64,
    pub quantization_mix: Vec<QuantShare>,
    /// Chat, embedding, both, or reranker, from the pooling the file declares.
    pub purpose: crate::embedding::Purpose,
    /// That pooling (`pooling_type`), where the file declares a valid one.
    pub pooling: Option<&'static str>,
}

#[derive(Clone, Debug, Serialize)]
pub struct QuantShare {
    #[serde(rename = "type")]
    pub type_name: &'static str,
    pub tensors: usize,
    pub bytes: u64,
    /// Fraction of all tensor bytes.
    pub share: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct MetadataEntry {
    pub key: String,
    #[serde(rename = "type")]
    pub value_type: &'static str,
    /// The value for scalars; `null` for arrays (see `array`).
    pub value: Json,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array: Option<ArraySummary>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ArraySummary {
    pub element_type: &'static str,
    pub length: usize,
    /// The first [`ARRAY_PREVIEW_LEN`] elements (nested arrays as `ArraySummary` objects).
    pub preview: Vec<Json>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TensorRow {
    pub name: String,
    pub dims: Vec<u64>,
    #[serde(rename = "type")]
    pub type_name: &'static str,
    pub type_id: u32,
    pub elements: u64,
    pub bytes: u64,
    /// Offset from the start of the data section.
    pub offset: u64,
    pub file_offset: u64,
    /// `N` for tensors named `blk.N.*`.
    pub layer: Option<u32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TypeTotal {
    #[serde(rename = "type")]
    pub type_name: &'static str,
    pub tensors: usize,
    pub elements: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Hyperparameter {
    /// The key without its `{architecture}.` prefix.
    pub key: String,
    pub value: Json,
}

#[derive(Clone, Debug, Serialize)]
pub struct TokenizerFacts {
    pub model: Option<String>,
    pub pre: Option<String>,
    pub vocab_size: usize,
    pub merges_count: usize,
    pub add_bos: Option<bool>,
    pub add_eos: Option<bool>,
    pub special: Vec<SpecialToken>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SpecialToken {
    /// `bos`, `eos`, `eot`, `unknown`, `padding`, …: the `tokenizer.ggml.{role}_token_id` key.
    pub role: String,
    pub id: u64,
    /// The token's text, when the id is inside the vocabulary.
    pub text: Option<String>,
}

impl Report {
    pub fn new(header: &GgufHeader) -> Report {
        let tensor_bytes = header.tensor_bytes();
        let types = type_totals(header);
        let metadata = &header.metadata;
        Report {
            file: FileFacts {
                size: header.file_size,
                header_bytes: header.data_offset.min(header.file_size),
                tensor_bytes,
            },
            gguf: FormatFacts {
                version: header.version,
                alignment: header.alignment,
                data_offset: header.data_offset,
                tensor_count: header.tensors.len(),
                metadata_count: metadata.len(),
                shards: header.shards,
            },
            summary: Summary {
                architecture: metadata.architecture().map(str::to_owned),
                name: metadata.get_str("general.name").map(str::to_owned),
                size_label: metadata.get_str("general.size_label").map(str::to_owned),
                file_type: metadata.get_u64("general.file_type").map(file_type_name),
                parameter_count: header.parameter_count(),
                quantization_mix: quantization_mix(&types, tensor_bytes),
                purpose: crate::embedding::Purpose::of(metadata),
                pooling: crate::embedding::Pooling::declared(metadata).map(crate::embedding::Pooling::name),
            },
            metadata: metadata
                .iter()
                .map(|(key, value)| MetadataEntry {
                    key: key.to_owned(),
                    value_type: value.value_type().name(),
                    value: match value {
                        Value::Array(_) => Json::Null,
                        scalar => scalar_json(scalar),
                    },
                    array: value.as_array().map(summarize_array),
                })
                .collect(),
            tensors: header
                .tensors
                .iter()
                .map(|t| TensorRow {
                    name: t.name.clone(),
                    dims: t.dims.clone(),
                    type_name: t.ggml_type.name(),
                    type_id: t.ggml_type.id(),
                    elements: t.n_elements,
                    bytes: t.n_bytes,
                    offset: t.offset,
                    file_offset: header.data_offset.saturating_add(t.offset),
                    layer: layer_of(&t.name),
                })
                .collect(),
            types,
            hyperparameters: hyperparameters(metadata),
            tokenizer: tokenizer_facts(metadata),
            chat_template: metadata.get_str("tokenizer.chat_template").map(str::to_owned),
            vision: crate::vision::ProjectorFacts::of(header),
            runs: Runs::of(header),
        }
    }
}

fn type_totals(header: &GgufHeader) -> Vec<TypeTotal> {
    let mut by_type = BTreeMap::new();
    for t in &header.tensors {
        let total = by_type.entry(t.ggml_type).or_insert(TypeTotal {
            type_name: t.ggml_type.name(),
            tensors: 0,
            elements: 0,
            bytes: 0,
        });
        total.tensors += 1;
        total.elements = total.elements.saturating_add(t.n_elements);
        total.bytes = total.bytes.saturating_add(t.n_bytes);
    }
    let mut totals: Vec<TypeTotal> = by_type.into_values().collect();
    totals.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.type_name.cmp(b.type_name)));
    totals
}

fn quantization_mix(types: &[TypeTotal], tensor_bytes: u64) -> Vec<QuantShare> {
    types
        .iter()
        .map(|t| QuantShare {
            type_name: t.type_name,
            tensors: t.tensors,
            bytes: t.bytes,
            share: if tensor_bytes == 0 { 0.0 } else { t.bytes as f64 / tensor_bytes as f64 },
        })
        .collect()
}

/// `blk.12.attn_q.weight` → 12.
pub fn layer_of(tensor_name: &str) -> Option<u32> {
    let rest = tensor_name.strip_prefix("blk.")?;
    rest.split('.').next()?.parse().ok()
}

/// llama.cpp's `LLAMA_FTYPE_*` names for `general.file_type`.
pub fn file_type_name(file_type: u64) -> String {
    let name = match file_type {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4_MOE",
        other => return format!("unknown ({other})"),
    };
    name.to_owned()
}

fn integer_json(v: u64) -> Json {
    if v <= MAX_SAFE_INTEGER { Json::from(v) } else { Json::from(v.to_string()) }
}

fn signed_json(v: i64) -> Json {
    if v.unsigned_abs() <= MAX_SAFE_INTEGER { Json::from(v) } else { Json::from(v.to_string()) }
}

/// A scalar as JSON (non-finite floats become their names as strings, which JSON lacks).
fn scalar_json(value: &Value) -> Json {
    let float =
        |f: f64| serde_json::Number::from_f64(f).map_or_else(|| Json::from(f.to_string()), Json::Number);
    match *value {
        Value::U8(v) => Json::from(v),
        Value::I8(v) => Json::from(v),
        Value::U16(v) => Json::from(v),
        Value::I16(v) => Json::from(v),
        Value::U32(v) => Json::from(v),
        Value::I32(v) => Json::from(v),
        Value::U64(v) => integer_json(v),
        Value::I64(v) => signed_json(v),
        Value::F32(v) => float(f64::from(v)),
        Value::F64(v) => float(v),
        Value::Bool(v) => Json::from(v),
        Value::String(ref s) => Json::from(s.as_str()),
        Value::Array(ref a) => serde_json::to_value(summarize_array(a)).unwrap_or(Json::Null),
    }
}

fn summarize_array(array: &Array) -> ArraySummary {
    ArraySummary {
        element_type: array.element_type().name(),
        length: array.len(),
        preview: (0..array.len().min(ARRAY_PREVIEW_LEN))
            .filter_map(|i| array.get(i))
            .map(|item| scalar_json(&item))
            .collect(),
    }
}

/// Metadata under `{architecture}.`, in file order, with the prefix stripped.
fn hyperparameters(metadata: &Metadata) -> Vec<Hyperparameter> {
    let Some(arch) = metadata.architecture() else {
        return Vec::new();
    };
    let prefix = format!("{arch}.");
    metadata
        .iter()
        .filter_map(|(key, value)| {
            Some(Hyperparameter { key: key.strip_prefix(&prefix)?.to_owned(), value: scalar_json(value) })
        })
        .collect()
}

fn tokenizer_facts(metadata: &Metadata) -> Option<TokenizerFacts> {
    let tokens = metadata.get_array("tokenizer.ggml.tokens");
    let model = metadata.get_str("tokenizer.ggml.model");
    if tokens.is_none() && model.is_none() {
        return None;
    }
    let token_text = |id: u64| match tokens {
        Some(Array::String(list)) => usize::try_from(id).ok().and_then(|i| list.get(i)).cloned(),
        _ => None,
    };
    let special = metadata
        .iter()
        .filter_map(|(key, value)| {
            let role = key.strip_prefix("tokenizer.ggml.")?.strip_suffix("_token_id")?;
            let id = value.as_u64()?;
            Some(SpecialToken { role: role.to_owned(), id, text: token_text(id) })
        })
        .collect();
    Some(TokenizerFacts {
        model: model.map(str::to_owned),
        pre: metadata.get_str("tokenizer.ggml.pre").map(str::to_owned),
        vocab_size: tokens.map_or(0, Array::len),
        merges_count: metadata.get_array("tokenizer.ggml.merges").map_or(0, Array::len),
        add_bos: metadata.get_bool("tokenizer.ggml.add_bos_token"),
        add_eos: metadata.get_bool("tokenizer.ggml.add_eos_token"),
        special,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_numbers_come_from_blk_names() {
        assert_eq!(layer_of("blk.12.attn_q.weight"), Some(12));
        assert_eq!(layer_of("token_embd.weight"), None);
        assert_eq!(layer_of("blk.x.attn_q.weight"), None);
    }

    #[test]
    fn huge_integers_become_strings_for_javascript() {
        assert_eq!(scalar_json(&Value::U64(1 << 53)), Json::from("9007199254740992"));
        assert_eq!(scalar_json(&Value::U64(42)), Json::from(42));
        assert_eq!(scalar_json(&Value::I64(i64::MIN)), Json::from(i64::MIN.to_string()));
        assert_eq!(scalar_json(&Value::F32(f32::NAN)), Json::from("NaN"));
    }
}
