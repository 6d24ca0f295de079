//! The JavaScript boundary. Only this module knows about `JsValue`; everything it exposes is a
//! thin conversion around the native API, so the core is tested natively.

use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::gguf::{self, GgufError, HeaderParse};
use crate::inspect::Report;

#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

/// What this build is: version and whether it was compiled with SIMD128.
#[wasm_bindgen]
pub fn engine_info() -> Result<JsValue, JsValue> {
    #[derive(Serialize)]
    struct Info {
        version: &'static str,
        simd128: bool,
    }
    to_js(&Info { version: env!("CARGO_PKG_VERSION"), simd128: cfg!(target_feature = "simd128") })
}

/// Inspects the first `prefix.len()` bytes of a file of `file_size` bytes.
///
/// Returns `{status: "need_more", at_least}` when the header continues past the prefix, or
/// `{status: "complete", report}`. A malformed file throws an `Error` named `GgufError` whose
/// `kind` is the snake_case error kind.
#[wasm_bindgen]
pub fn inspect_prefix(prefix: &[u8], file_size: f64) -> Result<JsValue, JsValue> {
    #[derive(Serialize)]
    #[serde(tag = "status", rename_all = "snake_case")]
    enum Outcome {
        NeedMore { at_least: u64 },
        Complete { report: Box<Report> },
    }
    let file_size = js_size(file_size)?;
    let outcome = match gguf::parse_header(prefix, file_size).map_err(gguf_error)? {
        HeaderParse::NeedMore { at_least } => Outcome::NeedMore { at_least },
        HeaderParse::Complete(header) => Outcome::Complete { report: Box::new(Report::new(&header)) },
    };
    to_js(&outcome)
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

/// A real JS `Error` with a `name` and a machine-readable `kind`.
fn js_error(name: &str, kind: &str, message: &str) -> JsValue {
    let error = js_sys::Error::new(message);
    error.set_name(name);
    // Setting a property on a fresh Error object cannot fail.
    let _ = js_sys::Reflect::set(&error, &"kind".into(), &kind.into());
    error.into()
}
