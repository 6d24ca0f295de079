//! Untrusted bytes through the whole inspect path: `Gguf::parse`, the prefix parser the page and
//! the CLI use, and the report built from a successful parse. Besides "never panics", it checks
//! that the two parsers agree: they read the same bytes in the same order, so a prefix may only
//! stop earlier (`NeedMore`), never decide differently.
//!
//! The checks live in `inferno_fuzz::targets::parse_gguf`, shared with the replay test.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| inferno_fuzz::targets::parse_gguf(data));
