// Chooses and starts one of the two wasm builds, in a Web Worker (never the page: the threaded
// build's caller blocks while the pool works):
//   pkg/          SIMD128, one thread: any browser with SIMD128
//   pkg-threads/  SIMD128 + shared memory: rayon's pool runs in nested Web Workers. Needs a
//                 cross-origin isolated page (SharedArrayBuffer) and more than one thread asked.
// Both export the same API; the engine code does not know which one it runs in.

/** The most threads used unless asked otherwise: decode is bound by memory bandwidth, which a
 *  handful of cores already saturate. The same cap as the native default. */
export const MAX_DEFAULT_THREADS = 8;

/** Whether this context can run the threaded build at all. */
export function threadsSupported() {
  if (!self.crossOriginIsolated || typeof SharedArrayBuffer !== 'function') return false;
  try {
    new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
    return true;
  } catch {
    return false;
  }
}

/** The cores this machine offers (at least 1). */
export function hardwareThreads() {
  return Math.max(1, Number(self.navigator?.hardwareConcurrency) || 1);
}

/** The default thread count: the machine's cores, capped; 1 where threads cannot run. */
export function defaultThreads() {
  return threadsSupported() ? Math.min(hardwareThreads(), MAX_DEFAULT_THREADS) : 1;
}

/**
 * A thread count asked for (a number, or null/undefined/0 for the default), made one this
 * context can run: whole, at least 1, at most the machine's cores (more would only contend),
 * and 1 without cross-origin isolation. Returns {threads, reason} where reason says why the
 * count differs from the request, if it does.
 */
export function resolveThreads(requested) {
  if (requested === null || requested === undefined || requested === 0) return { threads: defaultThreads(), reason: null };
  const asked = Number(requested);
  if (!Number.isInteger(asked) || asked < 1) throw new RangeError(`threads must be a whole number >= 1, got ${requested}`);
  if (asked === 1) return { threads: 1, reason: null };
  if (!threadsSupported()) return { threads: 1, reason: 'the page is not cross-origin isolated, so wasm threads are unavailable' };
  const cores = hardwareThreads();
  if (asked > cores) return { threads: cores, reason: `this machine offers ${cores} threads` };
  return { threads: asked, reason: null };
}

/**
 * Imports and initialises the build for `threads` (already resolved), starting its pool.
 * `instance` > 0 gives a fresh module record (a new wasm instance after a trap).
 * Returns {module, threads, build}.
 */
export async function startEngine(threads, instance = 0) {
  const build = threads > 1 ? 'pkg-threads' : 'pkg';
  const url = new URL(`./${build}/inferno.js`, import.meta.url);
  if (instance > 0) url.searchParams.set('instance', String(instance));
  const module = await import(url.href);
  await module.default();
  // The caller is one of the threads: the pool gets a helper Web Worker for each of the others.
  if (threads > 1) await module.initThreadPool(threads - 1);
  return { module, threads, build };
}
