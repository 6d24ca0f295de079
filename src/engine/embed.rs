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
/// Shorter texts share a batch.
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
        matches!(self.purpose(), Purpose::Embedding | Purpose::ChatAndEmbedding)
    }

    /// What the model is for, as the file says ([`Purpose::of`]).
    pub fn purpose(&self) -> Purpose {
        Purpose::of(self.model.metadata())
    }

    /// Every text's tokens, and the pooling, after checking the request: the pooling exists,
    /// `dimensions` fits, no text is empty or too long. [`Engine::embed`] runs this first; a
    /// caller that embeds batch by batch (the Web Worker, to stay stoppable) runs it on the
    /// whole request, so an error names the text by its place in it.
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

    /// How [`Engine::embed`] runs texts of these tokens: consecutive texts packed into
    /// batches of up to [`EMBED_BATCH`] tokens (each its own sequence), so that every weight
    /// block is read once for all of them. A text longer than a batch runs alone, in parts (an
    /// encoder's in one batch of its own);
    /// so does every text of a model with recurrent layers, whose state would run on from one
    /// text into the next. A caller that embeds part by part (the Web Worker) asks for these
    /// parts, and gets the same vectors.
    pub fn embedding_batches(&self, inputs: &[Vec<u32>]) -> Vec<std::ops::Range<usize>> {
        let config = self.model.config();
        let packs = !(0..config.n_layer).any(|l| config.is_recurrent(l));
        let mut batches = Vec::new();
        let mut next = 0;
        while next < inputs.len() {
            let (mut end, mut tokens) = (next, 0);
            while packs && end < inputs.len() && tokens + inputs[end].len() <= EMBED_BATCH {
                tokens += inputs[end].len();
                end += 1;
            }
            let end = end.max(next + 1);
            batches.push(next..end);
            next = end;
        }
        batches
    }

    /// One vector per text. Every text is checked ([`Engine::embedding_inputs`]) before any
    /// is run.
    pub fn embed(&self, texts: &[&str], options: EmbedOptions) -> Result<Embeddings, EngineError> {
        // Embeddings run on the CPU, which has no copy of weights streamed to the GPU.
        #[cfg(feature = "gpu")]
        if self.weights_on_gpu_only() {
            return Err(crate::gpu::GpuError::WeightsOnDevice.into());
        }
        let (pooling, inputs) = self.embedding_inputs(texts, options)?;
        let width = self.model.config().n_embd;
        let dimensions = options.dimensions.unwrap_or(width);
        let prompt_tokens: usize = inputs.iter().map(Vec::len).sum();
        if inputs.is_empty() {
            return Ok(Embeddings { vectors: Vec::new(), prompt_tokens, pooling });
        }
        let longest = inputs.iter().map(Vec::len).max().unwrap_or(0);
        // An encoder attends over a whole text at once: its longest must fit one batch.
        let batch = match self.model.config().causal {
            true => EMBED_BATCH,
            false => EMBED_BATCH.max(longest),
        };
        let batch = batch.min(prompt_tokens);
        // llama.cpp keeps no cache for an encoder: its keys and values reach attention as F16.
        let types = if self.model.config().causal { self.cache_types } else { Default::default() };
        let (mut cache, mut scratch) = self.model.new_state(longest.max(batch), batch, types)?;
        let finish = |mut vector: Vec<f32>| {
            vector.truncate(dimensions);
            if !options.raw {
                normalize(&mut vector);
            }
            vector
        };
        let mut vectors = Vec::with_capacity(inputs.len());
        for texts in self.embedding_batches(&inputs) {
            if texts.len() == 1 {
                // Last-token pooling needs the last row alone: the final layer's
                // feed-forward block then runs on that row only.
                let rows = if pooling == Pooling::Last { LogitsFor::Last } else { LogitsFor::All };
                cache.truncate(0);
                let hidden =
                    self.model.hidden_states(&mut cache, &mut scratch, &inputs[texts.start], rows)?;
                vectors.push(finish(pool(pooling, hidden, width)));
                continue;
            }
            let sequences: Vec<&[u32]> = inputs[texts].iter().map(Vec::as_slice).collect();
            let mut hidden = self.model.hidden_states_packed(&mut cache, &mut scratch, &sequences)?;
            for sequence in &sequences {
                let (rows, rest) = hidden.split_at(sequence.len() * width);
                vectors.push(finish(pool(pooling, rows, width)));
                hidden = rest;
            }
        }
        Ok(Embeddings { vectors, prompt_tokens, pooling })
    }
}
