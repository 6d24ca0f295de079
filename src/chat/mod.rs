//! Turning a conversation into the prompt text a model was trained on.
//!
//! The file's own `tokenizer.chat_template` (Jinja) is rendered with minijinja plus its
//! Python-compatibility methods (`.startswith`, `.split`, `.strip`... which real templates
//! call). Files without a template get a built-in one chosen by architecture, as llama.cpp
//! does: Gemma's turn format for `gemma3`, ChatML otherwise. Built-ins are Jinja too, so one
//! renderer serves both.

use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, Error as JinjaError, ErrorKind, Value, context};
use serde::{Deserialize, Serialize};

use crate::gguf::Metadata;
use crate::tokenizer::Tokenizer;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> ChatMessage {
        ChatMessage { role: role.to_owned(), content: content.to_owned() }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderOptions {
    /// End with the opening of an assistant turn (for generation).
    pub add_generation_prompt: bool,
    /// Qwen3's switch for `<think>` reasoning; `None` leaves the template's default.
    pub enable_thinking: Option<bool>,
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
}

impl ChatError {
    /// A stable snake_case name for the kind of problem.
    pub fn kind(&self) -> &'static str {
        match self {
            ChatError::Syntax(_) => "template_syntax",
            ChatError::Render(_) => "template_render",
            ChatError::BadRole(_) => "bad_role",
        }
    }
}

impl std::fmt::Display for ChatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChatError::Syntax(e) => write!(f, "chat template does not parse: {e}"),
            ChatError::Render(e) => write!(f, "chat template failed: {e}"),
            ChatError::BadRole(role) => {
                write!(f, "unknown chat role {role:?} (expected system, user or assistant)")
            }
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
        env.add_template_owned("chat", text.to_owned()).map_err(|e| ChatError::Syntax(describe(&e)))?;
        Ok(ChatTemplate { env, source, bos_token, eos_token })
    }

    pub fn source(&self) -> &TemplateSource {
        &self.source
    }

    pub fn bos_token(&self) -> &str {
        &self.bos_token
    }

    pub fn render(&self, messages: &[ChatMessage], options: RenderOptions) -> Result<String, ChatError> {
        if let Some(bad) =
            messages.iter().find(|m| !matches!(m.role.as_str(), "system" | "user" | "assistant"))
        {
            return Err(ChatError::BadRole(bad.role.clone()));
        }
        let template = self.env.get_template("chat").map_err(|e| ChatError::Syntax(describe(&e)))?;
        let messages = Value::from(minijinja::value::Serde(messages));
        let rendered = match options.enable_thinking {
            Some(thinking) => template.render(context! {
                messages, add_generation_prompt => options.add_generation_prompt,
                bos_token => &self.bos_token, eos_token => &self.eos_token, enable_thinking => thinking,
            }),
            None => template.render(context! {
                messages, add_generation_prompt => options.add_generation_prompt,
                bos_token => &self.bos_token, eos_token => &self.eos_token,
            }),
        };
        rendered.map_err(|e| ChatError::Render(describe(&e)))
    }
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
