// @ts-check
// Starts one of the six wasm builds (capabilities.js says which), in a Web Worker, never the
// page: the threaded builds' caller blocks while its helpers work.
//
// Every build is imported statically, each glue file finding its wasm through
// `new URL('inferno_bg.wasm', import.meta.url)`: a bundler (Vite, webpack) then sees the
// whole graph of the worker, copies the six wasm files and the thread helper's script, and
// needs no code splitting inside the worker (Vite builds workers as classic scripts, which
// cannot split). Importing a glue file runs nothing: its wasm is fetched only by
// `default()`, so only the build that starts is ever downloaded.
//
// A build starts once per worker: the glue keeps its instance for good, so after a trap the
// worker ends and the client starts a new one (worker.js, worker-client.js).

import * as simd from './pkg/inferno.js';
import * as relaxed from './pkg-relaxed/inferno.js';
import * as threads from './pkg-threads/inferno.js';
import * as relaxedThreads from './pkg-relaxed-threads/inferno.js';
import * as memory64 from './pkg-memory64/inferno.js';
import * as memory64Threads from './pkg-memory64-threads/inferno.js';
import { buildFor } from './capabilities.js';

const BUILDS = {
  pkg: simd,
  'pkg-relaxed': relaxed,
  'pkg-threads': threads,
  'pkg-relaxed-threads': relaxedThreads,
  'pkg-memory64': memory64,
  'pkg-memory64-threads': memory64Threads,
};

/**
 * Initialises the build for `threads` (already resolved) and starts its helpers. `relaxed:
 * false` forces the plain SIMD128 build; `memory64: true` a 64-bit-memory one. Returns {module, exports, threads, build}: `exports` are the wasm
 * instance's own (its `memory` tells how much the engine holds).
 */
export async function startEngine(threads, { relaxed = true, memory64 = false } = {}) {
  const build = buildFor(threads, { relaxed, memory64 });
  return { ...(await startBuild(BUILDS[build], threads)), build };
}

/** Initialises a build's glue `module` and starts its pool: for `threads` > 1, the caller is
 *  one of the threads and each of the others gets a helper Web Worker. */
export async function startBuild(module, threads) {
  const exports = await module.default();
  if (threads > 1) await module.initThreadPool(threads - 1);
  return { module, exports, threads };
}
