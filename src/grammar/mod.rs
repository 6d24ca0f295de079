//! Constrained decoding: an answer that must follow a grammar (any JSON value, a JSON schema,
//! or a Lark grammar), as a mask over the vocabulary that the sampler applies before its
//! penalties and truncation. The grammar engine is llguidance, the one behind llama.cpp's
//! `--llguidance`, vLLM and SGLang; this module adapts our tokenizer to it and keeps its types
//! away from the sampler, which sees only a [`TokenMask`].

use std::fmt;
use std::sync::Arc;

use llguidance::api::{GrammarWithLexer, TopLevelGrammar};
use llguidance::toktrie::{self, ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};

use crate::tokenizer::Tokenizer;

/// What an answer must follow.
#[derive(Clone, Debug, PartialEq)]
pub enum GrammarSpec {
    /// Any JSON object (OpenAI's `response_format: {type: 'json_object'}`).
    JsonObject,
    /// A value valid against this JSON schema, every keyword of it enforced or the schema
    /// refused (`{type: 'json_schema', json_schema: {schema, strict: true}}`).
    JsonSchema(serde_json::Value),
    /// The same, where keywords the grammar engine cannot enforce (`uniqueItems`, an unknown
    /// `format`...) are left out and named in the constraint's warnings, as OpenAI's API
    /// treats a schema that is not `strict`.
    LenientJsonSchema(serde_json::Value),
    /// A grammar in llguidance's Lark syntax, for answers that are not JSON.
    Lark(String),
}

#[derive(Clone, Debug, PartialEq)]
pub enum GrammarError {
    /// The schema is not one the engine can compile (malformed, or a feature it lacks).
    Schema(String),
    /// The Lark grammar does not compile.
    Grammar(String),
    /// A token was forced (a branch) that the grammar does not allow there.
    Forbidden { token: u32 },
    /// The grammar engine failed mid-answer (a limit of its work per token was reached).
    Failed(String),
}

impl GrammarError {
    /// A stable snake_case name for the kind of problem.
    pub fn kind(&self) -> &'static str {
        match self {
            GrammarError::Schema(_) => "bad_schema",
            GrammarError::Grammar(_) => "bad_grammar",
            GrammarError::Forbidden { .. } => "grammar_forbids",
            GrammarError::Failed(_) => "grammar_failed",
        }
    }
}

impl fmt::Display for GrammarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GrammarError::Schema(why) => write!(f, "the JSON schema cannot be used: {why}"),
            GrammarError::Grammar(why) => write!(f, "the grammar does not compile: {why}"),
            GrammarError::Forbidden { token } => write!(f, "the grammar does not allow token {token} here"),
            GrammarError::Failed(why) => write!(f, "the grammar engine failed: {why}"),
        }
    }
}

impl std::error::Error for GrammarError {}

/// Which vocabulary entries a grammar allows at a step: bit `id % 32` of word `id / 32`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TokenMask {
    words: Vec<u32>,
    allowed: usize,
}

impl TokenMask {
    pub fn allows(&self, id: u32) -> bool {
        self.words.get(id as usize / 32).is_some_and(|w| w >> (id % 32) & 1 == 1)
    }

    /// How many entries are allowed.
    pub fn allowed(&self) -> usize {
        self.allowed
    }
}

/// What grammars compile against: our tokenizer as llguidance's trie of token bytes, built
/// once per model (a 150,000-entry vocabulary takes tens of milliseconds).
pub struct GrammarCompiler {
    factory: ParserFactory,
    end_tokens: Vec<u32>,
}

impl GrammarCompiler {
    /// The trie of `tokenizer`'s vocabulary; an answer ends at its end-of-generation tokens
    /// (the first one is the grammar's end of sequence, the others stand for it).
    pub fn new(tokenizer: &Tokenizer) -> Result<GrammarCompiler, GrammarError> {
        let end_tokens = tokenizer.end_of_generation_tokens().to_vec();
        let eos = end_tokens.first().copied().or(tokenizer.eos()).unwrap_or(0);
        let words: Vec<Vec<u8>> = (0..tokenizer.vocab_size() as u32)
            .map(|id| {
                let text = tokenizer.token_bytes(id, false);
                if text.is_empty() {
                    // Control tokens: llguidance marks specials with a leading 0xFF, then a name.
                    let mut special = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                    match tokenizer.token_bytes(id, true) {
                        [] => special.extend_from_slice(format!("<|token {id}|>").as_bytes()),
                        name => special.extend_from_slice(name),
                    }
                    special
                } else {
                    text.to_vec()
                }
            })
            .collect();
        let mut info = TokRxInfo::new(words.len() as u32, eos);
        info.tok_bos = tokenizer.bos();
        // Text the grammar forces is tokenized greedily over the trie (llguidance's own
        // approximation; it only decides how forced bytes split, never what is allowed).
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(TokTrie::from(&info, &words)));
        let mut factory = ParserFactory::new_simple(&env).map_err(|e| GrammarError::Failed(e.to_string()))?;
        factory.quiet();
        Ok(GrammarCompiler { factory, end_tokens })
    }

    /// A fresh constraint for `spec`, or why it cannot be had: every grammar is compiled (and
    /// a schema checked) here, before any token is generated.
    pub fn compile(&self, spec: &GrammarSpec) -> Result<Constraint, GrammarError> {
        let (grammar, bad): (TopLevelGrammar, fn(String) -> GrammarError) = match spec {
            GrammarSpec::JsonObject => (
                TopLevelGrammar::from_json_schema(with_json_layout(serde_json::json!({"type": "object"}))),
                GrammarError::Schema,
            ),
            GrammarSpec::JsonSchema(schema) => {
                (TopLevelGrammar::from_json_schema(with_json_layout(schema.clone())), GrammarError::Schema)
            }
            GrammarSpec::LenientJsonSchema(schema) => {
                let schema = lenient(with_json_layout(schema.clone()));
                (TopLevelGrammar::from_json_schema(schema), GrammarError::Schema)
            }
            GrammarSpec::Lark(text) => (
                TopLevelGrammar {
                    grammars: vec![GrammarWithLexer::from_lark(text.clone())],
                    max_tokens: None,
                },
                GrammarError::Grammar,
            ),
        };
        let parser = self.factory.create_parser(grammar).map_err(|e| bad(e.to_string()))?;
        let mut matcher = Matcher::new(Ok(parser));
        if let Some(error) = matcher.get_error() {
            return Err(bad(error));
        }
        let warnings = matcher.grammar_warnings();
        Ok(Constraint {
            matcher,
            end_tokens: self.end_tokens.clone(),
            consumed: 0,
            finished: false,
            warnings,
        })
    }
}

impl GrammarSpec {
    /// The same answer after `prefix` (a Lark sequence): a JSON answer becomes a Lark grammar
    /// that writes `prefix` and then the JSON, schema, layout and leniency unchanged. A Lark
    /// grammar is the caller's own and is left as it is.
    pub fn after(self, prefix: &str) -> GrammarSpec {
        let schema = match self {
            GrammarSpec::JsonObject => with_json_layout(serde_json::json!({"type": "object"})),
            GrammarSpec::JsonSchema(schema) => with_json_layout(schema),
            GrammarSpec::LenientJsonSchema(schema) => lenient(with_json_layout(schema)),
            lark @ GrammarSpec::Lark(_) => return lark,
        };
        GrammarSpec::Lark(format!("start: {prefix} answer\nanswer: %json {schema}\n"))
    }
}

/// `schema` with llama.cpp's JSON layout, unless it sets llguidance's own (`x-guidance`):
/// between tokens nothing, a space, or one or two newlines and up to 20 spaces or tabs of
/// indentation. llguidance's default allows any run of whitespace, which a model unsure of
/// what comes next (a small one, or one sampled hot) fills for hundreds of tokens.
pub(crate) fn with_json_layout(mut schema: serde_json::Value) -> serde_json::Value {
    if let Some(object) = schema.as_object_mut()
        && !object.contains_key("x-guidance")
    {
        let layout = serde_json::json!({"whitespace_pattern": r"(?: |\n{1,2}[ \t]{0,20})?"});
        object.insert("x-guidance".into(), layout);
    }
    schema
}

/// `schema` compiled leniently: llguidance's `lenient` layout option, beside the layout.
fn lenient(mut schema: serde_json::Value) -> serde_json::Value {
    if let Some(layout) = schema.get_mut("x-guidance").and_then(serde_json::Value::as_object_mut) {
        layout.entry("lenient").or_insert(serde_json::Value::Bool(true));
    }
    schema
}

/// One answer's progress through a grammar.
pub struct Constraint {
    matcher: Matcher,
    end_tokens: Vec<u32>,
    /// Tokens accepted so far (an end-of-generation token included).
    consumed: usize,
    finished: bool,
    /// What the grammar does not enforce of what it was asked (a lenient schema's keywords).
    warnings: Vec<String>,
}

impl Constraint {
    /// What of the grammar asked for is not enforced (empty unless a lenient schema left
    /// something out), in llguidance's words (`Unimplemented keys: ["uniqueItems"]`).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The tokens allowed next. Where the grammar may end, every end-of-generation token is
    /// allowed; once it must end, only they are.
    pub fn mask(&mut self) -> Result<TokenMask, GrammarError> {
        let vob = if self.finished || self.matcher.is_stopped() {
            let mut none = toktrie::SimpleVob::alloc(self.vocab_size());
            self.allow_end(&mut none);
            none
        } else {
            let mut vob = self.matcher.compute_mask().map_err(|e| GrammarError::Failed(e.to_string()))?;
            let eos = self.end_tokens.first().copied();
            if eos.is_some_and(|eos| vob.is_allowed(eos)) {
                self.allow_end(&mut vob);
            }
            vob
        };
        Ok(TokenMask { allowed: vob.num_set(), words: vob.as_slice().to_vec() })
    }

    fn vocab_size(&self) -> usize {
        self.matcher.tok_env().map_or(0, |env| env.tok_trie().vocab_size())
    }

    fn allow_end(&self, vob: &mut toktrie::SimpleVob) {
        for &token in &self.end_tokens {
            if (token as usize) < vob.len() {
                vob.allow_token(token);
            }
        }
    }

    /// Takes `token` as the answer's next one (an end-of-generation token ends the grammar).
    pub fn accept(&mut self, token: u32) -> Result<(), GrammarError> {
        if self.end_tokens.contains(&token) {
            self.finished = true;
        } else if self.finished {
            return Err(GrammarError::Forbidden { token });
        } else {
            self.matcher.consume_token(token).map_err(|_| GrammarError::Forbidden { token })?;
        }
        self.consumed += 1;
        Ok(())
    }

    /// Tokens accepted so far.
    pub fn consumed(&self) -> usize {
        self.consumed
    }

    /// Forgets the last `n` accepted tokens (a branch from an earlier step).
    pub fn rollback(&mut self, n: usize) -> Result<(), GrammarError> {
        let n = n.min(self.consumed);
        let mut grammar_tokens = n;
        if self.finished && n > 0 {
            self.finished = false;
            grammar_tokens -= 1;
        }
        self.matcher.rollback(grammar_tokens).map_err(|e| GrammarError::Failed(e.to_string()))?;
        self.consumed -= n;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
