// Inferno engine worker: owns the WebAssembly module, so parsing, loading, prefill and
// decoding never block the page.
//
// Protocol: every request is {type, id, ...} and gets exactly one final reply carrying the
// same id; long requests also post events {type, id, event: true, ...} before it.
//   inspect {file} | {files}             -> inspected {report, bytesRead, ms} (files: the shards
//                                           of a split model, one report across them)
//   inspect_loaded                       -> inspected {...} for the loaded model
//   model                                -> model {model} (null when none is loaded)
//   info                                 -> info {info}
//   load {file} | {url} | {files} | {urls}, device?, resumable?
//                                        -> events progress {phase, bytes, total, rate,
//                                           resumedFrom?} (phase downloading: a URL fetched in
//                                           parallel Range requests into OPFS, download.js;
//                                           resumable: true always, false never, else for
//                                           files of 256 MiB or more)
//                                           (files/urls, or a url named NAME-00001-of-00003.gguf:
//                                           a split model's shards, in any order)
//                                           -> loaded {model} (model.device says where it runs)
//   chat {messages, settings, enableThinking, grammar, maxTokens, traceTop, context}
//                                        -> events prefill {evaluated, total} (between parts
//                                           of a long prompt), prepared {prepared, ms},
//                                           token {step}... -> done {reason, stats}
//   branch {step, token, maxTokens, traceTop} -> as chat, regenerating from answer step `step`
//                                           with `token` forced there
//   stop                                 -> stopped {wasGenerating}
//   reset                                -> reset {}
//   tokenize {text, addSpecial?, parseSpecial?} -> tokens {ids} (no options: as a prompt)
//   detokenize {ids, renderSpecial?}     -> text {text}
//   embed {input: string[], pooling?, dimensions?, normalize?}
//                                        -> embeddings {vectors: Float32Array[], promptTokens,
//                                           pooling, ms}; one batch of texts per wasm call, so
//                                           stop ends it between two (kind aborted)
//   unload                               -> unloaded {}
//   ping                                 -> pong {} (at once unless a wasm call is running:
//                                           the client's stall watchdog, worker-client.js)
//   trap                                 -> error {kind wasm_trap}: crashes the engine on
//                                           purpose, so the page test can check recovery
//   anything that fails                  -> error {error: {name, kind, message}}
//   configure {threads, relaxed, memory64} -> nothing (the client's first message, before any
//                                           request; no reply unless it comes too late)
// `configure` picks the build: `relaxed: false` uses plain SIMD128 even where relaxed SIMD runs,
// `threads` (default: the machine's cores, capped; 1 where the page is not cross-origin
// isolated): more than one thread runs the shared-memory build (engine-loader.js), and
// `memory64: true` a 64-bit-memory build (threaded as the others), for files too large for a 4 GiB
// wasm32 memory. (Settings travel in a message, not the worker's URL: a bundler only follows
// `new Worker(new URL('./worker.js', import.meta.url))` written out in full.) A load that needs
// the other memory (a large file in a wasm32 worker, or a small one in a memory64 worker, whose
// memory never shrinks) is answered
//   load                                 -> switch_build {memory64}
// and the client (worker-client.js) starts a worker of that kind and sends the load again.
// A trap ends the worker (the glue keeps its dead instance, and a threaded build's pool threads
// would keep the old memory alive): the error reply says `fatal: true`, and the client starts a
// new worker.
// Only one load/chat/branch runs at a time; another chat or branch meanwhile is refused with
// kind "busy", while a new load cancels a running load (kind "cancelled") or generation.
// Stop takes effect between two decode steps or two prefill parts: both loops yield to the
// message queue after each one.
// A load's `device` ('auto' by default, 'gpu' or 'cpu') says where the model runs: 'auto'
// takes the GPU (WebGPU) where there is a hardware adapter that runs every part of the model,
// and the CPU otherwise, saying why in model.device.reason; 'gpu' fails the load instead. A
// lost GPU fails the running request with kind gpu_lost, and the model goes on on the CPU.

import { buildFor, gpuAdapter, memory64Supported, resolveThreads } from './capabilities.js';
import { startEngine } from './engine-loader.js';
import { RESUMABLE_MIN_BYTES, download, probeRanges, resumableAvailable, validatorOf } from './download.js';
import { DEFAULT_MAX_TOKENS, DEFAULT_TRACE_TOP, MAX_TOKENS_LIMIT, MAX_TRACE_TOP } from './defaults.js';

const INITIAL_PREFIX_BYTES = 1 << 20; // 1 MiB covers the header of most small models.

/** The build this worker runs, as `configure` set it (the defaults until then). */
let config = configured({});

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

/** The thread count asked for; anything unusable means the default. */
function threadsFor(value) {
  try {
    return resolveThreads(Number(value) || null);
  } catch {
    return resolveThreads(null);
  }
}

function configure(request) {
  if (enginePromise) {
    throw new WorkerError('ProtocolError', 'bad_request', 'configure must come before the engine starts');
  }
  config = configured(request);
  return null;
}

/** An error with a machine-readable kind, shaped like the engine's GgufError. */
class WorkerError extends Error {
  constructor(name, kind, message) {
    super(message);
    this.name = name;
    this.kind = kind;
  }
}

let enginePromise = null;

/** Loads and initialises the wasm module once (a failed start may be retried). */
function getEngine() {
  if (!enginePromise) {
    enginePromise = loadEngine(config.threads.threads);
    enginePromise.catch(() => {
      enginePromise = null; // Let a later request retry instead of caching the failure.
    });
  }
  return enginePromise;
}

let engineBuild = null; // {threads, build} of the running engine

// A threaded engine starts in a second or two, its helper workers included. Should a helper never
// report ready (its script never arrives, or the browser never runs it), the start would wait
// forever: after this long the worker gives up and ends itself (`fatal`), and the client retries
// on a new worker. (Nothing of ours in the start blocks this worker's thread; a helper's
// constructor that Firefox leaves stuck does, and worker-client.js replaces such a worker.)
const POOL_START_TIMEOUT_MS = 20_000;

/** `starting`, or a rejection with kind engine_start_timeout if it takes too long. */
function withStartTimeout(starting, threads) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      const seconds = POOL_START_TIMEOUT_MS / 1000;
      const message = `the engine's ${threads} threads did not start within ${seconds} s`;
      reject(new WorkerError('InitError', 'engine_start_timeout', message));
    }, POOL_START_TIMEOUT_MS);
  });
  return Promise.race([starting, timeout]).finally(() => clearTimeout(timer));
}

async function loadEngine(threads) {
  const options = { relaxed: config.relaxed, memory64: config.memory64 };
  try {
    const starting = startEngine(threads, options);
    const { module, exports, build } = await (threads > 1 ? withStartTimeout(starting, threads) : starting);
    engineBuild = { threads, build, memory: exports.memory };
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
 *  answers a missing wasm file with an HTML page (often index.html). */
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

function describe(error) {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}

/**
 * Turns engine output into plain structured-cloneable data: serde-wasm-bindgen may hand
 * back Maps for JSON objects and BigInts for 64-bit integers.
 */
function toPlain(value) {
  if (typeof value === 'bigint') {
    return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
  }
  if (value instanceof Map) {
    const object = {};
    for (const [key, item] of value) object[String(key)] = toPlain(item);
    return object;
  }
  if (Array.isArray(value)) return value.map(toPlain);
  if (ArrayBuffer.isView(value)) return Array.from(value); // bytes (a token's piece) arrive as Uint8Array
  if (value && typeof value === 'object') {
    const object = {};
    for (const key of Object.keys(value)) object[key] = toPlain(value[key]);
    return object;
  }
  return value;
}

async function readPrefix(file, length) {
  return new Uint8Array(await file.slice(0, length).arrayBuffer());
}

/**
 * Parses the GGUF header by reading only a prefix of the file: start with 1 MiB and
 * grow (at least doubling, so the total read stays within twice the final prefix)
 * until the engine has everything it needs.
 */
async function inspectFile(file) {
  const started = performance.now();
  const { report, length } = await headerOf(file);
  return { type: 'inspected', report, bytesRead: length, ms: performance.now() - started };
}

/** The report of the model whose shards (gguf-split) are `files`, from their headers alone:
 *  one model across them all, or a typed error naming the shard missing, repeated or foreign. */
async function inspectFiles(files) {
  if (!Array.isArray(files) || files.length === 0 || !files.every((file) => file instanceof Blob)) {
    throw new WorkerError('ProtocolError', 'bad_request', 'inspect needs Files or Blobs in "files"');
  }
  if (files.length === 1) return inspectFile(files[0]);
  const engine = await getEngine();
  const started = performance.now();
  const headers = [];
  for (const file of files) headers.push(await headerOf(file, { whole: false }));
  const report = toPlain(
    engine.inspect_shards(
      headers.map((h) => h.prefix),
      files.map((file) => file.size),
      config.memory64Available,
    ),
  );
  const bytesRead = headers.reduce((sum, h) => sum + h.length, 0);
  return { type: 'inspected', report, bytesRead, ms: performance.now() - started };
}

/** A file's header bytes (`prefix`, of `length` bytes) and, unless `whole` is false (a shard,
 *  reported with the others), its report. */
async function headerOf(file, { whole = true } = {}) {
  if (!(file instanceof Blob)) {
    throw new WorkerError('ProtocolError', 'bad_request', 'inspect needs a File or Blob in "file"');
  }
  const engine = await getEngine();
  let length = Math.min(file.size, INITIAL_PREFIX_BYTES);
  for (;;) {
    const prefix = await readPrefix(file, length);
    const result = toPlain(engine.inspect_prefix(prefix, file.size, config.memory64Available));
    if (result?.status === 'complete') return { report: whole ? result.report : null, prefix, length };
    if (result?.status !== 'need_more') {
      throw new WorkerError(
        'ProtocolError',
        'bad_engine_reply',
        `unexpected inspect status ${JSON.stringify(result?.status)}`,
      );
    }
    const next = Math.min(file.size, Math.max(2 * length, Number(result.at_least)));
    if (!(next > length)) {
      // The engine should report truncation itself; never loop on a file that cannot grow.
      throw new WorkerError(
        'GgufError',
        'truncated',
        `the header needs at least ${result.at_least} bytes but the file has only ${file.size}`,
      );
    }
    length = next;
  }
}

async function engineInfo() {
  const engine = await getEngine();
  const info = toPlain(engine.engine_info());
  return { type: 'info', info: { ...info, build: engineBuild?.build, threads_note: config.threads.reason } };
}

// --- Loading a model ----------------------------------------------------------------------

const FILE_CHUNK_BYTES = 16 << 20;
const PROGRESS_INTERVAL_MS = 100;

let model = null; // {engine: WebEngine, name, size, info, source, device}

function requireModel() {
  if (!model) throw new WorkerError('ProtocolError', 'no_model', 'no model is loaded');
  return model;
}

function freeModel() {
  if (!model) return;
  try {
    model.engine.free();
  } catch {
    // After a trap the old instance is gone; nothing to free.
  }
  model = null;
  answer = null;
}

/** Posts progress at most every PROGRESS_INTERVAL_MS, with the phase's rate in bytes per
 *  second (from the bytes it started at: a resumed download's rate is of what it fetches now).
 *  A report held back is posted at the interval's end unless a newer one was, so the last
 *  bytes before a pause (a hung download) are posted too. `extra` is posted as it is. */
function progressReporter(id, total) {
  let last = 0;
  let phaseStart = null;
  let held = null;
  const post = ({ phase, bytes, extra, at }) => {
    last = performance.now();
    const seconds = (at - phaseStart.at) / 1000;
    const rate = seconds > 0.05 ? Math.round((bytes - phaseStart.bytes) / seconds) : 0;
    self.postMessage({ type: 'progress', id, event: true, phase, bytes, total, rate, ...extra });
  };
  return (phase, bytes, force = false, extra = {}) => {
    const now = performance.now();
    if (phaseStart?.phase !== phase) phaseStart = { phase, at: now, bytes };
    const report = { phase, bytes, extra, at: now };
    if (force || now - last >= PROGRESS_INTERVAL_MS) {
      held = null;
      post(report);
      return;
    }
    if (!held) {
      setTimeout(
        () => {
          if (held) post(held);
          held = null;
        },
        PROGRESS_INTERVAL_MS - (now - last),
      );
    }
    held = report;
  };
}

/** Feeds a File or Blob to the loader slice by slice: JS never holds more than one chunk. */
async function pushFile(loader, file, report, run) {
  for (let offset = 0; offset < file.size; offset += FILE_CHUNK_BYTES) {
    throwIfCancelled(run);
    const chunk = new Uint8Array(await file.slice(offset, offset + FILE_CHUNK_BYTES).arrayBuffer());
    loader.push(chunk);
    report('reading', offset + chunk.length);
  }
}

/** Opens a URL for streaming into the loader, which needs the file's size before its first
 *  byte: a plain Content-Length, or else (a compressed answer, whose length is the compressed
 *  one) the total of a one-byte Range request's Content-Range. */
async function openUrl(url) {
  const response = await fetchUrl(url);
  const size = plainLength(response) ?? (await lengthFromRange(url));
  if (size === null) {
    response.body?.cancel().catch(() => {});
    const how = response.headers.get('Content-Encoding')
      ? `was sent compressed (Content-Encoding: ${response.headers.get('Content-Encoding')})`
      : 'came without a Content-Length';
    throw new WorkerError(
      'NetworkError',
      'no_length',
      `${url} ${how} and its server does not answer Range requests, so its size is unknown before ` +
        'it is read. Serve model files uncompressed with a Content-Length (leave .gguf out of the ' +
        "server's compression), or answer Range requests",
    );
  }
  return { response, size };
}

async function fetchUrl(url) {
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

/** The body's length where the response states it for the bytes the body will give. */
function plainLength(response) {
  const encoding = response.headers.get('Content-Encoding');
  const length = response.headers.get('Content-Length');
  if ((encoding && encoding !== 'identity') || length === null) return null;
  const size = Number(length);
  return Number.isSafeInteger(size) && size > 0 ? size : null;
}

/** The whole file's size from `Content-Range: bytes 0-0/SIZE`, or null. */
async function lengthFromRange(url) {
  try {
    const probe = await fetch(url, { headers: { Range: 'bytes=0-0' } });
    probe.body?.cancel().catch(() => {});
    const total = /^bytes\s+\d+-\d+\/(\d+)\s*$/i.exec(probe.headers.get('Content-Range') ?? '')?.[1];
    const size = Number(total);
    return probe.status === 206 && Number.isSafeInteger(size) && size > 0 ? size : null;
  } catch {
    return null;
  }
}

async function pushStream(loader, response, report, run) {
  const reader = response.body.getReader();
  let received = 0;
  for (;;) {
    if (run.stopRequested) {
      await reader.cancel().catch(() => {});
      throwIfCancelled(run);
    }
    const { done, value } = await reader.read();
    if (done) break;
    loader.push(value);
    received += value.length;
    report('reading', received);
  }
}

/**
 * Loads a model. Everything that can fail before the new file's bytes go in (the source, its
 * size, the memory it needs, and for a File its header) fails with the loaded model kept; after
 * that the old model is freed first, since its memory is reused for the new one, and a failure
 * leaves no model.
 */
async function loadModel(request, run) {
  const { id } = request;
  const started = performance.now();
  const source = await openSource(request, run);
  const { name, size, feed } = source;
  let wasm;
  try {
    wasm = await getEngine();
    // Throws too_large (saying why) for a file no build here can hold.
    const needs64 = wasm.memory_for_model(size, config.memory64Available) === 'memory64';
    if (needs64 !== config.memory64) {
      source.abandon();
      return { type: 'switch_build', memory64: needs64 };
    }
    // Throws what is wrong with a header (for shards: with how they fit together).
    if (request.file instanceof Blob) await inspectFile(request.file);
    if (Array.isArray(request.files)) await inspectFiles(request.files);
    throwIfCancelled(run);
  } catch (error) {
    source.abandon();
    throw error;
  }
  freeModel(); // Its memory is reused for the new file.
  const report = progressReporter(id, size);
  report(source.firstPhase ?? 'reading', 0, true);
  // Throws too_large before any big allocation; a split model's loader starts with its first
  // shard (feed starts each next one).
  const loader = new wasm.ModelLoader(source.firstSize ?? size);
  let engine;
  try {
    await feed(loader, report);
    report('validating', size, true);
    engine = loader.finish(); // Consumes the loader, even when it throws.
  } catch (error) {
    try {
      loader.free();
    } catch {
      // Already consumed by finish().
    }
    throw error;
  }
  const info = toPlain(engine.info());
  let device;
  try {
    report('device', size, true);
    device = await placeEngine(wasm, engine, deviceAsked(request.device));
  } catch (error) {
    engine.free();
    throw error;
  }
  const from = request.source ?? (request.url || request.urls ? 'url' : 'file');
  const fetched = source.download ?? null;
  model = { engine, name, size, info, device, source: from, shards: source.shards ?? 1, download: fetched };
  report('ready', size, true);
  return { type: 'loaded', model: describeModel(), ms: performance.now() - started };
}

/** A load's source: {name, size, feed(loader, report), abandon()}. A split model (gguf-split)
 *  is several: `files` (Files or Blobs), `urls`, or a `url` named as one of its shards
 *  (NAME-00001-of-00003.gguf), whose siblings are found by that rule. */
async function openSource(request, run) {
  const shards = await shardSources(request, run);
  if (shards) return joinSources(shards);
  return openOne(request, run);
}

async function shardSources(request, run) {
  if (Array.isArray(request.files) && request.files.length > 1) {
    return Promise.all(request.files.map((file) => openOne({ file }, run)));
  }
  let urls = Array.isArray(request.urls) && request.urls.length > 1 ? request.urls : null;
  if (!urls && typeof request.url === 'string') {
    const named = (await getEngine()).shard_names(new URL(request.url, self.location.href).href);
    if (named) urls = named;
  }
  if (!urls) return null;
  // Every shard's request starts at once; their bodies are read in order.
  const opened = await Promise.allSettled(
    urls.map((url) => openOne({ url, resumable: request.resumable }, run)),
  );
  const failed = opened.find((o) => o.status === 'rejected');
  if (failed) {
    for (const o of opened) if (o.status === 'fulfilled') o.value.abandon();
    throw failed.reason;
  }
  return opened.map((o) => o.value);
}

/** The shards as one source: their sizes added, fed one after the other (the loader starts a
 *  new file between two), progress counted across them all. */
function joinSources(parts) {
  return {
    name: parts[0].name.replace(/-\d{5}-of-\d{5}\.gguf$/, '.gguf'),
    size: parts.reduce((sum, part) => sum + part.size, 0),
    firstSize: parts[0].size,
    firstPhase: parts[0].firstPhase,
    shards: parts.length,
    feed: async (loader, report) => {
      let base = 0;
      for (const [i, part] of parts.entries()) {
        if (i > 0) loader.next_file(part.size);
        await part.feed(loader, (phase, bytes, force, extra) => report(phase, base + bytes, force, extra));
        base += part.size;
      }
    },
    abandon: () => parts.forEach((part) => part.abandon()),
  };
}

async function openOne(request, run) {
  if (request.file instanceof Blob) {
    const file = request.file;
    return {
      name: file.name || 'model.gguf',
      size: file.size,
      feed: (loader, report) => pushFile(loader, file, report, run),
      abandon: () => {},
    };
  }
  if (typeof request.url === 'string') {
    let url;
    try {
      url = new URL(request.url, self.location.href);
    } catch {
      throw new WorkerError('ProtocolError', 'bad_request', `${JSON.stringify(request.url)} is not a URL`);
    }
    const name = decodeURIComponent(url.pathname.split('/').pop() || 'model.gguf');
    return Object.assign(await openUrlSource(url.href, request.resumable, run), { name });
  }
  throw new WorkerError(
    'ProtocolError',
    'bad_request',
    'load needs a File in "file", a URL in "url", or a split model\'s Files in "files" or URLs in "urls"',
  );
}

/**
 * A URL's source. With `resumable: true`, or for a file of RESUMABLE_MIN_BYTES or more whose
 * server answers Range requests, it downloads into OPFS resumably (download.js) before the
 * loader reads it from disk; otherwise (`resumable: false`, no OPFS, no Range support, or a
 * download that cannot start after all) it streams once. A smaller file costs no request
 * beyond its own: only `resumable: true`, or a large file whose answer does not say
 * `Accept-Ranges: bytes`, sends a one-byte Range probe.
 */
async function openUrlSource(url, resumable, run) {
  const resumes = resumable !== false && resumableAvailable();
  if (resumes && resumable === true) {
    const probe = await probeRanges(url);
    if (probe) return resumableSource(url, probe, run);
  }
  const { response, size } = await openUrl(url);
  if (resumes && size >= RESUMABLE_MIN_BYTES) {
    const ranges =
      response.headers.get('Accept-Ranges') === 'bytes'
        ? { size, validator: validatorOf(response) }
        : await probeRanges(url);
    if (ranges?.size === size) {
      response.body?.cancel().catch(() => {});
      return resumableSource(url, ranges, run);
    }
  }
  return {
    size,
    feed: (loader, report) => pushStream(loader, response, report, run),
    abandon: () => response.body?.cancel().catch(() => {}),
  };
}

/** The source of a resumable download of `url` ({size, validator} from the server). */
function resumableSource(url, ranges, run) {
  const source = {
    size: ranges.size,
    firstPhase: 'downloading',
    feed: async (loader, report) => {
      const fetched = await download(url, ranges, {
        report: (bytes, resumedFrom) => report('downloading', bytes, false, { resumedFrom }),
        cancelled: () => run.stopRequested,
      });
      if (fetched === null) {
        const { response } = await openUrl(url);
        return pushStream(loader, response, report, run);
      }
      throwIfCancelled(run);
      report('downloading', ranges.size, true, { resumedFrom: fetched.resumedFrom });
      await pushFile(loader, fetched.file, report, run);
      await fetched.remove();
      source.download = { resumedFrom: fetched.resumedFrom, retries: fetched.retries, parts: fetched.parts };
    },
    abandon: () => {},
  };
  return source;
}

function describeModel() {
  if (!model) return null;
  const { name, size, info, source, device, shards, download } = model;
  return {
    name,
    size,
    source,
    shards,
    ...(download ? { download } : {}),
    ...info,
    threads: engineBuild?.threads ?? 1,
    memory64: config.memory64,
    device,
  };
}

// --- The device ----------------------------------------------------------------------------

const DEVICES = ['auto', 'gpu', 'cpu'];

function deviceAsked(value) {
  if (value === undefined || value === null) return 'auto';
  if (!DEVICES.includes(value)) {
    throw new WorkerError('ProtocolError', 'bad_request', `device must be one of ${DEVICES.join(', ')}`);
  }
  return value;
}

let gpuPromise = null; // {gpu: WebGpu, name}: this worker's GPU device, asked for once

/** The browser's adapter (capabilities.js), or a no_gpu error. Cheap: no device is made. */
async function adapterOrError() {
  const noGpu = (message) => new WorkerError('GpuError', 'no_gpu', message);
  if (!self.navigator?.gpu) throw noGpu('this browser has no WebGPU (navigator.gpu)');
  const adapter = await gpuAdapter();
  if (!adapter) throw noGpu('the browser offers no GPU adapter');
  return adapter;
}

/** The device with every kernel compiled, made once per worker (again after a loss). */
function getGpu(wasm, adapter) {
  if (!gpuPromise) {
    gpuPromise = wasm.request_gpu().then((gpu) => ({ gpu, name: adapter.name }));
    gpuPromise.catch(() => {
      gpuPromise = null; // An adapter may appear later (a driver update, another flag).
    });
  }
  return gpuPromise;
}

/**
 * Puts a freshly loaded engine on the device asked for, and makes its cache there (on the GPU
 * that uploads the weights). Returns {type: 'gpu', name} or {type: 'cpu', threads, reason}.
 */
async function placeEngine(wasm, engine, asked) {
  const cpu = (reason) => ({ type: 'cpu', threads: engineBuild?.threads ?? 1, reason });
  if (asked === 'cpu') return cpu(null);
  let gpu;
  try {
    if (typeof wasm.request_gpu !== 'function') {
      throw new WorkerError(
        'GpuError',
        'no_gpu',
        'the 64-bit-memory build (files over 3.6 GiB) has no GPU backend',
      );
    }
    const adapter = await adapterOrError();
    if (asked === 'auto' && adapter.software) {
      return cpu(`the GPU adapter (${adapter.name}) is a software renderer, slower than the CPU engine`);
    }
    gpu = await getGpu(wasm, adapter);
    if (gpu.gpu.facts().lost) {
      gpuPromise = null;
      gpu = await getGpu(wasm, adapter);
    }
    engine.use_gpu(gpu.gpu);
    engine.open_session();
  } catch (error) {
    engine.use_cpu();
    if (asked === 'gpu') throw error;
    return cpu(`the GPU cannot run it: ${error.message}`);
  }
  return { type: 'gpu', name: gpu.name, reason: null };
}

/** After a lost GPU the model goes on on the CPU; the error still fails the request. */
function onGenerationError(error) {
  if (error?.kind === 'gpu_lost' && model) {
    model.engine.use_cpu();
    model.device = { type: 'cpu', threads: engineBuild?.threads ?? 1, reason: 'the GPU was lost' };
    answer = null;
    gpuPromise = null;
  }
  throw error;
}

// --- Generating ------------------------------------------------------------------------------

// Prompt tokens per prefill call: one batch of the engine's (PREFILL_BATCH), so parts cost
// nothing over a single call, and even a large model on one thread answers a stop or a ping
// within seconds.
const PREFILL_PART_TOKENS = 64;

let busy = null; // {stopRequested} while a load or generation runs
let answer = null; // the last answer: {start, steps: [{token, text, ...}]}, for branching

/** Resolves after every message already queued for this worker has been handled. */
const yieldChannel = new MessageChannel();
const yieldWaiters = [];
yieldChannel.port1.onmessage = () => yieldWaiters.shift()?.();
function yieldToMessages() {
  return new Promise((resolve) => {
    yieldWaiters.push(resolve);
    yieldChannel.port2.postMessage(null);
  });
}

function count(value, fallback, { min = 0, max = Number.MAX_SAFE_INTEGER } = {}) {
  if (value === undefined || value === null) return fallback;
  const number = Number(value);
  if (!Number.isInteger(number) || number < min || number > max) {
    throw new WorkerError('ProtocolError', 'bad_request', `${value} is not a whole number in ${min}..${max}`);
  }
  return number;
}

function chatMessages(messages) {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new WorkerError('ProtocolError', 'bad_request', 'chat needs a non-empty "messages" array');
  }
  return messages;
}

let latestPreempt = 0; // numbers the preempting requests: only the newest one runs

/**
 * Runs one load or generation at a time. Another one meanwhile is refused as busy, except
 * that a new load (`preempt`) stops the running work at its next chunk or step and waits
 * for it: dropping a second file replaces the first. Of several loads that arrive while one
 * runs, the newest wins and the others end as cancelled (three files dropped in quick
 * succession load the third, not the second).
 */
async function runExclusive(work, { preempt = false } = {}) {
  if (preempt) {
    const mine = ++latestPreempt;
    while (busy) {
      busy.stopRequested = true;
      await busy.done.catch(() => {});
      if (mine !== latestPreempt) throw new WorkerError('LoadError', 'cancelled', 'replaced by a newer load');
    }
  }
  if (busy)
    throw new WorkerError('ProtocolError', 'busy', 'the engine is busy: stop it or wait for it to finish');
  const run = { stopRequested: false, done: null };
  busy = run;
  run.done = (async () => {
    try {
      return await work(run);
    } finally {
      busy = null;
    }
  })();
  return run.done;
}

function throwIfCancelled(run) {
  if (run.stopRequested)
    throw new WorkerError('LoadError', 'cancelled', 'loading was cancelled by a newer request');
}

/**
 * The decode loop: one step per iteration, yielding between steps so a stop message is
 * handled at once. Step 0 only samples from the prefill's logits; every later step first
 * runs the previous token through the model, so decode speed is measured over steps 1...
 */
async function decode(id, run, { first, startIndex, maxTokens, traceTop }) {
  const { engine } = requireModel();
  const stats = { steps: 0, firstStepMs: 0, decodeMs: 0, decodeSteps: 0 };
  let reason = 'max_tokens';
  for (let i = 0; i < maxTokens; i++) {
    if (run.stopRequested) {
      reason = 'stopped';
      break;
    }
    const position = engine.context_used();
    const t0 = performance.now();
    const forced = i === 0 ? first : undefined;
    // The last token runs first (after a branch's rollback, the one before the step); on the
    // GPU its logits arrive through the event loop.
    if (engine.advance()) await engine.pending();
    const out = toPlain(engine.step(traceTop, forced));
    const ms = performance.now() - t0;
    if (out.context_full) {
      reason = 'context_full';
      break;
    }
    if (i === 0) stats.firstStepMs = ms;
    else {
      stats.decodeMs += ms;
      stats.decodeSteps += 1;
    }
    stats.steps += 1;
    const step = {
      index: startIndex + i,
      position,
      token: out.token,
      text: out.text,
      piece: out.piece,
      piece_bytes: out.piece_bytes,
      endOfGeneration: out.end_of_generation,
      forced: i === 0 && first !== undefined,
      trace: out.trace,
      ms,
    };
    answer.steps[step.index] = step;
    answer.steps.length = step.index + 1;
    // A structured answer (reasoning, tool calls) is read as it grows: the message so far.
    const reply = answer.structured ? toPlain(engine.parse_reply(answerText(), true)) : undefined;
    self.postMessage({ type: 'token', id, event: true, step, reply });
    if (out.end_of_generation) {
      reason = 'end';
      break;
    }
    await yieldToMessages();
  }
  return { reason, stats };
}

/** The current answer's text so far. */
function answerText() {
  let text = '';
  for (const step of answer.steps) text += step.text;
  return text;
}

/** The current answer's final `text` (a stop string may have cut it) read as a message. */
function parseReply(request) {
  const { engine } = requireModel();
  if (typeof request.text !== 'string')
    throw new WorkerError('ProtocolError', 'bad_request', 'parse_reply needs a string "text"');
  return { type: 'reply', reply: toPlain(engine.parse_reply(request.text, false)) };
}

function generationOptions(request) {
  return {
    maxTokens: count(request.maxTokens, DEFAULT_MAX_TOKENS, { min: 1, max: MAX_TOKENS_LIMIT }),
    traceTop: count(request.traceTop, DEFAULT_TRACE_TOP, { max: MAX_TRACE_TOP }),
  };
}

/** What `doneReply` measures a completion's stats from: its start, and the engine's counters. */
function beginCompletion(engine) {
  return { started: performance.now(), replayedBefore: engine.replayed(), soloBefore: engine.solo_steps() };
}

function doneReply(reason, stats, prefill, { started, replayedBefore, soloBefore }) {
  const { engine } = requireModel();
  const decodeTokS = stats.decodeSteps > 0 ? (1000 * stats.decodeSteps) / stats.decodeMs : null;
  const checkpoints = toPlain(engine.checkpoints());
  return {
    type: 'done',
    reason,
    stats: {
      ...prefill,
      generated: stats.steps,
      decodeTokS,
      contextUsed: engine.context_used(),
      totalMs: performance.now() - started,
      // Tokens run again because a recurrent state (Qwen3.5) went back to a checkpoint.
      replayed: engine.replayed() - replayedBefore,
      checkpoints: checkpoints.most > 0 ? checkpoints : null,
      // Decode steps that ran on one of the engine's threads, because one was found faster
      // (another program holding a core).
      soloSteps: engine.solo_steps() - soloBefore,
      // Model, cache and scratch all live in the wasm memory, which never shrinks: this is
      // what the engine holds of the machine's memory.
      memoryBytes: engineBuild?.memory?.buffer.byteLength ?? null,
    },
  };
}

/** A chat answer, or (`complete`) a legacy text completion. */
async function chat(request) {
  const { engine } = requireModel();
  const options = generationOptions(request);
  return runExclusive((run) => answerOn(engine, request, options, run).catch(onGenerationError));
}

/** The prompt of a chat (rendered through the template) or a completion (as it is). */
function prepare(engine, request) {
  if (request.type === 'complete') {
    if (typeof request.prompt !== 'string')
      throw new WorkerError('ProtocolError', 'bad_request', 'complete needs a string "prompt"');
    return engine.prepare_text({
      prompt: request.prompt,
      grammar: request.grammar ?? undefined,
      settings: request.settings ?? {},
      context: request.context ?? undefined,
    });
  }
  return engine.prepare_chat({
    messages: chatMessages(request.messages),
    enable_thinking: request.enableThinking ?? undefined,
    grammar: request.grammar ?? undefined,
    tools: request.tools ?? undefined,
    tool_choice: request.toolChoice ?? undefined,
    parallel_tool_calls: request.parallelToolCalls ?? undefined,
    split_reasoning: request.splitReasoning ?? undefined,
    settings: request.settings ?? {},
    context: request.context ?? undefined,
  });
}

async function answerOn(engine, request, options, run) {
  const begun = beginCompletion(engine);
  const { started } = begun;
  const prepared = toPlain(prepare(engine, request));
  const prefilled = await prefillInParts(request.id, run, engine, prepared.prompt_tokens);
  const prefillMs = performance.now() - started;
  const prefill = {
    promptTokens: prepared.prompt_tokens,
    reused: prefilled.reused,
    evaluated: prefilled.evaluated,
    contextSize: prepared.context_size,
    prefillMs,
    prefillTokS: prefilled.evaluated > 0 ? (1000 * prefilled.evaluated) / prefillMs : null,
  };
  answer = { start: engine.context_used(), steps: [], structured: prepared.structured };
  if (prefilled.remaining > 0) {
    return doneReply('stopped', { steps: 0, decodeSteps: 0 }, prefill, begun);
  }
  self.postMessage({
    type: 'prepared',
    id: request.id,
    event: true,
    prepared: { ...prepared, ...prefilled },
    ms: prefillMs,
  });
  await yieldToMessages();
  const { reason, stats } = await decode(request.id, run, { ...options, first: undefined, startIndex: 0 });
  return doneReply(reason, stats, { ...prefill, ttftMs: prefillMs + stats.firstStepMs }, begun);
}

/**
 * Brings the cache up to the prepared prompt PREFILL_PART_TOKENS at a time, posting progress
 * and yielding between parts; a stop ends it early (what was evaluated stays cached).
 */
async function prefillInParts(id, run, engine, promptTokens) {
  let reused = null;
  let evaluated = 0;
  for (;;) {
    const part = toPlain(engine.prefill(PREFILL_PART_TOKENS));
    await engine.pending(); // On the GPU: the part is done (a stop or progress is then true).
    reused ??= part.reused;
    evaluated += part.evaluated;
    if (part.remaining === 0) return { reused, evaluated, remaining: 0, context_used: part.context_used };
    self.postMessage({ type: 'prefill', id, event: true, evaluated, total: promptTokens - reused });
    await yieldToMessages();
    if (run.stopRequested)
      return { reused, evaluated, remaining: part.remaining, context_used: part.context_used };
  }
}

/** Regenerates the last answer from step `step` on, with `token` forced at that step. */
async function branch(request) {
  const { engine } = requireModel();
  const options = generationOptions(request);
  if (!answer) throw new WorkerError('ProtocolError', 'no_answer', 'there is no answer to branch from');
  const index = count(request.step, 0, { max: answer.steps.length - 1 });
  const token = count(request.token, 0, { max: model.info.vocab_size - 1 });
  const branchOn = async (run) => {
    const begun = beginCompletion(engine);
    // The KV cache is rolled back to the step, not recomputed (a recurrent state goes back
    // to its nearest checkpoint and replays the tokens from there).
    engine.truncate(answer.steps[index].position);
    answer.steps.length = index;
    const { reason, stats } = await decode(request.id, run, { ...options, first: token, startIndex: index });
    const prefill = { ttftMs: stats.firstStepMs };
    return doneReply(reason, stats, prefill, begun);
  };
  return runExclusive((run) => branchOn(run).catch(onGenerationError));
}

function stop() {
  const wasGenerating = Boolean(busy);
  if (busy) busy.stopRequested = true;
  return { type: 'stopped', wasGenerating };
}

function reset() {
  if (busy) throw new WorkerError('ProtocolError', 'busy', 'stop the generation before resetting');
  model?.engine.reset();
  answer = null;
  return { type: 'reset' };
}

function tokenize(request) {
  const { engine } = requireModel();
  if (typeof request.text !== 'string') {
    throw new WorkerError('ProtocolError', 'bad_request', 'tokenize needs a string "text"');
  }
  const flag = (value) => (value === undefined || value === null ? undefined : Boolean(value));
  const ids = engine.tokenize(request.text, flag(request.addSpecial), flag(request.parseSpecial));
  return { type: 'tokens', ids: Array.from(ids) };
}

function detokenize(request) {
  const { engine } = requireModel();
  const ids = request.ids;
  if (!Array.isArray(ids) || !ids.every((id) => Number.isInteger(id) && id >= 0 && id <= 0xffff_ffff)) {
    throw new WorkerError('ProtocolError', 'bad_request', 'detokenize needs an array of token ids in "ids"');
  }
  return { type: 'text', text: engine.detokenize(Uint32Array.from(ids), Boolean(request.renderSpecial)) };
}

/** Sentence embeddings, one batch of texts per wasm call (the engine's plan: short texts
 *  packed together): stop (or a newer load) ends the request between two. Validated in
 *  inferno.js; the engine checks every value again, over the whole request first. */
function embed(request) {
  const { engine } = requireModel();
  const { input, pooling, dimensions, normalize } = request;
  if (!Array.isArray(input) || !input.every((text) => typeof text === 'string')) {
    throw new WorkerError('ProtocolError', 'bad_request', 'embed needs an array of strings in "input"');
  }
  const options = { pooling: pooling ?? undefined, dimensions: dimensions ?? undefined, normalize };
  return runExclusive(async (run) => {
    const started = performance.now();
    const batches = engine.plan_embedding(input, options);
    const vectors = [];
    let promptTokens = 0;
    let used = input.length === 0 ? engine.embed([], options).pooling : null;
    let at = 0;
    for (const size of batches) {
      if (run.stopRequested) throw new WorkerError('AbortError', 'aborted', 'the embedding was stopped');
      const result = engine.embed(input.slice(at, at + size), options);
      vectors.push(...result.vectors);
      promptTokens += result.prompt_tokens;
      used = result.pooling;
      at += size;
      await yieldToMessages();
    }
    return { type: 'embeddings', vectors, promptTokens, pooling: used, ms: performance.now() - started };
  });
}

function unload() {
  if (busy) busy.stopRequested = true;
  freeModel();
  return { type: 'unloaded' };
}

const HANDLERS = {
  inspect: (request) => (request.files ? inspectFiles(request.files) : inspectFile(request.file)),
  info: () => engineInfo(),
  load: (request) => runExclusive((run) => loadModel(request, run), { preempt: true }),
  chat,
  complete: chat,
  branch,
  stop,
  reset,
  tokenize,
  detokenize,
  embed,
  parse_reply: parseReply,
  unload,
  configure,
  ping: () => ({ type: 'pong' }),
  trap: async () => {
    (await getEngine()).deliberate_trap();
    throw new WorkerError('ProtocolError', 'no_trap', 'the engine did not trap');
  },
  model: () => ({ type: 'model', model: describeModel() }),
  inspect_loaded: () => {
    const { engine, size } = requireModel();
    const started = performance.now();
    return {
      type: 'inspected',
      report: toPlain(engine.inspect()),
      bytesRead: size,
      ms: performance.now() - started,
    };
  },
};

function errorKind(error) {
  if (error?.kind) return String(error.kind);
  if (error?.name === 'NotReadableError') return 'read_failed'; // The file changed or vanished.
  return 'internal';
}

function errorReply(id, error) {
  if (error instanceof WebAssembly.RuntimeError) {
    // A trap (a Rust panic, or running out of memory) leaves the instance unusable; the
    // model lived in it, so it is gone too and must be loaded again.
    model = null;
    answer = null;
    enginePromise = Promise.reject(new WorkerError('RuntimeError', 'wasm_trap', 'the engine crashed'));
    enginePromise.catch(() => {});
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
  // wasm-bindgen can throw any JS value, not only Error objects.
  const name = error?.name ? String(error.name) : 'Error';
  const message = error?.message !== undefined ? String(error.message) : String(error);
  return { type: 'error', id, error: { name, kind: errorKind(error), message } };
}

async function handleRequest(request) {
  const id = request?.id ?? null;
  try {
    const handler = Object.hasOwn(HANDLERS, request?.type) ? HANDLERS[request.type] : null;
    if (!handler) {
      throw new WorkerError(
        'ProtocolError',
        'unknown_message_type',
        `unknown request type ${JSON.stringify(request?.type)}`,
      );
    }
    const reply = await handler(request);
    if (reply !== null) self.postMessage({ ...reply, id });
  } catch (error) {
    self.postMessage(errorReply(id, error));
  }
}

self.addEventListener('message', (event) => {
  handleRequest(event.data);
});
