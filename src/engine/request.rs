//! What a caller asks an answer with, as the worker (and any JSON caller) sends it: a chat
//! (`ChatRequest`), a plain prompt (`TextRequest`) or a branch of the last answer
//! (`BranchRequest`), each with its limits. These are the contract's requests: `contract.rs`
//! declares them to TypeScript (`www/lib/engine-types.d.ts`) from these types, and the web layer
//! only deserializes into them.

use serde::Deserialize;

use super::AnswerLimits;
use crate::chat::{ChatMessage, ReasoningEffort, Tool, ToolChoice};
use crate::grammar::{GrammarError, GrammarSpec};
use crate::sampler::SamplerSettings;

/// The KV cache a chat gets when it asks for none, in tokens (a cache grows with the context;
/// most chats in a page stay far below a model's trained length).
pub const DEFAULT_CONTEXT_CAP: usize = 4096;

/// The answers' tokens a request may ask for when it names no limit.
pub const DEFAULT_MAX_TOKENS: usize = 512;

/// How long an answer may run and what it reports: `{max_tokens?, trace_top?, stop?}`.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Deserialize, Default)]
pub struct LimitsRequest {
    #[serde(default)]
    #[cfg_attr(test, ts(optional))]
    pub max_tokens: Option<usize>,
    /// Candidates explained per step.
    #[serde(default)]
    #[cfg_attr(test, ts(optional, as = "Option<usize>"))]
    pub trace_top: usize,
    /// Stop strings (the answer ends before the first to appear).
    #[serde(default)]
    #[cfg_attr(test, ts(optional, as = "Option<Vec<String>>"))]
    pub stop: Vec<String>,
}

impl LimitsRequest {
    /// The limits of an answer whose first `kept` steps are a branch's: `max_tokens` counts
    /// them, and an answer without a limit gets [`DEFAULT_MAX_TOKENS`] new steps.
    pub fn limits(self, kept: usize) -> AnswerLimits {
        let max_tokens = match self.max_tokens {
            Some(most) => most.max(kept + 1),
            None => kept + DEFAULT_MAX_TOKENS,
        };
        AnswerLimits { max_tokens, stops: self.stop, trace_top: self.trace_top, ..AnswerLimits::default() }
    }
}

/// What any answer is asked with: the sampling, the cache size, and what it must follow.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Deserialize)]
pub struct AnswerRequest {
    /// The sampling; what it leaves out takes llama.cpp's defaults.
    #[serde(default)]
    #[cfg_attr(test, ts(type = "Partial<SamplerSettings>", optional))]
    pub settings: SamplerSettings,
    /// KV cache size in tokens; the model's context length (capped at [`DEFAULT_CONTEXT_CAP`])
    /// when absent.
    #[serde(default)]
    #[cfg_attr(test, ts(optional))]
    pub context: Option<usize>,
    /// What the answer must follow, if anything.
    #[serde(default)]
    #[cfg_attr(test, ts(optional))]
    pub grammar: Option<GrammarRequest>,
    #[serde(flatten)]
    pub limits: LimitsRequest,
}

/// A branch of the last answer: `{step, token, max_tokens?, trace_top?, stop?}`.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Deserialize)]
pub struct BranchRequest {
    pub step: usize,
    pub token: u32,
    #[serde(flatten)]
    pub limits: LimitsRequest,
}

#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    #[cfg_attr(test, ts(optional))]
    pub enable_thinking: Option<bool>,
    /// OpenAI's `reasoning_effort`, for templates that read it (gpt-oss); any other value than
    /// `'low'`, `'medium'` or `'high'` is refused (kind `bad_request`).
    #[serde(default)]
    #[cfg_attr(test, ts(optional))]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// OpenAI's `tools`, `tool_choice` and `parallel_tool_calls`.
    #[serde(default)]
    #[cfg_attr(test, ts(optional))]
    pub tools: Option<Vec<Tool>>,
    #[serde(default)]
    #[cfg_attr(
        test,
        ts(
            optional,
            type = r#""auto" | "none" | "required" | { type: "function", function: { name: string } }"#
        )
    )]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default)]
    #[cfg_attr(test, ts(optional))]
    pub parallel_tool_calls: Option<bool>,
    /// Read the reasoning apart from the content (default true).
    #[serde(default)]
    #[cfg_attr(test, ts(optional))]
    pub split_reasoning: Option<bool>,
    #[serde(flatten)]
    pub answer: AnswerRequest,
}

/// A legacy completion's request: the prompt as it is.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Deserialize)]
pub struct TextRequest {
    pub prompt: String,
    #[serde(flatten)]
    pub answer: AnswerRequest,
}

/// `{type: 'json_object'}`, `{type: 'json_schema', schema, strict?}` (the schema as JSON text) or
/// `{type: 'lark', grammar}`.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Deserialize, Clone)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum GrammarRequest {
    JsonObject,
    /// `strict`: every keyword enforced or the schema refused; else the ones the grammar
    /// engine lacks are left out, and the answer's `done` names them.
    JsonSchema {
        schema: String,
        #[serde(default)]
        #[cfg_attr(test, ts(optional, as = "Option<bool>"))]
        strict: bool,
    },
    Lark {
        grammar: String,
    },
}

impl GrammarRequest {
    pub fn spec(self) -> Result<GrammarSpec, GrammarError> {
        Ok(match self {
            GrammarRequest::JsonObject => GrammarSpec::JsonObject,
            GrammarRequest::JsonSchema { schema, strict } => {
                let schema =
                    serde_json::from_str(&schema).map_err(|e| GrammarError::Schema(e.to_string()))?;
                if strict { GrammarSpec::JsonSchema(schema) } else { GrammarSpec::LenientJsonSchema(schema) }
            }
            GrammarRequest::Lark { grammar } => GrammarSpec::Lark(grammar),
        })
    }
}
