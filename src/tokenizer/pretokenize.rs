//! Pre-tokenization: cutting text into the "words" that byte-level BPE then merges one by one.
//!
//! Each `tokenizer.ggml.pre` names a list of regular expressions that llama.cpp applies in turn,
//! every one splitting the pieces left by the previous one (matches and the gaps between them
//! both become pieces). llama.cpp does not run the common ones through a regex engine: it has
//! hand-written matchers for them (`unicode_regex_split_custom_*` in `unicode.cpp`), with a few
//! quirks of their own, and uses `std::regex` on a "collapsed" one-byte-per-character text for
//! the rest. This module reproduces both, quirks included, without a regex engine.

use std::ops::Range;

use super::unicode::CharClass;

/// The splitting rules of one `tokenizer.ggml.pre` family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreTokenizer {
    /// llama.cpp's fallback: punctuation runs, then the GPT-2 rules, then digit runs, then
    /// groups of three ASCII digits.
    Default,
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`.
    Gpt2,
    /// Every number character on its own (`\p{N}`), then the GPT-2 rules (StarCoder, SmolLM).
    StarCoder,
    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
    /// |\s*[\r\n]+|\s+(?!\S)|\s+`.
    Llama3,
    /// The Llama 3 rules with single digits (`\p{N}` instead of `\p{N}{1,3}`): Qwen2, Qwen3.
    Qwen2,
    /// Qwen3.5: the Qwen2 rules with combining marks counted with letters: `[\p{L}\p{M}]+` for
    /// the letter runs and `[^\s\p{L}\p{M}\p{N}]+` for the punctuation runs.
    Qwen35,
    /// DeepSeek LLM: line breaks alone, then runs of Latin, Greek, Cyrillic... letters (a fixed
    /// list of code point ranges), of ASCII and full-width punctuation, trailing whitespace,
    /// CJK and Hangul, and numbers, each run but the CJK one led by an optional space.
    DeepSeekLlm,
    /// DeepSeek Coder: line breaks alone, then ` ?\p{L}+`, ` ?\p{P}+`, CJK and Hangul runs and
    /// single digits.
    DeepSeekCoder,
    /// Falcon: [`PreTokenizer::Default`] with the backquote among the punctuation and without
    /// its `\p{N}+` step.
    Falcon,
    /// Runs of line feeds and runs of anything else (`[^\n]+|[\n]+`): Gemma 4, whose
    /// SentencePiece-style BPE merges across spaces.
    Newlines,
    /// GPT-4o's (o200k) rules: letter runs cut before a change from lower to upper case, with a
    /// trailing contraction, `\p{N}{1,3}`, `/` and line breaks after punctuation (Phi-4-mini,
    /// Llama 4, MiniMax-M2). See `split_gpt4o` for how llama.cpp reads letter case.
    Gpt4o,
}

impl PreTokenizer {
    /// Cuts `text` into consecutive, non-empty byte ranges that together cover it.
    pub fn split(self, text: &str) -> Vec<Range<usize>> {
        let text = CharText::new(text);
        let everything = 0..text.chars.len();
        let whole = std::slice::from_ref(&everything);
        let pieces = match self {
            PreTokenizer::Default => {
                let pieces = isolate_matches(&text, whole, punctuation_run);
                let pieces = split_custom(&text, &pieces, Rules::Gpt2);
                let pieces = isolate_matches(&text, &pieces, number_run);
                isolate_matches(&text, &pieces, three_ascii_digits)
            }
            PreTokenizer::Gpt2 => split_custom(&text, whole, Rules::Gpt2),
            PreTokenizer::StarCoder => {
                let pieces = isolate_matches(&text, whole, one_number);
                split_custom(&text, &pieces, Rules::Gpt2)
            }
            PreTokenizer::Llama3 => split_custom(&text, whole, Rules::Llama3 { max_digits: 3, marks: false }),
            PreTokenizer::Qwen2 => split_custom(&text, whole, Rules::Llama3 { max_digits: 1, marks: false }),
            PreTokenizer::Qwen35 => split_custom(&text, whole, Rules::Llama3 { max_digits: 1, marks: true }),
            PreTokenizer::Gpt4o => split_custom(&text, whole, Rules::Gpt4o),
            PreTokenizer::DeepSeekLlm => {
                let pieces = isolate_matches(&text, whole, line_break);
                let pieces = isolate_matches(&text, &pieces, deepseek_letters);
                let pieces = isolate_matches(&text, &pieces, deepseek_punctuation);
                let pieces = isolate_matches(&text, &pieces, trailing_whitespace);
                let pieces = isolate_matches(&text, &pieces, cjk_run);
                isolate_matches(&text, &pieces, number_run)
            }
            PreTokenizer::DeepSeekCoder => {
                let pieces = isolate_matches(&text, whole, line_break);
                let pieces = isolate_matches(&text, &pieces, space_then_letters);
                let pieces = isolate_matches(&text, &pieces, space_then_punctuation);
                let pieces = isolate_matches(&text, &pieces, cjk_run);
                isolate_matches(&text, &pieces, one_number)
            }
            PreTokenizer::Falcon => {
                let pieces = isolate_matches(&text, whole, punctuation_or_backquote_run);
                let pieces = split_custom(&text, &pieces, Rules::Gpt2);
                isolate_matches(&text, &pieces, three_ascii_digits)
            }
            PreTokenizer::Newlines => {
                let mut pieces = Vec::new();
                let mut start = 0;
                for pos in 1..=text.chars.len() {
                    if pos == text.chars.len() || (text.chars[pos] == '\n') != (text.chars[start] == '\n') {
                        pieces.push(start..pos);
                        start = pos;
                    }
                }
                pieces
            }
        };
        pieces.into_iter().map(|r| text.byte_offsets[r.start]..text.byte_offsets[r.end]).collect()
    }
}

/// A text as code points, their classes, and where each starts in the UTF-8 bytes.
struct CharText {
    chars: Vec<char>,
    classes: Vec<CharClass>,
    /// One more entry than `chars`: the last is the text's length.
    byte_offsets: Vec<usize>,
}

impl CharText {
    fn new(text: &str) -> CharText {
        let chars: Vec<char> = text.chars().collect();
        let classes = chars.iter().map(|&c| CharClass::of(c)).collect();
        let byte_offsets = text.char_indices().map(|(i, _)| i).chain(std::iter::once(text.len())).collect();
        CharText { chars, classes, byte_offsets }
    }
}

/// A piece of a [`CharText`] being split: positions at or past its `end` read as "nothing"
/// (scanning starts at the piece's first code point).
struct Chunk<'a> {
    text: &'a CharText,
    end: usize,
}

impl Chunk<'_> {
    fn char_at(&self, pos: usize) -> Option<char> {
        if pos < self.end { Some(self.text.chars[pos]) } else { None }
    }

    fn class_at(&self, pos: usize) -> CharClass {
        if pos < self.end { self.text.classes[pos] } else { CharClass::OUTSIDE }
    }
}

/// A matcher for one regex that llama.cpp runs through `std::regex`: the length (in code points)
/// of the match starting at `pos`, if any. Patterns that can match empty are not needed.
type Matcher = fn(&Chunk<'_>, usize) -> Option<usize>;

/// `std::regex_iterator` splitting: each match is a piece, and so is each gap between matches.
fn isolate_matches(text: &CharText, pieces: &[Range<usize>], matcher: Matcher) -> Vec<Range<usize>> {
    let mut out = Vec::with_capacity(pieces.len());
    for piece in pieces {
        let chunk = Chunk { text, end: piece.end };
        let mut gap_start = piece.start;
        let mut pos = piece.start;
        while pos < piece.end {
            match matcher(&chunk, pos) {
                Some(len) if len > 0 => {
                    if gap_start < pos {
                        out.push(gap_start..pos);
                    }
                    out.push(pos..pos + len);
                    pos += len;
                    gap_start = pos;
                }
                _ => pos += 1,
            }
        }
        if gap_start < piece.end {
            out.push(gap_start..piece.end);
        }
    }
    out
}

/// Length of the run starting at `pos` of characters accepted by `accept`.
fn run_length(chunk: &Chunk<'_>, pos: usize, accept: impl Fn(char, CharClass) -> bool) -> Option<usize> {
    let mut end = pos;
    while let Some(c) = chunk.char_at(end) {
        if !accept(c, chunk.class_at(end)) {
            break;
        }
        end += 1;
    }
    (end > pos).then_some(end - pos)
}

/// `\p{N}`: a single number character.
fn one_number(chunk: &Chunk<'_>, pos: usize) -> Option<usize> {
    chunk.class_at(pos).is_number().then_some(1)
}

/// `\p{N}+`.
fn number_run(chunk: &Chunk<'_>, pos: usize) -> Option<usize> {
    run_length(chunk, pos, |_, class| class.is_number())
}

/// `\p{P}` as llama.cpp evaluates it in a regex: for ASCII, its fixed list (which leaves out
/// the backquote); beyond ASCII, Unicode punctuation (whitespace is never punctuation: llama.cpp
/// rewrites it before matching).
fn is_regex_punctuation(c: char, class: CharClass) -> bool {
    if c.is_ascii() {
        matches!(c, '!'..='#' | '%'..='*' | ','..='/' | ':'..=';' | '?'..='@' | '['..=']' | '_' | '{' | '}')
    } else {
        class.is_punctuation() && !class.is_whitespace()
    }
}

/// `[\p{P}\$\+<=>\^~\|]+`.
fn punctuation_run(chunk: &Chunk<'_>, pos: usize) -> Option<usize> {
    run_length(chunk, pos, |c, class| {
        is_regex_punctuation(c, class) || matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '~' | '|')
    })
}

/// `[\p{P}\$\+<=>\^~\|`]+` (Falcon).
fn punctuation_or_backquote_run(chunk: &Chunk<'_>, pos: usize) -> Option<usize> {
    run_length(chunk, pos, |c, class| {
        is_regex_punctuation(c, class) || matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '~' | '|' | '`')
    })
}

/// `[\r\n]`.
fn line_break(chunk: &Chunk<'_>, pos: usize) -> Option<usize> {
    matches!(chunk.char_at(pos), Some('\r' | '\n')).then_some(1)
}

/// `\s` as llama.cpp's `std::regex` sees it: C's six ASCII spaces, and every other code point
/// that llama.cpp classes as whitespace (it rewrites those to `\v` before matching).
fn regex_space(chunk: &Chunk<'_>, pos: usize) -> bool {
    match chunk.char_at(pos) {
        Some(c) if c.is_ascii() => matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r'),
        Some(_) => chunk.class_at(pos).is_whitespace(),
        None => false,
    }
}

/// The code point that a `std::wregex` of llama.cpp sees at `pos`: the text's, except that
/// non-ASCII whitespace has become `\v` (so it never falls in a range of code points).
fn wide_char_at(chunk: &Chunk<'_>, pos: usize) -> Option<char> {
    let c = chunk.char_at(pos)?;
    Some(if !c.is_ascii() && chunk.class_at(pos).is_whitespace() { '\x0b' } else { c })
}

/// Whether `c` is in one of `ranges` (sorted, inclusive, not overlapping).
fn in_ranges(c: char, ranges: &[(u32, u32)]) -> bool {
    let cp = c as u32;
    let index = ranges.partition_point(|&(first, _)| first <= cp);
    index > 0 && cp <= ranges[index - 1].1
}

/// `\s?X+`, X being the positions `accept` takes: the space is taken only if an X follows it.
fn space_then_run(chunk: &Chunk<'_>, pos: usize, accept: impl Fn(usize) -> bool) -> Option<usize> {
    let start = pos + usize::from(regex_space(chunk, pos) && accept(pos + 1));
    let mut end = start;
    while accept(end) {
        end += 1;
    }
    (end > start).then_some(end - pos)
}

/// DeepSeek LLM's letter class (`[A-Za-zµÀ-ÖØ-öø-ƺ...]` in `llama-vocab.cpp`), as code point
/// ranges.
#[rustfmt::skip]
const DEEPSEEK_LETTERS: &[(u32, u32)] = &[
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA),
    (0x1BC, 0x1BF), (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x377), (0x37B, 0x37D),
    (0x37F, 0x37F), (0x386, 0x386), (0x388, 0x38A), (0x38C, 0x38C), (0x38E, 0x3A1), (0x3A3, 0x3F5),
    (0x3F7, 0x481), (0x48A, 0x52F), (0x531, 0x556), (0x10A0, 0x10C5), (0x13A0, 0x13F5),
    (0x13F8, 0x13FD), (0x1C90, 0x1CBA), (0x1CBD, 0x1CBF), (0x1D00, 0x1D2B), (0x1D6B, 0x1D77),
    (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D), (0x1F20, 0x1F45), (0x1F48, 0x1F4D),
    (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B), (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D),
    (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE), (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC),
    (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB), (0x1FE0, 0x1FEC), (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC),
    (0x2102, 0x2102), (0x2107, 0x2107), (0x210A, 0x2113), (0x2115, 0x2115), (0x2119, 0x211D),
    (0x2124, 0x2124), (0x2126, 0x2126), (0x2128, 0x2128), (0x212A, 0x212D), (0x212F, 0x2134),
    (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149), (0x214E, 0x214E), (0x2183, 0x2184),
    (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE), (0x2CF2, 0x2CF3), (0xA640, 0xA66D),
    (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787), (0xA78B, 0xA78E), (0xAB70, 0xABBF),
    (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A), (0x10400, 0x1044F),
    (0x104B0, 0x104D3), (0x104D8, 0x104FB), (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2),
    (0x118A0, 0x118DF), (0x1E900, 0x1E943),
];

/// DeepSeek LLM's punctuation class `[!-/:-~！-／：-～‘-‟　-。]`. `:-~` takes in the ASCII
/// letters, which the letter step has already cut out.
const DEEPSEEK_PUNCTUATION: &[(u32, u32)] =
    &[(0x21, 0x2F), (0x3A, 0x7E), (0x2018, 0x201F), (0x3000, 0x3002), (0xFF01, 0xFF0F), (0xFF1A, 0xFF5E)];

/// The CJK and Hangul class of both DeepSeek pre-tokenizers, `[一-龥ࠀ-一가-퟿]`: U+0800 to
/// U+9FA5 (far more than CJK) and U+AC00 to U+D7FF.
const DEEPSEEK_CJK: &[(u32, u32)] = &[(0x800, 0x9FA5), (0xAC00, 0xD7FF)];

/// `\s?[<DEEPSEEK_LETTERS>]+`.
fn deepseek_letters(chunk: &Chunk<'_>, pos: usize) -> Option<usize> {
    space_then_run(chunk, pos, |p| wide_char_at(chunk, p).is_some_and(|c| in_ranges(c, DEEPSEEK_LETTERS)))
}

/// `\s?[<DEEPSEEK_PUNCTUATION>]+`.
fn deepseek_punctuation(chunk: &Chunk<'_>, pos: usize) -> Option<usize> {
    space_then_run(chunk, pos, |p| wide_char_at(chunk, p).is_some_and(|c| in_ranges(c, DEEPSEEK_PUNCTUATION)))
}

/// `[<DEEPSEEK_CJK>]+`.
fn cjk_run(chunk: &Chunk<'_>, pos: usize) -> Option<usize> {
    let mut end = pos;
    while wide_char_at(chunk, end).is_some_and(|c| in_ranges(c, DEEPSEEK_CJK)) {
        end += 1;
    }
    (end > pos).then_some(end - pos)
}

/// `\s+$`: the whitespace that ends the chunk.
fn trailing_whitespace(chunk: &Chunk<'_>, pos: usize) -> Option<usize> {
    let mut end = pos;
    while regex_space(chunk, end) {
        end += 1;
    }
    (end > pos && end == chunk.end).then_some(end - pos)
}

/// `\s?\p{L}+`.
fn space_then_letters(chunk: &Chunk<'_>, pos: usize) -> Option<usize> {
    space_then_run(chunk, pos, |p| chunk.class_at(p).is_letter())
}

/// `\s?\p{P}+`.
fn space_then_punctuation(chunk: &Chunk<'_>, pos: usize) -> Option<usize> {
    space_then_run(chunk, pos, |p| {
        chunk.char_at(p).is_some_and(|c| is_regex_punctuation(c, chunk.class_at(p)))
    })
}

/// `[0-9][0-9][0-9]`.
fn three_ascii_digits(chunk: &Chunk<'_>, pos: usize) -> Option<usize> {
    (0..3).all(|i| chunk.char_at(pos + i).is_some_and(|c| c.is_ascii_digit())).then_some(3)
}

/// The whole-text splitters: llama.cpp's two hand-written matchers that the supported models
/// use, and GPT-4o's regex, which llama.cpp runs through `std::regex`.
#[derive(Clone, Copy)]
enum Rules {
    Gpt2,
    /// Llama 3 (`max_digits` 3), Qwen2 (`max_digits` 1) and Qwen3.5 (`max_digits` 1, combining
    /// marks counted with letters).
    Llama3 {
        max_digits: usize,
        marks: bool,
    },
    Gpt4o,
}

fn split_custom(text: &CharText, pieces: &[Range<usize>], rules: Rules) -> Vec<Range<usize>> {
    let mut out = Vec::with_capacity(pieces.len());
    for piece in pieces {
        let chunk = Chunk { text, end: piece.end };
        let mut words = Words { out: &mut out, prev_end: piece.start };
        match rules {
            Rules::Gpt2 => split_gpt2(&chunk, piece.start, &mut words),
            Rules::Llama3 { max_digits, marks } => {
                split_llama3(&chunk, piece.start, max_digits, marks, &mut words)
            }
            Rules::Gpt4o => split_gpt4o(&chunk, piece.start, &mut words),
        }
    }
    out
}

/// Collects words as consecutive ranges, each ending where the next begins.
struct Words<'a> {
    out: &'a mut Vec<Range<usize>>,
    prev_end: usize,
}

impl Words<'_> {
    fn end_word_at(&mut self, end: usize) {
        if end > self.prev_end {
            self.out.push(self.prev_end..end);
        }
        self.prev_end = end;
    }
}

/// `'s|'t|'re|'ve|'m|'ll|'d`, exactly as written or (Llama 3) in any letter case: the length
/// of the contraction at `pos`, if there is one.
fn contraction_at(chunk: &Chunk<'_>, pos: usize, any_case: bool) -> Option<usize> {
    let fold = |c: Option<char>| {
        let c = c?;
        Some(if any_case { c.to_ascii_lowercase() } else { c })
    };
    if chunk.char_at(pos) != Some('\'') || pos + 1 >= chunk.end {
        return None;
    }
    let next = fold(chunk.char_at(pos + 1))?;
    if matches!(next, 's' | 't' | 'm' | 'd') {
        return Some(2);
    }
    let after = fold(chunk.char_at(pos + 2))?;
    matches!((next, after), ('r', 'e') | ('v', 'e') | ('l', 'l')).then_some(3)
}

/// Length of the whitespace run at `pos`.
fn whitespace_run(chunk: &Chunk<'_>, pos: usize) -> usize {
    let mut n = 0;
    while chunk.class_at(pos + n).is_whitespace() {
        n += 1;
    }
    n
}

/// `\s+(?!\S)|\s+` given a run of `n` whitespace characters at `pos`: a run followed by more
/// text leaves its last space to start the next word; a run that ends the chunk is one word.
/// Returns where the word ends, or `None` if there is no whitespace.
fn whitespace_word_end(chunk: &Chunk<'_>, pos: usize, n: usize) -> Option<usize> {
    if n > 1 && chunk.char_at(pos + n).is_some() {
        Some(pos + n - 1)
    } else if n > 0 {
        Some(pos + n)
    } else {
        None
    }
}

fn split_gpt2(chunk: &Chunk<'_>, start: usize, words: &mut Words<'_>) {
    let mut pos = start;
    while pos < chunk.end {
        if let Some(len) = contraction_at(chunk, pos, false) {
            pos += len;
            words.end_word_at(pos);
            continue;
        }
        // ` ?X+` for X = letters, numbers, or neither-nor-whitespace: an optional leading space
        // joins the run that follows it.
        let space = chunk.char_at(pos) == Some(' ');
        let first = chunk.class_at(pos + usize::from(space));
        let same_kind: Option<fn(CharClass) -> bool> = if first.is_letter() {
            Some(CharClass::is_letter)
        } else if first.is_number() {
            Some(CharClass::is_number)
        } else if first.is_other() {
            Some(CharClass::is_other)
        } else {
            None
        };
        if let Some(same_kind) = same_kind {
            pos += usize::from(space);
            while same_kind(chunk.class_at(pos)) {
                pos += 1;
            }
            words.end_word_at(pos);
            continue;
        }
        let n = whitespace_run(chunk, pos);
        // A lone character no rule takes (cannot happen for real text) is a word of its own.
        pos = whitespace_word_end(chunk, pos, n).unwrap_or(pos + 1);
        words.end_word_at(pos);
    }
}

/// The Llama 3 and GPT-4o rules' last three alternatives, `\s*[\r\n]+|\s+(?!\S)|\s+`, at
/// whitespace: where its word ends (after the run's last line break, if it has one).
fn line_break_or_whitespace_word_end(chunk: &Chunk<'_>, pos: usize) -> usize {
    let n = whitespace_run(chunk, pos);
    match (pos..pos + n).rev().find(|&p| matches!(chunk.char_at(p), Some('\r' | '\n'))) {
        Some(last_break) => last_break + 1,
        None => whitespace_word_end(chunk, pos, n).unwrap_or(pos + 1),
    }
}

/// `marks`: Qwen3.5's variant, where combining marks count as letters (`[\p{L}\p{M}]+`) and so
/// are not punctuation (`[^\s\p{L}\p{M}\p{N}]+`).
fn split_llama3(chunk: &Chunk<'_>, start: usize, max_digits: usize, marks: bool, words: &mut Words<'_>) {
    let is_newline = |c: Option<char>| matches!(c, Some('\r' | '\n'));
    let letter = |class: CharClass| class.is_letter() || (marks && class.is_mark());
    let other = |class: CharClass| class.is_other() && !(marks && class.is_mark());
    let mut pos = start;
    while pos < chunk.end {
        if let Some(len) = contraction_at(chunk, pos, true) {
            pos += len;
            words.end_word_at(pos);
            continue;
        }
        let c = chunk.char_at(pos);
        let class = chunk.class_at(pos);

        // [^\r\n\p{L}\p{N}]?\p{L}+ : letters, possibly led by one character of another kind.
        if !(is_newline(c) || class.is_number()) && (letter(class) || letter(chunk.class_at(pos + 1))) {
            pos += 1;
            while letter(chunk.class_at(pos)) {
                pos += 1;
            }
            words.end_word_at(pos);
            continue;
        }

        // \p{N}{1,max_digits}
        if class.is_number() {
            let mut group_start = pos;
            while chunk.class_at(pos).is_number() {
                pos += 1;
                if pos - group_start >= max_digits {
                    words.end_word_at(pos);
                    group_start = pos;
                }
            }
            words.end_word_at(pos);
            continue;
        }

        // ` ?[^\s\p{L}\p{N}]+[\r\n]*`. llama.cpp enters this rule for a space followed by
        // anything but whitespace, letters or numbers — including the end of the chunk, where it
        // then ends the word right after the space.
        let enters = if c == Some(' ') {
            let next = chunk.class_at(pos + 1);
            !(next.is_whitespace() || letter(next) || next.is_number())
        } else {
            other(class)
        };
        if enters {
            pos += usize::from(c == Some(' '));
            while other(chunk.class_at(pos)) {
                pos += 1;
            }
            while is_newline(chunk.char_at(pos)) {
                pos += 1;
            }
            words.end_word_at(pos);
            continue;
        }

        pos = line_break_or_whitespace_word_end(chunk, pos);
        words.end_word_at(pos);
    }
}

/// GPT-4o's rules as llama.cpp applies them. Its `llama-vocab.cpp` rewrites the o200k regex
///
/// ```text
/// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
/// |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
/// |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
/// ```
///
/// with "a letter that is not `a-z`" (`(?=[\p{L}])([^a-z])`) for the upper-case class and "a
/// letter that is not `A-Z`" for the lower-case one (marks are dropped), and `unicode.cpp`, having
/// no hand-written matcher for it, runs it through `std::regex` on a text where every non-ASCII
/// code point is one byte: its category, or "whitespace". So letter case exists only for ASCII:
/// every other letter (Cyrillic, Greek, CJK, ...) counts as both upper and lower case, and
/// combining marks are not letters. The regex is evaluated as ECMAScript does, first alternative
/// first, with backtracking; what that gives is written out below.
fn split_gpt4o(chunk: &Chunk<'_>, start: usize, words: &mut Words<'_>) {
    let is_newline = |c: Option<char>| matches!(c, Some('\r' | '\n'));
    let ascii_lower = |pos: usize| chunk.char_at(pos).is_some_and(|c| c.is_ascii_lowercase());
    let ascii_upper = |pos: usize| chunk.char_at(pos).is_some_and(|c| c.is_ascii_uppercase());
    let mut pos = start;
    while pos < chunk.end {
        let c = chunk.char_at(pos);
        let class = chunk.class_at(pos);

        // The two letter alternatives, each with one optional leading character of another
        // kind (a space, a tab, punctuation, ... but not a line break).
        let leads = !(is_newline(c) || class.is_letter() || class.is_number());
        let first = if leads && chunk.class_at(pos + 1).is_letter() { pos + 1 } else { pos };
        if chunk.class_at(first).is_letter() {
            // "Upper case" letters, as many as possible: all but a-z.
            let mut upper_end = first;
            while chunk.class_at(upper_end).is_letter() && !ascii_lower(upper_end) {
                upper_end += 1;
            }
            let end = if ascii_lower(upper_end) {
                // Then "lower case" letters (all but A-Z), as many as possible.
                let mut end = upper_end;
                while chunk.class_at(end).is_letter() && !ascii_upper(end) {
                    end += 1;
                }
                end
            } else if let Some(last) = (first..upper_end).rev().find(|&p| !ascii_upper(p)) {
                // Backtracking: the last non-ASCII letter of the run is its one "lower case"
                // letter, and the ASCII capitals after it are left for the next word.
                last + 1
            } else {
                // Only capitals A-Z: the second alternative.
                upper_end
            };
            pos = end + contraction_at(chunk, end, true).unwrap_or(0);
            words.end_word_at(pos);
            continue;
        }

        // \p{N}{1,3}
        if class.is_number() {
            let mut end = pos + 1;
            while end < pos + 3 && chunk.class_at(end).is_number() {
                end += 1;
            }
            pos = end;
            words.end_word_at(pos);
            continue;
        }

        // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
        let space = c == Some(' ') && chunk.class_at(pos + 1).is_other();
        if space || class.is_other() {
            pos += usize::from(space);
            while chunk.class_at(pos).is_other() {
                pos += 1;
            }
            while matches!(chunk.char_at(pos), Some('\r' | '\n' | '/')) {
                pos += 1;
            }
            words.end_word_at(pos);
            continue;
        }

        pos = line_break_or_whitespace_word_end(chunk, pos);
        words.end_word_at(pos);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: PreTokenizer, text: &str) -> Vec<&str> {
        pre.split(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn gpt2_rules() {
        let w = words(PreTokenizer::Gpt2, "Hello world's  end!!  \n 123x");
        assert_eq!(w, ["Hello", " world", "'s", " ", " end", "!!", "  \n", " 123", "x"]);
    }

    #[test]
    fn qwen2_rules() {
        let w = words(PreTokenizer::Qwen2, "I'M here:\n\n  x 2024 ");
        assert_eq!(w, ["I", "'M", " here", ":\n\n", " ", " x", " ", "2", "0", "2", "4", " "]);
    }

    #[test]
    fn llama3_groups_digits_by_three() {
        let w = words(PreTokenizer::Llama3, "1234567 ab");
        assert_eq!(w, ["123", "456", "7", " ab"]);
    }

    #[test]
    fn starcoder_isolates_each_digit() {
        let w = words(PreTokenizer::StarCoder, "fib(n-12) 34");
        assert_eq!(w, ["fib", "(", "n", "-", "1", "2", ")", " ", "3", "4"]);
    }

    #[test]
    fn default_rules() {
        let w = words(PreTokenizer::Default, "a+=b 12345 x");
        assert_eq!(w, ["a", "+=", "b", " ", "123", "45", " x"]);
    }

    #[test]
    fn gpt4o_rules() {
        let w = words(PreTokenizer::Gpt4o, "HTMLParser camelCase DON'T we'RE\n\n x 12345 a/b!!/\n");
        assert_eq!(w.join("|"), "HTMLParser| camel|Case| DON'T| we'RE|\n\n| x| |123|45| a|/b|!!/\n");
        // Case exists only for ASCII: a capital after a non-ASCII letter starts a new word.
        let w = words(PreTokenizer::Gpt4o, "éAB ПРИВЕТмир Ωmega e\u{301}x");
        assert_eq!(w, ["é", "AB", " ПРИВЕТмир", " Ωmega", " e", "\u{301}x"]);
    }

    #[test]
    fn qwen35_keeps_marks_with_letters() {
        assert_eq!(words(PreTokenizer::Qwen2, "e\u{301}x ."), ["e", "\u{301}x", " ."]);
        assert_eq!(words(PreTokenizer::Qwen35, "e\u{301}x ."), ["e\u{301}x", " ."]);
    }

    #[test]
    fn deepseek_rules() {
        // The punctuation step's `:-~` re-splits letter runs around letters outside ASCII.
        let w = words(PreTokenizer::DeepSeekLlm, "Hello wörld\n  x 123 日本語  ");
        assert_eq!(w, ["Hello", " w", "ö", "rld", "\n", " ", " x", " ", "123", " ", "日本語", "  "]);
        let w = words(PreTokenizer::DeepSeekCoder, "fn(x) 12 日本\r\n");
        assert_eq!(w, ["fn", "(", "x", ")", " ", "1", "2", " ", "日本", "\r", "\n"]);
    }

    #[test]
    fn falcon_rules() {
        let w = words(PreTokenizer::Falcon, "a`b 12345 x");
        assert_eq!(w, ["a", "`", "b", " ", "123", "45", " x"]);
    }

    #[test]
    fn newline_runs() {
        assert_eq!(words(PreTokenizer::Newlines, "a b\n\nc\n"), ["a b", "\n\n", "c", "\n"]);
    }

    #[test]
    fn pieces_cover_the_text() {
        let text = "  mixed ünïcödé\t\r\n日本語 123'S \u{3000}end  ";
        for pre in [
            PreTokenizer::Default,
            PreTokenizer::Gpt2,
            PreTokenizer::StarCoder,
            PreTokenizer::Llama3,
            PreTokenizer::Qwen2,
            PreTokenizer::Gpt4o,
            PreTokenizer::Qwen35,
            PreTokenizer::DeepSeekLlm,
            PreTokenizer::DeepSeekCoder,
            PreTokenizer::Falcon,
            PreTokenizer::Newlines,
        ] {
            assert_eq!(words(pre, text).concat(), text, "{pre:?}");
        }
    }
}
