// Inferno engine worker: owns the WebAssembly module so parsing (and, later, inference)
// never blocks the page.
//
// Protocol: every request is {type, id, ...}; every request gets exactly one reply that
// carries the same id.
//   {type: "inspect", id, file: File|Blob} -> {type: "inspected", id, report, bytesRead, ms}
//   {type: "info", id}                     -> {type: "info", id, info}
//   anything that fails                    -> {type: "error", id, error: {name, kind, message}}

const INITIAL_PREFIX_BYTES = 1 << 20; // 1 MiB covers the header of most small models.
const PKG_URL = new URL('./pkg/inferno.js', import.meta.url);

/** An error with a machine-readable kind, shaped like the engine's GgufError. */
class WorkerError extends Error {
  constructor(name, kind, message) {
    super(message);
    this.name = name;
    this.kind = kind;
  }
}

let enginePromise = null;
let engineGeneration = 0;

/**
 * Loads and initialises the wasm module once. After a wasm trap the instance may be
 * left inconsistent, so dropEngine() forgets it and the next request loads a fresh
 * instance (a new module URL gives a new module record, hence a new instance).
 */
function getEngine() {
  if (!enginePromise) {
    const url = new URL(PKG_URL);
    if (engineGeneration > 0) url.searchParams.set('instance', String(engineGeneration));
    enginePromise = loadEngine(url.href);
    enginePromise.catch(() => {
      enginePromise = null; // Let a later request retry instead of caching the failure.
    });
  }
  return enginePromise;
}

async function loadEngine(url) {
  try {
    const engine = await import(url);
    await engine.default();
    return engine;
  } catch (error) {
    throw new WorkerError(
      'InitError',
      'wasm_init',
      `Could not load the Inferno WebAssembly engine (${PKG_URL.pathname}): ${describe(error)}`,
    );
  }
}

function dropEngine() {
  enginePromise = null;
  engineGeneration += 1;
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
  if (!(file instanceof Blob)) {
    throw new WorkerError('ProtocolError', 'bad_request', 'inspect needs a File or Blob in "file"');
  }
  const engine = await getEngine();
  const started = performance.now();
  let length = Math.min(file.size, INITIAL_PREFIX_BYTES);
  for (;;) {
    const prefix = await readPrefix(file, length);
    const result = toPlain(engine.inspect_prefix(prefix, file.size));
    if (result?.status === 'complete') {
      return { type: 'inspected', report: result.report, bytesRead: length, ms: performance.now() - started };
    }
    if (result?.status !== 'need_more') {
      throw new WorkerError('ProtocolError', 'bad_engine_reply', `unexpected inspect status ${JSON.stringify(result?.status)}`);
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
  return { type: 'info', info: toPlain(engine.engine_info()) };
}

const HANDLERS = {
  inspect: (request) => inspectFile(request.file),
  info: () => engineInfo(),
};

function errorKind(error) {
  if (error?.kind) return String(error.kind);
  if (error?.name === 'NotReadableError') return 'read_failed'; // The file changed or vanished.
  return 'internal';
}

function errorReply(id, error) {
  if (error instanceof WebAssembly.RuntimeError) {
    dropEngine();
    const message = `the engine crashed (${error.message}); it has been restarted`;
    return { type: 'error', id, error: { name: 'RuntimeError', kind: 'wasm_trap', message } };
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
      throw new WorkerError('ProtocolError', 'unknown_message_type', `unknown request type ${JSON.stringify(request?.type)}`);
    }
    const reply = await handler(request);
    self.postMessage({ ...reply, id });
  } catch (error) {
    self.postMessage(errorReply(id, error));
  }
}

self.addEventListener('message', (event) => {
  handleRequest(event.data);
});
