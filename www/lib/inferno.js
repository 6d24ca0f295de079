// @ts-check
// Inferno's public API: GGUF language models in a Web Worker, from any page, no bundler.
//
//   import { Inferno } from './inferno.js';
//   const engine = await Inferno.load(fileOrUrl, { onProgress: (p) => console.log(p.loaded, p.total) });
//   const stream = await engine.chat.completions.create({ messages, stream: true, logprobs: true });
//   for await (const chunk of stream) output.textContent += chunk.choices[0].delta.content ?? '';
//
// The chat page and the inspector use this module and nothing else of the engine; it is the
// one client of the worker protocol (worker-client.js, worker.js). Completions follow the
// OpenAI chat shape (as web-llm does); what only Inferno knows (the candidates of each step,
// the nucleus, the entropy, the settings in force) travels in an `inferno` field beside it.
// Types: inferno.d.ts.

import { EngineClient, InfernoError } from './worker-client.js';
import { DEFAULT_TRACE_TOP, MAX_TRACE_TOP, SAMPLING_KEYS } from './defaults.js';
import {
  coresBucketed,
  defaultThreads,
  gpuAdapter,
  hardwareThreads,
  memory64Supported,
  missingFeatures,
  relaxedSimdSupported,
  threadsSupported,
} from './capabilities.js';
import * as storage from './storage.js';

export { InfernoError };

/** The most stop strings a request may give (OpenAI allows 4). */
const MAX_STOP_STRINGS = 16;
/** The most texts one embeddings request may give (OpenAI's limit). */
const MAX_EMBEDDING_INPUTS = 2048;
/** OpenAI's floor for a log probability (a probability of 0 has none). */
const LOGPROB_FLOOR = -9999;
/** Where Vite's dev server keeps pre-bundled dependencies. */
const VITE_DEPS = /^.*\/node_modules\/\.vite\/deps\//;
/** Worker errors after which the model is gone (a new worker is already starting). */
const MODEL_LOST = new Set(['wasm_trap', 'stalled', 'worker_failed', 'cancelled']);
/** Where a load may run the model. */
const DEVICES = ['auto', 'gpu', 'cpu'];

let completionCount = 0;

function abortError() {
  return new InfernoError({ name: 'AbortError', kind: 'aborted', message: 'the request was aborted' });
}

function badRequest(message) {
  return new InfernoError({ name: 'TypeError', kind: 'bad_request', message });
}

/** What this browser offers the engine, without starting one, and what the engine falls back
 *  to where it lacks something (`missing`). */
function capabilities() {
  const offered = {
    threads: threadsSupported(),
    hardwareThreads: hardwareThreads(),
    coresBucketed: coresBucketed(),
    defaultThreads: defaultThreads(),
    relaxedSimd: relaxedSimdSupported(),
    memory64: memory64Supported(),
    opfs: storage.opfsAvailable(),
    webgpu: Boolean(self.navigator?.gpu),
  };
  return { ...offered, missing: missingFeatures(offered) };
}

/** Models kept in this browser's Origin Private File System; load one with `{opfs: name}`. */
const storedModels = Object.freeze({
  available: storage.opfsAvailable,
  list: storage.listStoredModels,
  /** keep(name, fileOrUrl, onProgress(bytes, total)): copies a model in, streaming. */
  keep: storage.storeModel,
  has: storage.isStored,
  remove: storage.deleteStoredModel,
  estimate: storage.storageEstimate,
});

export class Inferno {
  #client;
  #model = null;
  #loads = 0;

  /** Use Inferno.create() or Inferno.load(). @param {import('./inferno.js').EngineOptions} [options] */
  constructor({ threads = null, relaxed = true, stallMs, workerUrl } = {}) {
    const { createWorker, where } = engineWorker(workerUrl);
    this.#client = new EngineClient(createWorker, {
      where,
      threads: threads || null,
      relaxed: relaxed !== false,
      ...(stallMs ? { stallMs } : {}),
    });
    /** OpenAI-shaped chat completions: `engine.chat.completions.create(params)`. */
    this.chat = Object.freeze({
      completions: Object.freeze({ create: (params) => this.#complete('chat', params) }),
    });
    /** OpenAI's legacy text completions: `engine.completions.create({prompt, ...})`, the
     *  prompt as it is (no chat template), with the same sampling, trace, stop strings and
     *  response_format. */
    this.completions = Object.freeze({ create: (params) => this.#complete('text', params) });
    /** OpenAI-shaped sentence embeddings: `engine.embeddings.create({input, dimensions?,
     *  encoding_format?})`, pooled as the file says (`pooling` to choose: a chat model
     *  declares none), unit length unless `normalize: false`. */
    this.embeddings = Object.freeze({ create: (params) => this.#embed(params ?? {}) });
  }

  /** Starts an engine (its Web Worker) with no model yet. */
  static create(options = {}) {
    return new Inferno(options);
  }

  /** Starts an engine and loads `source` into it (see load()). */
  static async load(source, options = {}) {
    const engine = new Inferno(options);
    try {
      await engine.load(source, options);
    } catch (error) {
      engine.terminate();
      throw error;
    }
    return engine;
  }

  static capabilities = capabilities;
  static gpuAdapter = gpuAdapter;
  static storedModels = storedModels;

  /** The loaded model's facts (name, size, architecture, vocab_size, context_length, template,
   *  recommended_sampling, threads, memory64...), or null. */
  get model() {
    return this.#model;
  }

  /** The build the engine runs: {version, simd128, relaxed_simd, threads, build, defaults}. */
  async engineInfo() {
    return (await this.#client.request('info')).info;
  }

  /**
   * Loads a model: a File or Blob, a URL (string or URL: streamed with progress, or for a
   * file of 256 MiB or more, or with `resumable: true`, downloaded in parallel Range requests
   * into OPFS so that a dropped connection or a reload continues where it stopped), or
   * `{opfs: name}` for a model kept in this browser. `threads` restarts the engine with that
   * many threads if it runs another count. `device`: 'auto' (the default: a hardware GPU
   * that runs the whole model and decodes faster than the CPU, measured at the first load and
   * remembered, else the CPU), 'gpu' (fail rather than fall back) or 'cpu'; `model.device` says which runs and why. A new load replaces the model (and
   * cancels a load still running). Resolves with `model`.
   * @param {import('./inferno.js').ModelSource} source
   * @param {import('./inferno.js').LoadOptions} [options]
   */
  async load(source, { onProgress, threads, signal, device, resumable } = {}) {
    if (signal?.aborted) throw abortError();
    if (resumable !== undefined && typeof resumable !== 'boolean')
      throw badRequest('resumable must be a boolean');
    if (device !== undefined && device !== null && !DEVICES.includes(device))
      throw badRequest(`device must be one of ${DEVICES.join(', ')}`);
    const fields = {
      ...(await loadFields(source)),
      ...(device === undefined || device === null ? {} : { device }),
      ...(resumable === undefined ? {} : { resumable }),
    };
    if (threads !== undefined && this.#client.useThreads(threads || null)) this.#forgetModel();
    const mine = ++this.#loads; // Only the newest load says which model is loaded.
    const request = this.#client.request('load', fields, (event) => {
      if (event.type === 'progress') {
        const { phase, bytes: loaded, total, rate, resumedFrom } = event;
        onProgress?.({ phase, loaded, total, rate, ...(resumedFrom === undefined ? {} : { resumedFrom }) });
      }
    });
    let reply;
    try {
      reply = await this.#abortable(request, signal);
    } catch (error) {
      // A load that fails before the new file is read keeps the old model: ask whether it did.
      const alive = !MODEL_LOST.has(error.kind) && error.kind !== 'terminated';
      const kept = alive
        ? await this.#client.request('model').then(
            (answer) => answer.model,
            () => null,
          )
        : null;
      const same = kept && kept.name === this.#model?.name && kept.size === this.#model?.size;
      if (mine === this.#loads && !same) this.#forgetModel();
      throw error;
    }
    if (mine === this.#loads) {
      this.#model = { ...reply.model, load_ms: reply.ms };
    }
    return { ...reply.model, load_ms: reply.ms };
  }

  #forgetModel() {
    this.#model = null;
  }

  /** Reads only the header of a GGUF File or Blob (no model is loaded): the inspector's
   *  report, with {report, bytesRead, ms}. */
  async inspectFile(file) {
    // An array: a split model's shards, reported as one model.
    const files = Array.isArray(file) && file.length > 1 ? file : null;
    const single = Array.isArray(file) ? file[0] : file;
    if (files ? !files.every((f) => f instanceof Blob) : !(single instanceof Blob))
      throw badRequest('inspectFile needs a File or Blob, or an array of them (the shards of a split model)');
    const { report, bytesRead, ms } = await this.#client.request(
      'inspect',
      files ? { files } : { file: single },
    );
    return { report, bytesRead, ms };
  }

  /** The inspector's report of the loaded model (from the bytes already in memory). */
  async inspect() {
    const { report, bytesRead, ms } = await this.#client.request('inspect_loaded');
    return { report, bytesRead, ms };
  }

  /** Token ids of `text`; without options as a prompt (BOS where the model wants one,
   *  control tokens such as `<|im_start|>` recognised). */
  /** @param {string} text @param {{addSpecial?: boolean, parseSpecial?: boolean}} [options] */
  async tokenize(text, { addSpecial, parseSpecial } = {}) {
    if (typeof text !== 'string') throw badRequest('tokenize needs a string "text"');
    return (await this.#client.request('tokenize', { text, addSpecial, parseSpecial })).ids;
  }

  /** The text of token ids; control tokens are left out unless `renderSpecial`. */
  async detokenize(ids, { renderSpecial = false } = {}) {
    const list = Array.from(ids ?? []);
    if (!list.every((id) => Number.isInteger(id) && id >= 0 && id <= 0xffff_ffff))
      throw badRequest('detokenize needs an array of token ids in "ids"');
    return (await this.#client.request('detokenize', { ids: list, renderSpecial })).text;
  }

  /** Forgets the conversation the engine caches (the next chat reads its prompt afresh). */
  async reset() {
    await this.#client.request('reset');
  }

  /** Frees the model (the engine stays, ready for another load). */
  async unload() {
    await this.#client.request('unload');
    this.#model = null;
  }

  /** Ends the engine's worker; the object is unusable afterwards. */
  terminate() {
    this.#client.terminate();
    this.#model = null;
  }

  /**
   * Regenerates the last answer from step `step` (0-based), with `token` forced there: what
   * the page's visualizer does when a candidate is clicked. Takes the output options of
   * create() (stream, max_tokens counted from the start of the answer, logprobs,
   * top_logprobs, stop, signal); sampling stays as the answer had it. The result is the
   * whole answer: its text starts with the steps kept before `step`.
   */
  branch({ step, token, ...params } = /** @type {import('./inferno.js').BranchParams} */ ({})) {
    return this.#complete('branch', { ...params, branch: { step, token } });
  }

  // --- completions ------------------------------------------------------------------------

  /** What a failed request says about the model: gone, or moved to the CPU (a lost GPU). */
  #afterError(error) {
    if (MODEL_LOST.has(error.kind)) this.#model = null;
    else if (error.kind === 'gpu_lost' && this.#model) {
      const threads = this.#model.threads ?? 1;
      this.#model = { ...this.#model, device: { type: 'cpu', threads, reason: 'the GPU was lost' } };
    }
  }

  /** Runs `promise`; an abort of `signal` stops the worker's current work, and the promise then
   *  rejects with an AbortError. */
  async #abortable(promise, signal) {
    const onAbort = () => this.#client.request('stop').catch(() => {});
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return await promise;
    } catch (error) {
      this.#afterError(error);
      throw signal?.aborted && error.kind === 'cancelled' ? abortError() : error;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** @param {import('./inferno.js').EmbeddingParams} params
   *  @returns {Promise<import('./inferno.js').EmbeddingResponse>} */
  async #embed(params) {
    if (!this.#model)
      throw new InfernoError({ name: 'ProtocolError', kind: 'no_model', message: 'no model is loaded' });
    if (params.signal?.aborted) throw abortError();
    const input = typeof params.input === 'string' ? [params.input] : params.input;
    if (!Array.isArray(input) || input.length === 0 || input.length > MAX_EMBEDDING_INPUTS) {
      throw badRequest(`input must be a string or an array of 1..${MAX_EMBEDDING_INPUTS} strings`);
    }
    if (!input.every((text) => typeof text === 'string')) throw badRequest('every input must be a string');
    const format = params.encoding_format ?? 'float';
    if (format !== 'float' && format !== 'base64')
      throw badRequest("encoding_format must be 'float' or 'base64'");
    const pooling = params.pooling ?? undefined;
    if (pooling !== undefined && !['mean', 'cls', 'last'].includes(pooling)) {
      throw badRequest("pooling must be 'mean', 'cls' or 'last'");
    }
    const fields = {
      input,
      pooling,
      dimensions: integerParam(params.dimensions, 'dimensions', 1, 1 << 20),
      normalize: params.normalize !== false,
    };
    const reply = await this.#abortable(this.#client.request('embed', fields), params.signal).catch(
      (error) => {
        throw params.signal?.aborted && error.kind === 'aborted' ? abortError() : error;
      },
    );
    const data = reply.vectors.map((vector, index) => ({
      object: 'embedding',
      index,
      embedding: format === 'base64' ? base64OfFloats(vector) : Array.from(vector),
    }));
    return {
      object: 'list',
      data,
      model: this.#model?.name ?? null,
      usage: { prompt_tokens: reply.promptTokens, total_tokens: reply.promptTokens },
      inferno: { pooling: reply.pooling, ms: reply.ms },
    };
  }

  #complete(kind, params) {
    let run;
    try {
      run = this.#startCompletion(kind, params ?? {});
    } catch (error) {
      return Promise.reject(error);
    }
    return params.stream ? Promise.resolve(run.chunks()) : run.collect();
  }

  #startCompletion(kind, params) {
    if (!this.#model)
      throw new InfernoError({ name: 'ProtocolError', kind: 'no_model', message: 'no model is loaded' });
    if (params.signal?.aborted) throw abortError();
    if (params.n !== undefined && params.n !== 1) throw badRequest('only n = 1 is supported');
    const stops = stopStrings(params.stop);
    const logprobs = Boolean(params.logprobs) || params.logprobs === 0;
    // The legacy completions give the number of top candidates as `logprobs` itself.
    const topLogprobs =
      kind === 'text' && typeof params.logprobs === 'number'
        ? integerParam(params.logprobs, 'logprobs', 0, MAX_TRACE_TOP)
        : (integerParam(params.top_logprobs, 'top_logprobs', 0, MAX_TRACE_TOP) ?? 0);
    if (topLogprobs > 0 && !logprobs) throw badRequest('top_logprobs needs logprobs: true');
    const traceTop = Math.max(
      topLogprobs,
      integerParam(params.trace_top, 'trace_top', 0, MAX_TRACE_TOP) ?? DEFAULT_TRACE_TOP,
    );
    const maxTokens = integerParam(
      params.max_completion_tokens ?? params.max_tokens,
      'max_tokens',
      1,
      1 << 20,
    );
    const model = this.#model;
    const base = {
      id: `${kind === 'text' ? 'cmpl' : 'chatcmpl'}-inferno-${++completionCount}`,
      created: Math.floor(Date.now() / 1000),
      model: model.name,
    };

    /** @type {'chat' | 'complete' | 'branch'} */
    let type;
    /** @type {import('./protocol.js').RequestFields<'chat' | 'complete' | 'branch'>} */
    let fields;
    /** @type {Record<string, number> | null} The sampling in force (a branch's: the answer's). */
    let settings = null;
    if (kind === 'branch') {
      // The engine holds the answer, and refuses a step or token it does not have.
      type = 'branch';
      fields = { ...params.branch, maxTokens, traceTop, stop: stops };
    } else {
      settings = samplingSettings(params, model.recommended_sampling);
      const answerFields = {
        settings,
        grammar: responseFormat(params.response_format),
        maxTokens,
        traceTop,
        stop: stops,
        context: integerParam(params.context_size, 'context_size', 16, model.context_length),
      };
      if (kind === 'text') {
        type = 'complete';
        if (typeof params.prompt !== 'string' || params.prompt.length === 0)
          throw badRequest('prompt must be a non-empty string');
        fields = { ...answerFields, prompt: params.prompt };
      } else {
        type = 'chat';
        fields = {
          ...answerFields,
          messages: chatMessages(params.messages),
          enableThinking: params.enable_thinking,
          ...toolFields(params),
          splitReasoning: reasoningFormat(params.reasoning_format),
        };
      }
    }

    const run = new CompletionRun({
      base,
      textMode: kind === 'text',
      logprobs,
      topLogprobs,
      settings,
      stop: () => this.#client.request('stop').catch(() => {}),
    });
    const signal = params.signal;
    const onAbort = () => run.abort();
    signal?.addEventListener('abort', onAbort, { once: true });

    const done = this.#client.request(type, fields, (event) => {
      if (event.type === 'prefill') {
        params.onPrefillProgress?.({ evaluated: event.evaluated, total: event.total });
      } else if (event.type === 'prepared') {
        run.begin({ prompt: event.prompt }, event.structured);
      } else if (event.type === 'branched') {
        run.branched(event);
      } else if (event.type === 'token') {
        run.token(event.step, event.delta);
      }
    });
    done
      .then((reply) => run.finish(reply))
      .catch((error) => {
        this.#afterError(error);
        run.fail(error);
      })
      .finally(() => signal?.removeEventListener('abort', onAbort));
    return run;
  }
}

/**
 * The engine worker's factory and how errors name it. The default is written out in full,
 * `new Worker(new URL('./worker.js', import.meta.url), {type: 'module'})`: the one form that
 * Vite and webpack follow to bundle the worker with everything it imports. `workerUrl` (a
 * copy of worker.js and its files served elsewhere) resolves against the page.
 */
function engineWorker(workerUrl) {
  if (workerUrl === undefined || workerUrl === null) {
    const preBundled = VITE_DEPS.exec(import.meta.url);
    if (preBundled) {
      // Vite 7's dev server pre-bundles this file into node_modules/.vite/deps/, away from
      // worker.js and the wasm builds; it serves the package's own folder as it is, so the worker
      // starts from there. (Spelled so that no bundler takes it for a file to bundle.)
      const url = new URL(['..', '..', 'inferno-web', 'worker.js'].join('/'), preBundled[0]);
      const where = `${url.href} (Vite pre-bundled inferno-web, so the worker starts from the package's own folder; if that fails, add optimizeDeps: { exclude: ['inferno-web'] } to the Vite config)`;
      return { createWorker: () => new Worker(url, { type: 'module' }), where };
    }
    return {
      createWorker: () => new Worker(new URL('./worker.js', import.meta.url), { type: 'module' }),
      where: 'inferno-web/worker.js',
    };
  }
  let url;
  try {
    url = new URL(workerUrl, globalThis.document?.baseURI ?? self.location.href);
  } catch {
    throw badRequest(`workerUrl ${JSON.stringify(String(workerUrl))} is not a URL`);
  }
  const create = () => {
    try {
      return new Worker(url, { type: 'module' });
    } catch (error) {
      throw new InfernoError({
        name: 'WorkerError',
        kind: 'worker_failed',
        message: `could not start the engine worker from ${url.href}: ${error.message}`,
      });
    }
  };
  return { createWorker: create, where: url.href };
}

/** The worker's load fields for a source. An array is a split model's shards (gguf-split):
 *  Files or Blobs, or URLs, in any order. */
/** @param {import('./inferno.js').ModelSource} source
 *  @returns {Promise<import('./protocol.js').RequestFields<'load'>>} */
async function loadFields(source) {
  // Relative to the page, not to the worker (which may live in node_modules).
  const absolute = (url) => new URL(url, globalThis.document?.baseURI ?? self.location.href).href;
  const isUrl = (s) => typeof s === 'string' || s instanceof URL;
  if (Array.isArray(source) && source.length > 0) {
    if (source.length === 1) return loadFields(source[0]);
    if (source.every((s) => s instanceof Blob)) return { files: source };
    if (source.every(isUrl)) return { urls: source.map(absolute) };
    throw badRequest("a split model's shards must be all Files or Blobs, or all URLs");
  }
  if (source instanceof Blob) return { file: source };
  if (isUrl(source)) return { url: absolute(source) };
  if (source && typeof source === 'object' && 'opfs' in source && typeof source.opfs === 'string') {
    const file = await storage.openStoredModel(source.opfs).catch((error) => {
      throw new InfernoError({
        name: 'StorageError',
        kind: 'not_stored',
        message: `${source.opfs} is not kept in this browser: ${error.message}`,
      });
    });
    return { file: file.name === source.opfs ? file : new File([file], source.opfs), source: 'opfs' };
  }
  throw badRequest("load needs a File, a Blob, a URL, {opfs: name} or a split model's shards (an array)");
}

function integerParam(value, name, min, max) {
  if (value === undefined || value === null) return undefined;
  if (!Number.isInteger(value) || value < min || value > max)
    throw badRequest(`${name} must be a whole number in ${min}..${max}`);
  return value;
}

/** OpenAI's base64 encoding of a vector: its float32 bytes, little-endian (every browser's
 *  typed-array order). */
function base64OfFloats(vector) {
  const bytes = new Uint8Array(vector.buffer, vector.byteOffset, vector.byteLength);
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

function stopStrings(stop) {
  if (stop === undefined || stop === null) return [];
  const list = Array.isArray(stop) ? stop : [stop];
  if (list.length > MAX_STOP_STRINGS || !list.every((s) => typeof s === 'string' && s.length > 0)) {
    throw badRequest(`stop must be a non-empty string or up to ${MAX_STOP_STRINGS} of them`);
  }
  return list;
}

/**
 * OpenAI's `response_format` as the engine's grammar: `{type: 'text'}` (none),
 * `{type: 'json_object'}`, `{type: 'json_schema', json_schema: {name, schema, strict}}`, and the
 * extension `{type: 'grammar', grammar}` (a Lark grammar). The schema goes as JSON text; the
 * engine compiles it before the answer starts. A `strict` schema is refused (kind bad_schema)
 * unless every keyword can be enforced; otherwise those that cannot are left out, and the
 * answer names them (`inferno.warnings`), as OpenAI's API treats a schema that is not strict.
 */
/** @returns {import('./protocol.js').ResponseGrammar | undefined} */
function responseFormat(format) {
  if (format === undefined || format === null) return undefined;
  switch (format.type) {
    case 'text':
      return undefined;
    case 'json_object':
      return { type: 'json_object' };
    case 'json_schema': {
      const schema = format.json_schema?.schema;
      if (schema === null || typeof schema !== 'object')
        throw badRequest('response_format.json_schema.schema must be a JSON schema object');
      return {
        type: 'json_schema',
        schema: JSON.stringify(schema),
        strict: format.json_schema.strict === true,
      };
    }
    case 'grammar':
      if (typeof format.grammar !== 'string' || format.grammar.length === 0)
        throw badRequest('response_format.grammar must be a non-empty Lark grammar');
      return { type: 'lark', grammar: format.grammar };
    default:
      throw badRequest("response_format.type must be 'text', 'json_object', 'json_schema' or 'grammar'");
  }
}

/** OpenAI messages to the template's: content may also be a list of text parts, or null in
 *  an assistant message that made tool calls; `developer` is `system`. */
function chatMessages(messages) {
  if (!Array.isArray(messages) || messages.length === 0)
    throw badRequest('messages must be a non-empty array');
  return messages.map((message, i) => {
    const calls = message?.tool_calls;
    const content = Array.isArray(message?.content)
      ? message.content
          .map((part) => (part?.type === 'text' && typeof part.text === 'string' ? part.text : badPart(i)))
          .join('')
      : (message?.content ?? (Array.isArray(calls) ? '' : message?.content));
    if (typeof message?.role !== 'string' || typeof content !== 'string') {
      throw badRequest(`messages[${i}] needs a string role and string content`);
    }
    const out = { role: message.role === 'developer' ? 'system' : message.role, content };
    if (calls !== undefined && calls !== null) out.tool_calls = toolCalls(calls, i);
    for (const key of ['tool_call_id', 'name', 'reasoning_content']) {
      if (message[key] === undefined || message[key] === null) continue;
      if (typeof message[key] !== 'string') throw badRequest(`messages[${i}].${key} must be a string`);
      out[key] = message[key];
    }
    return out;
  });
}

/** An assistant message's `tool_calls`: arguments as JSON text (an object is written as one). */
function toolCalls(calls, i) {
  if (!Array.isArray(calls)) throw badRequest(`messages[${i}].tool_calls must be an array`);
  return calls.map((call, j) => {
    const name = call?.function?.name;
    let args = call?.function?.arguments ?? '{}';
    if (args !== null && typeof args === 'object') args = JSON.stringify(args);
    if (typeof name !== 'string' || typeof args !== 'string')
      throw badRequest(`messages[${i}].tool_calls[${j}] needs function.name and function.arguments`);
    return { id: call.id ?? undefined, type: 'function', function: { name, arguments: args } };
  });
}

/** `tools`, `tool_choice` and `parallel_tool_calls` for the engine, which checks the names and
 *  schemas (kind bad_tools). */
function toolFields(params) {
  const fields = {};
  if (params.tools !== undefined && params.tools !== null) {
    if (!Array.isArray(params.tools))
      throw badRequest('tools must be an array of {type: "function", function}');
    fields.tools = params.tools.map((tool, i) => {
      if (tool?.type !== 'function' || typeof tool.function?.name !== 'string')
        throw badRequest(
          `tools[${i}] must be {type: 'function', function: {name, description?, parameters?}}`,
        );
      const { name, description, parameters } = tool.function;
      return { type: 'function', function: { name, description, parameters } };
    });
  }
  const choice = params.tool_choice;
  if (choice !== undefined && choice !== null) {
    const named = typeof choice === 'object' && typeof choice.function?.name === 'string';
    if (!named && !['auto', 'none', 'required'].includes(choice))
      throw badRequest(
        "tool_choice must be 'auto', 'none', 'required' or {type: 'function', function: {name}}",
      );
    fields.toolChoice = named ? { type: 'function', function: { name: choice.function.name } } : choice;
  }
  if (params.parallel_tool_calls !== undefined && params.parallel_tool_calls !== null)
    fields.parallelToolCalls = Boolean(params.parallel_tool_calls);
  return fields;
}

/** llama.cpp's `reasoning_format`: 'auto' (default) keeps the reasoning apart in
 *  `reasoning_content`, 'none' leaves it in the content as the model wrote it. */
function reasoningFormat(format) {
  if (format === undefined || format === null || format === 'auto') return undefined;
  if (format === 'none') return false;
  throw badRequest("reasoning_format must be 'auto' or 'none'");
}

function badPart(index) {
  throw badRequest(`messages[${index}]: only text content parts are supported`);
}

/** The sampling settings in force: the request's, else the file's recommendation (which is
 *  llama.cpp's defaults where the file says nothing); a fresh random seed unless one is given. */
/** @param {import('./inferno.js').AnswerParams} params @param {Record<string, number>} [recommended]
 *  @returns {Record<string, number>} */
function samplingSettings(params, recommended = {}) {
  /** @type {Record<string, number>} */
  const settings = { ...recommended };
  for (const key of SAMPLING_KEYS) {
    const value = params[key];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'number' || !Number.isFinite(value))
      throw badRequest(`${key} must be a finite number`);
    settings[key] = value;
  }
  const seed = params.seed ?? crypto.getRandomValues(new Uint32Array(1))[0];
  if (!Number.isSafeInteger(seed) || seed < 0) throw badRequest('seed must be a whole number >= 0');
  settings.seed = seed;
  return settings;
}

/** One completion as it streams: the engine's events in, OpenAI-shaped chunks out. The engine
 *  reads the answer (src/engine/answer.rs): each token arrives with what it adds to the
 *  message (`content`, `reasoning_content`, tool calls), stop strings already applied. A chat
 *  answer goes out as `chat.completion.chunk`s, a plain completion (`textMode`) as legacy
 *  `text_completion` chunks. */
class CompletionRun {
  constructor({ base, textMode, logprobs, topLogprobs, settings, stop }) {
    this.base = base;
    this.logprobs = logprobs;
    this.topLogprobs = topLogprobs;
    this.settings = settings;
    this.stopWorker = stop;
    this.textMode = textMode;
    this.queue = [];
    this.wake = null;
    this.ended = false;
    this.error = null;
    this.aborted = false;
    this.started = false;
    this.structured = false;
    this.callIds = []; // each tool call's id, by index
    this.collected = { logprobs: [], steps: [] };
  }

  chunk(delta, finishReason = null, extra = {}) {
    const rest = { ...(extra.usage ? { usage: extra.usage } : {}), inferno: extra.inferno ?? null };
    if (this.textMode) {
      const logprobs = extra.logprobs ? legacyLogprobs(extra.logprobs.content) : null;
      const choice = { index: 0, text: delta.content ?? '', logprobs, finish_reason: finishReason };
      return { ...this.base, object: 'text_completion', choices: [choice], ...rest };
    }
    const choice = { index: 0, delta, logprobs: extra.logprobs ?? null, finish_reason: finishReason };
    return { ...this.base, object: 'chat.completion.chunk', choices: [choice], ...rest };
  }

  push(chunk) {
    this.queue.push(chunk);
    this.wake?.();
  }

  /** The engine's delta as OpenAI's: a plain answer's content (even empty), a structured
   *  one's fields that grew, each tool call with its id and name the first time.
   *  @param {import('./protocol.js').Delta} delta */
  openAiDelta(delta) {
    if (!this.structured) return { content: delta.content ?? '' };
    /** @type {Record<string, unknown>} */
    const out = {};
    if (delta.content) out.content = delta.content;
    if (delta.reasoning_content) out.reasoning_content = delta.reasoning_content;
    if (delta.tool_calls?.length) {
      out.tool_calls = delta.tool_calls.map(({ index, name, arguments: args }) => {
        if (name === undefined) return { index, function: { arguments: args } };
        const id = `call_${this.base.id.replace(/^\w+-/, '')}_${index}`;
        this.callIds[index] = id;
        return { index, id, type: 'function', function: { name, arguments: args } };
      });
    }
    return out;
  }

  /** The first chunk: the role, and the prompt's facts (or the branch's). */
  begin(inferno, structured = false, delta = {}) {
    if (this.started) return;
    this.started = true;
    this.structured = structured && !this.textMode;
    const first = this.openAiDelta(delta);
    this.push(
      this.chunk(this.textMode ? first : { role: 'assistant', content: '', ...first }, null, { inferno }),
    );
  }

  /** A branch's first chunk: the steps it keeps, and their text.
   *  @param {import('./protocol.js').BranchedEvent} event */
  branched(event) {
    this.settings ??= /** @type {Record<string, number>} */ (event.settings);
    const kept = event.kept.map((step) => ({ ...step, settings: this.settings }));
    this.collected.steps.push(...kept);
    if (this.logprobs) this.collected.logprobs.push(...kept.map((step) => this.logprobEntry(step)));
    this.begin({ branch: { step: event.step, token: event.token } }, event.structured, event.delta);
  }

  /** @param {import('./protocol.js').Step} step @param {import('./protocol.js').Delta} delta */
  token(step, delta) {
    if (this.aborted) return; // The worker is being stopped.
    const shown = { ...step, settings: this.settings };
    this.collected.steps.push(shown);
    const logprobs = this.logprobs ? { content: [this.logprobEntry(step)] } : null;
    if (logprobs) this.collected.logprobs.push(logprobs.content[0]);
    this.push(this.chunk(this.openAiDelta(delta), null, { logprobs, inferno: { step: shown } }));
  }

  logprobEntry(step) {
    const trace = step.trace;
    const logprob = (p) => (p > 0 ? Math.max(LOGPROB_FLOOR, Math.log(p)) : LOGPROB_FLOOR);
    return {
      token: step.piece,
      logprob: logprob(trace?.chosen_probability ?? 0),
      bytes: Array.from(step.piece_bytes ?? []),
      top_logprobs: (trace?.candidates ?? []).slice(0, this.topLogprobs).map((candidate, rank) => ({
        token: trace.pieces[rank],
        logprob: logprob(candidate.probability),
        bytes: Array.from(trace.piece_bytes?.[rank] ?? []),
      })),
    };
  }

  abort() {
    if (this.ended) return;
    this.aborted = true;
    this.stopWorker();
  }

  /** The last chunk: what the end adds (text held back for a stop string that never came, the
   *  answer read as finished), why it ended, the usage and the statistics.
   *  @param {import('./protocol.js').DoneReply} done */
  finish(done) {
    if (!this.started) this.begin(null); // Stopped before the prompt was read.
    const finishReason = this.aborted ? 'abort' : done.finish_reason;
    const { prompt_tokens, completion_tokens, cached_tokens } = done.usage;
    const usage = {
      prompt_tokens,
      completion_tokens,
      total_tokens: prompt_tokens + completion_tokens,
      prompt_tokens_details: { cached_tokens },
    };
    const inferno = {
      finish: done.finish,
      stop_string: done.stop_string,
      warnings: done.warnings,
      stats: done.stats,
    };
    this.push(this.chunk(this.openAiDelta(done.delta), finishReason, { usage, inferno }));
    this.summary = { finishReason, usage, inferno };
    this.ended = true;
    this.wake?.();
  }

  fail(error) {
    this.error = this.aborted && error.kind === 'cancelled' ? abortError() : error;
    this.ended = true;
    this.wake?.();
  }

  async *chunks() {
    try {
      for (;;) {
        if (this.queue.length > 0) {
          yield this.queue.shift();
        } else if (this.error) {
          throw this.error;
        } else if (this.ended) {
          return;
        } else {
          await new Promise((resolve) => (this.wake = resolve));
          this.wake = null;
        }
      }
    } finally {
      // The caller stopped reading early (break): stop the engine too.
      if (!this.ended) this.abort();
    }
  }

  /** The whole completion (stream: false). */
  async collect() {
    let text = '';
    const message = new MessageBuilder();
    for await (const chunk of this.chunks()) {
      if (this.textMode) text += chunk.choices[0].text;
      else message.add(chunk.choices[0].delta);
    }
    const { finishReason, usage, inferno } = this.summary;
    const extra = { ...inferno, steps: this.collected.steps, settings: this.settings };
    if (this.textMode) {
      const logprobs = this.logprobs ? legacyLogprobs(this.collected.logprobs) : null;
      const choice = { index: 0, text, logprobs, finish_reason: finishReason };
      return { ...this.base, object: 'text_completion', choices: [choice], usage, inferno: extra };
    }
    const choice = {
      index: 0,
      message: message.message(),
      logprobs: this.logprobs ? { content: this.collected.logprobs } : null,
      finish_reason: finishReason,
    };
    return { ...this.base, object: 'chat.completion', choices: [choice], usage, inferno: extra };
  }
}

/**
 * Joins a chat stream's deltas into its message, as an OpenAI client does: content and
 * reasoning concatenated, each tool call's pieces joined by `index`.
 */
export class MessageBuilder {
  constructor() {
    this.content = '';
    this.reasoning = '';
    this.calls = [];
  }

  add(delta) {
    this.content += delta.content ?? '';
    this.reasoning += delta.reasoning_content ?? '';
    for (const piece of delta.tool_calls ?? []) {
      const call = (this.calls[piece.index] ??= {
        id: piece.id,
        type: 'function',
        function: { name: '', arguments: '' },
      });
      if (piece.id) call.id = piece.id;
      call.function.name += piece.function?.name ?? '';
      call.function.arguments += piece.function?.arguments ?? '';
    }
  }

  /** @returns {import('./inferno.js').AssistantMessage} */
  message() {
    /** @type {import('./inferno.js').AssistantMessage} */
    const message = {
      role: 'assistant',
      content: this.calls.length > 0 && !this.content ? null : this.content,
    };
    if (this.reasoning) message.reasoning_content = this.reasoning;
    if (this.calls.length > 0) message.tool_calls = this.calls;
    return message;
  }
}

/** Chat-shaped log probabilities as the legacy completions' `{tokens, token_logprobs,
 *  top_logprobs, text_offset}`. */
function legacyLogprobs(entries) {
  let offset = 0;
  const text_offset = [];
  for (const entry of entries) {
    text_offset.push(offset);
    offset += entry.token.length;
  }
  return {
    tokens: entries.map((entry) => entry.token),
    token_logprobs: entries.map((entry) => entry.logprob),
    top_logprobs: entries.map((entry) =>
      Object.fromEntries(entry.top_logprobs.map((t) => [t.token, t.logprob])),
    ),
    text_offset,
  };
}

// The declarations (inferno.d.ts) describe this file: `tsc -p www` checks each export against
// its declared type here (inside this file, './inferno.js' names the declarations).
/** @satisfies {[typeof import('./inferno.js').Inferno, typeof import('./inferno.js').MessageBuilder, typeof import('./inferno.js').InfernoError]} */
([Inferno, MessageBuilder, InfernoError]);
