//! The JavaScript boundary. Only this module knows about `JsValue`; everything it exposes is a
//! thin conversion around the native API, so the core is tested natively. One file per
//! concern: inspecting a file's header, receiving a file, the engine that chats with it, and
//! the GPU it may run on.

mod engine;
#[cfg(feature = "gpu")]
mod gpu;
mod inspect;
mod load;

pub use engine::WebEngine;
#[cfg(feature = "gpu")]
pub use gpu::{WebGpu, request_gpu};
pub use inspect::{inspect_prefix, memory_for_model};
#[cfg(feature = "gpu")]
pub use load::GpuModelLoader;
pub use load::ModelLoader;

use serde::Serialize;
use wasm_bindgen::prelude::*;

/// The checkout this wasm was built from (set by scripts/build-wasm.mjs). wasm-bindgen's macros
/// record the checkout's package.json by its absolute path inside the wasm, and wasm-bindgen
/// reads that file when it writes the glue. Checkouts share one build cache, so a build reused
/// from another checkout pointed at that one's file, and failed once it was deleted. Read here,
/// the path is an input of the build: a new checkout recompiles this crate alone.
const _CHECKOUT: Option<&str> = option_env!("INFERNO_CHECKOUT");

use crate::engine::EngineError;
use crate::gguf::GgufError;
use crate::model::LoadError;

#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

#[cfg(feature = "threads")]
#[wasm_bindgen(module = "/src/web/pool_helpers.js")]
extern "C" {
    #[wasm_bindgen(js_name = startHelpers)]
    fn start_helpers(module: JsValue, memory: JsValue, count: usize) -> js_sys::Promise;
}

/// Starts `helpers` Web Workers for the thread pool (threaded builds only); JS awaits it once,
/// before any inference. Nothing here blocks the calling thread, unlike rayon's pool start,
/// which waited synchronously for every helper: see `pool_helpers.js`.
#[cfg(feature = "threads")]
#[wasm_bindgen(js_name = initThreadPool)]
pub fn init_thread_pool(helpers: usize) -> Result<js_sys::Promise, JsValue> {
    crate::parallel::start_pool(helpers + 1)
        .map_err(|message| JsValue::from(js_sys::Error::new(&message)))?;
    Ok(start_helpers(wasm_bindgen::module(), wasm_bindgen::memory(), helpers))
}

/// A pool helper's life: called by each helper Web Worker once it has instantiated the module
/// on the shared memory; it runs the pool's parts and never returns.
#[cfg(feature = "threads")]
#[wasm_bindgen(js_name = runPoolHelper)]
pub fn run_pool_helper() {
    crate::parallel::help()
}

/// What this build is: version, whether it was compiled with SIMD128 and relaxed SIMD, and how
/// many threads its parallel work runs on (1 in the single-threaded build).
#[wasm_bindgen]
pub fn engine_info() -> Result<JsValue, JsValue> {
    #[derive(Serialize)]
    struct Defaults {
        /// llama.cpp's sampling defaults, which a file's `general.sampling.*` keys refine.
        sampling: crate::sampler::SamplerSettings,
        /// The KV cache a chat gets when it names none: the model's context length, capped.
        context_cap: usize,
    }
    #[derive(Serialize)]
    struct Info {
        version: &'static str,
        simd128: bool,
        relaxed_simd: bool,
        threads: usize,
        defaults: Defaults,
    }
    to_js(&Info {
        version: env!("CARGO_PKG_VERSION"),
        simd128: cfg!(target_feature = "simd128"),
        relaxed_simd: cfg!(target_feature = "relaxed-simd"),
        threads: crate::parallel::threads(),
        defaults: Defaults { sampling: Default::default(), context_cap: engine::DEFAULT_CONTEXT_CAP },
    })
}

/// The size and format a picture file's header claims (`{format, width, height}`), checked
/// against the caps before the worker decodes it: refused with kind `bad_image` (not a
/// picture this reads) or `image_too_large`.
#[wasm_bindgen]
pub fn picture_header(bytes: &[u8]) -> Result<JsValue, JsValue> {
    use crate::model::ModelError;
    let header = crate::vision::picture_header(bytes).ok_or_else(|| {
        let why = format!("not a {} picture, or its header is cut short", crate::vision::PICTURE_FORMATS);
        engine_error(EngineError::Model(ModelError::BadImage(why)))
    })?;
    crate::vision::RgbImage::check_size(header.width, header.height)
        .map_err(|e| engine_error(EngineError::Model(e)))?;
    to_js(&header)
}

/// Whether the projector file `bytes` takes these limits on a picture's rows (each `undefined`:
/// its own), checked from its header as attaching it would: refused with kind `bad_request`
/// (and `bad_projector` for a file that is no projector). The worker asks before it frees the
/// loaded model for a new one, so that limits the new projector refuses keep the old model.
#[wasm_bindgen]
pub fn check_image_tokens(
    bytes: &[u8],
    min_tokens: Option<u32>,
    max_tokens: Option<u32>,
) -> Result<(), JsValue> {
    use crate::model::ModelError;
    let refused = |why: String| engine_error(EngineError::Model(ModelError::BadProjector(why)));
    let gguf = crate::gguf::Gguf::parse(bytes).map_err(|e| refused(e.to_string()))?;
    let facts = crate::vision::ProjectorFacts::of(&gguf.header)
        .ok_or_else(|| refused("the file is not a vision projector".into()))?;
    let Some([min, max]) = facts.image_tokens else { return Ok(()) };
    let own = (min as usize, max as usize);
    let limit = |tokens: Option<u32>| tokens.map(|t| t as usize);
    crate::vision::vit::image_token_limits(&facts.projector, own, limit(min_tokens), limit(max_tokens))
        .map(drop)
        .map_err(|why| engine_error(EngineError::BadImageTokens(why)))
}

/// A buffer the benchmark reads whole to measure this page's memory read bandwidth with the
/// same SIMD128 loads the kernels use: the physical limit a decode step's weight bandwidth is
/// held against.
#[wasm_bindgen]
pub struct ReadProbe {
    bytes: Vec<u8>,
}

/// The largest probe: well past any cache, and small beside a model.
const MAX_PROBE_BYTES: u64 = 1 << 30;

#[wasm_bindgen]
impl ReadProbe {
    /// A buffer of `bytes` bytes (at most 1 GiB), written once so that its pages exist.
    #[wasm_bindgen(constructor)]
    pub fn new(bytes: f64) -> Result<ReadProbe, JsValue> {
        let len = js_size(bytes)?;
        if len > MAX_PROBE_BYTES {
            return Err(js_error("RangeError", "invalid", &format!("a probe of {len} bytes is over 1 GiB")));
        }
        let len = len as usize;
        let mut buffer = Vec::new();
        buffer.try_reserve_exact(len).map_err(|_| {
            js_error("RangeError", "out_of_memory", &format!("no memory for a probe of {len} bytes"))
        })?;
        // Written, not left as fresh zero pages, which an OS may back with one shared page.
        buffer.resize(len, 0x5A);
        Ok(ReadProbe { bytes: buffer })
    }

    /// Reads every byte `passes` times; the checksum keeps any pass from being skipped.
    pub fn read(&self, passes: u32) -> u32 {
        (0..passes).fold(0u32, |sum, _| {
            sum.wrapping_add(crate::tensor::read_checksum(std::hint::black_box(&self.bytes)))
        })
    }
}

/// A byte count from JS: a whole number in 0..=2^53.
fn js_size(value: f64) -> Result<u64, JsValue> {
    if value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= 9_007_199_254_740_992.0 {
        Ok(value as u64)
    } else {
        Err(js_error("RangeError", "invalid", &format!("file size {value} is not a byte count")))
    }
}

fn to_js<T: Serialize>(value: &T) -> Result<JsValue, JsValue> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| js_error("Error", "serialize", &e.to_string()))
}

fn gguf_error(e: GgufError) -> JsValue {
    js_error("GgufError", e.kind().name(), &e.to_string())
}

fn engine_error(e: EngineError) -> JsValue {
    js_error("EngineError", e.kind(), &e.to_string())
}

fn load_error(e: LoadError) -> JsValue {
    match e {
        LoadError::Header(e) => gguf_error(e),
        e => js_error("RangeError", e.kind(), &e.to_string()),
    }
}

/// A real JS `Error` with a `name` and a machine-readable `kind`.
fn js_error(name: &str, kind: &str, message: &str) -> JsValue {
    let error = js_sys::Error::new(message);
    error.set_name(name);
    // Setting a property on a fresh Error object cannot fail.
    let _ = js_sys::Reflect::set(&error, &"kind".into(), &kind.into());
    error.into()
}
