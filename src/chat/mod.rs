//! Turning a conversation into the prompt text a model was trained on.
//!
//! The file's own `tokenizer.chat_template` (Jinja) is rendered with minijinja plus its
//! Python-compatibility methods (`.startswith`, `.split`, `.strip`... which real templates
//! call). Files without a template get a built-in one chosen by architecture, as llama.cpp
//! does: Gemma's turn format for `gemma3`, ChatML otherwise. Built-ins are Jinja too, so one
//! renderer serves both.
//!
//! Tools reach the template as its `tools` variable, calls as the assistant messages'
//! `tool_calls` and results as `tool` messages ([`tools`]); [`reply`] reads an answer back.

mod reply;
mod tools;

use std::collections::BTreeMap;

use minijinja::syntax::SyntaxConfig;
use minijinja::value::Kwargs;
use minijinja::{Environment, Error as JinjaError, ErrorKind, Value};
use serde::{Deserialize, Serialize};

pub(crate) use reply::held_back;
pub use reply::{HARMONY_ANALYSIS, ParsedCall, REASONING_TAGS, ReasoningTags, Reply, ReplyFormat};
pub use tools::{
    CallSyntax, FunctionCall, FunctionSpec, MAX_TOOLS, Tool, ToolCall, ToolChoice, ToolUse,
    harmony_final_header,
};

use crate::gguf::Metadata;
use crate::tokenizer::Tokenizer;

#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    pub content: String,
    /// An earlier answer's reasoning, which templates that keep it render.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub reasoning_content: Option<String>,
    /// The calls an assistant message made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// Which call a `tool` message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub name: Option<String>,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.to_owned(),
            content: content.to_owned(),
            reasoning_content: None,
            tool_calls: None,
            tool_call_id: None,
            name: None,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderOptions {
    /// End with the opening of an assistant turn (for generation).
    pub add_generation_prompt: bool,
    /// Qwen3's switch for `<think>` reasoning; `None` leaves the template's default.
    pub enable_thinking: Option<bool>,
    /// How hard to reason, for templates that read `reasoning_effort` (gpt-oss's writes
    /// "Reasoning: low" into its system message); `None` leaves the template's default.
    pub reasoning_effort: Option<ReasoningEffort>,
}

/// The template variables a reasoning effort is given as.
const REASONING_EFFORT_NAMES: [&str; 2] = ["reasoning_effort", "reasoning_strength"];

/// OpenAI's `reasoning_effort`: `'low'`, `'medium'` or `'high'`.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    /// The name the request and the template use.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

impl std::str::FromStr for ReasoningEffort {
    type Err = String;

    fn from_str(text: &str) -> Result<ReasoningEffort, String> {
        match text {
            "low" => Ok(ReasoningEffort::Low),
            "medium" => Ok(ReasoningEffort::Medium),
            "high" => Ok(ReasoningEffort::High),
            other => Err(format!("reasoning_effort {other:?} is not 'low', 'medium' or 'high'")),
        }
    }
}

impl<'de> Deserialize<'de> for ReasoningEffort {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<ReasoningEffort, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

/// Where a template came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub enum TemplateSource {
    /// `tokenizer.chat_template` of the file.
    File,
    /// A built-in chosen because the file has none.
    Builtin(&'static str),
}

#[derive(Debug)]
pub enum ChatError {
    /// The template does not parse.
    Syntax(String),
    /// Rendering failed (including the template's own `raise_exception`).
    Render(String),
    BadRole(String),
    /// The tools, the tool choice or a message's calls are not usable.
    BadTools(String),
}

impl ChatError {
    /// A stable snake_case name for the kind of problem.
    pub fn kind(&self) -> &'static str {
        match self {
            ChatError::Syntax(_) => "template_syntax",
            ChatError::Render(_) => "template_render",
            ChatError::BadRole(_) => "bad_role",
            ChatError::BadTools(_) => "bad_tools",
        }
    }
}

impl std::fmt::Display for ChatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChatError::Syntax(e) => write!(f, "chat template does not parse: {e}"),
            ChatError::Render(e) => write!(f, "chat template failed: {e}"),
            ChatError::BadRole(role) => {
                write!(f, "unknown chat role {role:?} (expected system, user, assistant or tool)")
            }
            ChatError::BadTools(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ChatError {}

/// Instructions a render may execute; real templates need a few thousand per message.
const TEMPLATE_FUEL: u64 = 5_000_000;

/// The largest template accepted (the longest real ones, with tool calling, are ~20 KB).
pub const MAX_TEMPLATE_BYTES: usize = 256 * 1024;

/// Operators, filters, attribute accesses, subscripts and calls allowed in one `{{ }}` or
/// `{% %}` tag (real templates use a few dozen). minijinja limits nesting itself but compiles
/// a chain such as `a ~ a ~ …` by recursion: 5,000 links overflowed a 1 MiB stack, the size of
/// the browser's. See [`check_template_shape`].
pub const MAX_TAG_OPERATORS: usize = 256;

const CHATML: &str = "{%- for message in messages -%}\
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\
{%- endfor -%}\
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}";

/// llama.cpp's Gemma format: no system role, so system text opens the first user turn;
/// `assistant` is called `model`; contents are trimmed.
const GEMMA: &str = "{%- set ns = namespace(system='') -%}\
{%- for message in messages -%}\
{%- if message.role == 'system' -%}{%- set ns.system = ns.system + message.content | trim -%}\
{%- else -%}\
{%- set role = 'model' if message.role == 'assistant' else message.role -%}\
{{- '<start_of_turn>' + role + '\n' -}}\
{%- if ns.system and role != 'model' -%}{{- ns.system + '\n\n' -}}{%- set ns.system = '' -%}{%- endif -%}\
{{- message.content | trim + '<end_of_turn>\n' -}}\
{%- endif -%}\
{%- endfor -%}\
{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}";

pub struct ChatTemplate {
    env: Environment<'static>,
    source: TemplateSource,
    bos_token: String,
    eos_token: String,
    /// How its family writes a tool call.
    syntax: CallSyntax,
    /// The tags it writes reasoning between, if it reasons.
    thinks: Option<ReasoningTags>,
    /// It renders a system message (Gemma 2's raises an error instead).
    system_role: bool,
    /// It names the reasoning effort.
    reads_reasoning_effort: bool,
}

impl ChatTemplate {
    /// The model's template, or the built-in for its architecture.
    pub fn for_model(metadata: &Metadata, tokenizer: &Tokenizer) -> Result<ChatTemplate, ChatError> {
        let token_text = |id: Option<u32>| id.and_then(|id| tokenizer.token_str(id)).unwrap_or("").to_owned();
        let (bos, eos) = (token_text(tokenizer.bos()), token_text(tokenizer.eos()));
        match metadata.get_str("tokenizer.chat_template") {
            Some(text) => ChatTemplate::new(text, TemplateSource::File, bos, eos),
            None => {
                let name = match metadata.get_str("general.architecture") {
                    Some(arch) if arch.starts_with("gemma") => "gemma",
                    _ => "chatml",
                };
                ChatTemplate::builtin(name, bos, eos)
            }
        }
    }

    pub fn builtin(
        name: &'static str,
        bos_token: String,
        eos_token: String,
    ) -> Result<ChatTemplate, ChatError> {
        let text = match name {
            "gemma" => GEMMA,
            _ => CHATML,
        };
        ChatTemplate::new(text, TemplateSource::Builtin(name), bos_token, eos_token)
    }

    pub fn new(
        text: &str,
        source: TemplateSource,
        bos_token: String,
        eos_token: String,
    ) -> Result<ChatTemplate, ChatError> {
        check_template_shape(text)?;
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        // Hugging Face templates keep the whitespace they write except one trailing newline.
        let syntax = SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build();
        env.set_syntax(syntax.map_err(|e| ChatError::Syntax(describe(&e)))?);
        // A template is untrusted code: bound its work so a hostile one cannot hang the page.
        env.set_fuel(Some(TEMPLATE_FUEL));
        env.add_function("raise_exception", |message: String| -> Result<String, JinjaError> {
            Err(JinjaError::new(ErrorKind::InvalidOperation, message))
        });
        env.add_filter("tojson", python_tojson);
        env.add_template_owned("chat", without_generation_tags(text))
            .map_err(|e| ChatError::Syntax(describe(&e)))?;
        env.add_function("strftime_now", strftime_now);
        let syntax = CallSyntax::of_template(text);
        let thinks = REASONING_TAGS.iter().find(|(marker, _)| text.contains(marker)).map(|(_, tags)| *tags);
        let reads_reasoning_effort = REASONING_EFFORT_NAMES.iter().any(|name| text.contains(name));
        let mut template = ChatTemplate {
            env,
            source,
            bos_token,
            eos_token,
            syntax,
            thinks,
            system_role: true,
            reads_reasoning_effort,
        };
        // As llama.cpp learns it: a system message that renders (and shows) is supported.
        let probe = [ChatMessage::new("system", "<probe>"), ChatMessage::new("user", "Hi")];
        template.system_role =
            template.render(&probe, RenderOptions::default()).is_ok_and(|t| t.contains("<probe>"));
        Ok(template)
    }

    /// How the model this template is for writes a tool call.
    pub fn call_syntax(&self) -> CallSyntax {
        self.syntax
    }

    /// How to read an answer to `prompt` (rendered by this template): its reasoning apart when
    /// `split_reasoning`, its calls when `tools` are offered.
    pub fn reply_format(&self, prompt: &str, tools: Option<ToolUse>, split_reasoning: bool) -> ReplyFormat {
        let reasoning = self.thinks.filter(|_| split_reasoning);
        ReplyFormat {
            reasoning,
            opens_in_reasoning: reasoning.is_some_and(|tags| prompt.trim_end().ends_with(tags.open)),
            calls: tools.map(|tools| (self.syntax, tools)),
            harmony: self.syntax == CallSyntax::Harmony,
        }
    }

    /// Whether the template reads `reasoning_effort` (or its other name): llama.cpp's
    /// `supports_reasoning_effort`, which asks whether a render used it; here, whether the
    /// template's text names it (minijinja's list of the variables a template reads leaves out
    /// one it also sets, as Solar Open's `set reasoning_effort = reasoning_effort if …`).
    pub fn reads_reasoning_effort(&self) -> bool {
        self.reads_reasoning_effort
    }

    pub fn source(&self) -> &TemplateSource {
        &self.source
    }

    pub fn bos_token(&self) -> &str {
        &self.bos_token
    }

    pub fn render(&self, messages: &[ChatMessage], options: RenderOptions) -> Result<String, ChatError> {
        self.render_with_tools(messages, options, None)
    }

    /// Renders with `tools` offered: through the template's `tools` variable when its family
    /// has a tool format, otherwise (the generic route) described in the system prompt, with
    /// earlier calls and results written as the JSON that route answers in.
    pub fn render_with_tools(
        &self,
        messages: &[ChatMessage],
        options: RenderOptions,
        tools: Option<&ToolUse>,
    ) -> Result<String, ChatError> {
        if let Some(bad) =
            messages.iter().find(|m| !matches!(m.role.as_str(), "system" | "user" | "assistant" | "tool"))
        {
            return Err(ChatError::BadRole(bad.role.clone()));
        }
        let template = self.env.get_template("chat").map_err(|e| ChatError::Syntax(describe(&e)))?;
        let generic = self.syntax == CallSyntax::Generic;
        let mut messages = if generic {
            generic_messages(messages, tools)
        } else {
            let tools_in_system = tools.filter(|_| self.syntax == CallSyntax::Functools);
            native_messages(messages, tools_in_system, self.syntax == CallSyntax::Harmony)
        };
        if !self.system_role {
            fold_system_message(&mut messages);
        }
        let mut context = BTreeMap::new();
        context.insert("messages", Value::from(minijinja::value::Serde(&messages)));
        context.insert("add_generation_prompt", Value::from(options.add_generation_prompt));
        context.insert("bos_token", Value::from(self.bos_token.as_str()));
        context.insert("eos_token", Value::from(self.eos_token.as_str()));
        if let Some(thinking) = options.enable_thinking {
            context.insert("enable_thinking", Value::from(thinking));
        }
        if let Some(effort) = options.reasoning_effort {
            // Some templates call it the reasoning strength (muse-glimmer's); llama.cpp sets both.
            for name in REASONING_EFFORT_NAMES {
                context.insert(name, Value::from(effort.as_str()));
            }
        }
        if let Some(tools) = tools.filter(|_| !generic) {
            let mut tools = tools.template_value();
            if self.syntax == CallSyntax::Harmony {
                // gpt-oss's template adds each tool's description to a string; llama.cpp's engine
                // takes a missing one as empty there, minijinja refuses the sum.
                for function in tools.as_array_mut().into_iter().flatten().map(|tool| &mut tool["function"]) {
                    if function.get("description").is_none() {
                        function["description"] = "".into();
                    }
                }
            }
            context.insert("tools", Value::from(minijinja::value::Serde(tools)));
        }
        template.render(context).map_err(|e| ChatError::Render(describe(&e)))
    }
}

/// A leading system message moved into the next message, as llama.cpp does for templates
/// without a system role.
fn fold_system_message(messages: &mut Vec<serde_json::Value>) {
    if messages.first().is_none_or(|m| m["role"] != "system") {
        return;
    }
    let system = messages.remove(0);
    if let Some(next) = messages.first_mut() {
        let content = format!(
            "{}\n{}",
            system["content"].as_str().unwrap_or(""),
            next["content"].as_str().unwrap_or("")
        );
        next["content"] = content.into();
    }
}

/// Messages as a template with a tool format reads them: a call's arguments as an object
/// (templates write them with `tojson`), for Phi-4-mini the tools as JSON text in the
/// system message, and for gpt-oss (`harmony`) the reasoning as `thinking`, which its template
/// reads, without the content of a message that calls (the template takes one or the other
/// as the call's analysis, as llama.cpp passes them).
fn native_messages(
    messages: &[ChatMessage],
    tools_in_system: Option<&ToolUse>,
    harmony: bool,
) -> Vec<serde_json::Value> {
    let mut out: Vec<serde_json::Value> = messages
        .iter()
        .map(|message| {
            let mut value = serde_json::to_value(message).unwrap_or_default();
            if harmony && let Some(reasoning) = &message.reasoning_content {
                value["thinking"] = reasoning.as_str().into();
                if message.tool_calls.as_ref().is_some_and(|calls| !calls.is_empty())
                    && let Some(fields) = value.as_object_mut()
                {
                    fields.remove("content");
                }
            }
            if let Some(calls) = value.get_mut("tool_calls").and_then(|c| c.as_array_mut()) {
                for call in calls {
                    let arguments = &mut call["function"]["arguments"];
                    if let Some(object) = arguments.as_str().and_then(|a| serde_json::from_str(a).ok()) {
                        *arguments = object;
                    }
                }
            }
            value
        })
        .collect();
    if let Some(tools) = tools_in_system {
        if out.first().is_none_or(|m| m["role"] != "system") {
            out.insert(0, serde_json::json!({"role": "system", "content": ""}));
        }
        out[0]["tools"] = serde_json::Value::String(tools.template_value().to_string());
    }
    out
}

/// Messages for a template with no tool format: the instructions for `tools` in the system
/// prompt, calls as `{"tool_calls": [...]}` answers, results as user turns holding
/// `{"tool_response": …}` (templates such as Gemma's allow only alternating user and model).
fn generic_messages(messages: &[ChatMessage], tools: Option<&ToolUse>) -> Vec<serde_json::Value> {
    use serde_json::json;
    let mut out: Vec<serde_json::Value> = Vec::new();
    let mut after_result = false;
    for message in messages {
        let is_result = message.role == "tool";
        let value = match (message.role.as_str(), &message.tool_calls) {
            ("assistant", Some(calls)) if !calls.is_empty() => {
                let calls: Vec<_> = calls
                    .iter()
                    .map(|call| {
                        let arguments = serde_json::from_str(&call.function.arguments)
                            .unwrap_or_else(|_| serde_json::Value::String(call.function.arguments.clone()));
                        json!({"name": call.function.name, "arguments": arguments})
                    })
                    .collect();
                json!({"role": "assistant", "content": json!({"tool_calls": calls}).to_string()})
            }
            ("tool", _) => {
                let response = json!({"tool_response": {
                    "tool_call_id": message.tool_call_id, "content": message.content,
                }})
                .to_string();
                // Results of parallel calls share one turn.
                if let Some(last) = out.last_mut().filter(|_| after_result) {
                    let joined = format!("{}\n{response}", last["content"].as_str().unwrap_or(""));
                    last["content"] = joined.into();
                    continue;
                }
                json!({"role": "user", "content": response})
            }
            _ => json!({"role": message.role, "content": message.content}),
        };
        after_result = is_result;
        out.push(value);
    }
    if let Some(tools) = tools {
        let instructions = tools.generic_instructions();
        match out.first_mut().filter(|m| m["role"] == "system") {
            Some(system) => {
                let content = format!("{}\n\n{instructions}", system["content"].as_str().unwrap_or(""));
                system["content"] = content.into();
            }
            None => out.insert(0, json!({"role": "system", "content": instructions})),
        }
    }
    out
}

/// Python's `strftime` of the current date and time (templates write today's date into the
/// system prompt: gpt-oss's always, Llama 3.2's when it is defined), as llama.cpp's
/// `strftime_now`: in the browser the local time, natively UTC.
fn strftime_now(format: String) -> String {
    strftime(&format, &DateTime::now())
}

/// A calendar date and time of day.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DateTime {
    year: i64,
    /// 1 to 12.
    month: u32,
    /// 1 to 31.
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    /// 0 for Sunday to 6 for Saturday.
    weekday: u32,
}

impl DateTime {
    #[cfg(target_family = "wasm")]
    fn now() -> DateTime {
        let date = js_sys::Date::new_0();
        DateTime {
            year: date.get_full_year() as i64,
            month: date.get_month() + 1,
            day: date.get_date(),
            hour: date.get_hours(),
            minute: date.get_minutes(),
            second: date.get_seconds(),
            weekday: date.get_day(),
        }
    }

    #[cfg(not(target_family = "wasm"))]
    fn now() -> DateTime {
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs() as i64);
        DateTime::from_unix(seconds)
    }

    /// The UTC date and time `seconds` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
    #[cfg_attr(target_family = "wasm", allow(dead_code))]
    fn from_unix(seconds: i64) -> DateTime {
        let (days, in_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
        let shifted = days + 719_468; // Days since 0000-03-01.
        let era = shifted.div_euclid(146_097);
        let day_of_era = shifted.rem_euclid(146_097);
        let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
        let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
        let march_month = (5 * day_of_year + 2) / 153;
        let month = if march_month < 10 { march_month + 3 } else { march_month - 9 };
        DateTime {
            year: year_of_era + era * 400 + i64::from(month <= 2),
            month: month as u32,
            day: (day_of_year - (153 * march_month + 2) / 5 + 1) as u32,
            hour: (in_day / 3600) as u32,
            minute: (in_day / 60 % 60) as u32,
            second: (in_day % 60) as u32,
            weekday: (days + 4).rem_euclid(7) as u32, // 1970-01-01 was a Thursday.
        }
    }
}

/// `format` with C's `strftime` conversions for the date and time (in the C locale); others
/// are kept as written.
fn strftime(format: &str, time: &DateTime) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
    let month = MONTHS[(time.month as usize + 11) % 12];
    let weekday = DAYS[time.weekday as usize % 7];
    let mut out = String::with_capacity(format.len() + 16);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(conversion) = chars.next() else {
            out.push('%');
            break;
        };
        match conversion {
            'Y' => out.push_str(&time.year.to_string()),
            'y' => out.push_str(&format!("{:02}", time.year.rem_euclid(100))),
            'm' => out.push_str(&format!("{:02}", time.month)),
            'd' => out.push_str(&format!("{:02}", time.day)),
            'e' => out.push_str(&format!("{:2}", time.day)),
            'H' => out.push_str(&format!("{:02}", time.hour)),
            'I' => out.push_str(&format!("{:02}", (time.hour + 11) % 12 + 1)),
            'M' => out.push_str(&format!("{:02}", time.minute)),
            'S' => out.push_str(&format!("{:02}", time.second)),
            'p' => out.push_str(if time.hour < 12 { "AM" } else { "PM" }),
            'B' => out.push_str(month),
            'b' | 'h' => out.push_str(&month[..3]),
            'A' => out.push_str(weekday),
            'a' => out.push_str(&weekday[..3]),
            'F' => out.push_str(&format!("{}-{:02}-{:02}", time.year, time.month, time.day)),
            '%' => out.push('%'),
            other => {
                out.push('%');
                out.push(other);
            }
        }
    }
    out
}

/// Hugging Face's `tojson` (Python's `json.dumps` with `ensure_ascii=False`): `", "` and
/// `": "` between items, or `indent` spaces per level; no HTML escaping (minijinja's own
/// escapes `<` and `>`, which would garble a tool description that shows a tag).
fn python_tojson(value: Value, kwargs: Kwargs) -> Result<Value, JinjaError> {
    let indent: Option<usize> = kwargs.get("indent")?;
    kwargs.assert_all_used()?;
    let mut out = Vec::new();
    let written = match indent {
        Some(n) => {
            let spaces = vec![b' '; n];
            let formatter = serde_json::ser::PrettyFormatter::with_indent(&spaces);
            value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, formatter))
        }
        None => value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, PythonSeparators)),
    };
    written.map_err(|e| JinjaError::new(ErrorKind::InvalidOperation, e.to_string()))?;
    Ok(Value::from_safe_string(String::from_utf8(out).unwrap_or_default()))
}

/// Python's default separators: `", "` and `": "`.
struct PythonSeparators;

impl serde_json::ser::Formatter for PythonSeparators {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// Hugging Face's `{% generation %}`…`{% endgeneration %}` marks the assistant's part for
/// training masks and writes nothing (LFM2.5's templates use it; llama.cpp's engine skips it):
/// each tag becomes an empty comment with the same whitespace control.
fn without_generation_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{%") {
        let Some(len) = rest[open..].find("%}") else { break };
        let inner = &rest[open + 2..open + len];
        let name = inner.trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace());
        out.push_str(&rest[..open]);
        if name == "generation" || name == "endgeneration" {
            out.push_str(if inner.starts_with('-') { "{#-" } else { "{#" });
            out.push_str(if inner.ends_with('-') { " -#}" } else { " #}" });
        } else {
            out.push_str(&rest[open..open + len + 2]);
        }
        rest = &rest[open + len + 2..];
    }
    out.push_str(rest);
    out
}

/// Refuses a template larger than [`MAX_TEMPLATE_BYTES`] or with a tag holding more than
/// [`MAX_TAG_OPERATORS`] operator characters and operator words, counted outside string
/// literals and comments (a generous over-count: `==` counts twice, a decimal point once).
fn check_template_shape(text: &str) -> Result<(), ChatError> {
    if text.len() > MAX_TEMPLATE_BYTES {
        return Err(ChatError::Syntax(format!(
            "the template is {} bytes, larger than the {MAX_TEMPLATE_BYTES} accepted",
            text.len()
        )));
    }
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut line = 1;
    while i + 1 < bytes.len() {
        let opening = (bytes[i], bytes[i + 1]);
        if bytes[i] == b'\n' {
            line += 1;
        }
        i += 1;
        let close = match opening {
            (b'{', b'#') => {
                // A comment: skip to its end.
                let end = text[i..].find("#}").map_or(bytes.len(), |at| i + at + 2);
                line += text[i..end].matches('\n').count();
                i = end;
                continue;
            }
            (b'{', b'{') => b'}',
            (b'{', b'%') => b'%',
            _ => continue,
        };
        i += 1;
        let (mut operators, mut quote, mut word) = (0usize, None, String::new());
        while i < bytes.len() {
            let byte = bytes[i];
            if byte == b'\n' {
                line += 1;
            }
            if let Some(q) = quote {
                if byte == b'\\' {
                    i += 1; // the escaped byte
                } else if byte == q {
                    quote = None;
                }
                i += 1;
                continue;
            }
            if byte.is_ascii_alphanumeric() || byte == b'_' {
                word.push(byte as char);
                i += 1;
                continue;
            }
            if matches!(word.as_str(), "and" | "or" | "not" | "in" | "is") {
                operators += 1;
            }
            word.clear();
            if byte == close && bytes.get(i + 1) == Some(&b'}') {
                i += 2;
                break;
            }
            match byte {
                b'\'' | b'"' => quote = Some(byte),
                b'~' | b'+' | b'-' | b'*' | b'/' | b'%' | b'<' | b'>' | b'=' | b'!' | b'|' | b'.' | b'['
                | b'(' => operators += 1,
                _ => {}
            }
            if operators > MAX_TAG_OPERATORS {
                return Err(ChatError::Syntax(format!(
                    "a tag on line {line} holds more than {MAX_TAG_OPERATORS} operators, filters and \
                     accesses (the most accepted in one expression)"
                )));
            }
            i += 1;
        }
    }
    Ok(())
}

fn describe(error: &JinjaError) -> String {
    match (error.detail(), error.line()) {
        (Some(detail), Some(line)) => format!("{detail} (line {line})"),
        (Some(detail), None) => detail.to_owned(),
        (None, _) => error.to_string(),
    }
}

#[cfg(test)]
mod tests;
