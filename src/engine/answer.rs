//! An answer's text as it grows, token by token: where a stop string cuts it, what is held back
//! because it may yet begin one, the answer read as a message (reasoning, content, calls), and
//! what each token adds to what a client has been sent (OpenAI's streaming deltas).
//!
//! The text is read in Rust and a client is sent only the growth, never the whole answer again.
//! Where a structured answer is in a part whose reading is known (inside its reasoning, or in
//! content after it with no calls to look for), a token's delta is read from the new text
//! alone ([`Reading`]); elsewhere the answer is read whole, which the fast reading equals (a
//! test holds them to the same deltas).

use serde::Serialize;

use crate::chat::{Reply, ReplyFormat, held_back};

/// What one token (or the end) adds to the message a client has been sent.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Delta {
    #[serde(skip_serializing_if = "String::is_empty")]
    #[cfg_attr(test, ts(optional, as = "Option<String>"))]
    pub content: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    #[cfg_attr(test, ts(optional, as = "Option<String>"))]
    pub reasoning_content: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(test, ts(optional, as = "Option<Vec<CallDelta>>"))]
    pub tool_calls: Vec<CallDelta>,
}

impl Delta {
    pub fn is_empty(&self) -> bool {
        self.content.is_empty() && self.reasoning_content.is_empty() && self.tool_calls.is_empty()
    }

    /// Adds what `later` adds after this.
    pub fn extend(&mut self, later: Delta) {
        self.content += &later.content;
        self.reasoning_content += &later.reasoning_content;
        self.tool_calls.extend(later.tool_calls);
    }
}

/// The growth of one tool call: its name the first time it appears, then more of its
/// arguments' JSON text.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallDelta {
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub name: Option<String>,
    pub arguments: String,
}

/// What a client has been sent of a structured answer.
#[derive(Default)]
struct Sent {
    content: String,
    reasoning: String,
    /// Each call's name and the arguments sent so far.
    calls: Vec<(String, String)>,
}

/// Where a structured answer's reading stands, for reading a token from the new text alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reading {
    /// Not known yet: read the answer whole.
    Unknown,
    /// Inside the reasoning, which begins at byte `from` of the text, with neither its closing
    /// tag nor a call's opening tag in the text up to `scanned`.
    Reasoning { from: usize, scanned: usize },
    /// In the content after the reasoning, from byte `from`, where no call can come.
    Content { from: usize },
    /// Read whole to the end (calls may come, or the answer did not open with reasoning).
    Whole,
}

/// An answer's text, its stop strings and what has been sent of it.
pub struct AnswerText {
    format: ReplyFormat,
    stops: Vec<String>,
    /// Everything generated (cut where a stop string began, once one has).
    text: String,
    stopped_by: Option<String>,
    /// Bytes of `text` that are settled: no stop string can begin in them any more, so they
    /// may be shown (the rest may yet be the start of one).
    released: usize,
    sent: Sent,
    reading: Reading,
}

impl AnswerText {
    /// An answer read with `format` (a plain completion: the default, read as content), ended
    /// by the first of `stops` to appear (empty strings are ignored).
    pub fn new(format: ReplyFormat, stops: Vec<String>) -> AnswerText {
        let stops = stops.into_iter().filter(|s| !s.is_empty()).collect();
        AnswerText {
            format,
            stops,
            text: String::new(),
            stopped_by: None,
            released: 0,
            sent: Sent::default(),
            reading: Reading::Unknown,
        }
    }

    /// Whether the answer is read as a message rather than taken as content.
    pub fn is_structured(&self) -> bool {
        self.format.is_structured()
    }

    /// How the answer is read.
    pub fn format(&self) -> &ReplyFormat {
        &self.format
    }

    /// The answer so far (cut at a stop string).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The part of the answer that can be shown: what no stop string can still claim.
    pub fn released(&self) -> &str {
        &self.text[..self.released]
    }

    /// The stop string that ended the answer, once one has appeared.
    pub fn stopped_by(&self) -> Option<&str> {
        self.stopped_by.as_deref()
    }

    /// Whether any tool call has been sent.
    pub fn has_calls(&self) -> bool {
        !self.sent.calls.is_empty()
    }

    /// Adds a token's text; what it adds to the message sent. After a stop string has
    /// appeared, nothing more is taken.
    pub fn push(&mut self, piece: &str) -> Delta {
        if self.stopped_by.is_some() || piece.is_empty() {
            return Delta::default();
        }
        let before = self.text.len();
        self.text.push_str(piece);
        // A stop string ending in the new text began at most its length less one before it.
        let longest = self.stops.iter().map(String::len).max().unwrap_or(0);
        let from = char_floor(&self.text, before.saturating_sub(longest.saturating_sub(1)));
        let found = self
            .stops
            .iter()
            .filter_map(|stop| self.text[from..].find(stop.as_str()).map(|at| (from + at, stop)))
            .min_by_key(|(at, _)| *at);
        if let Some((at, stop)) = found {
            self.stopped_by = Some(stop.clone());
            self.text.truncate(at);
            self.released = at;
        } else {
            self.released = self.text.len() - self.stop_prefix_len();
        }
        self.delta(true)
    }

    /// What the end of the answer adds: text held back for a stop string that never came, and
    /// the answer read once more as finished (a call cut off becomes content, say).
    pub fn finish(&mut self) -> Delta {
        self.released = self.text.len();
        self.delta(false)
    }

    /// Bytes at the end that could begin a stop string.
    fn stop_prefix_len(&self) -> usize {
        let text = self.text.as_bytes();
        self.stops
            .iter()
            .filter_map(|stop| {
                (1..stop.len().min(text.len() + 1)).rev().find(|&n| text.ends_with(&stop.as_bytes()[..n]))
            })
            .max()
            .unwrap_or(0)
    }

    /// The growth of the released text over what was sent: for a plain answer its new bytes,
    /// for a structured one each field's growth (a field that is not an extension of what was
    /// sent waits until it is).
    fn delta(&mut self, partial: bool) -> Delta {
        let released = char_floor(&self.text, self.released);
        if !self.is_structured() {
            let content = self.text[self.sent.content.len()..released].to_owned();
            self.sent.content.push_str(&content);
            return Delta { content, ..Delta::default() };
        }
        if partial && let Some(delta) = self.read_new_text(released) {
            return delta;
        }
        let Reply { content, reasoning_content, tool_calls } =
            self.format.parse(&self.text[..released], partial);
        let mut delta = Delta {
            content: growth(&mut self.sent.content, &content),
            reasoning_content: growth(&mut self.sent.reasoning, reasoning_content.as_deref().unwrap_or("")),
            tool_calls: Vec::new(),
        };
        for (index, call) in tool_calls.into_iter().enumerate() {
            match self.sent.calls.get_mut(index) {
                Some((_, sent)) => {
                    let arguments = growth(sent, &call.arguments);
                    if !arguments.is_empty() {
                        delta.tool_calls.push(CallDelta { index, name: None, arguments });
                    }
                }
                None => {
                    let mut sent = String::new();
                    let arguments = growth(&mut sent, &call.arguments);
                    delta.tool_calls.push(CallDelta { index, name: Some(call.name.clone()), arguments });
                    self.sent.calls.push((call.name, sent));
                }
            }
        }
        delta
    }
}

impl AnswerText {
    /// A streaming token's delta read from the new text alone, where the answer's part allows
    /// it; `None`: read the answer whole. It gives what [`ReplyFormat::parse`] would: inside the
    /// reasoning the message is the reasoning so far (trimmed, less an ending that may begin its
    /// closing tag or a call's opening tag) and no content; after it, with no calls possible,
    /// the content is the text after the closing tag, trimmed.
    fn read_new_text(&mut self, released: usize) -> Option<Delta> {
        let tags = self.format.reasoning?;
        // Only tagged calls (or none) are read here: the other syntaxes are read whole. A call's
        // opening tag ends the reasoning where the syntax says so.
        let (calls, call_open) = match &self.format.calls {
            None => (false, None),
            Some((syntax, _)) => {
                let open = syntax.call_tags()?.0;
                (true, syntax.call_ends_reasoning().then_some(open))
            }
        };
        let text = &self.text[..released];
        loop {
            match self.reading {
                Reading::Unknown => {
                    let from = if self.format.opens_in_reasoning {
                        0
                    } else {
                        let start = text.trim_start();
                        if !start.starts_with(tags.open) {
                            if !tags.open.starts_with(start) {
                                self.reading = Reading::Whole; // It did not open with reasoning.
                            }
                            return None;
                        }
                        text.len() - start.len() + tags.open.len()
                    };
                    self.reading = Reading::Reasoning { from, scanned: from };
                }
                Reading::Reasoning { from, scanned } => {
                    // A tag ending in the new text began at most its length less one before it.
                    let longest = tags.close.len().max(call_open.map_or(0, str::len));
                    let search = char_floor(text, scanned.saturating_sub(longest - 1).max(from));
                    let close = text[search..].find(tags.close).map(|at| search + at);
                    let call = call_open.and_then(|open| text[search..].find(open)).map(|at| search + at);
                    match (close, call) {
                        (None, None) => {
                            self.reading = Reading::Reasoning { from, scanned: released };
                            let mut inner = &text[from..];
                            inner = held_back(inner, tags.close);
                            if let Some(open) = call_open {
                                inner = held_back(inner, open);
                            }
                            let reasoning = inner.trim();
                            let more = reasoning.get(self.sent.reasoning.len()..)?;
                            self.sent.reasoning.push_str(more);
                            return Some(Delta { reasoning_content: more.to_owned(), ..Delta::default() });
                        }
                        // A harmony answer's content is its later messages' texts, read whole.
                        (Some(close), None) if !calls && !self.format.harmony => {
                            self.reading = Reading::Content { from: close + tags.close.len() };
                            return None; // The token that closes it is read whole.
                        }
                        _ => {
                            self.reading = Reading::Whole;
                            return None;
                        }
                    }
                }
                Reading::Content { from } => {
                    let content = text[from..].trim();
                    let more = content.get(self.sent.content.len()..)?;
                    self.sent.content.push_str(more);
                    return Some(Delta { content: more.to_owned(), ..Delta::default() });
                }
                Reading::Whole => return None,
            }
        }
    }
}

/// What `now` adds to `sent` (nothing unless it extends it), appended to `sent`.
fn growth(sent: &mut String, now: &str) -> String {
    match now.strip_prefix(sent.as_str()) {
        Some(more) if !more.is_empty() => {
            sent.push_str(more);
            more.to_owned()
        }
        _ => String::new(),
    }
}

/// The largest character boundary of `text` at or before `at`.
fn char_floor(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{HARMONY_ANALYSIS, REASONING_TAGS, ReplyFormat};

    fn plain(stops: &[&str]) -> AnswerText {
        AnswerText::new(ReplyFormat::default(), stops.iter().map(|s| s.to_string()).collect())
    }

    fn contents(answer: &mut AnswerText, pieces: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = pieces.iter().map(|p| answer.push(p).content).collect();
        out.push(answer.finish().content);
        out
    }

    #[test]
    fn a_plain_answer_is_sent_as_it_grows() {
        let mut answer = plain(&[]);
        assert_eq!(contents(&mut answer, &["Hel", "lo", " there"]), ["Hel", "lo", " there", ""]);
        assert_eq!(answer.stopped_by(), None);
    }

    #[test]
    fn text_that_may_begin_a_stop_string_waits_until_it_is_decided() {
        let mut answer = plain(&["\n\nUser:"]);
        // "\n" may begin the stop string; "\n\nUs" still may; "\n\nUsually" does not.
        assert_eq!(
            contents(&mut answer, &["Hi.", "\n", "\nUs", "ually", " so"]),
            ["Hi.", "", "", "\n\nUsually", " so", ""]
        );
    }

    #[test]
    fn a_stop_string_across_tokens_cuts_the_answer_where_it_began() {
        let mut answer = plain(&["END", "\n\n"]);
        assert_eq!(contents(&mut answer, &["one E", "N", "Dtwo"]), ["one ", "", "", ""]);
        assert_eq!(answer.stopped_by(), Some("END"));
        assert_eq!(answer.text(), "one ");
        // Nothing more is taken once stopped.
        assert!(answer.push("more").is_empty());
        assert_eq!(answer.text(), "one ");
    }

    #[test]
    fn the_earliest_of_several_stop_strings_wins() {
        let mut answer = plain(&["cd", "b"]);
        answer.push("abcd");
        assert_eq!(answer.stopped_by(), Some("b"));
        assert_eq!(answer.text(), "a");
    }

    #[test]
    fn held_back_text_that_never_became_a_stop_string_goes_out_at_the_end() {
        let mut answer = plain(&["</s>"]);
        assert_eq!(contents(&mut answer, &["x </"]), ["x ", "</"]);
    }

    #[test]
    fn multibyte_text_is_held_back_on_character_boundaries() {
        let mut answer = plain(&["é!"]);
        // "é" (two bytes) may begin the stop string: held whole.
        assert_eq!(contents(&mut answer, &["café", "?"]), ["caf", "é?", ""]);
        let mut answer = plain(&["é!"]);
        assert_eq!(contents(&mut answer, &["café", "!"]), ["caf", "", ""]);
        assert_eq!(answer.text(), "caf");
    }

    #[test]
    fn a_structured_answer_sends_each_fields_growth_and_its_deltas_join_to_the_message() {
        let tags = REASONING_TAGS[0].1;
        let format = ReplyFormat { reasoning: Some(tags), ..ReplyFormat::default() };
        let mut answer = AnswerText::new(format.clone(), vec!["STOP".into()]);
        let pieces = ["<think>", "Let me", " see.", "</think>", "\n\nIt is", " 4.", " ST", "OP", " after"];
        let (mut content, mut reasoning) = (String::new(), String::new());
        for piece in pieces {
            let delta = answer.push(piece);
            content += &delta.content;
            reasoning += &delta.reasoning_content;
            // Past the opening tag each token is read from its own text.
            match piece {
                " see." => {
                    assert!(matches!(answer.reading, Reading::Reasoning { .. }), "{:?}", answer.reading)
                }
                " 4." => assert!(matches!(answer.reading, Reading::Content { .. }), "{:?}", answer.reading),
                _ => {}
            }
        }
        let last = answer.finish();
        content += &last.content;
        reasoning += &last.reasoning_content;
        let whole = format.parse("<think>Let me see.</think>\n\nIt is 4. ", false);
        assert_eq!(content, whole.content);
        assert_eq!(reasoning, whole.reasoning_content.unwrap());
        assert_eq!(answer.stopped_by(), Some("STOP"));
    }

    /// Random streams of text around reasoning and call tags (split at random places, with
    /// stop strings), read by the fast path and read whole: the same deltas at every token.
    #[test]
    fn reading_the_new_text_alone_gives_the_deltas_of_reading_the_whole_answer() {
        use crate::chat::{CallSyntax, FunctionSpec, Tool, ToolChoice, ToolUse};
        let tool = Tool {
            kind: "function".into(),
            function: FunctionSpec { name: "f".into(), description: None, parameters: None },
        };
        let tools = || ToolUse::new(vec![tool.clone()], ToolChoice::Auto, true).unwrap().unwrap();
        let tags = Some(REASONING_TAGS[0].1);
        let formats = [
            ReplyFormat { reasoning: tags, ..ReplyFormat::default() },
            ReplyFormat { reasoning: tags, opens_in_reasoning: true, ..ReplyFormat::default() },
            ReplyFormat {
                reasoning: tags,
                calls: Some((CallSyntax::Hermes, tools())),
                ..ReplyFormat::default()
            },
            ReplyFormat { reasoning: Some(REASONING_TAGS[1].1), ..ReplyFormat::default() },
            ReplyFormat {
                reasoning: tags,
                calls: Some((CallSyntax::Lfm2, tools())),
                ..ReplyFormat::default()
            },
            ReplyFormat { reasoning: Some(HARMONY_ANALYSIS), harmony: true, ..ReplyFormat::default() },
            ReplyFormat {
                reasoning: Some(HARMONY_ANALYSIS),
                calls: Some((CallSyntax::Harmony, tools())),
                harmony: true,
                ..ReplyFormat::default()
            },
        ];
        let fragments = [
            "<think>",
            "</think>",
            "<|channel>thought",
            "<channel|>",
            "<tool_call>",
            "</tool_call>",
            "{\"name\": \"f\", \"arguments\": {\"a\": 1}}",
            "<|tool_call_start|>",
            "<|tool_call_end|>",
            "[f(a=1, b='x')]",
            "<|channel|>analysis<|message|>",
            "<|channel|>final<|message|>",
            " to=functions.f<|channel|>commentary json<|message|>",
            "<|end|>",
            "<|start|>assistant",
            "<",
            "</",
            "thi",
            "nk>",
            " ",
            "\n",
            "  ",
            "a",
            "bc",
            "é",
            "日本",
            "STOP",
            "ST",
            "OP",
            ".",
        ];
        let mut rng = crate::sampler::Rng::new(7);
        let mut pick = |n: usize| (rng.next_u64() % n as u64) as usize;
        let mut read_alone = 0;
        for round in 0..2000 {
            let format = formats[round % formats.len()].clone();
            let stops: Vec<String> = if round % 3 == 0 { vec!["STOP".into()] } else { Vec::new() };
            // Half the answers open with their reasoning tag, as a thinking model's do.
            let open = format.reasoning.map_or("", |tags| tags.open);
            let opening = if round % 2 == 0 { open } else { "" };
            let text: String = std::iter::once(opening)
                .chain((0..pick(40) + 1).map(|_| fragments[pick(fragments.len())]))
                .collect();
            // Cut into pieces at random character boundaries.
            let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
            let mut cuts: Vec<usize> = (0..pick(12) + 1).map(|_| bounds[pick(bounds.len())]).collect();
            cuts.extend([0, text.len()]);
            cuts.sort_unstable();
            cuts.dedup();
            let mut fast = AnswerText::new(format.clone(), stops.clone());
            let mut whole = AnswerText::new(format, stops);
            whole.reading = Reading::Whole;
            for piece in cuts.windows(2).map(|w| &text[w[0]..w[1]]) {
                assert_eq!(fast.push(piece), whole.push(piece), "round {round}: {text:?} at {piece:?}");
                read_alone +=
                    usize::from(matches!(fast.reading, Reading::Reasoning { .. } | Reading::Content { .. }));
            }
            assert_eq!(fast.finish(), whole.finish(), "round {round}: {text:?} at the end");
        }
        assert!(read_alone > 1000, "only {read_alone} tokens were read from their own text");
    }
}
