// @ts-check
// Module Web Worker for bench.html: loads Inferno's wasm engine, streams the model into it and
// times one prefill + decode run (after `warmup` untimed runs of the same work).
//
// Protocol: receives {params} once; posts {type: 'progress', text} while working, then
// {type: 'result', result} or {type: 'error', error}.
//
// The prompt is the text bench-wllama.html gives llama.cpp (promptText/sizePrompt in
// bench-common.js), tokenized here by WebEngine.tokenize with llama.cpp's defaults (special
// tokens parsed, BOS when the model asks for it), before the clock starts — llama-server also
// tokenizes before its prompt_ms starts. The ids must number exactly pp, or the run fails.
//
// Timing, exactly (performance.now() around the wasm calls, in this worker):
//   prefill = prepare_tokens(pp ids)  — the pp tokens as one batch from an empty cache —
//             + the first step(), which only samples from the logits prepare left behind;
//   decode  = the next tg step() calls; each evaluates the token sampled by the call before
//             (one single-token forward pass) and samples the next: tg evaluated tokens.
// This is what llama.cpp's server loop (the wllama side) times as prompt_ms and predicted_ms
// when asked for tg + 1 tokens.
//
// depth=D first fills the cache with D tokens of the same word sequence (untimed, reset before
// each run); the timed prefill then evaluates the pp ids after them and decode attends to all,
// as `llama-bench -d D` measures.
//
// On the CPU it also measures the page's own memory read bandwidth, the physical limit of a
// decode step: a 256 MiB buffer read whole with the kernels' SIMD128 loads (ReadProbe, one
// warm-up pass, then the median of 5 timed passes), after the runs. Decode's weight bandwidth
// (the bytes of weights one step reads, every matrix once, times the decode rate) over it is
// the share of the limit decode reaches.
//
// device=gpu runs the model on the browser's GPU (WebGPU) and also measures the adapter's own
// memory bandwidth: a buffer of up to 256 MiB copied 8 times in one submission, timed around
// the wait for it (median of 3, after a warm-up); a copy reads and writes every byte, so the
// traffic is 2 × bytes × 8. Decode's weight bandwidth is the bytes of weights one step reads
// (every matrix once) times the decode rate; their ratio is the decode efficiency.

import { embeddingTexts, sizePrompt } from './bench-common.js';
import { depthTokens, progress, readOnly, serve, streamModel, timeRun } from './bench-run.js';
import { gpuAdapter, memory64Supported, resolveThreads } from '../lib/capabilities.js';
import { startEngine } from '../lib/engine-loader.js';
import { addPicture, attachBytes, decodePicture } from '../lib/worker-images.js';

serve(run);

/** This page's memory read bandwidth in GB/s, through the build's SIMD128 loads. */
function readBandwidth(wasm) {
  const bytes = 256 * 2 ** 20;
  const probe = new wasm.ReadProbe(bytes);
  try {
    probe.read(1);
    const times = [];
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      probe.read(1);
      times.push(performance.now() - started);
    }
    const ms = times.sort((a, b) => a - b)[2];
    return { read_bytes: bytes, read_gb_s: bytes / (ms * 1e6) };
  } finally {
    probe.free();
  }
}

/** The adapter's memory bandwidth in GB/s (bytes read and written per second). */
async function copyBandwidth(gpu) {
  const bytes = Math.min(256 * 2 ** 20, gpu.facts().max_buffer);
  const repeats = 8;
  await gpu.copy_test(bytes, 1);
  const times = [];
  for (let i = 0; i < 3; i++) {
    const started = performance.now();
    await gpu.copy_test(bytes, repeats);
    times.push(performance.now() - started);
  }
  const ms = times.sort((a, b) => a - b)[1];
  return { copy_bytes: bytes, copy_gb_s: (2 * bytes * repeats) / (ms * 1e6) };
}

/** embed=N: the N texts of embeddingTexts(N) in one engine call (mean pooling, unit length),
 *  after `warmup` untimed calls; the first vector comes back for bench.mjs to compare with
 *  wllama's. */
function embeddingRun(engine, n, warmup) {
  const texts = embeddingTexts(n);
  const options = { pooling: 'mean' };
  for (let i = 0; i < warmup; i++) {
    progress(`warm-up run ${i + 1} of ${warmup}`);
    engine.embed(texts, options);
  }
  progress('timed run');
  const started = performance.now();
  const result = engine.embed(texts, options);
  const ms = performance.now() - started;
  return {
    engine: 'inferno',
    runner: 'module Web Worker',
    warmup,
    embed_texts: n,
    embed_tokens: result.prompt_tokens,
    embed_ms: ms,
    embed_per_s: (n * 1000) / ms,
    embed_pooling: result.pooling,
    embed_vector0: Array.from(result.vectors[0]),
  };
}

/** mmproj=URL&image=URL: the projector attached to the model, the picture decoded by the browser
 *  (as the chat's worker decodes it), then the time of the call that gives its embeddings
 *  (addPicture: the engine's resize and normalization, the ViT, the projector, square by square), after `warmup`
 *  untimed calls; and how much the wasm memory grew for the projector and the encodings. Each call's picture differs from the others in one pixel, so that none is
 *  found among those already encoded (the engine keys them by content). */
async function visionRun(wasm, memory, engine, mmprojUrl, imageUrl, warmup) {
  progress('reading the projector');
  const response = await fetch(mmprojUrl);
  if (!response.ok) throw new Error(`GET ${mmprojUrl}: HTTP ${response.status}`);
  const projector = new Uint8Array(await response.arrayBuffer());
  const memoryBefore = memory.buffer.byteLength;
  const vision = attachBytes(engine, projector);
  const pictureResponse = await fetch(imageUrl);
  if (!pictureResponse.ok) throw new Error(`GET ${imageUrl}: HTTP ${pictureResponse.status}`);
  const picture = await pictureResponse.blob();
  const decodeStarted = performance.now();
  const { width, height, rgba } = await decodePicture(wasm, picture);
  const picture_decode_ms = performance.now() - decodeStarted;
  const encode = async (run) => {
    rgba[0] = (rgba[0] + 1) & 0xff;
    engine.clear_images();
    const started = performance.now();
    const rows = await addPicture(engine, { width, height, rgba });
    return { rows, ms: performance.now() - started, run };
  };
  for (let i = 0; i < warmup; i++) {
    progress(`warm-up run ${i + 1} of ${warmup}`);
    await encode(i);
  }
  // The phase line lets a profiler sample the timed encoding alone (scripts/profile.mjs).
  progress('timed run: image');
  const timed = await encode(warmup);
  engine.clear_images();
  return {
    engine: 'inferno',
    runner: 'module Web Worker',
    warmup,
    projector: vision.projector,
    projector_bytes: projector.length,
    picture: `${width} x ${height}`,
    picture_decode_ms,
    image_tokens: timed.rows,
    image_ms: timed.ms,
    images_encoded: engine.images_encoded(),
    // wasm memory never shrinks: what the projector's weights and one encoding took at most.
    memory_growth_bytes: memory.buffer.byteLength - memoryBefore,
    memory_bytes: memory.buffer.byteLength,
  };
}

async function run({
  model,
  mmproj,
  image,
  pp,
  tg,
  depth,
  threads,
  ctx,
  warmup,
  relaxed,
  probe,
  device,
  precision,
  cacheTypeK,
  cacheTypeV,
  schema,
  embed,
}) {
  const resolved = resolveThreads(threads);
  if (resolved.threads !== threads)
    throw new Error(`Inferno cannot run ${threads} threads here: ${resolved.reason}`);
  const initStarted = performance.now();
  let engineStarted = await startEngine(threads, { relaxed });
  const init_ms = performance.now() - initStarted;

  // How fast this page can read the file at all: loading is measured against it.
  progress('reading the model once, to time the bytes alone');
  const readStarted = performance.now();
  const fileBytes = await readOnly(model);
  const read_ms = performance.now() - readStarted;

  // A file too large for wasm32 runs on the 64-bit-memory build, as in the chat page (nothing
  // has been loaded into the first engine yet, so its memory is still small).
  const memory = engineStarted.module.memory_for_model(fileBytes, relaxed !== false && memory64Supported());
  if (memory === 'memory64') engineStarted = await startEngine(threads, { memory64: true });
  const { module: wasm, exports, build: buildName } = engineStarted;
  const build = wasm.engine_info();

  progress('downloading the model');
  const loadStarted = performance.now();
  const { engine, finish_ms } = await streamModel(wasm, model, progress);
  const load_ms = performance.now() - loadStarted;
  try {
    engine.set_attention_precision(precision);
    engine.set_cache_types(cacheTypeK, cacheTypeV);
    let gpuFacts = null;
    let bandwidth = {};
    if (device === 'gpu') {
      progress('asking for the GPU');
      const gpu = await wasm.request_gpu();
      // The browser names the adapter; wgpu's web backend does not.
      gpuFacts = { ...gpu.facts(), name: (await gpuAdapter())?.name ?? '' };
      engine.use_gpu(gpu);
      engine.open_session(ctx);
      progress('measuring the GPU copy bandwidth');
      bandwidth = await copyBandwidth(gpu);
    }
    const info = engine.info();
    if (mmproj)
      return {
        ...(await visionRun(wasm, exports.memory, engine, mmproj, image, warmup)),
        model,
        architecture: info.architecture,
        threads: build.threads,
        build: buildName,
        load_ms,
      };
    if (embed > 0)
      return {
        ...embeddingRun(engine, embed, warmup),
        model,
        architecture: info.architecture,
        threads: build.threads,
        build: buildName,
        load_ms,
      };
    const prompt = await sizePrompt((text) => engine.tokenize(text).length, pp, 'Inferno');
    const tokens = engine.tokenize(prompt.text);
    if (tokens.length !== pp) {
      throw new Error(
        `Inferno tokenized the ${prompt.words}-word prompt to ${tokens.length} tokens, expected pp = ${pp}`,
      );
    }
    const depthIds = depthTokens(engine, depth);
    for (let i = 0; i < warmup; i++) {
      progress(`warm-up run ${i + 1} of ${warmup}`);
      await timeRun(engine, tokens, tg, ctx, undefined, depthIds);
    }
    const run = depth > 0 ? `timed run at depth ${depth}` : 'timed run';
    progress(run);
    // The phase lines let a profiler sample one phase alone (scripts/profile.mjs).
    const timed = await timeRun(engine, tokens, tg, ctx, undefined, depthIds, (phase) =>
      progress(`${run}: ${phase}`),
    );
    const decodeTokS = (tg * 1000) / timed.decode_ms;
    // The same decode held to a JSON schema (the grammar's mask computed, applied and advanced
    // each step), right after; its compile time (the vocabulary's trie the first time) apart.
    let grammarFacts = {};
    if (schema !== null) {
      progress('timed run with the JSON schema');
      const compileStarted = performance.now();
      engine.set_grammar({ type: 'json_schema', schema });
      const compile_ms = performance.now() - compileStarted;
      const held = await timeRun(engine, tokens, tg, ctx, { type: 'json_schema', schema }, depthIds);
      grammarFacts = {
        schema_compile_ms: compile_ms,
        schema_decode_ms: held.decode_ms,
        schema_decode_tok_s: (tg * 1000) / held.decode_ms,
        schema_output: held.output,
      };
    }
    const weightBytes = engine.decode_weight_bytes();
    // Read before the probe grows the memory.
    const memoryBytes = exports.memory.buffer.byteLength;
    if (device !== 'gpu' && probe) {
      progress('measuring the memory read bandwidth');
      bandwidth = readBandwidth(wasm);
    }
    return {
      engine: 'inferno',
      version: build.version,
      runner: 'module Web Worker',
      model,
      architecture: info.architecture,
      vocab_size: info.vocab_size,
      pp,
      tg,
      depth,
      prompt: `${prompt.words} English words = ${pp} tokens`,
      prompt_words: prompt.words,
      prompt_ids_head: Array.from(tokens.subarray(0, 8)),
      ctx: timed.context_size,
      warmup,
      threads: build.threads,
      build: buildName,
      simd: build.simd128,
      relaxed_simd: build.relaxed_simd,
      cross_origin_isolated: self.crossOriginIsolated,
      init_ms,
      read_ms,
      load_ms,
      finish_ms,
      file_bytes: fileBytes,
      memory_bytes: memoryBytes,
      cache_type_k: cacheTypeK,
      cache_type_v: cacheTypeV,
      cache_bytes: engine.cache_bytes(),
      prefill_ms: timed.prefill_ms,
      prefill_tok_s: (pp * 1000) / timed.prefill_ms,
      decode_ms: timed.decode_ms,
      decode_tok_s: decodeTokS,
      output: timed.output,
      device: engine.device(),
      gpu: gpuFacts,
      ...bandwidth,
      decode_weight_bytes: weightBytes,
      decode_weight_gb_s: (weightBytes * decodeTokS) / 1e9,
      ...grammarFacts,
    };
  } finally {
    engine.free();
  }
}
