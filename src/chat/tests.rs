//! Expected strings were rendered by Python's jinja2 with Hugging Face's settings
//! (`trim_blocks`, `lstrip_blocks`) from the same templates, and for Gemma by llama.cpp's
//! built-in format.

use super::*;
use crate::gguf::Gguf;

fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::new("system", "You are terse."),
        ChatMessage::new("user", "Hi"),
        ChatMessage::new("assistant", "<think>\nhmm\n</think>\n\nHello!"),
        ChatMessage::new("user", "Capital of France?"),
    ]
}

const GENERATE: RenderOptions =
    RenderOptions { add_generation_prompt: true, enable_thinking: None, reasoning_effort: None };

fn fixture(path: &str) -> Vec<u8> {
    let path = crate::test_files::fixture(path);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn qwen3() -> ChatTemplate {
    let bytes = fixture("models/qwen3-vocab.gguf");
    let gguf = Gguf::parse(&bytes).unwrap();
    let tokenizer = Tokenizer::from_metadata(gguf.metadata()).unwrap();
    let template = ChatTemplate::for_model(gguf.metadata(), &tokenizer).unwrap();
    assert_eq!(template.source(), &TemplateSource::File);
    template
}

#[test]
fn qwen3_template_drops_old_reasoning_and_honours_enable_thinking() {
    let template = qwen3();
    let history = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n\
                   <|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nCapital of France?<|im_end|>\n";
    assert_eq!(
        template.render(&conversation(), GENERATE).unwrap(),
        format!("{history}<|im_start|>assistant\n")
    );
    let no_thinking = RenderOptions { enable_thinking: Some(false), ..GENERATE };
    assert_eq!(
        template.render(&conversation(), no_thinking).unwrap(),
        format!("{history}<|im_start|>assistant\n<think>\n\n</think>\n\n")
    );
    assert_eq!(template.render(&conversation(), RenderOptions::default()).unwrap(), history);
}

#[test]
fn smollm2_template_adds_its_default_system_prompt() {
    let text = String::from_utf8(fixture("chat/smollm2.jinja")).unwrap();
    let template = ChatTemplate::new(&text, TemplateSource::File, String::new(), String::new()).unwrap();
    assert_eq!(
        template.render(&[ChatMessage::new("user", "Hi")], GENERATE).unwrap(),
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
         <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
    assert_eq!(
        template.render(&conversation(), GENERATE).unwrap(),
        "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n\
         <think>\nhmm\n</think>\n\nHello!<|im_end|>\n<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn gemma_builtin_folds_the_system_prompt_into_the_first_user_turn() {
    let template = ChatTemplate::builtin("gemma", "<bos>".into(), "<eos>".into()).unwrap();
    let mut messages = conversation();
    messages[2].content = " Hello! ".into();
    assert_eq!(
        template.render(&messages, GENERATE).unwrap(),
        "<start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n\
         <start_of_turn>user\nCapital of France?<end_of_turn>\n<start_of_turn>model\n"
    );
}

#[test]
fn chatml_builtin_is_the_fallback_for_other_architectures() {
    let template = ChatTemplate::builtin("chatml", String::new(), String::new()).unwrap();
    assert_eq!(
        template.render(&[ChatMessage::new("user", "Hi")], GENERATE).unwrap(),
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn broken_templates_and_roles_are_errors() {
    let syntax = ChatTemplate::new("{% for %}", TemplateSource::File, String::new(), String::new());
    assert!(matches!(syntax, Err(ChatError::Syntax(_))));
    let raising = ChatTemplate::new(
        "{{ raise_exception('roles must alternate') }}",
        TemplateSource::File,
        String::new(),
        String::new(),
    )
    .unwrap();
    match raising.render(&[], GENERATE) {
        Err(ChatError::Render(message)) => assert!(message.contains("roles must alternate"), "{message}"),
        other => panic!("{other:?}"),
    }
    let template = ChatTemplate::builtin("chatml", String::new(), String::new()).unwrap();
    assert!(matches!(
        template.render(&[ChatMessage::new("function", "x")], GENERATE),
        Err(ChatError::BadRole(_))
    ));
}

#[test]
fn runaway_templates_are_stopped() {
    // A template must not be able to hang the page: recursion and work are bounded.
    let template = ChatTemplate::new(
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        TemplateSource::File,
        String::new(),
        String::new(),
    )
    .unwrap();
    assert!(matches!(template.render(&[], GENERATE), Err(ChatError::Render(_))));
    let endless = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}";
    let template = ChatTemplate::new(endless, TemplateSource::File, String::new(), String::new()).unwrap();
    assert!(matches!(template.render(&[], GENERATE), Err(ChatError::Render(_))));
}

/// Chains that minijinja's parser builds by iteration but compiles by recursion (binary
/// operators, `not`, filters, attributes, subscripts, calls): past a few thousand links they
/// overflow the stack while the template is compiled, so a tag may hold only
/// `MAX_TAG_OPERATORS` of them. Nesting (parentheses, lists, blocks) is minijinja's own limit.
fn deep_chains(links: usize) -> Vec<String> {
    vec![
        format!("{{{{ 'a'{} }}}}", " ~ 'a'".repeat(links)),
        format!("{{{{ {}1 }}}}", "not ".repeat(links)),
        format!("{{{{ 'a'{} }}}}", "|trim".repeat(links)),
        format!("{{{{ x{} }}}}", ".a".repeat(links)),
        format!("{{{{ x{} }}}}", "[0]".repeat(links)),
        format!("{{% set y = 1{} %}}", " + 1".repeat(links)),
    ]
}

#[test]
fn long_operator_chains_are_refused_before_they_reach_the_compiler() {
    for text in deep_chains(5000) {
        // Run on a 1 MiB stack, like the browser's: before the limit, these overflowed it.
        let outcome = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || ChatTemplate::new(&text, TemplateSource::File, String::new(), String::new()).err())
            .unwrap()
            .join()
            .unwrap();
        let error = outcome.expect("refused").to_string();
        assert!(error.contains("operators"), "{error}");
    }
    for text in deep_chains(MAX_TAG_OPERATORS / 2) {
        let template = ChatTemplate::new(&text, TemplateSource::File, String::new(), String::new());
        assert!(template.is_ok(), "{text:.60}: {:?}", template.err());
    }
    // Operators inside string literals and comments are text, not operators.
    let text = format!("{{# {} #}}{{{{ '{}' }}}}", "~".repeat(5000), "+".repeat(5000));
    assert!(ChatTemplate::new(&text, TemplateSource::File, String::new(), String::new()).is_ok());
    let huge = "x".repeat(MAX_TEMPLATE_BYTES + 1);
    let error = ChatTemplate::new(&huge, TemplateSource::File, String::new(), String::new()).err().unwrap();
    assert!(error.to_string().contains("larger than"), "{error}");
}
