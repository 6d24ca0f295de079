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
            #[cfg(feature = "gpu")]
            EngineError::Gpu(gpu) => gpu.kind(),
        }
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
