//! One answer, owned from its prompt to its last token: prefill in parts, decoding with
//! `max_tokens` and stop strings, the answer read as it grows ([`AnswerText`]), its steps kept
//! for branching, and its statistics. The CLI, the Web Worker and the tests drive the same
//! object: each [`Generation::next`] call does one part of the work (a prefill part, or one
//! decode step) and returns what happened as [`Event`]s, so a caller can stream them and stop
//! between any two calls. In the browser a call may leave GPU work in flight: the caller awaits
//! [`Session::pending`] before the next call.

use serde::Serialize;

use super::answer::{AnswerText, Delta};
use super::{Engine, EngineError, PREFILL_BATCH, Session};
use crate::chat::{CallSyntax, ReplyFormat};
use crate::sampler::{Sampler, SamplerSettings, StepTrace};

/// What an answer is asked for besides its prompt and sampling.
#[derive(Clone, Debug)]
pub struct AnswerLimits {
    /// The most tokens the answer may have (a branch's kept steps count).
    pub max_tokens: usize,
    /// The answer ends where the first of these appears (the stop string is not part of it).
    pub stops: Vec<String>,
    /// Candidates explained per step (0: no trace).
    pub trace_top: usize,
    /// Go on past end-of-generation tokens (`generate --ignore-eos`, for benchmarks).
    pub ignore_eos: bool,
    /// Prompt tokens evaluated per [`Generation::next`] call.
    pub prefill_part: usize,
}

impl Default for AnswerLimits {
    fn default() -> Self {
        AnswerLimits {
            max_tokens: super::DEFAULT_MAX_TOKENS,
            stops: Vec::new(),
            trace_top: 0,
            ignore_eos: false,
            prefill_part: PREFILL_BATCH,
        }
    }
}

/// Why an answer ended.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    /// An end-of-generation token.
    End,
    MaxTokens,
    /// The KV cache could take no more tokens.
    ContextFull,
    /// The caller stopped it.
    Stopped,
    /// A stop string appeared.
    StopString,
}

impl Finish {
    pub fn name(self) -> &'static str {
        match self {
            Finish::End => "end",
            Finish::MaxTokens => "max_tokens",
            Finish::ContextFull => "context_full",
            Finish::Stopped => "stopped",
            Finish::StopString => "stop_string",
        }
    }

    /// OpenAI's `finish_reason`; `called` when the answer made tool calls.
    pub fn reason(self, called: bool) -> &'static str {
        match self {
            Finish::End | Finish::Stopped if called => "tool_calls",
            Finish::MaxTokens | Finish::ContextFull => "length",
            _ => "stop",
        }
    }
}

/// A step's trace with each candidate's text beside its id.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, Serialize)]
pub struct TracedStep {
    #[serde(flatten)]
    pub trace: StepTrace,
    pub pieces: Vec<String>,
    /// The pieces of the tokens the grammar forbade (`trace.grammar.forbidden`).
    pub forbidden_pieces: Vec<String>,
    /// Each candidate's exact bytes (a piece may be part of a character).
    pub piece_bytes: Vec<Vec<u8>>,
}

impl TracedStep {
    pub fn new(engine: &Engine, trace: StepTrace) -> TracedStep {
        let tokenizer = engine.tokenizer();
        let forbidden = trace.grammar.iter().flat_map(|g| &g.forbidden);
        TracedStep {
            pieces: trace.candidates.iter().map(|c| engine.piece(c.id)).collect(),
            forbidden_pieces: forbidden.map(|c| engine.piece(c.id)).collect(),
            piece_bytes: trace
                .candidates
                .iter()
                .map(|c| tokenizer.token_bytes(c.id, true).to_vec())
                .collect(),
            trace,
        }
    }
}

/// One token of an answer, as the visualizer and `inferno.steps` show it.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, Serialize)]
pub struct StepRecord {
    /// 0-based step in the answer (what a branch names).
    pub index: usize,
    /// The token's position in the conversation.
    pub position: usize,
    pub token: u32,
    /// The text this step adds (empty while a character is incomplete).
    pub text: String,
    /// The token as display text.
    pub piece: String,
    pub piece_bytes: Vec<u8>,
    #[serde(rename = "endOfGeneration")]
    pub end_of_generation: bool,
    /// Taken by a branch, not drawn.
    pub forced: bool,
    pub trace: Option<TracedStep>,
    /// From the start of the step (running the token before it) to its choice.
    pub ms: f64,
}

/// The prompt as the cache took it.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, Serialize)]
pub struct PromptFacts {
    pub prompt_tokens: usize,
    /// Tokens the cache already held (an earlier turn's).
    pub reused: usize,
    pub evaluated: usize,
    pub context_size: usize,
    pub context_used: usize,
    pub prefill_ms: f64,
}

/// OpenAI's usage figures.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, Serialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    /// The answer's tokens, a branch's kept ones included.
    pub completion_tokens: usize,
    /// Prompt tokens the cache already held (for a branch, all of them).
    pub cached_tokens: usize,
    /// Of the prompt's tokens, those that stand for pictures' rows (a projector's output).
    pub image_tokens: usize,
}

/// How an answer went, in the names the page and the API report.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub prompt_tokens: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub reused: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub evaluated: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub context_size: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub prefill_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub prefill_tok_s: Option<Option<f64>>,
    /// From the request to the first token.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub ttft_ms: Option<f64>,
    /// Steps run by this request (a branch's kept steps are not).
    pub generated: usize,
    /// Decode steps per second, the first step (sampled from the prefill's logits) aside.
    pub decode_tok_s: Option<f64>,
    pub context_used: usize,
    pub total_ms: f64,
    /// Tokens run again because a recurrent state (Qwen3.5) went back to a checkpoint.
    pub replayed: usize,
    pub checkpoints: Option<Checkpoints>,
    /// Decode steps that ran on one thread because that was found faster.
    pub solo_steps: u64,
    pub seed: u64,
}

#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, Serialize)]
pub struct Checkpoints {
    pub held: usize,
    pub most: usize,
    pub bytes_each: usize,
}

/// What a [`Generation::next`] call did.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A part of the prompt was evaluated; more is to come.
    Prefill { evaluated: usize, total: usize },
    /// The prompt is in the cache; decoding starts.
    Prepared { prompt: PromptFacts, structured: bool, call_syntax: Option<CallSyntax> },
    /// A branch starts: the steps kept from the answer it branches from, and what the kept
    /// text adds to an empty message.
    Branched {
        step: usize,
        token: u32,
        structured: bool,
        kept: Vec<StepRecord>,
        delta: Delta,
        /// The sampling the branch goes on with (the answer's).
        settings: SamplerSettings,
    },
    /// One token, and what it adds to the message.
    Token { step: StepRecord, delta: Delta },
    /// The end: why, what the end adds to the message, the usage and statistics, and what
    /// of the answer's grammar was not enforced (a lenient schema's keywords).
    Done {
        finish: Finish,
        #[cfg_attr(test, ts(type = r#""stop" | "length" | "tool_calls""#))]
        finish_reason: &'static str,
        stop_string: Option<String>,
        delta: Delta,
        usage: Usage,
        stats: Stats,
        warnings: Vec<String>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Prefill,
    /// The last prompt part was submitted; its logits are awaited (the GPU in a browser).
    Prefilled,
    Decode,
    Done,
}

/// One answer (see the module's documentation).
pub struct Generation {
    prompt: Vec<u32>,
    prompt_tokens: usize,
    /// Where the answer's first token sits in the conversation.
    answer_start: usize,
    sampler: Sampler,
    text: AnswerText,
    steps: Vec<StepRecord>,
    /// Steps this request started with (a branch's kept ones).
    kept: usize,
    limits: AnswerLimits,
    /// The token a branch takes at its first step.
    forced: Option<u32>,
    phase: Phase,
    /// The token before the next step has been run (its logits are the session's).
    advanced: bool,
    stop_requested: bool,
    /// Milliseconds on a clock that only moves forward.
    clock: fn() -> f64,
    timing: Timing,
    /// The prompt's facts, once prefilled (None for a branch).
    prefill: Option<PromptFacts>,
    /// Tokens the cache held of the prompt, from the first prefill part.
    reused: Option<usize>,
    evaluated: usize,
    replayed_before: usize,
    solo_before: u64,
    /// Why it ended, once it has.
    finish: Option<Finish>,
    /// A branch's first event, sent with its first step.
    branched: Option<Event>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Timing {
    started: f64,
    step_started: f64,
    first_step_ms: Option<f64>,
    decode_ms: f64,
    decode_steps: usize,
}

impl Generation {
    /// An answer to `prompt` (a rendered chat or a plain text's tokens), read with `format`,
    /// sampled by `sampler` (which holds the answer's grammar, if any). `session` must be the
    /// one [`Generation::next`] will be given.
    pub fn new(
        prompt: Vec<u32>,
        format: ReplyFormat,
        sampler: Sampler,
        limits: AnswerLimits,
        session: &Session,
        clock: fn() -> f64,
    ) -> Result<Generation, EngineError> {
        if prompt.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        let text = AnswerText::new(format, limits.stops.clone());
        Ok(Generation {
            prompt_tokens: prompt.len(),
            answer_start: prompt.len(),
            prompt,
            sampler,
            text,
            steps: Vec::new(),
            kept: 0,
            limits,
            forced: None,
            phase: Phase::Prefill,
            advanced: false,
            stop_requested: false,
            timing: Timing { started: clock(), ..Timing::default() },
            clock,
            prefill: None,
            reused: None,
            evaluated: 0,
            replayed_before: session.replayed(),
            solo_before: crate::parallel::solo_steps(),
            finish: None,
            branched: None,
        })
    }

    /// Turns this answer into a new one that keeps its first `step` steps and takes `token` at
    /// step `step`, sampled as this one was (its sampler goes on; its grammar is rolled back to
    /// the kept steps). The cache goes back to the step, not recomputed. The first event is
    /// [`Event::Branched`]. A step or token out of range is refused before anything changes.
    pub fn branch(
        &mut self,
        step: usize,
        token: u32,
        limits: AnswerLimits,
        engine: &Engine,
        session: &mut Session,
    ) -> Result<(), EngineError> {
        if step >= self.steps.len() {
            return Err(EngineError::BadBranch(match self.steps.len() {
                0 => "the answer has no steps to branch from".into(),
                n => format!("step must be a whole number in 0..{}", n - 1),
            }));
        }
        let vocab = engine.model().config().vocab_size;
        if token as usize >= vocab {
            return Err(EngineError::BadBranch(format!("token must be a token id in 0..{}", vocab - 1)));
        }
        let position = self.steps[step].position;
        if position > session.len() {
            return Err(EngineError::NothingToContinue);
        }
        session.truncate(position);
        if let Some(constraint) = self.sampler.constraint_mut() {
            let kept = position.saturating_sub(self.answer_start);
            let dropped = constraint.consumed().saturating_sub(kept);
            constraint.rollback(dropped)?;
        }
        self.steps.truncate(step);
        // What the kept text adds to an empty message, read as the answer is.
        self.text = AnswerText::new(self.text.format().clone(), limits.stops.clone());
        let mut delta = Delta::default();
        for kept in &self.steps {
            delta.extend(self.text.push(&kept.text));
        }
        let structured = self.text.is_structured();
        let settings = self.sampler.settings().clone();
        self.branched =
            Some(Event::Branched { step, token, structured, kept: self.steps.clone(), delta, settings });
        self.kept = step;
        self.limits = limits;
        self.forced = Some(token);
        self.phase = Phase::Decode;
        self.advanced = false;
        self.stop_requested = false;
        self.timing = Timing { started: (self.clock)(), ..Timing::default() };
        self.prefill = None;
        self.reused = None;
        self.evaluated = 0;
        self.replayed_before = session.replayed();
        self.solo_before = crate::parallel::solo_steps();
        self.finish = None;
        Ok(())
    }

    /// The answer's steps so far (a branch's kept ones first).
    pub fn steps(&self) -> &[StepRecord] {
        &self.steps
    }

    /// The answer's text (cut at a stop string).
    pub fn text(&self) -> &str {
        self.text.text()
    }

    /// The text that can be shown so far: what no stop string can still claim.
    pub fn released_text(&self) -> &str {
        self.text.released()
    }

    pub fn is_structured(&self) -> bool {
        self.text.is_structured()
    }

    /// The stop string that ended the answer, if one did.
    pub fn stop_string(&self) -> Option<&str> {
        self.text.stopped_by()
    }

    /// How the answer is read (to read it whole).
    pub fn format(&self) -> &ReplyFormat {
        self.text.format()
    }

    pub fn prompt_tokens(&self) -> usize {
        self.prompt_tokens
    }

    /// Why it ended, once it has.
    pub fn finish(&self) -> Option<Finish> {
        self.finish
    }

    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Ends the answer at the next call (between prefill parts or steps).
    pub fn stop(&mut self) {
        self.stop_requested = true;
    }

    /// Does the next part of the work: a prefill part, or one decode step (in a browser on the
    /// GPU, a step whose token must first run is split in two calls: the run, then the
    /// choice). After an error the answer is over.
    pub fn next(&mut self, engine: &Engine, session: &mut Session) -> Result<Vec<Event>, EngineError> {
        let mut events = Vec::new();
        let result = self.advance_work(engine, session, &mut events);
        if result.is_err() {
            self.phase = Phase::Done;
        }
        result.map(|()| events)
    }

    fn advance_work(
        &mut self,
        engine: &Engine,
        session: &mut Session,
        events: &mut Vec<Event>,
    ) -> Result<(), EngineError> {
        if self.phase == Phase::Done {
            return Ok(());
        }
        if self.stop_requested {
            self.end(Finish::Stopped, session, events);
            return Ok(());
        }
        match self.phase {
            Phase::Prefill => {
                let progress = session.sync_some(engine, &self.prompt, self.limits.prefill_part)?;
                let reused = *self.reused.get_or_insert(progress.reused);
                self.evaluated += progress.evaluated;
                if progress.remaining > 0 {
                    let total = self.prompt.len() - reused;
                    events.push(Event::Prefill { evaluated: self.evaluated, total });
                    return Ok(());
                }
                self.phase = Phase::Prefilled;
                if session.is_waiting() {
                    return Ok(());
                }
                self.prepared(session, events);
            }
            Phase::Prefilled => self.prepared(session, events),
            Phase::Decode => self.decode_step(engine, session, events)?,
            Phase::Done => {}
        }
        Ok(())
    }

    fn prepared(&mut self, session: &Session, events: &mut Vec<Event>) {
        let facts = PromptFacts {
            prompt_tokens: self.prompt_tokens,
            reused: self.reused.unwrap_or(0),
            evaluated: self.evaluated,
            context_size: session.context_len(),
            context_used: session.len(),
            prefill_ms: (self.clock)() - self.timing.started,
        };
        self.prefill = Some(facts.clone());
        self.phase = Phase::Decode;
        let call_syntax = self.text.format().calls.as_ref().map(|(syntax, _)| *syntax);
        events.push(Event::Prepared { prompt: facts, structured: self.is_structured(), call_syntax });
    }

    fn decode_step(
        &mut self,
        engine: &Engine,
        session: &mut Session,
        events: &mut Vec<Event>,
    ) -> Result<(), EngineError> {
        if self.steps.len() >= self.limits.max_tokens {
            self.end(Finish::MaxTokens, session, events);
            return Ok(());
        }
        let first = self.steps.len() == self.kept;
        if let Some(branched) = self.branched.take() {
            events.push(branched);
        }
        let position = session.len();
        let forced = if first { self.forced } else { None };
        if !self.advanced {
            self.timing.step_started = (self.clock)();
            // A GPU reads back only the best logits where this step needs no more.
            let read = self.sampler.logits_read(forced, self.limits.trace_top);
            match session.advance_reading(engine, read) {
                Ok(ran) => {
                    self.advanced = true;
                    if ran && session.is_waiting() {
                        return Ok(()); // The token runs on the GPU; the choice comes next call.
                    }
                }
                Err(error) if error.is_context_full() => {
                    self.end(Finish::ContextFull, session, events);
                    return Ok(());
                }
                Err(error) => return Err(error),
            }
        }
        let step = match session.step(engine, &mut self.sampler, forced, self.limits.trace_top) {
            Ok(step) => step,
            Err(error) if error.is_context_full() => {
                self.end(Finish::ContextFull, session, events);
                return Ok(());
            }
            Err(error) => return Err(error),
        };
        self.advanced = false;
        let ms = (self.clock)() - self.timing.step_started;
        if first {
            self.timing.first_step_ms = Some(ms);
        } else {
            self.timing.decode_ms += ms;
            self.timing.decode_steps += 1;
        }
        let tokenizer = engine.tokenizer();
        let record = StepRecord {
            index: self.steps.len(),
            position,
            token: step.token,
            piece: engine.piece(step.token),
            piece_bytes: tokenizer.token_bytes(step.token, true).to_vec(),
            end_of_generation: step.end_of_generation,
            forced: forced.is_some(),
            trace: step.trace.map(|trace| TracedStep::new(engine, trace)),
            ms,
            text: step.text,
        };
        let delta = self.text.push(&record.text);
        self.steps.push(record.clone());
        events.push(Event::Token { step: record, delta });
        if self.text.stopped_by().is_some() {
            self.end(Finish::StopString, session, events);
        } else if step.end_of_generation && !self.limits.ignore_eos {
            self.end(Finish::End, session, events);
        } else if self.steps.len() >= self.limits.max_tokens {
            self.end(Finish::MaxTokens, session, events);
        }
        Ok(())
    }

    fn end(&mut self, finish: Finish, session: &Session, events: &mut Vec<Event>) {
        // A branch stopped before its first step still says what it kept.
        events.extend(self.branched.take());
        let delta = self.text.finish();
        self.phase = Phase::Done;
        self.finish = Some(finish);
        let now = (self.clock)();
        let timing = self.timing;
        let generated = self.steps.len() - self.kept;
        let decode_tok_s =
            (timing.decode_steps > 0).then(|| 1000.0 * timing.decode_steps as f64 / timing.decode_ms);
        let (held, most, bytes_each) = session.checkpoints();
        let prefill = self.prefill.as_ref();
        let prefill_ms = prefill.map(|p| p.prefill_ms);
        let stats = Stats {
            prompt_tokens: self.prefill.is_some().then_some(self.prompt_tokens),
            reused: prefill.map(|p| p.reused),
            evaluated: prefill.map(|p| p.evaluated),
            context_size: prefill.map(|p| p.context_size),
            prefill_ms,
            prefill_tok_s: prefill
                .map(|p| (p.evaluated > 0).then(|| 1000.0 * p.evaluated as f64 / p.prefill_ms.max(1e-9))),
            ttft_ms: timing.first_step_ms.map(|first| prefill_ms.unwrap_or(0.0) + first),
            generated,
            decode_tok_s,
            context_used: session.len(),
            total_ms: now - timing.started,
            replayed: session.replayed() - self.replayed_before,
            checkpoints: (most > 0).then_some(Checkpoints { held, most, bytes_each }),
            solo_steps: crate::parallel::solo_steps() - self.solo_before,
            seed: self.sampler.settings().seed,
        };
        let branched = self.forced.is_some();
        let usage = Usage {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.steps.len(),
            cached_tokens: if branched { self.prompt_tokens } else { self.reused.unwrap_or(0) },
            image_tokens: self.prompt[..self.prompt_tokens.min(self.prompt.len())]
                .iter()
                .filter(|&&id| super::images::is_image_id(id))
                .count(),
        };
        events.push(Event::Done {
            finish,
            finish_reason: finish.reason(self.text.has_calls()),
            stop_string: self.text.stopped_by().map(str::to_owned),
            delta,
            usage,
            stats,
            warnings: self.sampler.constraint().map(|c| c.warnings().to_vec()).unwrap_or_default(),
        });
    }
}
