//! Untrusted tokenizer metadata and text: a GGUF file's `tokenizer.ggml.*` keys through
//! `Tokenizer::from_metadata`, then fuzzed text through `encode` (special tokens parsed or not)
//! and the ids back through `decode` and the streaming detokenizer. The input is a u32 (little
//! endian) length L, L bytes of GGUF file, and the text (lossy UTF-8). Besides "never panics",
//! every id must be in the vocabulary and the streamed text must be the tokens' bytes read as
//! UTF-8 (the one-shot `decode` differs on purpose: it drops SentencePiece's leading space and
//! cleans up spaces, as llama.cpp's detokenizer does).

#![no_main]

use inferno::gguf::Gguf;
use inferno::tokenizer::{EncodeOptions, Tokenizer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((length, rest)) = data.split_first_chunk::<4>() else { return };
    let length = (u32::from_le_bytes(*length) as usize).min(rest.len());
    let (file, text) = rest.split_at(length);
    let Ok(gguf) = Gguf::parse(file) else { return };
    let Ok(tokenizer) = Tokenizer::from_metadata(gguf.metadata()) else { return };
    let text = String::from_utf8_lossy(text);
    for parse_special in [false, true] {
        let ids = tokenizer.encode(&text, EncodeOptions { add_special: parse_special, parse_special });
        assert!(ids.iter().all(|&id| (id as usize) < tokenizer.vocab_size()), "id outside the vocabulary");
        let _ = tokenizer.decode(&ids);
        let mut stream = tokenizer.detokenizer(false);
        let mut streamed: String = ids.iter().map(|&id| stream.push(id)).collect();
        streamed.push_str(&stream.finish());
        let bytes: Vec<u8> =
            ids.iter().flat_map(|&id| tokenizer.token_bytes(id, false).iter().copied()).collect();
        assert_eq!(streamed, String::from_utf8_lossy(&bytes), "streamed text is not the tokens' bytes");
    }
});
