use crate::chat::ChatError;
use crate::grammar::GrammarError;
use crate::model::ModelError;
use crate::sampler::SamplerError;
use crate::tokenizer::TokenizerError;

#[derive(Debug)]
pub enum EngineError {
    Model(ModelError),
    Tokenizer(TokenizerError),
    Chat(ChatError),
    Sampler(SamplerError),
    /// The answer's grammar or JSON schema does not compile, or forbids a forced token.
    Grammar(GrammarError),
    VocabularyMismatch {
        tokenizer: usize,
        model: usize,
    },
    EmptyPrompt,
    PromptTooLong {
        tokens: usize,
        context: usize,
    },
    /// The rendered chat prompt has more bytes than `context` tokens can spell.
    RenderedPromptTooLong {
        bytes: usize,
        context: usize,
    },
    /// A step was asked for before any prompt was evaluated.
    NothingToContinue,
    /// A branch was asked for with no answer to branch from.
    NoAnswer,
    /// A branch names a step the answer does not have, or a token outside the vocabulary.
    BadBranch(String),
    /// An embedding was asked of a model whose file declares no pooling that gives one vector
    /// per text (a chat model: none; a reranker: rank), and none was asked for.
    NoPooling {
        pooling: Option<crate::embedding::Pooling>,
    },
    /// Text `index` of an embedding request is empty.
    EmptyInput {
        index: usize,
    },
    /// Text `index` of an embedding request has more tokens (`None`: bytes beyond what any
    /// tokenization could fit) than the model's trained context.
    InputTooLong {
        index: usize,
        tokens: Option<usize>,
        limit: usize,
    },
    /// `dimensions` is 0 or more than the model's width.
    BadDimensions {
        asked: usize,
        width: usize,
    },
    /// A picture was sent to a model loaded without a vision projector (mmproj).
    NoMmproj,
    /// The projector's embeddings are not as wide as the model's.
    MmprojMismatch {
        projector: usize,
        model: usize,
    },
    /// A prompt's image markers and its pictures do not pair up.
    ImageCount {
        markers: usize,
        images: usize,
    },
    /// Limits on a picture's rows the projector cannot take (below 1, the least above the
    /// most, or the most above the projector's own).
    BadImageTokens(String),
    /// The GPU could not take the model, failed, or was lost.
    #[cfg(feature = "gpu")]
    Gpu(crate::gpu::GpuError),
}

impl EngineError {
    /// A stable snake_case name for the kind of problem (the page's `kind`); a model or file
    /// error keeps its own (`missing_tensor`, `bad_magic`...), tokenizer, template and sampler
    /// errors are named by their family (their own `kind()` says more).
    pub fn kind(&self) -> &'static str {
        match self {
            EngineError::Model(model) => model.kind(),
            EngineError::Tokenizer(_) => "tokenizer",
            EngineError::Chat(ChatError::BadTools(_)) => "bad_tools",
            EngineError::Chat(_) => "chat_template",
            EngineError::Sampler(_) => "sampler",
            EngineError::Grammar(grammar) => grammar.kind(),
            EngineError::VocabularyMismatch { .. } => "vocabulary_mismatch",
            EngineError::EmptyPrompt => "empty_prompt",
            EngineError::PromptTooLong { .. } | EngineError::RenderedPromptTooLong { .. } => {
                "prompt_too_long"
            }
            EngineError::NothingToContinue => "nothing_to_continue",
            EngineError::NoAnswer => "no_answer",
            EngineError::BadBranch(_) => "bad_request",
            EngineError::NoPooling { .. } => "no_pooling",
            EngineError::EmptyInput { .. } => "empty_input",
            EngineError::InputTooLong { .. } => "input_too_long",
            EngineError::BadDimensions { .. } => "bad_dimensions",
            EngineError::NoMmproj => "no_mmproj",
            EngineError::MmprojMismatch { .. } => "mmproj_mismatch",
            EngineError::ImageCount { .. } | EngineError::BadImageTokens(_) => "bad_request",
            #[cfg(feature = "gpu")]
            EngineError::Gpu(gpu) => gpu.kind(),
        }
    }

    /// The GPU's answer to the last submission has not come yet (in the browser, before
    /// `pending` fired): the call can be made again, nothing is lost.
    pub fn is_not_ready(&self) -> bool {
        #[cfg(feature = "gpu")]
        return matches!(self, EngineError::Gpu(crate::gpu::GpuError::NotReady));
        #[cfg(not(feature = "gpu"))]
        false
    }

    /// The KV cache cannot take another token: a reason to stop, not a failure.
    pub fn is_context_full(&self) -> bool {
        matches!(self, EngineError::Model(ModelError::ContextFull { .. }))
    }
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::Model(e) => e.fmt(f),
            EngineError::Tokenizer(e) => write!(f, "tokenizer: {e}"),
            EngineError::Chat(e) => e.fmt(f),
            EngineError::Sampler(e) => write!(f, "sampler: {e}"),
            EngineError::Grammar(e) => e.fmt(f),
            EngineError::VocabularyMismatch { tokenizer, model } => {
                write!(f, "the tokenizer has {tokenizer} tokens but the model's embedding has {model} rows")
            }
            EngineError::EmptyPrompt => write!(f, "the prompt is empty"),
            EngineError::PromptTooLong { tokens, context } => {
                write!(f, "the prompt has {tokens} tokens but the context holds {context}")
            }
            EngineError::RenderedPromptTooLong { bytes, context } => {
                write!(
                    f,
                    "the chat template rendered {bytes} bytes, more than a context of {context} tokens can hold"
                )
            }
            EngineError::NothingToContinue => write!(f, "no prompt has been evaluated yet"),
            EngineError::NoAnswer => write!(f, "there is no answer to branch from"),
            EngineError::BadBranch(why) => f.write_str(why),
            EngineError::NoPooling { pooling: Some(crate::embedding::Pooling::Rank) } => write!(
                f,
                "this model is a reranker (pooling rank): it scores pairs of texts, it does not embed them"
            ),
            EngineError::NoPooling { pooling } => write!(
                f,
                "this model's file declares {} pooling, so it is not an embedding model; ask for one \
                 ('mean', 'last' or 'cls') to embed with it anyway",
                pooling.map_or("no", crate::embedding::Pooling::name)
            ),
            EngineError::EmptyInput { index } => write!(f, "input {index} is empty"),
            EngineError::InputTooLong { index, tokens: Some(tokens), limit } => {
                write!(f, "input {index} has {tokens} tokens, more than the model's context of {limit}")
            }
            EngineError::InputTooLong { index, tokens: None, limit } => {
                write!(f, "input {index} has more bytes than the model's context of {limit} tokens can hold")
            }
            EngineError::BadDimensions { asked, width } => {
                write!(f, "dimensions must be 1 to the model's width {width}, not {asked}")
            }
            EngineError::NoMmproj => write!(
                f,
                "this model was loaded without a vision projector (mmproj), so it cannot see pictures: \
                 load its mmproj file beside it"
            ),
            EngineError::MmprojMismatch { projector, model } => write!(
                f,
                "the vision projector makes embeddings {projector} wide, but this model's are {model}: \
                 it was made for another model"
            ),
            EngineError::ImageCount { markers, images } => write!(
                f,
                "the prompt marks {markers} place(s) for pictures ({}) but {images} picture(s) came with it",
                crate::engine::MEDIA_MARKER
            ),
            EngineError::BadImageTokens(reason) => write!(f, "{reason}"),
            #[cfg(feature = "gpu")]
            EngineError::Gpu(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EngineError::Model(e) => Some(e),
            EngineError::Tokenizer(e) => Some(e),
            EngineError::Chat(e) => Some(e),
            EngineError::Sampler(e) => Some(e),
            EngineError::Grammar(e) => Some(e),
            #[cfg(feature = "gpu")]
            EngineError::Gpu(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ModelError> for EngineError {
    fn from(e: ModelError) -> Self {
        EngineError::Model(e)
    }
}

impl From<TokenizerError> for EngineError {
    fn from(e: TokenizerError) -> Self {
        EngineError::Tokenizer(e)
    }
}

impl From<ChatError> for EngineError {
    fn from(e: ChatError) -> Self {
        EngineError::Chat(e)
    }
}

impl From<SamplerError> for EngineError {
    /// A grammar's error keeps its own kind (`bad_schema`, `grammar_forbids`...).
    fn from(e: SamplerError) -> Self {
        match e {
            SamplerError::Grammar(grammar) => EngineError::Grammar(grammar),
            other => EngineError::Sampler(other),
        }
    }
}

impl From<GrammarError> for EngineError {
    fn from(e: GrammarError) -> Self {
        EngineError::Grammar(e)
    }
}

#[cfg(feature = "gpu")]
impl From<crate::gpu::GpuError> for EngineError {
    fn from(e: crate::gpu::GpuError) -> Self {
        EngineError::Gpu(e)
    }
}

#[cfg(feature = "gpu")]
impl From<crate::gpu::SquareError> for EngineError {
    fn from(e: crate::gpu::SquareError) -> Self {
        match e {
            crate::gpu::SquareError::Model(e) => EngineError::Model(e),
            crate::gpu::SquareError::Gpu(e) => EngineError::Gpu(e),
        }
    }
}
