//! Untrusted chat templates and messages through the whole chat path: `ChatTemplate::new`
//! (the shape checks, then minijinja's parser and compiler) and `render` with fuzzed messages
//! and options. The input is split at the first two NUL bytes: template, then message text; the
//! first byte of the message part picks the roles and options. Besides "never panics, never
//! overflows the stack", it checks that a rendering stays within the fuel and that refusing a
//! template is a typed error.

#![no_main]

use inferno::chat::{ChatMessage, ChatTemplate, RenderOptions, TemplateSource};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
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
    let options = RenderOptions { add_generation_prompt: switches & 0x20 != 0, enable_thinking };
    if let Ok(text) = chat.render(&messages, options) {
        // 5 M instructions of fuel bound the output too: nothing renders without limit.
        assert!(text.len() < 1 << 30, "rendered {} bytes", text.len());
    }
});
