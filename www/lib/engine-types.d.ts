// Generated from the engine's Rust types by ts-rs (src/engine/contract.rs): do not edit.
// `INFERNO_BLESS=1 cargo test --lib contract` rewrites it after a change there.

export type ChatRequest = { messages: Array<ChatMessage>, enable_thinking?: boolean, 
/**
 * OpenAI's `reasoning_effort`, for templates that read it (gpt-oss); any other value than
 * `'low'`, `'medium'` or `'high'` is refused (kind `bad_request`).
 */
reasoning_effort?: ReasoningEffort, 
/**
 * OpenAI's `tools`, `tool_choice` and `parallel_tool_calls`.
 */
tools?: Array<Tool>, tool_choice?: "auto" | "none" | "required" | { type: "function", function: { name: string } }, parallel_tool_calls?: boolean, 
/**
 * Read the reasoning apart from the content (default true).
 */
split_reasoning?: boolean, 
/**
 * The sampling; what it leaves out takes llama.cpp's defaults.
 */
settings?: Partial<SamplerSettings>, 
/**
 * KV cache size in tokens; the model's context length (capped at [`DEFAULT_CONTEXT_CAP`])
 * when absent.
 */
context?: number, 
/**
 * What the answer must follow, if anything.
 */
grammar?: GrammarRequest, max_tokens?: number, 
/**
 * Candidates explained per step.
 */
trace_top?: number, 
/**
 * Stop strings (the answer ends before the first to appear).
 */
stop?: Array<string>, };

/**
 * A legacy completion's request: the prompt as it is.
 */
export type TextRequest = { prompt: string, 
/**
 * The sampling; what it leaves out takes llama.cpp's defaults.
 */
settings?: Partial<SamplerSettings>, 
/**
 * KV cache size in tokens; the model's context length (capped at [`DEFAULT_CONTEXT_CAP`])
 * when absent.
 */
context?: number, 
/**
 * What the answer must follow, if anything.
 */
grammar?: GrammarRequest, max_tokens?: number, 
/**
 * Candidates explained per step.
 */
trace_top?: number, 
/**
 * Stop strings (the answer ends before the first to appear).
 */
stop?: Array<string>, };

/**
 * A branch of the last answer: `{step, token, max_tokens?, trace_top?, stop?}`.
 */
export type BranchRequest = { step: number, token: number, max_tokens?: number, 
/**
 * Candidates explained per step.
 */
trace_top?: number, 
/**
 * Stop strings (the answer ends before the first to appear).
 */
stop?: Array<string>, };

/**
 * What any answer is asked with: the sampling, the cache size, and what it must follow.
 */
export type AnswerRequest = { 
/**
 * The sampling; what it leaves out takes llama.cpp's defaults.
 */
settings?: Partial<SamplerSettings>, 
/**
 * KV cache size in tokens; the model's context length (capped at [`DEFAULT_CONTEXT_CAP`])
 * when absent.
 */
context?: number, 
/**
 * What the answer must follow, if anything.
 */
grammar?: GrammarRequest, max_tokens?: number, 
/**
 * Candidates explained per step.
 */
trace_top?: number, 
/**
 * Stop strings (the answer ends before the first to appear).
 */
stop?: Array<string>, };

/**
 * How long an answer may run and what it reports: `{max_tokens?, trace_top?, stop?}`.
 */
export type LimitsRequest = { max_tokens?: number, 
/**
 * Candidates explained per step.
 */
trace_top?: number, 
/**
 * Stop strings (the answer ends before the first to appear).
 */
stop?: Array<string>, };

/**
 * `{type: 'json_object'}`, `{type: 'json_schema', schema, strict?}` (the schema as JSON text) or
 * `{type: 'lark', grammar}`.
 */
export type GrammarRequest = { "type": "json_object" } | { "type": "json_schema", schema: string, strict?: boolean, } | { "type": "lark", grammar: string, };

/**
 * OpenAI's `reasoning_effort`: `'low'`, `'medium'` or `'high'`.
 */
export type ReasoningEffort = "low" | "medium" | "high";

export type ChatMessage = { 
/**
 * `system`, `user`, `assistant` or `tool`.
 */
role: string, content: string, 
/**
 * An earlier answer's reasoning, which templates that keep it render.
 */
reasoning_content?: string, 
/**
 * The calls an assistant message made.
 */
tool_calls?: Array<ToolCall>, 
/**
 * Which call a `tool` message answers.
 */
tool_call_id?: string, name?: string, };

/**
 * A function the model may call (`{type: 'function', function: {name, description,
 * parameters}}`).
 */
export type Tool = { type?: "function", function: FunctionSpec, };

export type FunctionSpec = { name: string, description?: string, 
/**
 * A JSON schema of the arguments object.
 */
parameters?: Record<string, unknown>, };

/**
 * A call the model made (`{id, type: 'function', function: {name, arguments}}`); `arguments`
 * is JSON text, as OpenAI sends it.
 */
export type ToolCall = { id?: string, type?: "function", function: FunctionCall, };

export type FunctionCall = { name: string, arguments: string, };

/**
 * What a [`Generation::next`] call did.
 */
export type Event = { "type": "prefill", evaluated: number, total: number, } | { "type": "prepared", prompt: PromptFacts, structured: boolean, call_syntax: CallSyntax | null, } | { "type": "branched", step: number, token: number, structured: boolean, kept: Array<StepRecord>, delta: Delta, 
/**
 * The sampling the branch goes on with (the answer's).
 */
settings: SamplerSettings, } | { "type": "token", step: StepRecord, delta: Delta, } | { "type": "done", finish: Finish, finish_reason: "stop" | "length" | "tool_calls", stop_string: string | null, delta: Delta, usage: Usage, stats: Stats, warnings: Array<string>, };

/**
 * Why an answer ended.
 */
export type Finish = "end" | "max_tokens" | "context_full" | "stopped" | "stop_string";

/**
 * The prompt as the cache took it.
 */
export type PromptFacts = { prompt_tokens: number, 
/**
 * Tokens the cache already held (an earlier turn's).
 */
reused: number, evaluated: number, context_size: number, context_used: number, prefill_ms: number, };

/**
 * One token of an answer, as the visualizer and `inferno.steps` show it.
 */
export type StepRecord = { 
/**
 * 0-based step in the answer (what a branch names).
 */
index: number, 
/**
 * The token's position in the conversation.
 */
position: number, token: number, 
/**
 * The text this step adds (empty while a character is incomplete).
 */
text: string, 
/**
 * The token as display text.
 */
piece: string, piece_bytes: Array<number>, endOfGeneration: boolean, 
/**
 * Taken by a branch, not drawn.
 */
forced: boolean, trace: TracedStep | null, 
/**
 * From the start of the step (running the token before it) to its choice.
 */
ms: number, };

/**
 * A step's trace with each candidate's text beside its id.
 */
export type TracedStep = { pieces: Array<string>, 
/**
 * The pieces of the tokens the grammar forbade (`trace.grammar.forbidden`).
 */
forbidden_pieces: Array<string>, 
/**
 * Each candidate's exact bytes (a piece may be part of a character).
 */
piece_bytes: Array<Array<number>>, 
/**
 * Best first (penalized logit, ties to the lower id).
 */
candidates: Array<Candidate>, chosen: number, 
/**
 * Rank of the chosen token when it is among the ranked candidates.
 */
chosen_rank: number | null, 
/**
 * Its probability over the whole vocabulary at the step's temperature.
 */
chosen_probability: number, 
/**
 * Tokens that survived the truncation samplers.
 */
nucleus_size: number, 
/**
 * Their share of the whole-vocabulary probability at the step's temperature.
 */
nucleus_mass: number, 
/**
 * Vocabulary entries the truncation removed.
 */
excluded: number, 
/**
 * Entropy of the whole-vocabulary distribution at the step's temperature, in bits.
 */
entropy_bits: number, 
/**
 * 0 for greedy steps (whose probabilities are shown at temperature 1).
 */
temperature: number, 
/**
 * With a grammar: what it allowed and what it took from the model.
 */
grammar: GrammarTrace | null, };

export type StepTrace = { 
/**
 * Best first (penalized logit, ties to the lower id).
 */
candidates: Array<Candidate>, chosen: number, 
/**
 * Rank of the chosen token when it is among the ranked candidates.
 */
chosen_rank: number | null, 
/**
 * Its probability over the whole vocabulary at the step's temperature.
 */
chosen_probability: number, 
/**
 * Tokens that survived the truncation samplers.
 */
nucleus_size: number, 
/**
 * Their share of the whole-vocabulary probability at the step's temperature.
 */
nucleus_mass: number, 
/**
 * Vocabulary entries the truncation removed.
 */
excluded: number, 
/**
 * Entropy of the whole-vocabulary distribution at the step's temperature, in bits.
 */
entropy_bits: number, 
/**
 * 0 for greedy steps (whose probabilities are shown at temperature 1).
 */
temperature: number, 
/**
 * With a grammar: what it allowed and what it took from the model.
 */
grammar: GrammarTrace | null, };

/**
 * One of the highest-ranked tokens of a step.
 */
export type Candidate = { id: number, 
/**
 * The model's raw logit (before the repetition penalty).
 */
logit: number, 
/**
 * Probability over the whole vocabulary at the step's temperature (after the penalty),
 * before any truncation: what the model "believes".
 */
probability: number, 
/**
 * Probability of being drawn: renormalized over the nucleus, 0 outside it.
 */
sample_probability: number, 
/**
 * Survived top-k, top-p and min-p.
 */
in_nucleus: boolean, };

/**
 * What the answer's grammar did at a step.
 */
export type GrammarTrace = { 
/**
 * Vocabulary entries it allowed.
 */
allowed: number, 
/**
 * The model's best tokens that it forbade (best first), each with the probability the
 * model gave it before the mask (`sample_probability` 0, `in_nucleus` false).
 */
forbidden: Array<Candidate>, 
/**
 * The share of the model's probability that went to forbidden tokens.
 */
forbidden_mass: number, };

/**
 * What one token (or the end) adds to the message a client has been sent.
 */
export type Delta = { content?: string, reasoning_content?: string, tool_calls?: Array<CallDelta>, };

/**
 * The growth of one tool call: its name the first time it appears, then more of its
 * arguments' JSON text.
 */
export type CallDelta = { index: number, name?: string, arguments: string, };

/**
 * OpenAI's usage figures.
 */
export type Usage = { prompt_tokens: number, 
/**
 * The answer's tokens, a branch's kept ones included.
 */
completion_tokens: number, 
/**
 * Prompt tokens the cache already held (for a branch, all of them).
 */
cached_tokens: number, 
/**
 * Of the prompt's tokens, those that stand for pictures' rows (a projector's output).
 */
image_tokens: number, };

/**
 * How an answer went, in the names the page and the API report.
 */
export type Stats = { promptTokens?: number, reused?: number, evaluated?: number, contextSize?: number, prefillMs?: number, prefillTokS?: number | null, 
/**
 * From the request to the first token.
 */
ttftMs?: number, 
/**
 * Steps run by this request (a branch's kept steps are not).
 */
generated: number, 
/**
 * Decode steps per second, the first step (sampled from the prefill's logits) aside.
 */
decodeTokS: number | null, contextUsed: number, totalMs: number, 
/**
 * Tokens run again because a recurrent state (Qwen3.5) went back to a checkpoint.
 */
replayed: number, checkpoints: Checkpoints | null, 
/**
 * Decode steps that ran on one thread because that was found faster.
 */
soloSteps: number, seed: number, };

export type Checkpoints = { held: number, most: number, bytes_each: number, };

/**
 * How a family writes a call in its answer.
 */
export type CallSyntax = "hermes" | "qwen_xml" | "llama_json" | "functools" | "gemma4" | "lfm2" | "harmony" | "generic";

/**
 * The knobs of the chain. Defaults are llama.cpp's.
 */
export type SamplerSettings = { 
/**
 * ≤ 0 means greedy.
 */
temperature: number, 
/**
 * 0 disables.
 */
top_k: number, 
/**
 * ≥ 1 disables.
 */
top_p: number, 
/**
 * ≤ 0 disables.
 */
min_p: number, 
/**
 * 1 disables. Logits of recently seen tokens are divided by it (multiplied when negative).
 */
repeat_penalty: number, 
/**
 * How many of the most recent tokens the penalty looks at.
 */
repeat_last_n: number, seed: number, };

/**
 * What a projector file says about itself (the inspector's "Vision projector" card, and a
 * loaded model's `vision` in the JS API).
 */
export type ProjectorFacts = { 
/**
 * `clip.vision.projector_type`, else `clip.projector_type` (llama.cpp's name).
 */
projector: string, 
/**
 * The model family it was made for, where the projector type names one.
 */
family: string | null, 
/**
 * The language model architectures (`general.architecture`) that family's files carry.
 */
model_architectures: Array<string>, 
/**
 * Whether the file has an image encoder, and an audio one.
 */
has_vision: boolean, has_audio: boolean, 
/**
 * The square image the encoder takes, in pixels, and its patch side.
 */
image_size: number | null, patch_size: number | null, 
/**
 * Patches per image side (`image_size / patch_size`), before any merging.
 */
patches_per_side: number | null, 
/**
 * Per-channel (R, G, B) normalization of pixels in 0..=1: `(x - mean) / std`.
 */
image_mean: [number, number, number] | null, image_std: [number, number, number] | null, 
/**
 * The encoder: width, layers, heads and feed-forward width.
 */
encoder_width: number | null, encoder_layers: number | null, encoder_heads: number | null, encoder_feed_forward: number | null, 
/**
 * The width of the embeddings it puts into the language model, from its last projection
 * tensor as llama.cpp's `clip_n_mmproj_embd` takes it: the language model's embedding
 * length must equal it.
 */
output_width: number | null, 
/**
 * The least and most rows of embeddings a picture takes, where the projector sizes
 * pictures at their own aspect (Gemma 4, LFM2-VL): clip.cpp's bounds, or those a loaded
 * engine was given (`image_min_tokens`, `image_max_tokens`). None where every picture
 * takes the same rows.
 */
image_tokens: [number, number] | null, 
/**
 * What the file gets wrong, in words (a value of the wrong type or out of range); the
 * facts above leave such a value out.
 */
problems: Array<string>, };
