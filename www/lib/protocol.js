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
// An answer is the engine's (src/engine/generation.rs): it prefills, decodes, applies stop
// strings, reads the answer into deltas and keeps its steps, so a branch names only a step and
// a token. The worker is a pump that posts the engine's events; the client turns them into
// OpenAI chunks.
//
// One load, chat, complete, branch or embed runs at a time; another generation meanwhile is
// refused with kind `busy`, while a new load cancels a running load (kind `cancelled`) or
// generation. Stop takes effect between two decode steps, two prefill parts or two embedding
// batches: those loops yield to the message queue after each one.

/** @typedef {import('./inferno.js').ModelInfo} ModelInfo */
/** @typedef {import('./inferno.js').EngineInfo} EngineInfo */
/** A step as the engine gives it: the client adds the sampling settings. @typedef {import('./engine-types.js').StepRecord} Step */
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
 * shards of a split model, one report across them all. `device`: the device a load would ask
 * for (LoadRequest's), which decides whether a file too large for WebAssembly memory here
 * could stream its weights to the GPU instead (`report.runs.on_gpu`).
 * @typedef {{type: 'inspect', id: number, file?: Blob, files?: Blob[], device?: Device['type'] | 'auto'}} InspectRequest
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
 * @property {'memory' | 'gpu'} [weights] where the weights are held: 'gpu' streams them
 *   straight into GPU buffers as the file arrives (the model then runs there only); default:
 *   'gpu' for a file larger than the 32-bit memory where no 64-bit build takes it
 * @property {'fast' | 'exact'} [precision] how attention on the CPU keeps its query and sums:
 *   'fast' (the default) in f32, 'exact' in F16 as llama.cpp's CPU does (its bits)
 * @property {'f16' | 'q8_0' | 'f32'} [cache_type_k] what the KV cache keeps keys as (default
 *   f16; others run on the CPU only)
 * @property {'f16' | 'q8_0' | 'f32'} [cache_type_v] the same for values
 * @property {boolean} [resumable] a URL downloaded into OPFS in parallel Range requests
 *   (download.js) and resumed after a drop or a reload: true always, false never, else for
 *   files of 256 MiB or more
 * @property {Blob | string} [mmproj] a vision projector to attach beside the model (a File or
 *   a URL): read before the old model is freed, attached before the device is chosen; a
 *   refusal fails the load
 * @property {number} [image_min_tokens] the least rows a picture takes, where the projector
 *   sizes pictures at their own aspect (mtmd's option of that name)
 * @property {number} [image_max_tokens] the most
 */

/**
 * A vision projector (mmproj) beside the loaded model, from a File or a URL; refused while an
 * answer runs (busy), or by the engine (mmproj_mismatch, bad_projector...).
 * @typedef {{type: 'attach_projector', id: number, file?: Blob, url?: string,
 *   image_min_tokens?: number, image_max_tokens?: number}} AttachProjectorRequest
 */

/**
 * The answer requests are the engine's own types (src/engine/request.rs, declared in
 * engine-types.d.ts from them), with the message's type and id: the worker hands the rest to
 * `start_chat`, `start_text` or `start_branch` as it is. `settings` are the sampling settings,
 * resolved by inferno.js.
 * A chat's `images` are its pictures' files, in the order of the `<__media__>` markers its
 * messages hold (the client put them there); the worker decodes them and adds them first.
 * @typedef {import('./engine-types.js').ChatRequest & {type: 'chat', id: number, images?: Blob[]}} ChatRequest
 * @typedef {import('./engine-types.js').TextRequest & {type: 'complete', id: number}} CompleteRequest
 * @typedef {import('./engine-types.js').BranchRequest & {type: 'branch', id: number}} BranchRequest
 */
/**
 * The constraint a response_format asks for; the engine compiles it (or refuses it, kind
 * bad_schema or bad_grammar) before the answer starts.
 * @typedef {import('./engine-types.js').GrammarRequest} ResponseGrammar
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
/** @typedef {{type: 'projector', vision: import('./inferno.js').ProjectorFacts}} ProjectorReply */
/**
 * The file needs the other memory (a large file in a wasm32 worker, or a small one in a
 * memory64 worker, whose memory never shrinks): the client starts a worker of that kind and
 * sends the load again, so callers never see this.
 * @typedef {{type: 'switch_build', memory64: boolean}} SwitchBuildReply
 */
/**
 * The end of a chat, complete or branch, as the engine's Generation says it (src/engine/
 * generation.rs, `Event::Done`, typed from it in engine-types.d.ts): why (`finish`, and OpenAI's
 * `finish_reason`, which the client turns to 'abort' when the caller aborted), the stop string
 * that ended it, what the end adds to the message, the usage, the statistics (the worker adds
 * `memoryBytes`) and what of the grammar was not enforced.
 * @typedef {Omit<Extract<import('./engine-types.js').Event, {type: 'done'}>, 'stats'> & {stats: import('./inferno.js').CompletionStats}} DoneReply
 */
/**
 * What a token (or the end) adds to the message sent so far: a plain answer's new content; a
 * structured one's growth of each field, a tool call's name the first time it appears.
 * @typedef {import('./engine-types.js').Delta} Delta
 */
/** @typedef {{type: 'stopped', wasGenerating: boolean}} StoppedReply */
/** @typedef {{type: 'reset'}} ResetReply */
/** @typedef {{type: 'tokens', ids: number[]}} TokensReply */
/** @typedef {{type: 'text', text: string}} TextReply */
/** @typedef {{type: 'embeddings', vectors: Float32Array[], promptTokens: number, pooling: string, ms: number}} EmbeddingsReply */
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
 * @property {'downloading' | 'projector' | 'reading' | 'validating' | 'device' | 'ready'} phase
 *   ('projector': a vision projector's bytes, read before the model's)
 * @property {number} bytes
 * @property {number} total
 * @property {number} rate bytes per second in this phase, from where it started
 * @property {number} [resumedFrom] a resumed download's bytes already on disk
 */
/** Between two parts of a long prompt. @typedef {{type: 'prefill', id: number, event: true, evaluated: number, total: number}} PrefillEvent */
/**
 * A chat's picture `index` of `count` is encoded (or was found encoded before): `rows` of
 * the prompt stand for it.
 * @typedef {{type: 'image', id: number, event: true, index: number, count: number, rows?: number, part?: number, parts?: number}} ImageEvent
 */
/**
 * The engine's events (`next_events`), as the worker posts them: with the request's id, and
 * `event: true`.
 * @template {import('./engine-types.js').Event['type']} T
 * @typedef {Extract<import('./engine-types.js').Event, {type: T}> & {id: number, event: true}} Posted
 */
/** The prompt is in the cache; the answer starts. @typedef {Posted<'prepared'>} PreparedEvent */
/** A branch starts: the steps it keeps, and what their text adds to an empty message. @typedef {Posted<'branched'>} BranchedEvent */
/** One step of the answer, and what it adds to the message. @typedef {Posted<'token'>} TokenEvent */

/** What the engine's `next_events` returns. @typedef {import('./engine-types.js').Event} AnswerEvent */

/** @typedef {ProgressEvent | PrefillEvent | ImageEvent | PreparedEvent | BranchedEvent | TokenEvent} WorkerEvent */

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
 *   attach_projector: [AttachProjectorRequest, ProjectorReply],
 *   chat: [ChatRequest, DoneReply],
 *   complete: [CompleteRequest, DoneReply],
 *   branch: [BranchRequest, DoneReply],
 *   stop: [StopRequest, StoppedReply],
 *   reset: [ResetRequest, ResetReply],
 *   tokenize: [TokenizeRequest, TokensReply],
 *   detokenize: [DetokenizeRequest, TextReply],
 *   embed: [EmbedRequest, EmbeddingsReply],
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
