//! Why a tokenizer could not be built from a model's metadata.

use std::fmt;

/// Everything that can be wrong with a model's `tokenizer.*` metadata. Tokenizing and decoding
/// never fail once a [`Tokenizer`](super::Tokenizer) exists; only building one does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenizerError {
    /// A required key is absent.
    MissingKey(&'static str),
    /// A key holds a value of another type than the format prescribes.
    WrongType {
        key: &'static str,
        expected: &'static str,
    },
    /// `tokenizer.ggml.model` names a tokenizer this crate does not implement.
    UnsupportedModel(String),
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement (llama.cpp
    /// refuses unknown names too).
    UnsupportedPreTokenizer(String),
    EmptyVocabulary,
    /// More tokens than [`MAX_VOCABULARY`](super::vocab::MAX_VOCABULARY).
    VocabularyTooLarge(usize),
    /// A per-token array (scores, token types) does not have one entry per token.
    LengthMismatch {
        key: &'static str,
        tokens: usize,
        found: usize,
    },
    /// A special token id (BOS, EOS, ...) is not a token of the vocabulary.
    SpecialTokenOutOfRange {
        key: &'static str,
        id: u64,
        vocab_size: usize,
    },
    /// The model asks for a BOS/EOS token to be added but has none.
    MissingSpecialToken(&'static str),
    /// A token of type BYTE whose text is not `<0xNN>` with two hex digits.
    MalformedByteToken {
        id: u32,
        text: String,
    },
    /// A merge rule that is not two tokens separated by a space.
    MalformedMerge {
        index: usize,
        merge: String,
    },
    /// A merge rule naming a string that is not a token of the vocabulary.
    MergeOfUnknownToken {
        index: usize,
        token: String,
    },
}

impl TokenizerError {
    /// A stable snake_case name for the kind of problem.
    pub fn kind(&self) -> &'static str {
        match self {
            TokenizerError::MissingKey(_) => "missing_key",
            TokenizerError::WrongType { .. } => "wrong_type",
            TokenizerError::UnsupportedModel(_) => "unsupported_tokenizer",
            TokenizerError::UnsupportedPreTokenizer(_) => "unsupported_pre_tokenizer",
            TokenizerError::EmptyVocabulary => "empty_vocabulary",
            TokenizerError::VocabularyTooLarge(_) => "vocabulary_too_large",
            TokenizerError::LengthMismatch { .. } => "length_mismatch",
            TokenizerError::SpecialTokenOutOfRange { .. } => "special_token_out_of_range",
            TokenizerError::MissingSpecialToken(_) => "missing_special_token",
            TokenizerError::MalformedByteToken { .. } => "malformed_byte_token",
            TokenizerError::MalformedMerge { .. } => "malformed_merge",
            TokenizerError::MergeOfUnknownToken { .. } => "merge_of_unknown_token",
        }
    }
}

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenizerError::MissingKey(key) => write!(f, "tokenizer metadata: missing key `{key}`"),
            TokenizerError::WrongType { key, expected } => {
                write!(f, "tokenizer metadata: `{key}` should be {expected}")
            }
            TokenizerError::UnsupportedModel(model) => write!(
                f,
                "unsupported tokenizer model `{model}` (supported: `gpt2` byte-level BPE, `llama` SentencePiece, `gemma4`)"
            ),
            TokenizerError::UnsupportedPreTokenizer(pre) => {
                write!(f, "unsupported pre-tokenizer `{pre}` (tokenizer.ggml.pre)")
            }
            TokenizerError::EmptyVocabulary => write!(f, "tokenizer metadata: the vocabulary is empty"),
            TokenizerError::VocabularyTooLarge(n) => {
                write!(
                    f,
                    "tokenizer metadata: {n} tokens, more than the {} accepted",
                    super::vocab::MAX_VOCABULARY
                )
            }
            TokenizerError::LengthMismatch { key, tokens, found } => {
                write!(f, "tokenizer metadata: `{key}` has {found} entries for {tokens} tokens")
            }
            TokenizerError::SpecialTokenOutOfRange { key, id, vocab_size } => {
                write!(f, "tokenizer metadata: `{key}` = {id} is not below the vocabulary size {vocab_size}")
            }
            TokenizerError::MissingSpecialToken(which) => {
                write!(f, "tokenizer metadata: the model adds a {which} token but defines none")
            }
            TokenizerError::MalformedByteToken { id, text } => {
                write!(f, "tokenizer metadata: byte token {id} is {text:?}, not <0xNN>")
            }
            TokenizerError::MalformedMerge { index, merge } => {
                write!(
                    f,
                    "tokenizer metadata: merge {index} ({merge:?}) is not two tokens separated by a space"
                )
            }
            TokenizerError::MergeOfUnknownToken { index, token } => {
                write!(f, "tokenizer metadata: merge {index} names {token:?}, which is not a token")
            }
        }
    }
}

impl std::error::Error for TokenizerError {}
