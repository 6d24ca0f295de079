// @ts-check
// The front end's defaults, in one place: the worker, the public API (inferno.js) and the chat
// page read them from here. Sampling defaults are not here: they come from the engine
// (`engineInfo().defaults.sampling`, llama.cpp's) and the loaded file (`model.recommended_sampling`).

/** Tokens an answer may have when the caller names no limit. */
export const DEFAULT_MAX_TOKENS = 512;
/** The largest answer a request may ask for. */
export const MAX_TOKENS_LIMIT = 1 << 20;
/** Candidates recorded per step for the visualizer (and the most `top_logprobs` can give). */
export const DEFAULT_TRACE_TOP = 20;
export const MAX_TRACE_TOP = 100;
/** The chat page's context (KV cache) setting for a new model: this or the model's own length,
 *  whichever is smaller. The engine applies the same cap when a request names no context. */
export const DEFAULT_CONTEXT = 4096;
/** The demo model `./build.sh serve` places beside the page. */
export const DEMO_MODEL_URL = 'models/SmolLM2-135M-Instruct.Q4_1.gguf';
/**
 * The sampling settings a chat request and the settings panel name (llama.cpp's names): every
 * one of the engine's (`SamplerSettings`, src/sampler/mod.rs, declared in engine-types.d.ts)
 * but the seed, which a request gives apart. `tsc -p www` checks it both ways: a name the
 * engine lacks fails here, and so does an engine setting missing from this list or from the
 * API's parameters (inferno.d.ts's AnswerParams).
 * @satisfies {ReadonlyArray<Exclude<keyof import('./engine-types.js').SamplerSettings, 'seed'>>}
 */
export const SAMPLING_KEYS = /** @type {const} */ ([
  'temperature',
  'top_k',
  'top_p',
  'min_p',
  'repeat_penalty',
  'repeat_last_n',
]);

/** @template {never} T @typedef {T} Nothing A type that must be empty. */
/** @typedef {Exclude<keyof import('./engine-types.js').SamplerSettings, 'seed'>} EngineSetting */
/** @typedef {Nothing<Exclude<EngineSetting, (typeof SAMPLING_KEYS)[number]>>} EverySettingListed */
/** @typedef {Nothing<Exclude<EngineSetting, keyof import('./inferno.js').AnswerParams>>} EverySettingAParameter */
