//! The wasm module the page's resilience tests run: the whole engine, as shipped, plus
//! [`deliberate_trap`]. An example target rather than a feature of the library: it links the
//! release library exactly as `build-wasm.mjs` builds it, in the same target folder, so the
//! tests cost no second build of the engine, and no shipped build can have the trap.
#![cfg(target_family = "wasm")]

// Linked for its wasm-bindgen exports: every entry point the shipped module has.
extern crate inferno;

use wasm_bindgen::prelude::wasm_bindgen;

/// Crashes the engine on purpose, the way a bug would (a panic, which traps), so the page test
/// can check that a crash is reported clearly and a fresh engine takes over.
#[wasm_bindgen]
pub fn deliberate_trap() {
    panic!("deliberate trap (the worker's `trap` request)");
}
