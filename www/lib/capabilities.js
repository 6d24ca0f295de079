// @ts-check
// What this browser offers the engine, found without starting one: cross-origin isolation
// (threads), relaxed SIMD, Memory64, the cores, the GPU adapter. The page's side (inferno.js) and the worker's
// (engine-loader.js) both decide with these, so they never disagree about which build runs:
//   pkg/                   SIMD128, one thread: any browser with SIMD128
//   pkg-relaxed/           + relaxed SIMD, where the browser validates it (not Safari yet)
//   pkg-threads/           SIMD128 + shared memory, helper threads in nested Web Workers: needs
//                          a cross-origin isolated page (SharedArrayBuffer), more than one thread
//   pkg-relaxed-threads/   both
//   pkg-memory64/          wasm64 (64-bit memory) + relaxed SIMD, one thread: only for a file
//                          too large for a 4 GiB wasm32 memory, where the browser validates both
//   pkg-memory64-threads/  the same with shared memory and helper threads
// This module imports nothing, so the page's bundle never carries a wasm build.

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

/** Every module starts with the magic bytes "\0asm" and version 1. */
const WASM_HEADER = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];

/** A module whose one function uses i32x4.relaxed_dot_i8x16_i7x16_add_s: it validates only
 *  where relaxed SIMD runs. */
function relaxedProbe() {
  const constant = [0xfd, 0x0c, ...new Array(16).fill(0)]; // v128.const 0
  const body = [0x00, ...constant, ...constant, ...constant, 0xfd, 0x93, 0x02, 0x0b];
  const code = [0x01, body.length, ...body];
  // prettier-ignore
  return new Uint8Array([
    ...WASM_HEADER,
    0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // type: () -> v128
    0x03, 0x02, 0x01, 0x00, // function 0 has type 0
    0x0a, code.length, ...code,
  ]);
}

/** Whether this browser runs relaxed SIMD. */
export function relaxedSimdSupported() {
  try {
    return WebAssembly.validate(relaxedProbe());
  } catch {
    return false;
  }
}

/** A module with one 64-bit memory (limits flag 0x04): it validates only where Memory64 runs. */
// prettier-ignore
const MEMORY64_PROBE = new Uint8Array([
  ...WASM_HEADER,
  0x05, 0x03, 0x01, 0x04, 0x00, // memory section: one memory, i64 index type, minimum 0 pages
]);

/** Whether this browser runs the 64-bit-memory build (which also uses relaxed SIMD). */
export function memory64Supported() {
  try {
    return WebAssembly.validate(MEMORY64_PROBE) && relaxedSimdSupported();
  } catch {
    return false;
  }
}

/** The cores this machine offers, as the browser says (at least 1). */
export function hardwareThreads() {
  return Math.max(1, Number(self.navigator?.hardwareConcurrency) || 1);
}

/** Whether the browser reports cores in buckets rather than counting them: WebKit (Safari,
 *  and every browser on iOS) says 4 for any machine with fewer than 8 (4 on a 2-core one). */
export function coresBucketed() {
  const agent = String(self.navigator?.userAgent ?? '');
  return /AppleWebKit\//.test(agent) && !/(Chrome|Chromium|Edg)\//.test(agent);
}

/** Threads used where the browser's 4 may stand for 2 cores: never more than the machine has. */
const BUCKETED_DEFAULT_THREADS = 2;

/** The default thread count: the machine's cores, capped; 2 where a bucketed 4 may mean 2
 *  (more threads than cores only contend); 1 where threads cannot run. */
export function defaultThreads() {
  if (!threadsSupported()) return 1;
  const cores = hardwareThreads();
  if (coresBucketed() && cores <= 4) return Math.min(cores, BUCKETED_DEFAULT_THREADS);
  return Math.min(cores, MAX_DEFAULT_THREADS);
}

/**
 * What this browser lacks that the engine would use, each with what the page does instead
 * (shown on the page, so a slower or smaller result is explained): [{feature, fallback}].
 */
export function missingFeatures({ relaxedSimd, memory64, opfs, webgpu, threads }) {
  const missing = [];
  if (!relaxedSimd)
    missing.push({ feature: 'relaxed SIMD', fallback: 'the plain SIMD128 build (slower dot products)' });
  if (!memory64)
    missing.push({ feature: 'Memory64', fallback: 'the 32-bit build: models up to about 4 GiB' });
  if (!threads) missing.push({ feature: 'shared memory (cross-origin isolation)', fallback: 'one thread' });
  if (coresBucketed() && hardwareThreads() <= 4)
    missing.push({
      feature: 'an exact core count (WebKit says 4 for any machine under 8 cores)',
      fallback: `${BUCKETED_DEFAULT_THREADS} threads unless you choose more`,
    });
  if (!opfs)
    missing.push({
      feature: 'OPFS',
      fallback: 'models are not kept between visits and URL downloads do not resume',
    });
  if (!webgpu) missing.push({ feature: 'WebGPU', fallback: 'the CPU runs every model' });
  return missing;
}

/**
 * A thread count asked for (a number, or null/undefined/0 for the default), made one this
 * context can run: whole, at least 1, at most the machine's cores (more would only contend),
 * and 1 without cross-origin isolation. Returns {threads, reason} where reason says why the
 * count differs from the request, if it does.
 */
export function resolveThreads(requested) {
  if (requested === null || requested === undefined || requested === 0)
    return { threads: defaultThreads(), reason: null };
  const asked = Number(requested);
  if (!Number.isInteger(asked) || asked < 1)
    throw new RangeError(`threads must be a whole number >= 1, got ${requested}`);
  if (asked === 1) return { threads: 1, reason: null };
  if (!threadsSupported())
    return { threads: 1, reason: 'the page is not cross-origin isolated, so wasm threads are unavailable' };
  const cores = hardwareThreads();
  if (asked > cores) return { threads: cores, reason: `this machine offers ${cores} threads` };
  return { threads: asked, reason: null };
}

/**
 * The browser's GPU adapter (WebGPU), described; null where there is none. `software` marks a
 * software renderer (Chromium's SwiftShader, Mesa's llvmpipe), slower than the CPU engine.
 */
export async function gpuAdapter() {
  const adapter = await self.navigator?.gpu?.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) return null;
  const info = adapter.info ?? /** @type {WebGpuAdapterInfo} */ ({});
  const name = [info.vendor, info.architecture, info.description].filter(Boolean).join(' ');
  const { limits } = adapter;
  return {
    name: name || 'WebGPU adapter',
    vendor: info.vendor ?? '',
    architecture: info.architecture ?? '',
    description: info.description ?? '',
    software: Boolean(info.isFallbackAdapter) || /swiftshader|llvmpipe|lavapipe/i.test(name),
    features: [...adapter.features].sort(),
    limits: {
      maxStorageBufferBindingSize: limits.maxStorageBufferBindingSize,
      maxBufferSize: limits.maxBufferSize,
      maxComputeInvocationsPerWorkgroup: limits.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupStorageSize: limits.maxComputeWorkgroupStorageSize,
    },
  };
}

/** The build for `threads` (already resolved); `relaxed: false` forces plain SIMD128;
 *  `memory64: true` asks for a 64-bit-memory build (relaxed SIMD). */
export function buildFor(threads, { relaxed = true, memory64 = false } = {}) {
  if (memory64) return threads > 1 ? 'pkg-memory64-threads' : 'pkg-memory64';
  const useRelaxed = relaxed && relaxedSimdSupported();
  if (threads > 1) return useRelaxed ? 'pkg-relaxed-threads' : 'pkg-threads';
  return useRelaxed ? 'pkg-relaxed' : 'pkg';
}
