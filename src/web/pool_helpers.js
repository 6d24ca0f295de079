// The thread pool's helper Web Workers (threaded builds). wasm-bindgen copies this file into
// each package as snippets/inferno-<hash>/src/web/pool_helpers.js; the glue imports it for
// `startHelpers`, and each helper runs it as its own script (a worker named HELPER_NAME).
//
// Why not wasm-bindgen-rayon: its pool start waits synchronously, on the engine worker's own
// thread and with no timeout, until every helper has entered rayon's loop. Here nothing of ours
// blocks: a helper joins the pool when it is ready, and the pool's caller runs every part no
// helper has taken (src/parallel/pool.rs), so a helper that never works costs speed, not the
// engine (tests/page/builds.test.mjs).
//
// One thing here can block, and it is the browser's: in headless Firefox 153, `new Worker()`
// called inside a worker now and then never returns (about 1 call in 100, with or without wasm
// or cross-origin isolation: docs/repro/firefox-nested-worker has the reduction), which freezes the
// engine worker for good. So each call is announced to whoever started the engine worker
// (SPAWNING, then SPAWNED once it returned): worker-client.js ends a worker stuck in between and
// starts a new one with the same requests.
//
// The glue is imported statically (not `import('../../../..')`): a plain page needs the file's
// path, and Vite builds workers as classic scripts, which cannot split. The cycle this makes
// (the glue imports this file) is harmless: neither touches the other at the top level.
import * as glue from '../../../../inferno.js';

const HELPER_NAME = 'inferno-pool-helper';
const INIT = 'inferno_pool_helper_init';
const READY = 'inferno_pool_helper_ready';
const FAILED = 'inferno_pool_helper_failed';
/** Posted by the engine worker around each `new Worker()` (see the file comment); worker-client.js
 *  acts on these names, and bench-common.js skips every `inferno_pool_helper_` message. */
const SPAWNING = 'inferno_pool_helper_spawning';
const SPAWNED = 'inferno_pool_helper_spawned';

// Firefox collects workers that share a wasm memory but no live `Worker` object roots
// (bugzilla 1702191): the helpers are kept here for the life of the engine worker.
const helpers = [];

/** Starts `count` helpers on the engine's `module` and shared `memory`; resolves once each has
 *  instantiated the module (and so is about to enter the pool), rejects if one fails to. */
export function startHelpers(module, memory, count) {
  return Promise.all(
    Array.from({ length: count }, () => {
      self.postMessage({ type: SPAWNING });
      const worker = new Worker(new URL('./pool_helpers.js', import.meta.url), {
        type: 'module',
        name: HELPER_NAME,
      });
      self.postMessage({ type: SPAWNED });
      helpers.push(worker);
      return new Promise((resolve, reject) => {
        worker.addEventListener('message', ({ data }) => {
          if (data?.type === READY) resolve();
          else if (data?.type === FAILED) reject(new Error(data.message));
        });
        worker.addEventListener('error', (event) => {
          event.preventDefault();
          reject(
            new Error(`a thread pool helper failed to start: ${event.message || 'its script did not load'}`),
          );
        });
        worker.postMessage({ type: INIT, module, memory });
      });
    }),
  );
}

if (globalThis.name === HELPER_NAME) {
  let started = false;
  self.addEventListener('message', async ({ data }) => {
    if (data?.type !== INIT || started) return;
    started = true;
    try {
      await glue.default({ module_or_path: data.module, memory: data.memory });
    } catch (error) {
      self.postMessage({ type: FAILED, message: String(error?.message ?? error) });
      return;
    }
    self.postMessage({ type: READY });
    glue.runPoolHelper(); // Never returns.
  });
}
