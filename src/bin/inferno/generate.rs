//! `inferno generate`: stream a continuation (or a chat answer), optionally explaining every
//! sampling step.

use inferno::model::{AttentionPrecision, ModelBytes};
use std::io::Write;

use inferno::chat::{ChatMessage, ParsedCall, ReasoningEffort, Tool, ToolChoice, ToolUse};
use inferno::engine::{AnswerLimits, Engine, EngineError, Event, Generation, MEDIA_MARKER, TurnOptions};
use inferno::grammar::GrammarSpec;
use inferno::sampler::{Sampler, SamplerSettings, StepTrace};
use serde::Serialize;

use crate::args::Args;

const OPTIONS: &[&str] = &[
    "--prompt",
    "--system",
    "-n",
    "--temp",
    "--top-k",
    "--top-p",
    "--min-p",
    "--repeat-penalty",
    "--repeat-last-n",
    "--seed",
    "--trace",
    "--context",
    "--threads",
    "--device",
    "--json-schema",
    "--grammar",
    "--tools",
    "--tool-choice",
    "--stop",
    "--reasoning-effort",
    "--precision",
    "--cache-type-k",
    "--cache-type-v",
    "--mmproj",
    "--image",
    "--image-min-tokens",
    "--image-max-tokens",
];
const SWITCHES: &[&str] =
    &["--chat", "--no-think", "--think", "--json", "--ignore-eos", "--one-call", "--strict"];

pub fn run(args: &[String]) -> Result<(), String> {
    let args = Args::parse("generate", args, OPTIONS, SWITCHES)?;
    let path = args.model()?;
    let prompt = args.text("--prompt").ok_or("generate: missing --prompt")?;
    let n_predict: usize = args.number("-n", 24)?;
    let trace_top: usize = args.number("--trace", 0)?;
    let json = args.switch("--json");
    let settings = sampler_settings(&args)?;
    let mut sampler = Sampler::new(settings).map_err(|e| format!("generate: {e}"))?;
    let grammar = grammar_spec(&args)?;
    let tools = tool_use(&args)?;
    if !args.switch("--chat") && tools.is_some() {
        return Err("generate: --tools needs --chat".into());
    }
    let reasoning_effort = args
        .text("--reasoning-effort")
        .map(|effort| effort.parse::<ReasoningEffort>().map_err(|e| format!("generate: {e}")))
        .transpose()?;
    if !args.switch("--chat") && reasoning_effort.is_some() {
        return Err("generate: --reasoning-effort needs --chat".into());
    }

    args.start_threads()?;
    let mut engine = args.configure(AttentionPrecision::Fast, || load_engine(path))?;
    let images = pictures(&args)?;
    if let Some(mmproj) = args.text("--mmproj") {
        let bytes = std::fs::read(mmproj).map_err(|e| format!("generate: {mmproj}: {e}"))?;
        let limit = |name: &str| args.text(name).map(|_| args.number::<usize>(name, 0)).transpose();
        let (min, max) = (limit("--image-min-tokens")?, limit("--image-max-tokens")?);
        engine.attach_projector_limited(bytes, min, max).map_err(|e| format!("generate: {mmproj}: {e}"))?;
    } else if args.text("--image-min-tokens").is_some() || args.text("--image-max-tokens").is_some() {
        return Err("generate: --image-min-tokens and --image-max-tokens need --mmproj".into());
    }
    // As llama-mtmd-cli: the pictures go where the prompt has llama.cpp's marker, or first.
    let marked = if images.is_empty() || prompt.contains(MEDIA_MARKER) {
        prompt.to_string()
    } else {
        format!("{}{prompt}", MEDIA_MARKER.repeat(images.len()))
    };
    let prompt = marked.as_str();
    let (prompt_ids, reply, grammar) = if args.switch("--chat") {
        let mut messages = Vec::new();
        if let Some(system) = args.text("--system") {
            messages.push(ChatMessage::new("system", system));
        }
        messages.push(ChatMessage::new("user", prompt));
        let thinking = match (args.switch("--think"), args.switch("--no-think")) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        };
        let most = args.number("--context", engine.model().config().context_length)?;
        if reasoning_effort.is_some() && !engine.template().reads_reasoning_effort() {
            eprintln!("generate: warning: the chat template does not read reasoning_effort");
        }
        let options = TurnOptions {
            enable_thinking: thinking,
            reasoning_effort,
            tools,
            response_format: grammar,
            split_reasoning: true,
            images,
        };
        let turn = engine.chat_turn(&messages, options, most).map_err(|e| format!("generate: {e}"))?;
        (turn.tokens, Some(turn.reply), turn.grammar)
    } else {
        let ids = engine.encode_with_images(prompt, &images).map_err(|e| format!("generate: {e}"))?;
        (ids, None, grammar)
    };
    if let Some(spec) = &grammar {
        let constraint = engine.constraint(spec).map_err(|e| format!("generate: {e}"))?;
        sampler.set_constraint(Some(constraint));
    }
    let context: usize = args.number("--context", prompt_ids.len() + n_predict)?;
    let mut session = engine.new_session(context).map_err(|e| format!("generate: {e}"))?;
    let limits = AnswerLimits {
        max_tokens: n_predict,
        stops: args.texts("--stop").map(str::to_owned).collect(),
        trace_top,
        ignore_eos: args.switch("--ignore-eos"),
        ..AnswerLimits::default()
    };
    let prompt_tokens = prompt_ids.len();
    let format = reply.unwrap_or_default();
    let mut answer = Generation::new(prompt_ids, format, sampler, limits, &session, native_clock)
        .map_err(|e| format!("generate: {e}"))?;

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut shown = 0; // Bytes of the answer printed (text mode).
    let mut finished = None;
    while !answer.is_done() {
        let events = answer.next(&engine, &mut session).map_err(|e| format!("generate: {e}"))?;
        for event in events {
            match event {
                Event::Token { step, .. } if json => {
                    let line = TokenLine {
                        step: step.index,
                        token: step.token,
                        piece: step.piece,
                        text: &step.text,
                        end_of_generation: step.end_of_generation,
                        trace: step.trace.map(|t| TracedStep { trace: t.trace, pieces: t.pieces }),
                    };
                    writeln!(out, "{}", serde_json::to_string(&line).map_err(|e| e.to_string())?)
                        .map_err(io)?;
                }
                Event::Token { step, .. } => {
                    if let Some(trace) = &step.trace {
                        eprintln!("{}", describe_step(&engine, step.index, &trace.trace));
                    }
                }
                Event::Done { finish, stats, warnings, .. } => {
                    for warning in &warnings {
                        eprintln!("generate: warning: the JSON schema is not fully enforced: {warning}");
                    }
                    finished = Some((finish, stats, warnings));
                }
                _ => {}
            }
        }
        if !json {
            // What no stop string can still claim.
            let released = answer.released_text();
            write!(out, "{}", &released[shown..]).map_err(io)?;
            shown = released.len();
        }
        out.flush().map_err(io)?;
    }
    let (finish, stats, warnings) = finished.ok_or("generate: the answer ended without its summary")?;
    // A chat answer is read as a message: its reasoning apart, its calls.
    let (content, reasoning_content, tool_calls) = if answer.is_structured() {
        let message = answer.format().parse(answer.text(), false);
        (message.content, message.reasoning_content, message.tool_calls)
    } else {
        (answer.text().to_owned(), None, Vec::new())
    };
    let summary = Summary {
        done: true,
        stop: finish.name(),
        stop_string: answer.stop_string().map(str::to_owned),
        warnings,
        content,
        reasoning_content,
        tool_calls,
        prompt_tokens,
        generated: stats.generated,
        context,
        prefill_ms: stats.prefill_ms.unwrap_or(0.0),
        decode_ms: answer.steps().iter().map(|s| s.ms).sum(),
        prefill_tok_s: stats.prefill_tok_s.flatten().unwrap_or(0.0),
        // The first step samples from the prefill's logits; every later one runs a forward pass.
        decode_tok_s: stats.decode_tok_s.unwrap_or(0.0),
    };
    if json {
        writeln!(out, "{}", serde_json::to_string(&summary).map_err(|e| e.to_string())?).map_err(io)?;
    } else {
        writeln!(out).map_err(io)?;
        eprintln!(
            "[{} prompt tokens, {:.1} tok/s prefill | {} generated, {:.1} tok/s decode | stop: {}]",
            summary.prompt_tokens,
            summary.prefill_tok_s,
            summary.generated,
            summary.decode_tok_s,
            summary.stop
        );
    }
    Ok(())
}

/// The pictures of `--image FILE` (repeatable), decoded; refused with the reason
/// (`bad_image`, `image_too_large`) before the model runs.
fn pictures(args: &Args) -> Result<Vec<inferno::vision::RgbImage>, String> {
    args.texts("--image")
        .map(|file| {
            let bytes = std::fs::read(file).map_err(|e| format!("generate: {file}: {e}"))?;
            inferno::vision::decode(&bytes).map_err(|e| format!("generate: {file}: {e}"))
        })
        .collect()
}

/// What `--json-schema FILE` (a JSON schema; with `--strict`, refused unless every keyword is
/// enforced) or `--grammar FILE` (a Lark grammar) asks the answer to follow.
fn grammar_spec(args: &Args) -> Result<Option<GrammarSpec>, String> {
    let read = |path: &str| std::fs::read_to_string(path).map_err(|e| format!("generate: {path}: {e}"));
    match (args.text("--json-schema"), args.text("--grammar")) {
        (Some(_), Some(_)) => Err("generate: give --json-schema or --grammar, not both".into()),
        (Some(path), None) => {
            let schema = serde_json::from_str(&read(path)?).map_err(|e| format!("generate: {path}: {e}"))?;
            Ok(Some(if args.switch("--strict") {
                GrammarSpec::JsonSchema(schema)
            } else {
                GrammarSpec::LenientJsonSchema(schema)
            }))
        }
        (None, Some(path)) => Ok(Some(GrammarSpec::Lark(read(path)?))),
        (None, None) => Ok(None),
    }
}

/// `--tools FILE` (an OpenAI `tools` array) with `--tool-choice` (auto, none, required or a
/// function's name); `--one-call` turns parallel calls off.
fn tool_use(args: &Args) -> Result<Option<ToolUse>, String> {
    let Some(path) = args.text("--tools") else {
        return match args.text("--tool-choice") {
            Some(_) => Err("generate: --tool-choice needs --tools".into()),
            None => Ok(None),
        };
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("generate: {path}: {e}"))?;
    let tools: Vec<Tool> = serde_json::from_str(&text).map_err(|e| format!("generate: {path}: {e}"))?;
    let choice = match args.text("--tool-choice").unwrap_or("auto") {
        "auto" => ToolChoice::Auto,
        "none" => ToolChoice::None,
        "required" => ToolChoice::Required,
        name => ToolChoice::Function(name.to_owned()),
    };
    ToolUse::new(tools, choice, !args.switch("--one-call")).map_err(|e| format!("generate: {e}"))
}

/// The model at `path`; a shard of a split model (`NAME-00002-of-00003.gguf`) brings all of
/// its shards, found by that naming rule beside it.
pub fn load_engine(path: &str) -> Result<Engine, String> {
    let read = |path: &str| std::fs::read(path).map_err(|e| format!("{path}: {e}"));
    let bytes = match inferno::gguf::split::shard_names(path) {
        Some(names) if names.len() > 1 => {
            let files: Vec<ModelBytes> =
                names.iter().map(|name| read(name).map(ModelBytes::from)).collect::<Result<_, _>>()?;
            ModelBytes::from_files(files)
        }
        _ => ModelBytes::from(read(path)?),
    };
    Engine::load(bytes).map_err(|e: EngineError| format!("{path}: {e}"))
}

fn sampler_settings(args: &Args) -> Result<SamplerSettings, String> {
    let d = SamplerSettings::default();
    Ok(SamplerSettings {
        temperature: args.number("--temp", d.temperature)?,
        top_k: args.number("--top-k", d.top_k)?,
        top_p: args.number("--top-p", d.top_p)?,
        min_p: args.number("--min-p", d.min_p)?,
        repeat_penalty: args.number("--repeat-penalty", d.repeat_penalty)?,
        repeat_last_n: args.number("--repeat-last-n", d.repeat_last_n)?,
        seed: args.number("--seed", d.seed)?,
    })
}

/// Milliseconds since the first call, on the machine's monotonic clock: what answers are
/// timed with.
fn native_clock() -> f64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64() * 1e3
}

fn io(e: std::io::Error) -> String {
    e.to_string()
}

#[derive(Serialize)]
struct TokenLine<'a> {
    step: usize,
    token: u32,
    piece: String,
    text: &'a str,
    end_of_generation: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace: Option<TracedStep>,
}

#[derive(Serialize)]
struct Summary {
    done: bool,
    stop: &'static str,
    /// The stop string (`--stop`) that ended the answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_string: Option<String>,
    /// What of the JSON schema was not enforced (`--json-schema` without `--strict`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
    /// The whole answer's text (a chat answer's, less its reasoning and calls).
    content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<ParsedCall>,
    prompt_tokens: usize,
    generated: usize,
    context: usize,
    prefill_ms: f64,
    decode_ms: f64,
    prefill_tok_s: f64,
    decode_tok_s: f64,
}

/// A trace with each candidate's text beside its id.
#[derive(Serialize)]
struct TracedStep {
    #[serde(flatten)]
    trace: StepTrace,
    pieces: Vec<String>,
}

fn describe_step(engine: &Engine, step: usize, trace: &StepTrace) -> String {
    let mut line = format!(
        "[step {step}] chose {:?} (p={:.3}) | nucleus {} tokens, mass {:.3}, {} excluded, entropy {:.2} bits |",
        engine.piece(trace.chosen),
        trace.chosen_probability,
        trace.nucleus_size,
        trace.nucleus_mass,
        trace.excluded,
        trace.entropy_bits
    );
    for c in &trace.candidates {
        let mark = if c.id == trace.chosen {
            "*"
        } else if c.in_nucleus {
            "+"
        } else {
            ""
        };
        line.push_str(&format!(" {:?}{mark} {:.3}", engine.piece(c.id), c.probability));
    }
    line
}
