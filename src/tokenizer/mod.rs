//! Text ↔ token ids, exactly as llama.cpp does it for the supported models.
//!
//! A model's tokenizer lives in its GGUF metadata (`tokenizer.ggml.*`);
//! [`Tokenizer::from_metadata`] validates it and builds the lookup tables once. Two tokenizer
//! families are implemented, each matching llama.cpp (`src/llama-vocab.cpp`, `src/unicode.cpp`)
//! token for token:
//!
//! - `gpt2`: byte-level BPE (`bpe.rs`) with a pre-tokenizer chosen by `tokenizer.ggml.pre`
//!   (`pretokenize.rs`): Qwen2/3/3.5, SmolLM, Llama 3, GPT-2, StarCoder, GPT-4o (Phi-4-mini,
//!   Llama 4), DeepSeek LLM and Coder, Falcon, llama.cpp's default;
//! - `llama`: SentencePiece BPE with scores and byte fallback (`spm.rs`): Llama 2, Gemma 3;
//! - `gemma4`: the BPE of `bpe.rs` in SentencePiece's spelling ("▁" for spaces, `<0xNN>` byte
//!   tokens), over runs of line feeds and runs of the rest: Gemma 4.
//!
//! Encoding first cuts special tokens out of the text (`special.rs`), then tokenizes the plain
//! text between them. Decoding concatenates token pieces (`detokenize.rs`, also the streaming
//! [`Detokenizer`]). `vocab.rs` holds the tokens, their attributes and special roles,
//! `metadata.rs` reads GGUF metadata, `unicode.rs` + `unicode_table.rs` classify code points as
//! llama.cpp does, `error.rs` says what can be wrong with the metadata.
//!
//! ```text
//! let tokenizer = Tokenizer::from_metadata(gguf.metadata())?;
//! let ids = tokenizer.encode("<|im_start|>user\nHi<|im_end|>", EncodeOptions::default());
//! let mut stream = tokenizer.detokenizer(false);
//! for id in generated { print!("{}", stream.push(id)); }
//! ```

mod bpe;
mod detokenize;
mod error;
mod metadata;
mod pretokenize;
mod special;
mod spm;
mod unicode;
mod unicode_table;
mod vocab;
mod wordpiece;

#[cfg(test)]
mod tests;

pub use detokenize::{DecodeOptions, Detokenizer, Utf8Stream};
pub use error::TokenizerError;
pub use metadata::token_count;
pub use pretokenize::PreTokenizer;
pub use vocab::{MAX_VOCABULARY, SpecialRole, TokenKind};

use bpe::BpeModel;
use detokenize::{Pieces, Spelling};
use special::{Fragment, SpecialMatcher};
use spm::SpmModel;
use vocab::{Attrs, SpecialTokens, Vocab};
use wordpiece::WordPieceModel;

/// A token id: an index into the vocabulary.
pub type TokenId = u32;

/// The tokenizer families (`tokenizer.ggml.model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelKind {
    /// `gpt2`: byte-level BPE.
    BytePairGpt2,
    /// `llama`: SentencePiece BPE with scores.
    SentencePiece,
    /// `gemma4`: BPE merges over UTF-8 characters, spaces written "▁", byte fallback.
    Gemma4,
    /// `bert`: WordPiece (BERT's embedding models).
    WordPiece,
}

impl ModelKind {
    pub fn from_name(name: &str) -> Option<ModelKind> {
        match name {
            "gpt2" => Some(ModelKind::BytePairGpt2),
            "llama" => Some(ModelKind::SentencePiece),
            "gemma4" => Some(ModelKind::Gemma4),
            "bert" => Some(ModelKind::WordPiece),
            _ => None,
        }
    }
}

/// The settings llama.cpp attaches to a `tokenizer.ggml.pre` name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PreSettings {
    splitter: PreTokenizer,
    /// Remove spaces before punctuation when decoding a whole text.
    clean_spaces: bool,
    /// Take a word that is a token as a whole, without merging.
    ignore_merges: bool,
    /// Add BOS unless the metadata says otherwise.
    add_bos: bool,
    /// Token 11 is BOS unless the metadata names another (llama.cpp's default for byte-level
    /// BPE); false: no BOS unless the metadata names one.
    default_bos: bool,
    /// GPT-2's byte-level spelling; false for Gemma 4's SentencePiece-style BPE.
    byte_level: bool,
}

impl PreSettings {
    /// The pre-tokenizer names supported, with llama.cpp's settings for each. An absent name
    /// means `default` (llama.cpp warns); an unknown one is an error (as in llama.cpp).
    fn for_name(name: Option<&str>) -> Option<PreSettings> {
        let settings = |splitter, clean_spaces, ignore_merges, add_bos| PreSettings {
            splitter,
            clean_spaces,
            ignore_merges,
            add_bos,
            default_bos: true,
            byte_level: true,
        };
        use PreTokenizer::*;
        Some(match name.unwrap_or("default") {
            "default" => settings(Default, true, false, false),
            "gpt-2" | "phi-2" | "mpt" | "olmo" | "exaone4" | "jina-es" | "jina-de" | "gigachat"
            | "a.x-4.0" | "mellum" | "modern-bert" | "jais" => settings(Gpt2, true, false, false),
            "trillion" | "granite-docling" => settings(Gpt2, false, false, false),
            "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => {
                settings(StarCoder, true, false, false)
            }
            "smollm" | "command-r" => settings(StarCoder, false, false, false),
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
            | "lfm2" | "jina-v5-nano" => settings(Llama3, true, true, true),
            "dbrx" | "smaug-bpe" => settings(Llama3, true, false, false),
            // ChatGLM / GLM-4: the Llama 3 rules, and no BOS unless the metadata names one.
            "chatglm-bpe" => PreSettings { default_bos: false, ..settings(Llama3, true, false, false) },
            "glm4" | "glm5" => PreSettings { default_bos: false, ..settings(Llama3, true, true, false) },
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" | "solar-open" | "grok-2" => {
                settings(Qwen2, false, false, false)
            }
            "qwen35" => settings(Qwen35, false, false, false),
            "deepseek-llm" => settings(DeepSeekLlm, false, false, false),
            "deepseek-coder" => settings(DeepSeekCoder, false, false, false),
            "falcon" => settings(Falcon, true, false, false),
            "stablelm2" | "megrez" => settings(Qwen2, true, false, false),
            "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => settings(Gpt4o, false, false, false),
            _ => return None,
        })
    }

    /// Gemma 4 (`tokenizer.ggml.model = "gemma4"`, whatever `tokenizer.ggml.pre` says): runs of
    /// line feeds and of the rest, SentencePiece spelling, no default special tokens, and BOS
    /// always added (llama.cpp overrides `add_bos_token = false` for it).
    const GEMMA4: PreSettings = PreSettings {
        splitter: PreTokenizer::Newlines,
        clean_spaces: true,
        ignore_merges: false,
        add_bos: true,
        default_bos: false,
        byte_level: false,
    };
}

/// A tokenizer described independently of GGUF: what [`Tokenizer::from_spec`] needs.
/// [`Tokenizer::from_metadata`] fills one from `tokenizer.ggml.*`.
#[derive(Clone, Debug, Default)]
pub struct TokenizerSpec<'a> {
    /// `tokenizer.ggml.model`.
    pub model: &'a str,
    /// `tokenizer.ggml.pre` (byte-level BPE only).
    pub pre: Option<&'a str>,
    pub tokens: &'a [String],
    pub scores: Option<Vec<f32>>,
    /// llama.cpp's token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused,
    /// 6 byte.
    pub token_types: Option<&'a [i32]>,
    /// `"left right"` pairs, best first (byte-level BPE only).
    pub merges: Option<&'a [String]>,
    pub add_bos: Option<bool>,
    pub add_eos: Option<bool>,
    pub add_space_prefix: Option<bool>,
    /// WordPiece's normalizer: lowercase (default true) and strip accents (default: as
    /// lowercase).
    pub lowercase: Option<bool>,
    pub strip_accents: Option<bool>,
    /// Special token ids given by the metadata.
    pub special_ids: Vec<(SpecialRole, u64)>,
    /// `general.name`: llama.cpp sets some token attributes by model name (Phi-3).
    pub model_name: Option<&'a str>,
}

/// How to encode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Add BOS/EOS where the model asks for them (`tokenizer.ggml.add_bos_token`...).
    pub add_special: bool,
    /// Recognise control tokens written in the text (`<|im_start|>`) as single tokens. When
    /// false, they are tokenized as plain text; user-defined tokens are still recognised (as
    /// in llama.cpp and Hugging Face tokenizers).
    pub parse_special: bool,
}

impl Default for EncodeOptions {
    /// llama.cpp's defaults for a prompt: both on.
    fn default() -> EncodeOptions {
        EncodeOptions { add_special: true, parse_special: true }
    }
}

enum Model {
    Bpe(BpeModel),
    Spm(SpmModel),
    WordPiece(WordPieceModel),
}

/// A model's tokenizer: encodes text to token ids and decodes them back.
pub struct Tokenizer {
    kind: ModelKind,
    vocab: Vocab,
    model: Model,
    specials: SpecialTokens,
    add_bos: bool,
    add_eos: bool,
    /// WordPiece: a separator (`[SEP]`) ends the text when specials are added.
    add_sep: bool,
    /// SentencePiece: a space is put before text that starts the input or follows a special
    /// token.
    add_space_prefix: bool,
    clean_spaces: bool,
    /// Control, unknown and user-defined tokens (`parse_special = true`).
    all_specials: SpecialMatcher,
    /// User-defined tokens only (`parse_special = false`).
    user_defined: SpecialMatcher,
    pieces: Pieces,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("kind", &self.kind)
            .field("vocab_size", &self.vocab.len())
            .field("bos", &self.bos())
            .field("eos", &self.eos())
            .field("add_bos", &self.add_bos)
            .field("add_eos", &self.add_eos)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Builds the tokenizer described by a model's `tokenizer.ggml.*` metadata.
    pub fn from_metadata(metadata: &crate::gguf::Metadata) -> Result<Tokenizer, TokenizerError> {
        Tokenizer::from_spec(metadata::spec_from_metadata(metadata)?)
    }

    pub fn from_spec(spec: TokenizerSpec<'_>) -> Result<Tokenizer, TokenizerError> {
        let kind = ModelKind::from_name(spec.model)
            .ok_or_else(|| TokenizerError::UnsupportedModel(spec.model.into()))?;
        let mut vocab = Vocab::new(spec.tokens, spec.scores.as_deref(), spec.token_types)?;

        // llama.cpp's per-family defaults, before the metadata has its say.
        let (pre, default_specials): (Option<PreSettings>, &[(SpecialRole, TokenId)]) = match kind {
            ModelKind::BytePairGpt2 => {
                let pre = PreSettings::for_name(spec.pre)
                    .ok_or_else(|| TokenizerError::UnsupportedPreTokenizer(spec.pre.unwrap_or("").into()))?;
                let defaults: &[_] = if pre.default_bos {
                    &[(SpecialRole::Bos, 11), (SpecialRole::Eos, 11)]
                } else {
                    &[(SpecialRole::Eos, 11)]
                };
                (Some(pre), defaults)
            }
            ModelKind::SentencePiece => {
                (None, &[(SpecialRole::Bos, 1), (SpecialRole::Eos, 2), (SpecialRole::Unk, 0)])
            }
            ModelKind::Gemma4 => (Some(PreSettings::GEMMA4), &[]),
            ModelKind::WordPiece => (
                None,
                &[
                    (SpecialRole::Bos, 101),
                    (SpecialRole::Unk, 100),
                    (SpecialRole::Sep, 102),
                    (SpecialRole::Pad, 0),
                    (SpecialRole::Mask, 103),
                ],
            ),
        };
        let specials = SpecialTokens::resolve(&mut vocab, default_specials, &spec.special_ids)?;
        vocab.apply_name_rules(spec.model_name);

        // WordPiece: llama.cpp adds [CLS] (its BOS) and [SEP] whatever the metadata says.
        let add_bos = match pre {
            Some(pre) if kind == ModelKind::Gemma4 => pre.add_bos,
            Some(pre) => spec.add_bos.unwrap_or(pre.add_bos),
            None if kind == ModelKind::WordPiece => true,
            None => spec.add_bos.unwrap_or(true),
        };
        let add_eos = spec.add_eos.unwrap_or(false);
        let add_sep = kind == ModelKind::WordPiece;
        if add_sep && specials.get(SpecialRole::Sep).is_none() {
            return Err(TokenizerError::MissingSpecialToken("SEP"));
        }
        if add_bos && specials.get(SpecialRole::Bos).is_none() {
            return Err(TokenizerError::MissingSpecialToken("BOS"));
        }
        if add_eos && specials.get(SpecialRole::Eos).is_none() {
            return Err(TokenizerError::MissingSpecialToken("EOS"));
        }

        let (model, spelling, add_space_prefix, clean_spaces) = match pre {
            Some(pre) => {
                let merges = spec.merges.ok_or(TokenizerError::MissingKey("tokenizer.ggml.merges"))?;
                let bpe = BpeModel::new(&vocab, merges, pre.splitter, pre.ignore_merges, pre.byte_level)?;
                (
                    Model::Bpe(bpe),
                    if pre.byte_level { Spelling::ByteLevel } else { Spelling::SentencePiece },
                    spec.add_space_prefix.unwrap_or(false),
                    pre.clean_spaces,
                )
            }
            None if kind == ModelKind::WordPiece => {
                let lowercase = spec.lowercase.unwrap_or(true);
                let strip_accents = spec.strip_accents.unwrap_or(lowercase);
                let unknown = specials.get(SpecialRole::Unk);
                let wordpiece = WordPieceModel::new(&vocab, unknown, lowercase, strip_accents);
                (Model::WordPiece(wordpiece), Spelling::SentencePiece, false, true)
            }
            None => {
                let spm = SpmModel::new(&vocab, specials.get(SpecialRole::Unk));
                (Model::Spm(spm), Spelling::SentencePiece, spec.add_space_prefix.unwrap_or(true), false)
            }
        };

        let all_specials =
            SpecialMatcher::new(vocab.iter().filter(|&(id, _)| vocab.attrs(id).has_any(Attrs::SPECIAL)));
        let user_defined = SpecialMatcher::new(vocab.iter().filter(|&(id, _)| {
            let attrs = vocab.attrs(id);
            attrs.has_any(Attrs::SPECIAL) && !attrs.has_any(Attrs::NOT_TEXT)
        }));
        let pieces = Pieces::new(&vocab, spelling);

        Ok(Tokenizer {
            kind,
            vocab,
            model,
            specials,
            add_bos,
            add_eos,
            add_sep,
            add_space_prefix,
            clean_spaces,
            all_specials,
            user_defined,
            pieces,
        })
    }

    /// Encodes `text` as llama.cpp's `llama_tokenize(text, add_special, parse_special)`.
    pub fn encode(&self, text: &str, options: EncodeOptions) -> Vec<TokenId> {
        let matcher = if options.parse_special { &self.all_specials } else { &self.user_defined };
        let mut fragments = matcher.partition(text);
        // RSTRIP tokens drop the whitespace after them (C's isspace, as llama.cpp tests it).
        let mut strip = false;
        fragments.retain_mut(|fragment| match fragment {
            Fragment::Token(id) => {
                strip = self.vocab.attrs(*id).has_any(Attrs::RSTRIP);
                true
            }
            Fragment::Text(text) => {
                if std::mem::take(&mut strip) {
                    *text = text.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
                }
                !text.is_empty()
            }
        });
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if options.add_special && self.add_bos {
            out.extend(self.specials.get(SpecialRole::Bos));
        }
        match &self.model {
            Model::Bpe(bpe) => {
                for fragment in fragments {
                    match fragment {
                        Fragment::Text(text) => bpe.encode(&self.vocab, text, &mut out),
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
            Model::WordPiece(wordpiece) => {
                for fragment in fragments {
                    match fragment {
                        Fragment::Text(text) => wordpiece.encode(&self.vocab, text, &mut out),
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
            Model::Spm(spm) => {
                let mut after_special = true; // the start of the input counts as one
                let mut escaped = String::new();
                for fragment in fragments {
                    match fragment {
                        Fragment::Text(text) => {
                            escaped.clear();
                            if self.add_space_prefix && after_special {
                                escaped.push('▁');
                            }
                            for c in text.chars() {
                                escaped.push(if c == ' ' { '▁' } else { c });
                            }
                            spm.encode(&self.vocab, &escaped, &mut out);
                            after_special = false;
                        }
                        Fragment::Token(id) => {
                            out.push(id);
                            after_special = true;
                        }
                    }
                }
            }
        }
        if options.add_special && self.add_eos {
            out.extend(self.specials.get(SpecialRole::Eos));
        }
        if options.add_special && self.add_sep {
            out.extend(self.specials.get(SpecialRole::Sep));
        }
        out
    }

    pub fn model_kind(&self) -> ModelKind {
        self.kind
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The token's text as stored in the vocabulary (GPT-2 byte characters, "▁" for spaces,
    /// `<0xNN>`...), or `None` for an id outside the vocabulary.
    pub fn token_str(&self, id: TokenId) -> Option<&str> {
        self.vocab.text(id)
    }

    /// The id of the token whose vocabulary text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<TokenId> {
        self.vocab.id_of(text)
    }

    pub fn token_kind(&self, id: TokenId) -> Option<TokenKind> {
        ((id as usize) < self.vocab.len()).then(|| self.vocab.kind(id))
    }

    /// The token's score (SentencePiece) or 0.
    pub fn token_score(&self, id: TokenId) -> f32 {
        self.vocab.score(id)
    }

    pub fn special_token(&self, role: SpecialRole) -> Option<TokenId> {
        self.specials.get(role)
    }

    pub fn bos(&self) -> Option<TokenId> {
        self.specials.get(SpecialRole::Bos)
    }

    pub fn eos(&self) -> Option<TokenId> {
        self.specials.get(SpecialRole::Eos)
    }

    /// Whether encoding with `add_special` starts with BOS.
    pub fn adds_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether encoding with `add_special` ends with EOS.
    pub fn adds_eos(&self) -> bool {
        self.add_eos
    }

    /// True for tokens after which generation stops (EOS, end of turn, ...), as llama.cpp's
    /// `llama_vocab_is_eog`.
    pub fn is_end_of_generation(&self, id: TokenId) -> bool {
        self.specials.is_end_of_generation(id)
    }

    /// All end-of-generation tokens, sorted.
    pub fn end_of_generation_tokens(&self) -> &[TokenId] {
        self.specials.end_of_generation()
    }
}
