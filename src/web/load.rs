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

/// Receives a model file whose weights go straight to the GPU as they arrive
/// ([`crate::gpu::WeightStream`]): `new GpuModelLoader(gpu, size)`, then `push` chunks, then
/// `finish()`. Only the header and the small tensors stay in wasm memory, so a file larger than
/// this build's memory loads wherever the GPU can hold it (Safari has WebGPU but no Memory64).
/// The engine it makes runs on that GPU only.
#[cfg(feature = "gpu")]
#[wasm_bindgen]
pub struct GpuModelLoader {
    stream: crate::gpu::WeightStream,
    /// Each chunk's bytes in wasm memory on their way to the device (reused).
    chunk: Vec<u8>,
}

#[cfg(feature = "gpu")]
#[wasm_bindgen]
impl GpuModelLoader {
    #[wasm_bindgen(constructor)]
    pub fn new(gpu: &super::WebGpu, size: f64) -> Result<GpuModelLoader, JsValue> {
        let stream = crate::gpu::WeightStream::new(gpu.gpu(), js_size(size)?).map_err(stream_error)?;
        Ok(GpuModelLoader { stream, chunk: Vec::new() })
    }

    /// Sends the next bytes of the file on their way (to the device, or kept).
    pub fn push(&mut self, chunk: &js_sys::Uint8Array) -> Result<(), JsValue> {
        let length = chunk.length() as usize;
        self.chunk.clear();
        self.chunk
            .try_reserve(length)
            .map_err(|_| js_error("RangeError", "too_large", "a chunk does not fit"))?;
        self.chunk.resize(length, 0);
        chunk.copy_to(&mut self.chunk);
        self.stream.push(&self.chunk).map_err(stream_error)
    }

    /// Bytes received so far.
    pub fn received(&self) -> f64 {
        self.stream.received() as f64
    }

    /// Bytes this loader holds in wasm memory now (what it keeps, and one chunk).
    pub fn held_bytes(&self) -> f64 {
        (self.stream.held_bytes() + self.chunk.capacity()) as f64
    }

    /// A split model's next file: refused, since only a single file streams to the GPU.
    pub fn next_file(&mut self, _size: f64) -> Result<(), JsValue> {
        Err(js_error(
            "GpuError",
            "gpu_unsupported",
            "split models do not stream to the GPU yet: join them first",
        ))
    }

    /// Validates the file and builds the engine, on the GPU (consumes the loader).
    pub fn finish(self) -> Result<WebEngine, JsValue> {
        let gpu = self.stream.gpu();
        let (model, weights) = self.stream.finish().map_err(stream_error)?;
        WebEngine::new(Engine::with_weights_on_gpu(model, gpu, weights).map_err(engine_error)?)
    }
}

#[cfg(feature = "gpu")]
fn stream_error(e: crate::gpu::StreamError) -> JsValue {
    use crate::gpu::StreamError;
    match e {
        StreamError::Load(e) => load_error(e),
        StreamError::Model(e) => engine_error(e.into()),
        StreamError::Gpu(e) => super::gpu::gpu_error(e),
    }
}
