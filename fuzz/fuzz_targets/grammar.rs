//! Untrusted `response_format` input: JSON schemas and Lark grammars through llguidance, then a
//! walk through what compiles. The checks live in `inferno_fuzz::targets::grammar`, shared
//! with the replay test.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| inferno_fuzz::targets::grammar(data));
