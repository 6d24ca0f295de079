//! The loaded model and the conversations run on it, driven one step at a time so a caller
//! (the CLI, the Web Worker) can stream each token and stop between any two.
//!
//! An [`Engine`] is what a file becomes: model, tokenizer, chat template. A [`Session`] is one
//! conversation's state: the cache, the tokens it holds, the logits of the last one. A
//! session never recomputes what its cache already holds: [`Session::sync`] keeps the longest
//! common prefix of the old and new token sequences and evaluates only the rest, so a chat
//! turn prefills just the new message, and rolling back to branch is a truncation. Where some
//! layers keep a recurrent state (Qwen3.5), a rollback goes to the cache's nearest checkpoint
//! and the tokens from there are replayed; [`Session::replayed`] counts them.
//!
//! A session runs on the CPU, or on the GPU when the engine has one ([`Engine::use_gpu`]).
//! In the browser the GPU answers through the event loop: after a call that ran tokens, the
//! caller awaits [`Session::pending`] before the next one.

mod answer;
#[cfg(test)]
mod contract;
mod device;
mod embed;
mod error;
mod generation;
mod images;
mod request;

pub use answer::{AnswerText, CallDelta, Delta};
pub use embed::Embeddings;
pub use error::EngineError;
pub use generation::{
    AnswerLimits, Checkpoints, Event, Finish, Generation, PromptFacts, Stats, StepRecord, TracedStep, Usage,
};
pub use images::{IMAGE_IDS, is_image_id};
pub use request::{
    AnswerRequest, BranchRequest, ChatRequest, DEFAULT_CONTEXT_CAP, DEFAULT_MAX_TOKENS, GrammarRequest,
    LimitsRequest, TextRequest,
};

use crate::chat::{
    CallSyntax, ChatError, ChatMessage, ChatTemplate, ReasoningEffort, RenderOptions, ReplyFormat, ToolUse,
    harmony_final_header,
};
use crate::gguf::{GgufHeader, Metadata};
use crate::grammar::{Constraint, GrammarCompiler, GrammarError, GrammarSpec};
use crate::model::{AttentionPrecision, BatchInput, KvTypes, LogitsFor, Model, ModelBytes};
use crate::sampler::{BestLogits, LogitsRead, ReadLogits, Sampler, SamplerSettings, StepTrace};
use crate::tokenizer::{EncodeOptions, TokenKind, Tokenizer, Utf8Stream, token_count};
use crate::vision::{EncodedPicture, PromptPart, RgbImage, VisionEncoder};
use device::Device;

/// Tokens per forward call during prefill: large enough that every weight block is reused
/// across many rows, small enough that the scratch buffers stay a few MB.
pub const PREFILL_BATCH: usize = 64;

/// Where a picture goes in prompt text: llama.cpp's media marker (`mtmd_default_marker`).
pub const MEDIA_MARKER: &str = "<__media__>";

/// What an assistant turn is asked for beyond its messages.
#[derive(Clone, Debug, Default)]
pub struct TurnOptions {
    /// Qwen3's switch for `<think>` reasoning; `None` leaves the template's default.
    pub enable_thinking: Option<bool>,
    /// How hard to reason, where the template reads it (gpt-oss); `None`: its default.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// The tools offered (none, or `tool_choice: 'none'`: `None`).
    pub tools: Option<ToolUse>,
    /// What the answer must follow, if no tools are offered.
    pub response_format: Option<GrammarSpec>,
    /// Read the reasoning apart from the content (`reasoning_content`).
    pub split_reasoning: bool,
    /// The pictures of the conversation, in order: each goes where the rendered prompt has a
    /// [`MEDIA_MARKER`] (the messages' picture parts render as one).
    pub images: Vec<RgbImage>,
}

/// An assistant turn, ready to run.
#[derive(Debug)]
pub struct ChatTurn {
    pub tokens: Vec<u32>,
    pub reply: ReplyFormat,
    pub grammar: Option<GrammarSpec>,
}

/// A picture on its way into a prompt, encoded square by square ([`Engine::begin_picture`]).
pub struct PendingPicture {
    hash: String,
    /// `None` when the engine held the picture already.
    encoding: Option<crate::vision::PictureEncoding>,
    /// The square on the GPU (in the browser, until the next call collects it).
    #[cfg(feature = "gpu")]
    on_gpu: Option<crate::gpu::GpuSquare>,
}

impl PendingPicture {
    /// Squares still to encode (0 for a picture encoded before).
    pub fn squares_left(&self) -> usize {
        let left = self.encoding.as_ref().map_or(0, |e| e.squares_left());
        // A square on its way on the GPU is done here: `finish_picture` collects it.
        #[cfg(feature = "gpu")]
        return left - usize::from(self.on_gpu.is_some());
        #[cfg(not(feature = "gpu"))]
        left
    }

    /// Squares to encode in all (0 for a picture encoded before).
    pub fn squares(&self) -> usize {
        self.encoding.as_ref().map_or(0, |e| e.squares())
    }

    /// Fires when the square on the GPU is encoded (None when none is on its way).
    #[cfg(feature = "gpu")]
    pub fn pending(&self) -> Option<crate::gpu::Signal> {
        self.on_gpu.as_ref().map(crate::gpu::GpuSquare::pending)
    }
}

pub struct Engine {
    model: Model,
    /// The device new sessions run on; the CPU when none.
    #[cfg(feature = "gpu")]
    gpu: Option<std::sync::Arc<crate::gpu::Gpu>>,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    /// Bytes of the longest vocabulary entry: a prompt of n tokens spells at most n times this.
    longest_token: usize,
    /// Grammars compile against the vocabulary's trie, built on the first one asked for.
    grammars: std::sync::OnceLock<Result<GrammarCompiler, GrammarError>>,
    /// How sessions on the CPU keep attention's query and `Σ p·V` (`'fast'` unless set).
    attention_precision: AttentionPrecision,
    /// What new sessions keep their cached keys and values as (F16 unless set).
    cache_types: KvTypes,
    /// The vision projector loaded beside the model, which encodes pictures; none without one.
    vision: Option<VisionEncoder>,
    /// Pictures encoded so far, by content hash, and how many times the encoder ran.
    images: images::ImageTable,
    images_encoded: std::sync::atomic::AtomicUsize,
    /// The projector's weights on the GPU, uploaded with the first picture there.
    #[cfg(feature = "gpu")]
    vision_gpu: std::sync::Mutex<Option<crate::gpu::GpuVision>>,
    /// The weights that are on the GPU only (streamed there as the file arrived), where they are.
    #[cfg(feature = "gpu")]
    weights_on_gpu: Option<crate::gpu::DeviceWeights>,
}

impl Engine {
    /// Validates and takes ownership of a whole GGUF file.
    pub fn load(file: impl Into<ModelBytes>) -> Result<Engine, EngineError> {
        Self::from_model(Model::load(file)?)
    }

    /// An engine for a model whose weights were streamed to `gpu` as its file arrived
    /// ([`crate::gpu::WeightStream`]): it runs there only, since no other device has them.
    #[cfg(feature = "gpu")]
    pub fn with_weights_on_gpu(
        model: Model,
        gpu: std::sync::Arc<crate::gpu::Gpu>,
        weights: crate::gpu::DeviceWeights,
    ) -> Result<Engine, EngineError> {
        let mut engine = Self::from_model(model)?;
        crate::gpu::GpuState::check(&gpu, &engine.model)?;
        engine.gpu = Some(gpu);
        engine.weights_on_gpu = Some(weights);
        Ok(engine)
    }

    fn from_model(model: Model) -> Result<Engine, EngineError> {
        let (tokenizer, template) = tokenizer_and_template(model.metadata(), model.config().vocab_size)?;
        let longest_token = (0..tokenizer.vocab_size() as u32)
            .filter_map(|id| tokenizer.token_str(id))
            .map(str::len)
            .max()
            .unwrap_or(1)
            .max(1);
        Ok(Engine {
            model,
            tokenizer,
            template,
            longest_token,
            grammars: std::sync::OnceLock::new(),
            attention_precision: AttentionPrecision::Fast,
            cache_types: KvTypes::default(),
            vision: None,
            images: images::ImageTable::default(),
            images_encoded: Default::default(),
            #[cfg(feature = "gpu")]
            gpu: None,
            #[cfg(feature = "gpu")]
            vision_gpu: Default::default(),
            #[cfg(feature = "gpu")]
            weights_on_gpu: None,
        })
    }

    /// Loads a vision projector (mmproj) beside the model, so that prompts can hold pictures.
    /// Refused unless its embeddings are as wide as the model's (llama.cpp's check).
    pub fn attach_projector(&mut self, file: impl Into<ModelBytes>) -> Result<(), EngineError> {
        self.attach_projector_limited(file, None, None)
    }

    /// [`attach_projector`](Self::attach_projector) with limits on a picture's rows, as
    /// [`set_image_tokens`](Self::set_image_tokens) takes them; refused as a whole (the engine
    /// as it was) where the projector or the limits are.
    pub fn attach_projector_limited(
        &mut self,
        file: impl Into<ModelBytes>,
        min_tokens: Option<usize>,
        max_tokens: Option<usize>,
    ) -> Result<(), EngineError> {
        let mut encoder = VisionEncoder::load(file.into())?;
        let (projector, model) = (encoder.shape().output_width, self.model.config().input_width());
        if projector != model {
            return Err(EngineError::MmprojMismatch { projector, model });
        }
        if min_tokens.is_some() || max_tokens.is_some() {
            encoder.set_image_tokens(min_tokens, max_tokens).map_err(EngineError::BadImageTokens)?;
        }
        self.vision = Some(encoder);
        // Pictures encoded by another projector are not this one's, nor are its weights.
        self.images.forget_all();
        #[cfg(feature = "gpu")]
        self.forget_vision_gpu();
        Ok(())
    }

    /// Limits the rows a picture may take, for projectors that size pictures at their own
    /// aspect (Gemma 4: 70 to 1120 rows; LFM2-VL: 64 to 256), as mtmd's `image_min_tokens` and
    /// `image_max_tokens` do; `None` keeps the projector's own bound. Fewer rows encode faster
    /// (the encoder's attention grows with the square of a picture's patches). Returns the
    /// limits now in force (`None` for a projector whose pictures have a fixed size, which
    /// takes none, as mtmd ignores them there). Pictures encoded before are forgotten.
    pub fn set_image_tokens(
        &mut self,
        min: Option<usize>,
        max: Option<usize>,
    ) -> Result<Option<(usize, usize)>, EngineError> {
        let encoder = self.vision.as_mut().ok_or(EngineError::NoMmproj)?;
        let limits = encoder.set_image_tokens(min, max).map_err(EngineError::BadImageTokens)?;
        self.images.forget_all();
        Ok(limits)
    }

    /// The vision projector, if one is attached.
    pub fn projector(&self) -> Option<&VisionEncoder> {
        self.vision.as_ref()
    }

    /// How many pictures the encoder has run on: a picture sent again (a follow-up question, a
    /// regenerated answer) is found by its content hash and not encoded twice.
    pub fn images_encoded(&self) -> usize {
        self.images_encoded.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The ids that stand for a picture in a prompt: its rows (see [`IMAGE_IDS`]) and its
    /// projector's marker tokens around and between them, as mtmd tokenizes them. Encoded now,
    /// or found among those encoded before.
    pub fn image_ids(&self, image: &RgbImage) -> Result<Vec<u32>, EngineError> {
        self.picture_ids(image, image.content_hash())
    }

    /// [`Engine::image_ids`] of a picture whose content hash is `hash`.
    fn picture_ids(&self, image: &RgbImage, hash: String) -> Result<Vec<u32>, EngineError> {
        let mut picture = self.begin_picture_hashed(image, hash)?;
        while picture.squares_left() > 0 {
            // Whole, with nothing to await between squares: on the GPU only where it is waited
            // for (natively).
            self.encode_square_on(&mut picture, cfg!(not(target_family = "wasm")))?;
        }
        self.finish_picture(picture)
    }

    /// [`Engine::image_ids`] in steps, so that a caller can report progress and take a stop
    /// between the squares of a tiled picture: this lays the picture out (nothing to encode
    /// when it was encoded before), [`Engine::encode_next_square`] encodes one square, and
    /// [`Engine::finish_picture`] gives its ids.
    pub fn begin_picture(&self, image: &RgbImage) -> Result<PendingPicture, EngineError> {
        self.begin_picture_hashed(image, image.content_hash())
    }

    fn begin_picture_hashed(&self, image: &RgbImage, hash: String) -> Result<PendingPicture, EngineError> {
        let encoder = self.vision.as_ref().ok_or(EngineError::NoMmproj)?;
        let encoding = match self.images.ids_of(&hash) {
            Some(_) => None,
            None => Some(encoder.begin(image)?),
        };
        #[cfg(feature = "gpu")]
        return Ok(PendingPicture { hash, encoding, on_gpu: None });
        #[cfg(not(feature = "gpu"))]
        Ok(PendingPicture { hash, encoding })
    }

    /// Encodes the next square of a picture begun with [`Engine::begin_picture`]: on the
    /// engine's GPU where it has one (natively waited for; in the browser, submitted and
    /// collected by the next call or [`Engine::finish_picture`], once
    /// [`PendingPicture::pending`] has fired), else on the CPU.
    pub fn encode_next_square(&self, picture: &mut PendingPicture) -> Result<(), EngineError> {
        self.encode_square_on(picture, true)
    }

    /// [`Engine::encode_next_square`], on the GPU only where `gpu` allows it.
    #[cfg_attr(not(feature = "gpu"), allow(unused_variables, reason = "a build without a GPU"))]
    fn encode_square_on(&self, picture: &mut PendingPicture, gpu: bool) -> Result<(), EngineError> {
        let encoder = self.vision.as_ref().ok_or(EngineError::NoMmproj)?;
        let Some(encoding) = &mut picture.encoding else { return Ok(()) };
        #[cfg(feature = "gpu")]
        if let Some(square) = picture.on_gpu.take() {
            encoding.add_square(square.collect()?);
        }
        #[cfg(feature = "gpu")]
        if let (Some(gpu), true) = (&self.gpu, gpu) {
            let Some(square) = encoding.next_square() else { return Ok(()) };
            let mut vision = self.vision_gpu.lock().map_err(|_| {
                EngineError::Gpu(crate::gpu::GpuError::Failed(
                    "the picture encoder's lock was poisoned".into(),
                ))
            })?;
            let vision = vision.get_or_insert_with(|| crate::gpu::GpuVision::new(std::sync::Arc::clone(gpu)));
            match vision.submit(encoder, &square) {
                #[cfg(not(target_family = "wasm"))]
                Ok(submitted) => encoding.add_square(submitted.collect()?),
                #[cfg(target_family = "wasm")]
                Ok(submitted) => picture.on_gpu = Some(submitted),
                // A part of the encoder the GPU does not run (yet): this square on the CPU.
                Err(crate::gpu::SquareError::Gpu(
                    crate::gpu::GpuError::Refused(_)
                    | crate::gpu::GpuError::Unsupported(_)
                    | crate::gpu::GpuError::TooLarge { .. },
                )) => encoding.add_square(encoder.encode_square(&square)?),
                Err(crate::gpu::SquareError::Gpu(error)) => return Err(error.into()),
                Err(crate::gpu::SquareError::Model(error)) => return Err(error.into()),
            }
            return Ok(());
        }
        encoder.encode_next(encoding)?;
        Ok(())
    }

    /// Bytes of the projector's weights on the GPU: 0 until a picture is encoded there.
    #[cfg(feature = "gpu")]
    pub fn projector_gpu_bytes(&self) -> u64 {
        self.vision_gpu
            .lock()
            .ok()
            .and_then(|vision| vision.as_ref().map(crate::gpu::GpuVision::bytes))
            .unwrap_or(0)
    }

    /// Drops the projector's weights from the GPU (another projector, or another device).
    #[cfg(feature = "gpu")]
    fn forget_vision_gpu(&self) {
        if let Ok(mut vision) = self.vision_gpu.lock() {
            *vision = None;
        }
    }

    /// The ids of a picture whose squares are all encoded: kept by its content hash from now
    /// on (see [`Engine::image_ids`]).
    pub fn finish_picture(&self, picture: PendingPicture) -> Result<Vec<u32>, EngineError> {
        #[cfg(feature = "gpu")]
        let PendingPicture { hash, mut encoding, on_gpu } = picture;
        #[cfg(not(feature = "gpu"))]
        let PendingPicture { hash, encoding } = picture;
        #[cfg(feature = "gpu")]
        if let (Some(square), Some(encoding)) = (on_gpu, encoding.as_mut()) {
            encoding.add_square(square.collect()?);
        }
        let Some(encoding) = encoding else {
            return self.images.ids_of(&hash).ok_or_else(|| {
                EngineError::Model(crate::model::ModelError::BadImage(
                    "the picture was forgotten while it was added (too many pictures at once)".into(),
                ))
            });
        };
        if encoding.squares_left() > 0 {
            return Err(EngineError::Model(crate::model::ModelError::BadImage(
                "the picture's encoding was not finished".into(),
            )));
        }
        let EncodedPicture { parts, embeddings } = encoding.finish();
        self.images_encoded.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let place = |rows: &[u32]| {
            let mut rows = rows.iter().copied();
            let mut ids = Vec::with_capacity(rows.len());
            for part in &parts {
                match part {
                    PromptPart::Text(text) => ids.extend(self.encode_piece(text)),
                    PromptPart::Rows(n) => ids.extend(rows.by_ref().take(*n)),
                }
            }
            ids
        };
        self.images.hold(hash, embeddings, place).ok_or_else(|| {
            EngineError::Model(crate::model::ModelError::BadImage("too many pictures in one engine".into()))
        })
    }

    /// The pictures found or encoded from now on belong to one prompt: none of them is
    /// forgotten to make room for another (older pictures are, past the engine's budget).
    pub fn begin_pictures(&self) {
        self.images.begin_prompt();
    }

    /// A stretch of prompt text alone: special tokens parsed, no BOS or EOS added.
    fn encode_piece(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, EncodeOptions { add_special: false, ..EncodeOptions::default() })
    }

    /// The embeddings of the picture whose rows `ids` are, which rows, and whether they attend
    /// to each other causally.
    fn image_rows(
        &self,
        ids: &[u32],
    ) -> Result<(std::sync::Arc<crate::vision::ImageEmbeddings>, std::ops::Range<usize>, bool), EngineError>
    {
        let encoder = self.vision.as_ref().ok_or(EngineError::NoMmproj)?;
        let (embeddings, rows) = self.images.rows_of(ids).ok_or_else(|| {
            EngineError::Model(crate::model::ModelError::BadImage(
                "the prompt names a picture this engine does not hold".into(),
            ))
        })?;
        Ok((embeddings, rows, !encoder.attends_both_ways(self.model.config().n_embd)))
    }

    /// Prompt text with a [`MEDIA_MARKER`] where each picture goes, tokenized as llama.cpp's
    /// mtmd does it: each stretch of text on its own (special tokens parsed), each picture as
    /// [`Engine::image_ids`] places it; BOS first where the model adds one (and the text does
    /// not already start with it).
    pub fn encode_with_images(&self, text: &str, images: &[RgbImage]) -> Result<Vec<u32>, EngineError> {
        let markers = text.matches(MEDIA_MARKER).count();
        if markers != images.len() {
            return Err(EngineError::ImageCount { markers, images: images.len() });
        }
        if images.is_empty() {
            return Ok(self.encode(text));
        }
        if self.vision.is_none() {
            return Err(EngineError::NoMmproj);
        }
        // The prompt's pictures held already are marked as its own first, so that encoding
        // the others forgets none of them.
        self.begin_pictures();
        let hashes: Vec<String> = images.iter().map(RgbImage::content_hash).collect();
        hashes.iter().for_each(|hash| drop(self.images.ids_of(hash)));
        let tokenizer = &self.tokenizer;
        let mut ids = Vec::new();
        if tokenizer.adds_bos() && !self.starts_with_bos(text) {
            ids.extend(tokenizer.bos());
        }
        for (i, stretch) in text.split(MEDIA_MARKER).enumerate() {
            if i > 0 {
                ids.extend(self.picture_ids(&images[i - 1], hashes[i - 1].clone())?);
            }
            ids.extend(self.encode_piece(stretch));
        }
        if tokenizer.adds_eos() {
            ids.extend(tokenizer.eos());
        }
        Ok(ids)
    }

    /// Whether a file with this header would load, from the header alone (what the inspector
    /// says before anything is loaded): every check of [`Engine::load`] but the tensor data's.
    pub fn check_header(header: &GgufHeader) -> Result<(), EngineError> {
        let config = Model::check_header(header)?;
        tokenizer_and_template(&header.metadata, config.vocab_size).map(drop)
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn template(&self) -> &ChatTemplate {
        &self.template
    }

    /// How every session's passes on the CPU keep attention's query and `Σ p·V` from now on:
    /// `Exact` gives llama.cpp's CPU bits (its F16 accumulator); `Fast`, the default, f32.
    pub fn set_attention_precision(&mut self, precision: AttentionPrecision) {
        self.attention_precision = precision;
    }

    pub fn attention_precision(&self) -> AttentionPrecision {
        self.attention_precision
    }

    /// What sessions created from now on keep their cached keys and values as (llama.cpp's
    /// `-ctk`/`-ctv`). Types other than F16 run on the CPU only: refused while the engine is on
    /// a GPU (and a GPU is refused while they are set).
    pub fn set_cache_types(&mut self, types: KvTypes) -> Result<(), EngineError> {
        #[cfg(feature = "gpu")]
        if self.gpu.is_some() {
            gpu_takes(types)?;
        }
        self.model.check_cache_types(types)?;
        self.cache_types = types;
        Ok(())
    }

    pub fn cache_types(&self) -> KvTypes {
        self.cache_types
    }

    /// Renders conversations with `template` instead of the file's (llama.cpp's
    /// `--chat-template-file`).
    pub fn set_template(&mut self, template: ChatTemplate) {
        self.template = template;
    }

    /// Tokenizes prompt text with llama.cpp's defaults (special tokens parsed, BOS when the
    /// model asks for it) but never a second BOS when the text already starts with one, as
    /// rendered chat templates often do.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let bos_written = self.starts_with_bos(text);
        let options = EncodeOptions { add_special: !bos_written, ..EncodeOptions::default() };
        let mut ids = self.tokenizer.encode(text, options);
        if bos_written && self.tokenizer.adds_eos() {
            ids.extend(self.tokenizer.eos());
        }
        ids
    }

    /// Whether `text` begins with the BOS token's text (a rendered chat template's own).
    fn starts_with_bos(&self, text: &str) -> bool {
        let bos = self.tokenizer.bos().and_then(|id| self.tokenizer.token_str(id));
        bos.is_some_and(|bos| !bos.is_empty() && text.starts_with(bos))
    }

    /// The prompt tokens of a conversation, ready for the assistant's next turn, for a context
    /// of `context` tokens (no tools; see [`Engine::chat_turn`]).
    pub fn chat_prompt(
        &self,
        messages: &[ChatMessage],
        enable_thinking: Option<bool>,
        context: usize,
    ) -> Result<Vec<u32>, EngineError> {
        let options = TurnOptions { enable_thinking, ..TurnOptions::default() };
        Ok(self.chat_turn(messages, options, context)?.tokens)
    }

    /// Everything an assistant turn needs: its prompt tokens, how to read its answer, and the
    /// grammar its tools (or `response_format`) put on it. A rendered text longer than
    /// `context` tokens could spell (the longest vocabulary entry's bytes per token) is refused
    /// before it is tokenized: a template can render hundreds of megabytes (`{{ 'a ' *
    /// 50000000 }}`), and tokenizing them only to learn that they do not fit took seconds and
    /// gigabytes.
    pub fn chat_turn(
        &self,
        messages: &[ChatMessage],
        options: TurnOptions,
        context: usize,
    ) -> Result<ChatTurn, EngineError> {
        let is_control = |text: &str| {
            let id = self.tokenizer.token_id(text);
            id.and_then(|id| self.tokenizer.token_kind(id)) == Some(TokenKind::Control)
        };
        let tools_grammar =
            options.tools.as_ref().and_then(|tools| tools.grammar(self.template.call_syntax(), is_control));
        if options.tools.is_some() && options.response_format.is_some() {
            return Err(ChatError::BadTools(
                "response_format cannot be combined with tools (llama.cpp refuses it too)".into(),
            )
            .into());
        }
        // A required call is asked for with the thinking off where the template has the switch:
        // the grammar starts the answer at the call, where a thinking model would open <think>.
        let required = options.tools.as_ref().is_some_and(|t| t.required);
        let enable_thinking = options.enable_thinking.or(required.then_some(false));
        let render = RenderOptions {
            add_generation_prompt: true,
            enable_thinking,
            reasoning_effort: options.reasoning_effort,
        };
        let text = self.template.render_with_tools(messages, render, options.tools.as_ref())?;
        if text.len() > context.saturating_mul(self.longest_token) {
            return Err(EngineError::RenderedPromptTooLong { bytes: text.len(), context });
        }
        // gpt-oss writes a structured answer as its final message, after that message's header.
        let response_format = match self.template.call_syntax() {
            CallSyntax::Harmony => {
                options.response_format.map(|f| f.after(&harmony_final_header(is_control)))
            }
            _ => options.response_format,
        };
        let grammar = tools_grammar.or(response_format);
        let reply = self.template.reply_format(&text, options.tools, options.split_reasoning);
        let tokens = self.encode_with_images(&text, &options.images)?;
        Ok(ChatTurn { tokens, reply, grammar })
    }

    /// A fresh constraint for an answer that must follow `spec`, or why there can be none
    /// (checked here, before any token is generated). The vocabulary's trie is built on the
    /// first call.
    pub fn constraint(&self, spec: &GrammarSpec) -> Result<Constraint, EngineError> {
        let compiler = self.grammars.get_or_init(|| GrammarCompiler::new(&self.tokenizer));
        let compiler = compiler.as_ref().map_err(|e| EngineError::Grammar(e.clone()))?;
        Ok(compiler.compile(spec)?)
    }

    /// A token's text for display (control tokens as written, broken UTF-8 as "�").
    pub fn piece(&self, id: u32) -> String {
        String::from_utf8_lossy(self.tokenizer.token_bytes(id, true)).into_owned()
    }

    /// Sampling settings the file recommends (`general.sampling.*`, the keys llama.cpp reads),
    /// llama.cpp's defaults for whatever it leaves out or gets wrong.
    pub fn recommended_sampling(&self) -> SamplerSettings {
        let metadata = self.model.metadata();
        let number =
            |key: &str| metadata.get_f64(&format!("general.sampling.{key}")).filter(|v| v.is_finite());
        let mut settings = SamplerSettings::default();
        if let Some(v) = number("temp") {
            settings.temperature = v as f32;
        }
        if let Some(v) = number("top_k").filter(|v| *v >= 0.0) {
            settings.top_k = v as usize;
        }
        if let Some(v) = number("top_p") {
            settings.top_p = v as f32;
        }
        if let Some(v) = number("min_p") {
            settings.min_p = v as f32;
        }
        if let Some(v) = number("penalty_repeat") {
            settings.repeat_penalty = v as f32;
        }
        if let Some(v) = number("penalty_last_n").filter(|v| *v >= 0.0) {
            settings.repeat_last_n = v as usize;
        }
        if settings.validate().is_err() {
            return SamplerSettings::default();
        }
        settings
    }

    pub fn new_session(&self, context: usize) -> Result<Session, EngineError> {
        Session::new(self, context)
    }

    /// Runs the sessions created from now on on `gpu` (`None`: on the CPU), once it is known
    /// to run every part of the model; sessions that exist keep their device.
    #[cfg(feature = "gpu")]
    pub fn use_gpu(&mut self, gpu: Option<std::sync::Arc<crate::gpu::Gpu>>) -> Result<(), EngineError> {
        let same =
            |a: &std::sync::Arc<crate::gpu::Gpu>| gpu.as_ref().is_some_and(|b| std::sync::Arc::ptr_eq(a, b));
        if self.weights_on_gpu.is_some() && !self.gpu.as_ref().is_some_and(same) {
            return Err(crate::gpu::GpuError::WeightsOnDevice.into());
        }
        if let Some(gpu) = &gpu {
            gpu_takes(self.cache_types)?;
            crate::gpu::GpuState::check(gpu, &self.model)?;
        }
        self.gpu = gpu;
        self.forget_vision_gpu();
        Ok(())
    }

    /// The GPU new sessions run on, if any.
    #[cfg(feature = "gpu")]
    pub fn gpu(&self) -> Option<&std::sync::Arc<crate::gpu::Gpu>> {
        self.gpu.as_ref()
    }

    /// Whether the model's weights are on its GPU only ([`Engine::with_weights_on_gpu`]).
    pub fn weights_on_gpu_only(&self) -> bool {
        self.model.file().has_ranges_on_device()
    }
}

/// Refuses cache types the GPU backend does not keep (it has F16 keys and values only).
#[cfg(feature = "gpu")]
fn gpu_takes(types: KvTypes) -> Result<(), EngineError> {
    match types.is_default() {
        true => Ok(()),
        false => Err(crate::gpu::GpuError::Refused("KV caches other than f16").into()),
    }
}

/// The tokenizer and chat template `metadata` describes, for a model of `model_vocab` rows.
fn tokenizer_and_template(
    metadata: &Metadata,
    model_vocab: usize,
) -> Result<(Tokenizer, ChatTemplate), EngineError> {
    // Compared before the tokenizer is built: building one for a vocabulary the embedding does
    // not match would only spend memory on a file about to be refused.
    if let Some(tokens) = token_count(metadata).filter(|&tokens| tokens != model_vocab) {
        return Err(EngineError::VocabularyMismatch { tokenizer: tokens, model: model_vocab });
    }
    let tokenizer = Tokenizer::from_metadata(metadata)?;
    if tokenizer.vocab_size() != model_vocab {
        return Err(EngineError::VocabularyMismatch {
            tokenizer: tokenizer.vocab_size(),
            model: model_vocab,
        });
    }
    let template = ChatTemplate::for_model(metadata, &tokenizer)?;
    Ok((tokenizer, template))
}

/// What [`Session::sync`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncReport {
    /// Tokens kept from the cache.
    pub reused: usize,
    /// Tokens run through the model.
    pub evaluated: usize,
    /// Of those, tokens the cache had held but could not roll back to (a recurrent state
    /// restarted from a checkpoint before them).
    pub replayed: usize,
}

/// What one call of [`Session::sync_some`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncProgress {
    /// Tokens kept from the cache.
    pub reused: usize,
    /// Tokens run through the model by this call.
    pub evaluated: usize,
    /// Of those, tokens run again because a recurrent state restarted from a checkpoint.
    pub replayed: usize,
    /// Tokens still to evaluate.
    pub remaining: usize,
}

/// One generated token.
#[derive(Clone, Debug)]
pub struct Step {
    pub token: u32,
    /// Text completed by this token (empty while a character is still partial, and for
    /// control tokens).
    pub text: String,
    /// An end-of-generation token (EOS, `<|im_end|>`, `<end_of_turn>`...).
    pub end_of_generation: bool,
    pub trace: Option<StepTrace>,
}

pub struct Session {
    /// Where its forward passes run, and the memory they keep there.
    device: Box<dyn Device>,
    /// Tokens whose keys and values (or recurrent state) are in `cache`.
    evaluated: Vec<u32>,
    /// Tokens of the conversation after `evaluated` not yet run through the model: the last
    /// sampled token (the next step runs it, so a generation that stops never pays for a
    /// forward pass it does not use); after a rollback to a checkpoint, also the tokens
    /// between the checkpoint and the rollback point.
    pending: Vec<u32>,
    /// Logits after the last evaluated token; empty when there are none, or when the GPU read
    /// back only the best of them (`best`).
    logits: Vec<f32>,
    /// The best logits after the last evaluated token, where a step asked for no more
    /// ([`Session::advance_reading`]).
    best: Option<BestLogits>,
    text: Utf8Stream,
    /// Positions below this that get evaluated are replays: the same tokens the cache held
    /// before a rollback went back further than asked.
    replay_end: usize,
    replayed: usize,
    /// Tokens evaluated before the last forward pass: where a GPU failure rolls back to.
    submitted_from: usize,
}

impl Session {
    /// A session whose KV cache holds `context` tokens (the memory is allocated now).
    pub fn new(engine: &Engine, context: usize) -> Result<Session, EngineError> {
        Session::with_prefill_batch(engine, context, PREFILL_BATCH)
    }

    /// A session that runs a prompt in batches of at most `batch` tokens (its scratch memory
    /// grows with it): `inferno logits --golden` runs each prompt in one batch, as llama.cpp's
    /// golden runs did, since the batching picks the attention kernel and so the last bits.
    pub fn with_prefill_batch(engine: &Engine, context: usize, batch: usize) -> Result<Session, EngineError> {
        let context = context.max(1);
        // A picture's rows, which may attend both ways, go in one batch.
        let image_rows = engine.projector().map_or(0, |p| p.shape().tokens);
        let batch = batch.max(image_rows).clamp(1, context);
        let device = device::for_engine(engine, context, batch)?;
        Ok(Session {
            device,
            evaluated: Vec::new(),
            pending: Vec::new(),
            logits: Vec::new(),
            best: None,
            text: Utf8Stream::default(),
            replay_end: 0,
            replayed: 0,
            submitted_from: 0,
        })
    }

    pub fn context_len(&self) -> usize {
        self.device.capacity()
    }

    /// The GPU this session runs on (None: the CPU).
    #[cfg(feature = "gpu")]
    pub fn gpu(&self) -> Option<&std::sync::Arc<crate::gpu::Gpu>> {
        self.device.gpu()
    }

    /// Fires when the GPU has finished what the last call submitted (None: nothing to wait
    /// for, always so on the CPU). In the browser, await it before the next call.
    #[cfg(feature = "gpu")]
    pub fn pending(&self) -> Option<crate::gpu::Signal> {
        self.device.pending()
    }

    /// Takes what the GPU's last submission produced into the session: its logits, or the
    /// error it ran into (after which the session holds only what was done before it).
    fn collect(&mut self) -> Result<(), EngineError> {
        match self.device.collect(self.evaluated.len()) {
            Ok(Some(ReadLogits::Every(logits))) => self.logits = logits,
            Ok(Some(ReadLogits::Best(best))) => self.best = Some(best),
            Ok(None) => {}
            Err(error) if error.is_not_ready() => return Err(error),
            Err(error) => {
                // The whole submission is in doubt: back to before it.
                let held = self.submitted_from;
                self.roll_back(held, held);
                self.logits.clear();
                return Err(error);
            }
        }
        Ok(())
    }

    /// Whether the last call left work on the GPU whose result must be awaited
    /// ([`Session::pending`]) before the next call: only in the browser, where the GPU answers
    /// through the event loop.
    pub fn is_waiting(&self) -> bool {
        #[cfg(feature = "gpu")]
        return self.pending().is_some();
        #[cfg(not(feature = "gpu"))]
        false
    }

    /// The logits after the last evaluated token, once a [`Session::sync`] or
    /// [`Session::advance`] has them (natively the GPU's are waited for there): what
    /// `inferno logits` compares with llama.cpp on either device. None after an
    /// [`Session::advance_reading`] that read only the best of them.
    pub fn logits(&self) -> Option<&[f32]> {
        (!self.logits.is_empty()).then_some(&self.logits[..])
    }

    /// Every token of the conversation so far, including those not yet evaluated.
    pub fn tokens(&self) -> Vec<u32> {
        self.evaluated.iter().chain(&self.pending).copied().collect()
    }

    pub fn len(&self) -> usize {
        self.evaluated.len() + self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes this session holds on the GPU: weights, cache and activations.
    #[cfg(feature = "gpu")]
    pub fn gpu_bytes(&self) -> u64 {
        self.device.gpu_bytes()
    }

    /// The memory this conversation costs besides the model: KV cache and recurrent state
    /// (with as many checkpoints as it may keep), scratch buffers and logits, all proportional
    /// to the context (and prefill batch) it was created with.
    pub fn state_bytes(&self, engine: &Engine) -> usize {
        let logits = engine.model.config().vocab_size.saturating_mul(4);
        self.device.state_bytes(&engine.model).saturating_add(logits)
    }

    /// Bytes of the KV cache (and recurrent state) in CPU memory: what the cache types decide
    /// (0 on the GPU, whose cache is in device memory).
    pub fn cache_bytes(&self) -> usize {
        self.device.cache_bytes()
    }

    /// Checkpoints of the recurrent state: held now, the most kept, and bytes each (all 0 for
    /// a model without recurrent layers). On the GPU they are in device memory.
    pub fn checkpoints(&self) -> (usize, usize, usize) {
        self.device.checkpoints()
    }

    /// Tokens run again so far because a rollback had to go back to a recurrent state's
    /// checkpoint before them (always 0 for a model whose cache is keys and values only).
    pub fn replayed(&self) -> usize {
        self.replayed
    }

    /// Makes the session hold exactly `tokens`, with logits for the last one, evaluating only
    /// what differs from what it holds.
    pub fn sync(&mut self, engine: &Engine, tokens: &[u32]) -> Result<SyncReport, EngineError> {
        let progress = self.sync_some(engine, tokens, usize::MAX)?;
        Ok(SyncReport { reused: progress.reused, evaluated: progress.evaluated, replayed: progress.replayed })
    }

    /// [`Session::sync`] in parts: evaluates at most `budget` of the missing tokens. Called
    /// again with the same `tokens`, it goes on where it stopped (what it evaluated is now a
    /// common prefix), so a caller can report progress and stop a long prefill between parts.
    /// Logits exist once `remaining` is 0.
    pub fn sync_some(
        &mut self,
        engine: &Engine,
        tokens: &[u32],
        budget: usize,
    ) -> Result<SyncProgress, EngineError> {
        if tokens.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        if tokens.len() > self.context_len() {
            return Err(EngineError::PromptTooLong { tokens: tokens.len(), context: self.context_len() });
        }
        self.collect()?;
        let held = self.tokens();
        let common = held.iter().zip(tokens).take_while(|(a, b)| a == b).count();
        if common == tokens.len() && common == self.evaluated.len() && !self.logits.is_empty() {
            return Ok(SyncProgress { reused: common, evaluated: 0, replayed: 0, remaining: 0 });
        }
        if common == tokens.len() && common <= self.evaluated.len() && self.restore_with_logits(common) {
            return Ok(SyncProgress { reused: common, evaluated: 0, replayed: 0, remaining: 0 });
        }
        // Logits exist only for the last evaluated token: when the prompt is all cached, the
        // last token is evaluated again to get them.
        let mut keep = common.min(self.evaluated.len()).min(tokens.len() - 1);
        // A picture's rows are evaluated together, never from the middle.
        if let Some(image_start) = images::start_of_image_at(tokens, keep) {
            keep = image_start;
        }
        self.truncate(keep);
        self.pending.clear(); // What the rollback left to replay is `tokens[kept..keep]`.
        self.text = Utf8Stream::default();
        let kept = self.evaluated.len();
        let replayed_before = self.replayed;
        let mut end = kept.saturating_add(budget.max(1)).min(tokens.len());
        if let Some(image_end) = images::end_of_image_at(tokens, end) {
            end = image_end;
        }
        let logits_for = if end == tokens.len() { LogitsFor::Last } else { LogitsFor::None };
        self.evaluate(engine, &tokens[kept..end], logits_for)?;
        if end == tokens.len() {
            // The end of a prompt: where the next turn, a regeneration or a branch starts.
            self.device.checkpoint(&self.logits)?;
        } else {
            self.device.checkpoint_if_due()?;
        }
        Ok(SyncProgress {
            reused: kept,
            evaluated: end - kept,
            replayed: self.replayed - replayed_before,
            remaining: tokens.len() - end,
        })
    }

    /// Forgets everything after the first `len` tokens (rolling back to branch). Where the
    /// cache cannot roll back that exactly (a recurrent state), the tokens between its
    /// checkpoint and `len` stay in the conversation, to be replayed by the next step.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len() {
            return;
        }
        self.replay_end = self.replay_end.min(len);
        // Bytes of a half-finished character belong to the tokens just dropped.
        self.text = Utf8Stream::default();
        if len >= self.evaluated.len() {
            self.pending.truncate(len - self.evaluated.len());
            return;
        }
        self.pending.clear();
        self.roll_back(len, len);
    }

    /// Goes back to a recurrent state's checkpoint at exactly `len` tokens that kept its logits
    /// (a prompt's end), which needs no forward pass; false if there is none.
    fn restore_with_logits(&mut self, len: usize) -> bool {
        let Some(logits) = self.device.restore_with_logits(len) else {
            return false;
        };
        self.logits.clear();
        self.logits.extend_from_slice(logits);
        self.best = None;
        self.evaluated.truncate(len);
        self.pending.clear();
        // What an earlier rollback left to replay past `len` is gone with it.
        self.replay_end = self.replay_end.min(len);
        self.text = Utf8Stream::default();
        true
    }

    /// Rolls the cache back to at most `cached` tokens (to its checkpoint at or before them,
    /// for a recurrent state) while the conversation keeps its first `kept` tokens: those the
    /// cache no longer holds go to the front of `pending`, to be run again (the ones before
    /// `cached` are replays).
    fn roll_back(&mut self, cached: usize, kept: usize) {
        let held = self.device.truncate(cached);
        if held < self.evaluated.len() {
            let mut dropped = self.evaluated.split_off(held);
            dropped.truncate(kept - held);
            dropped.append(&mut self.pending);
            self.pending = dropped;
            self.logits.clear();
            self.best = None;
            self.replay_end = cached;
        }
    }

    /// Samples the next token (or takes `forced`, explaining the step all the same).
    pub fn step(
        &mut self,
        engine: &Engine,
        sampler: &mut Sampler,
        forced: Option<u32>,
        trace_top: usize,
    ) -> Result<Step, EngineError> {
        // A step run here reads what the sampler needs; one held from an advance serves if it
        // was read so (advance_reading runs the token again otherwise).
        self.advance_reading(engine, sampler.logits_read(forced, trace_top))?;
        self.collect()?;
        let sampled = match (&self.best, forced) {
            (Some(best), None) => sampler.sample_best(best, trace_top)?,
            (_, Some(token)) => sampler.force(&self.logits, &self.evaluated, token, trace_top)?,
            (None, None) => sampler.sample(&self.logits, &self.evaluated, trace_top)?,
        };
        let token = sampled.token;
        self.pending.push(token);
        let end_of_generation = engine.tokenizer.is_end_of_generation(token);
        let text = if end_of_generation {
            self.text.finish()
        } else {
            self.text.push(engine.tokenizer.token_bytes(token, false))
        };
        Ok(Step { token, text, end_of_generation, trace: sampled.trace })
    }

    /// Room left for new tokens, counting a pending one as taken.
    pub fn room(&self) -> usize {
        self.context_len().saturating_sub(self.len())
    }

    /// Runs the tokens not yet evaluated that the next step needs (the last sampled one, a
    /// rollback's replay), so that on the GPU the page can await their logits
    /// ([`Session::pending`]) before calling [`Session::step`]. True if anything ran.
    pub fn advance(&mut self, engine: &Engine) -> Result<bool, EngineError> {
        self.advance_reading(engine, LogitsRead::Every)
    }

    /// [`Session::advance`], the GPU reading back of the logits what `read` says: the next
    /// step's [`Sampler::logits_read`] (the CPU has them all in its memory either way). The
    /// step must then ask for the same read: in a browser, a step whose sampler needs more than
    /// the best logits held runs its token again, a second GPU round trip it cannot wait for
    /// (`EngineError` not ready). Held best logits that do not serve `read` are dropped here,
    /// and the token runs again in this call.
    pub fn advance_reading(&mut self, engine: &Engine, read: LogitsRead) -> Result<bool, EngineError> {
        self.collect()?;
        // Best logits serve only a step that reads as they were read (after a stopped answer,
        // a branch at its end forces a token, which needs every logit).
        if self.best.as_ref().is_some_and(|best| read != LogitsRead::Best { temperature: best.temperature }) {
            self.best = None;
        }
        if self.pending.is_empty() && self.logits.is_empty() && self.best.is_none() {
            // After a rollback only the cache is left: the last token runs again for its
            // logits (from a checkpoint before it, for a recurrent state).
            let held = self.evaluated.len();
            let last = held.checked_sub(1).ok_or(EngineError::NothingToContinue)?;
            if !self.restore_with_logits(held) {
                self.roll_back(last, held);
            }
        }
        if self.pending.is_empty() {
            return Ok(false);
        }
        let pending = std::mem::take(&mut self.pending);
        if let Err(error) = self.evaluate_reading(engine, &pending, (LogitsFor::Last, read)) {
            self.pending.extend(pending);
            return Err(error);
        }
        self.device.checkpoint_if_due()?;
        Ok(true)
    }

    fn evaluate(
        &mut self,
        engine: &Engine,
        tokens: &[u32],
        logits_for: LogitsFor,
    ) -> Result<(), EngineError> {
        self.evaluate_reading(engine, tokens, (logits_for, LogitsRead::Every))
    }

    fn evaluate_reading(
        &mut self,
        engine: &Engine,
        tokens: &[u32],
        (logits_for, read): (LogitsFor, LogitsRead),
    ) -> Result<(), EngineError> {
        self.logits.clear();
        self.best = None;
        let start = self.evaluated.len();
        self.submitted_from = start;
        let precision = engine.attention_precision;
        // Text and each picture's rows go in batches of their own, as llama.cpp's mtmd runs
        // them (the batch decides the attention kernel, and a picture may attend both ways).
        let runs = images::runs(tokens);
        let last = runs.len().saturating_sub(1);
        // Under M-RoPE (Qwen3.5) positions part from cache slots after a picture.
        let mrope = !engine.model.config().rope_streams.is_empty();
        for (i, run) in runs.into_iter().enumerate() {
            let wanted = if i == last || logits_for == LogitsFor::All { logits_for } else { LogitsFor::None };
            let run = &tokens[run];
            let placement = mrope.then(|| engine.images.placement(&self.evaluated, run));
            let result = match run.first() {
                Some(&id) if is_image_id(id) => {
                    engine.image_rows(run).and_then(|(embeddings, rows, causal)| {
                        let rows =
                            &embeddings.values[rows.start * embeddings.width..rows.end * embeddings.width];
                        let input = BatchInput::Rows { rows, causal };
                        self.device.evaluate(
                            &engine.model,
                            input,
                            placement,
                            (wanted, read),
                            precision,
                            &mut self.logits,
                        )
                    })
                }
                _ => self.device.evaluate(
                    &engine.model,
                    BatchInput::Tokens(run),
                    placement,
                    (wanted, read),
                    precision,
                    &mut self.logits,
                ),
            };
            if let Err(error) = result {
                self.roll_back(start, start);
                return Err(error);
            }
            self.evaluated.extend_from_slice(run);
        }
        self.replayed += self.replay_end.min(self.evaluated.len()).saturating_sub(start);
        // Natively the GPU's answer is waited for here; the browser's comes through `pending`.
        #[cfg(not(target_family = "wasm"))]
        self.collect()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
