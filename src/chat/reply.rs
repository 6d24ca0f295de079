//! Reading an answer back into an OpenAI message: the reasoning apart from the content, and the
//! calls in the family's syntax. While an answer streams it is read as far as it goes, and each
//! field is then a prefix of what it will finally be (text that may begin a tag is held back),
//! so a client can send the growth of each as a delta.

use serde::Serialize;
use serde_json::Value;

use super::tools::{CallSyntax, ToolUse};

const FUNCTOOLS_OPEN: &str = "functools[";
const PYTHON_TAG: &str = "<|python_tag|>";
/// Gemma 4's string quotes in its call arguments.
const GEMMA_QUOTE: &str = "<|\"|>";

/// The tags a family writes its reasoning between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReasoningTags {
    pub open: &'static str,
    pub close: &'static str,
}

/// gpt-oss's reasoning: its `analysis` channel's messages (see [`CallSyntax::Harmony`]).
pub const HARMONY_ANALYSIS: ReasoningTags =
    ReasoningTags { open: "<|channel|>analysis<|message|>", close: HARMONY_END };

/// What in a template's text says how its family writes reasoning (one table, as for calls).
pub const REASONING_TAGS: &[(&str, ReasoningTags)] = &[
    ("<think>", ReasoningTags { open: "<think>", close: "</think>" }),
    ("<|channel>", ReasoningTags { open: "<|channel>thought", close: "<channel|>" }),
    ("<|channel|>analysis<|message|>", HARMONY_ANALYSIS),
];

/// Harmony's markers: a header ends at `<|message|>`, a message at `<|end|>` (its last one at
/// `<|return|>` or `<|call|>`, which end the generation and are not in its text), and the next
/// message begins with `<|start|>` and its role.
const HARMONY_MESSAGE: &str = "<|message|>";
const HARMONY_END: &str = "<|end|>";
const HARMONY_START: &str = "<|start|>";
const HARMONY_CHANNEL: &str = "<|channel|>";
/// The role of every message an answer holds (the prompt wrote the first one's).
const HARMONY_ROLE: &str = "assistant";

/// How one answer is to be read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplyFormat {
    /// The tags of the template's reasoning, when the app wants it apart.
    pub reasoning: Option<ReasoningTags>,
    /// The prompt already opened the reasoning (it ends in the opening tag).
    pub opens_in_reasoning: bool,
    pub calls: Option<(CallSyntax, ToolUse)>,
    /// The answer is a series of harmony messages (gpt-oss), read as such even when neither
    /// reasoning nor calls are wanted apart: their headers are never content.
    pub harmony: bool,
}

/// An answer as an OpenAI assistant message.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Reply {
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    pub tool_calls: Vec<ParsedCall>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ParsedCall {
    pub name: String,
    /// JSON text of the arguments object (while streaming, a prefix of it).
    pub arguments: String,
}

impl ReplyFormat {
    /// Whether an answer needs reading at all (otherwise its text is its content).
    pub fn is_structured(&self) -> bool {
        self.reasoning.is_some() || self.calls.is_some() || self.harmony
    }

    /// Reads `text`; `partial` while more may follow.
    pub fn parse(&self, text: &str, partial: bool) -> Reply {
        if self.harmony {
            return self.harmony_reply(text, partial);
        }
        let (reasoning_content, body) = self.split_reasoning(text, partial);
        let (content, mut tool_calls) = match &self.calls {
            None => (body.to_owned(), Vec::new()),
            Some((syntax, tools)) => {
                let tags = syntax.call_tags().unwrap_or(("", ""));
                let (content, calls) = match syntax {
                    CallSyntax::Hermes => tagged_calls(body, partial, tags, |block, complete| {
                        json_call(block.trim(), partial && !complete).map(|call| vec![call])
                    }),
                    CallSyntax::QwenXml => tagged_calls(body, partial, tags, |block, complete| {
                        xml_call(block, complete, tools).map(|call| vec![call])
                    }),
                    CallSyntax::Gemma4 => tagged_calls(body, partial, tags, |block, complete| {
                        gemma_call(block, complete).map(|call| vec![call])
                    }),
                    CallSyntax::Lfm2 => tagged_calls(body, partial, tags, python_calls),
                    CallSyntax::LlamaJson => llama_calls(body, partial),
                    CallSyntax::Functools => functools_calls(body, partial),
                    CallSyntax::Generic => generic_reply(body, partial),
                    CallSyntax::Harmony => unreachable!("harmony answers are read message by message"),
                };
                (content, calls)
            }
        };
        if let Some((_, tools)) = &self.calls
            && !tools.parallel
        {
            tool_calls.truncate(1);
        }
        Reply { content: content.trim().to_owned(), reasoning_content, tool_calls }
    }

    fn split_reasoning<'a>(&self, text: &'a str, partial: bool) -> (Option<String>, &'a str) {
        let Some(tags) = self.reasoning else {
            return (None, text);
        };
        let start = text.trim_start();
        let inner = if self.opens_in_reasoning {
            text
        } else if let Some(rest) = start.strip_prefix(tags.open) {
            rest
        } else {
            if partial && tags.open.starts_with(start) {
                return (None, ""); // It may yet open.
            }
            return (None, text);
        };
        // A tagged tool call also ends the reasoning (llama.cpp reads Qwen3.5's so), whichever
        // of the two comes first; LFM2's reasoning runs to its closing tag.
        let call_open = self
            .calls
            .as_ref()
            .filter(|(syntax, _)| syntax.call_ends_reasoning())
            .and_then(|(syntax, _)| syntax.call_tags())
            .map(|(open, _)| open);
        let call_at = call_open.and_then(|open| inner.find(open));
        match (inner.find(tags.close), call_at) {
            (Some(close), call) if call.is_none_or(|call| close < call) => {
                return (Some(inner[..close].trim().to_owned()), &inner[close + tags.close.len()..]);
            }
            (_, Some(call)) => return (Some(inner[..call].trim().to_owned()), &inner[call..]),
            _ => {}
        }
        let mut reasoning = inner;
        if partial {
            reasoning = held_back(reasoning, tags.close);
            if let Some(open) = call_open {
                reasoning = held_back(reasoning, open);
            }
        }
        (Some(reasoning.trim().to_owned()), "")
    }
}

/// What a harmony message is, by its header.
#[derive(Debug, PartialEq)]
enum HarmonyMessage<'a> {
    /// The `analysis` channel: reasoning.
    Analysis,
    /// For the user: the `final` channel, or a `commentary` preamble before a call.
    Text,
    /// To `functions.NAME`: a call.
    Call(&'a str),
    /// To anything else (a built-in tool such as `python` or `container.exec`): nothing
    /// llama.cpp shows, and neither do we.
    Elsewhere,
}

impl HarmonyMessage<'_> {
    /// Reads a header, such as `<|channel|>final`, ` to=functions.f<|channel|>commentary json`
    /// (the recipient in the role's part) or `<|channel|>commentary to=functions.f
    /// <|constrain|>json` (in the channel's). gpt-oss sometimes writes a stray
    /// `<|channel|>commentary to=assistant` before the real channel: the last channel counts,
    /// and a message to the assistant is no call.
    fn of_header(header: &str) -> HarmonyMessage<'_> {
        let word = |text: &str| -> usize {
            text.find(|c: char| c.is_whitespace() || c == '<').unwrap_or(text.len())
        };
        let recipient = header
            .match_indices(" to=")
            .map(|(at, marker)| {
                let name = &header[at + marker.len()..];
                &name[..word(name)]
            })
            .filter(|name| *name != HARMONY_ROLE)
            .last();
        if let Some(recipient) = recipient {
            return match recipient.strip_prefix("functions.") {
                Some(name) => HarmonyMessage::Call(name),
                None => HarmonyMessage::Elsewhere,
            };
        }
        let channel = header.rfind(HARMONY_CHANNEL).map(|at| &header[at + HARMONY_CHANNEL.len()..]);
        match channel.map(|channel| &channel[..word(channel)]) {
            Some("analysis") => HarmonyMessage::Analysis,
            _ => HarmonyMessage::Text,
        }
    }
}

impl ReplyFormat {
    /// A harmony answer, message by message. The prompt ends in `<|start|>assistant`, so the
    /// answer begins with the first message's header (or, when the prompt opened the analysis,
    /// inside it); a message is read once its header is whole. Reasoning and content are each
    /// the messages' texts joined, as llama.cpp joins them; reasoning not wanted apart is content
    /// with its header and tags, as llama.cpp writes it. While streaming, an ending that may
    /// begin `<|end|>` is held back.
    fn harmony_reply(&self, text: &str, partial: bool) -> Reply {
        let (mut content, mut reasoning, mut calls) = (String::new(), String::new(), Vec::new());
        let mut opened = self.opens_in_reasoning.then_some(HARMONY_CHANNEL.to_owned() + "analysis");
        let mut rest = text;
        loop {
            let header = match opened.take() {
                Some(header) => header,
                None => {
                    let Some(at) = rest.find(HARMONY_MESSAGE) else {
                        // A header still being written; at the end, text that is no message.
                        if !partial {
                            content.push_str(rest);
                        }
                        break;
                    };
                    let header = rest[..at].to_owned();
                    rest = &rest[at + HARMONY_MESSAGE.len()..];
                    header
                }
            };
            let (body, closed) = match rest.find(HARMONY_END) {
                Some(end) => {
                    let body = &rest[..end];
                    rest = &rest[end + HARMONY_END.len()..];
                    (body, true)
                }
                None => (if partial { held_back(rest, HARMONY_END) } else { rest }, false),
            };
            match HarmonyMessage::of_header(&header) {
                HarmonyMessage::Analysis if self.reasoning.is_some() => reasoning.push_str(body),
                HarmonyMessage::Analysis => {
                    content.push_str(&header);
                    content.push_str(HARMONY_MESSAGE);
                    content.push_str(body);
                    if closed {
                        content.push_str(HARMONY_END);
                    }
                }
                HarmonyMessage::Text => content.push_str(body),
                HarmonyMessage::Call(name) => {
                    let offered = self
                        .calls
                        .as_ref()
                        .is_some_and(|(_, tools)| tools.tools.iter().any(|tool| tool.function.name == name));
                    let arguments = body.trim();
                    let readable = (partial && !closed)
                        || serde_json::from_str::<Value>(arguments).is_ok_and(|value| value.is_object());
                    match (offered, readable) {
                        (true, true) => {
                            calls.push(ParsedCall { name: name.to_owned(), arguments: arguments.to_owned() })
                        }
                        // Arguments that are no object (cut off, at the end): text, as elsewhere.
                        (true, false) => content.push_str(body),
                        (false, _) => {}
                    }
                }
                HarmonyMessage::Elsewhere => {}
            }
            if !closed {
                break;
            }
            let next = rest.strip_prefix(HARMONY_START).unwrap_or(rest);
            rest = next.strip_prefix(HARMONY_ROLE).unwrap_or(next);
        }
        if let Some((_, tools)) = &self.calls
            && !tools.parallel
        {
            calls.truncate(1);
        }
        let reasoning = reasoning.trim();
        Reply {
            content: content.trim().to_owned(),
            reasoning_content: (!reasoning.is_empty()).then(|| reasoning.to_owned()),
            tool_calls: calls,
        }
    }
}

/// `text` less an ending that could be the start of `marker`.
pub(crate) fn held_back<'a>(text: &'a str, marker: &str) -> &'a str {
    for n in (1..marker.len().min(text.len() + 1)).rev() {
        if text.ends_with(&marker[..n]) {
            return &text[..text.len() - n];
        }
    }
    text
}

/// Calls in tagged blocks (`<tool_call>…</tool_call>` for Hermes and Qwen's XML, Gemma 4's
/// `<|tool_call>…<tool_call|>`), the text around them as content. `read(block, complete)`
/// reads one block's inside.
fn tagged_calls(
    body: &str,
    partial: bool,
    (open, close): (&str, &str),
    read: impl Fn(&str, bool) -> Option<Vec<ParsedCall>>,
) -> (String, Vec<ParsedCall>) {
    let (mut content, mut calls, mut rest) = (String::new(), Vec::new(), body);
    loop {
        let Some(at) = rest.find(open) else {
            content.push_str(if partial { held_back(rest, open) } else { rest });
            break;
        };
        content.push_str(&rest[..at]);
        let inside = &rest[at + open.len()..];
        match inside.find(close) {
            Some(end) => {
                match read(&inside[..end], true) {
                    Some(read) => calls.extend(read),
                    None => content.push_str(&rest[at..at + open.len() + end + close.len()]),
                }
                rest = &inside[end + close.len()..];
            }
            None => {
                let block = if partial { held_back(inside, close) } else { inside };
                match read(block, false) {
                    Some(read) => calls.extend(read),
                    // Cut off before it could be read: streaming, wait; at the end, it is text.
                    None if !partial => content.push_str(&rest[at..]),
                    None => {}
                }
                break;
            }
        }
    }
    (content, calls)
}

/// `{"name": …, "arguments": {…}}` (or `"parameters"`); `open` when it may be cut off.
fn json_call(text: &str, open: bool) -> Option<ParsedCall> {
    let fields = object_fields(text)?;
    let name = fields.iter().find(|f| f.key == "name" && f.complete)?;
    let name: String = serde_json::from_str(name.raw).ok()?;
    let arguments = fields.iter().find(|f| f.key == "arguments" || f.key == "parameters");
    let arguments = match arguments {
        Some(field) if field.complete => arguments_text(field.raw)?,
        Some(field) if open && field.raw.starts_with('{') => field.raw.to_owned(),
        Some(_) if open => String::new(),
        None if open => String::new(),
        _ => return None,
    };
    if !open && serde_json::from_str::<Value>(&arguments).map_or(true, |v| !v.is_object()) {
        return None;
    }
    Some(ParsedCall { name, arguments })
}

/// A complete arguments value as JSON text: an object as written, a string holding JSON as
/// the JSON it holds.
fn arguments_text(raw: &str) -> Option<String> {
    if raw.starts_with('"') {
        let inner: String = serde_json::from_str(raw).ok()?;
        return serde_json::from_str::<Value>(&inner).ok().filter(Value::is_object).map(|_| inner);
    }
    Some(raw.to_owned())
}

/// Qwen's `<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n…</function>`, its values
/// typed by the tool's schema: a string parameter's value is the text, any other's is JSON.
fn xml_call(block: &str, complete: bool, tools: &ToolUse) -> Option<ParsedCall> {
    const FUNCTION: &str = "<function=";
    const PARAMETER: &str = "<parameter=";
    const PARAMETER_CLOSE: &str = "\n</parameter>";
    let after = &block[block.find(FUNCTION)? + FUNCTION.len()..];
    let name_end = after.find('>')?;
    let name = after[..name_end].trim().to_owned();
    let schema =
        tools.tools.iter().find(|t| t.function.name == name).and_then(|t| t.function.parameters.as_ref());
    let is_string = |key: &str| {
        schema.is_some_and(|s| s["properties"][key]["type"] == "string")
            || schema.is_none_or(|s| s["properties"].get(key).is_none())
    };
    let mut pairs = Vec::new();
    // The parameters end where the function does (or, cut off, where the text does).
    let body = &after[name_end + 1..];
    let function_end = body.find("</function>");
    let mut rest = &body[..function_end.unwrap_or(body.len())];
    let mut open_value = None;
    while let Some(at) = rest.find(PARAMETER) {
        let tag = &rest[at + PARAMETER.len()..];
        let Some(key_end) = tag.find('>') else { break };
        let key = tag[..key_end].trim();
        let value = tag[key_end + 1..].strip_prefix('\n').unwrap_or(&tag[key_end + 1..]);
        match value.find(PARAMETER_CLOSE) {
            Some(end) => {
                let text = &value[..end];
                let json = if is_string(key) {
                    Value::String(text.to_owned())
                } else {
                    serde_json::from_str(text.trim()).unwrap_or_else(|_| Value::String(text.to_owned()))
                };
                pairs.push(format!("{}: {json}", Value::String(key.to_owned())));
                rest = &value[end + PARAMETER_CLOSE.len()..];
            }
            None => {
                open_value = Some((key, value));
                break;
            }
        }
    }
    let mut arguments = format!("{{{}", pairs.join(", "));
    let closed = function_end.is_some() || complete;
    match open_value {
        Some((key, value)) if !complete && is_string(key) => {
            // A string value as far as it goes: its JSON less the closing quote.
            // Cut off: an ending that may begin a closing tag waits. Cut at the function's end:
            // the value is what it is.
            let value = match function_end {
                Some(_) => value,
                None => held_back(held_back(value, "</function>"), PARAMETER_CLOSE),
            };
            let value = Value::String(value.to_owned()).to_string();
            let separator = if pairs.is_empty() { "" } else { ", " };
            arguments.push_str(&format!(
                "{separator}{}: {}",
                Value::String(key.to_owned()),
                &value[..value.len() - 1]
            ));
        }
        Some(_) if complete => return None, // An unclosed parameter in a closed call.
        _ if closed => arguments.push('}'),
        _ => {}
    }
    Some(ParsedCall { name, arguments })
}

/// Gemma 4's `call:NAME{key:value,…}`: keys bare, strings between `<|"|>` quotes, as JSON.
fn gemma_call(block: &str, complete: bool) -> Option<ParsedCall> {
    let rest = block.trim_start().strip_prefix("call:")?;
    let brace = rest.find('{')?;
    let name = rest[..brace].trim().to_owned();
    let (arguments, closed) = gemma_json(&rest[brace..]);
    if complete && !closed {
        return None;
    }
    Some(ParsedCall { name, arguments })
}

/// Gemma 4's argument syntax as JSON text, as far as `text` goes, and whether its outer object
/// closed. Each piece is written once whole (a cut-off string as far as it goes, a cut-off word
/// not at all), so the text only ever grows.
fn gemma_json(text: &str) -> (String, bool) {
    let (mut out, mut open, mut rest) = (String::new(), Vec::new(), text);
    while let Some(c) = rest.chars().next() {
        let key_next = open.last() == Some(&'{') && (out.ends_with('{') || out.ends_with(", "));
        match c {
            '{' | '[' => {
                out.push(c);
                open.push(c);
            }
            '}' | ']' => {
                out.push(c);
                open.pop();
                if open.is_empty() {
                    return (out, true);
                }
            }
            ',' => out.push_str(", "),
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            _ if rest.starts_with(GEMMA_QUOTE) => {
                let inside = &rest[GEMMA_QUOTE.len()..];
                let Some(end) = inside.find(GEMMA_QUOTE) else {
                    let so_far = Value::String(held_back(inside, GEMMA_QUOTE).to_owned()).to_string();
                    out.push_str(&so_far[..so_far.len() - 1]); // Less its closing quote.
                    return (out, false);
                };
                out.push_str(&Value::String(inside[..end].to_owned()).to_string());
                rest = &inside[end + GEMMA_QUOTE.len()..];
                continue;
            }
            _ => {
                let end = rest.find(|c: char| "{}[],:<".contains(c) || c.is_whitespace());
                let Some(end) = end.filter(|&end| end > 0) else {
                    return (out, false); // A word cut off, or a stray '<': not yet known.
                };
                let word = &rest[..end];
                match serde_json::from_str::<Value>(word) {
                    Ok(literal) if !key_next => out.push_str(&literal.to_string()),
                    _ => out.push_str(&Value::String(word.to_owned()).to_string()),
                }
                rest = &rest[end..];
                continue;
            }
        }
        rest = &rest[c.len_utf8()..];
    }
    (out, false)
}

/// LFM2's `[NAME(key=value, …), …]`: Python's call syntax and literals (and JSON's), the
/// arguments as a JSON object. While `complete` is false the last call is read as far as it
/// goes; a complete block that is not a list of calls is not read at all.
fn python_calls(block: &str, complete: bool) -> Option<Vec<ParsedCall>> {
    let mut rest = block.trim_start().strip_prefix('[')?;
    let mut calls = Vec::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return (!complete).then_some(calls);
        }
        if let Some(after) = rest.strip_prefix(']') {
            return after.trim().is_empty().then_some(calls);
        }
        if !calls.is_empty() {
            rest = rest.strip_prefix(',')?.trim_start();
        }
        let name_len = rest.find(|c: char| !(c.is_alphanumeric() || "_.-".contains(c))).unwrap_or(rest.len());
        let (name, after) = rest.split_at(name_len);
        let Some(arguments) = after.trim_start().strip_prefix('(') else {
            // A name still being written.
            return (!complete && !name.is_empty() && after.trim().is_empty()).then_some(calls);
        };
        if name.is_empty() {
            return None;
        }
        let (json, used, closed) = python_arguments(arguments);
        calls.push(ParsedCall { name: name.to_owned(), arguments: json });
        if !closed {
            return (!complete).then_some(calls);
        }
        rest = &arguments[used..];
    }
}

/// Keyword arguments up to their closing `)` as a JSON object's text, how much of `text` they
/// took, and whether the `)` came. Each value is written once whole where it can be (a cut-off
/// string as far as it goes), so the text only ever grows while it streams.
fn python_arguments(text: &str) -> (String, usize, bool) {
    let mut out = String::from("{");
    let mut rest = text;
    loop {
        let trimmed = rest.trim_start();
        if let Some(after) = trimmed.strip_prefix(')') {
            out.push('}');
            return (out, text.len() - after.len(), true);
        }
        let trimmed = match trimmed.strip_prefix(',') {
            Some(after) if out.len() > 1 => after.trim_start(),
            _ => trimmed,
        };
        let Some(eq) = trimmed.find('=') else { return (out, text.len(), false) };
        let key = trimmed[..eq].trim();
        if key.is_empty() || !key.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return (out, text.len(), false);
        }
        if out.len() > 1 {
            out.push_str(", ");
        }
        out.push_str(&Value::String(key.to_owned()).to_string());
        out.push_str(": ");
        match python_value(trimmed[eq + 1..].trim_start(), &mut out) {
            Some(after) => rest = after,
            None => return (out, text.len(), false),
        }
    }
}

/// One Python (or JSON) literal from the start of `text` as JSON into `out`; what follows it,
/// or `None` where it is cut off (`out` then holds as much as can be known).
fn python_value<'a>(text: &'a str, out: &mut String) -> Option<&'a str> {
    let first = text.chars().next()?;
    match first {
        '"' | '\'' => {
            let mut value = String::new();
            let mut chars = text[1..].char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some((_, escaped)) => value.push(match escaped {
                            'n' => '\n',
                            't' => '\t',
                            'r' => '\r',
                            '0' => '\0',
                            other => other,
                        }),
                        None => break,
                    },
                    c if c == first => {
                        out.push_str(&Value::String(value).to_string());
                        return Some(&text[1 + i + 1..]);
                    }
                    c => value.push(c),
                }
            }
            let so_far = Value::String(value).to_string();
            out.push_str(&so_far[..so_far.len() - 1]); // Less its closing quote.
            None
        }
        '[' | '{' => {
            let close = if first == '[' { ']' } else { '}' };
            out.push(first);
            let mut rest = &text[1..];
            let mut items = 0;
            loop {
                rest = rest.trim_start();
                if let Some(after) = rest.strip_prefix(close) {
                    out.push(close);
                    return Some(after);
                }
                if items > 0 {
                    rest = rest.strip_prefix(',')?.trim_start();
                    out.push_str(", ");
                    if let Some(after) = rest.strip_prefix(close) {
                        out.push(close); // A trailing comma, as Python allows.
                        return Some(after);
                    }
                }
                if first == '{' {
                    rest = python_value(rest, out)?.trim_start();
                    rest = rest.strip_prefix(':')?.trim_start();
                    out.push_str(": ");
                }
                rest = python_value(rest, out)?;
                items += 1;
            }
        }
        _ => {
            let end = text.find(|c: char| ",)]}:".contains(c) || c.is_whitespace())?;
            let word = &text[..end];
            let literal = match word {
                "True" | "true" => "true".to_owned(),
                "False" | "false" => "false".to_owned(),
                "None" | "null" => "null".to_owned(),
                number => serde_json::from_str::<serde_json::Number>(number).ok()?.to_string(),
            };
            out.push_str(&literal);
            Some(&text[end..])
        }
    }
}

/// Llama 3.x: the whole answer is `{"name": …, "parameters": {…}}` (after `<|python_tag|>`).
fn llama_calls(body: &str, partial: bool) -> (String, Vec<ParsedCall>) {
    let json = body.trim_start();
    let json = json.strip_prefix(PYTHON_TAG).map_or(json, str::trim_start);
    if json.starts_with('{') {
        if let Some(call) = json_call(json.trim_end(), partial) {
            return (String::new(), vec![call]);
        }
        if partial {
            return (String::new(), Vec::new()); // Not yet readable.
        }
    } else if partial && (json.is_empty() || PYTHON_TAG.starts_with(json)) {
        return (String::new(), Vec::new());
    }
    (body.to_owned(), Vec::new())
}

/// Phi-4-mini: `functools[{…}, …]` after any text.
fn functools_calls(body: &str, partial: bool) -> (String, Vec<ParsedCall>) {
    let Some(at) = body.find(FUNCTOOLS_OPEN) else {
        return (if partial { held_back(body, FUNCTOOLS_OPEN) } else { body }.to_owned(), Vec::new());
    };
    match array_calls(&body[at + FUNCTOOLS_OPEN.len() - 1..], partial) {
        Some(calls) => (body[..at].to_owned(), calls),
        None => (body.to_owned(), Vec::new()),
    }
}

/// The generic route: `{"tool_calls": [...]}` or `{"response": "..."}`.
fn generic_reply(body: &str, partial: bool) -> (String, Vec<ParsedCall>) {
    let json = body.trim();
    let Some(fields) = object_fields(json) else {
        return (if partial { String::new() } else { body.to_owned() }, Vec::new());
    };
    for field in &fields {
        match field.key.as_str() {
            "tool_calls" => {
                if let Some(calls) = array_calls(field.raw, partial || !field.complete) {
                    return (String::new(), calls);
                }
            }
            "response" if field.raw.starts_with('"') => return (string_text(field.raw), Vec::new()),
            "response" if field.complete => return (field.raw.to_owned(), Vec::new()),
            "response" => return (String::new(), Vec::new()),
            _ => {}
        }
    }
    (if partial { String::new() } else { body.to_owned() }, Vec::new())
}

/// The calls of a JSON array of call objects, the last one as far as it goes when `open`.
fn array_calls(text: &str, open: bool) -> Option<Vec<ParsedCall>> {
    let mut rest = text.strip_prefix('[')?.trim_start();
    let mut calls = Vec::new();
    while !rest.is_empty() && !rest.starts_with(']') {
        match value_len(rest) {
            Some(n) => {
                calls.push(json_call(&rest[..n], false)?);
                rest = rest[n..].trim_start();
                rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
            }
            None if open => {
                calls.extend(json_call(rest, true));
                return Some(calls);
            }
            None => return None,
        }
    }
    Some(calls)
}

/// One `"key": value` of an object, its value's text as written (cut off unless `complete`).
struct Field<'a> {
    key: String,
    raw: &'a str,
    complete: bool,
}

/// The fields of the JSON object `text` begins, as far as it goes (a field whose key is not
/// yet complete is left out) or up to what is not JSON.
fn object_fields(text: &str) -> Option<Vec<Field<'_>>> {
    let mut rest = text.strip_prefix('{')?;
    let mut fields = Vec::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() || rest.starts_with('}') {
            return Some(fields);
        }
        // Anything else than a key here ends the reading: what was read stands, so that text
        // appended after it never takes back a field read before.
        let Some(key_len) = value_len(rest).filter(|_| rest.starts_with('"')) else {
            return Some(fields);
        };
        let Ok(key) = serde_json::from_str::<String>(&rest[..key_len]) else {
            return Some(fields);
        };
        rest = rest[key_len..].trim_start();
        let Some(after) = rest.strip_prefix(':') else {
            return Some(fields);
        };
        rest = after.trim_start();
        if rest.is_empty() {
            return Some(fields);
        }
        match value_len(rest) {
            Some(n) => {
                fields.push(Field { key, raw: &rest[..n], complete: true });
                rest = rest[n..].trim_start();
                rest = rest.strip_prefix(',').unwrap_or(rest);
            }
            None => {
                fields.push(Field { key, raw: rest, complete: false });
                return Some(fields);
            }
        }
    }
}

/// The length of the JSON value `text` begins with, or `None` when it is cut off; a number or
/// word ending the text counts as cut off (more digits may come). Malformed JSON is caught
/// where the value is decoded.
fn value_len(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    match bytes.first()? {
        b'"' => string_len(bytes),
        b'{' | b'[' => {
            let (mut depth, mut i) = (0usize, 0);
            while i < bytes.len() {
                match bytes[i] {
                    b'"' => {
                        i += string_len(&bytes[i..])?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let scalar = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.');
            match bytes.iter().position(|c| !scalar(c)) {
                // Not JSON (its decoding says so): one character.
                Some(0) => text.chars().next().map(char::len_utf8),
                Some(n) => Some(n),
                None => None,
            }
        }
    }
}

fn string_len(bytes: &[u8]) -> Option<usize> {
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The text of the JSON string `raw` begins with (whole or cut off), up to its closing quote
/// or to the first escape that is not (yet) whole or valid: the text of a longer `raw` only
/// ever extends it.
fn string_text(raw: &str) -> String {
    let hex = |s: &str| {
        s.get(..4)
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
    };
    let mut out = String::new();
    let mut rest = raw.strip_prefix('"').unwrap_or(raw);
    while let Some(c) = rest.chars().next() {
        rest = &rest[c.len_utf8()..];
        if c == '"' {
            break;
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        let simple = match rest.bytes().next() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                let Some(high) = hex(&rest[1..]) else { break };
                let (code, used) = if (0xD800..0xDC00).contains(&high) {
                    match rest[5..].strip_prefix("\\u").and_then(hex) {
                        Some(low) if (0xDC00..0xE000).contains(&low) => {
                            (0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00), 11)
                        }
                        _ => break,
                    }
                } else {
                    (high, 5)
                };
                let Some(decoded) = char::from_u32(code) else { break };
                out.push(decoded);
                rest = &rest[used..];
                continue;
            }
            _ => break,
        };
        out.push(simple);
        rest = &rest[1..];
    }
    out
}
