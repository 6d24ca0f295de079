//! Transformer models read from a GGUF file: hyperparameters ([`Config`]), tensors as views
//! into the file's bytes ([`weights`]), the KV cache, and the forward pass.
//!
//! A [`Model`] owns the one copy of the file. Matrices are byte ranges into it, so loading
//! costs validation only; no weight matrix is copied or dequantized up front.

mod arch;
pub(crate) mod attention;
pub use attention::AttentionPrecision;
pub(crate) mod backend;
mod bytes;
mod cache;
mod config;
mod cpu;
pub(crate) mod delta_net;
mod error;
pub(crate) mod experts;
mod forward;
mod loader;
mod mamba2;
pub(crate) mod ops;
mod weights;

pub use arch::{ARCHITECTURES, Activation, ArchSpec, Architecture, Family, Gating};
pub use bytes::{ModelBytes, piece_starts};
pub use cache::{CHECKPOINT_INTERVAL, Cache, Checkpoint, Checkpoints, KvRows, KvType, KvTypes};
pub use config::{
    Config, DeltaNet, Experts, LayerShape, MAX_EXPERTS, Mamba2, Rope, RopeStyle, ShortConv, Yarn,
};
pub use cpu::Scratch;
pub use delta_net::DeltaInputs;
// The GPU backend (src/gpu) runs the same pass and embeds the same way.
#[cfg(feature = "gpu")]
pub(crate) use cpu::embeddings;
pub use error::ModelError;
pub(crate) use forward::BatchInput;
#[cfg(feature = "gpu")]
pub(crate) use forward::forward_batch;
pub use forward::{LogitsFor, Placement};
pub use loader::{FileLoader, LoadError};
pub(crate) use weights::Tensors;
pub use weights::{
    AttentionWeights, DeltaNetWeights, EncoderInput, ExpertWeights, FeedForward, Ffn, LayerWeights,
    Mamba2Weights, Matrix, Mixer, Norm, OutputHead, PerLayerInput, PerLayerWeights, ShortConvWeights,
    Weights,
};

use crate::gguf::{GgmlType, GgufHeader, Metadata};
use crate::tensor::{clamp_q8_0_quants, first_non_finite_f16};

pub struct Model {
    config: Config,
    weights: Weights,
    header: GgufHeader,
    file: ModelBytes,
}

impl Model {
    /// Parses and validates `file` (a whole GGUF file, in one piece or several) and takes
    /// ownership of it.
    pub fn load(file: impl Into<ModelBytes>) -> Result<Model, ModelError> {
        let file = file.into();
        let header = file.header()?;
        Self::with_header(header, file)
    }

    /// [`Model::load`] with the header parsed already: the header of `file` as it is laid out
    /// (a model streamed to the GPU keeps its header with its tensors' offsets renumbered in the
    /// bytes it holds, `gpu::WeightStream`).
    pub(crate) fn with_header(header: GgufHeader, mut file: ModelBytes) -> Result<Model, ModelError> {
        let config = config_of(&header)?;
        let weights = Weights::load(&header, Some(&file), &config)?;
        clamp_q8_0_tensors(&header, &mut file);
        check_f16_tensors_are_finite(&header, &file)?;
        Ok(Model { config, weights, header, file })
    }

    /// Everything [`Model::load`] checks that a header alone can tell (hyperparameters, every
    /// tensor's presence, shape, type and byte size): whether the file would load, for the
    /// inspector, without its tensor data.
    pub fn check_header(header: &GgufHeader) -> Result<Config, ModelError> {
        let config = config_of(header)?;
        Weights::load(header, None, &config)?;
        Ok(config)
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

    /// Every matrix a forward pass multiplies by, each once ([`Weights::decode_matrices`]).
    pub fn decode_matrices(&self) -> impl Iterator<Item = &Matrix> {
        self.weights.decode_matrices()
    }

    /// Bytes of weights one decode step reads ([`Model::decode_matrices`]): a benchmark's
    /// weight bandwidth is this times the decode rate.
    pub fn decode_weight_bytes(&self) -> u64 {
        let all: u64 = self.decode_matrices().map(|m| m.range.len() as u64).sum();
        // A token reads only its chosen experts: the others' bytes are not streamed.
        let unused: u64 = match self.config.experts {
            Some(shape) => {
                let idle = |e: &ExpertWeights| -> u64 {
                    let one: u64 = [&e.gate, &e.up, &e.down].iter().map(|s| s[0].range.len() as u64).sum();
                    one * (shape.count - shape.used) as u64
                };
                self.weights
                    .layers
                    .iter()
                    .filter_map(|l| match &l.ffn {
                        Ffn::Experts(e) => Some(idle(e)),
                        Ffn::Dense(_) => None,
                    })
                    .sum()
            }
            None => 0,
        };
        all - unused
    }

    /// Whether this model's caches can be kept as `types` ([`Cache::new`] asks the same).
    pub fn check_cache_types(&self, types: KvTypes) -> Result<(), ModelError> {
        cache::check_types(&self.config, types)
    }

    /// A KV cache for `context` positions, its keys and values kept as `types`, and scratch
    /// space for batches of up to `max_batch`.
    pub fn new_state(
        &self,
        context: usize,
        max_batch: usize,
        types: KvTypes,
    ) -> Result<(Cache, Scratch), ModelError> {
        let cache = Cache::new(&self.config, context, types)?;
        Ok((cache, Scratch::new(&self.config, context, max_batch, types)?))
    }
}

/// Clamps the quants of every Q8_0 tensor to ggml's range ([`clamp_q8_0_quants`]). Tensors the
/// model does not use, and so [`Weights::load`] did not place, are skipped where they do not
/// lie inside one piece of the file.
fn clamp_q8_0_tensors(header: &GgufHeader, file: &mut ModelBytes) {
    for info in header.tensors.iter().filter(|info| info.ggml_type == GgmlType::Q8_0) {
        if let Some(tensor) = header.tensor_range(info).and_then(|range| file.get_mut(range)) {
            clamp_q8_0_quants(tensor);
        }
    }
}

/// Refuses an F16 tensor that holds an infinity or a NaN, as llama.cpp's `--check-tensors` does:
/// no trained model has one, and the SIMD128 kernels widen halves without looking for them
/// (a check took 2 of their 13 operations per 8 weights). Tensors skipped as in
/// [`clamp_q8_0_tensors`].
fn check_f16_tensors_are_finite(header: &GgufHeader, file: &ModelBytes) -> Result<(), ModelError> {
    for info in header.tensors.iter().filter(|info| info.ggml_type == GgmlType::F16) {
        let tensor = header.tensor_range(info).and_then(|range| file.get(range));
        if let Some(element) = tensor.and_then(first_non_finite_f16) {
            return Err(non_finite_f16(&info.name, element));
        }
    }
    Ok(())
}

/// The refusal of an F16 tensor whose element `element` is an infinity or a NaN (the GPU's
/// streamed load checks the same as the bytes pass).
pub(crate) fn non_finite_f16(name: &str, element: usize) -> ModelError {
    ModelError::BadTensor {
        name: name.into(),
        reason: format!("holds an infinity or NaN (F16 element {element}), which no trained model has"),
    }
}

/// The hyperparameters, with the vocabulary size from `token_embd`'s rows.
fn config_of(header: &GgufHeader) -> Result<Config, ModelError> {
    // A shard of a split model first: a later shard has no architecture or tokenizer, and
    // saying so is clearer than naming the first key it lacks.
    if let Some((no, count)) = crate::gguf::split::shard_of(&header.metadata).filter(|_| header.shards == 1) {
        return Err(ModelError::SplitFile { no, count });
    }
    // A projector file next: it has no token embeddings either, and naming what it is beats
    // naming the tensor it lacks.
    if let Some(projector) = crate::vision::ProjectorFacts::of(header) {
        return Err(ModelError::ProjectorFile(projector.refusal()));
    }
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
    Config::from_metadata(&header.metadata, vocab_size)
}
