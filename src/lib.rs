//! Inferno: inspect and run GGUF language models, natively and inside a web page.
//!
//! Read top to bottom, the modules follow the data: bytes of a file become a validated
//! [`gguf`] view, which an [`inspect`] report describes for people and scripts.

/// Reading untrusted GGUF bytes: header, metadata, tensor index, ggml type table, errors.
pub mod gguf;
/// The facts a person wants about a model file, as one serializable report.
pub mod inspect;

/// The JavaScript boundary (wasm32 only): thin wrappers that convert to and from JS values.
#[cfg(target_arch = "wasm32")]
pub mod web;
