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

fn gpt_oss() -> ChatTemplate {
    let path = crate::test_files::made("templates/openai-gpt-oss-120b.jinja");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/fetch-models.sh)", path.display()));
    ChatTemplate::new(&text, TemplateSource::File, String::new(), String::new()).unwrap()
}

/// gpt-oss's system message as its template writes it, for a render made today.
fn gpt_oss_system(effort: &str) -> String {
    format!(
        "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n\
         Knowledge cutoff: 2024-06\nCurrent date: {}\n\nReasoning: {effort}\n\n\
         # Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>",
        strftime("%Y-%m-%d", &DateTime::now())
    )
}

#[test]
fn gpt_oss_template_writes_the_reasoning_effort_asked_for() {
    let template = gpt_oss();
    assert_eq!(template.call_syntax(), CallSyntax::Harmony);
    assert!(template.reads_reasoning_effort());
    assert!(!qwen3().reads_reasoning_effort());
    let user = [ChatMessage::new("user", "Hi")];
    let prompt = |effort: &str| {
        format!("{}<|start|>user<|message|>Hi<|end|><|start|>assistant", gpt_oss_system(effort))
    };
    // The template's own default is medium.
    assert_eq!(template.render(&user, GENERATE).unwrap(), prompt("medium"));
    for (effort, name) in
        [(ReasoningEffort::Low, "low"), (ReasoningEffort::Medium, "medium"), (ReasoningEffort::High, "high")]
    {
        let options = RenderOptions { reasoning_effort: Some(effort), ..GENERATE };
        assert_eq!(template.render(&user, options).unwrap(), prompt(name));
        assert_eq!(name.parse::<ReasoningEffort>(), Ok(effort));
        assert_eq!(serde_json::from_value::<ReasoningEffort>(name.into()).unwrap(), effort);
    }
    let error = "minimal".parse::<ReasoningEffort>().unwrap_err();
    assert_eq!(error, "reasoning_effort \"minimal\" is not 'low', 'medium' or 'high'");
    let error = serde_json::from_value::<ReasoningEffort>("none".into()).unwrap_err().to_string();
    assert!(error.contains("is not 'low', 'medium' or 'high'"), "{error}");
}

#[test]
fn gpt_oss_template_reads_a_calls_reasoning_as_its_analysis() {
    // llama.cpp passes reasoning_content as `thinking`, and drops the content of a message that
    // calls (the template refuses both): the call's analysis is its reasoning. A later final
    // answer's reasoning is dropped by the template, as every earlier turn's.
    let template = gpt_oss();
    let tools: Vec<Tool> = serde_json::from_value(serde_json::json!([{"type": "function", "function": {
        "name": "get_weather", "description": "The weather.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    }}]))
    .unwrap();
    let tools = ToolUse::new(tools, ToolChoice::Auto, true).unwrap().unwrap();
    let mut call = ChatMessage::new("assistant", "Let me check.");
    call.reasoning_content = Some("The weather tool knows.".into());
    call.tool_calls = Some(vec![ToolCall {
        id: Some("call_1".into()),
        kind: "function".into(),
        function: FunctionCall { name: "get_weather".into(), arguments: "{\"city\":\"Paris\"}".into() },
    }]);
    let mut result = ChatMessage::new("tool", "21 C");
    result.tool_call_id = Some("call_1".into());
    let mut messages = vec![ChatMessage::new("user", "Weather in Paris?"), call, result];
    let turn = "<|start|>assistant<|channel|>analysis<|message|>The weather tool knows.<|end|>\
                <|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>\
                {\"city\": \"Paris\"}<|call|>\
                <|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"21 C\"<|end|>";
    let rendered = template.render_with_tools(&messages, GENERATE, Some(&tools)).unwrap();
    assert!(
        rendered
            .ends_with(&format!("<|start|>user<|message|>Weather in Paris?<|end|>{turn}<|start|>assistant")),
        "{rendered}"
    );
    // Without reasoning, the content is the call's analysis.
    messages[1].reasoning_content = None;
    let rendered = template.render_with_tools(&messages, GENERATE, Some(&tools)).unwrap();
    assert!(rendered.contains("<|channel|>analysis<|message|>Let me check.<|end|>"), "{rendered}");
    // A final answer after the call drops the call's analysis.
    messages[1].reasoning_content = Some("The weather tool knows.".into());
    let mut answer = ChatMessage::new("assistant", "It is 21 C.");
    answer.reasoning_content = Some("Easy.".into());
    messages.extend([answer, ChatMessage::new("user", "Thanks")]);
    let rendered = template.render_with_tools(&messages, GENERATE, Some(&tools)).unwrap();
    assert!(!rendered.contains("<|channel|>analysis"), "{rendered}");
    assert!(rendered.contains("<|channel|>final<|message|>It is 21 C.<|end|>"), "{rendered}");
}

#[test]
fn strftime_writes_pythons_conversions() {
    // 2024-02-29 23:59:59 UTC, a Thursday in a leap year; a second before 1970.
    let leap = DateTime::from_unix(1_709_251_199);
    assert_eq!(
        strftime("%Y-%m-%d %H:%M:%S|%a %A %b %B %h|%y %e %I%p %F|%% %Q", &leap),
        "2024-02-29 23:59:59|Thu Thursday Feb February Feb|24 29 11PM 2024-02-29|% %Q"
    );
    let before = DateTime::from_unix(-1);
    assert_eq!(strftime("%d %b %Y %H:%M:%S %A", &before), "31 Dec 1969 23:59:59 Wednesday");
    assert_eq!(strftime("%e %I%p trailing %", &DateTime::from_unix(3600)), " 1 01AM trailing %");
}

fn harmony(tools: Option<ToolUse>, split_reasoning: bool) -> ReplyFormat {
    gpt_oss().reply_format("<|start|>assistant", tools, split_reasoning)
}

fn weather_tools(parallel: bool) -> ToolUse {
    let tools: Vec<Tool> = serde_json::from_value(serde_json::json!([
        {"type": "function", "function": {"name": "get_weather"}},
        {"type": "function", "function": {"name": "get_time"}}
    ]))
    .unwrap();
    ToolUse::new(tools, ToolChoice::Auto, parallel).unwrap().unwrap()
}

#[test]
fn harmony_answers_are_read_message_by_message() {
    let format = harmony(None, true);
    assert!(format.harmony && format.is_structured());
    let answer = "<|channel|>analysis<|message|>First.<|end|><|start|>assistant<|channel|>analysis<|message|> \
                  Second.<|end|><|start|>assistant<|channel|>commentary<|message|>Preamble. <|end|>\
                  <|start|>assistant<|channel|>final<|message|>Done.";
    let reply = format.parse(answer, false);
    assert_eq!(reply.reasoning_content.as_deref(), Some("First. Second."));
    assert_eq!(reply.content, "Preamble. Done.");
    // While streaming: nothing of a header until it is whole, and no part of `<|end|>`.
    assert_eq!(format.parse("<|channel|>fin", true), Reply::default());
    assert_eq!(format.parse("<|channel|>final<|message|>Hi<|en", true).content, "Hi");
    assert_eq!(
        format.parse("<|channel|>analysis<|message|>Hm<|e", true).reasoning_content.as_deref(),
        Some("Hm")
    );
    // Text that is no message, at the end, is content; while streaming it may still be a header.
    assert_eq!(format.parse("Plain text", false).content, "Plain text");
    assert_eq!(format.parse("Plain text", true).content, "");
    // The reasoning not wanted apart stays content, with its tags, as llama.cpp writes it.
    let reply = harmony(None, false).parse(answer, false);
    assert_eq!(reply.reasoning_content, None);
    assert!(
        reply.content.starts_with("<|channel|>analysis<|message|>First.<|end|><|channel|>analysis<|message|> Second.<|end|>Preamble."),
        "{}",
        reply.content
    );
    // A prompt that opened the analysis (an answer continued inside it).
    let continued = gpt_oss().reply_format("<|start|>assistant<|channel|>analysis<|message|>", None, true);
    assert!(continued.opens_in_reasoning);
    let reply =
        continued.parse("still thinking<|end|><|start|>assistant<|channel|>final<|message|>Yes.", false);
    assert_eq!(
        (reply.reasoning_content.as_deref(), reply.content.as_str()),
        (Some("still thinking"), "Yes.")
    );
}

#[test]
fn harmony_calls_go_to_offered_functions_only() {
    let format = harmony(Some(weather_tools(true)), true);
    let call = " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Oslo\"}";
    let reply = format.parse(call, false);
    assert_eq!(
        reply.tool_calls,
        vec![ParsedCall { name: "get_weather".into(), arguments: "{\"city\": \"Oslo\"}".into() }]
    );
    assert_eq!(reply.content, "");
    // While streaming, the arguments as far as they go; cut off at the end, they are text.
    let cut = &call[..call.len() - 8];
    assert_eq!(format.parse(cut, true).tool_calls[0].arguments, "{\"city\":");
    let reply = format.parse(cut, false);
    assert_eq!((reply.content.as_str(), reply.tool_calls.len()), ("{\"city\":", 0));
    // A built-in tool, a function not offered, or a call with no tools offered: not shown.
    for unsolicited in [
        " to=python<|channel|>analysis<|message|>print(1)",
        "<|channel|>commentary to=functions.get_news <|constrain|>json<|message|>{}",
    ] {
        assert_eq!(format.parse(unsolicited, false), Reply::default(), "{unsolicited}");
    }
    assert_eq!(harmony(None, true).parse(call, false), Reply::default());
    // Without parallel calls, only the first is kept.
    let two = format!("{call}<|end|><|start|>assistant{}", call.replace("weather", "time"));
    assert_eq!(format.parse(&two, false).tool_calls.len(), 2);
    assert_eq!(harmony(Some(weather_tools(false)), true).parse(&two, false).tool_calls.len(), 1);
}

#[test]
fn harmony_required_calls_follow_the_templates_header() {
    let mut tools = weather_tools(false);
    tools.required = true;
    // A vocabulary without harmony's control tokens: the markers are text.
    let Some(crate::grammar::GrammarSpec::Lark(grammar)) = tools.grammar(CallSyntax::Harmony, |_| false)
    else {
        panic!("a required call has a grammar");
    };
    assert!(grammar.starts_with("start: \" to=functions.\" function\n"), "{grammar}");
    assert!(
        grammar.contains("\"get_weather\" \"<|channel|>\" \"commentary json\" \"<|message|>\" a0"),
        "{grammar}"
    );
    assert!(
        grammar.contains("\"get_time\" \"<|channel|>\" \"commentary json\" \"<|message|>\" a1"),
        "{grammar}"
    );
    // gpt-oss's own vocabulary, where they are control tokens: named as tokens.
    let Some(crate::grammar::GrammarSpec::Lark(grammar)) = tools.grammar(CallSyntax::Harmony, |_| true)
    else {
        panic!("a required call has a grammar");
    };
    assert!(grammar.contains("\"get_weather\" <|channel|> \"commentary json\" <|message|> a0"), "{grammar}");
    tools.required = false;
    assert_eq!(tools.grammar(CallSyntax::Harmony, |_| true), None);
}

#[test]
fn call_tags_that_are_control_tokens_are_named_as_tokens_in_required_call_grammars() {
    let mut tools = weather_tools(false);
    tools.required = true;
    let grammar = |syntax: CallSyntax, control: bool| match tools.grammar(syntax, |_| control) {
        Some(crate::grammar::GrammarSpec::Lark(grammar)) => grammar,
        other => panic!("{other:?}"),
    };
    // Text or user-defined tags (Qwen's `<tool_call>`): quoted, so text tokens spell them.
    assert!(
        grammar(CallSyntax::Hermes, false)
            .contains("call: \"<tool_call>\" \"\\n\" json \"\\n\" \"</tool_call>\"")
    );
    // Control tokens (LFM2's and Gemma 4's, where their vocabularies mark them so): the tokens.
    assert!(
        grammar(CallSyntax::Hermes, true).contains("call: <tool_call> \"\\n\" json \"\\n\" </tool_call>")
    );
    assert!(grammar(CallSyntax::QwenXml, true).contains("call: <tool_call> \"\\n\" function </tool_call>"));
    assert!(
        grammar(CallSyntax::Lfm2, true)
            .starts_with("start: <|tool_call_start|> \"[\" function \"]\" <|tool_call_end|>\n")
    );
    assert!(
        grammar(CallSyntax::Gemma4, true).contains("call: <|tool_call> \"call:\" function <tool_call|>\n")
    );
}
