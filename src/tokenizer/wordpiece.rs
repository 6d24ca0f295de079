//! BERT's WordPiece (`tokenizer.ggml.model = bert`), as llama.cpp's WPM tokenizer runs it: the
//! text is normalized (lowercased, accents stripped through llama.cpp's one-code-point NFD,
//! control characters dropped) and split at whitespace, punctuation, ASCII symbols and CJK
//! ideographs; each word, with "▁" before it (how llama.cpp's converter writes BERT's
//! word starts; "##" continuations are plain), becomes its longest vocabulary prefixes from left
//! to right, or one unknown token if some part of it matches nothing.

use super::TokenId;
use super::unicode::{Category, category, is_whitespace};
use super::unicode_table::{LOWERCASE, NFD_RANGES};
use super::vocab::Vocab;

pub(super) struct WordPieceModel {
    unknown: Option<TokenId>,
    /// Bytes of the longest token: no match is longer.
    longest: usize,
    lowercase: bool,
    strip_accents: bool,
}

impl WordPieceModel {
    /// `lowercase` and `strip_accents` as llama.cpp reads them: both default to true, and
    /// stripping follows lowercasing unless the file says otherwise.
    pub(super) fn new(vocab: &Vocab, unknown: Option<TokenId>, lowercase: bool, strip_accents: bool) -> Self {
        let longest = vocab.iter().map(|(_, text)| text.len()).max().unwrap_or(0);
        WordPieceModel { unknown, longest, lowercase, strip_accents }
    }

    pub(super) fn encode(&self, vocab: &Vocab, text: &str, out: &mut Vec<TokenId>) {
        let mut word = String::new();
        for w in self.words(text) {
            word.clear();
            word.push('▁');
            word.push_str(&w);
            let bytes = word.as_bytes();
            let before = out.len();
            let mut i = 0;
            while i < bytes.len() {
                let longest = bytes.len().min(i + self.longest);
                let found = (i + 1..=longest).rev().find_map(|j| {
                    let piece = std::str::from_utf8(&bytes[i..j]).ok()?;
                    vocab.id_of(piece).map(|id| (id, j))
                });
                match found {
                    Some((id, end)) => {
                        out.push(id);
                        i = end;
                    }
                    None => {
                        out.truncate(before);
                        break;
                    }
                }
            }
            if out.len() == before {
                out.extend(self.unknown);
            }
        }
    }

    /// The words of `text` after normalization (llama.cpp's `preprocess`).
    fn words(&self, text: &str) -> Vec<String> {
        let mut words = vec![String::new()];
        for c in text.chars() {
            let c = if self.strip_accents { nfd_base(c) } else { c };
            if is_whitespace(c) {
                if !words.last().is_some_and(String::is_empty) {
                    words.push(String::new());
                }
                continue;
            }
            let class = category(c);
            if c == '\0' || c == '\u{FFFD}' || class == Category::C {
                continue;
            }
            if self.strip_accents && class == Category::M {
                continue;
            }
            let shown = if self.lowercase { lowercase(c) } else { c };
            let alone = class == Category::P || (class == Category::S && (c as u32) < 0x7F) || is_cjk(c);
            let last = words.last_mut().expect("words starts non-empty and only grows");
            if alone {
                if last.is_empty() {
                    last.push(shown);
                } else {
                    words.push(shown.to_string());
                }
                words.push(String::new());
            } else {
                last.push(shown);
            }
        }
        words.retain(|w| !w.is_empty());
        words
    }
}

/// llama.cpp's `unicode_tolower`: one code point to one.
fn lowercase(c: char) -> char {
    match LOWERCASE.binary_search_by_key(&(c as u32), |&(from, _)| from) {
        Ok(i) => char::from_u32(LOWERCASE[i].1).unwrap_or(c),
        Err(_) => c,
    }
}

/// The base character of `c`'s canonical decomposition (llama.cpp's simplified NFD).
fn nfd_base(c: char) -> char {
    let cp = c as u32;
    let index = NFD_RANGES.partition_point(|&(first, _, _)| first <= cp);
    match index.checked_sub(1).map(|i| NFD_RANGES[i]) {
        Some((first, last, base)) if first <= cp && cp <= last => char::from_u32(base).unwrap_or(c),
        _ => c,
    }
}

/// The CJK ideograph blocks BERT splits one character at a time (llama.cpp's list, with its
/// Hugging Face quirk: the Extension E range starts at U+2B920).
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F)
}
