//! Tool calls end to end on micro models of each call syntax: with a call required (or one
//! function named), the answer sampled at temperature 1 always reads back as a call whose
//! arguments follow the tool's schema; the call and its result then render into the next turn,
//! which runs. The parsing itself is checked against llama.cpp in tests/chat_oracle.rs.

#![cfg(not(target_family = "wasm"))]

mod common;

use inferno::chat::{
    CallSyntax, ChatMessage, ChatTemplate, FunctionCall, Reply, TemplateSource, Tool, ToolCall, ToolChoice,
    ToolUse,
};
use inferno::engine::{Engine, TurnOptions};
use inferno::sampler::{Sampler, SamplerSettings};
use serde_json::{Value, json};

fn engine(file: &str) -> Engine {
    let path = common::model(file);
    Engine::load(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// A micro model speaking with another family's template (the micro files carry Qwen3's).
fn engine_with_template(file: &str, template: ChatTemplate) -> Engine {
    let mut engine = engine(file);
    engine.set_template(template);
    engine
}

/// One of llama.cpp's real templates (.cache/templates, from scripts/fetch-models.sh).
fn llama_cpp_template(name: &str) -> ChatTemplate {
    let path = common::made(&format!("templates/{name}"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    ChatTemplate::new(&text, TemplateSource::File, String::new(), String::new()).unwrap()
}

/// Tools whose every argument is bounded (a micro model's strings never end by themselves).
fn tools() -> Vec<Tool> {
    serde_json::from_value(json!([
        {"type": "function", "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string", "enum": ["Paris", "Oslo", "Lima"]},
                "celsius": {"type": "boolean"}
            }, "required": ["city"]}
        }},
        {"type": "function", "function": {
            "name": "set_alarm",
            "parameters": {"type": "object", "properties": {
                "label": {"type": "string", "maxLength": 6},
                "hour": {"type": "integer", "enum": [6, 7, 8]}
            }, "required": ["label", "hour"]}
        }}
    ]))
    .unwrap()
}

/// Whether `arguments` is an object that `schema` (the subset used above) accepts.
fn follows(arguments: &str, schema: &Value) -> bool {
    let Ok(Value::Object(arguments)) = serde_json::from_str::<Value>(arguments) else { return false };
    let properties = schema["properties"].as_object().unwrap();
    let required = schema["required"].as_array().unwrap();
    required.iter().all(|key| arguments.contains_key(key.as_str().unwrap()))
        && arguments.iter().all(|(key, value)| {
            let Some(property) = properties.get(key) else { return false };
            let allowed = property["enum"].as_array().is_none_or(|list| list.contains(value));
            let typed = match property["type"].as_str().unwrap() {
                "string" => value.as_str().is_some_and(|s| {
                    property["maxLength"].as_u64().is_none_or(|most| s.chars().count() as u64 <= most)
                }),
                "boolean" => value.is_boolean(),
                "integer" => value.is_i64(),
                _ => false,
            };
            allowed && typed
        })
}

/// One sampled answer to `messages`, read back.
fn answer(engine: &Engine, messages: &[ChatMessage], tools: Option<ToolUse>, seed: u64) -> (Reply, String) {
    let options = TurnOptions { tools, split_reasoning: true, ..TurnOptions::default() };
    let turn = engine.chat_turn(messages, options, 2048).unwrap();
    let settings = SamplerSettings { temperature: 1.0, seed, ..SamplerSettings::default() };
    let mut sampler = Sampler::new(settings).unwrap();
    if let Some(grammar) = &turn.grammar {
        sampler.set_constraint(Some(engine.constraint(grammar).unwrap()));
    }
    let mut session = engine.new_session(2048).unwrap();
    session.sync(engine, &turn.tokens).unwrap();
    let mut text = String::new();
    for _ in 0..160 {
        let step = session.step(engine, &mut sampler, None, 0).unwrap();
        text.push_str(&step.text);
        if step.end_of_generation {
            break;
        }
    }
    (turn.reply.parse(&text, false), text)
}

/// Seeds per tool choice: three required calls and two named ones on a micro model.
const MICRO_SEEDS: [std::ops::Range<u64>; 2] = [0..3, 3..5];
/// One of each on a real model: their forward passes were most of this suite's time, and the
/// generic route's grammar runs on a micro model too (`generic_calls_for_a_template_without_tools`).
const REAL_SEEDS: [std::ops::Range<u64>; 2] = [0..1, 3..4];

fn required_calls_parse_and_round_trip(
    engine: Engine,
    file: &str,
    syntax: CallSyntax,
    [required, named_seeds]: [std::ops::Range<u64>; 2],
) {
    assert_eq!(engine.template().call_syntax(), syntax, "{file}");
    let question = [ChatMessage::new("user", "What is the weather in Paris?")];
    let named = ToolChoice::Function("set_alarm".into());
    for (choice, seeds) in [(ToolChoice::Required, required), (named, named_seeds)] {
        for seed in seeds {
            let use_ = ToolUse::new(tools(), choice.clone(), false).unwrap();
            let (reply, text) = answer(&engine, &question, use_, seed);
            let what = format!("{file}, {choice:?}, seed {seed}: {text:?}");
            assert_eq!(reply.tool_calls.len(), 1, "{what}");
            let call = &reply.tool_calls[0];
            if choice != ToolChoice::Required {
                assert_eq!(call.name, "set_alarm", "{what}");
            }
            let tool = tools().into_iter().find(|t| t.function.name == call.name).expect("a known tool");
            assert!(follows(&call.arguments, tool.function.parameters.as_ref().unwrap()), "{what}");

            // The call and its result go back in; the next turn renders them and runs.
            let mut history = question.to_vec();
            let mut assistant = ChatMessage::new("assistant", &reply.content);
            assistant.tool_calls = Some(vec![ToolCall {
                id: Some("call_1".into()),
                kind: "function".into(),
                function: FunctionCall { name: call.name.clone(), arguments: call.arguments.clone() },
            }]);
            history.push(assistant);
            let mut result = ChatMessage::new("tool", "{\"temperature\": 21}");
            result.tool_call_id = Some("call_1".into());
            history.push(result);
            let auto = ToolUse::new(tools(), ToolChoice::Auto, false).unwrap();
            let options =
                TurnOptions { tools: auto.clone(), split_reasoning: true, ..TurnOptions::default() };
            let turn = engine.chat_turn(&history, options, 2048).unwrap();
            let prompt = engine.tokenizer().decode(&turn.tokens);
            assert!(prompt.contains("temperature") && prompt.contains(&call.name), "{what}: {prompt}");
            let (next, text) = answer(&engine, &history, auto, seed);
            if syntax == CallSyntax::Generic {
                // Held to {"response"} or {"tool_calls"}: either reads back.
                assert!(!next.content.is_empty() || !next.tool_calls.is_empty(), "{what}, then {text:?}");
            }
        }
    }
}

#[test]
fn qwen3_hermes_calls() {
    let file = "qwen3-micro-q8_0.gguf";
    required_calls_parse_and_round_trip(engine(file), file, CallSyntax::Hermes, MICRO_SEEDS);
}

#[test]
fn qwen35_xml_calls() {
    let file = "qwen35-micro-q8_0.gguf";
    let engine = engine_with_template(file, llama_cpp_template("Qwen3.5-4B.jinja"));
    required_calls_parse_and_round_trip(engine, file, CallSyntax::QwenXml, MICRO_SEEDS);
}

#[test]
fn generic_calls_for_a_template_without_tools() {
    let file = "gemma2-micro-q8_0.gguf";
    let gemma = ChatTemplate::builtin("gemma", "<bos>".into(), "<eos>".into()).unwrap();
    required_calls_parse_and_round_trip(
        engine_with_template(file, gemma),
        file,
        CallSyntax::Generic,
        MICRO_SEEDS,
    );
}

#[test]
fn tool_mistakes_are_typed_errors() {
    let kind = |tools: Value, choice: Value| {
        let tools: Vec<Tool> = serde_json::from_value(tools).unwrap();
        let choice: ToolChoice = serde_json::from_value(choice).unwrap();
        ToolUse::new(tools, choice, true).map(|_| ()).map_err(|e| e.kind())
    };
    let weather = json!([{"type": "function", "function": {"name": "get_weather"}}]);
    assert_eq!(kind(weather.clone(), json!("auto")), Ok(()));
    assert_eq!(
        kind(weather.clone(), json!({"type": "function", "function": {"name": "nope"}})),
        Err("bad_tools")
    );
    assert_eq!(kind(json!([]), json!("required")), Err("bad_tools"));
    assert_eq!(
        kind(json!([{"type": "function", "function": {"name": "a b"}}]), json!("auto")),
        Err("bad_tools")
    );
    assert_eq!(
        kind(json!([{"type": "retrieval", "function": {"name": "a"}}]), json!("auto")),
        Err("bad_tools")
    );
    let twice = json!([{"function": {"name": "a"}}, {"function": {"name": "a"}}]);
    assert_eq!(kind(twice, json!("auto")), Err("bad_tools"));
    assert!(serde_json::from_value::<ToolChoice>(json!("sometimes")).is_err());
    // Tools and a response_format together are refused before anything runs.
    let engine = engine("qwen3-micro-q8_0.gguf");
    let options = TurnOptions {
        tools: ToolUse::new(tools(), ToolChoice::Auto, true).unwrap(),
        response_format: Some(inferno::grammar::GrammarSpec::JsonObject),
        ..TurnOptions::default()
    };
    let error = engine.chat_turn(&[ChatMessage::new("user", "Hi")], options, 512).unwrap_err();
    assert_eq!(error.kind(), "bad_tools");
}

#[test]
fn gemma4_calls() {
    let file = "gemma4-micro-q8_0.gguf";
    let engine = engine_with_template(file, llama_cpp_template("google-gemma-4-31B-it.jinja"));
    required_calls_parse_and_round_trip(engine, file, CallSyntax::Gemma4, MICRO_SEEDS);
}

#[test]
fn lfm2_python_calls() {
    let file = "lfm2-micro-q8_0.gguf";
    let engine = engine_with_template(file, llama_cpp_template("LFM2-8B-A1B.jinja"));
    required_calls_parse_and_round_trip(engine, file, CallSyntax::Lfm2, MICRO_SEEDS);
}

// The real models' own templates have no tool format: the generic route, end to end.

#[test]
fn smollm2_calls_by_the_generic_route() {
    let file = "SmolLM2-135M-Instruct.Q4_1.gguf";
    required_calls_parse_and_round_trip(engine(file), file, CallSyntax::Generic, REAL_SEEDS);
}

#[test]
fn gemma3_calls_by_the_generic_route() {
    let file = "gemma3-270m-q4_k_m.gguf";
    required_calls_parse_and_round_trip(engine(file), file, CallSyntax::Generic, REAL_SEEDS);
}

#[test]
fn gpt_oss_harmony_calls() {
    let file = "qwen3-micro-q8_0.gguf";
    let engine = engine_with_template(file, llama_cpp_template("openai-gpt-oss-120b.jinja"));
    required_calls_parse_and_round_trip(engine, file, CallSyntax::Harmony, MICRO_SEEDS);
}
