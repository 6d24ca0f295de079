//! Receiving a model file from JS: each chunk of a `Uint8Array` copied once, straight into its
//! place in wasm memory ([`FileLoader`] does the planning), then the engine built from it.

use wasm_bindgen::prelude::*;

use super::inspect::MemoryKind;
use super::{WebEngine, engine_error, js_error, js_size, load_error};
use crate::engine::Engine;
use crate::model::{FileLoader, ModelBytes};

/// Receives a model file in chunks straight into wasm memory, so JavaScript never holds a
/// second full copy: `new ModelLoader(size)`, then `push` chunks until done, then `finish()`.
///
/// `push` copies each chunk once, from the JS array straight to its place (a `&[u8]` argument
/// would be copied twice, through a temporary buffer).
#[wasm_bindgen]
pub struct ModelLoader {
    loader: FileLoader,
    /// The shards received before the current one (a split model; empty for one file).
    shards: Vec<ModelBytes>,
    max_piece: u64,
}

#[wasm_bindgen]
impl ModelLoader {
    /// Checks the size and, for a one-piece file, reserves it: a file too large for this wasm
    /// memory fails here, with a clear error, before anything is copied.
    #[wasm_bindgen(constructor)]
    pub fn new(size: f64) -> Result<ModelLoader, JsValue> {
        ModelLoader::with_piece_limit(size, FileLoader::MAX_PIECE)
    }

    /// Copies the next bytes of the file from a JS array straight into place.
    pub fn push(&mut self, chunk: &js_sys::Uint8Array) -> Result<(), JsValue> {
        let length = chunk.length() as usize;
        self.loader
            .push_with(length, |offset, window| {
                let end = offset + window.len();
                chunk.subarray(offset as u32, end as u32).copy_to_uninit(window)
            })
            .map_err(load_error)
    }

    /// Bytes received so far.
    pub fn received(&self) -> f64 {
        self.loader.received() as f64
    }

    /// Ends the current file and starts the next shard of a split model, of `size` bytes (the
    /// shards in any order; `finish` checks they make one model).
    pub fn next_file(&mut self, size: f64) -> Result<(), JsValue> {
        let next = FileLoader::new(js_size(size)?, self.max_piece).map_err(load_error)?;
        let done = std::mem::replace(&mut self.loader, next).finish().map_err(load_error)?;
        self.shards.push(done);
        Ok(())
    }

    /// Validates the file (or the shards) and builds the engine (consumes the loader).
    pub fn finish(mut self) -> Result<WebEngine, JsValue> {
        let last = self.loader.finish().map_err(load_error)?;
        let file = if self.shards.is_empty() {
            last
        } else {
            self.shards.push(last);
            ModelBytes::from_files(self.shards)
        };
        WebEngine::new(Engine::load(file).map_err(engine_error)?)
    }
}

impl ModelLoader {
    /// [`ModelLoader::new`] with pieces of at most `max_piece` bytes (tests use small ones).
    pub fn with_piece_limit(size: f64, max_piece: u64) -> Result<ModelLoader, JsValue> {
        let size = js_size(size)?;
        // A file too large for this build's memory should have gone to a 64-bit build (the
        // worker asks `memory_for_model` first); in a wasm32 build it means Memory64 is not there.
        let memory64_here = cfg!(target_pointer_width = "64");
        MemoryKind::for_model(size, memory64_here)
            .map_err(|message| js_error("RangeError", "too_large", &message))?;
        Ok(ModelLoader {
            loader: FileLoader::new(size, max_piece).map_err(load_error)?,
            shards: Vec::new(),
            max_piece,
        })
    }

    /// [`push`](Self::push) for bytes already in wasm memory (tests).
    pub fn push_bytes(&mut self, chunk: &[u8]) -> Result<(), JsValue> {
        self.loader.push_bytes(chunk).map_err(load_error)
    }

    /// Pieces allocated so far.
    pub fn piece_count(&self) -> usize {
        self.loader.piece_count()
    }
}
