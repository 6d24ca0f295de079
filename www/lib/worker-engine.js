// @ts-check
// The engine worker's core: the build it runs (`configure`), the wasm engine started once, the
// model it holds, and the one-at-a-time rule for loads and generations. The worker's other
// modules (worker-load.js, worker-generate.js, worker-text.js) share this state through
// `state`; worker.js dispatches the requests (lib/protocol.js types them).

import { buildFor, memory64Supported, resolveThreads } from './capabilities.js';
import { startEngine } from './engine-loader.js';

/** @typedef {typeof import('./pkg/inferno.js')} Engine the wasm glue module of the running build */
/** @typedef {import('./pkg/inferno.js').WebEngine} WebEngine */
/** @typedef {import('./protocol.js').ModelInfo} ModelInfo */

/**
 * The loaded model: its engine and what describeModel() reports.
 * @typedef {object} LoadedModel
 * @property {WebEngine} engine
 * @property {string} name
 * @property {number} size
 * @property {ReturnType<WebEngine['info']>} info
 * @property {ModelInfo['device']} device
 * @property {ModelInfo['source']} source
 * @property {number} shards
 * @property {ModelInfo['download'] | null} download
 * @property {ModelInfo['vision']} vision the vision projector attached beside it, or null
 * @property {ModelInfo['weights']} weights where its weights are held ('gpu': there only)
 */

/** A running load or generation: asked to stop by `stop`, a newer load, or unload. @typedef {{stopRequested: boolean, done: Promise<unknown> | null}} Run */

/** An error with a machine-readable kind, shaped like the engine's GgufError. */
export class WorkerError extends Error {
  /** @param {string} name @param {string} kind @param {string} message */
  constructor(name, kind, message) {
    super(message);
    this.name = name;
    this.kind = kind;
  }
}

export const state = {
  /** The build this worker runs, as `configure` set it (the defaults until then). */
  config: configured({}),
  /** @type {Promise<Engine> | null} */
  enginePromise: null,
  /** {threads, build, memory} of the running engine. @type {{threads: number, build: string, memory: WebAssembly.Memory} | null} */
  engineBuild: null,
  /** @type {LoadedModel | null} */
  model: null,
  /** @type {Run | null} */
  busy: null,
};

/** @param {{threads?: number | null, relaxed?: boolean, memory64?: boolean}} request */
function configured({ threads, relaxed, memory64 }) {
  const useRelaxed = relaxed !== false;
  // The 64-bit build uses relaxed SIMD too, so relaxed: false (Safari's view) rules it out.
  const memory64Available = useRelaxed && memory64Supported();
  const useMemory64 = memory64 === true && memory64Available;
  return {
    relaxed: useRelaxed,
    memory64Available,
    memory64: useMemory64,
    threads: threadsFor(threads),
  };
}

/** The thread count asked for; anything unusable means the default. @param {unknown} value */
function threadsFor(value) {
  try {
    return resolveThreads(Number(value) || null);
  } catch {
    return resolveThreads(null);
  }
}

/** @param {import('./protocol.js').ConfigureRequest} request */
export function configure(request) {
  if (state.enginePromise) {
    throw new WorkerError('ProtocolError', 'bad_request', 'configure must come before the engine starts');
  }
  state.config = configured(request);
  return null;
}

/** Loads and initialises the wasm module once (a failed start may be retried). */
export function getEngine() {
  if (!state.enginePromise) {
    const starting = loadEngine(state.config.threads.threads);
    state.enginePromise = starting;
    starting.catch(() => {
      if (state.enginePromise === starting) state.enginePromise = null; // A later request retries.
    });
  }
  return state.enginePromise;
}

// A threaded engine starts in a second or two, its helper workers included. Should a helper never
// report ready (its script never arrives, or the browser never runs it), the start would wait
// forever: after this long the worker gives up and ends itself (`fatal`), and the client retries
// on a new worker. (Nothing of ours in the start blocks this worker's thread; a helper's
// constructor that Firefox leaves stuck does, and worker-client.js replaces such a worker.)
const POOL_START_TIMEOUT_MS = 20_000;

/** `starting`, or a rejection with kind engine_start_timeout if it takes too long.
 *  @template T @param {Promise<T>} starting @param {number} threads @returns {Promise<T>} */
function withStartTimeout(starting, threads) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  /** @type {Promise<never>} */
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      const seconds = POOL_START_TIMEOUT_MS / 1000;
      const message = `the engine's ${threads} threads did not start within ${seconds} s`;
      reject(new WorkerError('InitError', 'engine_start_timeout', message));
    }, POOL_START_TIMEOUT_MS);
  });
  return Promise.race([starting, timeout]).finally(() => clearTimeout(timer));
}

/** @param {number} threads @returns {Promise<Engine>} */
async function loadEngine(threads) {
  const options = { relaxed: state.config.relaxed, memory64: state.config.memory64 };
  try {
    const starting = startEngine(threads, options);
    const { module, exports, build } = await (threads > 1 ? withStartTimeout(starting, threads) : starting);
    state.engineBuild = { threads, build, memory: exports.memory };
    return module;
  } catch (error) {
    if (error?.kind === 'engine_start_timeout') throw error;
    const build = buildFor(threads, options);
    throw new WorkerError(
      'InitError',
      'wasm_init',
      `Could not start the Inferno WebAssembly engine (${build}/inferno_bg.wasm, ${threads} threads): ` +
        `${describe(error)}${wasmHint(error)}`,
    );
  }
}

/** What a failed start most often means, where the error says it: a server or bundler that
 *  answers a missing wasm file with an HTML page (often index.html). @param {unknown} error */
function wasmHint(error) {
  const text = describe(error);
  if (/3c 21 64 6f|3c 68 74 6d|magic|MIME|mime/.test(text)) {
    return (
      '. The server did not answer with the wasm file (an HTML page came back, or the wrong type): ' +
      "check that the file is served (a bundler must copy the package's pkg*/ folders), " +
      'as application/wasm'
    );
  }
  return '';
}

/** @param {unknown} error */
export function describe(error) {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}

/**
 * Turns engine output into plain structured-cloneable data: serde-wasm-bindgen may hand
 * back Maps for JSON objects and BigInts for 64-bit integers (types/engine.d.ts describes
 * the values as they are after this).
 * @template T
 * @param {T} value
 * @returns {T}
 */
export function toPlain(value) {
  return /** @type {T} */ (plain(value));
}

/** @param {unknown} value @returns {unknown} */
function plain(value) {
  if (typeof value === 'bigint') {
    return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
  }
  if (value instanceof Map) {
    /** @type {Record<string, unknown>} */
    const object = {};
    for (const [key, item] of value) object[String(key)] = plain(item);
    return object;
  }
  if (Array.isArray(value)) return value.map(plain);
  // Bytes (a token's piece) arrive as Uint8Array.
  if (ArrayBuffer.isView(value)) return Array.from(/** @type {Uint8Array} */ (value));
  if (value && typeof value === 'object') {
    /** @type {Record<string, unknown>} */
    const object = {};
    for (const [key, item] of Object.entries(value)) object[key] = plain(item);
    return object;
  }
  return value;
}

// --- The model -----------------------------------------------------------------------------

export function requireModel() {
  if (!state.model) throw new WorkerError('ProtocolError', 'no_model', 'no model is loaded');
  return state.model;
}

export function freeModel() {
  if (!state.model) return;
  try {
    state.model.engine.free();
  } catch {
    // After a trap the old instance is gone; nothing to free.
  }
  state.model = null;
}

/** The loaded model as ModelInfo says (without load_ms, which the client adds), or null. */
export function describeModel() {
  if (!state.model) return null;
  const { name, size, info, source, device, shards, download, vision, weights } = state.model;
  return {
    name,
    size,
    source,
    shards,
    ...(download ? { download } : {}),
    ...info,
    threads: state.engineBuild?.threads ?? 1,
    memory64: state.config.memory64,
    device,
    weights,
    vision,
    precision: state.model.engine.attention_precision(),
    ...cacheTypes(state.model.engine),
  };
}

/** The engine's KV cache types, as the load options name them.
 *  @param {WebEngine} engine
 *  @returns {{cache_type_k: import('./inferno.js').CacheType, cache_type_v: import('./inferno.js').CacheType}} */
function cacheTypes(engine) {
  const [keys, values] = engine.cache_types();
  return { cache_type_k: keys, cache_type_v: values };
}

/** A trap (a Rust panic, or running out of memory) leaves the instance unusable; the model lived
 *  in it, so it is gone too. Later requests fail as wasm_trap until the worker ends. */
export function engineCrashed() {
  state.model = null;
  state.enginePromise = Promise.reject(new WorkerError('RuntimeError', 'wasm_trap', 'the engine crashed'));
  state.enginePromise.catch(() => {});
}

// --- One at a time ---------------------------------------------------------------------------

let latestPreempt = 0; // numbers the preempting requests: only the newest one runs

/**
 * Runs one load or generation at a time. Another one meanwhile is refused as busy, except
 * that a new load (`preempt`) stops the running work at its next chunk or step and waits
 * for it: dropping a second file replaces the first. Of several loads that arrive while one
 * runs, the newest wins and the others end as cancelled (three files dropped in quick
 * succession load the third, not the second).
 * @template T
 * @param {(run: Run) => Promise<T>} work
 * @param {{preempt?: boolean}} [options]
 * @returns {Promise<T>}
 */
export async function runExclusive(work, { preempt = false } = {}) {
  if (preempt) {
    const mine = ++latestPreempt;
    while (state.busy) {
      state.busy.stopRequested = true;
      await state.busy.done?.catch(() => {});
      if (mine !== latestPreempt) throw new WorkerError('LoadError', 'cancelled', 'replaced by a newer load');
    }
  }
  if (state.busy)
    throw new WorkerError('ProtocolError', 'busy', 'the engine is busy: stop it or wait for it to finish');
  /** @type {Run} */
  const run = { stopRequested: false, done: null };
  state.busy = run;
  const done = (async () => {
    try {
      return await work(run);
    } finally {
      state.busy = null;
    }
  })();
  run.done = done;
  return done;
}

/** @param {Run} run */
export function throwIfCancelled(run) {
  if (run.stopRequested)
    throw new WorkerError('LoadError', 'cancelled', 'loading was cancelled by a newer request');
}

/** Resolves after every message already queued for this worker has been handled. */
const yieldChannel = new MessageChannel();
/** @type {(() => void)[]} */
const yieldWaiters = [];
yieldChannel.port1.onmessage = () => yieldWaiters.shift()?.();
/** @returns {Promise<void>} */
export function yieldToMessages() {
  return new Promise((resolve) => {
    yieldWaiters.push(resolve);
    yieldChannel.port2.postMessage(null);
  });
}

/** Posts an event or a reply to the client (`self.postMessage`, looked up at each call so a
 *  page test's listener in front of the worker can watch them).
 *  @param {import('./protocol.js').WorkerEvent | import('./protocol.js').Reply} message */
export function post(message) {
  self.postMessage(message);
}

/** @returns {Promise<import('./protocol.js').InfoReply>} */
export async function engineInfo() {
  const engine = await getEngine();
  const info = toPlain(engine.engine_info());
  return {
    type: 'info',
    info: {
      ...info,
      build: state.engineBuild?.build,
      threads_note: state.config.threads.reason,
      memory_bytes: state.engineBuild?.memory?.buffer.byteLength ?? null,
    },
  };
}

/** A URL's response, or a typed error (kind fetch_failed) saying why there is none.
 *  @param {string} url */
export async function fetchUrl(url) {
  let response;
  try {
    response = await fetch(url);
  } catch (error) {
    throw new WorkerError('NetworkError', 'fetch_failed', `could not fetch ${url}: ${describe(error)}`);
  }
  if (!response.ok) {
    response.body?.cancel().catch(() => {});
    throw new WorkerError(
      'NetworkError',
      'fetch_failed',
      `${url} answered ${response.status} ${response.statusText}`,
    );
  }
  return response;
}
