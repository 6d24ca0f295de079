// Types of Inferno's public API (inferno.js). Checked by `tsc --noEmit` on
// tests/types/example.ts in `./build.sh test`.

/** Every kind of error the engine and the API report (README.md's "Error kinds" says what
 *  each means; a test keeps both lists equal to what the code raises). */
export type InfernoErrorKind =
  | 'bad_request'
  | 'no_model'
  | 'no_answer'
  | 'busy'
  | 'bad_token'
  | 'aborted'
  | 'cancelled'
  | 'terminated'
  | 'fetch_failed'
  | 'file_changed'
  | 'no_length'
  | 'read_failed'
  | 'not_stored'
  | 'worker_failed'
  | 'wasm_init'
  | 'engine_start_timeout'
  | 'wasm_trap'
  | 'stalled'
  | 'bad_reply'
  | 'bad_engine_reply'
  | 'unknown_message_type'
  | 'no_trap'
  | 'internal'
  | 'invalid'
  | 'serialize'
  | 'too_large'
  | 'too_many_bytes'
  | 'incomplete'
  | 'bad_magic'
  | 'unsupported_version'
  | 'truncated'
  | 'count_too_large'
  | 'too_many_tensors'
  | 'length_past_end'
  | 'nesting_too_deep'
  | 'unknown_value_type'
  | 'invalid_bool'
  | 'invalid_utf8'
  | 'invalid_name'
  | 'duplicate_key'
  | 'duplicate_tensor_name'
  | 'invalid_dimension_count'
  | 'zero_dimension'
  | 'size_overflow'
  | 'unknown_tensor_type'
  | 'removed_tensor_type'
  | 'row_not_block_aligned'
  | 'alignment_wrong_type'
  | 'invalid_alignment'
  | 'misaligned_tensor'
  | 'overlapping_tensors'
  | 'tensor_past_end'
  | 'unsupported_architecture'
  | 'missing_key'
  | 'bad_key'
  | 'missing_tensor'
  | 'bad_tensor'
  | 'tensor_shape'
  | 'unsupported_tensor_type'
  | 'tensor'
  | 'out_of_memory'
  | 'bad_context_size'
  | 'unfit_cache_type'
  | 'context_full'
  | 'token_out_of_range'
  | 'tokenizer'
  | 'vocabulary_mismatch'
  | 'chat_template'
  | 'bad_tools'
  | 'sampler'
  | 'empty_prompt'
  | 'prompt_too_long'
  | 'no_pooling'
  | 'embedding_only'
  | 'split_file'
  | 'projector_file'
  | 'bad_projector'
  | 'unsupported_projector'
  | 'mmproj_mismatch'
  | 'no_mmproj'
  | 'bad_image'
  | 'image_too_large'
  | 'missing_shard'
  | 'duplicate_shard'
  | 'shard_mismatch'
  | 'empty_input'
  | 'input_too_long'
  | 'bad_dimensions'
  | 'nothing_to_continue'
  | 'no_gpu'
  | 'gpu_unsupported'
  | 'gpu_failed'
  | 'gpu_lost'
  | 'weights_on_gpu'
  | 'bad_schema'
  | 'bad_grammar'
  | 'grammar_forbids'
  | 'grammar_failed';

/** Every error the engine and the API report. `kind` is stable and machine-readable. */
export class InfernoError extends Error {
  constructor(info: { name?: string; kind?: string; message: string });
  /** The engine's error family: GgufError, EngineError, LoadError, NetworkError, WorkerError,
   *  ProtocolError, InitError, RuntimeError, AbortError, TypeError, RangeError... */
  name: string;
  kind: InfernoErrorKind;
}

export interface Capabilities {
  /** Whether the page is cross-origin isolated and can run the threaded build. */
  threads: boolean;
  /** `navigator.hardwareConcurrency`, which WebKit reports in buckets (`coresBucketed`: 4 for
   *  any machine under 8 cores), so that `defaultThreads` is then 2. */
  hardwareThreads: number;
  coresBucketed: boolean;
  defaultThreads: number;
  relaxedSimd: boolean;
  /** Whether files over 3.6 GiB can run (64-bit memory). */
  memory64: boolean;
  /** Whether models can be kept in this browser (Origin Private File System). */
  opfs: boolean;
  /** Whether the browser has WebGPU (`navigator.gpu`); `Inferno.gpuAdapter()` says more. */
  webgpu: boolean;
  /** What this browser lacks, each with what the engine does instead (the page shows them). */
  missing: { feature: string; fallback: string }[];
}

/** The GPU adapter the browser offers (WebGPU). */
export interface GpuAdapter {
  /** vendor, architecture and description joined ("google swiftshader"). */
  name: string;
  vendor: string;
  architecture: string;
  description: string;
  /** A software renderer (SwiftShader, llvmpipe): `device: 'auto'` runs on the CPU instead. */
  software: boolean;
  features: string[];
  limits: {
    maxStorageBufferBindingSize: number;
    maxBufferSize: number;
    maxComputeInvocationsPerWorkgroup: number;
    maxComputeWorkgroupStorageSize: number;
  };
}

/** What `device: 'auto'` measured: milliseconds per decode step on each device, and whether
 *  the figures were kept from an earlier load of the same file (same adapter, build, threads). */
export interface DeviceMeasurement {
  gpu_ms: number;
  cpu_ms: number;
  remembered: boolean;
}

/** Where a model runs: the GPU (with the adapter's name) or the CPU. `reason` says why, where
 *  there was a choice ('auto': the measurement, a software adapter, what the GPU cannot run). */
export type Device =
  | { type: 'gpu'; name: string; reason: string | null; measured: DeviceMeasurement | null }
  | { type: 'cpu'; threads: number; reason: string | null; measured: DeviceMeasurement | null };

export interface StoredModel {
  name: string;
  size: number;
  modified: number;
  /** The size of the vision projector kept beside it, or null. */
  projector: number | null;
}

export interface StoredModels {
  available(): boolean;
  list(): Promise<StoredModel[]>;
  keep(
    name: string,
    source: Blob | string,
    onProgress?: (bytes: number, total: number) => void,
  ): Promise<{ name: string; size: number }>;
  /** Keeps a vision projector beside the model `name`; load it with `{mmproj: {opfs: name}}`. */
  keepProjector(
    name: string,
    source: Blob | string,
    onProgress?: (bytes: number, total: number) => void,
  ): Promise<{ name: string; size: number }>;
  /** The projector kept beside the model `name`, or null. */
  projector(name: string): Promise<File | null>;
  has(name: string, size: number): Promise<boolean>;
  /** Deletes a kept model and the projector kept beside it. */
  remove(name: string): Promise<void>;
  estimate(): Promise<StorageEstimate | null>;
}

export interface EngineOptions {
  /** Threads to run on (null or 0: the machine's cores, capped at 8; 1 without cross-origin isolation). */
  threads?: number | null;
  /** false forces the plain SIMD128 build even where relaxed SIMD runs. */
  relaxed?: boolean;
  /** Silence (ms) after which a busy engine counts as stalled and is restarted (default 60000). */
  stallMs?: number;
  /** Where worker.js is, if not beside inferno.js (relative to the page); its folder must hold
   *  the rest of the package. Not a URL: InfernoError bad_request. */
  workerUrl?: string | URL;
}

export interface LoadProgress {
  /** downloading: a resumable URL load's bytes on their way into OPFS; projector: a vision
   *  projector's bytes (LoadOptions.mmproj), read before the model's; reading: the bytes
   *  going into the engine (from the file, the stream, or the finished download). */
  phase: 'downloading' | 'projector' | 'reading' | 'validating' | 'device' | 'ready';
  loaded: number;
  total: number;
  /** Bytes per second in this phase so far (of what is fetched now, for a resumed download). */
  rate: number;
  /** A resumed download: the bytes an earlier, interrupted one had already written. */
  resumedFrom?: number;
}

export interface LoadOptions {
  onProgress?: (progress: LoadProgress) => void;
  /** Restarts the engine with this many threads if it runs another count. */
  threads?: number | null;
  signal?: AbortSignal;
  /** 'auto' (default): a hardware GPU that runs the whole model, if it decodes faster than the
   *  CPU engine (a few steps timed on each at the first load, then remembered per file,
   *  adapter, build and thread count: `model.device.measured`), else the CPU; 'gpu': fail
   *  (no_gpu, gpu_unsupported) rather than fall back; 'cpu'. */
  device?: 'auto' | 'gpu' | 'cpu';
  /** Where the weights are held. 'memory': in wasm memory, where either device can run them.
   *  'gpu': each matrix (and the token embedding) goes straight into GPU buffers as the file
   *  arrives, and only the header and small tensors stay in wasm memory, so a file larger than
   *  wasm memory loads wherever the GPU holds it; the model then runs on that GPU only (not
   *  with device 'cpu': bad_request), and a lost GPU means loading it again. Default: 'gpu' for
   *  a file larger than the 32-bit memory (3.6 GiB) when no 64-bit build takes it (Safari) or
   *  device is 'gpu', with a hardware GPU ('auto') or any ('gpu'); else 'memory'. A split model
   *  does not stream (gpu_unsupported). */
  weights?: 'memory' | 'gpu';
  /** How attention on the CPU keeps its query and its sums of weighted values: 'fast' (the
   *  default) in f32; 'exact' in F16 as llama.cpp's CPU flash attention does, which gives its
   *  logits bit for bit (wasm has no half-precision instructions, so this costs decode speed on
   *  long contexts). The GPU's attention is f32 either way. */
  precision?: 'fast' | 'exact';
  /** What the KV cache keeps keys and values as, as llama.cpp's `-ctk`/`-ctv`: 'f16' (the
   *  default); 'q8_0' (34 bytes per 32 values, 53 % of F16's memory: llama.cpp's blocks, with
   *  queries, keys and values turned by a Walsh-Hadamard matrix around them as llama.cpp turns
   *  them); 'f32' (twice F16's memory, attention over the exact values). Types other than F16
   *  run on the CPU only ('auto' stays there and says why; 'gpu' fails with gpu_unsupported).
   *  Q8_0 needs heads that are whole blocks of 32 values (else unfit_cache_type). */
  cache_type_k?: CacheType;
  cache_type_v?: CacheType;
  /** A URL load: true downloads it in parallel Range requests into OPFS, resuming after a
   *  dropped connection or a reload; false streams it once; default: true for files of 256 MiB
   *  or more. Without OPFS or Range support on the server it streams. */
  resumable?: boolean;
  /** A vision projector (mmproj) to load beside the model, so that chat messages can hold
   *  pictures (`image_url` parts). It is read before the old model is freed; a projector made
   *  for another model (kind mmproj_mismatch) or one the engine cannot encode
   *  (unsupported_projector, bad_projector) fails the load. Its bytes report the phase
   *  'projector'. */
  mmproj?: ProjectorSource;
  /** The least rows of embeddings a picture takes, where the projector sizes pictures at their
   *  own aspect (Gemma 4: 70 to 1120 by default; LFM2-VL: 64 to 256), as llama.cpp's
   *  `--image-min-tokens`; projectors whose pictures all take the same rows ignore it. A whole
   *  number of at least 1 (else bad_request); with `image_max_tokens`, at most it. */
  image_min_tokens?: number;
  /** The most rows of embeddings a picture takes (llama.cpp's `--image-max-tokens`): fewer
   *  encode faster, the encoder's attention growing with the square of a picture's patches. At
   *  most the projector's own (else bad_request). `model.vision.image_tokens` says the limits in
   *  force. */
  image_max_tokens?: number;
}

/** Options of attachProjector: the limits on a picture's rows, as LoadOptions gives them. */
export interface ProjectorOptions {
  image_min_tokens?: number;
  image_max_tokens?: number;
}

/** A vision projector (mmproj) file: a File or Blob, a URL (relative to the page), or the one
 *  kept in this browser beside the model of that name (StoredModels.keepProjector). */
export type ProjectorSource = Blob | string | URL | { opfs: string };

/** What a vision projector file says about itself: the engine's own type. */
export type ProjectorFacts = import('./engine-types.js').ProjectorFacts;

/** A KV cache type, as llama.cpp names it. */
export type CacheType = 'f16' | 'q8_0' | 'f32';

/** A File or Blob, a URL (relative to the page), or a model kept in this browser. */
/** A file, a URL (a URL named NAME-00001-of-00003.gguf brings every shard of that split
 *  model), a model kept in the browser, or a split model's shards in any order. */
export type ModelSource = Blob | string | URL | { opfs: string } | Blob[] | (string | URL)[];

/** The sampling settings in force: the engine's own type (src/sampler/mod.rs's
 *  `SamplerSettings`, declared in engine-types.d.ts from it). */
export type SamplingSettings = import('./engine-types.js').SamplerSettings;

export interface ModelInfo {
  name: string;
  size: number;
  source: 'file' | 'url' | 'opfs';
  architecture: string;
  vocab_size: number;
  context_length: number;
  template: { kind: 'file' } | { kind: 'builtin'; name: string };
  end_of_generation: number[];
  /** The file's `general.sampling.*` keys over llama.cpp's defaults. */
  recommended_sampling: SamplingSettings;
  /** The pooling the file declares (`pooling_type`), or null. */
  pooling: 'none' | 'mean' | 'cls' | 'last' | 'rank' | null;
  /** What the file is for, from that pooling and whether it has a chat template. */
  purpose: 'chat' | 'embedding' | 'chat_and_embedding' | 'reranker';
  /** Whether it has an output layer to generate with: an encoder (`bert`, `nomic-bert`) only
   *  embeds, and a chat request gets kind `embedding_only`. */
  generates: boolean;
  /** Whether its chat template reads `reasoning_effort` (gpt-oss), so a chat request's
   *  `reasoning_effort` changes the prompt. */
  reads_reasoning_effort: boolean;
  /** Files the model came in (gguf-split shards); 1 for one file. */
  shards: number;
  /** A resumable download's story: bytes found from an earlier one, connections resumed,
   *  parallel ranges. */
  download?: { resumedFrom: number; retries: number; parts: number };
  threads: number;
  memory64: boolean;
  /** Where it runs; after a lost GPU (kind gpu_lost), the CPU. */
  device: Device;
  /** Where its weights are held (LoadOptions.weights): on 'gpu' the model runs there only. */
  weights: 'memory' | 'gpu';
  /** Attention's precision on the CPU (LoadOptions.precision). */
  precision: 'fast' | 'exact';
  /** What the KV cache keeps keys and values as (LoadOptions.cache_type_k/_v). */
  cache_type_k: CacheType;
  cache_type_v: CacheType;
  /** The vision projector attached beside the model (LoadOptions.mmproj, attachProjector()),
   *  or null: without one, a picture in a message is refused (kind no_mmproj). */
  vision: ProjectorFacts | null;
  load_ms: number;
}

export interface EngineInfo {
  version: string;
  simd128: boolean;
  relaxed_simd: boolean;
  threads: number;
  build: string;
  threads_note: string | null;
  /** Bytes of the engine's wasm memory now (it never shrinks), or null before the engine
   *  has started. */
  memory_bytes: number | null;
  defaults: { sampling: SamplingSettings; context_cap: number };
}

export interface Inspection {
  /** The inspector's report: header, metadata, tokenizer, chat template, tensors, and `runs`:
   *  whether this page can load it and chat (`ok`, else `reason`; `embeds_only`; `too_large`:
   *  refused only for the WebAssembly memory it needs; `on_gpu`: it loads with its weights on
   *  the GPU instead). */
  report: Record<string, unknown>;
  bytesRead: number;
  ms: number;
}

export interface ChatMessage {
  /** `developer` is taken as `system`. */
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool' | (string & {});
  /** May be null in an assistant message that made tool calls. Parts are joined as
   *  llama.cpp's server joins them: a newline between two texts, none beside a picture. */
  content: string | ContentPart[] | null;
  /** An assistant message's calls, as an answer gave them. */
  tool_calls?: ToolCall[];
  /** A `tool` message: the call it answers. */
  tool_call_id?: string;
  name?: string;
  /** An earlier answer's reasoning (templates that keep it render it). */
  reasoning_content?: string;
}

/** A part of a message's content: text, or a picture (a `data:`, `blob:` or `http(s):` URL,
 *  fetched by the page; PNG, JPEG, GIF, WebP, BMP or AVIF, decoded by the browser with its EXIF
 *  orientation applied). A picture needs a vision projector (kind no_mmproj without one);
 *  one that cannot be read is kind bad_image, one over 32 megapixels or 65,536 pixels a side
 *  image_too_large. */
export type ContentPart =
  | { type: 'text'; text: string }
  | { type: 'image_url'; image_url: { url: string; detail?: 'auto' | 'low' | 'high' } };

/** A function the model may call. Its name is 1 to 64 letters, digits, `_`, `-` or `.`;
 *  `parameters` is a JSON schema of the arguments object (closed to undescribed keys unless it
 *  sets `additionalProperties`). */
export interface Tool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

export interface ToolCall {
  id: string;
  type: 'function';
  /** `arguments` is JSON text. */
  function: { name: string; arguments: string };
}

/** A piece of a streamed call: the first for a call has its id and name; later ones carry
 *  more of `arguments` (join them by `index`). */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function: { name?: string; arguments?: string };
}

export type ToolChoice = 'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } };

/** The assistant's message: `content` is null when it only made calls. */
export interface AssistantMessage {
  role: 'assistant';
  content: string | null;
  /** Present when the model reasons (Qwen3, Qwen3.5, SmolLM3...) and reasoning_format is 'auto'. */
  reasoning_content?: string;
  tool_calls?: ToolCall[];
}

/** The delta of one chunk. */
export interface ChatDelta {
  role?: 'assistant';
  content?: string;
  reasoning_content?: string;
  tool_calls?: ToolCallDelta[];
}

/** Joins a chat stream's deltas into its message, as an OpenAI client does. */
export class MessageBuilder {
  content: string;
  reasoning: string;
  calls: ToolCall[];
  add(delta: ChatDelta): void;
  message(): AssistantMessage;
}

/** Options of the output, shared by create() and branch(). */
export interface OutputParams {
  stream?: boolean;
  /** Tokens the answer may have (for a branch, counted from the start of the answer). */
  max_tokens?: number;
  max_completion_tokens?: number;
  /** The answer ends before the first of these strings (which is not included). */
  stop?: string | string[];
  logprobs?: boolean;
  /** 0..100 alternatives per token in `logprobs` (needs logprobs: true). */
  top_logprobs?: number;
  /** Extension: candidates recorded in `inferno.step.trace` (default 20, at most 100). */
  trace_top?: number;
  /** Abort stops within one decode step; the answer ends with finish_reason "abort". */
  signal?: AbortSignal;
}

/** What a chat completion and a text completion are both asked with. */
export interface AnswerParams {
  /** Only 1. */
  n?: 1;
  /** Defaults: the file's recommendation, else llama.cpp's. */
  temperature?: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  repeat_penalty?: number;
  /** How many of the latest tokens the repeat penalty looks at (llama.cpp's `repeat_last_n`;
   *  0: none). A whole number. */
  repeat_last_n?: number;
  /** Default: a fresh random seed, reported in `inferno.stats.seed`. */
  seed?: number;
  /** Extension: the KV cache size (default: the model's context length, capped at 4096). */
  context_size?: number;
  /**
   * The answer follows JSON (any object, or a JSON schema) or, as an extension, a Lark grammar
   * (llguidance's syntax). It is compiled before the answer starts: a schema or grammar that
   * cannot be used fails with kind bad_schema or bad_grammar.
   */
  response_format?: ResponseFormat;
  /** Extension: progress while a long prompt is read: its pictures encoded ('image', counted
   *  in pictures, and within a tiled picture in parts), then its text's parts ('text', counted
   *  in tokens). */
  onPrefillProgress?: (progress: PrefillProgress) => void;
}

export interface ChatCompletionParams extends OutputParams, AnswerParams {
  messages: ChatMessage[];
  /** Extension: Qwen3's thinking switch, passed to the chat template. */
  enable_thinking?: boolean;
  /** How hard to reason, passed to templates that read it (gpt-oss's). */
  reasoning_effort?: import('./engine-types.js').ReasoningEffort;
  /** 'auto' (default): the reasoning goes apart, in `reasoning_content`; 'none': it stays in
   *  the content as the model wrote it. */
  reasoning_format?: 'auto' | 'none';
  /**
   * Functions the model may call, rendered through the file's own chat template (or, for a
   * template with no tool format, described in the system prompt with the answer held to JSON:
   * llama.cpp's generic route). Calls are read per family (Hermes/Qwen3 `<tool_call>` JSON,
   * Qwen3.5 XML, Llama 3.x JSON, Phi-4-mini `functools`, Gemma 4 `call:NAME{...}`, LFM2
   * `[NAME(key=value)]`, generic) and
   * arrive as `tool_calls`,
   * with finish_reason 'tool_calls'. Mistakes are kind bad_tools; tools cannot be combined with
   * response_format.
   */
  tools?: Tool[];
  /** 'required' or a named function holds the answer to a call by a grammar built from the
   *  tools' schemas, so its arguments always parse (the thinking switch then defaults off). */
  tool_choice?: ToolChoice;
  /** Default true. */
  parallel_tool_calls?: boolean;
}

export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; json_schema: { name?: string; schema: Record<string, unknown>; strict?: boolean } }
  | { type: 'grammar'; grammar: string };

export interface BranchParams extends OutputParams {
  /** The step (0-based, in the last answer) to regenerate from. */
  step: number;
  /** The token forced at that step. */
  token: number;
}

export interface TopLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

export interface TokenLogprob extends TopLogprob {
  top_logprobs: TopLogprob[];
}

/** One of a step's best tokens: its logit, its probability over the whole vocabulary (at the
 *  step's temperature, after the repetition penalty), its chance of being drawn (renormalized
 *  over the nucleus, 0 outside it) and whether it made the nucleus. */
export type Candidate = import('./engine-types.js').Candidate;

/** How a step was chosen: the best candidates with their pieces and bytes, the nucleus, the
 *  entropy, and with a response_format what the grammar allowed and removed
 *  (`grammar`, `forbidden_pieces`). */
export type StepTrace = import('./engine-types.js').TracedStep;

/** With a response_format: what the grammar allowed, and the model's best tokens it forbade. */
export type GrammarTrace = import('./engine-types.js').GrammarTrace;

/** How one token was chosen (the engine's `StepRecord`), with the sampling settings in force. */
export type Step = import('./engine-types.js').StepRecord & {
  /** The sampling settings in force. */
  settings: SamplingSettings;
};

/** The prompt as the cache took it: its tokens, those the cache already held (`reused`), those
 *  evaluated, the context, and the prefill's time. */
export type PromptFacts = import('./engine-types.js').PromptFacts;

/** How an answer went (the engine's `Stats`): prefill and decode speed, time to the first
 *  token, the context used, tokens replayed from a recurrent state's checkpoint, steps run on one
 *  thread, the seed; and the engine's WebAssembly memory (model, cache and scratch). */
/** What a prompt's prefill has done so far. */
export interface PrefillProgress {
  phase: 'image' | 'text';
  evaluated: number;
  total: number;
  /** While a picture encoded in parts (SmolVLM's and LFM2-VL's tiles and whole picture) is
   *  read: the parts of the picture after the `evaluated` ones encoded so far, and how many it has. */
  part?: number;
  parts?: number;
}

/** The engine's statistics, with the wasm memory it holds and how many pictures its projector
 *  has encoded since it was attached (a picture seen before is found by its content hash). */
export type CompletionStats = import('./engine-types.js').Stats & {
  memoryBytes: number | null;
  imagesEncoded: number;
};

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'abort';

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** `image_tokens`: the prompt's tokens that stand for pictures (a projector's rows). */
  prompt_tokens_details: { cached_tokens: number; image_tokens: number };
}

export interface FinishFacts {
  /** The engine's reason: end (an end-of-generation token), max_tokens, context_full,
   *  stopped (aborted) or stop_string. */
  finish: import('./engine-types.js').Finish;
  stop_string: string | null;
  /** What of the answer's JSON schema was not enforced: keywords the grammar engine lacks
   *  (`uniqueItems`, an unknown `format`...), left out of a schema that is not `strict`. */
  warnings: string[];
  stats: CompletionStats;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: Array<{
    index: 0;
    delta: ChatDelta;
    logprobs: { content: TokenLogprob[] } | null;
    finish_reason: FinishReason | null;
  }>;
  /** On the last chunk. */
  usage?: Usage;
  /** Extension: the first chunk has `prompt` (or `branch`), each token's chunk its `step`, the
   *  last one the finish facts. */
  inferno:
    | ({ prompt?: PromptFacts; branch?: { step: number; token: number }; step?: Step } & Partial<FinishFacts>)
    | null;
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{
    index: 0;
    message: AssistantMessage;
    logprobs: { content: TokenLogprob[] } | null;
    finish_reason: FinishReason;
  }>;
  usage: Usage;
  /** Extension: every step, the settings in force and the finish facts. */
  inferno: FinishFacts & { steps: Step[]; settings: SamplingSettings };
}

/** The legacy completions' request: the prompt as it is, no chat template. `logprobs` is the
 *  number of alternatives per token (0..100). */
export interface TextCompletionParams extends Omit<OutputParams, 'logprobs' | 'top_logprobs'>, AnswerParams {
  prompt: string;
  logprobs?: number;
}

export interface LegacyLogprobs {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Array<Record<string, number>>;
  text_offset: number[];
}

export interface TextCompletionChunk {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: Array<{
    index: 0;
    text: string;
    logprobs: LegacyLogprobs | null;
    finish_reason: FinishReason | null;
  }>;
  usage?: Usage;
  inferno: ChatCompletionChunk['inferno'];
}

export interface TextCompletion {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: Array<{ index: 0; text: string; logprobs: LegacyLogprobs | null; finish_reason: FinishReason }>;
  usage: Usage;
  inferno: ChatCompletion['inferno'];
}

export interface TextCompletions {
  create(params: TextCompletionParams & { stream: true }): Promise<AsyncIterable<TextCompletionChunk>>;
  create(params: TextCompletionParams & { stream?: false }): Promise<TextCompletion>;
  create(params: TextCompletionParams): Promise<AsyncIterable<TextCompletionChunk> | TextCompletion>;
}

export interface Completions {
  create(params: ChatCompletionParams & { stream: true }): Promise<AsyncIterable<ChatCompletionChunk>>;
  create(params: ChatCompletionParams & { stream?: false }): Promise<ChatCompletion>;
  create(params: ChatCompletionParams): Promise<AsyncIterable<ChatCompletionChunk> | ChatCompletion>;
}

export interface EmbeddingParams {
  /** One text or up to 2048; none may be empty. */
  input: string | string[];
  /** Keep only the first `dimensions` values (before scaling to unit length). */
  dimensions?: number;
  encoding_format?: 'float' | 'base64';
  /** Inferno: how to pool instead of the file's way (a chat model's file declares none). */
  pooling?: 'mean' | 'cls' | 'last';
  /** Inferno: `false` leaves the vectors as pooled instead of unit length. */
  normalize?: boolean;
  signal?: AbortSignal;
}

export interface EmbeddingResponse {
  object: 'list';
  data: { object: 'embedding'; index: number; embedding: number[] | string }[];
  model: string | null;
  usage: { prompt_tokens: number; total_tokens: number };
  inferno: { pooling: 'mean' | 'cls' | 'last'; ms: number };
}

export interface Embeddings {
  create(params: EmbeddingParams): Promise<EmbeddingResponse>;
}

export class Inferno {
  /** Use Inferno.create() or Inferno.load(). */
  constructor(options?: EngineOptions);
  /** Starts an engine (its Web Worker) with no model yet. */
  static create(options?: EngineOptions): Inferno;
  /** Starts an engine and loads a model into it. */
  static load(source: ModelSource, options?: EngineOptions & LoadOptions): Promise<Inferno>;
  static capabilities(): Capabilities;
  static gpuAdapter(): Promise<GpuAdapter | null>;
  static readonly storedModels: StoredModels;

  readonly chat: { readonly completions: Completions };
  /** OpenAI's legacy text completions. */
  readonly completions: TextCompletions;
  /** OpenAI-shaped sentence embeddings. */
  readonly embeddings: Embeddings;
  /** The loaded model, or null. */
  readonly model: ModelInfo | null;

  engineInfo(): Promise<EngineInfo>;
  load(source: ModelSource, options?: LoadOptions): Promise<ModelInfo>;
  /** Attaches a vision projector (mmproj) beside the loaded model; `model.vision` then holds
   *  its facts. Refused with kind mmproj_mismatch when it was made for another model. */
  attachProjector(source: ProjectorSource, options?: ProjectorOptions): Promise<ProjectorFacts>;
  /** The header of a file, without loading it. `device`: the one a load would ask for
   *  (LoadOptions.device): a file too large for wasm memory here gets `report.runs.on_gpu`
   *  where such a load would stream its weights to the GPU. */
  inspectFile(file: Blob | Blob[], options?: { device?: 'auto' | 'gpu' | 'cpu' }): Promise<Inspection>;
  /** The loaded model's report. */
  inspect(): Promise<Inspection>;
  tokenize(text: string, options?: { addSpecial?: boolean; parseSpecial?: boolean }): Promise<number[]>;
  detokenize(ids: ArrayLike<number>, options?: { renderSpecial?: boolean }): Promise<string>;
  /** Regenerates the last answer from `step` with `token` forced there (in the shape of that
   *  answer: a chat completion, or a text completion). */
  branch(
    params: BranchParams & { stream: true },
  ): Promise<AsyncIterable<ChatCompletionChunk> | AsyncIterable<TextCompletionChunk>>;
  branch(params: BranchParams & { stream?: false }): Promise<ChatCompletion | TextCompletion>;
  /** Forgets the cached conversation. */
  reset(): Promise<void>;
  unload(): Promise<void>;
  terminate(): void;
}
