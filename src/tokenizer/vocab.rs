//! The vocabulary: token texts, scores, attributes, lookup by text, and the special tokens.
//!
//! Besides reading the arrays, this reproduces what llama.cpp's `llama_vocab::impl::load` does
//! to them, because it changes tokenization: empty tokens get a placeholder text, and tokens
//! that look like control tokens (`<|im_end|>`, `<end_of_turn>`, FIM markers...) are made
//! control tokens even when the file says otherwise, which makes them special in the text.

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;

use super::TokenId;
use super::error::TokenizerError;

/// llama.cpp's token attributes (`llama_token_attr`), as a bit set: a token can gain CONTROL on
/// top of its type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Attrs(u8);

impl Attrs {
    pub(super) const UNDEFINED: Attrs = Attrs(0);
    pub(super) const UNKNOWN: Attrs = Attrs(1);
    pub(super) const UNUSED: Attrs = Attrs(2);
    pub(super) const NORMAL: Attrs = Attrs(4);
    pub(super) const CONTROL: Attrs = Attrs(8);
    pub(super) const USER_DEFINED: Attrs = Attrs(16);
    pub(super) const BYTE: Attrs = Attrs(32);
    /// Whitespace after this token in the text is dropped (llama.cpp's `RSTRIP`; set for
    /// Phi-3's special tokens).
    pub(super) const RSTRIP: Attrs = Attrs(64);

    /// From `tokenizer.ggml.token_type` (llama.cpp's `llama_token_type`).
    fn from_token_type(token_type: i32) -> Attrs {
        match token_type {
            1 => Attrs::NORMAL,
            2 => Attrs::UNKNOWN,
            3 => Attrs::CONTROL,
            4 => Attrs::USER_DEFINED,
            5 => Attrs::UNUSED,
            6 => Attrs::BYTE,
            _ => Attrs::UNDEFINED,
        }
    }

    /// Tokens that are not text: left out when decoding unless asked for, and recognised in
    /// the text only when parsing special tokens.
    pub(super) const NOT_TEXT: Attrs = Attrs(Attrs::UNKNOWN.0 | Attrs::CONTROL.0);
    /// Tokens cut out of the text before tokenizing it (llama.cpp's special token cache).
    pub(super) const SPECIAL: Attrs = Attrs(Attrs::NOT_TEXT.0 | Attrs::USER_DEFINED.0);

    pub(super) fn has_any(self, other: Attrs) -> bool {
        self.0 & other.0 != 0
    }

    fn union(self, other: Attrs) -> Attrs {
        Attrs(self.0 | other.0)
    }

    fn without(self, other: Attrs) -> Attrs {
        Attrs(self.0 & !other.0)
    }
}

/// What a token is, for display and for callers deciding what to show.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// Ordinary text.
    Normal,
    /// The unknown-token placeholder.
    Unknown,
    /// A control token (BOS, EOS, chat markers): not text, rendered only on request.
    Control,
    /// A token the model's authors added as a whole string; always matched as one piece.
    UserDefined,
    /// A reserved slot that the model never produces.
    Unused,
    /// One raw byte (`<0xNN>`), used where no other token fits.
    Byte,
    /// Type 0 or an unknown type number.
    Undefined,
}

/// The roles a token can be given in the metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpecialRole {
    Bos,
    Eos,
    /// End of turn.
    Eot,
    /// End of message.
    Eom,
    Unk,
    Sep,
    Pad,
    Mask,
    FimPre,
    FimSuf,
    FimMid,
    FimPad,
    FimRep,
    FimSep,
}

impl SpecialRole {
    pub const ALL: [SpecialRole; 14] = [
        SpecialRole::Bos,
        SpecialRole::Eos,
        SpecialRole::Eot,
        SpecialRole::Eom,
        SpecialRole::Unk,
        SpecialRole::Sep,
        SpecialRole::Pad,
        SpecialRole::Mask,
        SpecialRole::FimPre,
        SpecialRole::FimSuf,
        SpecialRole::FimMid,
        SpecialRole::FimPad,
        SpecialRole::FimRep,
        SpecialRole::FimSep,
    ];

    /// The GGUF metadata key holding this role's token id.
    pub fn metadata_key(self) -> &'static str {
        match self {
            SpecialRole::Bos => "tokenizer.ggml.bos_token_id",
            SpecialRole::Eos => "tokenizer.ggml.eos_token_id",
            SpecialRole::Eot => "tokenizer.ggml.eot_token_id",
            SpecialRole::Eom => "tokenizer.ggml.eom_token_id",
            SpecialRole::Unk => "tokenizer.ggml.unknown_token_id",
            // Sic: the key is spelled this way in GGUF files.
            SpecialRole::Sep => "tokenizer.ggml.seperator_token_id",
            SpecialRole::Pad => "tokenizer.ggml.padding_token_id",
            SpecialRole::Mask => "tokenizer.ggml.mask_token_id",
            SpecialRole::FimPre => "tokenizer.ggml.fim_pre_token_id",
            SpecialRole::FimSuf => "tokenizer.ggml.fim_suf_token_id",
            SpecialRole::FimMid => "tokenizer.ggml.fim_mid_token_id",
            SpecialRole::FimPad => "tokenizer.ggml.fim_pad_token_id",
            SpecialRole::FimRep => "tokenizer.ggml.fim_rep_token_id",
            SpecialRole::FimSep => "tokenizer.ggml.fim_sep_token_id",
        }
    }

    /// Position in [`SpecialRole::ALL`] (the declaration order).
    fn index(self) -> usize {
        self as usize
    }
}

/// Token texts with their scores and attributes, and the reverse lookup.
pub(super) struct Vocab {
    texts: Vec<String>,
    scores: Vec<f32>,
    attrs: Vec<Attrs>,
    /// Text → id, as ids into `texts` (a vocabulary of a million tokens would otherwise hold
    /// every text twice); for duplicate texts the last id wins, as in llama.cpp.
    ids: HashTable<TokenId>,
    hasher: RandomState,
}

impl Vocab {
    pub(super) fn new(
        tokens: &[String],
        scores: Option<&[f32]>,
        token_types: Option<&[i32]>,
    ) -> Result<Vocab, TokenizerError> {
        if tokens.is_empty() {
            return Err(TokenizerError::EmptyVocabulary);
        }
        check_vocabulary_size(tokens.len())?;
        let check_len = |key: &'static str, found: usize| {
            if found == tokens.len() {
                Ok(())
            } else {
                Err(TokenizerError::LengthMismatch { key, tokens: tokens.len(), found })
            }
        };
        if let Some(scores) = scores {
            check_len("tokenizer.ggml.scores", scores.len())?;
        }
        if let Some(types) = token_types {
            check_len("tokenizer.ggml.token_type", types.len())?;
        }

        let mut texts: Vec<String> = Vec::with_capacity(tokens.len());
        let mut ids = HashTable::with_capacity(tokens.len());
        let hasher = RandomState::new();
        for (id, text) in tokens.iter().enumerate() {
            // An empty token could never be matched or printed; llama.cpp renames it.
            let text = if text.is_empty() { format!("[EMPTY_{id}]") } else { text.clone() };
            let hash = hasher.hash_one(text.as_str());
            match ids.find_mut(hash, |&other: &TokenId| texts[other as usize] == text) {
                Some(slot) => *slot = id as TokenId,
                None => {
                    ids.insert_unique(hash, id as TokenId, |&other| {
                        hasher.hash_one(texts[other as usize].as_str())
                    });
                }
            }
            texts.push(text);
        }
        let scores = scores.map_or_else(|| vec![0.0; tokens.len()], <[f32]>::to_vec);
        let attrs = match token_types {
            Some(types) => types.iter().map(|&t| Attrs::from_token_type(t)).collect(),
            // Without types every token is ordinary text.
            None => vec![Attrs::NORMAL; tokens.len()],
        };
        let vocab = Vocab { texts, scores, attrs, ids, hasher };
        vocab.check_byte_tokens()?;
        Ok(vocab)
    }

    /// Byte tokens are decoded by parsing their text, so it must be exactly `<0xNN>`.
    fn check_byte_tokens(&self) -> Result<(), TokenizerError> {
        for (id, text) in self.texts.iter().enumerate() {
            if self.attrs[id].has_any(Attrs::BYTE) && parse_byte_token(text).is_none() {
                return Err(TokenizerError::MalformedByteToken { id: id as TokenId, text: text.clone() });
            }
        }
        Ok(())
    }

    pub(super) fn len(&self) -> usize {
        self.texts.len()
    }

    pub(super) fn text(&self, id: TokenId) -> Option<&str> {
        self.texts.get(id as usize).map(String::as_str)
    }

    pub(super) fn score(&self, id: TokenId) -> f32 {
        self.scores.get(id as usize).copied().unwrap_or(0.0)
    }

    pub(super) fn attrs(&self, id: TokenId) -> Attrs {
        self.attrs.get(id as usize).copied().unwrap_or_default()
    }

    /// llama.cpp's attribute rules by model name (`llama_vocab::impl::load`): a model named
    /// Phi-3 strips the whitespace after every special token but `<unk>`, `<s>` and
    /// `<|endoftext|>`, and after `</s>`. (llama.cpp refuses the file when one of those four
    /// is missing; here the rule applies to the ones present.)
    pub(super) fn apply_name_rules(&mut self, model_name: Option<&str>) {
        let name = model_name.unwrap_or("").to_lowercase();
        if !(name.contains("phi-3") || name.contains("phi3")) {
            return;
        }
        for attrs in self.attrs.iter_mut().filter(|a| a.has_any(Attrs::SPECIAL)) {
            *attrs = attrs.union(Attrs::RSTRIP);
        }
        for (text, rstrip) in [("</s>", true), ("<unk>", false), ("<s>", false), ("<|endoftext|>", false)] {
            if let Some(id) = self.id_of(text) {
                let attrs = &mut self.attrs[id as usize];
                *attrs = if rstrip { attrs.union(Attrs::RSTRIP) } else { attrs.without(Attrs::RSTRIP) };
            }
        }
    }

    pub(super) fn id_of(&self, text: &str) -> Option<TokenId> {
        self.ids.find(self.hasher.hash_one(text), |&id| self.texts[id as usize] == text).copied()
    }

    pub(super) fn kind(&self, id: TokenId) -> TokenKind {
        let attrs = self.attrs(id);
        let kinds = [
            (Attrs::CONTROL, TokenKind::Control),
            (Attrs::UNKNOWN, TokenKind::Unknown),
            (Attrs::USER_DEFINED, TokenKind::UserDefined),
            (Attrs::BYTE, TokenKind::Byte),
            (Attrs::UNUSED, TokenKind::Unused),
            (Attrs::NORMAL, TokenKind::Normal),
        ];
        kinds
            .into_iter()
            .find(|&(attr, _)| attrs.has_any(attr))
            .map_or(TokenKind::Undefined, |(_, kind)| kind)
    }

    /// All `(id, text)` pairs.
    pub(super) fn iter(&self) -> impl Iterator<Item = (TokenId, &str)> {
        self.texts.iter().enumerate().map(|(id, text)| (id as TokenId, text.as_str()))
    }

    fn add_attrs(&mut self, id: TokenId, extra: Attrs) {
        if let Some(attrs) = self.attrs.get_mut(id as usize) {
            *attrs = attrs.union(extra);
        }
    }

    fn set_attrs(&mut self, id: TokenId, attrs: Attrs) {
        if let Some(slot) = self.attrs.get_mut(id as usize) {
            *slot = attrs;
        }
    }

    /// The lowest id whose text is one of `texts`.
    fn first_id_among(&self, texts: &[&str]) -> Option<TokenId> {
        texts.iter().filter_map(|t| self.id_of(t)).min()
    }
}

/// `<0xNN>` → the byte NN.
pub(super) fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// The special token of each role, and the tokens that end generation.
#[derive(Clone, Debug)]
pub(super) struct SpecialTokens {
    ids: [Option<TokenId>; SpecialRole::ALL.len()],
    /// Sorted.
    end_of_generation: Vec<TokenId>,
}

impl SpecialTokens {
    pub(super) fn get(&self, role: SpecialRole) -> Option<TokenId> {
        self.ids[role.index()]
    }

    pub(super) fn is_end_of_generation(&self, id: TokenId) -> bool {
        self.end_of_generation.binary_search(&id).is_ok()
    }

    pub(super) fn end_of_generation(&self) -> &[TokenId] {
        &self.end_of_generation
    }

    /// Resolves the roles: the model type's defaults (dropped if outside the vocabulary, as
    /// llama.cpp does), overridden by the metadata (where an id outside the vocabulary is an
    /// error: llama.cpp would warn and keep the default). Then applies llama.cpp's text-based
    /// detection, which may also turn tokens into control tokens in `vocab`.
    pub(super) fn resolve(
        vocab: &mut Vocab,
        defaults: &[(SpecialRole, TokenId)],
        from_metadata: &[(SpecialRole, u64)],
    ) -> Result<SpecialTokens, TokenizerError> {
        let mut ids = [None; SpecialRole::ALL.len()];
        for &(role, id) in defaults {
            if (id as usize) < vocab.len() {
                ids[role.index()] = Some(id);
            }
        }
        for &(role, id) in from_metadata {
            if id >= vocab.len() as u64 {
                return Err(TokenizerError::SpecialTokenOutOfRange {
                    key: role.metadata_key(),
                    id,
                    vocab_size: vocab.len(),
                });
            }
            ids[role.index()] = Some(id as TokenId);
        }
        let mut specials = SpecialTokens { ids, end_of_generation: Vec::new() };
        specials.detect_by_text(vocab);
        Ok(specials)
    }

    /// llama.cpp's "auto-detect special tokens by text" pass. Where several texts of a list
    /// are present, llama.cpp takes whichever its hash map yields first; we take the lowest id.
    fn detect_by_text(&mut self, vocab: &mut Vocab) {
        const EOT: &[&str] = &[
            "<|eot_id|>",
            "<|im_end|>",
            "<|end|>",
            "<end_of_turn>",
            "<|endoftext|>",
            "<|end_of_text|>",
            "<EOT>",
            "_<EOT>",
            "[EOT]",
            "<｜end▁of▁sentence｜>",
            "<end_of_utterance>",
        ];
        const EOM: &[&str] = &["<|eom_id|>"];
        const FIM_PRE: &[&str] = &[
            "<|fim_prefix|>",
            "<fim-prefix>",
            "<fim_prefix>",
            "<｜fim▁begin｜>",
            "<PRE>",
            "▁<PRE>",
            "<|code_prefix|>",
            "<|prefix|>",
        ];
        const FIM_SUF: &[&str] = &[
            "<|fim_suffix|>",
            "<fim-suffix>",
            "<fim_suffix>",
            "<｜fim▁hole｜>",
            "<SUF>",
            "▁<SUF>",
            "<|code_suffix|>",
            "<|suffix|>",
        ];
        const FIM_MID: &[&str] = &[
            "<|fim_middle|>",
            "<fim-middle>",
            "<fim_middle>",
            "<｜fim▁end｜>",
            "<MID>",
            "▁<MID>",
            "<|code_middle|>",
            "<|middle|>",
        ];
        const FIM_PAD: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
        const FIM_REP: &[&str] = &["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"];
        const FIM_SEP: &[&str] = &["<|file_sep|>"];
        const END_OF_GENERATION: &[&str] = &[
            "<|eot_id|>",
            "<|im_end|>",
            "<|end|>",
            "<|return|>",
            "<|call|>",
            "<|flush|>",
            "<|calls|>",
            "<end_of_turn>",
            "<|endoftext|>",
            "</s>",
            "<|eom_id|>",
            "<EOT>",
            "_<EOT>",
            "[EOT]",
            "[EOS]",
            "<|end_of_text|>",
            "<end_of_utterance>",
            "<eos>",
            "<turn|>",
            "<|tool_response>",
            "<｜end▁of▁sentence｜>",
            "[e~[",
        ];
        /// gpt-oss markers that llama.cpp always renders as text.
        const ALWAYS_RENDERED: &[&str] = &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

        for (role, texts) in [
            (SpecialRole::Eot, EOT),
            (SpecialRole::Eom, EOM),
            (SpecialRole::FimPre, FIM_PRE),
            (SpecialRole::FimSuf, FIM_SUF),
            (SpecialRole::FimMid, FIM_MID),
            (SpecialRole::FimPad, FIM_PAD),
            (SpecialRole::FimRep, FIM_REP),
            (SpecialRole::FimSep, FIM_SEP),
        ] {
            if self.get(role).is_some() {
                continue;
            }
            if let Some(id) = vocab.first_id_among(texts) {
                self.ids[role.index()] = Some(id);
                vocab.add_attrs(id, Attrs::CONTROL);
            }
        }

        // Control tokens named "unused" are reserved slots.
        let unused: Vec<TokenId> = vocab
            .iter()
            .filter(|&(id, text)| vocab.attrs(id).has_any(Attrs::CONTROL) && text.contains("unused"))
            .map(|(id, _)| id)
            .collect();
        for id in unused {
            vocab.add_attrs(id, Attrs::UNUSED);
        }

        let mut eog: Vec<TokenId> = [SpecialRole::FimPad, SpecialRole::FimRep, SpecialRole::FimSep]
            .iter()
            .filter_map(|&role| self.get(role))
            .collect();
        for text in END_OF_GENERATION {
            // Every token with that text (llama.cpp walks its text → id map, so only the last
            // of duplicate texts).
            if let Some(id) = vocab.id_of(text) {
                eog.push(id);
                vocab.add_attrs(id, Attrs::CONTROL);
            }
        }
        for text in ALWAYS_RENDERED {
            if let Some(id) = vocab.id_of(text) {
                vocab.set_attrs(id, Attrs::USER_DEFINED);
            }
        }
        eog.extend(
            [SpecialRole::Eos, SpecialRole::Eot, SpecialRole::Eom].iter().filter_map(|&r| self.get(r)),
        );
        eog.sort_unstable();
        eog.dedup();

        let find = |eog: &[TokenId], vocab: &Vocab, text: &str| {
            eog.iter().copied().find(|&id| vocab.text(id) == Some(text))
        };
        // gpt-oss / solar-open: "<|end|>" ends a message, not the generation.
        let has = |eog: &[TokenId], vocab: &Vocab, text: &str| find(eog, vocab, text).is_some();
        let has_call = has(&eog, vocab, "<|call|>") || has(&eog, vocab, "<|calls|>");
        let end_is_not_eog = has_call && (has(&eog, vocab, "<|return|>") || has(&eog, vocab, "<|flush|>"));
        if let Some(end) = find(&eog, vocab, "<|end|>").filter(|_| end_is_not_eog) {
            eog.retain(|&id| id != end);
            vocab.set_attrs(end, Attrs::USER_DEFINED);
        }
        // Gemma 4 / PLaMo 2: "</s>" is ordinary text there.
        let s_is_text = has(&eog, vocab, "<|tool_response>") || has(&eog, vocab, "<|plamo:eos|>");
        if let Some(s) = find(&eog, vocab, "</s>").filter(|_| s_is_text) {
            eog.retain(|&id| id != s);
            vocab.set_attrs(s, Attrs::NORMAL);
        }
        self.end_of_generation = eog;
    }
}

/// The most tokens a vocabulary may have: 4× the largest real one (Gemma 3's 262,144), far
/// below what a 32-bit token id numbers. Checked before anything is built from the list: a
/// 35 MB file of 4 M empty tokens took 838 MB to build a tokenizer for.
pub const MAX_VOCABULARY: usize = 1 << 20;

pub(super) fn check_vocabulary_size(tokens: usize) -> Result<(), TokenizerError> {
    if tokens > MAX_VOCABULARY { Err(TokenizerError::VocabularyTooLarge(tokens)) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_indexed_in_declaration_order() {
        for (i, role) in SpecialRole::ALL.iter().enumerate() {
            assert_eq!(role.index(), i);
        }
    }

    #[test]
    fn byte_token_texts() {
        assert_eq!(parse_byte_token("<0x0A>"), Some(10));
        assert_eq!(parse_byte_token("<0xff>"), Some(255));
        for bad in ["<0x-1>", "<0xZZ>", "<0x1>", "<0x100>", "<0x0A", "<0X0A>", "<0x+A>", ""] {
            assert_eq!(parse_byte_token(bad), None, "{bad}");
        }
    }

    #[test]
    fn control_looking_tokens_become_control_tokens() {
        let tokens: Vec<String> =
            ["a", "<|im_end|>", "<|fim_prefix|>", "<unused1>", "<|end|>", "<|return|>", "<|call|>"]
                .map(String::from)
                .to_vec();
        let types = [1, 1, 1, 3, 3, 3, 3];
        let mut vocab = Vocab::new(&tokens, None, Some(&types)).unwrap();
        let specials = SpecialTokens::resolve(&mut vocab, &[], &[(SpecialRole::Eos, 1)]).unwrap();
        assert!(vocab.attrs(1).has_any(Attrs::CONTROL));
        assert!(vocab.attrs(2).has_any(Attrs::CONTROL));
        assert_eq!(specials.get(SpecialRole::FimPre), Some(2));
        assert!(vocab.attrs(3).has_any(Attrs::UNUSED));
        assert!(specials.is_end_of_generation(1));
        // gpt-oss: with <|return|> and <|call|>, <|end|> is not the end of generation.
        assert!(!specials.is_end_of_generation(4));
        assert_eq!(vocab.kind(4), TokenKind::UserDefined);
        assert!(specials.is_end_of_generation(5) && specials.is_end_of_generation(6));
    }
}
