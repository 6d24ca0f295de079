//! Byte-level BPE (`tokenizer.ggml.model = "gpt2"`): GPT-2, Llama 3, Qwen, SmolLM...
//!
//! Text is pre-tokenized into words; each word's UTF-8 bytes start as one symbol per byte
//! (written in GPT-2's byte characters), and adjacent symbols are merged, lowest merge rank
//! first (leftmost first among equal ranks), until no listed merge applies. Like llama.cpp, a
//! merge applies whether or not its result is itself a token; a final symbol that is not a
//! token falls back to the tokens of its single printable-ASCII bytes, and its other bytes are
//! dropped (that is what llama.cpp does; it never happens with a consistent vocabulary).
//!
//! Gemma 4's tokenizer (`tokenizer.ggml.model = "gemma4"`) is the same BPE in SentencePiece's
//! spelling: spaces become "▁", words start as one symbol per UTF-8 character rather than per
//! byte, and a final symbol that is not a token falls back to the `<0xNN>` tokens of its bytes.
//!
//! Symbols are numbered rather than compared as strings: a symbol is a token id, or, for a
//! merge result that is not a token, an id past the end of the vocabulary. Merges are then a
//! map from a pair of ids to (rank, result).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::TokenId;
use super::error::TokenizerError;
use super::pretokenize::PreTokenizer;
use super::unicode::ByteChars;
use super::vocab::Vocab;

/// A byte whose GPT-2 character is not a token: it takes part in no merge.
const NOT_A_SYMBOL: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Merge {
    rank: u32,
    result: u32,
}

pub(super) struct BpeModel {
    pre: PreTokenizer,
    /// Llama 3 style: a word that is a token as a whole is taken as it is, without merging.
    ignore_merges: bool,
    /// True: GPT-2's byte-level spelling. False: SentencePiece's (Gemma 4), see the module
    /// comment.
    byte_level: bool,
    byte_chars: ByteChars,
    /// Byte-level: the symbol each byte starts as, the id of its GPT-2 character's token.
    /// SentencePiece spelling: each byte's `<0xNN>` token, the fallback for symbols that are
    /// not tokens.
    byte_symbols: [u32; 256],
    merges: HashMap<(u32, u32), Merge>,
    vocab_size: u32,
}

impl BpeModel {
    pub(super) fn new(
        vocab: &Vocab,
        merges: &[String],
        pre: PreTokenizer,
        ignore_merges: bool,
        byte_level: bool,
    ) -> Result<BpeModel, TokenizerError> {
        let byte_chars = ByteChars::new();
        let mut byte_symbols = [NOT_A_SYMBOL; 256];
        let mut buf = [0u8; 4];
        for (byte, symbol) in byte_symbols.iter_mut().enumerate() {
            let id = if byte_level {
                vocab.id_of(byte_chars.char_of(byte as u8).encode_utf8(&mut buf))
            } else {
                vocab.id_of(&format!("<0x{byte:02X}>"))
            };
            *symbol = id.unwrap_or(NOT_A_SYMBOL);
        }

        let vocab_size = vocab.len() as u32;
        // Merge results that are not tokens, numbered from `vocab_size` on.
        let mut extra_symbols: HashMap<String, u32> = HashMap::new();
        let mut rules = HashMap::with_capacity(merges.len());
        let mut joined = String::new();
        for (index, merge) in merges.iter().enumerate() {
            // llama.cpp splits at the first space after the first byte.
            let space = merge.bytes().skip(1).position(|b| b == b' ').map(|p| p + 1);
            let Some(space) = space else {
                return Err(TokenizerError::MalformedMerge { index, merge: merge.clone() });
            };
            let (left, right) = (&merge[..space], &merge[space + 1..]);
            let id = |part: &str| {
                vocab
                    .id_of(part)
                    .ok_or_else(|| TokenizerError::MergeOfUnknownToken { index, token: part.to_owned() })
            };
            let (left_id, right_id) = (id(left)?, id(right)?);
            joined.clear();
            joined.push_str(left);
            joined.push_str(right);
            let result = match vocab.id_of(&joined) {
                Some(id) => id,
                None => {
                    let next = vocab_size.saturating_add(extra_symbols.len() as u32);
                    *extra_symbols.entry(joined.clone()).or_insert(next)
                }
            };
            // A repeated pair keeps its first (best) rank.
            rules.entry((left_id, right_id)).or_insert(Merge { rank: index as u32, result });
        }
        Ok(BpeModel { pre, ignore_merges, byte_level, byte_chars, byte_symbols, merges: rules, vocab_size })
    }

    /// Tokenizes plain text (no special tokens in it) into `out`.
    pub(super) fn encode(&self, vocab: &Vocab, text: &str, out: &mut Vec<TokenId>) {
        let mut session = WordSession::default();
        if self.byte_level {
            for word in self.pre.split(text) {
                self.encode_word(vocab, &text[word], &mut session, out);
            }
        } else {
            let text = text.replace(' ', "▁");
            for word in self.pre.split(&text) {
                self.encode_word(vocab, &text[word], &mut session, out);
            }
        }
    }

    fn encode_word(&self, vocab: &Vocab, word: &str, session: &mut WordSession, out: &mut Vec<TokenId>) {
        if self.byte_level {
            if self.ignore_merges {
                let encoded: String = word.bytes().map(|b| self.byte_chars.char_of(b)).collect();
                if let Some(id) = vocab.id_of(&encoded) {
                    out.push(id);
                    return;
                }
            }
            session.merge(
                self,
                word.bytes().enumerate().map(|(i, b)| (i, 1, self.byte_symbols[usize::from(b)])),
            );
        } else {
            // llama.cpp takes a word of line feeds whole when it is a token (its fix for Gemma 4:
            // the vocabulary has runs of line feeds that the merges do not build).
            if self.ignore_merges || word.bytes().all(|b| b == b'\n') {
                if let Some(id) = vocab.id_of(word) {
                    out.push(id);
                    return;
                }
            }
            let mut buf = [0u8; 4];
            session.merge(
                self,
                word.char_indices().map(|(i, c)| {
                    let id = vocab.id_of(c.encode_utf8(&mut buf)).unwrap_or(NOT_A_SYMBOL);
                    (i, c.len_utf8(), id)
                }),
            );
        }
        for symbol in session.symbols.iter().filter(|s| s.len > 0) {
            if symbol.id < self.vocab_size {
                out.push(symbol.id);
                continue;
            }
            // Not a token. Byte-level: llama.cpp looks up each byte of the symbol's GPT-2
            // spelling as a one-byte token, which only printable ASCII bytes can match.
            // SentencePiece spelling: each byte's `<0xNN>` token.
            let bytes = &word.as_bytes()[symbol.start..symbol.start + symbol.len];
            for &byte in bytes {
                let id = self.byte_symbols[usize::from(byte)];
                if (!self.byte_level || (0x21..=0x7E).contains(&byte)) && id < self.vocab_size {
                    out.push(id);
                }
            }
        }
    }

    fn merge_of(&self, left: u32, right: u32) -> Option<Merge> {
        if left == NOT_A_SYMBOL || right == NOT_A_SYMBOL {
            return None;
        }
        self.merges.get(&(left, right)).copied()
    }
}

/// One symbol of the word being merged: a byte range of the word, in a linked list.
#[derive(Clone, Copy)]
struct Symbol {
    id: u32,
    start: usize,
    /// Zero once merged into its left neighbour.
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A possible merge of two adjacent symbols.
#[derive(Clone, Copy)]
struct Candidate {
    rank: u32,
    left: usize,
    right: usize,
    /// Length of the merged symbol when the candidate was made; a different length now means
    /// one side has changed since and the candidate is stale.
    len: usize,
    result: u32,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}

impl Ord for Candidate {
    /// `BinaryHeap` pops the greatest: lowest rank first, then leftmost.
    fn cmp(&self, other: &Self) -> Ordering {
        other.rank.cmp(&self.rank).then(other.left.cmp(&self.left))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Buffers reused from word to word.
#[derive(Default)]
struct WordSession {
    symbols: Vec<Symbol>,
    queue: BinaryHeap<Candidate>,
}

impl WordSession {
    /// Merges a word given as its first symbols: (byte offset, byte length, id) each.
    fn merge(&mut self, model: &BpeModel, units: impl Iterator<Item = (usize, usize, u32)>) {
        self.symbols.clear();
        self.queue.clear();
        self.symbols.extend(units.enumerate().map(|(i, (start, len, id))| Symbol {
            id,
            start,
            len,
            prev: i.checked_sub(1),
            next: Some(i + 1),
        }));
        let n = self.symbols.len();
        if let Some(last) = self.symbols.last_mut() {
            last.next = None;
        }
        for i in 1..n {
            self.add_candidate(model, i - 1, i);
        }
        while let Some(candidate) = self.queue.pop() {
            let (left, right) = (self.symbols[candidate.left], self.symbols[candidate.right]);
            if left.len == 0 || right.len == 0 || left.len + right.len != candidate.len {
                continue;
            }
            let merged = &mut self.symbols[candidate.left];
            merged.id = candidate.result;
            merged.len += right.len;
            merged.next = right.next;
            self.symbols[candidate.right].len = 0;
            if let Some(next) = right.next {
                self.symbols[next].prev = Some(candidate.left);
            }
            if let Some(prev) = left.prev {
                self.add_candidate(model, prev, candidate.left);
            }
            if let Some(next) = right.next {
                self.add_candidate(model, candidate.left, next);
            }
        }
    }

    fn add_candidate(&mut self, model: &BpeModel, left: usize, right: usize) {
        let (l, r) = (&self.symbols[left], &self.symbols[right]);
        if let Some(merge) = model.merge_of(l.id, r.id) {
            self.queue.push(Candidate {
                rank: merge.rank,
                left,
                right,
                len: l.len + r.len,
                result: merge.result,
            });
        }
    }
}
