//! The JavaScript boundary. Only this module knows about `JsValue`; everything it exposes is a
//! thin conversion around the native API, so the core is tested natively.

use std::mem::MaybeUninit;

use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::gguf::{self, GgufError, HeaderParse};
use crate::inspect::Report;

#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

/// Starts the pool of Web Workers that parallel work runs on (threaded build only); JS awaits
/// it once, before any inference.
#[cfg(feature = "threads")]
pub use wasm_bindgen_rayon::init_thread_pool;

/// What this build is: version, whether it was compiled with SIMD128 and relaxed SIMD, and how
/// many threads its parallel work runs on (1 in the single-threaded build).
#[wasm_bindgen]
pub fn engine_info() -> Result<JsValue, JsValue> {
    #[derive(Serialize)]
    struct Info {
        version: &'static str,
        simd128: bool,
        relaxed_simd: bool,
        threads: usize,
    }
    to_js(&Info {
        version: env!("CARGO_PKG_VERSION"),
        simd128: cfg!(target_feature = "simd128"),
        relaxed_simd: cfg!(target_feature = "relaxed-simd"),
        threads: crate::parallel::threads(),
    })
}

/// Crashes the engine on purpose, the way a bug would (a panic, which traps), so the page test
/// can check that a crash is reported clearly and a fresh engine takes over.
#[wasm_bindgen]
pub fn deliberate_trap() {
    panic!("deliberate trap (the worker's `trap` request)");
}

/// Inspects the first `prefix.len()` bytes of a file of `file_size` bytes; `memory64` says
/// whether the page can run the 64-bit-memory build (it decides which files fit).
///
/// Returns `{status: "need_more", at_least}` when the header continues past the prefix, or
/// `{status: "complete", report}`. A malformed file throws an `Error` named `GgufError` whose
/// `kind` is the snake_case error kind.
#[wasm_bindgen]
pub fn inspect_prefix(prefix: &[u8], file_size: f64, memory64: bool) -> Result<JsValue, JsValue> {
    #[derive(Serialize)]
    #[serde(tag = "status", rename_all = "snake_case")]
    enum Outcome {
        NeedMore { at_least: u64 },
        Complete { report: Box<Report> },
    }
    let file_size = js_size(file_size)?;
    let outcome = match gguf::parse_header(prefix, file_size).map_err(gguf_error)? {
        HeaderParse::NeedMore { at_least } => Outcome::NeedMore { at_least },
        HeaderParse::Complete(header) => {
            let mut report = Box::new(Report::new(&header));
            if let (true, Err(reason)) = (report.runs.ok, MemoryKind::for_model(file_size, memory64)) {
                report.runs = crate::inspect::Runs { ok: false, reason: Some(reason) };
            }
            Outcome::Complete { report }
        }
    };
    to_js(&outcome)
}

/// Which build's memory a model file of `size` bytes needs: `"wasm32"` or `"memory64"`, given
/// whether the page can run the 64-bit-memory build. Throws `too_large` (saying why) when
/// neither can hold it.
#[wasm_bindgen]
pub fn memory_for_model(size: f64, memory64: bool) -> Result<String, JsValue> {
    let size = js_size(size)?;
    match MemoryKind::for_model(size, memory64) {
        Ok(MemoryKind::Wasm32) => Ok("wasm32".into()),
        Ok(MemoryKind::Memory64) => Ok("memory64".into()),
        Err(message) => Err(js_error("RangeError", "too_large", &message)),
    }
}

/// The two memories a build can have. A wasm32 memory holds 4 GiB; a 64-bit one (Memory64)
/// 16 GiB in Chrome and Firefox. Files that fit in wasm32 stay there: its bounds checks are
/// free (guard pages), and it is the only memory the threaded builds have.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum MemoryKind {
    Wasm32,
    Memory64,
}

/// The room inference needs beside the file: KV cache, scratch buffers, the engine itself.
const INFERENCE_ROOM: u64 = 384 << 20;
/// The largest file a 4 GiB wasm32 memory can hold.
const WASM32_MODEL_LIMIT: u64 = (4 << 30) - INFERENCE_ROOM;
/// The largest file a 16 GiB 64-bit memory can hold.
const MEMORY64_MODEL_LIMIT: u64 = (16 << 30) - INFERENCE_ROOM;

impl MemoryKind {
    /// The memory a file of `size` bytes needs, or why none here can hold it.
    fn for_model(size: u64, memory64_available: bool) -> Result<MemoryKind, String> {
        let gib = |bytes: u64| bytes as f64 / (1u64 << 30) as f64;
        if size <= WASM32_MODEL_LIMIT {
            Ok(MemoryKind::Wasm32)
        } else if size > MEMORY64_MODEL_LIMIT {
            Err(format!(
                "a {:.2} GiB file does not fit in a web page: WebAssembly's 64-bit memory holds \
                 16 GiB, and inference needs some of it (files up to {:.2} GiB can load)",
                gib(size),
                gib(MEMORY64_MODEL_LIMIT)
            ))
        } else if memory64_available {
            Ok(MemoryKind::Memory64)
        } else {
            Err(format!(
                "a {:.2} GiB file needs WebAssembly's 64-bit memory (Memory64 with relaxed SIMD: \
                 Chrome 133+, Firefox 145+), which this browser does not run; here files up to \
                 {:.2} GiB can load",
                gib(size),
                gib(WASM32_MODEL_LIMIT)
            ))
        }
    }
}

/// A byte count from JS: a whole number in 0..=2^53.
fn js_size(value: f64) -> Result<u64, JsValue> {
    if value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= 9_007_199_254_740_992.0 {
        Ok(value as u64)
    } else {
        Err(js_error("RangeError", "invalid", &format!("file size {value} is not a byte count")))
    }
}

fn to_js<T: Serialize>(value: &T) -> Result<JsValue, JsValue> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| js_error("Error", "serialize", &e.to_string()))
}

fn gguf_error(e: GgufError) -> JsValue {
    js_error("GgufError", e.kind().name(), &e.to_string())
}

/// A real JS `Error` with a `name` and a machine-readable `kind`.
fn js_error(name: &str, kind: &str, message: &str) -> JsValue {
    let error = js_sys::Error::new(message);
    error.set_name(name);
    // Setting a property on a fresh Error object cannot fail.
    let _ = js_sys::Reflect::set(&error, &"kind".into(), &kind.into());
    error.into()
}

// --- Inference, driven one step at a time by the Web Worker ---------------------------------

use crate::chat::ChatMessage;
use crate::engine::{Engine, EngineError, Session};
use crate::model::ModelBytes;
use crate::sampler::{Sampler, SamplerSettings, StepTrace};

/// Receives a model file in chunks straight into wasm memory, so JavaScript never holds a
/// second full copy: `new ModelLoader(size)`, then chunks until done, then `finish()`.
///
/// `push` copies each chunk once, from the JS array straight to its place (a `&[u8]` argument
/// would be copied twice, through a temporary buffer).
///
/// A file that fits in one allocation (2 GiB on wasm32) is reserved whole up front. A larger
/// one is held in pieces split between tensors ([`ModelBytes`]): its header is read first, to
/// learn where the tensors lie, and each piece is reserved when the bytes reach it.
#[wasm_bindgen]
pub struct ModelLoader {
    /// Pieces so far, each reserved at its planned length; the last one is being filled.
    pieces: Vec<Vec<u8>>,
    /// The planned length of every piece, once known (immediately for a one-piece file).
    plan: Option<Vec<usize>>,
    /// Bytes received before the plan is known (the start of the file, header included).
    head: Vec<u8>,
    /// How long `head` must be before the header can parse (the parser's last `NeedMore`).
    head_needed: u64,
    expected: usize,
    received: usize,
    max_piece: u64,
    /// The length of the open window, the room the next bytes are copied into (0: none open).
    window: usize,
}

#[wasm_bindgen]
impl ModelLoader {
    /// Checks the size and, for a one-piece file, reserves it: a file too large for this wasm
    /// memory fails here, with a clear error, before anything is copied.
    #[wasm_bindgen(constructor)]
    pub fn new(size: f64) -> Result<ModelLoader, JsValue> {
        ModelLoader::with_piece_limit(size, MAX_PIECE)
    }

    /// Copies the next bytes of the file from a JS array straight into place: one copy, no
    /// temporary buffer.
    pub fn push(&mut self, chunk: &js_sys::Uint8Array) -> Result<(), JsValue> {
        let length = chunk.length() as usize;
        self.check_more(length)?;
        let mut offset = 0;
        while offset < length {
            let window = self.open_window(length - offset)?;
            let end = offset + window.len();
            let written = chunk.subarray(offset as u32, end as u32).copy_to_uninit(window).len();
            self.wrote(written)?;
            offset = end;
        }
        Ok(())
    }

    /// Bytes received so far.
    pub fn received(&self) -> f64 {
        self.received as f64
    }

    /// Validates the file and builds the engine (consumes the loader).
    pub fn finish(self) -> Result<WebEngine, JsValue> {
        if self.received != self.expected || self.plan.is_none() {
            let message = format!("received {} of {} bytes", self.received, self.expected);
            return Err(js_error("RangeError", "incomplete", &message));
        }
        let engine = Engine::load(ModelBytes::from_pieces(self.pieces)).map_err(engine_error)?;
        Ok(WebEngine {
            engine,
            session: None,
            prompt: Vec::new(),
            sampler: Sampler::new(SamplerSettings::default()).map_err(engine_error_of)?,
        })
    }
}

impl ModelLoader {
    /// [`ModelLoader::new`] with pieces of at most `max_piece` bytes (tests use small ones).
    pub fn with_piece_limit(size: f64, max_piece: u64) -> Result<ModelLoader, JsValue> {
        let size = js_size(size)?;
        // A file too large for this build's memory should have gone to the 64-bit build (the
        // worker asks `memory_for_model` first); in a wasm32 build it means Memory64 is not there.
        let memory64_here = cfg!(target_pointer_width = "64");
        MemoryKind::for_model(size, memory64_here)
            .map_err(|message| js_error("RangeError", "too_large", &message))?;
        let expected = usize::try_from(size).map_err(|_| too_large(size))?;
        let mut loader = ModelLoader {
            pieces: Vec::new(),
            plan: None,
            head: Vec::new(),
            head_needed: 0,
            expected,
            received: 0,
            max_piece,
            window: 0,
        };
        if size <= max_piece {
            loader.plan = Some(vec![expected]);
            loader.start_piece(expected)?;
        }
        Ok(loader)
    }

    /// [`push`](Self::push) for bytes already in wasm memory (tests, native callers).
    pub fn push_bytes(&mut self, mut chunk: &[u8]) -> Result<(), JsValue> {
        self.check_more(chunk.len())?;
        while !chunk.is_empty() {
            let window = self.open_window(chunk.len())?;
            let (now, rest) = chunk.split_at(window.len());
            for (slot, &byte) in window.iter_mut().zip(now) {
                slot.write(byte);
            }
            self.wrote(now.len())?;
            chunk = rest;
        }
        Ok(())
    }

    fn check_more(&self, length: usize) -> Result<(), JsValue> {
        if length > self.expected - self.received {
            return Err(too_many_bytes("more bytes than the announced file size"));
        }
        Ok(())
    }

    /// Records that the open window, `count` bytes, now holds the file's next bytes.
    fn wrote(&mut self, count: usize) -> Result<(), JsValue> {
        if count != self.window {
            return Err(too_many_bytes("a window was not filled exactly"));
        }
        self.window = 0;
        self.received += count;
        let Some(buffer) = self.current_buffer() else {
            return Err(too_many_bytes("more bytes than the planned pieces"));
        };
        // SAFETY: `open_window` handed out exactly the `count` bytes of spare capacity after
        // `buffer.len()`, and the caller (push or push_bytes) initialized all of them.
        unsafe { buffer.set_len(buffer.len() + count) };
        if self.plan.is_none() {
            return self.plan_pieces();
        }
        Ok(())
    }

    /// Pieces allocated so far.
    pub fn piece_count(&self) -> usize {
        self.pieces.len()
    }

    /// The next window: room for up to `wanted` more bytes at the end of the head (before the
    /// plan is known; never past the announced size) or of the current piece, starting the next
    /// piece when this one is full. The room is spare capacity, written before it is counted.
    fn open_window(&mut self, wanted: usize) -> Result<&mut [MaybeUninit<u8>], JsValue> {
        let mut wanted = wanted;
        if self.plan.is_none() {
            wanted = wanted.min(self.expected - self.received);
            self.head.try_reserve(wanted).map_err(|_| too_large(self.expected as u64))?;
        } else if self.pieces.last().is_none_or(|piece| piece.len() == piece.capacity()) {
            let next = self.plan.as_deref().and_then(|plan| plan.get(self.pieces.len()));
            let &length = next.ok_or_else(|| too_many_bytes("more bytes than the planned pieces"))?;
            self.start_piece(length)?;
        }
        let missing = || too_many_bytes("more bytes than the planned pieces");
        let room =
            self.current_buffer().map(|buffer| buffer.capacity() - buffer.len()).ok_or_else(missing)?;
        self.window = wanted.min(room);
        let length = self.window;
        Ok(&mut self.current_buffer().ok_or_else(missing)?.spare_capacity_mut()[..length])
    }

    /// The buffer the next bytes go to: the head before the plan is known, then the last piece.
    fn current_buffer(&mut self) -> Option<&mut Vec<u8>> {
        if self.plan.is_none() { Some(&mut self.head) } else { self.pieces.last_mut() }
    }

    /// Once the header is in, plans the pieces and moves the bytes received so far into them.
    fn plan_pieces(&mut self) -> Result<(), JsValue> {
        let size = self.expected as u64;
        if (self.head.len() as u64) < self.head_needed {
            return Ok(()); // Re-parsing a growing header on every chunk would be quadratic.
        }
        let header = match gguf::parse_header(&self.head, size).map_err(gguf_error)? {
            HeaderParse::NeedMore { at_least } if at_least > self.max_piece => {
                return Err(too_large_piece(at_least, "its header"));
            }
            HeaderParse::NeedMore { at_least } => {
                self.head_needed = at_least;
                return Ok(());
            }
            HeaderParse::Complete(header) => header,
        };
        let starts = crate::model::piece_starts(&header, self.max_piece)
            .ok_or_else(|| too_large_piece(self.max_piece, "one of its tensors"))?;
        let mut lengths = Vec::with_capacity(starts.len() + 1);
        let mut previous = 0u64;
        for &start in starts.iter().chain(std::iter::once(&size)) {
            lengths.push((start - previous) as usize);
            previous = start;
        }
        self.plan = Some(lengths);
        // The head's bytes were counted when they came; they only move into the pieces.
        let head = std::mem::take(&mut self.head);
        self.received -= head.len();
        self.push_bytes(&head)
    }

    /// Reserves the next piece at its full length (written by the copies, never zeroed first:
    /// zeroing 2 GiB cost seconds of a 3.4 GB load).
    fn start_piece(&mut self, length: usize) -> Result<(), JsValue> {
        let mut piece = Vec::new();
        piece.try_reserve_exact(length).map_err(|_| too_large(self.expected as u64))?;
        self.pieces.push(piece);
        Ok(())
    }
}

fn too_many_bytes(message: &str) -> JsValue {
    js_error("RangeError", "too_many_bytes", message)
}

/// The largest single allocation Rust allows (`isize::MAX`: 2 GiB on wasm32): one piece of a
/// file.
const MAX_PIECE: u64 = isize::MAX as u64;

/// An allocation for the file failed: the browser would not grow the memory that far.
fn too_large(size: u64) -> JsValue {
    let message = format!(
        "a {:.2} GiB file does not fit: the browser refused to grow this page's WebAssembly \
         memory that far",
        size as f64 / (1u64 << 30) as f64
    );
    js_error("RangeError", "too_large", &message)
}

/// Part of a file is larger than one allocation can be.
fn too_large_piece(limit: u64, what: &str) -> JsValue {
    let message =
        format!("the file does not fit: {what} exceeds the {limit} bytes one allocation can hold here");
    js_error("RangeError", "too_large", &message)
}

/// A loaded model and its one conversation.
#[wasm_bindgen]
pub struct WebEngine {
    engine: Engine,
    session: Option<Session>,
    /// The prompt `prepare_chat` made, which `prefill` brings the cache up to part by part.
    prompt: Vec<u32>,
    sampler: Sampler,
}

#[derive(serde::Deserialize)]
struct ChatRequest {
    messages: Vec<ChatMessage>,
    #[serde(default)]
    enable_thinking: Option<bool>,
    #[serde(default)]
    settings: SamplerSettings,
    /// KV cache size in tokens; the model's context length (capped at 4096) when absent.
    #[serde(default)]
    context: Option<usize>,
}

#[wasm_bindgen]
impl WebEngine {
    /// Architecture, sizes, the chat template's origin and the end-of-generation tokens.
    pub fn info(&self) -> Result<JsValue, JsValue> {
        #[derive(Serialize)]
        struct Info<'a> {
            architecture: String,
            vocab_size: usize,
            context_length: usize,
            template: &'a crate::chat::TemplateSource,
            end_of_generation: &'a [u32],
            recommended_sampling: SamplerSettings,
        }
        let config = self.engine.model().config();
        to_js(&Info {
            architecture: format!("{:?}", config.architecture).to_lowercase(),
            vocab_size: config.vocab_size,
            context_length: config.context_length,
            template: self.engine.template().source(),
            end_of_generation: self.engine.tokenizer().end_of_generation_tokens(),
            recommended_sampling: self.engine.recommended_sampling(),
        })
    }

    /// Token ids of `text` as a prompt (llama.cpp's defaults: special tokens parsed, BOS when
    /// the model asks for it), e.g. so a benchmark feeds both engines the same prompt.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.engine.encode(text)
    }

    /// The inspector's report for the loaded file (no second read of the file).
    pub fn inspect(&self) -> Result<JsValue, JsValue> {
        to_js(&Report::new(self.engine.model().header()))
    }

    /// Renders `{messages, enable_thinking?, settings?, context?}` through the chat template,
    /// tokenizes it and makes sure a cache of that context exists; `prefill` then evaluates it.
    /// Returns `{prompt_tokens, context_size}`.
    pub fn prepare_chat(&mut self, request: JsValue) -> Result<JsValue, JsValue> {
        let request: ChatRequest = serde_wasm_bindgen::from_value(request)
            .map_err(|e| js_error("TypeError", "bad_request", &e.to_string()))?;
        // Each answer starts its random stream afresh: the same seed and conversation give the
        // same answer.
        self.sampler = Sampler::new(request.settings).map_err(engine_error_of)?;
        let context = self.context_for(request.context);
        self.prompt = self
            .engine
            .chat_prompt(&request.messages, request.enable_thinking, context)
            .map_err(engine_error)?;
        let prompt_tokens = self.prompt.len();
        let context_size = self.session_for(Some(context))?.context_len();
        #[derive(Serialize)]
        struct Prepared {
            prompt_tokens: usize,
            context_size: usize,
        }
        to_js(&Prepared { prompt_tokens, context_size })
    }

    /// Evaluates up to `budget` more tokens of the prepared prompt (the cache keeps what it
    /// already holds of it), so the worker can report progress and honour a stop between parts.
    /// Returns `{reused, evaluated, remaining, context_used}`; call until `remaining` is 0.
    pub fn prefill(&mut self, budget: u32) -> Result<JsValue, JsValue> {
        let prompt = std::mem::take(&mut self.prompt);
        let result = self.sync_prompt(&prompt, None, budget as usize);
        self.prompt = prompt;
        result
    }

    /// Brings the KV cache up to `tokens` exactly (no template), with greedy-or-given sampling
    /// settings: what the benchmark page and tests need for a fixed-length prefill.
    /// Returns the same `{prompt_tokens, reused, evaluated, context_used, context_size}`.
    pub fn prepare_tokens(&mut self, tokens: Vec<u32>, context: Option<u32>) -> Result<JsValue, JsValue> {
        let vocab = self.engine.model().config().vocab_size;
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= vocab) {
            let message = format!("token id {bad} is outside the vocabulary of {vocab}");
            return Err(js_error("RangeError", "bad_token", &message));
        }
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

    /// The KV cache size asked for, or the model's context length capped at 4096.
    fn context_for(&self, asked: Option<usize>) -> usize {
        asked.unwrap_or_else(|| self.engine.model().config().context_length.min(4096))
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
            remaining: usize,
            context_used: usize,
            context_size: usize,
        }
        to_js(&Progress {
            prompt_tokens: prompt.len(),
            reused: progress.reused,
            evaluated: progress.evaluated,
            remaining: progress.remaining,
            context_used: session.len(),
            context_size: session.context_len(),
        })
    }

    /// One generated token: `{token, text, piece, end_of_generation, context_full, trace?}`.
    /// `forced` takes that token instead of sampling (branching); `trace_top` > 0 adds the trace
    /// with each candidate's piece.
    pub fn step(&mut self, trace_top: u32, forced: Option<u32>) -> Result<JsValue, JsValue> {
        let session = self.session.as_mut().ok_or_else(|| engine_error(EngineError::NothingToContinue))?;
        #[derive(Serialize)]
        struct Traced {
            #[serde(flatten)]
            trace: StepTrace,
            pieces: Vec<String>,
        }
        #[derive(Serialize)]
        struct StepOut {
            token: Option<u32>,
            text: String,
            piece: String,
            end_of_generation: bool,
            context_full: bool,
            trace: Option<Traced>,
        }
        let step = match session.step(&self.engine, &mut self.sampler, forced, trace_top as usize) {
            Ok(step) => step,
            Err(e) if e.is_context_full() => {
                let out = StepOut {
                    token: None,
                    text: String::new(),
                    piece: String::new(),
                    end_of_generation: false,
                    context_full: true,
                    trace: None,
                };
                return to_js(&out);
            }
            Err(e) => return Err(engine_error(e)),
        };
        let trace = step.trace.map(|trace| Traced {
            pieces: trace.candidates.iter().map(|c| self.engine.piece(c.id)).collect(),
            trace,
        });
        to_js(&StepOut {
            token: Some(step.token),
            piece: self.engine.piece(step.token),
            text: step.text,
            end_of_generation: step.end_of_generation,
            context_full: false,
            trace,
        })
    }

    /// Tokens held by the conversation (for branching: the position of a step).
    pub fn context_used(&self) -> f64 {
        self.session.as_ref().map_or(0, Session::len) as f64
    }

    /// Rolls the conversation back to its first `len` tokens (branching from a step).
    pub fn truncate(&mut self, len: u32) {
        if let Some(session) = &mut self.session {
            session.truncate(len as usize);
        }
    }

    /// Forgets the conversation (keeps the model and the allocated cache).
    pub fn reset(&mut self) {
        if let Some(session) = &mut self.session {
            session.truncate(0);
        }
    }
}

fn engine_error(e: EngineError) -> JsValue {
    let kind = match &e {
        EngineError::Model(model) => model.kind_name(),
        EngineError::Tokenizer(_) => "tokenizer",
        EngineError::Chat(_) => "chat_template",
        EngineError::Sampler(_) => "sampler",
        EngineError::VocabularyMismatch { .. } => "vocabulary_mismatch",
        EngineError::EmptyPrompt => "empty_prompt",
        EngineError::PromptTooLong { .. } | EngineError::RenderedPromptTooLong { .. } => "prompt_too_long",
        EngineError::NothingToContinue => "nothing_to_continue",
    };
    js_error("EngineError", kind, &e.to_string())
}

fn engine_error_of(e: crate::sampler::SamplerError) -> JsValue {
    engine_error(EngineError::Sampler(e))
}
