// @ts-check
// Inferno engine worker: owns the WebAssembly module, so parsing, loading, prefill and
// decoding never block the page. This file takes the requests (lib/protocol.js types every
// one) and hands each to its job: worker-engine.js (the build, the engine, the model, one run at
// a time), worker-load.js (headers, loading, the device), worker-generate.js (chat, complete,
// branch, stop, reset), worker-text.js (tokens and embeddings).

import {
  WorkerError,
  configure,
  describeModel,
  engineCrashed,
  engineInfo,
  freeModel,
  getEngine,
  runExclusive,
  state,
} from './worker-engine.js';
import { inspect, inspectLoaded, loadModel } from './worker-load.js';
import { branch, chat, reset, stop } from './worker-generate.js';
import { detokenize, embed, tokenize } from './worker-text.js';
import { attachProjector } from './worker-images.js';

/** @typedef {import('./protocol.js').Protocol} Protocol */

/**
 * One handler per request type; each returns its reply (without the id), or null for none.
 * @type {{[T in keyof Protocol]: (request: Protocol[T][0]) => Protocol[T][1] | Promise<Protocol[T][1]>}}
 */
const HANDLERS = {
  configure,
  inspect,
  inspect_loaded: inspectLoaded,
  model: () => ({ type: 'model', model: describeModel() }),
  info: engineInfo,
  load: (request) => runExclusive((run) => loadModel(request, run), { preempt: true }),
  attach_projector: attachProjector,
  chat,
  complete: chat,
  branch,
  stop,
  reset,
  tokenize,
  detokenize,
  embed,
  unload: () => {
    if (state.busy) state.busy.stopRequested = true;
    freeModel();
    return { type: 'unloaded' };
  },
  ping: () => ({ type: 'pong' }),
  // Test builds only (protocol.js): elsewhere the engine has no deliberate_trap.
  trap: async (request) => {
    const engine = await getEngine();
    if (typeof engine.deliberate_trap !== 'function') throw unknownRequest(request.type);
    engine.deliberate_trap();
    throw new WorkerError('ProtocolError', 'no_trap', 'the engine did not trap');
  },
};

/** @param {unknown} type */
function unknownRequest(type) {
  return new WorkerError(
    'ProtocolError',
    'unknown_message_type',
    `unknown request type ${JSON.stringify(type)}`,
  );
}

/** @param {{kind?: unknown, name?: unknown}} error */
function errorKind(error) {
  if (error?.kind) return String(error.kind);
  if (error?.name === 'NotReadableError') return 'read_failed'; // The file changed or vanished.
  return 'internal';
}

/**
 * @param {number | null} id
 * @param {any} error wasm-bindgen can throw any JS value, not only Error objects
 * @returns {import('./protocol.js').ErrorReply}
 */
function errorReply(id, error) {
  if (error instanceof WebAssembly.RuntimeError) {
    // A trap (a Rust panic, or running out of memory) leaves the instance unusable; the
    // model lived in it, so it is gone too and must be loaded again.
    engineCrashed();
    // The glue keeps its dead instance, and a threaded build's pool threads share its memory:
    // only ending this worker frees it, so the client starts a new one.
    setTimeout(() => self.close(), 0);
    const message = `the engine crashed (${error.message}); it has been restarted`;
    return { type: 'error', id, error: { name: 'RuntimeError', kind: 'wasm_trap', message }, fatal: true };
  }
  if (error?.kind === 'engine_start_timeout') {
    // Half-started helper workers may hold the memory: only a new worker starts clean.
    setTimeout(() => self.close(), 0);
    return {
      type: 'error',
      id,
      error: { name: error.name, kind: error.kind, message: error.message },
      fatal: true,
    };
  }
  const name = error?.name ? String(error.name) : 'Error';
  const message = error?.message !== undefined ? String(error.message) : String(error);
  return { type: 'error', id, error: { name, kind: errorKind(error), message } };
}

/** Answers one message: its reply, or a typed error for anything that fails, a message that is
 *  no request included. @param {unknown} message */
async function handleRequest(message) {
  const request = /** @type {Partial<import('./protocol.js').Request> | null} */ (message);
  const id = request?.id ?? null;
  try {
    const type = request?.type;
    if (!Object.hasOwn(HANDLERS, type)) throw unknownRequest(type);
    const handler = /** @type {(request: unknown) => ReturnType<(typeof HANDLERS)[typeof type]>} */ (
      HANDLERS[type]
    );
    const reply = await handler(request);
    if (reply !== null) self.postMessage({ ...reply, id });
  } catch (error) {
    self.postMessage(errorReply(id, error));
  }
}

self.addEventListener('message', (event) => {
  handleRequest(event.data);
});
