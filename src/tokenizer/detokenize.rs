//! From token ids back to text: each token's bytes ("piece"), whole-sequence decoding, and a
//! streaming decoder that never emits half a character.

use super::unicode::ByteChars;
use super::vocab::{Attrs, Vocab, parse_byte_token};
use super::{TokenId, Tokenizer};

/// How a vocabulary spells ordinary text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Spelling {
    /// GPT-2 byte characters (`Ġ` for a space...).
    ByteLevel,
    /// SentencePiece: UTF-8 with "▁" for a space.
    SentencePiece,
}

/// Every token's piece with control tokens rendered, in one buffer (llama.cpp builds the same
/// cache at load time).
pub(super) struct Pieces {
    bytes: Vec<u8>,
    /// `bytes[ends[id - 1]..ends[id]]` is token `id`'s piece.
    ends: Vec<usize>,
}

impl Pieces {
    pub(super) fn new(vocab: &Vocab, spelling: Spelling) -> Pieces {
        let byte_chars = ByteChars::new();
        let mut bytes = Vec::new();
        let mut ends = Vec::with_capacity(vocab.len());
        for (id, text) in vocab.iter() {
            append_piece(&mut bytes, text, vocab.attrs(id), spelling, &byte_chars);
            ends.push(bytes.len());
        }
        Pieces { bytes, ends }
    }

    pub(super) fn get(&self, id: TokenId) -> &[u8] {
        let id = id as usize;
        let Some(&end) = self.ends.get(id) else {
            return &[];
        };
        let start = if id == 0 { 0 } else { self.ends[id - 1] };
        &self.bytes[start..end]
    }
}

/// llama.cpp's `token_to_piece` with `special = true`.
fn append_piece(out: &mut Vec<u8>, text: &str, attrs: Attrs, spelling: Spelling, byte_chars: &ByteChars) {
    if attrs.has_any(Attrs::SPECIAL) {
        out.extend_from_slice(text.as_bytes());
    } else if attrs.has_any(Attrs::NORMAL) {
        match spelling {
            Spelling::SentencePiece => out.extend_from_slice(text.replace('▁', " ").as_bytes()),
            Spelling::ByteLevel => {
                for c in text.chars() {
                    match byte_chars.byte_of(c) {
                        Some(byte) => out.push(byte),
                        None => {
                            // What llama.cpp writes for a character outside GPT-2's alphabet.
                            out.extend_from_slice(b"[UNK_BYTE_0x");
                            for byte in c.to_string().bytes() {
                                out.extend_from_slice(format!("{byte:02x}").as_bytes());
                            }
                            out.extend_from_slice(text.as_bytes());
                            out.push(b']');
                        }
                    }
                }
            }
        }
    } else if attrs.has_any(Attrs::BYTE) {
        // Byte token texts were validated when the vocabulary was loaded.
        out.extend(parse_byte_token(text));
    }
    // Unused and undefined tokens have no text.
}

/// Options for [`Tokenizer::decode_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Drop a leading BOS / trailing EOS that the model adds by itself.
    pub remove_special: bool,
    /// Write control tokens (`<|im_end|>`) as their text instead of leaving them out.
    pub render_special: bool,
}

impl Tokenizer {
    /// The bytes token `id` stands for; control tokens are empty unless `render_special`.
    /// Unknown ids are empty.
    pub fn token_bytes(&self, id: TokenId, render_special: bool) -> &[u8] {
        if !render_special && self.vocab.attrs(id).has_any(Attrs::NOT_TEXT) {
            return &[];
        }
        self.pieces.get(id)
    }

    /// Token `id` as display text, control tokens included (`<|im_end|>`). A piece that is
    /// part of a character (a byte token, half of a multi-byte character) shows as "�".
    pub fn token_text(&self, id: TokenId) -> String {
        String::from_utf8_lossy(self.token_bytes(id, true)).into_owned()
    }

    /// The text of `ids`, as llama.cpp's `llama_detokenize(remove_special = false,
    /// unparse_special = false)`: control tokens are left out. Invalid UTF-8 shows as "�".
    pub fn decode(&self, ids: &[TokenId]) -> String {
        self.decode_with(ids, DecodeOptions::default())
    }

    /// [`Tokenizer::decode`] with llama.cpp's options, including its clean-up of spaces before
    /// punctuation for the models that ask for it.
    pub fn decode_with(&self, ids: &[TokenId], options: DecodeOptions) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids, options)).into_owned()
    }

    /// The raw bytes of [`Tokenizer::decode_with`].
    pub fn decode_bytes(&self, mut ids: &[TokenId], options: DecodeOptions) -> Vec<u8> {
        let bos = self.special_token(super::SpecialRole::Bos);
        let eos = self.special_token(super::SpecialRole::Eos);
        // A SentencePiece model that adds a leading space when encoding removes it again.
        let mut strip_space = self.add_space_prefix;
        if options.remove_special && self.add_bos && bos.is_some() && ids.first().copied() == bos {
            strip_space = false;
            ids = &ids[1..];
        }
        if options.remove_special && self.add_eos && eos.is_some() && ids.last().copied() == eos {
            ids = &ids[..ids.len() - 1];
        }
        let mut out = Vec::new();
        for &id in ids {
            let piece = self.token_bytes(id, options.render_special);
            let piece = match piece {
                [b' ', rest @ ..] if strip_space => rest,
                _ => piece,
            };
            strip_space = false;
            out.extend_from_slice(piece);
        }
        if self.clean_spaces {
            clean_up_spaces(&mut out);
        }
        out
    }

    /// A streaming decoder for generated tokens.
    pub fn detokenizer(&self, render_special: bool) -> Detokenizer<'_> {
        Detokenizer { tokenizer: self, render_special, stream: Utf8Stream::default() }
    }
}

/// llama.cpp's `clean_up_tokenization_spaces` (three in-place passes over the bytes, ported
/// as they are, including their reading of already-rewritten positions).
fn clean_up_spaces(text: &mut Vec<u8>) {
    // " ?", " !", " .", " ," lose their space.
    let total = text.len();
    let mut kept = usize::from(total > 0);
    for i in 1..total {
        let x = text[i];
        if text[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            kept -= 1;
        }
        text[kept] = x;
        kept += 1;
    }

    // " ' " loses both spaces.
    let total = kept;
    kept = usize::from(total > 0);
    let mut i = 1;
    while i < total {
        let x = text[i];
        if x == b'\'' && i + 1 < total && text[i - 1] == b' ' && text[i + 1] == b' ' {
            kept -= 1;
            i += 1;
            text[i] = 0;
        }
        text[kept] = x;
        kept += 1;
        i += 1;
    }

    // " 's", " 'm", " 're", " 've" lose their space (" 't", " 'd", " 'll" keep it).
    let total = kept;
    kept = usize::from(total > 0);
    for i in 1..total {
        let x = text[i];
        if text[i - 1] == b' ' && x == b'\'' && i + 1 < total {
            let x1 = text[i + 1];
            let x2 = if i + 2 < total { Some(text[i + 2]) } else { None };
            if matches!(x1, b's' | b'm') || matches!((x1, x2), (b'r' | b'v', Some(b'e'))) {
                kept -= 1;
            }
        }
        text[kept] = x;
        kept += 1;
    }
    text.truncate(kept);
}

/// Turns generated token ids into text one at a time, holding back the bytes of a character
/// until all of them have arrived (a character can be split over several byte tokens or
/// byte-level pieces). Pieces are concatenated as llama.cpp streams them, without the
/// whole-text space clean-up of [`Tokenizer::decode_with`].
pub struct Detokenizer<'t> {
    tokenizer: &'t Tokenizer,
    render_special: bool,
    stream: Utf8Stream,
}

impl Detokenizer<'_> {
    /// Adds one token and returns the text that is now complete (possibly empty).
    pub fn push(&mut self, id: TokenId) -> String {
        self.stream.push(self.tokenizer.token_bytes(id, self.render_special))
    }

    /// Ends the stream: an incomplete character left over is returned as "�".
    pub fn finish(&mut self) -> String {
        self.stream.finish()
    }

    /// True if bytes of an incomplete character are waiting.
    pub fn has_pending(&self) -> bool {
        self.stream.has_pending()
    }
}

/// Bytes in, complete UTF-8 text out: the state of a [`Detokenizer`] without the borrow of
/// the tokenizer, for owners that keep a stream across calls (a chat session).
#[derive(Clone, Debug, Default)]
pub struct Utf8Stream {
    /// Bytes of an incomplete character.
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Adds bytes and returns the text that is now complete (possibly empty).
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut text = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    text.push_str(valid);
                    rest = &[];
                    break;
                }
                Err(error) => {
                    let (valid, after) = rest.split_at(error.valid_up_to());
                    // `valid` is valid UTF-8 by the error's own account.
                    text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match error.error_len() {
                        // Bytes that can never become a character: show them as such.
                        Some(bad) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[bad..];
                        }
                        // The start of a character whose other bytes have not come yet.
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        let consumed = self.pending.len() - keep;
        self.pending.drain(..consumed);
        text
    }

    /// Ends the stream: an incomplete character left over is returned as "�".
    pub fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }

    /// True if bytes of an incomplete character are waiting.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }
}
