//! Untrusted tokenizer metadata and text: a GGUF file's `tokenizer.ggml.*` keys through
//! `Tokenizer::from_metadata`, then fuzzed text through `encode` (special tokens parsed or not)
//! and the ids back through `decode` and the streaming detokenizer. The input is a u32 (little
//! endian) length L, L bytes of GGUF file, and the text (lossy UTF-8). Besides "never panics",
//! every id must be in the vocabulary and the streamed text must be the tokens' bytes read as
//! UTF-8 (the one-shot `decode` differs on purpose: it drops SentencePiece's leading space and
//! cleans up spaces, as llama.cpp's detokenizer does).
//!
//! The checks live in `inferno_fuzz::targets::tokenize`, shared with the replay test.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| inferno_fuzz::targets::tokenize(data));
