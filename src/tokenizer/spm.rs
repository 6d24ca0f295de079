//! SentencePiece-style BPE with scores (`tokenizer.ggml.model = "llama"`): Llama 2, Gemma.
//!
//! As in llama.cpp's `llm_tokenizer_spm`: spaces are written as "▁", the text starts as one
//! symbol per character, and the adjacent pair whose concatenation is the vocabulary token with
//! the highest score is merged first (leftmost first among equal scores), until no adjacent pair
//! forms a token. There is no word splitting: a whole text fragment is merged at once. A
//! character that is no token is spelled with byte tokens (`<0xNN>`).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::TokenId;
use super::vocab::Vocab;

pub(super) struct SpmModel {
    /// The token for each byte: `<0xNN>`, else the one-character token, else none.
    byte_tokens: [Option<TokenId>; 256],
    /// What a byte with no token becomes (llama.cpp aborts there).
    unknown: Option<TokenId>,
}

impl SpmModel {
    pub(super) fn new(vocab: &Vocab, unknown: Option<TokenId>) -> SpmModel {
        let mut byte_tokens = [None; 256];
        for (byte, slot) in byte_tokens.iter_mut().enumerate() {
            let byte = byte as u8;
            *slot = vocab.id_of(&format!("<0x{byte:02X}>")).or_else(|| {
                // Only ASCII bytes form a one-byte string.
                byte.is_ascii().then(|| vocab.id_of(&char::from(byte).to_string())).flatten()
            });
        }
        SpmModel { byte_tokens, unknown }
    }

    /// Tokenizes `text`, whose spaces are already written as "▁", into `out`.
    pub(super) fn encode(&self, vocab: &Vocab, text: &str, out: &mut Vec<TokenId>) {
        let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
        for (i, (start, c)) in text.char_indices().enumerate() {
            symbols.push(Symbol { start, len: c.len_utf8(), prev: i.checked_sub(1), next: None });
            if i > 0 {
                symbols[i - 1].next = Some(i);
            }
        }
        let mut queue = BinaryHeap::new();
        let candidate = |symbols: &[Symbol], left: usize, right: usize| {
            let start = symbols[left].start;
            let len = symbols[left].len + symbols[right].len;
            let id = vocab.id_of(&text[start..start + len])?;
            Some(Candidate { score: ScoreKey::new(vocab.score(id)), left, right, len })
        };
        for i in 1..symbols.len() {
            queue.extend(candidate(&symbols, i - 1, i));
        }
        while let Some(best) = queue.pop() {
            let (left, right) = (symbols[best.left], symbols[best.right]);
            if left.len == 0 || right.len == 0 || left.len + right.len != best.len {
                continue; // stale: one side has been merged since
            }
            symbols[best.left].len = best.len;
            symbols[best.left].next = right.next;
            symbols[best.right].len = 0;
            if let Some(next) = right.next {
                symbols[next].prev = Some(best.left);
                queue.extend(candidate(&symbols, best.left, next));
            }
            if let Some(prev) = left.prev {
                queue.extend(candidate(&symbols, prev, best.left));
            }
        }

        // Every merged symbol is a token (only tokens are merged); a lone character may not be.
        for symbol in symbols.iter().filter(|s| s.len > 0) {
            let piece = &text[symbol.start..symbol.start + symbol.len];
            match vocab.id_of(piece) {
                Some(id) => out.push(id),
                None => {
                    for &byte in piece.as_bytes() {
                        out.extend(self.byte_tokens[usize::from(byte)].or(self.unknown));
                    }
                }
            }
        }
    }
}

#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    /// Zero once merged into its left neighbour.
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A score made totally ordered the way llama.cpp's `<` sees it: -0 equals +0, and a NaN
/// (hostile metadata) ranks below everything.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
struct ScoreKey(f32);

impl ScoreKey {
    fn new(score: f32) -> ScoreKey {
        if score.is_nan() {
            ScoreKey(f32::NEG_INFINITY)
        } else {
            ScoreKey(score + 0.0) // turns -0.0 into +0.0
        }
    }
}

#[derive(Clone, Copy)]
struct Candidate {
    score: ScoreKey,
    left: usize,
    right: usize,
    /// Length of the merged text when the candidate was made.
    len: usize,
}

impl Ord for Candidate {
    /// `BinaryHeap` pops the greatest: highest score first, then leftmost.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.0.total_cmp(&other.score.0).then(other.left.cmp(&self.left))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}
