//! The loaded model and the conversations run on it, driven one step at a time so a caller
//! (the CLI, the Web Worker) can stream each token and stop between any two.
//!
//! An [`Engine`] is what a file becomes: model, tokenizer, chat template. A [`Session`] is one
//! conversation's state: the KV cache, the tokens it holds, the logits of the last one. A
//! session never recomputes what its cache already holds: [`Session::sync`] keeps the longest
//! common prefix of the old and new token sequences and evaluates only the rest, so a chat
//! turn prefills just the new message, and rolling back to branch is a truncation.

mod error;

pub use error::EngineError;

use crate::chat::{ChatMessage, ChatTemplate, RenderOptions};
use crate::gguf::{GgufHeader, Metadata};
use crate::model::{Cache, LogitsFor, Model, ModelBytes, Scratch};
use crate::sampler::{Sampler, SamplerSettings, StepTrace};
use crate::tokenizer::{EncodeOptions, Tokenizer, Utf8Stream, token_count};

/// Tokens per forward call during prefill: large enough that every weight block is reused
/// across many rows, small enough that the scratch buffers stay a few MB.
pub const PREFILL_BATCH: usize = 64;

pub struct Engine {
    model: Model,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    /// Bytes of the longest vocabulary entry: a prompt of n tokens spells at most n times this.
    longest_token: usize,
}

impl Engine {
    /// Validates and takes ownership of a whole GGUF file.
    pub fn load(file: impl Into<ModelBytes>) -> Result<Engine, EngineError> {
        let model = Model::load(file)?;
        let (tokenizer, template) = tokenizer_and_template(model.metadata(), model.config().vocab_size)?;
        let longest_token = (0..tokenizer.vocab_size() as u32)
            .filter_map(|id| tokenizer.token_str(id))
            .map(str::len)
            .max()
            .unwrap_or(1)
            .max(1);
        Ok(Engine { model, tokenizer, template, longest_token })
    }

    /// Whether a file with this header would load, from the header alone (what the inspector
    /// says before anything is loaded): every check of [`Engine::load`] but the tensor data's.
    pub fn check_header(header: &GgufHeader) -> Result<(), EngineError> {
        let config = Model::check_header(header)?;
        tokenizer_and_template(&header.metadata, config.vocab_size).map(drop)
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn template(&self) -> &ChatTemplate {
        &self.template
    }

    /// Tokenizes prompt text with llama.cpp's defaults (special tokens parsed, BOS when the
    /// model asks for it) but never a second BOS when the text already starts with one, as
    /// rendered chat templates often do.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let bos_written = self
            .tokenizer
            .bos()
            .and_then(|id| self.tokenizer.token_str(id))
            .is_some_and(|bos| !bos.is_empty() && text.starts_with(bos));
        let options = EncodeOptions { add_special: !bos_written, ..EncodeOptions::default() };
        let mut ids = self.tokenizer.encode(text, options);
        if bos_written && self.tokenizer.adds_eos() {
            ids.extend(self.tokenizer.eos());
        }
        ids
    }

    /// The prompt tokens of a conversation, ready for the assistant's next turn, for a context
    /// of `context` tokens. A rendered text longer than `context` tokens could spell (the
    /// longest vocabulary entry's bytes per token) is refused before it is tokenized: a
    /// template can render hundreds of megabytes (`{{ 'a ' * 50000000 }}`), and tokenizing them
    /// only to learn that they do not fit took seconds and gigabytes.
    pub fn chat_prompt(
        &self,
        messages: &[ChatMessage],
        enable_thinking: Option<bool>,
        context: usize,
    ) -> Result<Vec<u32>, EngineError> {
        let options = RenderOptions { add_generation_prompt: true, enable_thinking };
        let text = self.template.render(messages, options)?;
        if text.len() > context.saturating_mul(self.longest_token) {
            return Err(EngineError::RenderedPromptTooLong { bytes: text.len(), context });
        }
        Ok(self.encode(&text))
    }

    /// A token's text for display (control tokens as written, broken UTF-8 as "�").
    pub fn piece(&self, id: u32) -> String {
        String::from_utf8_lossy(self.tokenizer.token_bytes(id, true)).into_owned()
    }

    /// Sampling settings the file recommends (`general.sampling.*`, the keys llama.cpp reads),
    /// llama.cpp's defaults for whatever it leaves out or gets wrong.
    pub fn recommended_sampling(&self) -> SamplerSettings {
        let metadata = self.model.metadata();
        let number =
            |key: &str| metadata.get_f64(&format!("general.sampling.{key}")).filter(|v| v.is_finite());
        let mut settings = SamplerSettings::default();
        if let Some(v) = number("temp") {
            settings.temperature = v as f32;
        }
        if let Some(v) = number("top_k").filter(|v| *v >= 0.0) {
            settings.top_k = v as usize;
        }
        if let Some(v) = number("top_p") {
            settings.top_p = v as f32;
        }
        if let Some(v) = number("min_p") {
            settings.min_p = v as f32;
        }
        if let Some(v) = number("penalty_repeat") {
            settings.repeat_penalty = v as f32;
        }
        if let Some(v) = number("penalty_last_n").filter(|v| *v >= 0.0) {
            settings.repeat_last_n = v as usize;
        }
        if settings.validate().is_err() {
            return SamplerSettings::default();
        }
        settings
    }

    pub fn new_session(&self, context: usize) -> Result<Session, EngineError> {
        Session::new(self, context)
    }
}

/// The tokenizer and chat template `metadata` describes, for a model of `model_vocab` rows.
fn tokenizer_and_template(
    metadata: &Metadata,
    model_vocab: usize,
) -> Result<(Tokenizer, ChatTemplate), EngineError> {
    // Compared before the tokenizer is built: building one for a vocabulary the embedding does
    // not match would only spend memory on a file about to be refused.
    if let Some(tokens) = token_count(metadata).filter(|&tokens| tokens != model_vocab) {
        return Err(EngineError::VocabularyMismatch { tokenizer: tokens, model: model_vocab });
    }
    let tokenizer = Tokenizer::from_metadata(metadata)?;
    if tokenizer.vocab_size() != model_vocab {
        return Err(EngineError::VocabularyMismatch {
            tokenizer: tokenizer.vocab_size(),
            model: model_vocab,
        });
    }
    let template = ChatTemplate::for_model(metadata, &tokenizer)?;
    Ok((tokenizer, template))
}

/// What [`Session::sync`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncReport {
    /// Tokens kept from the cache.
    pub reused: usize,
    /// Tokens run through the model.
    pub evaluated: usize,
}

/// What one call of [`Session::sync_some`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncProgress {
    /// Tokens kept from the cache.
    pub reused: usize,
    /// Tokens run through the model by this call.
    pub evaluated: usize,
    /// Tokens still to evaluate.
    pub remaining: usize,
}

/// One generated token.
#[derive(Clone, Debug)]
pub struct Step {
    pub token: u32,
    /// Text completed by this token (empty while a character is still partial, and for
    /// control tokens).
    pub text: String,
    /// An end-of-generation token (EOS, `<|im_end|>`, `<end_of_turn>`...).
    pub end_of_generation: bool,
    pub trace: Option<StepTrace>,
}

pub struct Session {
    cache: Cache,
    scratch: Scratch,
    /// Tokens whose keys and values are in `cache`.
    evaluated: Vec<u32>,
    /// The last sampled token, not yet run through the model (the next step does that, so
    /// a generation that stops never pays for a forward pass it does not use).
    pending: Option<u32>,
    /// Logits after the last evaluated token; empty when there are none.
    logits: Vec<f32>,
    text: Utf8Stream,
}

impl Session {
    /// A session whose KV cache holds `context` tokens (the memory is allocated now).
    pub fn new(engine: &Engine, context: usize) -> Result<Session, EngineError> {
        let context = context.max(1);
        let (cache, scratch) = engine.model.new_state(context, PREFILL_BATCH.min(context))?;
        Ok(Session {
            cache,
            scratch,
            evaluated: Vec::new(),
            pending: None,
            logits: Vec::new(),
            text: Utf8Stream::default(),
        })
    }

    pub fn context_len(&self) -> usize {
        self.cache.capacity()
    }

    /// Every token of the conversation so far, including a sampled one not yet evaluated.
    pub fn tokens(&self) -> Vec<u32> {
        self.evaluated.iter().copied().chain(self.pending).collect()
    }

    pub fn len(&self) -> usize {
        self.evaluated.len() + usize::from(self.pending.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn kv_cache_bytes(&self) -> usize {
        self.cache.bytes()
    }

    /// The memory this conversation costs besides the model: KV cache, scratch buffers and
    /// logits, all proportional to the context (and prefill batch) it was created with.
    pub fn state_bytes(&self, engine: &Engine) -> usize {
        let config = engine.model.config();
        let logits = config.vocab_size.saturating_mul(4);
        self.cache.bytes().saturating_add(self.scratch.bytes(config)).saturating_add(logits)
    }

    /// Makes the session hold exactly `tokens`, with logits for the last one, evaluating only
    /// what differs from what it holds.
    pub fn sync(&mut self, engine: &Engine, tokens: &[u32]) -> Result<SyncReport, EngineError> {
        let progress = self.sync_some(engine, tokens, usize::MAX)?;
        Ok(SyncReport { reused: progress.reused, evaluated: progress.evaluated })
    }

    /// [`Session::sync`] in parts: evaluates at most `budget` of the missing tokens. Called
    /// again with the same `tokens`, it goes on where it stopped (what it evaluated is now a
    /// common prefix), so a caller can report progress and stop a long prefill between parts.
    /// Logits exist once `remaining` is 0.
    pub fn sync_some(
        &mut self,
        engine: &Engine,
        tokens: &[u32],
        budget: usize,
    ) -> Result<SyncProgress, EngineError> {
        if tokens.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        if tokens.len() > self.context_len() {
            return Err(EngineError::PromptTooLong { tokens: tokens.len(), context: self.context_len() });
        }
        let held = self.tokens();
        let common = held.iter().zip(tokens).take_while(|(a, b)| a == b).count();
        if common == tokens.len() && common == self.evaluated.len() && !self.logits.is_empty() {
            return Ok(SyncProgress { reused: common, evaluated: 0, remaining: 0 });
        }
        // Logits exist only for the last evaluated token: when the prompt is all cached, the
        // last token is evaluated again to get them.
        let keep = common.min(self.evaluated.len()).min(tokens.len() - 1);
        self.truncate(keep);
        self.text = Utf8Stream::default();
        let end = keep.saturating_add(budget.max(1)).min(tokens.len());
        let logits_for = if end == tokens.len() { LogitsFor::Last } else { LogitsFor::None };
        self.evaluate(engine, &tokens[keep..end], logits_for)?;
        Ok(SyncProgress { reused: keep, evaluated: end - keep, remaining: tokens.len() - end })
    }

    /// Forgets everything after the first `len` tokens (rolling back to branch).
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.pending = None;
            // Bytes of a half-finished character belong to the tokens just dropped.
            self.text = Utf8Stream::default();
        }
        if len < self.evaluated.len() {
            self.evaluated.truncate(len);
            self.cache.truncate(len);
            self.logits.clear();
        }
    }

    /// Samples the next token (or takes `forced`, explaining the step all the same).
    pub fn step(
        &mut self,
        engine: &Engine,
        sampler: &mut Sampler,
        forced: Option<u32>,
        trace_top: usize,
    ) -> Result<Step, EngineError> {
        if let Some(token) = self.pending.take() {
            self.evaluate(engine, &[token], LogitsFor::Last)?;
        }
        if self.logits.is_empty() {
            // After a rollback only the cache is left: re-run the last token for its logits.
            let last = self.evaluated.pop().ok_or(EngineError::NothingToContinue)?;
            self.cache.truncate(self.evaluated.len());
            self.evaluate(engine, &[last], LogitsFor::Last)?;
        }
        let sampled = match forced {
            Some(token) => sampler.force(&self.logits, &self.evaluated, token, trace_top)?,
            None => sampler.sample(&self.logits, &self.evaluated, trace_top)?,
        };
        let token = sampled.token;
        self.pending = Some(token);
        let end_of_generation = engine.tokenizer.is_end_of_generation(token);
        let text = if end_of_generation {
            self.text.finish()
        } else {
            self.text.push(engine.tokenizer.token_bytes(token, false))
        };
        Ok(Step { token, text, end_of_generation, trace: sampled.trace })
    }

    /// Room left for new tokens, counting a pending one as taken.
    pub fn room(&self) -> usize {
        self.context_len().saturating_sub(self.len())
    }

    fn evaluate(
        &mut self,
        engine: &Engine,
        tokens: &[u32],
        logits_for: LogitsFor,
    ) -> Result<(), EngineError> {
        self.logits.clear();
        let logits = match engine.model.forward(&mut self.cache, &mut self.scratch, tokens, logits_for) {
            Ok(logits) => logits,
            Err(error) => {
                // A batch that failed midway may have appended to the cache.
                self.cache.truncate(self.evaluated.len());
                return Err(error.into());
            }
        };
        self.logits.extend_from_slice(logits);
        self.evaluated.extend_from_slice(tokens);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
