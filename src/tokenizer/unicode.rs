//! Code point classes as llama.cpp sees them, and GPT-2's byte ↔ character mapping.
//!
//! The pre-tokenizers ask "is this a letter / number / whitespace?" about every code point. The
//! answer must be llama.cpp's, including for characters that newer or older Unicode versions
//! classify differently, so the table comes from llama.cpp's own data (see `unicode_table.rs`).

use super::unicode_table::{CATEGORY_RANGES, WHITESPACE};

/// The Unicode general category, collapsed to its first letter (`\p{L}`, `\p{N}`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Category {
    /// Unassigned (Cn) and anything else the table does not know.
    U,
    /// Number: `\p{N}`.
    N,
    /// Letter: `\p{L}`.
    L,
    /// Separator: `\p{Z}`.
    Z,
    /// Mark: `\p{M}`.
    M,
    /// Punctuation: `\p{P}`.
    P,
    /// Symbol: `\p{S}`.
    S,
    /// Control, format, surrogate, private use: `\p{C}`.
    C,
}

/// What the splitters need to know about one position of a text chunk.
///
/// `OUTSIDE` stands for "past the end of the chunk": it is neither a letter, a number nor
/// whitespace, and unlike every real code point it has no category at all (llama.cpp's
/// `flags.as_uint() == 0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct CharClass {
    category: Option<Category>,
    whitespace: bool,
}

impl CharClass {
    pub(super) const OUTSIDE: CharClass = CharClass { category: None, whitespace: false };

    pub(super) fn of(c: char) -> CharClass {
        CharClass { category: Some(category(c)), whitespace: is_whitespace(c) }
    }

    pub(super) fn is_letter(self) -> bool {
        self.category == Some(Category::L)
    }

    pub(super) fn is_number(self) -> bool {
        self.category == Some(Category::N)
    }

    /// `\p{M}`: combining marks (llama.cpp's "accent marks").
    pub(super) fn is_mark(self) -> bool {
        self.category == Some(Category::M)
    }

    pub(super) fn is_punctuation(self) -> bool {
        self.category == Some(Category::P)
    }

    pub(super) fn is_whitespace(self) -> bool {
        self.whitespace
    }

    /// True for every real code point, false for [`CharClass::OUTSIDE`].
    pub(super) fn is_inside(self) -> bool {
        self.category.is_some()
    }

    /// `[^\s\p{L}\p{N}]`: punctuation, symbols, marks, controls... but not past the end.
    pub(super) fn is_other(self) -> bool {
        self.is_inside() && !(self.whitespace || self.is_letter() || self.is_number())
    }
}

pub(super) fn category(c: char) -> Category {
    let cp = c as u32;
    // The ranges are sorted by start; the range holding `cp` is the last one starting at or
    // before it. Range 0 starts at 0, so the index is never negative.
    let index = CATEGORY_RANGES.partition_point(|&(start, _)| start <= cp);
    CATEGORY_RANGES[index - 1].1
}

pub(super) fn is_whitespace(c: char) -> bool {
    WHITESPACE.binary_search(&(c as u32)).is_ok()
}

/// GPT-2's reversible byte → printable character mapping: bytes that are printable Latin-1
/// (`!`..`~`, `¡`..`¬`, `®`..`ÿ`) stand for themselves, the other 68 bytes are shifted to
/// U+0100 and up, in byte order. Byte-level BPE vocabularies are written in these characters.
pub(super) fn byte_to_char(byte: u8) -> char {
    const fn stands_for_itself(b: u8) -> bool {
        matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
    }
    if stands_for_itself(byte) {
        return char::from(byte);
    }
    let shifted_before = (0..byte).filter(|&b| !stands_for_itself(b)).count() as u32;
    // 256 + at most 68: always a valid scalar value.
    char::from_u32(256 + shifted_before).unwrap_or(char::REPLACEMENT_CHARACTER)
}

/// The whole mapping as a table, and its inverse.
pub(super) struct ByteChars {
    to_char: [char; 256],
    /// `from_shifted[i]` is the byte that U+0100 + i stands for.
    from_shifted: Vec<u8>,
}

impl ByteChars {
    pub(super) fn new() -> ByteChars {
        let mut to_char = ['\0'; 256];
        let mut from_shifted = Vec::with_capacity(68);
        for (byte, slot) in to_char.iter_mut().enumerate() {
            *slot = byte_to_char(byte as u8);
            if *slot as u32 >= 0x100 {
                from_shifted.push(byte as u8);
            }
        }
        ByteChars { to_char, from_shifted }
    }

    pub(super) fn char_of(&self, byte: u8) -> char {
        self.to_char[usize::from(byte)]
    }

    /// The byte a mapped character stands for, if it is one of the 256.
    pub(super) fn byte_of(&self, c: char) -> Option<u8> {
        match c as u32 {
            0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => Some(c as u8),
            cp @ 0x100.. => self.from_shifted.get((cp - 0x100) as usize).copied(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_match_llama_cpp_table() {
        assert_eq!(category('a'), Category::L);
        assert_eq!(category('7'), Category::N);
        assert_eq!(category('日'), Category::L);
        assert_eq!(category('²'), Category::N);
        assert_eq!(category('\u{301}'), Category::M);
        assert_eq!(category('$'), Category::S);
        assert_eq!(category('_'), Category::P);
        assert_eq!(category('\u{10FFFF}'), Category::U);
        assert!(is_whitespace('\u{3000}'));
        assert!(is_whitespace('\u{85}'));
        assert!(!is_whitespace('\u{1C}'));
    }

    #[test]
    fn byte_mapping_is_gpt2s() {
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(byte_to_char(0xAD), '\u{143}');
        let chars = ByteChars::new();
        for b in 0..=255u8 {
            assert_eq!(chars.byte_of(chars.char_of(b)), Some(b));
        }
        assert_eq!(chars.byte_of('\u{144}'), None);
        assert_eq!(chars.byte_of(' '), None);
    }
}
