//! llama.cpp's chat cases (tests/test-chat.cpp at 0c1e570, the llama.cpp of the goldens) run
//! on its own real templates (.cache/templates, extracted by scripts/fetch-models.sh from
//! llama-cpp-python 0.3.36's sdist): an answer is parsed into the same content, reasoning and
//! calls; where the case asks for it, the parsed message rendered back through the template
//! reproduces the prompt and the answer (its "reconstruction"). Every case is also streamed
//! one character at a time: each field must only ever grow into its final value.

#![cfg(not(target_family = "wasm"))]

mod common;

use inferno::chat::{
    CallSyntax, ChatMessage, ChatTemplate, FunctionCall, RenderOptions, Reply, ReplyFormat, TemplateSource,
    Tool, ToolCall, ToolChoice, ToolUse,
};
use serde_json::{Value, json};

fn template(name: &str) -> ChatTemplate {
    let path = common::made(&format!("templates/{name}"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/fetch-models.sh)", path.display()));
    ChatTemplate::new(&text, TemplateSource::File, "<s>".into(), "</s>".into()).unwrap()
}

fn tool(name: &str, parameters: Value) -> Tool {
    serde_json::from_value(
        json!({"type": "function", "function": {"name": name, "description": "", "parameters": parameters}}),
    )
    .unwrap()
}

/// test-chat.cpp's special_function_tool (line 425).
fn special_function() -> Tool {
    tool(
        "special_function",
        json!({"type": "object", "properties": {"arg1": {"type": "integer", "description": "The arg."}}, "required": ["arg1"]}),
    )
}

/// special_function_tool_with_optional_param (line 439).
fn special_function_with_opt() -> Tool {
    tool(
        "special_function_with_opt",
        json!({"type": "object", "properties": {
            "arg1": {"type": "integer", "description": "The arg."},
            "arg2": {"type": "integer", "description": "The optional arg."}
        }, "required": ["arg1"]}),
    )
}

/// python_tool (line 481).
fn python() -> Tool {
    tool(
        "python",
        json!({"type": "object", "properties": {"code": {"type": "string", "description": "Python code to execute."}}, "required": ["code"]}),
    )
}

/// edit_tool (line 556).
fn edit() -> Tool {
    let string = |d: &str| json!({"type": "string", "description": d});
    tool(
        "edit",
        json!({"type": "object", "properties": {
            "filename": string("Path of file to edit"),
            "oldString": string("String to replace"),
            "newString": string("New (replacement) value")
        }, "required": ["filename", "oldString", "newString"]}),
    )
}

struct Case<'a> {
    template: &'a str,
    input: &'a str,
    tools: Vec<Tool>,
    thinking: Option<bool>,
    content: &'a str,
    reasoning: &'a str,
    calls: Vec<(&'a str, Value)>,
    reconstruct: bool,
}

impl<'a> Case<'a> {
    fn new(template: &'a str, input: &'a str) -> Case<'a> {
        Case {
            template,
            input,
            tools: Vec::new(),
            thinking: None,
            content: "",
            reasoning: "",
            calls: Vec::new(),
            reconstruct: false,
        }
    }
}

/// Runs a case; returns how many checks it made (parse, stream, reconstruction).
fn run(case: Case) -> usize {
    let template = template(case.template);
    let tools = ToolUse::new(case.tools, ToolChoice::Auto, true).unwrap();
    let user = [ChatMessage::new("user", "Hey there!")];
    let options = RenderOptions {
        add_generation_prompt: true,
        enable_thinking: case.thinking,
        ..RenderOptions::default()
    };
    let prompt = template.render_with_tools(&user, options, tools.as_ref()).unwrap();
    let format = template.reply_format(&prompt, tools.clone(), true);
    let reply = format.parse(case.input, false);
    let what = format!("{} on {:?}", case.template, case.input);
    assert_eq!(reply.content, case.content, "content of {what}");
    assert_eq!(reply.reasoning_content.as_deref().unwrap_or(""), case.reasoning, "reasoning of {what}");
    let calls: Vec<(&str, Value)> = reply
        .tool_calls
        .iter()
        .map(|c| (c.name.as_str(), serde_json::from_str(&c.arguments).unwrap_or(Value::Null)))
        .collect();
    assert_eq!(calls, case.calls, "calls of {what}");
    let mut checks = 2;
    assert_streams(&format, case.input, &reply);
    if case.reconstruct {
        let mut message = ChatMessage::new("assistant", &reply.content);
        if !reply.tool_calls.is_empty() {
            message.tool_calls = Some(
                reply
                    .tool_calls
                    .iter()
                    .map(|c| ToolCall {
                        id: None,
                        kind: "function".into(),
                        function: FunctionCall { name: c.name.clone(), arguments: c.arguments.clone() },
                    })
                    .collect(),
            );
        }
        let whole = [user[0].clone(), message];
        let options = RenderOptions {
            add_generation_prompt: false,
            enable_thinking: case.thinking,
            ..RenderOptions::default()
        };
        let rendered = template.render_with_tools(&whole, options, tools.as_ref()).unwrap();
        assert!(
            rendered.starts_with(&format!("{prompt}{}", case.input)),
            "reconstruction of {what}:\n{rendered}\n---- expected to start with ----\n{prompt}{}",
            case.input
        );
        checks += 1;
    }
    checks
}

/// Read as it streams, every field only grows into its final value.
fn assert_streams(format: &ReplyFormat, input: &str, last: &Reply) {
    let is_prefix = |part: &str, whole: &str, field: &str, at: usize| {
        assert!(
            whole.starts_with(part),
            "{field} after {at} bytes of {input:?} is {part:?}, not a prefix of {whole:?}"
        )
    };
    for at in (0..=input.len()).filter(|&at| input.is_char_boundary(at)) {
        let reply = format.parse(&input[..at], true);
        is_prefix(&reply.content, &last.content, "content", at);
        let reasoning = reply.reasoning_content.as_deref().unwrap_or("");
        is_prefix(reasoning, last.reasoning_content.as_deref().unwrap_or(""), "reasoning", at);
        assert!(reply.tool_calls.len() <= last.tool_calls.len(), "calls after {at} bytes of {input:?}");
        for (call, last) in reply.tool_calls.iter().zip(&last.tool_calls) {
            assert_eq!(call.name, last.name, "a call's name after {at} bytes of {input:?}");
            is_prefix(&call.arguments, &last.arguments, "arguments", at);
        }
    }
}

const HELLO: &str = "Hello, world!\nWhat's up?";

#[test]
fn qwen35_xml_calls_and_reasoning_as_test_chat_expects() {
    let t = "Qwen3.5-4B.jinja";
    let call = "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>";
    let mut checks = 0;
    // test-chat.cpp line 2150: the prompt opens the thinking; the answer closes it.
    checks += run(Case {
        thinking: Some(true),
        content: HELLO,
        reasoning: "I'm\nthinking",
        ..Case::new(t, "I'm\nthinking\n</think>\n\nHello, world!\nWhat's up?")
    });
    // Line 2163.
    checks += run(Case {
        thinking: Some(false),
        tools: vec![special_function()],
        calls: vec![("special_function", json!({"arg1": 1}))],
        ..Case::new(t, call)
    });
    // Line 2175.
    let thought_call = format!("I'm\nthinking\n</think>\n\n{call}");
    checks += run(Case {
        tools: vec![special_function()],
        reasoning: "I'm\nthinking",
        calls: vec![("special_function", json!({"arg1": 1}))],
        ..Case::new(t, &thought_call)
    });
    // Line 2186: two calls, an optional parameter given.
    let two = format!(
        "{call}\n<tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>\n1\n</parameter>\n\
         <parameter=arg2>\n2\n</parameter>\n</function>\n</tool_call>"
    );
    checks += run(Case {
        thinking: Some(false),
        tools: vec![special_function(), special_function_with_opt()],
        calls: vec![
            ("special_function", json!({"arg1": 1})),
            ("special_function_with_opt", json!({"arg1": 1, "arg2": 2})),
        ],
        ..Case::new(t, &two)
    });
    // Line 2210: a string parameter holding code, kept as written.
    checks += run(Case {
        thinking: Some(false),
        tools: vec![python()],
        calls: vec![("python", json!({"code": "def hello():\n    print(\"Hello, world!\")\n\nhello()"}))],
        ..Case::new(
            t,
            "<tool_call>\n<function=python>\n<parameter=code>\ndef hello():\n    print(\"Hello, world!\")\n\nhello()\n\
             </parameter>\n</function>\n</tool_call>",
        )
    });
    // Line 2233 and 2260: three string parameters; a value that itself ends in a newline.
    for (new_string, expected) in [("#include", "#include"), ("#include\n", "#include\n")] {
        let input = format!(
            "<tool_call>\n<function=edit>\n<parameter=filename>\nfoo.c\n</parameter>\n<parameter=oldString>\n\
             #iclunde\n</parameter>\n<parameter=newString>\n{new_string}\n</parameter>\n</function>\n</tool_call>"
        );
        checks += run(Case {
            thinking: Some(false),
            tools: vec![edit()],
            calls: vec![(
                "edit",
                json!({"filename": "foo.c", "oldString": "#iclunde", "newString": expected}),
            )],
            ..Case::new(t, &input)
        });
    }
    // Line 2283: code that starts with an indent.
    checks += run(Case {
        thinking: Some(false),
        tools: vec![python()],
        calls: vec![("python", json!({"code": "    print(\"Hello, world!\")"}))],
        ..Case::new(
            t,
            "<tool_call>\n<function=python>\n<parameter=code>\n    print(\"Hello, world!\")\n</parameter>\n</function>\n</tool_call>",
        )
    });
    // Line 2301: reasoning, then JSON content.
    checks += run(Case {
        thinking: Some(true),
        reasoning: "I need to output the invoice details in JSON",
        content: r#"{"amount": 123.45, "date": "2025-12-03"}"#,
        ..Case::new(
            t,
            "I need to output the invoice details in JSON\n</think>\n\n{\"amount\": 123.45, \"date\": \"2025-12-03\"}",
        )
    });
    // Line 2312: a call ends the prefilled thinking without a closing tag.
    let terminal = tool(
        "run_in_terminal",
        json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
    );
    checks += run(Case {
        thinking: Some(true),
        tools: vec![terminal],
        calls: vec![("run_in_terminal", json!({"command": "pwd"}))],
        ..Case::new(
            t,
            "<tool_call>\n<function=run_in_terminal>\n<parameter=command>\npwd\n</parameter>\n</function>\n</tool_call>",
        )
    });
    assert_eq!(checks, 20);
}

#[test]
fn hermes_json_calls_as_test_chat_expects() {
    let call = "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>";
    let mut checks = 0;
    // Line 3333 and 3341 (Hermes 2 Pro): a call, and content before one.
    let hermes2 = "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja";
    checks += run(Case {
        tools: vec![special_function()],
        calls: vec![("special_function", json!({"arg1": 1}))],
        ..Case::new(
            hermes2,
            "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}</tool_call>",
        )
    });
    checks += run(Case {
        tools: vec![special_function()],
        content: HELLO,
        calls: vec![("special_function", json!({"arg1": 1}))],
        ..Case::new(
            hermes2,
            "Hello, world!\nWhat's up?<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}</tool_call>",
        )
    });
    // Line 6103: MiMo-VL, Hermes 3 and Qwen 2.5: content and a call, each reconstructed.
    for t in [
        "MiMo-VL.jinja",
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
        "Qwen-Qwen2.5-7B-Instruct.jinja",
    ] {
        checks += run(Case { content: HELLO, reconstruct: true, ..Case::new(t, HELLO) });
        checks += run(Case {
            tools: vec![special_function()],
            calls: vec![("special_function", json!({"arg1": 1}))],
            reconstruct: true,
            ..Case::new(t, call)
        });
    }
    assert_eq!(checks, 4 + 18);
}

#[test]
fn qwen3_thinks_then_calls_in_hermes_json() {
    // Not in test-chat.cpp: Qwen3-0.6B's template writes calls as Hermes does and keeps
    // reasoning between <think> tags; our reference model.
    let t = "Qwen-Qwen3-0.6B.jinja";
    assert_eq!(template(t).call_syntax(), CallSyntax::Hermes);
    let call = "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>";
    let mut checks = run(Case {
        tools: vec![special_function()],
        reasoning: "I'm\nthinking",
        calls: vec![("special_function", json!({"arg1": 1}))],
        ..Case::new(t, &format!("<think>\nI'm\nthinking\n</think>\n\n{call}"))
    });
    checks += run(Case {
        thinking: Some(false),
        tools: vec![special_function()],
        content: HELLO,
        reconstruct: true,
        ..Case::new(t, HELLO)
    });
    checks += run(Case {
        thinking: Some(false),
        tools: vec![special_function()],
        calls: vec![("special_function", json!({"arg1": 1}))],
        reconstruct: true,
        ..Case::new(t, call)
    });
    assert_eq!(checks, 8);
}

#[test]
fn llama3_json_calls_and_content() {
    let mut checks = 0;
    // Lines 6299, 6327, 6351: content stays content though tools are offered.
    for t in [
        "meta-llama-Llama-3.1-8B-Instruct.jinja",
        "meta-llama-Llama-3.2-3B-Instruct.jinja",
        "meta-llama-Llama-3.3-70B-Instruct.jinja",
    ] {
        assert_eq!(template(t).call_syntax(), CallSyntax::LlamaJson);
        checks +=
            run(Case { tools: vec![python()], content: HELLO, reconstruct: true, ..Case::new(t, HELLO) });
        // The format the template asks for (not a test-chat.cpp case at this commit).
        checks += run(Case {
            tools: vec![special_function()],
            calls: vec![("special_function", json!({"arg1": 1}))],
            ..Case::new(t, "{\"name\": \"special_function\", \"parameters\": {\"arg1\": 1}}")
        });
    }
    assert_eq!(checks, 15);
}

#[test]
fn templates_without_tools_take_the_generic_route() {
    // Gemma 2 (line 2975) has no tool format: its tools are described in the system prompt and
    // its answers read as {"tool_calls": ...} or {"response": ...}.
    let t = "google-gemma-2-2b-it.jinja";
    assert_eq!(template(t).call_syntax(), CallSyntax::Generic);
    let mut checks = run(Case {
        tools: vec![special_function()],
        calls: vec![("special_function", json!({"arg1": 1}))],
        ..Case::new(t, "{\"tool_calls\": [{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]}")
    });
    checks += run(Case {
        tools: vec![special_function()],
        content: "Hi \"there\"\n\u{e9}",
        ..Case::new(t, "{\"response\": \"Hi \\\"there\\\"\\n\\u00e9\"}")
    });
    checks += run(Case { content: HELLO, reconstruct: true, ..Case::new(t, HELLO) });
    assert_eq!(checks, 7);
}

#[test]
fn phi4_mini_functools_calls() {
    let tools = ToolUse::new(vec![special_function(), python()], ToolChoice::Auto, true).unwrap();
    let format =
        ReplyFormat { calls: Some((CallSyntax::Functools, tools.unwrap())), ..ReplyFormat::default() };
    let input = "Let me check. functools[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}, \
                 {\"name\": \"python\", \"arguments\": {\"code\": \"print(1)\"}}]";
    let reply = format.parse(input, false);
    assert_eq!(reply.content, "Let me check.");
    assert_eq!(reply.tool_calls.len(), 2);
    assert_eq!(reply.tool_calls[1].arguments, "{\"code\": \"print(1)\"}");
    assert_streams(&format, input, &reply);
}

#[test]
fn gemma4_calls_and_channels_as_test_chat_expects() {
    // test-chat.cpp lines 2990-3150 (Google Gemma 4): reasoning in a thought channel, calls as
    // `call:NAME{...}` with bare keys and <|"|>-quoted strings. Its four "edge cases" (stray
    // channel tags after the content) are not read yet.
    let t = "google-gemma-4-31B-it.jinja";
    assert_eq!(template(t).call_syntax(), CallSyntax::Gemma4);
    let object = json!({"type": "object"});
    let names = [
        "get_time",
        "get_weather",
        "empty_args",
        "special_function",
        "amount",
        "toggle",
        "set_nullable",
        "todo_list",
        "set_config",
    ];
    let tools: Vec<Tool> = names.iter().map(|name| tool(name, object.clone())).collect();
    let mut checks = run(Case { content: "Hello, world!", ..Case::new(t, "Hello, world!") });
    checks += run(Case {
        content: HELLO,
        reasoning: "I'm\nthinking",
        ..Case::new(t, "<|channel>thought\nI'm\nthinking<channel|>Hello, world!\nWhat's up?")
    });
    checks +=
        run(Case { content: HELLO, ..Case::new(t, "<|channel>thought<channel|>Hello, world!\nWhat's up?") });
    let calls: [(&str, &str, Value); 16] = [
        ("", "get_time{city:<|\"|>London<|\"|>}", json!({"city": "London"})),
        ("", "get_time{city:<|\"|>San Francisco<|\"|>}", json!({"city": "San Francisco"})),
        ("", "empty_args{}", json!({})),
        (HELLO, "get_time{city:<|\"|>Paris<|\"|>}", json!({"city": "Paris"})),
        ("", "special_function{arg1:42}", json!({"arg1": 42})),
        ("", "special_function{arg1:-7}", json!({"arg1": -7})),
        #[allow(clippy::approx_constant)] // test-chat.cpp's value, not pi
        ("", "amount{orig:3.14}", json!({"orig": 3.14})),
        ("", "toggle{enabled:true}", json!({"enabled": true})),
        ("", "toggle{enabled:false}", json!({"enabled": false})),
        ("", "set_nullable{value:null}", json!({"value": null})),
        (
            "",
            "todo_list{todos:[<|\"|>buy milk<|\"|>,<|\"|>walk dog<|\"|>]}",
            json!({"todos": ["buy milk", "walk dog"]}),
        ),
        (
            "",
            "set_config{config:{theme:<|\"|>dark<|\"|>,count:3}}",
            json!({"config": {"theme": "dark", "count": 3}}),
        ),
        ("", "todo_list{todos:[]}", json!({"todos": []})),
        ("", "set_config{config:{}}", json!({"config": {}})),
        ("", "amount{orig:1.5e10}", json!({"orig": 1.5e10})),
        ("", "get_time{city:<|\"|>Paris<|\"|>}", json!({"city": "Paris"})),
    ];
    for (content, call, arguments) in calls {
        let input = format!("{content}<|tool_call>call:{call}<tool_call|>");
        let name = &call[..call.find('{').unwrap()];
        checks += run(Case {
            tools: tools.clone(),
            content,
            calls: vec![(name, arguments)],
            ..Case::new(t, &input)
        });
    }
    // Reasoning, then a call; two calls back to back.
    checks += run(Case {
        tools: tools.clone(),
        reasoning: "I'm\nthinking",
        calls: vec![("get_time", json!({"city": "Paris"}))],
        ..Case::new(
            t,
            "<|channel>thought\nI'm\nthinking<channel|><|tool_call>call:get_time{city:<|\"|>Paris<|\"|>}<tool_call|>",
        )
    });
    checks += run(Case {
        tools,
        calls: vec![("get_time", json!({"city": "London"})), ("get_weather", json!({"city": "Paris"}))],
        ..Case::new(
            t,
            "<|tool_call>call:get_time{city:<|\"|>London<|\"|>}<tool_call|><|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>",
        )
    });
    assert_eq!(checks, 2 * 21);
}

#[test]
fn lfm2_python_calls_as_test_chat_expects() {
    let string = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let get_time = || tool("get_time", string.clone());
    let any = |name: &str, key: &str| tool(name, json!({"type": "object", "properties": {key: {}}}));
    let calendar = tool(
        "Calendar.create_event",
        json!({"type": "object", "properties": {"title": {"type": "string"}, "participants": {"type": "array"}, "metadata": {"type": "object"}}}),
    );
    let mut checks = 0;
    // test_lfm2_parser (test-chat.cpp line 2015), for each of its LFM2 templates.
    for t in ["LFM2-8B-A1B.jinja", "LFM2.5-Instruct.jinja", "LFM2.5-8B-A1B.jinja"] {
        let call = |input: &'static str, tools: Vec<Tool>, name: &'static str, arguments: Value| Case {
            tools,
            calls: vec![(name, arguments)],
            ..Case::new(t, input)
        };
        checks += run(Case { content: HELLO, ..Case::new(t, HELLO) });
        checks += run(call(
            "<|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>",
            vec![special_function()],
            "special_function",
            json!({"arg1": 1}),
        ));
        checks += run(call(
            "<|tool_call_start|>[get_time(city=\"XYZCITY\")]<|tool_call_end|>",
            vec![get_time()],
            "get_time",
            json!({"city": "XYZCITY"}),
        ));
        // Python's literals become JSON's.
        checks += run(call(
            "<|tool_call_start|>[toggle(enabled=True)]<|tool_call_end|>",
            vec![any("toggle", "enabled")],
            "toggle",
            json!({"enabled": true}),
        ));
        checks += run(call(
            "<|tool_call_start|>[set_nullable(value=None)]<|tool_call_end|>",
            vec![any("set_nullable", "value")],
            "set_nullable",
            json!({"value": null}),
        ));
        checks += run(call(
            "<|tool_call_start|>[set_config(config={\"enabled\": True, \"count\": 3})]<|tool_call_end|>",
            vec![any("set_config", "config")],
            "set_config",
            json!({"config": {"enabled": true, "count": 3}}),
        ));
        // JSON's literals too.
        checks += run(call(
            "<|tool_call_start|>[set_config(config={\"enabled\": true, \"note\": null})]<|tool_call_end|>",
            vec![any("set_config", "config")],
            "set_config",
            json!({"config": {"enabled": true, "note": null}}),
        ));
        // A dotted name, a list and a dict.
        checks += run(call(
            "<|tool_call_start|>[Calendar.create_event(title=\"demo\", participants=[\"Alice\", \"Bob\"], \
             metadata={\"priority\": \"high\", \"reminder\": true})]<|tool_call_end|>",
            vec![calendar.clone()],
            "Calendar.create_event",
            json!({"title": "demo", "participants": ["Alice", "Bob"], "metadata": {"priority": "high", "reminder": true}}),
        ));
        // Markdown links stay content.
        let links = "Use this format: [link text](url). Example: [Wikipedia](https://www.wikipedia.org).";
        checks += run(Case { tools: vec![get_time()], content: links, ..Case::new(t, links) });
        // Escapes decode: a newline, a tab, escaped quotes; single quotes inside.
        checks += run(call(
            "<|tool_call_start|>[python(code=\"def hello():\\n    print('hey')\")]<|tool_call_end|>",
            vec![python()],
            "python",
            json!({"code": "def hello():\n    print('hey')"}),
        ));
        checks += run(call(
            "<|tool_call_start|>[python(code=\"First line\\nSecond line\\tindented\")]<|tool_call_end|>",
            vec![python()],
            "python",
            json!({"code": "First line\nSecond line\tindented"}),
        ));
        checks += run(call(
            "<|tool_call_start|>[python(code=\"print(\\\"hi\\\")\")]<|tool_call_end|>",
            vec![python()],
            "python",
            json!({"code": "print(\"hi\")"}),
        ));
        // Content before a call.
        checks += run(Case {
            content: "Let me check the time.",
            ..call(
                "Let me check the time.<|tool_call_start|>[get_time(city=\"Paris\")]<|tool_call_end|>",
                vec![get_time()],
                "get_time",
                json!({"city": "Paris"}),
            )
        });
        // Two calls in one block.
        checks += run(Case {
            tools: vec![special_function(), special_function_with_opt()],
            calls: vec![
                ("special_function", json!({"arg1": 1})),
                ("special_function_with_opt", json!({"arg1": 1, "arg2": 2})),
            ],
            ..Case::new(
                t,
                "<|tool_call_start|>[special_function(arg1=1), special_function_with_opt(arg1=1, arg2=2)]<|tool_call_end|>",
            )
        });
        checks += run(call(
            "<|tool_call_start|>[empty_args()]<|tool_call_end|>",
            vec![tool("empty_args", json!({"type": "object", "properties": {}}))],
            "empty_args",
            json!({}),
        ));
    }
    // LFM2.5-8B-A1B's thinking (line 5235): reasoning, then a call; a call's tags inside the
    // reasoning are reasoning.
    let t = "LFM2.5-8B-A1B.jinja";
    checks += run(Case {
        tools: vec![special_function()],
        reasoning: "I'm\nthinking",
        calls: vec![("special_function", json!({"arg1": 1}))],
        ..Case::new(
            t,
            "<think>I'm\nthinking</think><|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>",
        )
    });
    checks += run(Case {
        tools: vec![special_function()],
        reasoning: "Let me think about <|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|> hmm",
        calls: vec![("special_function", json!({"arg1": 1}))],
        ..Case::new(
            t,
            "<think>Let me think about <|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|> hmm</think>\
             <|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>",
        )
    });
    // The partial call (line 2113): the arguments as far as they go.
    let template = template("LFM2-8B-A1B.jinja");
    let tools = ToolUse::new(vec![special_function()], ToolChoice::Auto, true).unwrap();
    let user = [ChatMessage::new("user", "Hey there!")];
    let options = RenderOptions { add_generation_prompt: true, ..RenderOptions::default() };
    let prompt = template.render_with_tools(&user, options, tools.as_ref()).unwrap();
    let format = template.reply_format(&prompt, tools, true);
    assert_eq!(format.calls.as_ref().map(|(syntax, _)| *syntax), Some(CallSyntax::Lfm2));
    let reply = format.parse("<|tool_call_start|>[special_function(arg1=", true);
    assert_eq!((reply.content.as_str(), reply.tool_calls.len()), ("", 1));
    assert_eq!(
        (reply.tool_calls[0].name.as_str(), reply.tool_calls[0].arguments.as_str()),
        ("special_function", "{\"arg1\": ")
    );
    assert_eq!(checks, 3 * 15 * 2 + 2 * 2);
}

#[test]
fn gpt_oss_harmony_channels_and_calls_as_test_chat_expects() {
    // test-chat.cpp lines 6425-6565 (openai-gpt-oss-120b): the answer follows the prompt's
    // `<|start|>assistant`, as a series of messages: `analysis` is reasoning, `final` and a
    // `commentary` preamble content, a message to `functions.NAME` a call (the recipient in the
    // role's header or the channel's), a message to a built-in tool nothing. Its two
    // continuation cases are not ported: requests here never continue an assistant message.
    let t = "openai-gpt-oss-120b.jinja";
    assert_eq!(template(t).call_syntax(), CallSyntax::Harmony);
    let thought_then =
        |text: &str| format!("<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant{text}");
    let call = ("special_function", json!({"arg1": 1}));
    let mut checks = 0;
    checks += run(Case {
        content: HELLO,
        reconstruct: true,
        ..Case::new(t, "<|channel|>final<|message|>Hello, world!\nWhat's up?")
    });
    checks += run(Case {
        content: HELLO,
        ..Case::new(t, "<|channel|>commentary<|message|>Hello, world!\nWhat's up?")
    });
    let thoughts = thought_then("<|channel|>final<|message|>Hello, world!\nWhat's up?");
    checks += run(Case { content: HELLO, reasoning: "I'm\nthinking", ..Case::new(t, &thoughts) });
    // Cut off inside the analysis (a partial case there): reasoning so far.
    checks += run(Case {
        reasoning: "I'm\nthinking",
        ..Case::new(t, "<|channel|>analysis<|message|>I'm\nthinking")
    });
    for input in [
        " to=functions.special_function<|channel|>analysis<|message|>{\"arg1\": 1}",
        "<|channel|>analysis to=functions.special_function<|message|>{\"arg1\": 1}",
        " to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}",
        "<|channel|>commentary to=functions.special_function<|message|>{\"arg1\": 1}",
    ] {
        checks +=
            run(Case { tools: vec![special_function()], calls: vec![call.clone()], ..Case::new(t, input) });
    }
    let thought_call =
        thought_then(" to=functions.special_function<|channel|>analysis<|message|>{\"arg1\": 1}");
    checks += run(Case {
        tools: vec![special_function()],
        reasoning: "I'm\nthinking",
        calls: vec![call.clone()],
        ..Case::new(t, &thought_call)
    });
    // "Complex tool calling": the recipient in the channel's header, then a constraint.
    let edit = tool(
        "edit",
        json!({"type": "object", "properties": {
            "oldString": {"type": "string", "description": "Old string to replace."},
            "newString": {"type": "string", "description": "New replacement string."},
            "replaceAll": {"type": "boolean", "description": "Whether to replace all occurrences."}
        }, "required": ["oldString", "newString"]}),
    );
    checks += run(Case {
        tools: vec![edit],
        reasoning: "Thinking about edit...",
        calls: vec![(
            "edit",
            json!({"oldString": "if (part < railCount - 1) {", "newString": "if (part < 4) {", "replaceAll": false}),
        )],
        ..Case::new(
            t,
            "<|channel|>analysis<|message|>Thinking about edit...<|end|><|start|>assistant<|channel|>commentary \
             to=functions.edit <|constrain|>json<|message|>{\"oldString\": \"if (part < railCount - 1) {\", \
             \"newString\": \"if (part < 4) {\", \"replaceAll\": false}",
        )
    });
    // "Structured output": a constrained final message is content.
    checks += run(Case {
        reasoning: "I need to output the invoice details in JSON",
        content: r#"{"amount": 123.45, "date": "2025-12-03"}"#,
        ..Case::new(
            t,
            "<|channel|>analysis<|message|>I need to output the invoice details in JSON<|end|><|start|>assistant\
             <|channel|>final <|constrain|>json<|message|>{\"amount\": 123.45, \"date\": \"2025-12-03\"}",
        )
    });
    // Unsolicited calls to built-in tools: no content.
    for builtin in [
        " to=container.exec<|channel|>commentary<|message|>python3 -c 'print(\"hello\")'",
        "<|channel|>commentary to=python <|constrain|>code<|message|>print(\"hello\")",
    ] {
        let input = format!(
            "<|channel|>analysis<|message|>I will execute python to say hello<|end|><|start|>assistant{builtin}"
        );
        checks += run(Case { reasoning: "I will execute python to say hello", ..Case::new(t, &input) });
    }
    // A stray `<|channel|>commentary to=assistant` before the analysis, and before the final.
    let stray = "<|channel|>commentary to=assistant";
    checks += run(Case {
        content: HELLO,
        reasoning: "I'm\nthinking",
        ..Case::new(t, &format!("{stray}{thoughts}"))
    });
    checks += run(Case {
        content: HELLO,
        reasoning: "I'm\nthinking",
        ..Case::new(t, &thought_then(&format!("{stray}<|channel|>final<|message|>Hello, world!\nWhat's up?")))
    });
    // Not in test-chat.cpp: a call as the template writes one (and our grammar makes), which
    // renders back into the prompt and the answer.
    checks += run(Case {
        tools: vec![special_function()],
        calls: vec![call],
        reconstruct: true,
        ..Case::new(t, " to=functions.special_function<|channel|>commentary json<|message|>{\"arg1\": 1}")
    });
    assert_eq!(checks, 2 * 16 + 2);

    // With reasoning_format none (our split_reasoning false), the analysis is content, tags
    // and all, less the next message's `<|start|>assistant`.
    let template = template(t);
    let user = [ChatMessage::new("user", "Hey there!")];
    let options = RenderOptions { add_generation_prompt: true, ..RenderOptions::default() };
    let prompt = template.render(&user, options).unwrap();
    let format = template.reply_format(&prompt, None, false);
    let reply = format.parse(&thoughts, false);
    assert_eq!(reply.content, "<|channel|>analysis<|message|>I'm\nthinking<|end|>Hello, world!\nWhat's up?");
    assert_eq!(reply.reasoning_content, None);
    assert_streams(&format, &thoughts, &reply);
    // The analysis cut off while streaming: its reasoning so far (the case is a partial one).
    let format = template.reply_format(&prompt, None, true);
    let reply = format.parse("<|channel|>analysis<|message|>I'm\nthinking", true);
    assert_eq!(reply.reasoning_content.as_deref(), Some("I'm\nthinking"));
}

#[test]
fn gpt_oss_generation_prompt_opens_an_assistant_message() {
    // test-chat.cpp line 7009: the generation prompt is `<|start|>assistant`.
    let template = template("openai-gpt-oss-120b.jinja");
    let messages =
        [ChatMessage::new("system", "You are a helpful assistant."), ChatMessage::new("user", "Hey there!")];
    let with = RenderOptions { add_generation_prompt: true, ..RenderOptions::default() };
    let prompt = template.render(&messages, with).unwrap();
    let without = template.render(&messages, RenderOptions::default()).unwrap();
    assert!(prompt.contains("You are a helpful assistant.") && prompt.contains("Hey there!"), "{prompt}");
    assert_eq!(prompt, format!("{without}<|start|>assistant"));
}

#[test]
fn templates_that_read_reasoning_effort() {
    // test-chat.cpp line 7500 (test_reasoning_effort_caps): llama.cpp's supports_reasoning_effort.
    for (name, reads) in [
        ("deepseek-ai-DeepSeek-V4.jinja", true),
        ("muse-glimmer.jinja", true),
        ("tencent-Hy3.jinja", true),
        ("openai-gpt-oss-120b.jinja", true),
        ("upstage-Solar-Open-100B.jinja", true),
        ("Cohere2MoE.jinja", true),
        ("meta-llama-Llama-3.1-8B-Instruct.jinja", false),
        ("Qwen-Qwen3-0.6B.jinja", false),
    ] {
        assert_eq!(template(name).reads_reasoning_effort(), reads, "{name}");
    }
}
