//! Untrusted chat templates and messages through the whole chat path: `ChatTemplate::new`
//! (the shape checks, then minijinja's parser and compiler) and `render` with fuzzed messages
//! and options. The input is split at the first two NUL bytes: template, then message text; the
//! first byte of the message part picks the roles and options. Besides "never panics, never
//! overflows the stack", it checks that a rendering stays within the fuel and that refusing a
//! template is a typed error.
//!
//! The checks live in `inferno_fuzz::targets::render_template`, shared with the replay test.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| inferno_fuzz::targets::render_template(data));
