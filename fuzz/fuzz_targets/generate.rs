//! A whole mutated model through the engine: `Engine::load` (header, config, weights, the
//! vocabulary-versus-embedding check, tokenizer, chat template), the chat prompt rendered and
//! tokenized for a 64-token context, a session prefilled with it, and two sampled tokens (the
//! second runs the first through the model). Besides "never panics": every sampled id is in
//! the vocabulary, and no input makes the engine allocate more than the bound the README
//! states (`counting::allocation_bound`), in total or in one allocation.
//!
//! The checks live in `inferno_fuzz::targets::generate`, shared with the replay test.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| inferno_fuzz::targets::generate(data));
