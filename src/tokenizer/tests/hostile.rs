//! Hostile or broken metadata gives a typed error, never a panic.

use super::super::{SpecialRole, Tokenizer, TokenizerError, TokenizerSpec};
use super::SmallVocab;
use crate::gguf::{Array, Metadata, Value};

fn build(spec: TokenizerSpec<'_>) -> Result<Tokenizer, TokenizerError> {
    Tokenizer::from_spec(spec)
}

#[test]
fn per_token_arrays_must_match_the_vocabulary() {
    let v = SmallVocab::byte_level(&["ab"], &[]);
    let short_scores = TokenizerSpec { scores: Some(vec![0.0; 3]), ..v.spec() };
    assert!(matches!(
        build(short_scores),
        Err(TokenizerError::LengthMismatch { key: "tokenizer.ggml.scores", found: 3, .. })
    ));
    let long_types: Vec<i32> = vec![1; v.tokens.len() + 1];
    let spec = TokenizerSpec { token_types: Some(&long_types), ..v.spec() };
    assert!(matches!(
        build(spec),
        Err(TokenizerError::LengthMismatch { key: "tokenizer.ggml.token_type", .. })
    ));
}

#[test]
fn empty_vocabulary() {
    let spec = TokenizerSpec { model: "gpt2", merges: Some(&[]), ..TokenizerSpec::default() };
    assert_eq!(build(spec).err(), Some(TokenizerError::EmptyVocabulary));
}

#[test]
fn special_ids_outside_the_vocabulary() {
    let v = SmallVocab::byte_level(&[], &[]);
    for role in [SpecialRole::Bos, SpecialRole::Eos, SpecialRole::FimPad] {
        let spec = TokenizerSpec { special_ids: vec![(role, 256)], ..v.spec() };
        assert_eq!(
            build(spec).err(),
            Some(TokenizerError::SpecialTokenOutOfRange {
                key: role.metadata_key(),
                id: 256,
                vocab_size: 256
            })
        );
    }
    let spec = TokenizerSpec { special_ids: vec![(SpecialRole::Eos, u64::MAX)], ..v.spec() };
    assert!(matches!(build(spec), Err(TokenizerError::SpecialTokenOutOfRange { .. })));
}

#[test]
fn adding_a_missing_bos_is_an_error() {
    // A SentencePiece vocabulary of one token: the default BOS (id 1) does not exist.
    let tokens = vec!["a".to_string()];
    let spec = TokenizerSpec { model: "llama", tokens: &tokens, ..TokenizerSpec::default() };
    assert_eq!(build(spec).err(), Some(TokenizerError::MissingSpecialToken("BOS")));
    let spec =
        TokenizerSpec { model: "llama", tokens: &tokens, add_bos: Some(false), ..TokenizerSpec::default() };
    assert!(build(spec).is_ok());
}

#[test]
fn malformed_byte_tokens() {
    for bad in ["<0x-1>", "<0xZZ>", "<0x1>", "<0x123>", "<0x0A", "0x0A>", "<0X0A>", "<0x+A>"] {
        let tokens = vec!["<unk>".to_string(), "<s>".to_string(), bad.to_string()];
        let types = [2, 3, 6];
        let spec = TokenizerSpec {
            model: "llama",
            tokens: &tokens,
            token_types: Some(&types),
            ..TokenizerSpec::default()
        };
        assert_eq!(
            build(spec).err(),
            Some(TokenizerError::MalformedByteToken { id: 2, text: bad.to_string() }),
            "{bad}"
        );
    }
}

#[test]
fn malformed_merges() {
    let v = SmallVocab::byte_level(&["ab"], &[]);
    for (merge, expected) in [
        ("ab", TokenizerError::MalformedMerge { index: 0, merge: "ab".into() }),
        (" a", TokenizerError::MalformedMerge { index: 0, merge: " a".into() }),
        ("a zz", TokenizerError::MergeOfUnknownToken { index: 0, token: "zz".into() }),
        ("qq b", TokenizerError::MergeOfUnknownToken { index: 0, token: "qq".into() }),
        ("a ", TokenizerError::MergeOfUnknownToken { index: 0, token: "".into() }),
    ] {
        let merges = vec![merge.to_string()];
        let spec = TokenizerSpec { merges: Some(&merges), ..v.spec() };
        assert_eq!(build(spec).err(), Some(expected), "{merge:?}");
    }
    let spec = TokenizerSpec { merges: None, ..v.spec() };
    assert_eq!(build(spec).err(), Some(TokenizerError::MissingKey("tokenizer.ggml.merges")));
}

#[test]
fn unsupported_model_and_pre_tokenizer() {
    let v = SmallVocab::byte_level(&[], &[]);
    let spec = TokenizerSpec { model: "t5", ..v.spec() };
    assert_eq!(build(spec).err(), Some(TokenizerError::UnsupportedModel("t5".into())));
    // Any vocabulary read as WordPiece encodes without panicking (its default special ids
    // 100-103 exist in this one of 256+ byte tokens).
    let spec = TokenizerSpec { model: "bert", ..v.spec() };
    let wordpiece = build(spec).unwrap();
    let ids = wordpiece.encode("Ünïcode, 你好 \u{0} \u{FFFD}x", crate::tokenizer::EncodeOptions::default());
    assert_eq!((ids.first(), ids.last()), (Some(&101), Some(&102)));
    // "gpt2" is the model name; llama.cpp's GPT-2 pre-tokenizer is called "gpt-2".
    for pre in ["gpt2", "qwen3", "", "some-new-model"] {
        let spec = TokenizerSpec { pre: Some(pre), ..v.spec() };
        assert_eq!(build(spec).err(), Some(TokenizerError::UnsupportedPreTokenizer(pre.into())));
    }
    // An absent pre-tokenizer means llama.cpp's default.
    let spec = TokenizerSpec { pre: None, ..v.spec() };
    assert!(build(spec).is_ok());
}

#[test]
fn chatglm_names_have_no_default_bos() {
    let v = SmallVocab::byte_level(&[], &[]);
    // Byte-level BPE defaults BOS and EOS to token 11; llama.cpp drops the BOS default for GLM.
    let bos = |pre| build(TokenizerSpec { pre: Some(pre), ..v.spec() }).unwrap().bos();
    assert_eq!(bos("gpt-4o"), Some(11));
    for pre in ["chatglm-bpe", "glm4", "glm5"] {
        assert_eq!(bos(pre), None, "{pre}");
        let spec = TokenizerSpec { pre: Some(pre), ..v.spec() };
        assert_eq!(build(spec).unwrap().eos(), Some(11), "{pre}");
    }
}

#[test]
fn nan_scores_and_odd_types_do_not_panic() {
    let tokens: Vec<String> = ["<unk>", "<s>", "</s>", "▁", "a", "b", "ab", "▁a"].map(String::from).to_vec();
    let types = [2, 3, 3, 1, 1, 1, 99, -5];
    let spec = TokenizerSpec {
        model: "llama",
        tokens: &tokens,
        scores: Some(vec![f32::NAN; tokens.len()]),
        token_types: Some(&types),
        ..TokenizerSpec::default()
    };
    let tokenizer = build(spec).expect("builds");
    let ids = tokenizer.encode("ab ab zz", Default::default());
    assert_eq!(ids[0], 1);
    // Odd types have no text; that is all.
    let _ = tokenizer.decode(&ids);
    let _ = tokenizer.decode(&[u32::MAX, 7, 6]);
}

fn metadata(entries: Vec<(&str, Value)>) -> Metadata {
    let mut md = Metadata::default();
    for (key, value) in entries {
        md.insert(key.to_string(), value).expect("unique keys");
    }
    md
}

fn strings(items: &[&str]) -> Value {
    Value::Array(Array::String(items.iter().map(|s| s.to_string()).collect()))
}

#[test]
fn metadata_keys_are_checked() {
    let base = || {
        vec![
            ("tokenizer.ggml.model", Value::String("gpt2".into())),
            ("tokenizer.ggml.pre", Value::String("qwen2".into())),
            ("tokenizer.ggml.tokens", strings(&["a", "b", "ab"])),
            ("tokenizer.ggml.merges", strings(&["a b"])),
        ]
    };
    let ok = Tokenizer::from_metadata(&metadata(base())).expect("valid");
    assert_eq!(ok.encode("abba", Default::default()), [2, 1, 0]);

    let without = |key: &str| metadata(base().into_iter().filter(|(k, _)| *k != key).collect());
    assert_eq!(
        Tokenizer::from_metadata(&without("tokenizer.ggml.model")).err(),
        Some(TokenizerError::MissingKey("tokenizer.ggml.model"))
    );
    assert_eq!(
        Tokenizer::from_metadata(&without("tokenizer.ggml.tokens")).err(),
        Some(TokenizerError::MissingKey("tokenizer.ggml.tokens"))
    );

    let with = |key: &'static str, value: Value| {
        let mut entries: Vec<(&str, Value)> = base().into_iter().filter(|(k, _)| *k != key).collect();
        entries.push((key, value));
        Tokenizer::from_metadata(&metadata(entries)).err()
    };
    let wrong = |key| Some(TokenizerError::WrongType { key, expected: "" });
    let kind_of = |e: Option<TokenizerError>| match e {
        Some(TokenizerError::WrongType { key, .. }) => Some(TokenizerError::WrongType { key, expected: "" }),
        other => other,
    };
    let key = "tokenizer.ggml.tokens";
    assert_eq!(kind_of(with(key, Value::Array(Array::U8(vec![1])))), wrong(key));
    let key = "tokenizer.ggml.model";
    assert_eq!(kind_of(with(key, Value::U32(1))), wrong(key));
    let key = "tokenizer.ggml.scores";
    assert_eq!(kind_of(with(key, strings(&["x", "y", "z"]))), wrong(key));
    let key = "tokenizer.ggml.token_type";
    assert_eq!(kind_of(with(key, Value::Array(Array::F32(vec![1.0; 3])))), wrong(key));
    let key = "tokenizer.ggml.merges";
    assert_eq!(kind_of(with(key, Value::String("a b".into()))), wrong(key));
    let key = "tokenizer.ggml.add_bos_token";
    assert_eq!(kind_of(with(key, Value::U8(1))), wrong(key));
    let key = "tokenizer.ggml.bos_token_id";
    assert_eq!(kind_of(with(key, Value::I32(-1))), wrong(key));
    assert_eq!(kind_of(with(key, Value::String("0".into()))), wrong(key));
    assert_eq!(
        with(key, Value::U32(3)),
        Some(TokenizerError::SpecialTokenOutOfRange { key, id: 3, vocab_size: 3 })
    );
    // Integer scores are accepted, as by llama.cpp.
    assert_eq!(with("tokenizer.ggml.scores", Value::Array(Array::I32(vec![0, 1, 2]))), None);
}

#[test]
fn errors_explain_themselves() {
    let message = TokenizerError::MergeOfUnknownToken { index: 7, token: "zz".into() }.to_string();
    assert!(message.contains("merge 7") && message.contains("zz"), "{message}");
    let message = TokenizerError::UnsupportedPreTokenizer("x".into()).to_string();
    assert!(message.contains("tokenizer.ggml.pre"), "{message}");
}

/// A vocabulary list longer than `MAX_VOCABULARY` is refused as soon as its length is read,
/// before any per-token structure is built (4 M empty tokens once took 838 MB to build).
#[test]
fn a_vocabulary_over_the_limit_is_refused_before_it_is_built() {
    use super::super::MAX_VOCABULARY;
    let mut metadata = Metadata::default();
    metadata.insert("tokenizer.ggml.model".into(), Value::String("gpt2".into())).unwrap();
    let tokens: Vec<String> = (0..=MAX_VOCABULARY).map(|i| format!("t{i}")).collect();
    metadata.insert("tokenizer.ggml.tokens".into(), Value::Array(Array::String(tokens))).unwrap();
    metadata.insert("tokenizer.ggml.merges".into(), Value::Array(Array::String(Vec::new()))).unwrap();
    let error = Tokenizer::from_metadata(&metadata).err();
    assert_eq!(error, Some(TokenizerError::VocabularyTooLarge(MAX_VOCABULARY + 1)));
}
