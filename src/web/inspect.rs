//! What the page learns before loading: a report from the start of a file, and which memory
//! (which build) the whole file needs.

use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::{gguf_error, js_error, js_size, to_js};
use crate::gguf::{self, HeaderParse};
use crate::inspect::Report;

/// Inspects the first `prefix.len()` bytes of a file of `file_size` bytes; `memory64` says
/// whether the page can run the 64-bit-memory build (it decides which files fit).
///
/// Returns `{status: "need_more", at_least}` when the header continues past the prefix, or
/// `{status: "complete", report}`. A malformed file throws an `Error` named `GgufError` whose
/// `kind` is the snake_case error kind.
#[wasm_bindgen]
pub fn inspect_prefix(prefix: &[u8], file_size: f64, memory64: bool) -> Result<JsValue, JsValue> {
    #[derive(Serialize)]
    #[serde(tag = "status", rename_all = "snake_case")]
    enum Outcome {
        NeedMore { at_least: u64 },
        Complete { report: Box<Report> },
    }
    let file_size = js_size(file_size)?;
    let outcome = match gguf::parse_header(prefix, file_size).map_err(gguf_error)? {
        HeaderParse::NeedMore { at_least } => Outcome::NeedMore { at_least },
        HeaderParse::Complete(header) => {
            let mut report = Box::new(Report::new(&header));
            if let (true, Err(reason)) = (report.runs.ok, MemoryKind::for_model(file_size, memory64)) {
                report.runs = report.runs.clone().too_large(reason);
            }
            Outcome::Complete { report }
        }
    };
    to_js(&outcome)
}

/// One report for the shards of a split model, from each file's complete header prefix (as
/// [`inspect_prefix`] found it) and size, in the order given: the model across all of them,
/// or a typed error naming the shard that is missing, repeated or foreign.
#[wasm_bindgen]
pub fn inspect_shards(
    prefixes: Vec<js_sys::Uint8Array>,
    sizes: Vec<f64>,
    memory64: bool,
) -> Result<JsValue, JsValue> {
    if prefixes.len() != sizes.len() {
        return Err(js_error("TypeError", "bad_request", "inspect_shards needs one size per prefix"));
    }
    let (mut headers, mut start) = (Vec::with_capacity(sizes.len()), 0u64);
    for (file, (prefix, &size)) in prefixes.iter().zip(&sizes).enumerate() {
        let size = js_size(size)?;
        let header = match gguf::parse_header(&prefix.to_vec(), size).map_err(gguf_error)? {
            HeaderParse::Complete(header) => header,
            HeaderParse::NeedMore { .. } => {
                let message = format!("file {} was given without its whole header", file + 1);
                return Err(js_error("TypeError", "bad_request", &message));
            }
        };
        headers.push((start, header));
        start = start.saturating_add(size);
    }
    let header = gguf::split::merge(headers, start).map_err(gguf_error)?;
    let mut report = Report::new(&header);
    if let (true, Err(reason)) = (report.runs.ok, MemoryKind::for_model(start, memory64)) {
        report.runs = report.runs.clone().too_large(reason);
    }
    to_js(&report)
}

/// The URLs (or names) of every shard of the split model `name` is one shard of, by
/// gguf-split's naming rule (`NAME-00001-of-00003.gguf`); `undefined` for another name.
#[wasm_bindgen]
pub fn shard_names(name: &str) -> Option<Vec<String>> {
    gguf::split::shard_names(name).filter(|names| names.len() > 1)
}

/// Which build's memory a model file of `size` bytes needs: `"wasm32"` or `"memory64"`, given
/// whether the page can run the 64-bit-memory build. Throws `too_large` (saying why) when
/// neither can hold it.
#[wasm_bindgen]
pub fn memory_for_model(size: f64, memory64: bool) -> Result<String, JsValue> {
    let size = js_size(size)?;
    match MemoryKind::for_model(size, memory64) {
        Ok(MemoryKind::Wasm32) => Ok("wasm32".into()),
        Ok(MemoryKind::Memory64) => Ok("memory64".into()),
        Err(message) => Err(js_error("RangeError", "too_large", &message)),
    }
}

/// The two memories a build can have. A wasm32 memory holds 4 GiB; a 64-bit one (Memory64)
/// 16 GiB in Chrome and Firefox. Files that fit in wasm32 stay there: its bounds checks are
/// free (guard pages), and it is the only memory the threaded builds have.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum MemoryKind {
    Wasm32,
    Memory64,
}

/// The room inference needs beside the file: KV cache, scratch buffers, the engine itself.
const INFERENCE_ROOM: u64 = 384 << 20;
/// The largest file a 4 GiB wasm32 memory can hold.
const WASM32_MODEL_LIMIT: u64 = (4 << 30) - INFERENCE_ROOM;
/// The largest file a 16 GiB 64-bit memory can hold.
const MEMORY64_MODEL_LIMIT: u64 = (16 << 30) - INFERENCE_ROOM;

impl MemoryKind {
    /// The memory a file of `size` bytes needs, or why none here can hold it.
    pub(super) fn for_model(size: u64, memory64_available: bool) -> Result<MemoryKind, String> {
        let gib = |bytes: u64| bytes as f64 / (1u64 << 30) as f64;
        if size <= WASM32_MODEL_LIMIT {
            Ok(MemoryKind::Wasm32)
        } else if size > MEMORY64_MODEL_LIMIT {
            Err(format!(
                "a {:.2} GiB file does not fit in a web page: WebAssembly's 64-bit memory holds \
                 16 GiB, and inference needs some of it (files up to {:.2} GiB can load)",
                gib(size),
                gib(MEMORY64_MODEL_LIMIT)
            ))
        } else if memory64_available {
            Ok(MemoryKind::Memory64)
        } else {
            Err(format!(
                "a {:.2} GiB file needs WebAssembly's 64-bit memory (Memory64 with relaxed SIMD: \
                 Chrome 133+, Firefox 145+), which this browser does not run; here files up to \
                 {:.2} GiB can load",
                gib(size),
                gib(WASM32_MODEL_LIMIT)
            ))
        }
    }
}
