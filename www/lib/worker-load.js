// @ts-check
// The engine worker's model loading: a file's header (inspect), the model's bytes from Files,
// URLs (streamed, or downloaded resumably into OPFS by download.js) or a split model's shards,
// and the device it runs on (the GPU through WebGPU, or the CPU).

import { gpuAdapter } from './capabilities.js';
import { recalledChoice, rememberChoice } from './device-choice.js';
import { attachBytes, readProjector } from './worker-images.js';
import { RESUMABLE_MIN_BYTES, download, probeRanges, resumableAvailable, validatorOf } from './download.js';
import {
  WorkerError,
  fetchUrl,
  describeModel,
  freeModel,
  getEngine,
  post,
  requireModel,
  state,
  throwIfCancelled,
  toPlain,
} from './worker-engine.js';

/** @typedef {import('./worker-engine.js').Engine} Engine */
/** @typedef {import('./worker-engine.js').WebEngine} WebEngine */
/** @typedef {import('./worker-engine.js').Run} Run */
/** @typedef {import('./pkg/inferno.js').ModelLoader} ModelLoader */
/** @typedef {import('./protocol.js').ProgressEvent['phase']} Phase */
/** @typedef {(phase: Phase, bytes: number, force?: boolean, extra?: {resumedFrom?: number}) => void} Report */

/**
 * A load's source: its bytes fed to the loader, or given up before.
 * @typedef {object} Source
 * @property {string} [name]
 * @property {number} size
 * @property {number} [firstSize] a split model's first shard
 * @property {Phase} [firstPhase]
 * @property {number} [shards]
 * @property {{resumedFrom: number, retries: number, parts: number}} [download] set once fed
 * @property {(loader: ModelLoader, report: Report) => Promise<void>} feed
 * @property {() => void} abandon
 */

// --- Inspecting a header ------------------------------------------------------------------------

const INITIAL_PREFIX_BYTES = 1 << 20; // 1 MiB covers the header of most small models.

/** @param {Blob} file @param {number} length */
async function readPrefix(file, length) {
  return new Uint8Array(await file.slice(0, length).arrayBuffer());
}

/** @param {import('./protocol.js').InspectRequest} request */
export async function inspect(request) {
  if (request.files) return inspectFiles(request.files);
  const reply = await inspectFile(request.file);
  const runs = /** @type {{too_large?: boolean, embeds_only?: boolean} | undefined} */ (reply.report.runs);
  // Too large for WebAssembly memory here: a load as `device` asks would stream the weights to
  // the GPU where one can take them (a single file; the GPU runs no encoder).
  if (runs?.too_large && !runs.embeds_only && request.file) {
    const wasm = await getEngine();
    const streams = await streamsToGpu(wasm, { device: request.device }, request.file.size, 1).catch(
      () => false,
    );
    if (streams) reply.report.runs = { ...runs, ok: true, on_gpu: true };
  }
  return reply;
}

/**
 * Parses the GGUF header by reading only a prefix of the file: start with 1 MiB and
 * grow (at least doubling, so the total read stays within twice the final prefix)
 * until the engine has everything it needs.
 * @param {Blob | undefined} file
 * @returns {Promise<import('./protocol.js').InspectedReply>}
 */
async function inspectFile(file) {
  const started = performance.now();
  const { report, length } = await headerOf(file);
  return { type: 'inspected', report, bytesRead: length, ms: performance.now() - started };
}

/** The report of the model whose shards (gguf-split) are `files`, from their headers alone:
 *  one model across them all, or a typed error naming the shard missing, repeated or foreign.
 *  @param {Blob[]} files
 *  @returns {Promise<import('./protocol.js').InspectedReply>} */
async function inspectFiles(files) {
  if (!Array.isArray(files) || files.length === 0) {
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
      state.config.memory64Available,
    ),
  );
  const bytesRead = headers.reduce((sum, h) => sum + h.length, 0);
  return { type: 'inspected', report, bytesRead, ms: performance.now() - started };
}

/** A file's header bytes (`prefix`, of `length` bytes) and, unless `whole` is false (a shard,
 *  reported with the others), its report. The one check of the request's shape the worker
 *  keeps: a message without a file gets bad_request, not a TypeError.
 *  @param {Blob | undefined} file */
async function headerOf(file, { whole = true } = {}) {
  if (!(file instanceof Blob)) {
    throw new WorkerError('ProtocolError', 'bad_request', 'inspect needs a File or Blob in "file"');
  }
  const engine = await getEngine();
  let length = Math.min(file.size, INITIAL_PREFIX_BYTES);
  for (;;) {
    const prefix = await readPrefix(file, length);
    const result = toPlain(engine.inspect_prefix(prefix, file.size, state.config.memory64Available));
    if (result?.status === 'complete') return { report: whole ? result.report : null, prefix, length };
    if (result?.status !== 'need_more') {
      // The engine's answer is not what types/engine.d.ts says: a mismatched build.
      const status = /** @type {{status?: unknown} | null} */ (result)?.status;
      throw new WorkerError(
        'ProtocolError',
        'bad_engine_reply',
        `unexpected inspect status ${JSON.stringify(status)}`,
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

/** @returns {import('./protocol.js').InspectedReply} */
export function inspectLoaded() {
  const { engine, size } = requireModel();
  const started = performance.now();
  return {
    type: 'inspected',
    report: toPlain(engine.inspect()),
    bytesRead: size,
    ms: performance.now() - started,
  };
}

// --- Loading a model ----------------------------------------------------------------------

const FILE_CHUNK_BYTES = 16 << 20;
const PROGRESS_INTERVAL_MS = 100;

/** Posts progress at most every PROGRESS_INTERVAL_MS, with the phase's rate in bytes per
 *  second (from the bytes it started at: a resumed download's rate is of what it fetches now).
 *  A report held back is posted at the interval's end unless a newer one was, so the last
 *  bytes before a pause (a hung download) are posted too. `extra` is posted as it is.
 *  @param {number} id @param {number} total @returns {Report} */
function progressReporter(id, total) {
  let last = 0;
  /** @type {{phase: Phase, at: number, bytes: number} | null} */
  let phaseStart = null;
  /** @typedef {{phase: Phase, bytes: number, extra: {resumedFrom?: number}, at: number}} Held */
  /** @type {Held | null} */
  let held = null;
  /** @param {Held} report */
  const send = ({ phase, bytes, extra, at }) => {
    last = performance.now();
    const seconds = (at - phaseStart.at) / 1000;
    const rate = seconds > 0.05 ? Math.round((bytes - phaseStart.bytes) / seconds) : 0;
    post({ type: 'progress', id, event: true, phase, bytes, total, rate, ...extra });
  };
  return (phase, bytes, force = false, extra = {}) => {
    const now = performance.now();
    if (phaseStart?.phase !== phase) phaseStart = { phase, at: now, bytes };
    const report = { phase, bytes, extra, at: now };
    if (force || now - last >= PROGRESS_INTERVAL_MS) {
      held = null;
      send(report);
      return;
    }
    if (!held) {
      setTimeout(
        () => {
          if (held) send(held);
          held = null;
        },
        PROGRESS_INTERVAL_MS - (now - last),
      );
    }
    held = report;
  };
}

/** Feeds a File or Blob to the loader slice by slice: JS never holds more than one chunk.
 *  @param {ModelLoader} loader @param {Blob} file @param {Report} report @param {Run} run */
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
 *  one) the total of a one-byte Range request's Content-Range. @param {string} url */
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

/** The body's length where the response states it for the bytes the body will give.
 *  @param {Response} response */
function plainLength(response) {
  const encoding = response.headers.get('Content-Encoding');
  const length = response.headers.get('Content-Length');
  if ((encoding && encoding !== 'identity') || length === null) return null;
  const size = Number(length);
  return Number.isSafeInteger(size) && size > 0 ? size : null;
}

/** The whole file's size from `Content-Range: bytes 0-0/SIZE`, or null. @param {string} url */
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

/** @param {ModelLoader} loader @param {Response} response @param {Report} report @param {Run} run */
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
 * @param {import('./protocol.js').LoadRequest} request
 * @param {Run} run
 * @returns {Promise<import('./protocol.js').LoadedReply | import('./protocol.js').SwitchBuildReply>}
 */
export async function loadModel(request, run) {
  const { id } = request;
  const started = performance.now();
  const source = await openSource(request, run);
  const { name, size, feed } = source;
  let wasm;
  /** @type {Uint8Array | null} */
  let projector = null;
  /** The GPU the weights stream to, where they go straight there (weightsOnGpu). */
  let streamTo = null;
  try {
    wasm = await getEngine();
    const streams = await streamsToGpu(wasm, request, size, source.shards ?? 1);
    // Throws too_large (saying why) for a file no build here can hold.
    const needs64 = !streams && wasm.memory_for_model(size, state.config.memory64Available) === 'memory64';
    if (needs64 !== state.config.memory64) {
      source.abandon();
      return { type: 'switch_build', memory64: needs64 };
    }
    if (streams) streamTo = await getGpu(wasm, await adapterOrError());
    // Throws what is wrong with a header (for shards: with how they fit together).
    if (request.file instanceof Blob) await inspectFile(request.file);
    if (Array.isArray(request.files)) await inspectFiles(request.files);
    throwIfCancelled(run);
    // A projector that cannot be read, or that refuses the limits on a picture's rows, fails
    // the load with the loaded model kept.
    if (request.mmproj) {
      projector = await readProjectorWithProgress(id, request.mmproj, run);
      wasm.check_image_tokens(projector, request.image_min_tokens, request.image_max_tokens);
    }
  } catch (error) {
    source.abandon();
    throw error;
  }
  freeModel(); // Its memory is reused for the new file.
  const report = progressReporter(id, size);
  report(source.firstPhase ?? 'reading', 0, true);
  // Throws too_large before any big allocation; a split model's loader starts with its first
  // shard (feed starts each next one).
  const loader = streamTo
    ? new wasm.GpuModelLoader(streamTo.gpu, size)
    : new wasm.ModelLoader(source.firstSize ?? size);
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
  let vision = null;
  try {
    // Before the device is chosen: the session it opens is sized for a picture's rows.
    if (projector) vision = attachBytes(engine, projector, request);
    projector = null;
    // Before the device is chosen: 'auto' times the CPU at this precision, and the GPU refuses
    // cache types other than F16 ('auto' then stays on the CPU and says why).
    engine.set_attention_precision(request.precision ?? 'fast');
    engine.set_cache_types(request.cache_type_k ?? 'f16', request.cache_type_v ?? 'f16');
    report('device', size, true);
    if (streamTo) {
      engine.open_session();
      const why = request.weights === 'gpu' ? 'asked for' : 'the file is larger than this memory';
      device = {
        type: /** @type {const} */ ('gpu'),
        name: streamTo.name,
        reason: `its weights went straight to the GPU as the file loaded (${why}), and run there only`,
        measured: null,
      };
    } else {
      device = await placeEngine(wasm, engine, request.device ?? 'auto', {
        name,
        size,
        generates: info.generates,
      });
    }
  } catch (error) {
    engine.free();
    throw error;
  }
  const from = request.source ?? (request.url || request.urls ? 'url' : 'file');
  const fetched = source.download ?? null;
  state.model = {
    engine,
    name,
    size,
    info,
    device,
    source: from,
    shards: source.shards ?? 1,
    download: fetched,
    vision,
    weights: streamTo ? 'gpu' : 'memory',
  };
  report('ready', size, true);
  return { type: 'loaded', model: describeModel(), ms: performance.now() - started };
}

/** A projector's bytes for a load, its progress posted as the phase `projector`.
 *  @param {number} id @param {Blob | string} source @param {Run} run */
async function readProjectorWithProgress(id, source, run) {
  /** @type {Report | null} */
  let report = null;
  return readProjector(
    source,
    (bytes, total) => {
      report ??= progressReporter(id, total);
      report('projector', bytes, bytes === total);
    },
    run,
  );
}

/** A load's source. A split model (gguf-split) is several: `files` (Files or Blobs), `urls`, or
 *  a `url` named as one of its shards (NAME-00001-of-00003.gguf), whose siblings are found by
 *  that rule. @param {import('./protocol.js').LoadRequest} request @param {Run} run
 *  @returns {Promise<Source>} */
async function openSource(request, run) {
  const shards = await shardSources(request, run);
  if (shards) return joinSources(shards);
  return openOne(request, run);
}

/** @param {import('./protocol.js').LoadRequest} request @param {Run} run */
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
  /** @type {Source[]} */
  const sources = [];
  for (const o of opened) if (o.status === 'fulfilled') sources.push(o.value);
  const failed = opened.find((o) => o.status === 'rejected');
  if (failed) {
    for (const source of sources) source.abandon();
    throw failed.reason;
  }
  return sources;
}

/** The shards as one source: their sizes added, fed one after the other (the loader starts a
 *  new file between two), progress counted across them all. @param {Source[]} parts
 *  @returns {Source} */
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

/** @param {{file?: Blob, url?: string, resumable?: boolean}} request @param {Run} run
 *  @returns {Promise<Source>} */
async function openOne(request, run) {
  if (request.file instanceof Blob) {
    const file = request.file;
    return {
      name: (file instanceof File && file.name) || 'model.gguf',
      size: file.size,
      feed: (loader, report) => pushFile(loader, file, report, run),
      abandon: () => {},
    };
  }
  if (typeof request.url === 'string') {
    // inferno.js sends absolute URLs; a relative one is the worker's.
    const url = new URL(request.url, self.location.href);
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
 * @param {string} url @param {boolean | undefined} resumable @param {Run} run
 * @returns {Promise<Source>}
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

/** The source of a resumable download of `url` ({size, validator} from the server).
 *  @param {string} url @param {{size: number, validator: string | null}} ranges @param {Run} run
 *  @returns {Source} */
function resumableSource(url, ranges, run) {
  /** @type {Source} */
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

// --- The device ----------------------------------------------------------------------------

/**
 * Whether a load's weights stream straight into GPU buffers (GpuModelLoader) rather than into
 * wasm memory: when asked (`weights: 'gpu'`), and by default when the file is larger than the
 * 32-bit memory and no 64-bit build can take it (Safari), or the GPU is asked for (the 64-bit
 * build has no GPU backend), and a hardware GPU is there ('auto') or any ('gpu'). Only the
 * 32-bit builds stream (the worker switches to one first).
 * @param {Engine} wasm
 * @param {Pick<import('./protocol.js').LoadRequest, 'device' | 'weights' | 'cache_type_k' | 'cache_type_v'>} request
 * @param {number} size @param {number} shards
 */
async function streamsToGpu(wasm, request, size, shards) {
  const device = request.device ?? 'auto';
  if (request.weights === 'memory' || (request.weights !== 'gpu' && device === 'cpu')) return false;
  if (request.weights === 'gpu' && device === 'cpu') {
    throw new WorkerError(
      'ProtocolError',
      'bad_request',
      "weights: 'gpu' runs on the GPU only: not with device: 'cpu'",
    );
  }
  const f16Cache = [request.cache_type_k, request.cache_type_v].every((t) => (t ?? 'f16') === 'f16');
  if (request.weights !== 'gpu') {
    let fits32 = true;
    try {
      wasm.memory_for_model(size, false);
    } catch {
      fits32 = false;
    }
    if (fits32 || shards > 1 || !f16Cache || (state.config.memory64Available && device !== 'gpu'))
      return false;
    if (!self.navigator?.gpu) return false; // memory_for_model says why it cannot load.
    const adapter = await gpuAdapter();
    if (!adapter || (device === 'auto' && adapter.software)) return false;
  }
  // Refused before any byte is read.
  if (shards > 1) {
    throw new WorkerError(
      'GpuError',
      'gpu_unsupported',
      'split models do not stream to the GPU yet: join them first',
    );
  }
  if (!f16Cache) {
    throw new WorkerError('GpuError', 'gpu_unsupported', 'the GPU keeps its KV cache in F16 only');
  }
  return true;
}

/** This worker's GPU device with every kernel compiled, asked for once (again after a loss).
 *  @type {Promise<{gpu: import('./pkg/inferno.js').WebGpu, name: string}> | null} */
let gpuPromise = null;

/** The GPU device, if one was asked for (page tests destroy it to act out a lost device). */
export function currentGpu() {
  return gpuPromise;
}

/** The browser's adapter (capabilities.js), or a no_gpu error. Cheap: no device is made. */
async function adapterOrError() {
  /** @param {string} message */
  const noGpu = (message) => new WorkerError('GpuError', 'no_gpu', message);
  if (!self.navigator?.gpu) throw noGpu('this browser has no WebGPU (navigator.gpu)');
  const adapter = await gpuAdapter();
  if (!adapter) throw noGpu('the browser offers no GPU adapter');
  return adapter;
}

/** The worker's GPU device, asked for again where the last one was lost.
 *  @param {Engine} wasm @param {{name: string}} adapter */
async function getGpu(wasm, adapter) {
  const held = await gpuPromise?.catch(() => null);
  if (held?.gpu.facts().lost) gpuPromise = null;
  if (!gpuPromise) {
    const opening = wasm.request_gpu().then((gpu) => ({ gpu, name: adapter.name }));
    gpuPromise = opening;
    opening.catch(() => {
      gpuPromise = null; // An adapter may appear later (a driver update, another flag).
    });
  }
  return gpuPromise;
}

/**
 * Puts a freshly loaded engine on the device asked for, and makes its cache there (on the GPU
 * that uploads the weights). 'auto' takes a hardware GPU only if it decodes faster than the CPU
 * engine: measured once per model, adapter, build and thread count (`decodeMs` on each), and
 * remembered (device-choice.js). Returns {type: 'gpu', name, reason} or {type: 'cpu', threads,
 * reason}, the reason saying why when there was a choice.
 * @param {Engine} wasm @param {WebEngine} engine @param {'auto' | 'gpu' | 'cpu'} asked
 * @param {{name: string, size: number, generates: boolean}} model
 * @returns {Promise<import('./protocol.js').Device>}
 */
async function placeEngine(wasm, engine, asked, model) {
  const threads = state.engineBuild?.threads ?? 1;
  /** @param {string | null} reason @param {Measured | null} [measured] @returns {import('./protocol.js').Device} */
  const cpu = (reason, measured = null) => ({ type: 'cpu', threads, reason, measured });
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
    engine.use_gpu(gpu.gpu); // Refuses a model the GPU cannot run; uploads nothing yet.
  } catch (error) {
    engine.use_cpu();
    if (asked === 'gpu') throw error;
    return cpu(`the GPU cannot run it: ${error.message}`);
  }
  const onGpu = { type: /** @type {const} */ ('gpu'), name: gpu.name };
  if (asked === 'gpu' || !model.generates) {
    engine.open_session();
    return { ...onGpu, reason: null, measured: null };
  }
  const key = JSON.stringify([
    PROBE_VERSION,
    gpu.name,
    model.name,
    model.size,
    state.engineBuild?.build,
    threads,
  ]);
  const recalled = await recalledChoice(key);
  /** @type {import('./device-choice.js').DeviceChoice} */
  let choice;
  if (recalled) choice = recalled;
  else {
    try {
      choice = await probeDevices(engine, gpu.gpu);
    } catch (error) {
      engine.use_cpu();
      return cpu(`the GPU failed while measured: ${/** @type {Error} */ (error).message}`);
    }
    await rememberChoice(key, choice);
  }
  const measured = { gpu_ms: choice.gpuMs, cpu_ms: choice.cpuMs, remembered: recalled !== null };
  const figures = (first, firstMs, second, secondMs) =>
    `${firstMs.toFixed(1)} ms a token on the ${first}, against ${secondMs.toFixed(1)} on the ${second}` +
    (recalled ? ` (measured ${new Date(choice.measuredAt).toISOString().slice(0, 10)})` : '');
  if (choice.device === 'cpu') {
    engine.use_cpu();
    return cpu(`the CPU is faster here: ${figures('CPU', choice.cpuMs, 'GPU', choice.gpuMs)}`, measured);
  }
  if (recalled) engine.open_session(); // probeDevices opened it otherwise.
  return {
    ...onGpu,
    reason: `the GPU is faster here: ${figures('GPU', choice.gpuMs, 'CPU', choice.cpuMs)}`,
    measured,
  };
}

/** @typedef {{gpu_ms: number, cpu_ms: number, remembered: boolean}} Measured */

/** Bumped when the engine's speed on either device changes enough to measure again (2: a GPU
 *  decode step ranks the best logits on the device and reads back only those; 3: its products
 *  read 8-bit inputs through integer dot products). */
const PROBE_VERSION = 3;
/** Decode steps a probe runs on each device. Step 0 samples the prompt's logits and step 1 is
 *  the first forward pass (the GPU's first dispatches, the thread tuner's first trial): the
 *  steps after those are timed. */
const PROBE_STEPS = 5;

/**
 * Times decode on the CPU, then on the GPU (which uploads the weights), and leaves the engine
 * on the GPU with an empty conversation; `auto` then keeps the faster, the GPU on a tie.
 * @param {WebEngine} engine @param {import('./pkg/inferno.js').WebGpu} gpu
 * @returns {Promise<import('./device-choice.js').DeviceChoice>}
 */
async function probeDevices(engine, gpu) {
  const token = engine.tokenize('Hello', false, false)[0] ?? 0;
  engine.use_cpu();
  engine.open_session();
  const cpuMs = await decodeMs(engine, token);
  engine.use_gpu(gpu);
  engine.open_session();
  const gpuMs = await decodeMs(engine, token);
  return { device: gpuMs <= cpuMs ? 'gpu' : 'cpu', gpuMs, cpuMs, measuredAt: Date.now() };
}

/**
 * Milliseconds per decode step on the device the engine runs on now: the median of the timed
 * steps after a one-token prompt, each step forced to `token` (no sampling). Leaves the
 * conversation empty.
 * @param {WebEngine} engine @param {number} token
 */
async function decodeMs(engine, token) {
  engine.prepare_tokens(new Uint32Array([token]), undefined);
  await engine.pending();
  const times = [];
  for (let i = 0; i < PROBE_STEPS; i++) {
    const started = performance.now();
    if (engine.advance()) await engine.pending();
    engine.step(0, token);
    times.push(performance.now() - started);
  }
  engine.reset();
  const timed = times.slice(2).sort((a, b) => a - b);
  return timed[timed.length >> 1];
}

/** After a lost GPU the model goes on on the CPU (its cache there is empty); the error still
 *  fails the request. @param {unknown} error @returns {never} */
export function onGenerationError(error) {
  const model = state.model;
  if (/** @type {{kind?: string}} */ (error)?.kind === 'gpu_lost' && model?.weights === 'gpu') {
    // Its weights were only on that GPU: nothing is left to run it.
    freeModel();
    gpuPromise = null;
  } else if (/** @type {{kind?: string}} */ (error)?.kind === 'gpu_lost' && model) {
    model.engine.use_cpu();
    model.device = {
      type: 'cpu',
      threads: state.engineBuild?.threads ?? 1,
      reason: 'the GPU was lost',
      measured: null,
    };
    gpuPromise = null;
  }
  throw error;
}
