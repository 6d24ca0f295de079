//! Sentence embeddings on an [`Engine`]: each text tokenized as llama.cpp's embedding paths do
//! (BOS/EOS where the file asks, control-token text read as plain text), run through the
//! model on the CPU, its final hidden states pooled ([`crate::embedding`]).

use super::{Engine, EngineError};
use crate::embedding::{EmbedOptions, Pooling, Purpose, normalize, pool};
use crate::model::LogitsFor;
use crate::tokenizer::EncodeOptions;

/// Tokens per forward call: llama.cpp's default `n_ubatch`, so that a text of up to this many
/// tokens runs in one batch as there (in 64-token parts, as a chat's prefill, a 65-token text's
/// last-token vector moved to a cosine of 0.99988 from llama.cpp's; in one, it is the same).
const EMBED_BATCH: usize = 512;

/// Embeddings of several texts, in their order.
#[derive(Clone, Debug, PartialEq)]
pub struct Embeddings {
    pub vectors: Vec<Vec<f32>>,
    /// Tokens of every text together (OpenAI's `usage.prompt_tokens`).
    pub prompt_tokens: usize,
    pub pooling: Pooling,
}

impl Engine {
    /// The pooling an embedding uses: `asked`, else the file's. A chat model's file declares
    /// none, so it embeds only with `asked`; a reranker's pooling is not an embedding.
    pub fn embedding_pooling(&self, asked: Option<Pooling>) -> Result<Pooling, EngineError> {
        let declared = self.model.config().pooling;
        match asked.or(declared) {
            Some(pooling) if pooling.gives_one_vector() => Ok(pooling),
            pooling => Err(EngineError::NoPooling { pooling }),
        }
    }

    /// Whether the file is made for embeddings (it declares a pooling that gives one vector).
    pub fn is_embedding_model(&self) -> bool {
        self.model.config().pooling.is_some_and(Pooling::gives_one_vector)
    }

    /// What the model is for, as the file says ([`Purpose::of`]).
    pub fn purpose(&self) -> Purpose {
        Purpose::of(self.model.metadata())
    }

    /// Every text's tokens, and the pooling, after checking the request: the pooling exists,
    /// `dimensions` fits, no text is empty or too long. [`Engine::embed`] runs this first; a
    /// caller that embeds one text at a time (the Web Worker, to stay stoppable) runs it on
    /// the whole request, so an error names the text by its place in it.
    pub fn embedding_inputs(
        &self,
        texts: &[&str],
        options: EmbedOptions,
    ) -> Result<(Pooling, Vec<Vec<u32>>), EngineError> {
        let pooling = self.embedding_pooling(options.pooling)?;
        let width = self.model.config().n_embd;
        let dimensions = options.dimensions.unwrap_or(width);
        if dimensions == 0 || dimensions > width {
            return Err(EngineError::BadDimensions { asked: dimensions, width });
        }
        let limit = self.model.config().context_length;
        let encode = EncodeOptions { add_special: true, parse_special: false };
        let mut inputs = Vec::with_capacity(texts.len());
        for (index, text) in texts.iter().enumerate() {
            if text.is_empty() {
                return Err(EngineError::EmptyInput { index });
            }
            // A text of n bytes is at most n tokens plus BOS and EOS: refused before
            // tokenizing what could never fit.
            if text.len() > limit.saturating_mul(self.longest_token) {
                return Err(EngineError::InputTooLong { index, tokens: None, limit });
            }
            let tokens = self.tokenizer.encode(text, encode);
            if tokens.len() > limit {
                return Err(EngineError::InputTooLong { index, tokens: Some(tokens.len()), limit });
            }
            inputs.push(tokens);
        }
        Ok((pooling, inputs))
    }

    /// One vector per text. Every text is checked ([`Engine::embedding_inputs`]) before any
    /// is run.
    pub fn embed(&self, texts: &[&str], options: EmbedOptions) -> Result<Embeddings, EngineError> {
        let (pooling, inputs) = self.embedding_inputs(texts, options)?;
        let width = self.model.config().n_embd;
        let dimensions = options.dimensions.unwrap_or(width);
        let longest = inputs.iter().map(Vec::len).max().unwrap_or(0);
        let prompt_tokens = inputs.iter().map(Vec::len).sum();
        if inputs.is_empty() {
            return Ok(Embeddings { vectors: Vec::new(), prompt_tokens, pooling });
        }
        let (mut cache, mut scratch) = self.model.new_state(longest, EMBED_BATCH.min(longest))?;
        // Last-token pooling needs the last row alone: the final layer's feed-forward block
        // then runs on that row only (its vector stays llama.cpp's to the bit).
        let rows = if pooling == Pooling::Last { LogitsFor::Last } else { LogitsFor::All };
        let mut vectors = Vec::with_capacity(inputs.len());
        for tokens in &inputs {
            cache.truncate(0);
            let hidden = self.model.hidden_states(&mut cache, &mut scratch, tokens, rows)?;
            let mut vector = pool(pooling, hidden, width);
            vector.truncate(dimensions);
            if !options.raw {
                normalize(&mut vector);
            }
            vectors.push(vector);
        }
        Ok(Embeddings { vectors, prompt_tokens, pooling })
    }
}
