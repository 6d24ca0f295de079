//! Transformer models read from a GGUF file: hyperparameters ([`Config`]), tensors as views
//! into the file's bytes ([`weights`]), the KV cache, and the forward pass.
//!
//! A [`Model`] owns the one copy of the file. Matrices are byte ranges into it, so loading
//! costs validation only; no weight matrix is copied or dequantized up front.

mod attention;
mod bytes;
mod config;
mod error;
mod forward;
mod kv_cache;
mod ops;
mod weights;

pub use bytes::{ModelBytes, piece_starts};
pub use config::{Architecture, Config, Rope, RopeStyle};
pub use error::ModelError;
pub use forward::{LogitsFor, Scratch};
pub use kv_cache::KvCache;
pub use weights::{LayerWeights, Matrix, Weights};

use crate::gguf::{GgufHeader, Metadata};

pub struct Model {
    config: Config,
    weights: Weights,
    /// Llama 3-style per-dimension RoPE frequency divisors (`rope_freqs.weight`), if present.
    rope_freqs: Option<Vec<f32>>,
    header: GgufHeader,
    file: ModelBytes,
}

impl Model {
    /// Parses and validates `file` (a whole GGUF file, in one piece or several) and takes
    /// ownership of it.
    pub fn load(file: impl Into<ModelBytes>) -> Result<Model, ModelError> {
        let file = file.into();
        let header = file.header()?;
        let embd = header
            .tensor("token_embd.weight")
            .ok_or_else(|| ModelError::MissingTensor("token_embd.weight".into()))?;
        let vocab_size = match embd.dims.as_slice() {
            [_, rows] => usize::try_from(*rows).unwrap_or(usize::MAX),
            dims => {
                return Err(ModelError::TensorShape {
                    name: "token_embd.weight".into(),
                    expected: vec![0, 0],
                    found: dims.to_vec(),
                });
            }
        };
        let config = Config::from_metadata(&header.metadata, vocab_size)?;
        let weights = Weights::load(&header, &file, &config)?;
        let rope_freqs = match header.tensor("rope_freqs.weight") {
            None => None,
            Some(info) => {
                let expected = vec![(config.rope_dims / 2) as u64];
                if info.dims != expected {
                    return Err(ModelError::TensorShape {
                        name: info.name.clone(),
                        expected,
                        found: info.dims.clone(),
                    });
                }
                let start =
                    usize::try_from(header.data_offset.saturating_add(info.offset)).unwrap_or(usize::MAX);
                let end = start.saturating_add(usize::try_from(info.n_bytes).unwrap_or(usize::MAX));
                let bytes = file.get(start..end).unwrap_or(&[]);
                let mut freqs = vec![0.0; config.rope_dims / 2];
                let weight_type = crate::tensor::WeightType::from_ggml_type_id(info.ggml_type.id())
                    .ok_or_else(|| ModelError::UnsupportedTensorType {
                        name: info.name.clone(),
                        ggml_type: info.ggml_type.name().into(),
                    })?;
                crate::tensor::dequantize_row(weight_type, bytes, &mut freqs)?;
                Some(freqs)
            }
        };
        Ok(Model { config, weights, rope_freqs, header, file })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    pub fn header(&self) -> &GgufHeader {
        &self.header
    }

    pub fn metadata(&self) -> &Metadata {
        &self.header.metadata
    }

    /// The whole file, as loaded.
    pub fn file(&self) -> &ModelBytes {
        &self.file
    }

    /// A KV cache for `context` positions and scratch space for batches of up to `max_batch`.
    pub fn new_state(&self, context: usize, max_batch: usize) -> Result<(KvCache, Scratch), ModelError> {
        Ok((KvCache::new(&self.config, context)?, Scratch::new(&self.config, context, max_batch)?))
    }
}
