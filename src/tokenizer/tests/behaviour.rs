//! Streaming decoding, special-token partitioning, round trips and pathological input.

use std::time::{Duration, Instant};

use super::super::{DecodeOptions, EncodeOptions, TokenKind, Tokenizer, TokenizerSpec};
use super::{SmallVocab, real_model, shared_model, tokenizer_from_file};

const PLAIN: EncodeOptions = EncodeOptions { add_special: false, parse_special: true };

/// A SentencePiece vocabulary with byte fallback: `<unk>`, `<s>`, `</s>`, 256 byte tokens,
/// then a few pieces with scores, a control token and a user-defined one.
fn small_sentencepiece() -> (Vec<String>, Vec<i32>, Vec<f32>) {
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
    let mut types = vec![2, 3, 3];
    for byte in 0..=255u8 {
        tokens.push(format!("<0x{byte:02X}>"));
        types.push(6);
    }
    for (piece, kind) in
        [("▁", 1), ("a", 1), ("b", 1), ("ab", 1), ("▁ab", 1), ("é", 1), ("<turn>", 3), ("<user>", 4)]
    {
        tokens.push(piece.to_string());
        types.push(kind);
    }
    let scores = (0..tokens.len()).map(|i| -(i as f32)).collect();
    (tokens, types, scores)
}

fn sentencepiece_tokenizer(add_space_prefix: bool) -> Tokenizer {
    let (tokens, types, scores) = small_sentencepiece();
    Tokenizer::from_spec(TokenizerSpec {
        model: "llama",
        tokens: &tokens,
        scores: Some(scores),
        token_types: Some(&types),
        add_space_prefix: Some(add_space_prefix),
        ..TokenizerSpec::default()
    })
    .expect("valid vocabulary")
}

#[test]
fn sentencepiece_merges_by_score_and_falls_back_to_bytes() {
    let t = sentencepiece_tokenizer(false);
    let id = |s: &str| t.token_id(s).unwrap();
    // "ab" (the better score) merges first, then "▁" + "ab"; "日" has no token: 3 bytes.
    let ids = t.encode(" ab日", EncodeOptions::default());
    assert_eq!(ids, [1, id("▁ab"), id("<0xE6>"), id("<0x97>"), id("<0xA5>")]);
    assert_eq!(t.decode(&ids), " ab日");
    // With the space prefix, the input and every text after a special token get a space.
    let t = sentencepiece_tokenizer(true);
    let ids = t.encode("ab<turn>a", PLAIN);
    assert_eq!(ids, [id("▁ab"), id("<turn>"), id("▁"), id("a")]);
    // Decoding removes the first leading space again; control tokens are left out.
    assert_eq!(t.decode(&ids), "ab a");
    let rendered = DecodeOptions { render_special: true, ..DecodeOptions::default() };
    assert_eq!(t.decode_with(&ids, rendered), "ab<turn> a");
}

#[test]
fn streaming_holds_back_split_characters() {
    let t = sentencepiece_tokenizer(false);
    let id = |s: &str| t.token_id(s).unwrap();
    let mut stream = t.detokenizer(false);
    assert_eq!(stream.push(id("a")), "a");
    // "é" as two byte tokens: nothing until the second arrives.
    assert_eq!(stream.push(id("<0xC3>")), "");
    assert!(stream.has_pending());
    assert_eq!(stream.push(id("<0xA9>")), "é");
    // "🚀" = F0 9F 9A 80 over four tokens.
    let rocket = ["<0xF0>", "<0x9F>", "<0x9A>", "<0x80>"].map(id);
    assert_eq!(stream.push(rocket[0]), "");
    assert_eq!(stream.push(rocket[1]), "");
    assert_eq!(stream.push(rocket[2]), "");
    assert_eq!(stream.push(rocket[3]), "🚀");
    // A byte that can never start a character is shown as such, at once.
    assert_eq!(stream.push(id("<0x80>")), "\u{FFFD}");
    // Control tokens are left out unless rendered.
    assert_eq!(stream.push(id("<turn>")), "");
    let mut rendering = t.detokenizer(true);
    assert_eq!(rendering.push(id("<turn>")), "<turn>");
    // An unfinished character at the end becomes "�".
    assert_eq!(stream.push(id("<0xE6>")), "");
    assert_eq!(stream.push(id("<0x97>")), "");
    assert_eq!(stream.finish(), "\u{FFFD}");
    assert!(!stream.has_pending());
    // An invalid continuation inside a pending character flushes it as "�".
    assert_eq!(stream.push(id("<0xE6>")), "");
    assert_eq!(stream.push(id("a")), "\u{FFFD}a");
}

#[test]
fn streaming_byte_level_pieces() {
    let t = tokenizer_from_file(&shared_model("qwen3-vocab.gguf"));
    for text in ["🚀 ünïcödé 日本語 Ελληνικά", "plain ascii, then 👨‍👩‍👧‍👦 family", "\u{10FFFF}x\u{E000}"]
    {
        let ids = t.encode(text, PLAIN);
        let mut stream = t.detokenizer(false);
        let mut out = String::new();
        for &id in &ids {
            let piece = stream.push(id);
            assert!(!piece.contains('\u{FFFD}'), "broken character streamed for {text:?}");
            out.push_str(&piece);
        }
        out.push_str(&stream.finish());
        assert_eq!(out, text);
    }
}

#[test]
fn special_tokens_longest_first_and_without_parsing() {
    let v = SmallVocab::byte_level(&["hi"], &["<a>", "<a><b>", "b><", "<|x|>"]);
    let t = Tokenizer::from_spec(v.spec()).unwrap();
    let id = |s: &str| v.id(s);
    // The longer "<a><b>" wins where both fit; "b><" is found only outside it.
    let ids = t.encode("<a><b>hi<a>b><", PLAIN);
    assert_eq!(ids, [id("<a><b>"), id("hi"), id("<a>"), id("b><")]);
    // Equal lengths: the lower id ("<a>") is taken first, and "b><" overlaps it.
    let ids = t.encode("b><a>", PLAIN);
    assert_eq!(ids, [id("b"), id(">"), id("<a>")]);
    // Without special parsing, control tokens are plain text.
    let without = EncodeOptions { add_special: false, parse_special: false };
    let ids = t.encode("<|x|>", without);
    assert!(!ids.contains(&id("<|x|>")));
    assert_eq!(t.decode(&ids), "<|x|>");
    assert_eq!(t.token_kind(id("<|x|>")), Some(TokenKind::Control));
}

#[test]
fn user_defined_tokens_match_even_without_special_parsing() {
    let t = sentencepiece_tokenizer(false);
    let without = EncodeOptions { add_special: false, parse_special: false };
    let user = t.token_id("<user>").unwrap();
    let turn = t.token_id("<turn>").unwrap();
    let ids = t.encode("a<user>b<turn>", without);
    assert!(ids.contains(&user));
    assert!(!ids.contains(&turn));
    assert_eq!(t.token_kind(user), Some(TokenKind::UserDefined));
    // User-defined tokens are always rendered.
    assert_eq!(t.decode(&ids), "a<user>b<turn>");
}

#[test]
fn qwen3_chat_markup_round_trips() {
    let t = tokenizer_from_file(&shared_model("qwen3-vocab.gguf"));
    let im_start = t.token_id("<|im_start|>").unwrap();
    let im_end = t.token_id("<|im_end|>").unwrap();
    let text = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n4";
    let ids = t.encode(text, EncodeOptions::default());
    assert_eq!(ids[0], im_start);
    assert_eq!(ids.iter().filter(|&&id| id == im_end).count(), 1);
    assert!(t.is_end_of_generation(im_end));
    assert!(!t.is_end_of_generation(im_start));
    let all = DecodeOptions { render_special: true, ..DecodeOptions::default() };
    assert_eq!(t.decode_with(&ids, all), text);
    // Without rendering, control tokens vanish but user-defined ones (<think>) stay.
    assert_eq!(t.decode(&ids), "user\nWhat is 2+2?\nassistant\n<think>\n\n</think>\n\n4");
    assert_eq!(t.token_text(im_end), "<|im_end|>");
}

#[test]
fn ordinary_text_round_trips() {
    let t = tokenizer_from_file(&shared_model("qwen3-vocab.gguf"));
    let micro = tokenizer_from_file(&shared_model("qwen3-micro-q8_0.gguf"));
    let texts = [
        "",
        "The capital of France is Paris.",
        "  leading and trailing  ",
        "def f(x):\n\treturn x ** 2  # square\r\n",
        "ünïcödé 日本語 한국어 العربية 🚀👍🏽 e\u{301}",
        "numbers 1234567890 and 3.14159, ٣٤٥",
        "I'm sure they'll say it's fine; WE'VE done it.",
    ];
    for tokenizer in [&t, &micro] {
        for text in texts {
            let ids = tokenizer.encode(text, PLAIN);
            assert_eq!(tokenizer.decode(&ids), text);
        }
    }
}

/// Runs `f`, printing and bounding its time. The bound is generous (debug builds, shared
/// machines): it catches runaway behaviour, not slowness.
fn timed<T>(what: &str, limit: Duration, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let result = f();
    let elapsed = started.elapsed();
    eprintln!("{what}: {elapsed:?}");
    assert!(elapsed < limit, "{what} took {elapsed:?}");
    result
}

#[test]
fn pathological_input_is_handled_in_reasonable_time() {
    let limit = Duration::from_secs(30);
    let t = timed("qwen3 vocab build", limit, || tokenizer_from_file(&shared_model("qwen3-vocab.gguf")));
    let megabyte = 1 << 20;
    for (what, text) in [
        ("1 MiB of 'a'", "a".repeat(megabyte)),
        ("1 MiB of spaces", " ".repeat(megabyte)),
        ("1 MiB of newlines", "\n".repeat(megabyte)),
        ("1 MiB of '日'", "日".repeat(megabyte / 3)),
        ("1 MiB of digits", "7".repeat(megabyte)),
        ("1 MiB of '!?'", "!?".repeat(megabyte / 2)),
        ("a 100k-character word", "abcdefghij".repeat(10_000)),
        ("1 MiB of <|im_start|>", "<|im_start|>".repeat(megabyte / 12)),
        ("1 MiB of '<|im_'", "<|im_".repeat(megabyte / 5)),
    ] {
        let ids = timed(what, limit, || t.encode(&text, EncodeOptions::default()));
        assert_eq!(t.decode_with(&ids, DecodeOptions { render_special: true, ..Default::default() }), text);
    }
    let spm = sentencepiece_tokenizer(true);
    let text = "ab ".repeat(megabyte / 3);
    let ids = timed("SentencePiece, 1 MiB", limit, || spm.encode(&text, PLAIN));
    assert_eq!(spm.decode(&ids), text);
}

/// Gemma 3 has 6,414 special tokens, among them runs of newlines, tabs and spaces (user-defined)
/// and `<unusedN>` (control): the worst case for cutting special tokens out of text.
#[test]
fn real_model_gemma3_pathological_input() {
    let limit = Duration::from_secs(30);
    let t = timed("gemma3 build", limit, || tokenizer_from_file(&real_model("gemma3-270m-q4_k_m.gguf")));
    let megabyte = 1 << 20;
    let all = DecodeOptions { render_special: true, ..DecodeOptions::default() };
    for (what, text) in [
        ("1 MiB of newlines", "\n".repeat(megabyte)),
        ("1 MiB of tabs and spaces", "\t \t  ".repeat(megabyte / 5)),
        ("1 MiB of '<unused'", "<unused".repeat(megabyte / 7)),
        ("1 MiB of '<unused1>'", "<unused1>".repeat(megabyte / 9)),
        ("1 MiB of 'a'", "a".repeat(megabyte)),
        ("1 MiB of '日'", "日".repeat(megabyte / 3)),
        ("1 MiB of prose", "The old lighthouse keeper climbed the stairs. ".repeat(megabyte / 47)),
    ] {
        let ids = timed(what, limit, || t.encode(&text, PLAIN));
        assert_eq!(t.decode_with(&ids, all), text, "{what}");
    }
}
