// @ts-check
// The engine worker's protocol: every message between the public API (inferno.js, through
// worker-client.js) and the worker (worker.js), as types. Nothing here runs; `tsc -p www`
// checks both sides against these types, so a request the worker does not take, or a reply
// field the client does not get, fails the check.
//
// Every request is {type, id, ...} and gets exactly one final reply carrying the same id; long
// requests first post events {type, id, event: true, ...}. Anything that fails is answered with
// an ErrorReply instead, even a message that is no request at all (the worker never throws on
// one). Inputs are checked once, where they enter: the public API (inferno.js, errors with a
// `kind`) for the caller's values and the engine (Rust) for the model's bytes; the worker trusts
// the client for the shape of a request and checks only what it alone knows (its state: a model
// loaded, an answer to branch from, a run going on).
//
// Branch state lives in the client: the last answer's steps (inferno.js `#lastAnswer`, which a
// branch's result is built from anyway). A branch sends what the worker needs from it (where
// the step sits in the cache, the text kept before it); the worker holds only the engine and
// the answer being generated now.
//
// One load, chat, complete, branch or embed runs at a time; another generation meanwhile is
// refused with kind `busy`, while a new load cancels a running load (kind `cancelled`) or
// generation. Stop takes effect between two decode steps, two prefill parts or two embedding
// batches: those loops yield to the message queue after each one.

/** @typedef {import('./inferno.js').ModelInfo} ModelInfo */
/** @typedef {import('./inferno.js').EngineInfo} EngineInfo */
/** A step as the worker posts it: the client adds the sampling settings. @typedef {Omit<import('./inferno.js').Step, 'settings'>} Step */
/** @typedef {import('./inferno.js').Device} Device */
/** @typedef {import('./inferno.js').ChatMessage} ChatMessage */
/** @typedef {import('./inferno.js').Tool} Tool */
/** @typedef {import('./inferno.js').ToolChoice} ToolChoice */

// --- Requests --------------------------------------------------------------------------------

/**
 * The client's first message, before any request: it picks the build. Settings travel in a
 * message, not in the worker's URL, because a bundler follows only
 * `new Worker(new URL('./worker.js', import.meta.url))` written out in full. No reply unless
 * it comes after the engine started (bad_request).
 * @typedef {object} ConfigureRequest
 * @property {'configure'} type
 * @property {null} id
 * @property {number | null} threads more than one runs a shared-memory build; null: the
 *   machine's cores (capped), 1 where the page is not cross-origin isolated
 * @property {boolean} relaxed false: plain SIMD128 even where relaxed SIMD runs (and so no
 *   64-bit build, which needs relaxed SIMD)
 * @property {boolean} memory64 the 64-bit-memory build, for files too large for wasm32
 */

/**
 * A file's header, read by growing prefixes (1 MiB first), never the whole file. `files`: the
 * shards of a split model, one report across them all.
 * @typedef {{type: 'inspect', id: number, file?: Blob, files?: Blob[]}} InspectRequest
 */
/** @typedef {{type: 'inspect_loaded', id: number}} InspectLoadedRequest */
/** @typedef {{type: 'model', id: number}} ModelRequest */
/** @typedef {{type: 'info', id: number}} InfoRequest */

/**
 * Loads a model from one source: a File, a URL, or a split model's shards (`files`, `urls`, or
 * a `url` named NAME-00001-of-00003.gguf, whose siblings are found by that rule).
 * @typedef {object} LoadRequest
 * @property {'load'} type
 * @property {number} id
 * @property {Blob} [file]
 * @property {string} [url]
 * @property {Blob[]} [files]
 * @property {string[]} [urls]
 * @property {'file' | 'url' | 'opfs'} [source] what ModelInfo.source says (default: file or url)
 * @property {Device['type'] | 'auto'} [device] 'auto' takes a hardware GPU that runs every part
 *   of the model if it decodes faster than the CPU (measured, then remembered), else the CPU
 *   (saying why); 'gpu' fails instead
 * @property {boolean} [resumable] a URL downloaded into OPFS in parallel Range requests
 *   (download.js) and resumed after a drop or a reload: true always, false never, else for
 *   files of 256 MiB or more
 */

/**
 * What chat and complete share. `settings` are the sampling settings, resolved by inferno.js.
 * @typedef {object} GenerationFields
 * @property {number} id
 * @property {Record<string, number>} settings
 * @property {ResponseGrammar} [grammar] what the answer must match (from response_format)
 * @property {number} [maxTokens] default DEFAULT_MAX_TOKENS (defaults.js)
 * @property {number} traceTop candidates recorded per step
 * @property {number} [context] the KV cache's length
 */

/**
 * The constraint a response_format asks for; the engine compiles it (or refuses it, kind
 * bad_schema or bad_grammar) before the answer starts.
 * @typedef {{type: 'json_object'} | {type: 'json_schema', schema: string} | {type: 'lark', grammar: string}} ResponseGrammar
 */

/**
 * A chat answer: the messages rendered through the model's template.
 * @typedef {GenerationFields & {
 *   type: 'chat',
 *   messages: ChatMessage[],
 *   enableThinking?: boolean,
 *   tools?: Tool[],
 *   toolChoice?: ToolChoice,
 *   parallelToolCalls?: boolean,
 *   splitReasoning?: boolean,
 * }} ChatRequest
 */
/** A legacy text completion: the prompt as it is. @typedef {GenerationFields & {type: 'complete', prompt: string}} CompleteRequest */

/**
 * Regenerates the last answer from step `step` on, with `token` forced there. The client holds
 * the answer (see the top of this file) and sends what the worker needs of it.
 * @typedef {object} BranchRequest
 * @property {'branch'} type
 * @property {number} id
 * @property {number} step the answer's step to regenerate from (the first step posted)
 * @property {number} token forced at that step
 * @property {number} position the cache's length to roll back to: that step's `position`
 * @property {string} keptText the answer's text before the step (a structured answer is read
 *   as it grows, from the start)
 * @property {boolean} structured whether the answer is read as a message (reasoning, tool calls)
 * @property {number} [maxTokens]
 * @property {number} traceTop
 */

/** Ends the running load, generation or embedding at its next step. @typedef {{type: 'stop', id: number | null}} StopRequest */
/** Forgets the cached conversation (refused while a generation runs). @typedef {{type: 'reset', id: number}} ResetRequest */
/** No options: as a prompt. @typedef {{type: 'tokenize', id: number, text: string, addSpecial?: boolean, parseSpecial?: boolean}} TokenizeRequest */
/** @typedef {{type: 'detokenize', id: number, ids: number[], renderSpecial?: boolean}} DetokenizeRequest */
/**
 * Sentence embeddings, one batch of texts per wasm call, so a stop ends it between two.
 * @typedef {object} EmbedRequest
 * @property {'embed'} type
 * @property {number} id
 * @property {string[]} input
 * @property {string} [pooling]
 * @property {number} [dimensions]
 * @property {boolean} [normalize]
 */
/** The answer's final text (a stop string may have cut it) read as a message. @typedef {{type: 'parse_reply', id: number, text: string}} ParseReplyRequest */
/** @typedef {{type: 'unload', id: number}} UnloadRequest */
/**
 * Answered at once unless a wasm call is running: the client's stall watchdog
 * (worker-client.js) tells a slow disk from a worker stuck in the engine by it.
 * @typedef {{type: 'ping', id: number | null}} PingRequest
 */
/**
 * Test only: crashes the engine on purpose (its `deliberate_trap`), so page tests can check the
 * recovery. Only the page tests' module (examples/test_hooks.rs) exports it; elsewhere this is
 * an unknown request.
 * @typedef {{type: 'trap', id: number}} TrapRequest
 */

// --- Replies -----------------------------------------------------------------------------------
// Written without their id: the dispatcher adds the request's.

/** @typedef {{type: 'inspected', report: Record<string, unknown>, bytesRead: number, ms: number}} InspectedReply */
/** @typedef {{type: 'model', model: ModelInfo | null}} ModelReply */
/** The build that runs besides the engine's facts. @typedef {{type: 'info', info: EngineInfo}} InfoReply */
/** @typedef {{type: 'loaded', model: ModelInfo, ms: number}} LoadedReply */
/**
 * The file needs the other memory (a large file in a wasm32 worker, or a small one in a
 * memory64 worker, whose memory never shrinks): the client starts a worker of that kind and
 * sends the load again, so callers never see this.
 * @typedef {{type: 'switch_build', memory64: boolean}} SwitchBuildReply
 */
/**
 * The end of a chat, complete or branch.
 * @typedef {{type: 'done', reason: 'end' | 'max_tokens' | 'context_full' | 'stopped', stats: GenerationStats}} DoneReply
 */
/** The client adds the seed. @typedef {Omit<import('./inferno.js').CompletionStats, 'seed'>} GenerationStats */
/** @typedef {{type: 'stopped', wasGenerating: boolean}} StoppedReply */
/** @typedef {{type: 'reset'}} ResetReply */
/** @typedef {{type: 'tokens', ids: number[]}} TokensReply */
/** @typedef {{type: 'text', text: string}} TextReply */
/** @typedef {{type: 'embeddings', vectors: Float32Array[], promptTokens: number, pooling: string, ms: number}} EmbeddingsReply */
/** @typedef {{type: 'reply', reply: ParsedReply}} ParseReplyReply */
/** An answer read as a message. @typedef {{content: string | null, reasoning_content?: string, tool_calls?: import('./inferno.js').ToolCall[]}} ParsedReply */
/** @typedef {{type: 'unloaded'}} UnloadedReply */
/** @typedef {{type: 'pong'}} PongReply */

/**
 * A failure. `fatal`: the worker ends itself (after a trap the glue keeps its dead instance,
 * and a threaded build's helpers share its memory; after a start timeout half-started helpers
 * may hold it), and the client starts a new one.
 * @typedef {object} ErrorReply
 * @property {'error'} type
 * @property {number | null} id
 * @property {{name: string, kind: string, message: string}} error
 * @property {boolean} [fatal]
 */

// --- Events ------------------------------------------------------------------------------------

/**
 * A load's progress, at most every 100 ms (the last bytes before a pause included).
 * @typedef {object} ProgressEvent
 * @property {'progress'} type
 * @property {number} id
 * @property {true} event
 * @property {'downloading' | 'reading' | 'validating' | 'device' | 'ready'} phase
 * @property {number} bytes
 * @property {number} total
 * @property {number} rate bytes per second in this phase, from where it started
 * @property {number} [resumedFrom] a resumed download's bytes already on disk
 */
/** Between two parts of a long prompt. @typedef {{type: 'prefill', id: number, event: true, evaluated: number, total: number}} PrefillEvent */
/**
 * The prompt is in the cache; the answer starts.
 * @typedef {{type: 'prepared', id: number, event: true, prepared: PreparedPrompt, ms: number}} PreparedEvent
 */
/**
 * @typedef {object} PreparedPrompt
 * @property {number} prompt_tokens
 * @property {number} context_size
 * @property {boolean} structured
 * @property {number} reused tokens the cache already held
 * @property {number} evaluated
 * @property {number} remaining
 * @property {number} context_used
 */
/**
 * One step of the answer; `reply`: a structured answer read as a message so far.
 * @typedef {{type: 'token', id: number, event: true, step: Step, reply?: ParsedReply}} TokenEvent
 */

/** @typedef {ProgressEvent | PrefillEvent | PreparedEvent | TokenEvent} WorkerEvent */

// --- The protocol as one map ---------------------------------------------------------------------

/**
 * Each request type, its request and its final reply (`null`: none). The worker's handlers are
 * typed from it (worker.js), and so is the client's `request()` (worker-client.js).
 * @typedef {{
 *   configure: [ConfigureRequest, null],
 *   inspect: [InspectRequest, InspectedReply],
 *   inspect_loaded: [InspectLoadedRequest, InspectedReply],
 *   model: [ModelRequest, ModelReply],
 *   info: [InfoRequest, InfoReply],
 *   load: [LoadRequest, LoadedReply | SwitchBuildReply],
 *   chat: [ChatRequest, DoneReply],
 *   complete: [CompleteRequest, DoneReply],
 *   branch: [BranchRequest, DoneReply],
 *   stop: [StopRequest, StoppedReply],
 *   reset: [ResetRequest, ResetReply],
 *   tokenize: [TokenizeRequest, TokensReply],
 *   detokenize: [DetokenizeRequest, TextReply],
 *   embed: [EmbedRequest, EmbeddingsReply],
 *   parse_reply: [ParseReplyRequest, ParseReplyReply],
 *   unload: [UnloadRequest, UnloadedReply],
 *   ping: [PingRequest, PongReply],
 *   trap: [TrapRequest, never],
 * }} Protocol
 */

/** @typedef {keyof Protocol} RequestType */
/** @template {RequestType} T @typedef {Protocol[T][0]} RequestOf */
/** @template {RequestType} T @typedef {Protocol[T][1]} ReplyOf */
/** @typedef {Protocol[RequestType][0]} Request */
/** A request as the client writes it: the client adds type and id. @template {RequestType} T @typedef {T extends RequestType ? Omit<RequestOf<T>, 'type' | 'id'> : never} RequestFields */
/** A final reply as posted, with its request's id. @typedef {(NonNullable<Protocol[RequestType][1]> & {id: number | null}) | ErrorReply} Reply */

export {};
