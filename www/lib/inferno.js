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
import { DEFAULT_TRACE_TOP, MAX_TRACE_TOP } from './defaults.js';
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
import { CompletionRun, MessageBuilder, abortError } from './completion.js';
import {
  badRequest,
  chatMessages,
  integerParam,
  reasoningFormat,
  responseFormat,
  samplingSettings,
  stopStrings,
  toolFields,
} from './request.js';

export { InfernoError, MessageBuilder };

/** The most texts one embeddings request may give (OpenAI's limit). */
const MAX_EMBEDDING_INPUTS = 2048;
/** Where Vite's dev server keeps pre-bundled dependencies. */
const VITE_DEPS = /^.*\/node_modules\/\.vite\/deps\//;
/** Worker errors after which the model is gone (a new worker is already starting). */
const MODEL_LOST = new Set(['wasm_trap', 'stalled', 'worker_failed', 'cancelled']);
/** Where a load may run the model. */
const DEVICES = ['auto', 'gpu', 'cpu'];
const PRECISIONS = ['fast', 'exact'];
const WEIGHTS = ['memory', 'gpu'];
/** What the KV cache keeps keys and values as (llama.cpp's -ctk/-ctv). */
const CACHE_TYPES = ['f16', 'q8_0', 'f32'];

let completionCount = 0;

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
  /** keepProjector(modelName, fileOrUrl, onProgress): a vision projector kept beside a model;
   *  load it with `{mmproj: {opfs: modelName}}`. */
  keepProjector: storage.storeProjector,
  /** The projector kept beside a model (a File), or null. */
  projector: storage.openStoredProjector,
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

  /** The build the engine runs: {version, simd128, relaxed_simd, threads, build, defaults,
   *  memory_bytes (its wasm memory now)}. */
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
   * remembered, else the CPU), 'gpu' (fail rather than fall back) or 'cpu'; `model.device` says which runs and why. `weights`: 'gpu' streams the weights straight into GPU buffers as the file arrives, so that a file larger than wasm memory loads (the default for such a file where no 64-bit build takes it: Safari); the model then runs on that GPU only. 'memory' keeps them in wasm memory. `precision`: 'fast' (the default: attention's sums in f32) or 'exact' (in F16, as llama.cpp's CPU: its logits bit for bit). `cache_type_k`, `cache_type_v`: 'f16' (the default), 'q8_0' (53 % of the memory) or 'f32' (twice), as llama.cpp's -ctk/-ctv; other than F16 runs on the CPU. A new load replaces the model (and
   * cancels a load still running). Resolves with `model`.
   * @param {import('./inferno.js').ModelSource} source
   * @param {import('./inferno.js').LoadOptions} [options]
   */
  async load(
    source,
    {
      onProgress,
      threads,
      signal,
      device,
      precision,
      cache_type_k,
      cache_type_v,
      resumable,
      mmproj,
      image_min_tokens,
      image_max_tokens,
      weights,
    } = {},
  ) {
    if (signal?.aborted) throw abortError();
    if (resumable !== undefined && typeof resumable !== 'boolean')
      throw badRequest('resumable must be a boolean');
    if (device !== undefined && device !== null && !DEVICES.includes(device))
      throw badRequest(`device must be one of ${DEVICES.join(', ')}`);
    if (weights !== undefined && weights !== null && !WEIGHTS.includes(weights))
      throw badRequest(`weights must be one of ${WEIGHTS.join(', ')}`);
    if (precision !== undefined && precision !== null && !PRECISIONS.includes(precision))
      throw badRequest(`precision must be one of ${PRECISIONS.join(', ')}`);
    for (const [name, value] of Object.entries({ cache_type_k, cache_type_v })) {
      if (value !== undefined && value !== null && !CACHE_TYPES.includes(value))
        throw badRequest(`${name} must be one of ${CACHE_TYPES.join(', ')}`);
    }
    const fields = {
      ...(await loadFields(source)),
      ...(device === undefined || device === null ? {} : { device }),
      ...(precision === undefined || precision === null ? {} : { precision }),
      ...(weights === undefined || weights === null ? {} : { weights }),
      ...(cache_type_k === undefined || cache_type_k === null ? {} : { cache_type_k }),
      ...(cache_type_v === undefined || cache_type_v === null ? {} : { cache_type_v }),
      ...(resumable === undefined ? {} : { resumable }),
      ...(mmproj === undefined || mmproj === null ? {} : { mmproj: await projectorSource(mmproj) }),
      ...imageTokenLimits({ image_min_tokens, image_max_tokens }),
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

  /**
   * Attaches a vision projector (mmproj) beside the loaded model, so that chat messages can
   * hold pictures: a File or Blob, a URL, or `{opfs: name}`. Refused (kind mmproj_mismatch)
   * when it was made for another model, or while an answer runs (busy). Resolves with what
   * the projector says about itself, which `model.vision` holds from then on.
   * `image_min_tokens` / `image_max_tokens` limit a picture's rows (as LoadOptions).
   * @param {import('./inferno.js').ProjectorSource} source
   * @param {import('./inferno.js').ProjectorOptions} [options]
   * @returns {Promise<import('./inferno.js').ProjectorFacts>}
   */
  async attachProjector(source, { image_min_tokens, image_max_tokens } = {}) {
    if (!this.#model)
      throw new InfernoError({ name: 'ProtocolError', kind: 'no_model', message: 'no model is loaded' });
    const limits = imageTokenLimits({ image_min_tokens, image_max_tokens });
    const from = await projectorSource(source);
    const reply = await this.#client.request('attach_projector', {
      ...(from instanceof Blob ? { file: from } : { url: from }),
      ...limits,
    });
    if (this.#model) this.#model = { ...this.#model, vision: reply.vision };
    return reply.vision;
  }

  /** Reads only the header of a GGUF File or Blob (no model is loaded): the inspector's
   *  report, with {report, bytesRead, ms}. `device`: the one a load would ask for, which
   *  decides whether a file too large for memory here could run with its weights on the GPU. */
  /** @param {Blob | Blob[]} file @param {{device?: 'auto' | 'gpu' | 'cpu'}} [options] */
  async inspectFile(file, { device } = {}) {
    // An array: a split model's shards, reported as one model.
    const files = Array.isArray(file) && file.length > 1 ? file : null;
    const single = Array.isArray(file) ? file[0] : file;
    if (files ? !files.every((f) => f instanceof Blob) : !(single instanceof Blob))
      throw badRequest('inspectFile needs a File or Blob, or an array of them (the shards of a split model)');
    if (device !== undefined && !DEVICES.includes(device))
      throw badRequest(`device must be one of ${DEVICES.join(', ')}`);
    const { report, bytesRead, ms } = await this.#client.request(
      'inspect',
      files ? { files } : { file: single, device },
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
    else if (error.kind === 'gpu_lost' && this.#model?.weights === 'gpu') this.#model = null;
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
    /** @type {string[]} The URLs of a chat's pictures, in the order of its markers. */
    let pictures = [];
    if (kind === 'branch') {
      // The engine holds the answer, and refuses a step or token it does not have.
      type = 'branch';
      /** @type {import('./engine-types.js').BranchRequest} */
      const branch = {
        step: params.branch.step,
        token: params.branch.token,
        max_tokens: maxTokens,
        trace_top: traceTop,
        stop: stops,
      };
      fields = branch;
    } else {
      settings = samplingSettings(params, model.recommended_sampling);
      /** @type {import('./engine-types.js').AnswerRequest} Written in the engine's names. */
      const answerFields = {
        settings,
        grammar: responseFormat(params.response_format),
        max_tokens: maxTokens,
        trace_top: traceTop,
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
        const chat = chatMessages(params.messages);
        pictures = chat.pictures;
        fields = {
          ...answerFields,
          messages: chat.messages,
          enable_thinking: params.enable_thinking,
          reasoning_effort: params.reasoning_effort,
          ...toolFields(params),
          split_reasoning: reasoningFormat(params.reasoning_format),
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
      whole: !params.stream,
    });
    const signal = params.signal;
    const onAbort = () => run.abort();
    signal?.addEventListener('abort', onAbort, { once: true });

    const onEvent = (event) => {
      if (event.type === 'prefill') {
        params.onPrefillProgress?.({ phase: 'text', evaluated: event.evaluated, total: event.total });
      } else if (event.type === 'image') {
        params.onPrefillProgress?.(
          event.parts === undefined
            ? { phase: 'image', evaluated: event.index, total: event.count }
            : {
                phase: 'image',
                evaluated: event.index,
                total: event.count,
                part: event.part,
                parts: event.parts,
              },
        );
      } else if (event.type === 'prepared') {
        run.begin({ prompt: event.prompt }, event.structured);
      } else if (event.type === 'branched') {
        run.branched(event);
      } else if (event.type === 'token') {
        run.token(event.step, event.delta);
      }
    };
    // A chat's pictures are fetched here (a blob: URL is this page's), and go to the worker as
    // Blobs, which it decodes.
    const done =
      pictures.length === 0
        ? this.#client.request(type, fields, onEvent)
        : fetchPictures(pictures).then((images) => {
            if (signal?.aborted) throw abortError();
            return this.#client.request(type, { ...fields, images }, onEvent);
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

/** The limits on a picture's rows a load or attachProjector gives, as the worker takes them:
 *  each a whole number of at least 1 (the engine checks them against the projector).
 *  @param {{image_min_tokens?: number | null, image_max_tokens?: number | null}} limits
 *  @returns {{image_min_tokens?: number, image_max_tokens?: number}} */
function imageTokenLimits(limits) {
  /** @type {{image_min_tokens?: number, image_max_tokens?: number}} */
  const out = {};
  for (const [name, value] of Object.entries(limits)) {
    if (value === undefined || value === null) continue;
    if (!Number.isSafeInteger(value) || value < 1)
      throw badRequest(`${name} must be a whole number of at least 1`);
    out[/** @type {'image_min_tokens' | 'image_max_tokens'} */ (name)] = value;
  }
  return out;
}

/** A projector's source as the worker takes it: a Blob, or an absolute URL.
 *  @param {import('./inferno.js').ProjectorSource} source @returns {Promise<Blob | string>} */
async function projectorSource(source) {
  if (source instanceof Blob) return source;
  if (typeof source === 'string' || source instanceof URL)
    return new URL(source, globalThis.document?.baseURI ?? self.location.href).href;
  if (source && typeof source === 'object' && 'opfs' in source && typeof source.opfs === 'string') {
    const file = await storage.openStoredProjector(source.opfs).catch(() => null);
    if (file) return file;
    throw new InfernoError({
      name: 'StorageError',
      kind: 'not_stored',
      message: `no vision projector is kept beside ${source.opfs} in this browser`,
    });
  }
  throw badRequest('mmproj needs a File, a Blob, a URL or {opfs: model name}');
}

/** The files of a chat's picture URLs (data:, blob:, http(s):), fetched from this page.
 *  @param {string[]} urls @returns {Promise<Blob[]>} */
function fetchPictures(urls) {
  return Promise.all(
    urls.map(async (url, i) => {
      const where = url.startsWith('data:') ? `picture ${i + 1} (a data: URL)` : url;
      let response;
      try {
        response = await fetch(new URL(url, globalThis.document?.baseURI ?? self.location.href));
      } catch (error) {
        throw new InfernoError({
          name: 'NetworkError',
          kind: 'fetch_failed',
          message: `could not fetch ${where}: ${error.message}`,
        });
      }
      if (!response.ok)
        throw new InfernoError({
          name: 'NetworkError',
          kind: 'fetch_failed',
          message: `${where} answered ${response.status} ${response.statusText}`,
        });
      return response.blob();
    }),
  );
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

// The declarations (inferno.d.ts) describe this file: `tsc -p www` checks each export against
// its declared type here (inside this file, './inferno.js' names the declarations).
/** @satisfies {[typeof import('./inferno.js').Inferno, typeof import('./inferno.js').MessageBuilder, typeof import('./inferno.js').InfernoError]} */
([Inferno, MessageBuilder, InfernoError]);
