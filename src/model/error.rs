//! Why a model could not be built from a file, or a forward pass could not run.

use std::fmt;

use super::Architecture;
use crate::gguf::GgufError;
use crate::tensor::TensorError;

/// Everything that can be wrong with a model file's architecture metadata and tensors, or with
/// a request to run it. Each variant names the key or tensor it is about.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelError {
    Gguf(GgufError),
    /// `general.architecture` is missing or names an architecture this crate does not run.
    UnsupportedArchitecture(String),
    MissingKey(String),
    /// A key is present but its value has the wrong type or an impossible value.
    BadKey {
        key: String,
        reason: String,
    },
    MissingTensor(String),
    /// A tensor whose bytes are impossible: outside the file, or not as many as its shape and
    /// type make.
    BadTensor {
        name: String,
        reason: String,
    },
    /// A tensor whose dimensions differ from what the hyperparameters imply.
    TensorShape {
        name: String,
        expected: Vec<u64>,
        found: Vec<u64>,
    },
    /// A tensor stored in a ggml type the kernels do not implement.
    UnsupportedTensorType {
        name: String,
        ggml_type: String,
    },
    /// A kernel rejected a shape (should not happen once the model is validated).
    Tensor(TensorError),
    /// A buffer (KV cache, scratch) could not be allocated.
    OutOfMemory {
        what: &'static str,
        bytes: usize,
    },
    /// The KV cache holds `capacity` positions and the request needs `needed`.
    ContextFull {
        needed: usize,
        capacity: usize,
    },
    TokenOutOfRange {
        token: u32,
        vocab_size: usize,
    },
    /// The file is one shard of a model split with `gguf-split` (`split.no` counts from 0).
    SplitFile {
        no: u64,
        count: u64,
    },
    /// The file is a vision projector (mmproj), not a language model: the text says for
    /// which family, and why it does not load.
    ProjectorFile(String),
    /// A vision projector of a type whose encoder Inferno does not have (the text names it).
    UnsupportedProjector(String),
    /// A vision projector whose metadata cannot be used (the text says what is wrong).
    BadProjector(String),
    /// A picture that cannot be read (the text says why).
    BadImage(String),
    /// A picture with more pixels than [`crate::vision::MAX_PIXELS`], refused before any
    /// buffer is sized by it.
    ImageTooLarge {
        width: usize,
        height: usize,
        max_pixels: usize,
    },
    /// Logits asked of an encoder (BERT), which has no output layer: it only embeds.
    EmbeddingOnly(String),
    /// A requested context size of zero or beyond what the file supports.
    BadContextSize {
        requested: usize,
        maximum: usize,
    },
    /// A KV cache type whose blocks (`unit` values) do not divide the model's head size.
    UnfitCacheType {
        cache_type: &'static str,
        head_dim: usize,
        unit: usize,
    },
}

impl ModelError {
    /// A stable snake_case name for the kind of problem (for the page and `--json`); a GGUF
    /// error keeps its own kind (`bad_magic`, `truncated`...).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Gguf(e) => e.kind().name(),
            Self::UnsupportedArchitecture(_) => "unsupported_architecture",
            Self::MissingKey(_) => "missing_key",
            Self::BadKey { .. } => "bad_key",
            Self::MissingTensor(_) => "missing_tensor",
            Self::BadTensor { .. } => "bad_tensor",
            Self::TensorShape { .. } => "tensor_shape",
            Self::UnsupportedTensorType { .. } => "unsupported_tensor_type",
            Self::Tensor(_) => "tensor",
            Self::OutOfMemory { .. } => "out_of_memory",
            Self::ContextFull { .. } => "context_full",
            Self::TokenOutOfRange { .. } => "token_out_of_range",
            Self::BadContextSize { .. } => "bad_context_size",
            Self::UnfitCacheType { .. } => "unfit_cache_type",
            Self::SplitFile { .. } => "split_file",
            Self::ProjectorFile(_) => "projector_file",
            Self::EmbeddingOnly(_) => "embedding_only",
            Self::UnsupportedProjector(_) => "unsupported_projector",
            Self::BadProjector(_) => "bad_projector",
            Self::BadImage(_) => "bad_image",
            Self::ImageTooLarge { .. } => "image_too_large",
        }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Gguf(e) => write!(f, "{e}"),
            Self::SplitFile { no, count } => write!(
                f,
                "this file is shard {} of {count} of a model split with gguf-split: give all \
                 {count} files together",
                no.saturating_add(1)
            ),
            Self::ProjectorFile(refusal) => write!(f, "this file is {refusal}"),
            Self::UnsupportedProjector(what) => write!(f, "vision projector: {what}"),
            Self::BadProjector(what) => write!(f, "vision projector: {what}"),
            Self::BadImage(why) => write!(f, "the picture cannot be read: {why}"),
            Self::ImageTooLarge { width, height, max_pixels } => write!(
                f,
                "the picture is {width} × {height} pixels; Inferno takes at most {} megapixels \
                 and {} pixels a side: scale it down first",
                max_pixels >> 20,
                crate::vision::image::MAX_SIDE
            ),
            Self::EmbeddingOnly(arch) => write!(
                f,
                "`{arch}` is an encoder: it embeds text (engine.embeddings.create) and has no \
                 output layer to generate with"
            ),
            Self::UnsupportedArchitecture(arch) => {
                let supported: Vec<&str> = Architecture::all().map(Architecture::name).collect();
                write!(f, "architecture `{arch}` is not supported (supported: {})", supported.join(", "))
            }
            Self::MissingKey(key) => write!(f, "model metadata: missing key `{key}`"),
            Self::BadKey { key, reason } => write!(f, "model metadata: `{key}` {reason}"),
            Self::MissingTensor(name) => write!(f, "model tensors: `{name}` is missing"),
            Self::BadTensor { name, reason } => write!(f, "model tensors: `{name}` {reason}"),
            Self::TensorShape { name, expected, found } => {
                write!(f, "model tensors: `{name}` has shape {found:?}, expected {expected:?}")
            }
            Self::UnsupportedTensorType { name, ggml_type } => {
                write!(f, "model tensors: `{name}` is stored as {ggml_type}, which is not supported")
            }
            Self::Tensor(e) => write!(f, "tensor kernel: {e}"),
            Self::OutOfMemory { what, bytes } => {
                write!(f, "could not allocate {bytes} bytes for the {what}")
            }
            Self::ContextFull { needed, capacity } => {
                write!(f, "the context is full: {needed} positions needed, the session holds {capacity}")
            }
            Self::TokenOutOfRange { token, vocab_size } => {
                write!(f, "token id {token} is outside the vocabulary (size {vocab_size})")
            }
            Self::BadContextSize { requested, maximum } => {
                write!(f, "context size {requested} is not in 1..={maximum}")
            }
            Self::UnfitCacheType { cache_type, head_dim, unit } => write!(
                f,
                "a {cache_type} KV cache keeps blocks of {unit} values, which do not divide this \
                 model's head size of {head_dim}: use f16 or f32"
            ),
        }
    }
}

impl std::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Gguf(e) => Some(e),
            Self::Tensor(e) => Some(e),
            _ => None,
        }
    }
}

impl From<GgufError> for ModelError {
    fn from(e: GgufError) -> Self {
        Self::Gguf(e)
    }
}

impl From<TensorError> for ModelError {
    fn from(e: TensorError) -> Self {
        Self::Tensor(e)
    }
}

/// `Vec::with_capacity` that reports failure instead of aborting the process (wasm has no
/// overcommit: a multi-hundred-megabyte KV cache can fail to allocate).
pub(crate) fn try_zeroed<T: Clone + Default>(what: &'static str, len: usize) -> Result<Vec<T>, ModelError> {
    let bytes = len.saturating_mul(std::mem::size_of::<T>());
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| ModelError::OutOfMemory { what, bytes })?;
    v.resize(len, T::default());
    Ok(v)
}
