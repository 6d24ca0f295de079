//! Tool calls in the OpenAI shape: the tools an app offers, how a model family spells a call
//! (found in its template, one table), and the grammar that makes a required call parse.
//!
//! Families whose template describes tools get them through the template (its `tools`
//! variable) and answer in their own syntax. Templates with no tool format (SmolLM2, Gemma 3)
//! get llama.cpp's generic route: the tools are described in the system prompt and the answer
//! is JSON, `{"tool_calls": [...]}` or `{"response": "..."}`, held to that shape by a grammar.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

use super::ChatError;
use crate::grammar::{GrammarSpec, with_json_layout};

/// The most tools one request may offer.
pub const MAX_TOOLS: usize = 128;

/// A function the model may call (`{type: 'function', function: {name, description,
/// parameters}}`).
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    #[serde(rename = "type", default = "function_kind")]
    #[cfg_attr(test, ts(optional, type = r#""function""#))]
    pub kind: String,
    pub function: FunctionSpec,
}

#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub description: Option<String>,
    /// A JSON schema of the arguments object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional, type = "Record<string, unknown>"))]
    pub parameters: Option<Value>,
}

/// A call the model made (`{id, type: 'function', function: {name, arguments}}`); `arguments`
/// is JSON text, as OpenAI sends it.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub id: Option<String>,
    #[serde(rename = "type", default = "function_kind")]
    #[cfg_attr(test, ts(optional, type = r#""function""#))]
    pub kind: String,
    pub function: FunctionCall,
}

#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    pub arguments: String,
}

fn function_kind() -> String {
    "function".to_owned()
}

/// OpenAI's `tool_choice`: `'auto'`, `'none'`, `'required'` or `{type: 'function', function:
/// {name}}`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ToolChoice {
    #[default]
    Auto,
    None,
    Required,
    Function(String),
}

impl<'de> Deserialize<'de> for ToolChoice {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ToolChoice, D::Error> {
        #[derive(Deserialize)]
        struct Named {
            name: String,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Mode(String),
            Named { function: Named },
        }
        match Wire::deserialize(deserializer)? {
            Wire::Mode(mode) => match mode.as_str() {
                "auto" => Ok(ToolChoice::Auto),
                "none" => Ok(ToolChoice::None),
                "required" => Ok(ToolChoice::Required),
                other => Err(serde::de::Error::custom(format!(
                    "tool_choice {other:?} is not 'auto', 'none', 'required' or a named function"
                ))),
            },
            Wire::Named { function } => Ok(ToolChoice::Function(function.name)),
        }
    }
}

/// How a family writes a call in its answer.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallSyntax {
    /// `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`, one block per call: Hermes 2
    /// Pro and 3, Qwen 2.5, Qwen3, MiMo-VL.
    Hermes,
    /// `<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n
    /// </tool_call>`: Qwen3.5, Qwen3-Coder, Nemotron Nano 3.
    QwenXml,
    /// `{"name": …, "parameters": {…}}` as the whole answer: Llama 3.1 to 3.3.
    LlamaJson,
    /// `functools[{"name": …, "arguments": {…}}, …]`: Phi-4-mini, whose template takes the tools
    /// as JSON text in the system message's `tools` field.
    Functools,
    /// `<|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>`: Gemma 4.
    Gemma4,
    /// `<|tool_call_start|>[NAME(key="text", n=1), …]<|tool_call_end|>`, Python's call syntax
    /// and literals (JSON's `true`, `false`, `null` too): LFM2, LFM2.5.
    Lfm2,
    /// gpt-oss's harmony format: an answer is a series of messages, each a header, then
    /// `<|message|>` and its text; reasoning is in the `analysis` channel, a call is a message
    /// to `functions.NAME` holding the arguments' JSON, one call per answer:
    /// `<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{…}`.
    Harmony,
    /// `{"tool_calls": [{"name": …, "arguments": {…}}]}` or `{"response": "…"}`, under a grammar:
    /// every template without a tool format of its own.
    Generic,
}

/// A marker (a call tag, harmony's channel and message markers) in a Lark grammar: the control
/// token where the vocabulary has it as one (llguidance's `<…>`), else its text quoted.
fn lark_marker(text: &str, is_control: impl Fn(&str) -> bool) -> String {
    if is_control(text) { text.to_owned() } else { quoted(text) }
}

/// A harmony answer's final message header, as a Lark sequence: what a structured answer
/// (`response_format`) writes before its JSON, so that it is read as the content while it
/// streams (llama.cpp's gpt-oss parser allows `<|constrain|>json` there too; the template never
/// writes it, and neither do we).
pub fn harmony_final_header(is_control: impl Fn(&str) -> bool) -> String {
    let [channel, message] = ["<|channel|>", "<|message|>"].map(|text| lark_marker(text, &is_control));
    format!("{channel} \"final\" {message}")
}

/// What in a template's text says which syntax its family uses, most specific first (as
/// llama.cpp's `common_chat_try_specialized_template` tells them apart). A template must also
/// mention `tools`.
const NATIVE_SYNTAX: &[(CallSyntax, &[&str])] = &[
    (CallSyntax::Harmony, &["<|channel|>", "<|start|>assistant to="]),
    (CallSyntax::Gemma4, &["'<|tool_call>call:'"]),
    (CallSyntax::Lfm2, &["<|tool_list_start|>", "<|tool_list_end|>"]),
    (CallSyntax::Lfm2, &["List of tools: ["]),
    (CallSyntax::QwenXml, &["<tool_call>", "<function=", "<parameter="]),
    (CallSyntax::Hermes, &["<tool_call>"]),
    (CallSyntax::LlamaJson, &["dictionary of argument name and its value"]),
    (CallSyntax::Functools, &["<|tool|>"]),
];

impl CallSyntax {
    /// The tags around each call, for the families that write calls in tagged blocks.
    pub fn call_tags(self) -> Option<(&'static str, &'static str)> {
        match self {
            CallSyntax::Hermes | CallSyntax::QwenXml => Some(("<tool_call>", "</tool_call>")),
            CallSyntax::Gemma4 => Some(("<|tool_call>", "<tool_call|>")),
            CallSyntax::Lfm2 => Some(("<|tool_call_start|>", "<|tool_call_end|>")),
            _ => None,
        }
    }

    /// Whether a call's opening tag ends the reasoning before it (llama.cpp's Qwen3.5 parser);
    /// LFM2's parser reads reasoning up to its closing tag, calls' tags included.
    pub fn call_ends_reasoning(self) -> bool {
        self != CallSyntax::Lfm2
    }

    /// The syntax of the family whose template this is.
    pub fn of_template(text: &str) -> CallSyntax {
        if !text.contains("tools") {
            return CallSyntax::Generic;
        }
        NATIVE_SYNTAX
            .iter()
            .find(|(_, markers)| markers.iter().all(|marker| text.contains(marker)))
            .map_or(CallSyntax::Generic, |(syntax, _)| *syntax)
    }
}

/// The tools of one request, checked, with its choice and whether several calls may come.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolUse {
    /// The tools the model is told of (for a named choice, that one).
    pub tools: Vec<Tool>,
    /// A call must come (`required` or a named function).
    pub required: bool,
    pub parallel: bool,
}

impl ToolUse {
    /// `None` when no tool is offered or the choice is `none`: the answer is then text only.
    pub fn new(tools: Vec<Tool>, choice: ToolChoice, parallel: bool) -> Result<Option<ToolUse>, ChatError> {
        if tools.len() > MAX_TOOLS {
            return Err(bad(format!(
                "{} tools were offered, more than the {MAX_TOOLS} accepted",
                tools.len()
            )));
        }
        for (i, tool) in tools.iter().enumerate() {
            check_tool(tool).map_err(|why| bad(format!("tools[{i}]: {why}")))?;
            if tools[..i].iter().any(|t| t.function.name == tool.function.name) {
                return Err(bad(format!("tools[{i}]: a second tool named {:?}", tool.function.name)));
            }
        }
        let (tools, required) = match choice {
            ToolChoice::None => return Ok(None),
            _ if tools.is_empty() => {
                if choice != ToolChoice::Auto {
                    return Err(bad("tool_choice asks for a call but no tools were given".into()));
                }
                return Ok(None);
            }
            ToolChoice::Auto => (tools, false),
            ToolChoice::Required => (tools, true),
            ToolChoice::Function(name) => match tools.into_iter().find(|t| t.function.name == name) {
                Some(tool) => (vec![tool], true),
                None => return Err(bad(format!("tool_choice names {name:?}, which is not among the tools"))),
            },
        };
        Ok(Some(ToolUse { tools, required, parallel }))
    }

    /// The tools as the template's `tools` variable sees them.
    pub fn template_value(&self) -> Value {
        serde_json::to_value(&self.tools).unwrap_or(Value::Null)
    }

    /// The schema of one call `{"name": …, <arguments_key>: {…}}`, one branch per tool.
    fn call_schema(&self, arguments_key: &str) -> Value {
        let branches: Vec<Value> = self
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "object",
                    "properties": {
                        "name": {"const": tool.function.name},
                        arguments_key: parameters_schema(tool),
                    },
                    "required": ["name", arguments_key],
                    "additionalProperties": false,
                })
            })
            .collect();
        match branches.len() {
            1 => branches.into_iter().next().unwrap_or(Value::Null),
            _ => json!({ "anyOf": branches }),
        }
    }

    /// The generic route's answer schema: calls, or (unless a call is required) a reply.
    fn generic_schema(&self) -> Value {
        let mut calls = json!({"type": "array", "items": self.call_schema("arguments"), "minItems": 1});
        if !self.parallel {
            calls["maxItems"] = json!(1);
        }
        let calls = json!({
            "type": "object",
            "properties": {"tool_calls": calls},
            "required": ["tool_calls"],
            "additionalProperties": false,
        });
        if self.required {
            return calls;
        }
        let reply = json!({
            "type": "object",
            "properties": {"response": {"type": "string"}},
            "required": ["response"],
            "additionalProperties": false,
        });
        json!({"anyOf": [calls, reply]})
    }

    /// What the answer must follow: always on the generic route; for a family's own syntax only
    /// when a call is required (otherwise the model may answer in text, and its calls are
    /// parsed as they come). `is_control` says which marker texts are control tokens of the
    /// model's vocabulary: the grammar names those as tokens (llguidance's `<|…|>`), since a
    /// quoted string matches only text tokens, which would make the model spell the marker out.
    pub fn grammar(&self, syntax: CallSyntax, is_control: impl Fn(&str) -> bool) -> Option<GrammarSpec> {
        if syntax == CallSyntax::Generic {
            return Some(GrammarSpec::JsonSchema(self.generic_schema()));
        }
        if !self.required {
            return None;
        }
        let repeat = if self.parallel { "*" } else { "" };
        // The family's call tags, as tokens where they are control tokens.
        let [open, close] = syntax.call_tags().map_or([String::new(), String::new()], |(open, close)| {
            [open, close].map(|tag| lark_marker(tag, &is_control))
        });
        let lark = match syntax {
            CallSyntax::Hermes => format!(
                "start: call (\"\\n\" call){repeat}\ncall: {open} \"\\n\" json \"\\n\" {close}\njson: %json {}\n",
                with_json_layout(self.call_schema("arguments"))
            ),
            CallSyntax::LlamaJson => {
                return Some(GrammarSpec::JsonSchema(self.call_schema("parameters")));
            }
            CallSyntax::Functools => {
                let mut list =
                    json!({"type": "array", "items": self.call_schema("arguments"), "minItems": 1});
                if !self.parallel {
                    list["maxItems"] = json!(1);
                }
                format!("start: \"functools\" list\nlist: %json {}\n", with_json_layout(list))
            }
            CallSyntax::QwenXml => self.qwen_xml_grammar(repeat, [&open, &close]),
            CallSyntax::Gemma4 => self.gemma4_grammar(repeat, [&open, &close]),
            CallSyntax::Lfm2 => self.lfm2_grammar([&open, &close]),
            CallSyntax::Harmony => self.harmony_grammar(is_control),
            CallSyntax::Generic => unreachable!("handled above"),
        };
        Some(GrammarSpec::Lark(lark))
    }

    /// Each function as `<function=NAME>` and its parameters in the schema's order, the
    /// required ones always; a string value is free text up to its closing tag (a lazy rule
    /// whose suffix is that tag), any other a JSON value of its schema.
    fn qwen_xml_grammar(&self, repeat: &str, [open, close]: [&str; 2]) -> String {
        let mut values = String::new();
        let mut functions = Vec::new();
        for (t, tool) in self.tools.iter().enumerate() {
            let mut body = quoted(&format!("<function={}>\n", tool.function.name));
            let schema = parameters_schema(tool);
            let required: Vec<&str> = schema["required"]
                .as_array()
                .map(|list| list.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for (p, (key, property)) in schema["properties"].as_object().into_iter().flatten().enumerate() {
                let rule = format!("p{t}_{p}");
                let close = quoted("\n</parameter>\n");
                if let Some(choices) = property["enum"].as_array().filter(|_| property["type"] == "string") {
                    let choices: Vec<String> = choices.iter().filter_map(Value::as_str).map(quoted).collect();
                    values.push_str(&format!("{rule}: ({}) {close}\n", choices.join(" | ")));
                } else if property["type"] == "string" {
                    match property["maxLength"].as_u64() {
                        Some(most) => values.push_str(&format!("{rule}: /(?s:.{{0,{most}}})/ {close}\n")),
                        None => values.push_str(&format!("{rule}[suffix={close}]: /(?s:.*)/\n")),
                    }
                } else {
                    values.push_str(&format!(
                        "{rule}: {rule}_json \"\\n</parameter>\\n\"\n{rule}_json: %json {}\n",
                        with_json_layout(property.clone())
                    ));
                }
                let part = format!("{} {rule}", quoted(&format!("<parameter={key}>\n")));
                if required.contains(&key.as_str()) {
                    body.push_str(&format!(" {part}"));
                } else {
                    body.push_str(&format!(" ({part})?"));
                }
            }
            body.push_str(" \"</function>\\n\"");
            functions.push(body);
        }
        format!(
            "start: call (\"\\n\" call){repeat}\ncall: {open} \"\\n\" function {close}\n\
             function: {}\n{values}",
            functions.join(" | ")
        )
    }

    /// Gemma 4's calls: a function's name, then its arguments in Gemma's syntax (bare keys,
    /// strings between `<|"|>` quotes): the parameters in the schema's order, the required
    /// ones always, each value of its type (strings within `maxLength`, enums as their
    /// values); a parameter of another type takes any value of the syntax.
    fn gemma4_grammar(&self, repeat: &str, [open, close]: [&str; 2]) -> String {
        let quote = quoted("<|\"|>");
        let more = if repeat.is_empty() { "" } else { " call*" };
        let mut rules = format!(
            "start: call{more}\n\
             call: {open} \"call:\" function {close}\n\
             dict: \"{{\" (pair (\",\" pair)*)? \"}}\"\n\
             pair: KEY \":\" value\n\
             list: \"[\" (value (\",\" value)*)? \"]\"\n\
             value: {quote} TEXT {quote} | NUMBER | \"true\" | \"false\" | \"null\" | dict | list\n\
             KEY: /[A-Za-z_][A-Za-z0-9_]{{0,63}}/\n\
             TEXT: /[^<]{{0,200}}/\n\
             INTEGER: /-?(0|[1-9][0-9]{{0,15}})/\n\
             NUMBER: /-?(0|[1-9][0-9]{{0,15}})(\\.[0-9]{{1,15}})?([eE][-+]?[0-9]{{1,3}})?/\n"
        );
        let value = |_: usize, _: usize, property: &Value| match (
            property["type"].as_str(),
            property["enum"].as_array(),
        ) {
            (_, Some(choices)) => choices
                .iter()
                .map(|choice| match choice {
                    Value::String(text) => format!("{quote} {} {quote}", quoted(text)),
                    other => quoted(&other.to_string()),
                })
                .collect::<Vec<_>>()
                .join(" | "),
            (Some("string"), None) => match property["maxLength"].as_u64() {
                Some(most) => format!("{quote} /[^<]{{0,{most}}}/ {quote}"),
                None => format!("{quote} TEXT {quote}"),
            },
            (Some("integer"), None) => "INTEGER".to_owned(),
            (Some("number"), None) => "NUMBER".to_owned(),
            (Some("boolean"), None) => "\"true\" | \"false\"".to_owned(),
            _ => "value".to_owned(),
        };
        let functions = self.keyword_arguments(&mut rules, (":", ","), ("{", "}"), value);
        rules.push_str(&format!("function: {}\n", functions.join(" | ")));
        rules
    }

    /// LFM2's `<|tool_call_start|>[NAME(key=value, …), …]<|tool_call_end|>`, each value a JSON
    /// value of its parameter's schema (JSON's strings and literals are what llama.cpp's LFM2
    /// parser reads too).
    fn lfm2_grammar(&self, [open, close]: [&str; 2]) -> String {
        let (mut rules, mut values) = (String::new(), String::new());
        let value = |t: usize, i: usize, property: &Value| {
            values.push_str(&format!("v{t}_{i}: %json {}\n", with_json_layout(property.clone())));
            format!("v{t}_{i}")
        };
        let functions = self.keyword_arguments(&mut rules, ("=", ", "), ("(", ")"), value);
        let calls = if self.parallel { "function (\", \" function)*" } else { "function" };
        format!(
            "start: {open} \"[\" {calls} \"]\" {close}\n{rules}{values}function: {}\n",
            functions.join(" | ")
        )
    }

    /// Each function as `NAME` then its arguments between `open` and `close`: `key`, `assign`,
    /// then its value's rule (`value(tool, parameter, schema)`), `separator` between them, the
    /// required parameters always, in the schema's order. The rules go into `rules`; the
    /// functions' alternatives come back.
    fn keyword_arguments(
        &self,
        rules: &mut String,
        (assign, separator): (&str, &str),
        (open, close): (&str, &str),
        mut value: impl FnMut(usize, usize, &Value) -> String,
    ) -> Vec<String> {
        let mut functions = Vec::new();
        for (t, tool) in self.tools.iter().enumerate() {
            let schema = parameters_schema(tool);
            let required: Vec<&str> = schema["required"]
                .as_array()
                .map(|list| list.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let properties: Vec<(&String, &Value)> =
                schema["properties"].as_object().into_iter().flatten().collect();
            // s{t}_{i}_first: parameters i.. with none written yet; _more: after one (a comma).
            let n = properties.len();
            rules.push_str(&format!("s{t}_{n}_first: \"\"\ns{t}_{n}_more: \"\"\n"));
            for (i, (key, property)) in properties.iter().enumerate().rev() {
                let value = value(t, i, property);
                rules.push_str(&format!("p{t}_{i}: {} {} ({value})\n", quoted(key), quoted(assign)));
                let next = i + 1;
                let comma = quoted(separator);
                if required.contains(&key.as_str()) {
                    rules.push_str(&format!(
                        "s{t}_{i}_first: p{t}_{i} s{t}_{next}_more\ns{t}_{i}_more: {comma} p{t}_{i} s{t}_{next}_more\n"
                    ));
                } else {
                    rules.push_str(&format!(
                        "s{t}_{i}_first: p{t}_{i} s{t}_{next}_more | s{t}_{next}_first\n\
                         s{t}_{i}_more: {comma} p{t}_{i} s{t}_{next}_more | s{t}_{next}_more\n"
                    ));
                }
            }
            functions.push(format!(
                "{} {} s{t}_0_first {}",
                quoted(&tool.function.name),
                quoted(open),
                quoted(close)
            ));
        }
        functions
    }

    /// gpt-oss's call as its template writes one, after the prompt's `<|start|>assistant`: the
    /// recipient in the role's part of the header, then the arguments' JSON by the function's
    /// schema. The answer starts at the call, without an analysis message first: as for the
    /// other families, whose required calls are asked for with their thinking off.
    fn harmony_grammar(&self, is_control: impl Fn(&str) -> bool) -> String {
        let [channel, message] = ["<|channel|>", "<|message|>"].map(|text| lark_marker(text, &is_control));
        let (mut functions, mut arguments) = (Vec::new(), String::new());
        for (t, tool) in self.tools.iter().enumerate() {
            let name = quoted(&tool.function.name);
            functions.push(format!("{name} {channel} \"commentary json\" {message} a{t}"));
            arguments.push_str(&format!("a{t}: %json {}\n", with_json_layout(parameters_schema(tool))));
        }
        format!("start: \" to=functions.\" function\nfunction: {}\n{arguments}", functions.join(" | "))
    }

    /// The generic route's instructions, added to the system prompt.
    pub fn generic_instructions(&self) -> String {
        let tools: Vec<Value> = self
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.function.name,
                    "description": tool.function.description.clone().unwrap_or_default(),
                    "parameters": parameters_schema(tool),
                })
            })
            .collect();
        let list = serde_json::to_string_pretty(&tools).unwrap_or_default();
        let reply = if self.required {
            "You must call a tool: answer with {\"tool_calls\": [{\"name\": ..., \"arguments\": {...}}]}."
        } else {
            "To call tools, answer with {\"tool_calls\": [{\"name\": ..., \"arguments\": {...}}]}. \
             To answer the user instead, answer with {\"response\": \"...\"}. A tool's result comes \
             back as {\"tool_response\": ...}: answer the user with what it says, as a response, \
             unless another call is needed."
        };
        format!("You can call these tools:\n{list}\n\nAnswer in JSON. {reply}")
    }
}

/// `text` as a Lark string literal (JSON's escapes are Lark's).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// A tool's parameters schema, an empty object's when it has none. Arguments hold only the
/// parameters described unless the schema says otherwise (OpenAI's strict mode): JSON schema's
/// default admits any other key, and a model unsure what comes next writes one forever.
fn parameters_schema(tool: &Tool) -> Value {
    let mut schema =
        tool.function.parameters.clone().unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    if let Some(object) = schema.as_object_mut()
        && !object.contains_key("additionalProperties")
    {
        object.insert("additionalProperties".into(), Value::Bool(false));
    }
    schema
}

/// OpenAI's rule for function names (it also keeps them out of the grammars' syntax).
fn check_tool(tool: &Tool) -> Result<(), String> {
    if tool.kind != "function" {
        return Err(format!("type {:?} is not 'function'", tool.kind));
    }
    let name = &tool.function.name;
    let fine = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.';
    if name.is_empty() || name.len() > 64 || !name.chars().all(fine) {
        return Err(format!("the name {name:?} is not 1 to 64 letters, digits, '_', '-' or '.'"));
    }
    match &tool.function.parameters {
        None | Some(Value::Object(_)) => Ok(()),
        Some(_) => Err("parameters must be a JSON schema object".into()),
    }
}

fn bad(message: String) -> ChatError {
    ChatError::BadTools(message)
}
