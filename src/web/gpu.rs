//! The GPU as the page sees it: an adapter to ask for once per worker, what it is, and the
//! promise the page awaits after each call that ran tokens on it.

use std::sync::Arc;

use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::{js_error, to_js};
use crate::gpu::{Gpu, GpuError, Signal};

/// A WebGPU device with every kernel compiled, shared by the models loaded after it.
#[wasm_bindgen]
pub struct WebGpu {
    gpu: Arc<Gpu>,
}

impl WebGpu {
    pub(super) fn gpu(&self) -> Arc<Gpu> {
        self.gpu.clone()
    }
}

#[wasm_bindgen]
impl WebGpu {
    /// `{name, backend, max_binding, max_buffer, shader_f16, lost}`: the adapter and the
    /// limits it gave (what the page shows as "GPU · name").
    pub fn facts(&self) -> Result<JsValue, JsValue> {
        #[derive(Serialize)]
        struct Facts<'a> {
            name: &'a str,
            backend: &'a str,
            max_binding: u64,
            max_buffer: u64,
            shader_f16: bool,
            lost: bool,
        }
        let facts = self.gpu.facts();
        to_js(&Facts {
            name: &facts.name,
            backend: &facts.backend,
            max_binding: facts.max_binding,
            max_buffer: facts.max_buffer,
            shader_f16: facts.shader_f16,
            lost: matches!(self.gpu.fault(), Some(GpuError::Lost(_))),
        })
    }

    /// Copies `bytes` (at most the adapter's largest buffer) into another buffer `repeats`
    /// times; the promise settles when the GPU is done. Timed by the page, 2 × bytes × repeats
    /// over the seconds is the adapter's memory bandwidth (the benchmark's yardstick).
    pub fn copy_test(&self, bytes: f64, repeats: u32) -> Result<js_sys::Promise, JsValue> {
        let bytes = super::js_size(bytes)?;
        self.gpu.copy_test(bytes, repeats).map(promise).map_err(gpu_error)
    }

    /// Destroys the device, as a driver reset would: the page test of a lost device.
    pub fn destroy(&self) {
        self.gpu.destroy();
    }
}

/// The browser's GPU (`navigator.gpu`, in a page or a worker) with its own limits; rejects
/// with kind `no_gpu` where there is none.
#[wasm_bindgen]
pub async fn request_gpu() -> Result<WebGpu, JsValue> {
    let gpu = Gpu::request().await.map_err(gpu_error)?;
    // The engine takes the device as an `Arc` because natively its threads share it; in the
    // browser wgpu's WebGPU handles are bound to one thread, and the engine uses them on that one.
    #[allow(clippy::arc_with_non_send_sync)]
    Ok(WebGpu { gpu: Arc::new(gpu) })
}

pub(super) fn gpu_error(e: GpuError) -> JsValue {
    js_error("GpuError", e.kind(), &e.to_string())
}

/// A promise that settles with `signal`: what the page awaits before its next call.
pub(super) fn promise(signal: Signal) -> js_sys::Promise {
    wasm_bindgen_futures::future_to_promise(async move {
        signal.await.map(|()| JsValue::UNDEFINED).map_err(gpu_error)
    })
}
