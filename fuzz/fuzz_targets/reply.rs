//! Untrusted model output read back as a message (reasoning, tool calls) in every family's
//! syntax, whole and as it streams. The checks live in `inferno_fuzz::targets::reply`, shared
//! with the replay test.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| inferno_fuzz::targets::reply(data));
