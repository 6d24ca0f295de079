//! What each fuzz target checks, one function per target, so `tests/hostile_input.rs` can
//! replay the committed seeds and every crash input ever found (`fuzz/regressions/`) through
//! exactly the checks the fuzzer runs. Each function panics when an invariant breaks.

use inferno::chat::{
    CallSyntax, ChatMessage, ChatTemplate, REASONING_TAGS, ReasoningEffort, RenderOptions, ReplyFormat,
    TemplateSource, Tool, ToolChoice, ToolUse,
};
use inferno::engine::Engine;
use inferno::gguf::{self, Gguf, GgufHeader, HeaderParse};
use inferno::grammar::{GrammarCompiler, GrammarSpec};
use inferno::inspect::Report;
use inferno::model::ModelBytes;
use inferno::sampler::{Sampler, SamplerSettings};
use inferno::tokenizer::{EncodeOptions, Tokenizer};
use inferno::vision::{MAX_PIXELS, RgbImage, VisionEncoder};

use super::ALLOCATOR;
use super::counting::allocation_bound;

/// A target's checks: panics when an invariant breaks.
pub type Check = fn(&[u8]);

/// The targets by name, as `cargo fuzz` and the folders under `fuzz/` name them.
pub const TARGETS: [(&str, Check); 7] = [
    ("parse_gguf", parse_gguf),
    ("render_template", render_template),
    ("tokenize", tokenize),
    ("generate", generate),
    ("grammar", grammar),
    ("reply", reply),
    ("vision", vision),
];

/// Untrusted bytes through the whole inspect path: `Gguf::parse`, the prefix parser the page and
/// the CLI use, and the report built from a successful parse. Besides "never panics", it checks
/// that the two parsers agree: they read the same bytes in the same order, so a prefix may only
/// stop earlier (`NeedMore`), never decide differently.
/// Every input also stays within the allocation bound (`counting::allocation_bound`).
pub fn parse_gguf(data: &[u8]) {
    within_allocation_bound(data.len(), || {
        check_parse(data);
        0
    });
}

fn check_parse(data: &[u8]) {
    let file_size = data.len() as u64;
    let full = Gguf::parse(data);

    // The first byte picks how much of the file the prefix parser sees (0 ..= all of it).
    let k = data.first().map_or(0, |&b| data.len() * usize::from(b) / 255);
    match (gguf::parse_header(&data[..k], file_size), &full) {
        (Ok(HeaderParse::Complete(header)), Ok(whole)) => {
            assert_eq!(fingerprint(&header), fingerprint(&whole.header));
        }
        (Ok(HeaderParse::Complete(_)), Err(e)) => panic!("prefix of {k} bytes parsed, whole file: {e}"),
        (Ok(HeaderParse::NeedMore { at_least }), _) => {
            assert!(
                at_least > k as u64 && at_least <= file_size,
                "NeedMore {at_least} for {k} of {file_size}"
            );
        }
        (Err(e), Err(whole)) => assert_eq!(&e, whole),
        (Err(e), Ok(_)) => panic!("prefix of {k} bytes failed ({e}) but the whole file parsed"),
    }

    if let Ok(gguf) = full {
        let header = &gguf.header;
        assert!(header.alignment.is_power_of_two() && header.data_offset % header.alignment == 0);
        for t in &header.tensors {
            let end = header.data_offset + t.offset + t.n_bytes;
            assert!(end <= file_size, "tensor {:?} ends at {end} of {file_size}", t.name);
            assert_eq!(gguf.tensor_data(t).len() as u64, t.n_bytes);
        }
        let report = Report::new(header);
        let json = serde_json::to_string(&report).expect("report serializes");
        assert!(!json.is_empty());
    }
}

/// Everything in a header, compared by its debug text: a NaN metadata value is not `==` itself.
fn fingerprint(h: &GgufHeader) -> String {
    let metadata: Vec<_> = h.metadata.iter().collect();
    format!("{} {} {} {} {metadata:?} {:?}", h.version, h.alignment, h.data_offset, h.file_size, h.tensors)
}

/// Untrusted chat templates and messages through the whole chat path: `ChatTemplate::new`
/// (the shape checks, then minijinja's parser and compiler) and `render` with fuzzed messages
/// and options. The input is split at the first two NUL bytes: template, then message text; the
/// first byte of the message part picks the roles and options. Besides "never panics, never
/// overflows the stack", it checks that a rendering stays within the fuel and that refusing a
/// template is a typed error.
pub fn render_template(data: &[u8]) {
    let mut parts = data.splitn(3, |&b| b == 0);
    let template = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let message = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let switches = parts.next().and_then(|rest| rest.first().copied()).unwrap_or(0);
    let Ok(chat) = ChatTemplate::new(&template, TemplateSource::File, "<s>".into(), "</s>".into()) else {
        return;
    };
    let roles = ["system", "user", "assistant", "user"];
    let count = usize::from(switches & 3) + 1;
    let messages: Vec<ChatMessage> = (0..count)
        .map(|i| ChatMessage::new(roles[(i + usize::from(switches >> 2 & 1)) % roles.len()], &message))
        .collect();
    let enable_thinking = match switches >> 3 & 3 {
        0 => None,
        1 => Some(false),
        _ => Some(true),
    };
    let reasoning_effort =
        [None, Some(ReasoningEffort::Low), Some(ReasoningEffort::High)][usize::from(switches >> 6) % 3];
    let options =
        RenderOptions { add_generation_prompt: switches & 0x20 != 0, enable_thinking, reasoning_effort };
    if let Ok(text) = chat.render(&messages, options) {
        // 5 M instructions of fuel bound the output too: nothing renders without limit.
        assert!(text.len() < 1 << 30, "rendered {} bytes", text.len());
    }
}

/// Untrusted tokenizer metadata and text: a GGUF file's `tokenizer.ggml.*` keys through
/// `Tokenizer::from_metadata`, then fuzzed text through `encode` (special tokens parsed or not)
/// and the ids back through `decode` and the streaming detokenizer. The input is a u32 (little
/// endian) length L, L bytes of GGUF file, and the text (lossy UTF-8). Besides "never panics",
/// every id must be in the vocabulary and the streamed text must be the tokens' bytes read as
/// UTF-8 (the one-shot `decode` differs on purpose: it drops SentencePiece's leading space and
/// cleans up spaces, as llama.cpp's detokenizer does).
/// Every input also stays within the allocation bound (`counting::allocation_bound`).
pub fn tokenize(data: &[u8]) {
    within_allocation_bound(data.len(), || {
        check_tokenize(data);
        0
    });
}

fn check_tokenize(data: &[u8]) {
    let Some((length, rest)) = data.split_first_chunk::<4>() else { return };
    let length = (u32::from_le_bytes(*length) as usize).min(rest.len());
    let (file, text) = rest.split_at(length);
    let Ok(gguf) = Gguf::parse(file) else { return };
    let Ok(tokenizer) = Tokenizer::from_metadata(gguf.metadata()) else { return };
    let text = String::from_utf8_lossy(text);
    for parse_special in [false, true] {
        let ids = tokenizer.encode(&text, EncodeOptions { add_special: parse_special, parse_special });
        assert!(ids.iter().all(|&id| (id as usize) < tokenizer.vocab_size()), "id outside the vocabulary");
        let _ = tokenizer.decode(&ids);
        let mut stream = tokenizer.detokenizer(false);
        let mut streamed: String = ids.iter().map(|&id| stream.push(id)).collect();
        streamed.push_str(&stream.finish());
        let bytes: Vec<u8> =
            ids.iter().flat_map(|&id| tokenizer.token_bytes(id, false).iter().copied()).collect();
        assert_eq!(streamed, String::from_utf8_lossy(&bytes), "streamed text is not the tokens' bytes");
    }
}

/// A whole mutated model through the engine: `Engine::load` (header, config, weights, the
/// vocabulary-versus-embedding check, tokenizer, chat template), the chat prompt rendered and
/// tokenized for a 64-token context, a session prefilled with it, and two sampled tokens (the
/// second runs the first through the model). Besides "never panics": every sampled id is in
/// the vocabulary, and no input makes the engine allocate more than the bound the README
/// states (`counting::allocation_bound`), in total or in one allocation.
pub fn generate(data: &[u8]) {
    within_allocation_bound(data.len(), || run_chat(data));
}

/// The context `generate` asks for: a few turns of a short chat.
const CONTEXT: usize = 64;

/// Loads and generates; returns the session's state bytes (0 when it never got that far).
fn run_chat(data: &[u8]) -> usize {
    let Ok(engine) = Engine::load(data.to_vec()) else { return 0 };
    let messages = [ChatMessage::new("user", "Hi there")];
    let Ok(prompt) = engine.chat_prompt(&messages, None, CONTEXT) else { return 0 };
    let Ok(mut session) = engine.new_session(CONTEXT) else { return 0 };
    let state_bytes = session.state_bytes(&engine);
    if session.sync(&engine, &prompt).is_err() {
        return state_bytes;
    }
    let settings = SamplerSettings { seed: 7, ..SamplerSettings::default() };
    let mut sampler = Sampler::new(settings).expect("the default settings are valid");
    let vocab = engine.model().config().vocab_size;
    for _ in 0..2 {
        let Ok(step) = session.step(&engine, &mut sampler, None, 8) else { break };
        assert!((step.token as usize) < vocab, "sampled {} from a vocabulary of {vocab}", step.token);
        let _ = engine.piece(step.token);
    }
    state_bytes
}

/// Runs `check` (which returns the session state it allocated, 0 if none) and asserts the
/// allocation bound for an input of `input_len` bytes: the most bytes live at once, and the
/// largest single allocation.
fn within_allocation_bound(input_len: usize, check: impl FnOnce() -> usize) {
    let baseline = ALLOCATOR.start();
    let state_bytes = check();
    let report = ALLOCATOR.report(baseline);
    let bound = allocation_bound(input_len, state_bytes);
    assert!(
        report.peak <= bound,
        "{} bytes live at once for a {input_len}-byte input (bound {bound})",
        report.peak
    );
    assert!(report.largest <= bound, "one allocation of {} bytes (bound {bound})", report.largest);
}

/// Untrusted `response_format` input: the first byte picks a JSON schema (even) or a Lark
/// grammar (odd), the rest is its text, compiled against the Qwen3 micro model's vocabulary.
/// Besides "never panics": a grammar that compiles is walked for up to 32 tokens (each the
/// allowed token picked by the input's bytes), every mask lies within the vocabulary, and a
/// token the mask allows is always accepted.
pub fn grammar(data: &[u8]) {
    static COMPILER: std::sync::OnceLock<(Tokenizer, GrammarCompiler)> = std::sync::OnceLock::new();
    let (tokenizer, compiler) = COMPILER.get_or_init(|| {
        let file = include_bytes!("../../tests/fixtures/models/qwen3-micro-q4_0.gguf");
        let gguf = Gguf::parse(file).expect("the micro model parses");
        let tokenizer = Tokenizer::from_metadata(gguf.metadata()).expect("its tokenizer builds");
        let compiler = GrammarCompiler::new(&tokenizer).expect("its vocabulary makes a trie");
        (tokenizer, compiler)
    });
    let Some((&kind, text)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(text).into_owned();
    let spec = if kind % 2 == 0 {
        match serde_json::from_str(&text) {
            Ok(schema) => GrammarSpec::JsonSchema(schema),
            Err(_) => return,
        }
    } else {
        GrammarSpec::Lark(text)
    };
    let Ok(mut constraint) = compiler.compile(&spec) else { return };
    let vocab = tokenizer.vocab_size() as u32;
    for (step, &pick) in data.iter().cycle().take(32).enumerate() {
        let Ok(mask) = constraint.mask() else { return };
        assert!((vocab..vocab + 64).all(|id| !mask.allows(id)), "the mask allows ids past the vocabulary");
        let allowed: Vec<u32> = (0..vocab).filter(|&id| mask.allows(id)).collect();
        if allowed.is_empty() {
            return;
        }
        let token = allowed[(usize::from(pick) * 7919 + step) % allowed.len()];
        constraint.accept(token).expect("an allowed token is accepted");
        if tokenizer.is_end_of_generation(token) {
            return;
        }
    }
}

/// A model's answer read back as a message (reasoning, tool calls) in every family's syntax:
/// never a panic, and read as it streams (every prefix, at most 512 bytes of answer) each
/// field only grows into what the whole answer gives, so streamed deltas join into the final
/// message (calls only where the whole answer read every call it holds: a malformed one,
/// given back as content, may leave what was streamed of it behind). The first byte picks the syntax and whether the reasoning is split and opened.
pub fn reply(data: &[u8]) {
    const SYNTAXES: [CallSyntax; 5] = [
        CallSyntax::Hermes,
        CallSyntax::QwenXml,
        CallSyntax::LlamaJson,
        CallSyntax::Functools,
        CallSyntax::Generic,
    ];
    let Some((&pick, text)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(&text[..text.len().min(512)]).into_owned();
    let tools: Vec<Tool> = serde_json::from_value(serde_json::json!([
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
            "a": {"type": "integer"}, "s": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "g"}}
    ]))
    .expect("the tools parse");
    let calls = ToolUse::new(tools, ToolChoice::Auto, pick & 0x40 == 0).expect("the tools are valid");
    let format = ReplyFormat {
        reasoning: (pick & 0x10 != 0)
            .then_some(REASONING_TAGS[usize::from(pick >> 2) % REASONING_TAGS.len()].1),
        opens_in_reasoning: pick & 0x20 != 0,
        calls: (pick & 0x80 == 0)
            .then(|| (SYNTAXES[usize::from(pick & 0x0f) % SYNTAXES.len()], calls.expect("tools"))),
        harmony: false,
    };
    let whole = format.parse(&text, false);
    // Where the whole answer gave a call's text back as content (malformed: no grammar held
    // it), the calls streamed before may not line up with the whole's; its text still grows.
    let given_back = format.calls.as_ref().is_some_and(|(syntax, _)| {
        let content = whole.content.trim_start();
        match syntax.call_tags() {
            Some((open, _)) => content.contains(open),
            None => {
                content.contains("functools[")
                    || content.starts_with('{')
                    || content.starts_with("<|python_tag|>")
            }
        }
    });
    for end in (0..=text.len()).filter(|&end| text.is_char_boundary(end)) {
        let part = format.parse(&text[..end], true);
        let grows = |part: &str, whole: &str, what: &str| {
            assert!(
                whole.starts_with(part),
                "{what} after {end} bytes is {part:?}, not a prefix of {whole:?}"
            )
        };
        grows(&part.content, &whole.content, "content");
        grows(
            part.reasoning_content.as_deref().unwrap_or(""),
            whole.reasoning_content.as_deref().unwrap_or(""),
            "reasoning",
        );
        if given_back {
            continue;
        }
        assert!(
            part.tool_calls.len() <= whole.tool_calls.len(),
            "more calls after {end} bytes than in the whole"
        );
        for (call, last) in part.tool_calls.iter().zip(&whole.tool_calls) {
            assert_eq!(call.name, last.name, "a call's name after {end} bytes");
            grows(&call.arguments, &last.arguments, "arguments");
        }
    }
}

/// Untrusted vision projectors and pictures; the first byte picks which. Even: the rest is a
/// projector file (mmproj), loaded and, where it loads, made to encode a small picture. Odd: the
/// rest is a picture file (PNG, JPEG, WebP, GIF), decoded, and where it decodes encoded by the
/// micro Gemma 3 projector. Besides "never panics": an encoding has its shape's tokens × width
/// values, and nothing allocates beyond the bound for the input plus what the picture and the
/// encoder's shape warrant (its pixels, `EncoderShape::work_bytes`).
pub fn vision(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    within_allocation_bound(rest.len(), || {
        if mode % 2 == 0 { check_projector(rest) } else { check_picture(rest) }
    });
}

/// Loads `file` as a projector and encodes a 13 × 9 picture with it; the work it was allowed.
fn check_projector(file: &[u8]) -> usize {
    let Ok(encoder) = VisionEncoder::load(ModelBytes::from(file.to_vec())) else { return 0 };
    let pixels: Vec<u8> = (0..13 * 9 * 3).map(|i| (i * 37 % 256) as u8).collect();
    let picture = RgbImage::new(13, 9, pixels).expect("a valid picture");
    check_encoding(&encoder, &picture);
    encoder.shape().work_bytes()
}

/// Decodes `file` as a picture and encodes it with the micro projector; the work it was allowed.
fn check_picture(file: &[u8]) -> usize {
    static MICRO: std::sync::OnceLock<VisionEncoder> = std::sync::OnceLock::new();
    let encoder = MICRO.get_or_init(|| {
        let file = include_bytes!("../../tests/fixtures/models/clip-gemma3-micro.gguf");
        VisionEncoder::load(ModelBytes::from(file.to_vec())).expect("the micro projector loads")
    });
    // A decoder sizes its buffers by the size the header claims (within the caps, checked
    // first), whether or not the data then decodes: up to 16-bit RGBA, beside the RGB copy.
    let claimed =
        inferno::vision::dimensions(file).map_or(0, |(w, h)| w.saturating_mul(h).saturating_mul(11));
    let header = inferno::vision::picture_header(file);
    let Ok(picture) = inferno::vision::decode(file) else { return claimed.min(MAX_PIXELS * 11) };
    // What the browser's worker checks before decoding is the size the decoder gives.
    if let Some(header) = header {
        assert_eq!((header.width, header.height), (picture.width(), picture.height()), "{}", header.format);
    }
    check_encoding(encoder, &picture);
    picture.width() * picture.height() * 11 + encoder.shape().work_bytes()
}

fn check_encoding(encoder: &VisionEncoder, picture: &RgbImage) {
    let shape = encoder.shape();
    if let Ok(embeddings) = encoder.encode(picture) {
        // Each square of the picture (one, or tiles and the whole picture) its rows, at most
        // the shape's per square.
        assert!((1..=shape.max_squares * shape.tokens).contains(&embeddings.tokens));
        assert_eq!(embeddings.width, shape.output_width);
        assert_eq!(embeddings.values.len(), embeddings.tokens * shape.output_width);
    }
}
