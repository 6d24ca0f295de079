//! Inferno: inspect and run GGUF language models, natively and inside a web page.
//!
//! Read top to bottom, the modules follow the data: bytes of a file become a validated
//! [`gguf`] view, which an [`inspect`] report describes for people and scripts; the
//! [`tensor`] kernels compute on those bytes in place and the [`tokenizer`] turns text into
//! token ids and back.

// The 64-bit-memory build (wasm64, for files over 4 GiB) reaches the SIMD128 intrinsics
// through `core::arch::wasm64`, still unstable; build.sh builds it with `-Zbuild-std` anyway.
#![cfg_attr(target_arch = "wasm64", feature(simd_wasm64))]

/// Conversations to prompt text: the file's Jinja chat template, or a built-in by architecture.
pub mod chat;
/// Sentence embeddings: pooling the final hidden states as the file says, unit length.
pub mod embedding;
/// A loaded model, conversations on it (KV cache reuse, rollback, streaming) and the answer's
/// one owner (`Generation`: prefill, decoding, stop strings, the reply's deltas, branching).
pub mod engine;
/// Reading untrusted GGUF bytes: header, metadata, tensor index, ggml type table, errors.
pub mod gguf;
/// The forward pass on the GPU through wgpu (WebGPU in the browser; Vulkan, Metal or DX12
/// natively, behind the `gpu` feature): kernels checked against their CPU twins, and the
/// model's backend on them.
#[cfg(feature = "gpu")]
pub mod gpu;
/// Constrained decoding: answers that follow JSON, a JSON schema or a Lark grammar (llguidance),
/// as a vocabulary mask the sampler applies first.
pub mod grammar;
/// The facts a person wants about a model file, as one serializable report.
pub mod inspect;
/// Transformer models, one row per architecture in `arch.rs` (decoders from Qwen3 to Gemma 4 and
/// Qwen3.5's hybrid, BERT encoders): config, weights as views, the cache (keys, values,
/// recurrent state), forward pass.
pub mod model;
/// Splitting work across threads (matmul rows, attention heads) above single-threaded kernels,
/// and whether decode steps split at all (timed both ways now and then).
pub mod parallel;
/// Choosing the next token: penalties, top-k, top-p, min-p, temperature, seeded draw, trace.
pub mod sampler;
/// Weight block formats (ggml layouts), activation quantization, and the dot/matmul kernels.
pub mod tensor;
/// Tokenizers built from GGUF metadata: byte-level BPE, SentencePiece and BERT's WordPiece;
/// streaming detokenizer.
pub mod tokenizer;
/// Vision projector files (mmproj, llama.cpp's `clip` GGUF): what one says about itself, for
/// the inspector and for the engine's refusal to load one as a model. Images are not encoded yet.
pub mod vision;

/// The JavaScript boundary (wasm only): thin wrappers that convert to and from JS values.
#[cfg(target_family = "wasm")]
pub mod web;

/// Where the unit tests' files are (shared with the integration tests).
#[cfg(test)]
#[path = "../tests/common/mod.rs"]
mod test_files;
