//! A loaded model and its one conversation, driven one step at a time by the Web Worker.

use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::{engine_error, js_error, to_js};
use crate::chat::{ReplyFormat, ToolUse};
use crate::embedding::{EmbedOptions, Pooling};
use crate::engine::{
    AnswerRequest, BranchRequest, ChatRequest, Engine, EngineError, Generation, GrammarRequest,
    LimitsRequest, PendingPicture, Session, TextRequest, TracedStep, TurnOptions, is_image_id,
};
use crate::grammar::GrammarSpec;
use crate::inspect::Report;
use crate::model::{AttentionPrecision, KvType, KvTypes};
use crate::sampler::{Sampler, SamplerError, SamplerSettings};
use crate::tokenizer::{DecodeOptions, EncodeOptions};
use crate::vision::RgbImage;

pub use crate::engine::DEFAULT_CONTEXT_CAP;

/// A loaded model and its one conversation.
#[wasm_bindgen]
pub struct WebEngine {
    engine: Engine,
    session: Option<Session>,
    /// The answer being generated, or the last one (what a branch starts from).
    answer: Option<Generation>,
    /// The sampler of the low-level `step` (benchmarks, the device probe); an answer has its own.
    sampler: Sampler,
    /// Pictures for the next `start_chat` (`add_image`), in the order of its markers.
    pending_images: Vec<RgbImage>,
    /// The picture `add_image` began, which `encode_square` and `finish_image` go on with.
    picture: Option<(RgbImage, PendingPicture)>,
}

fn no_picture() -> JsValue {
    js_error("Error", "bad_request", "no picture is being added (add_image first)")
}

impl WebEngine {
    fn check_tokens(&self, tokens: &[u32]) -> Result<(), JsValue> {
        let vocab = self.engine.model().config().vocab_size;
        match tokens.iter().find(|&&t| t as usize >= vocab) {
            Some(bad) => {
                let message = format!("token id {bad} is outside the vocabulary of {vocab}");
                Err(js_error("RangeError", "bad_token", &message))
            }
            None => Ok(()),
        }
    }

    pub(super) fn new(engine: Engine) -> Result<WebEngine, JsValue> {
        let sampler = Sampler::new(SamplerSettings::default()).map_err(engine_error_of)?;
        Ok(WebEngine {
            engine,
            session: None,
            answer: None,
            sampler,
            pending_images: Vec::new(),
            picture: None,
        })
    }
}

#[wasm_bindgen]
impl WebEngine {
    /// Architecture, sizes, the chat template's origin and the end-of-generation tokens.
    pub fn info(&self) -> Result<JsValue, JsValue> {
        #[derive(Serialize)]
        struct Info<'a> {
            architecture: &'static str,
            vocab_size: usize,
            context_length: usize,
            template: &'a crate::chat::TemplateSource,
            end_of_generation: &'a [u32],
            recommended_sampling: SamplerSettings,
            /// The file's pooling (`pooling_type`), where it declares one.
            pooling: Option<&'static str>,
            /// What the model is for: `chat`, `embedding`, or `chat_and_embedding`.
            purpose: &'static str,
            /// Whether it has an output layer to generate with (an encoder only embeds).
            generates: bool,
            /// Whether its chat template reads `reasoning_effort` (gpt-oss).
            reads_reasoning_effort: bool,
        }
        let config = self.engine.model().config();
        to_js(&Info {
            architecture: config.architecture.name(),
            vocab_size: config.vocab_size,
            context_length: config.context_length,
            template: self.engine.template().source(),
            end_of_generation: self.engine.tokenizer().end_of_generation_tokens(),
            recommended_sampling: self.engine.recommended_sampling(),
            pooling: config.pooling.map(crate::embedding::Pooling::name),
            purpose: self.engine.purpose().name(),
            generates: self.engine.model().weights().output.is_some(),
            reads_reasoning_effort: self.engine.template().reads_reasoning_effort(),
        })
    }

    /// Sentence embeddings of `texts` ([`Engine::embed`]), with `{pooling?: 'mean' | 'cls' |
    /// 'last', dimensions?, normalize?}`: `{vectors: Float32Array[], prompt_tokens, pooling}`.
    pub fn embed(&self, texts: Vec<String>, options: JsValue) -> Result<JsValue, JsValue> {
        let options = embed_options(options)?;
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let result = self.engine.embed(&texts, options).map_err(engine_error)?;
        let vectors: js_sys::Array =
            result.vectors.iter().map(|v| JsValue::from(js_sys::Float32Array::from(&v[..]))).collect();
        let out = js_sys::Object::new();
        let set = |key: &str, value: JsValue| js_sys::Reflect::set(&out, &key.into(), &value).map(drop);
        set("vectors", vectors.into())?;
        set("prompt_tokens", (result.prompt_tokens as f64).into())?;
        set("pooling", result.pooling.name().into())?;
        Ok(out.into())
    }

    /// Checks a whole embedding request (as [`WebEngine::embed`] takes it) without running it,
    /// and says how it runs ([`Engine::embedding_batches`]): the number of texts in each
    /// batch, in order. A caller that embeds batch by batch (to stay stoppable) hears of a bad
    /// text by its place in the whole request, and gets the vectors one call would.
    pub fn plan_embedding(&self, texts: Vec<String>, options: JsValue) -> Result<Vec<u32>, JsValue> {
        let options = embed_options(options)?;
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let (_, inputs) = self.engine.embedding_inputs(&texts, options).map_err(engine_error)?;
        Ok(self.engine.embedding_batches(&inputs).iter().map(|b| b.len() as u32).collect())
    }

    /// Token ids of `text`. Without options, as a prompt (llama.cpp's defaults: special tokens
    /// parsed, BOS when the model asks for it, never a second BOS), e.g. so a benchmark feeds
    /// both engines the same prompt; `add_special` / `parse_special` as `llama_tokenize`'s.
    pub fn tokenize(&self, text: &str, add_special: Option<bool>, parse_special: Option<bool>) -> Vec<u32> {
        if add_special.is_none() && parse_special.is_none() {
            return self.engine.encode(text);
        }
        let defaults = EncodeOptions::default();
        let options = EncodeOptions {
            add_special: add_special.unwrap_or(defaults.add_special),
            parse_special: parse_special.unwrap_or(defaults.parse_special),
        };
        self.engine.tokenizer().encode(text, options)
    }

    /// The text of `ids` as llama.cpp's `llama_detokenize`: control tokens left out unless
    /// `render_special`. An id outside the vocabulary is refused (kind `bad_token`).
    pub fn detokenize(&self, ids: Vec<u32>, render_special: Option<bool>) -> Result<String, JsValue> {
        self.check_tokens(&ids)?;
        let options =
            DecodeOptions { remove_special: false, render_special: render_special.unwrap_or(false) };
        Ok(self.engine.tokenizer().decode_with(&ids, options))
    }

    /// The inspector's report for the loaded file (no second read of the file).
    pub fn inspect(&self) -> Result<JsValue, JsValue> {
        to_js(&Report::new(self.engine.model().header()))
    }

    /// Starts a chat answer: `{messages, enable_thinking?, reasoning_effort?, tools?, tool_choice?,
    /// parallel_tool_calls?, split_reasoning?}` with any answer's `{settings?, context?,
    /// grammar?, max_tokens?, trace_top?, stop?}`. The conversation is rendered through the
    /// chat template and tokenized, the tools and grammar checked and compiled, and a cache of
    /// that context made, before anything runs; `next_events` then runs the answer. The
    /// pictures added since the last answer (`add_image`) go where the messages hold
    /// `<__media__>`.
    pub fn start_chat(&mut self, request: JsValue) -> Result<(), JsValue> {
        let request: ChatRequest = serde_wasm_bindgen::from_value(request)
            .map_err(|e| js_error("TypeError", "bad_request", &e.to_string()))?;
        let (sampler, response_format, context) = self.answer_sampling(&request.answer)?;
        let (tools, choice) = (request.tools.unwrap_or_default(), request.tool_choice.unwrap_or_default());
        let tools = ToolUse::new(tools, choice, request.parallel_tool_calls.unwrap_or(true))
            .map_err(|e| engine_error(e.into()))?;
        let options = TurnOptions {
            enable_thinking: request.enable_thinking,
            reasoning_effort: request.reasoning_effort,
            tools,
            response_format,
            split_reasoning: request.split_reasoning.unwrap_or(true),
            images: std::mem::take(&mut self.pending_images),
        };
        let turn = self.engine.chat_turn(&request.messages, options, context).map_err(engine_error)?;
        self.start(turn.tokens, turn.grammar.as_ref(), turn.reply, sampler, context, request.answer.limits)
    }

    /// Loads a vision projector (mmproj) beside the model, so that chats can hold pictures
    /// (`add_image`), with limits on a picture's rows (mtmd's `image_min_tokens` /
    /// `image_max_tokens`; each `undefined` for the projector's own) where it sizes pictures at
    /// their own aspect. Refused with a typed error (`mmproj_mismatch` for another model's
    /// width, `bad_projector`, `unsupported_projector`, `bad_request` for limits it cannot
    /// take...), the engine as it was. Returns what the projector says about itself (the
    /// inspector's `vision`, `image_tokens` the limits in force).
    pub fn attach_projector(
        &mut self,
        bytes: Vec<u8>,
        min_tokens: Option<u32>,
        max_tokens: Option<u32>,
    ) -> Result<JsValue, JsValue> {
        let limit = |tokens: Option<u32>| tokens.map(|t| t as usize);
        self.engine
            .attach_projector_limited(bytes, limit(min_tokens), limit(max_tokens))
            .map_err(engine_error)?;
        // The cached session's prefill batch was sized without the picture's rows.
        self.answer = None;
        self.session = None;
        to_js(&self.engine.projector().map(|p| p.facts()))
    }

    /// A picture for the next `start_chat`, as a canvas gives its pixels (RGBA, alpha dropped
    /// as llama.cpp's loader drops it); that request's messages hold a `<__media__>` marker
    /// where each picture goes, in the order they were added. Lays it out and returns how many
    /// squares the projector has to encode (0 when it encoded this picture before: found by its
    /// content hash). `encode_square` encodes them one call at a time, so the worker can report
    /// each and take a stop between them; then `finish_image` adds the picture. Refused
    /// (`no_mmproj`, `bad_image`, `image_too_large`) unless a projector is attached and the
    /// bytes are `width × height × 4` within the caps.
    pub fn add_image(&mut self, width: u32, height: u32, rgba: &js_sys::Uint8Array) -> Result<u32, JsValue> {
        self.picture = None;
        let image =
            RgbImage::from_rgba_read(width as usize, height as usize, rgba.length() as usize, |at, piece| {
                rgba.subarray(at as u32, (at + piece.len()) as u32).copy_to(piece)
            })
            .map_err(|e| engine_error(EngineError::Model(e)))?;
        let picture = self.engine.begin_picture(&image).map_err(engine_error)?;
        let squares = picture.squares_left() as u32;
        self.picture = Some((image, picture));
        Ok(squares)
    }

    /// Encodes the next square of the picture `add_image` began; returns how many are left. On
    /// the GPU a square is submitted here (and counted as done) and collected by the next call
    /// or `finish_image`: await `pending()` after each call.
    pub fn encode_square(&mut self) -> Result<u32, JsValue> {
        let (_, picture) = self.picture.as_mut().ok_or_else(no_picture)?;
        self.engine.encode_next_square(picture).map_err(engine_error)?;
        Ok(picture.squares_left() as u32)
    }

    /// Adds the picture whose squares are all encoded for the next `start_chat`; returns the
    /// rows of embeddings it puts into the prompt (its marker tokens not counted).
    pub fn finish_image(&mut self) -> Result<u32, JsValue> {
        let (image, picture) = self.picture.take().ok_or_else(no_picture)?;
        let ids = self.engine.finish_picture(picture).map_err(engine_error)?;
        self.pending_images.push(image);
        Ok(ids.iter().filter(|&&id| is_image_id(id)).count() as u32)
    }

    /// Forgets the pictures added for the next answer (a request that failed before it started).
    pub fn clear_images(&mut self) {
        self.pending_images.clear();
        self.picture = None;
        self.engine.begin_pictures();
    }

    /// How many pictures the projector has encoded: a picture sent again (a follow-up
    /// question, a regenerated answer) is found by its content hash and not encoded twice.
    pub fn images_encoded(&self) -> u32 {
        self.engine.images_encoded() as u32
    }

    /// Starts a legacy completion of `{prompt}` as it is (no template), with any answer's
    /// fields (see `start_chat`); pictures added go where the prompt has `<__media__>`.
    pub fn start_text(&mut self, request: JsValue) -> Result<(), JsValue> {
        let request: TextRequest = serde_wasm_bindgen::from_value(request)
            .map_err(|e| js_error("TypeError", "bad_request", &e.to_string()))?;
        let (sampler, grammar, context) = self.answer_sampling(&request.answer)?;
        let images = std::mem::take(&mut self.pending_images);
        let tokens = self.engine.encode_with_images(&request.prompt, &images).map_err(engine_error)?;
        self.start(tokens, grammar.as_ref(), ReplyFormat::default(), sampler, context, request.answer.limits)
    }

    /// Starts a branch of the last answer, `{step, token, max_tokens?, trace_top?, stop?}`:
    /// its first `step` steps are kept, `token` is taken at that step, and sampling goes on as
    /// the answer had it. `max_tokens` counts the kept steps. Refused (kind `no_answer`,
    /// `bad_request`) before anything changes.
    pub fn start_branch(&mut self, request: JsValue) -> Result<(), JsValue> {
        let request: BranchRequest = serde_wasm_bindgen::from_value(request)
            .map_err(|e| js_error("TypeError", "bad_request", &e.to_string()))?;
        let (Some(answer), Some(session)) = (self.answer.as_mut(), self.session.as_mut()) else {
            let error = EngineError::NoAnswer;
            return Err(js_error("ProtocolError", error.kind(), &error.to_string()));
        };
        let limits = request.limits.limits(request.step);
        answer.branch(request.step, request.token, limits, &self.engine, session).map_err(|e| match e {
            // What the API checks of a request is a TypeError, as its own checks are.
            EngineError::BadBranch(why) => js_error("TypeError", "bad_request", &why),
            e => engine_error(e),
        })
    }

    /// Runs the next part of the answer (a prefill part, or one decode step) and returns what
    /// happened: an array of events, `{type: 'prefill' | 'prepared' | 'branched' | 'token' |
    /// 'done', ...}` (src/engine/generation.rs's `Event`). On the GPU, await `pending()`
    /// before the next call. After `done` (or an error) the answer is over.
    pub fn next_events(&mut self) -> Result<JsValue, JsValue> {
        let (Some(answer), Some(session)) = (self.answer.as_mut(), self.session.as_mut()) else {
            return Err(engine_error(EngineError::NothingToContinue));
        };
        let events = answer.next(&self.engine, session).map_err(engine_error)?;
        // As JSON text, parsed on the JS side: one crossing of the boundary, where building
        // the objects field by field (a step's trace has some 200) took one per field.
        let json =
            serde_json::to_string(&events).map_err(|e| js_error("Error", "serialize", &e.to_string()))?;
        js_sys::JSON::parse(&json)
    }

    /// Ends the answer at the next `next_events` call, which returns its `done`.
    pub fn stop_answer(&mut self) {
        if let Some(answer) = &mut self.answer {
            answer.stop();
        }
    }

    /// A fresh sampler with the answer's settings (each answer starts its random stream
    /// afresh: the same seed and conversation give the same answer); the answer's grammar,
    /// read, and its cache size.
    fn answer_sampling(
        &self,
        answer: &AnswerRequest,
    ) -> Result<(Sampler, Option<GrammarSpec>, usize), JsValue> {
        let sampler = Sampler::new(answer.settings.clone()).map_err(engine_error_of)?;
        let grammar = match answer.grammar.clone() {
            Some(grammar) => Some(grammar.spec().map_err(|e| engine_error(e.into()))?),
            None => None,
        };
        Ok((sampler, grammar, self.context_for(answer.context)))
    }

    /// Sets up an answer to `tokens`: its grammar compiled (a schema checked) before anything
    /// runs, how it is read, and a cache of `context` tokens. The last answer is forgotten.
    fn start(
        &mut self,
        tokens: Vec<u32>,
        grammar: Option<&GrammarSpec>,
        reply: ReplyFormat,
        mut sampler: Sampler,
        context: usize,
        limits: LimitsRequest,
    ) -> Result<(), JsValue> {
        let constraint =
            grammar.map(|spec| self.engine.constraint(spec)).transpose().map_err(engine_error)?;
        sampler.set_constraint(constraint);
        if tokens.is_empty() {
            return Err(engine_error(EngineError::EmptyPrompt));
        }
        self.answer = None;
        let session = self.session_for(Some(context))?;
        let answer = Generation::new(tokens, reply, sampler, limits.limits(0), session, performance_now)
            .map_err(engine_error)?;
        self.answer = Some(answer);
        Ok(())
    }

    /// Brings the KV cache up to `tokens` exactly (no template), with greedy-or-given sampling
    /// settings: what the benchmark page and tests need for a fixed-length prefill.
    /// Returns the same `{prompt_tokens, reused, evaluated, context_used, context_size}`.
    pub fn prepare_tokens(&mut self, tokens: Vec<u32>, context: Option<u32>) -> Result<JsValue, JsValue> {
        self.check_tokens(&tokens)?;
        self.sync_prompt(&tokens, context.map(|c| c as usize), usize::MAX)
    }

    /// Replaces the sampling settings (`{temperature, top_k, top_p, min_p, repeat_penalty,
    /// repeat_last_n, seed}`, missing fields take their defaults) and reseeds the generator.
    pub fn set_sampling(&mut self, settings: JsValue) -> Result<(), JsValue> {
        let settings: SamplerSettings = serde_wasm_bindgen::from_value(settings)
            .map_err(|e| js_error("TypeError", "bad_request", &e.to_string()))?;
        self.sampler = Sampler::new(settings).map_err(engine_error_of)?;
        Ok(())
    }

    /// Holds the next answer (from the next `step` on) to `grammar` (`{type: 'json_object'}`,
    /// `{type: 'json_schema', schema}` with the schema as JSON text, or `{type: 'lark',
    /// grammar}`; undefined: none): the benchmark times decode steps with a schema this way.
    /// Call after `set_sampling`, which starts the sampler afresh.
    pub fn set_grammar(&mut self, grammar: JsValue) -> Result<(), JsValue> {
        let grammar: Option<GrammarRequest> = serde_wasm_bindgen::from_value(grammar)
            .map_err(|e| js_error("TypeError", "bad_request", &e.to_string()))?;
        let spec = grammar.map(GrammarRequest::spec).transpose().map_err(|e| engine_error(e.into()))?;
        self.hold_to(spec.as_ref())
    }

    /// The sampler's grammar from the next step on, compiled (a schema checked) now; `None`:
    /// none.
    fn hold_to(&mut self, grammar: Option<&GrammarSpec>) -> Result<(), JsValue> {
        let constraint =
            grammar.map(|spec| self.engine.constraint(spec)).transpose().map_err(engine_error)?;
        self.sampler.set_constraint(constraint);
        Ok(())
    }

    /// The KV cache size asked for, or the model's context length capped.
    fn context_for(&self, asked: Option<usize>) -> usize {
        asked.unwrap_or_else(|| self.engine.model().config().context_length.min(DEFAULT_CONTEXT_CAP))
    }

    /// The session, created anew when it does not exist or holds another context (`None`:
    /// whatever the current one holds).
    fn session_for(&mut self, context: Option<usize>) -> Result<&mut Session, JsValue> {
        let wanted = match (context, &self.session) {
            (None, Some(session)) => session.context_len(),
            (context, _) => self.context_for(context),
        };
        if self.session.as_ref().is_none_or(|s| s.context_len() != wanted) {
            self.session = None; // Its memory goes before the new cache's is taken.
            self.session = Some(self.engine.new_session(wanted).map_err(engine_error)?);
        }
        Ok(self.session.as_mut().expect("created above"))
    }

    fn sync_prompt(
        &mut self,
        prompt: &[u32],
        context: Option<usize>,
        budget: usize,
    ) -> Result<JsValue, JsValue> {
        if context.is_some() {
            self.session_for(context)?;
        }
        let session = self.session.as_mut().ok_or_else(|| engine_error(EngineError::NothingToContinue))?;
        let progress = session.sync_some(&self.engine, prompt, budget).map_err(engine_error)?;
        #[derive(Serialize)]
        struct Progress {
            prompt_tokens: usize,
            reused: usize,
            evaluated: usize,
            replayed: usize,
            remaining: usize,
            context_used: usize,
            context_size: usize,
        }
        to_js(&Progress {
            prompt_tokens: prompt.len(),
            reused: progress.reused,
            evaluated: progress.evaluated,
            replayed: progress.replayed,
            remaining: progress.remaining,
            context_used: session.len(),
            context_size: session.context_len(),
        })
    }

    /// One generated token, outside any answer (the benchmark and the device probe time steps
    /// this way): `{token, text, piece, end_of_generation, context_full, trace?}`. `forced`
    /// takes that token instead of sampling; `trace_top` > 0 adds the trace with each
    /// candidate's piece.
    pub fn step(&mut self, trace_top: u32, forced: Option<u32>) -> Result<JsValue, JsValue> {
        let session = self.session.as_mut().ok_or_else(|| engine_error(EngineError::NothingToContinue))?;
        #[derive(Serialize, Default)]
        struct StepOut<'a> {
            token: Option<u32>,
            text: String,
            piece: String,
            piece_bytes: &'a [u8],
            end_of_generation: bool,
            context_full: bool,
            trace: Option<TracedStep>,
        }
        let step = match session.step(&self.engine, &mut self.sampler, forced, trace_top as usize) {
            Ok(step) => step,
            Err(e) if e.is_context_full() => {
                return to_js(&StepOut { context_full: true, ..StepOut::default() });
            }
            Err(e) => return Err(engine_error(e)),
        };
        to_js(&StepOut {
            token: Some(step.token),
            piece: self.engine.piece(step.token),
            piece_bytes: self.engine.tokenizer().token_bytes(step.token, true),
            text: step.text,
            end_of_generation: step.end_of_generation,
            context_full: false,
            trace: step.trace.map(|trace| TracedStep::new(&self.engine, trace)),
        })
    }

    /// Tokens held by the conversation (for branching: the position of a step).
    pub fn context_used(&self) -> f64 {
        self.session.as_ref().map_or(0, Session::len) as f64
    }

    /// Tokens run again so far because a rollback had to restart a recurrent state from a
    /// checkpoint before them (Qwen3.5; always 0 for other models).
    pub fn replayed(&self) -> f64 {
        self.session.as_ref().map_or(0, Session::replayed) as f64
    }

    /// Decode steps run on one thread so far in this wasm instance (its one engine), because a
    /// trial found one thread faster (another program holding a core); always 0 in the
    /// single-threaded builds.
    pub fn solo_steps(&self) -> f64 {
        crate::parallel::solo_steps() as f64
    }

    /// The recurrent state's checkpoints: `{held, most, bytes_each}` (all 0 for models without
    /// recurrent layers or before a session exists).
    pub fn checkpoints(&self) -> Result<JsValue, JsValue> {
        #[derive(Serialize)]
        struct Checkpoints {
            held: usize,
            most: usize,
            bytes_each: usize,
        }
        let (held, most, bytes_each) = self.session.as_ref().map_or((0, 0, 0), Session::checkpoints);
        to_js(&Checkpoints { held, most, bytes_each })
    }

    /// Runs the conversation on `gpu` from the next request on (the cache starts afresh
    /// there); refused with kind `gpu_unsupported`, saying why, for a model the GPU cannot run.
    /// (Not in the 64-bit-memory build, which has no GPU backend.)
    #[cfg(feature = "gpu")]
    pub fn use_gpu(&mut self, gpu: &super::WebGpu) -> Result<(), JsValue> {
        self.engine.use_gpu(Some(gpu.gpu())).map_err(engine_error)?;
        self.session = None;
        self.answer = None; // Its steps are in the cache that is gone.
        Ok(())
    }

    /// Makes the conversation's cache now, of `context` tokens (the model's default when
    /// absent): on the GPU this uploads the weights, which a load reports as its last phase
    /// rather than the first prompt's time.
    pub fn open_session(&mut self, context: Option<u32>) -> Result<(), JsValue> {
        self.session_for(Some(self.context_for(context.map(|c| c as usize)))).map(drop)
    }

    /// Runs the conversation on the CPU from the next request on (after a lost device too);
    /// nothing for a model whose weights are on its GPU only.
    pub fn use_cpu(&mut self) {
        #[cfg(feature = "gpu")]
        if self.engine.gpu().is_some() && !self.engine.weights_on_gpu_only() {
            let _ = self.engine.use_gpu(None); // Going to the CPU cannot fail.
            self.session = None;
            self.answer = None;
        }
    }

    /// How attention on the CPU keeps its query and `Σ p·V` from the next pass on: `"fast"`
    /// (f32, the default) or `"exact"` (llama.cpp's F16, its bits); anything else is a
    /// `bad_request`.
    pub fn set_attention_precision(&mut self, name: &str) -> Result<(), JsValue> {
        let precision = AttentionPrecision::from_name(name).ok_or_else(|| {
            js_error("TypeError", "bad_request", &format!("precision must be fast or exact, not {name:?}"))
        })?;
        self.engine.set_attention_precision(precision);
        Ok(())
    }

    /// What sessions created from now on keep their cached keys and values as: `"f16"` (the
    /// default), `"q8_0"` or `"f32"` each (llama.cpp's `-ctk`/`-ctv`). Anything else is a
    /// `bad_request`; types other than F16 on the GPU, or Q8_0 for heads that are not whole
    /// blocks of 32, are refused with the engine's error. The session is made anew.
    pub fn set_cache_types(&mut self, keys: &str, values: &str) -> Result<(), JsValue> {
        let kind = |part: &str, name: &str| {
            KvType::from_name(name).ok_or_else(|| {
                let message = format!("cache_type_{part} must be f16, q8_0 or f32, not {name:?}");
                js_error("TypeError", "bad_request", &message)
            })
        };
        let types = KvTypes { keys: kind("k", keys)?, values: kind("v", values)? };
        if types != self.engine.cache_types() {
            self.engine.set_cache_types(types).map_err(engine_error)?;
            self.session = None;
            self.answer = None;
        }
        Ok(())
    }

    /// `[keys, values]`, each `"f16"`, `"q8_0"` or `"f32"`: see [`WebEngine::set_cache_types`].
    pub fn cache_types(&self) -> Vec<String> {
        let types = self.engine.cache_types();
        vec![types.keys.name().into(), types.values.name().into()]
    }

    /// `"fast"` or `"exact"`: see [`WebEngine::set_attention_precision`].
    pub fn attention_precision(&self) -> String {
        self.engine.attention_precision().name().into()
    }

    /// "gpu" or "cpu": where the conversation runs.
    pub fn device(&self) -> String {
        #[cfg(feature = "gpu")]
        if self.engine.gpu().is_some() {
            return "gpu".into();
        }
        "cpu".into()
    }

    /// Bytes of weights a decode step reads (every matrix once): the benchmark's weight
    /// bandwidth is this times the decode rate.
    pub fn decode_weight_bytes(&self) -> f64 {
        self.engine.model().decode_weight_bytes() as f64
    }

    /// Bytes of the conversation's KV cache (and recurrent state) in the wasm memory: what the
    /// cache types decide; 0 without a session, or on the GPU.
    pub fn cache_bytes(&self) -> f64 {
        self.session.as_ref().map_or(0, Session::cache_bytes) as f64
    }

    /// Bytes the conversation holds on the GPU (weights, cache, activations, and the vision
    /// projector's weights once a picture was encoded there); 0 on the CPU.
    pub fn gpu_bytes(&self) -> f64 {
        #[cfg(feature = "gpu")]
        return (self.session.as_ref().map_or(0, Session::gpu_bytes) + self.engine.projector_gpu_bytes())
            as f64;
        #[cfg(not(feature = "gpu"))]
        0.0
    }

    /// Runs what the next `step` needs (the last sampled token), so that on the GPU the page
    /// can await `pending()` first; true if anything ran.
    pub fn advance(&mut self) -> Result<bool, JsValue> {
        let session = self.session.as_mut().ok_or_else(|| engine_error(EngineError::NothingToContinue))?;
        session.advance(&self.engine).map_err(engine_error)
    }

    /// A promise that settles when the GPU has finished what the last call submitted (rejects
    /// with the GPU's error); undefined when there is nothing to wait for (always on the CPU).
    /// Await it after `prefill` and `advance`, before the next call.
    pub fn pending(&self) -> Option<js_sys::Promise> {
        #[cfg(feature = "gpu")]
        return (self.picture.as_ref().and_then(|(_, picture)| picture.pending()))
            .or_else(|| self.session.as_ref().and_then(Session::pending))
            .map(super::gpu::promise);
        #[cfg(not(feature = "gpu"))]
        None
    }

    /// Forgets the conversation (keeps the model and the allocated cache).
    pub fn reset(&mut self) {
        self.answer = None;
        if let Some(session) = &mut self.session {
            session.truncate(0);
        }
    }
}

fn engine_error_of(e: SamplerError) -> JsValue {
    engine_error(EngineError::Sampler(e))
}

/// `{pooling?: 'mean' | 'cls' | 'last', dimensions?, normalize?}` (undefined: the defaults).
fn embed_options(options: JsValue) -> Result<EmbedOptions, JsValue> {
    #[derive(serde::Deserialize, Default)]
    struct EmbedRequest {
        #[serde(default)]
        pooling: Option<String>,
        #[serde(default)]
        dimensions: Option<usize>,
        #[serde(default)]
        normalize: Option<bool>,
    }
    let request: EmbedRequest = if options.is_undefined() || options.is_null() {
        EmbedRequest::default()
    } else {
        serde_wasm_bindgen::from_value(options)
            .map_err(|e| js_error("TypeError", "bad_request", &format!("embedding options: {e}")))?
    };
    let pooling = match request.pooling.as_deref() {
        None => None,
        Some(name) => match Pooling::from_name(name).filter(|p| p.gives_one_vector()) {
            Some(pooling) => Some(pooling),
            None => {
                let message = format!("pooling {name:?} is not 'mean', 'cls' or 'last'");
                return Err(js_error("TypeError", "bad_request", &message));
            }
        },
    };
    Ok(EmbedOptions { pooling, dimensions: request.dimensions, raw: request.normalize == Some(false) })
}

/// `performance.now()` in a window or a worker (the page's clock for step times), or the
/// date's milliseconds where there is none.
fn performance_now() -> f64 {
    let global = js_sys::global();
    let performance = js_sys::Reflect::get(&global, &"performance".into()).ok();
    let now = performance.as_ref().and_then(|p| js_sys::Reflect::get(p, &"now".into()).ok());
    match (performance, now.and_then(|f| f.dyn_into::<js_sys::Function>().ok())) {
        (Some(performance), Some(now)) => now.call0(&performance).ok().and_then(|t| t.as_f64()),
        _ => None,
    }
    .unwrap_or_else(js_sys::Date::now)
}
