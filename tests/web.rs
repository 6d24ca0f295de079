//! The wasm API, exercised in headless Chromium (`./build.sh test` runs these through
//! wasm-bindgen-test-runner).
#![cfg(target_arch = "wasm32")]

use inferno::gguf::writer::GgufWriter;
use inferno::gguf::{GgmlType, Value};
use inferno::web::{engine_info, inspect_prefix};
use js_sys::Reflect;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn get(object: &JsValue, key: &str) -> JsValue {
    Reflect::get(object, &key.into()).expect("property read")
}

fn small_model() -> Vec<u8> {
    GgufWriter::new()
        .kv("general.architecture", Value::String("llama".into()))
        .kv("general.name", Value::String("tiny".into()))
        .kv("llama.block_count", Value::U32(1))
        .tensor_f32("token_embd.weight", &[4, 2], &[0.5; 8])
        .tensor("blk.0.attn_q.weight", &[32, 1], GgmlType::Q8_0, vec![0; 34])
        .to_bytes()
}

#[wasm_bindgen_test]
fn reports_a_valid_file() {
    let bytes = small_model();
    let outcome = inspect_prefix(&bytes, bytes.len() as f64).expect("valid file");
    assert_eq!(get(&outcome, "status"), "complete");
    let report = get(&outcome, "report");
    let summary = get(&report, "summary");
    assert_eq!(get(&summary, "architecture"), "llama");
    assert_eq!(get(&summary, "parameter_count").as_f64(), Some(40.0));
    let gguf = get(&report, "gguf");
    assert_eq!(get(&gguf, "tensor_count").as_f64(), Some(2.0));
    let tensors: js_sys::Array = get(&report, "tensors").into();
    let second = tensors.get(1);
    assert_eq!(get(&second, "type"), "Q8_0");
    assert_eq!(get(&second, "layer").as_f64(), Some(0.0));
}

#[wasm_bindgen_test]
fn asks_for_more_bytes_when_the_prefix_ends_inside_the_header() {
    let bytes = small_model();
    let outcome = inspect_prefix(&bytes[..40], bytes.len() as f64).expect("prefix is fine so far");
    assert_eq!(get(&outcome, "status"), "need_more");
    let at_least = get(&outcome, "at_least").as_f64().expect("number");
    assert!(at_least > 40.0 && at_least <= bytes.len() as f64, "at_least = {at_least}");
}

fn error_kind(bytes: &[u8]) -> (String, String) {
    let error = inspect_prefix(bytes, bytes.len() as f64).expect_err("must be rejected");
    assert!(error.is_instance_of::<js_sys::Error>(), "errors are real JS Error objects");
    assert_eq!(get(&error, "name"), "GgufError");
    let kind = get(&error, "kind").as_string().expect("kind");
    let message = get(&error, "message").as_string().expect("message");
    (kind, message)
}

#[wasm_bindgen_test]
fn rejects_bad_magic() {
    let mut bytes = small_model();
    bytes[..4].copy_from_slice(b"GGML");
    let (kind, message) = error_kind(&bytes);
    assert_eq!(kind, "bad_magic");
    assert!(message.contains("not a GGUF file"), "{message}");
}

#[wasm_bindgen_test]
fn rejects_a_truncated_file() {
    let bytes = small_model();
    let header = inferno::gguf::Gguf::parse(&bytes).unwrap().header;
    let last = &header.tensors[1];
    let inside_last_tensor = (header.data_offset + last.offset + last.n_bytes - 1) as usize;
    let (kind, _) = error_kind(&bytes[..inside_last_tensor]);
    assert_eq!(kind, "tensor_past_end");
    let inside_name = bytes.windows(4).position(|w| w == b"tiny").unwrap() + 2;
    let (kind, message) = error_kind(&bytes[..inside_name]);
    assert_eq!(kind, "length_past_end");
    assert!(message.contains("offset"), "{message}");
}

#[wasm_bindgen_test]
fn rejects_an_unknown_tensor_type() {
    let (mut bytes, layout) = GgufWriter::new().tensor_f32("a", &[2], &[1.0, 2.0]).to_bytes_with_layout();
    let at = layout.at("tensor[0].type");
    bytes[at..at + 4].copy_from_slice(&77u32.to_le_bytes());
    assert_eq!(error_kind(&bytes).0, "unknown_tensor_type");
}

#[wasm_bindgen_test]
fn rejects_a_size_that_is_not_a_byte_count() {
    let bytes = small_model();
    let error = inspect_prefix(&bytes, -1.0).expect_err("negative size");
    assert_eq!(get(&error, "name"), "RangeError");
}

#[wasm_bindgen_test]
fn reports_simd128_build() {
    let info = engine_info().expect("info");
    assert_eq!(get(&info, "simd128"), JsValue::TRUE);
}

/// Every SIMD128 kernel against its scalar reference on seeded random rows, in the browser.
#[cfg(target_feature = "simd128")]
#[wasm_bindgen_test]
fn simd_kernels_match_the_scalar_reference() {
    inferno::tensor::simd128::check_simd_matches_scalar().unwrap();
}

/// The test build must really be a SIMD128 build, or the kernel test above silently vanishes.
#[wasm_bindgen_test]
fn the_test_build_has_simd128() {
    assert!(cfg!(target_feature = "simd128"));
}
