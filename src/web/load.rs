//! Receiving a model file from JS: each chunk of a `Uint8Array` copied once, straight into its
//! place in wasm memory ([`FileLoader`] does the planning), then the engine built from it.

use wasm_bindgen::prelude::*;

use super::inspect::MemoryKind;
use super::{WebEngine, engine_error, js_error, js_size, load_error};
use crate::engine::Engine;
use crate::model::FileLoader;

/// Receives a model file in chunks straight into wasm memory, so JavaScript never holds a
/// second full copy: `new ModelLoader(size)`, then `push` chunks until done, then `finish()`.
///
/// `push` copies each chunk once, from the JS array straight to its place (a `&[u8]` argument
/// would be copied twice, through a temporary buffer).
#[wasm_bindgen]
pub struct ModelLoader {
    loader: FileLoader,
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

    /// Validates the file and builds the engine (consumes the loader).
    pub fn finish(self) -> Result<WebEngine, JsValue> {
        let file = self.loader.finish().map_err(load_error)?;
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
        Ok(ModelLoader { loader: FileLoader::new(size, max_piece).map_err(load_error)? })
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
