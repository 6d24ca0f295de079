// @ts-check
// bench-wllama.html: the peer side of the browser benchmark — llama.cpp compiled to wasm, through
// @wllama/wllama (v3: llama-server's server-context inside its own Web Worker). On the CPU
// (n_gpu_layers: 0), `threads` threads (1: no pthread pool); with device=gpu every layer is
// offered to llama.cpp's WebGPU backend (n_gpu_layers: 999), which needs the adapter's
// `shader-f16` and otherwise runs everything on the CPU without saying so: the result's
// `gpu_offload` records whether the adapter had it. scripts/bench.mjs copies the
// package's esm/index.js, esm/wasm/wllama.wasm and package.json to www/vendor/wllama/
// (git-ignored).
//
// The prompt. wllama v3 has no token-level calls any more (no tokenize/decode/sampling API), and
// its completion request only takes text: its glue converts the JSON prompt to a std::string, so
// an array of token ids aborts the request. So both sides get the same fixed English word
// sequence ("the of and to in ...", promptText in bench-common.js), sized by sizePrompt: here
// with untimed one-token requests until llama.cpp's own prompt_n (BOS included) is exactly pp,
// and checked again on the timed run. bench-worker.js sizes the same text with Inferno's
// tokenizer and feeds Inferno those ids; scripts/bench.mjs checks both used the same word count.
//
// The times are llama.cpp's own, from the response's `timings` (ggml_time_us, i.e.
// performance.now() inside the wasm), for a request of tg + 1 tokens, greedy, ignore_eos,
// cache_prompt: false:
//   prompt_ms     the pp-token batch from an empty cache + sampling the first token — the span
//                 bench-worker.js calls prefill;
//   predicted_ms  from that first token to the last: tg single-token evaluations, each followed
//                 by sampling — the span bench-worker.js calls decode.
// So prefill_tok_s = pp / prompt_ms and decode_tok_s = (predicted_n - 1) / predicted_ms (which
// is also llama-server's own predicted_per_second).

import {
  embeddingTexts,
  errorMessage,
  publish,
  readParams,
  showParams,
  showStatus,
  sizePrompt,
  tidy,
  wasmUsesSimd,
} from './bench-common.js';

const VENDOR = new URL('../vendor/wllama/', import.meta.url);

async function run(params) {
  const { model, pp, tg, threads, ctx, warmup, device, embed } = params;
  const onGpu = device === 'gpu';
  let Wllama;
  try {
    ({ Wllama } = await import(new URL('index.js', VENDOR).href));
  } catch (error) {
    throw new Error(
      `cannot load www/vendor/wllama/index.js (scripts/bench.mjs copies it there): ${errorMessage(error)}`,
    );
  }
  const wasmUrl = new URL('wllama.wasm', VENDOR).href;
  if (params.mmproj) return visionRun(Wllama, wasmUrl, params);
  const wllama = new Wllama({ default: wasmUrl }, { suppressNativeLog: true });

  showStatus('downloading the model');
  const loadStarted = performance.now();
  const response = await fetch(model);
  if (!response.ok) throw new Error(`GET ${model}: HTTP ${response.status}`);
  const blob = await response.blob();
  showStatus('loading the model');
  const nGpuLayers = onGpu ? 999 : 0;
  // embed=N: llama-server's embeddings route, mean pooling as Inferno's side uses.
  const embedding = embed > 0 ? { embeddings: true, pooling_type: 'mean' } : { n_parallel: 1 };
  await wllama.loadModel([blob], { n_ctx: ctx, n_threads: threads, n_gpu_layers: nGpuLayers, ...embedding });
  const adapter = onGpu ? await navigator.gpu?.requestAdapter() : null;
  const load_ms = performance.now() - loadStarted;

  try {
    const info = wllama.getLoadedContextInfo();
    if (embed > 0) {
      return {
        ...(await runFacts(Wllama, wllama, model)),
        ...(await embeddingRun(wllama, embed, warmup)),
        load_ms,
      };
    }
    showStatus('calibrating the prompt');
    const prompt = await sizePrompt(async (text) => (await complete(wllama, text, 1)).prompt_n, pp, 'wllama');
    for (let i = 0; i < warmup; i++) {
      showStatus(`warm-up run ${i + 1} of ${warmup}`);
      await timeRun(wllama, prompt.text, pp, tg);
    }
    showStatus('timed run');
    const timed = await timeRun(wllama, prompt.text, pp, tg);
    return {
      ...(await runFacts(Wllama, wllama, model)),
      vocab_size: info.n_vocab,
      pp,
      tg,
      prompt: `${prompt.words} English words = ${pp} tokens${wllama.mustAddBosToken() ? ' with BOS' : ''}`,
      prompt_words: prompt.words,
      ctx: info.n_ctx,
      warmup,
      multithread: wllama.isMultithread(),
      simd: await wasmSimd(wasmUrl),
      cross_origin_isolated: self.crossOriginIsolated,
      load_ms,
      prefill_ms: timed.prompt_ms,
      prefill_tok_s: (pp * 1000) / timed.prompt_ms,
      decode_ms: timed.predicted_ms,
      decode_tok_s: ((timed.predicted_n - 1) * 1000) / timed.predicted_ms,
      wall_ms: timed.wall_ms,
      output: timed.content,
      device: onGpu ? 'gpu' : 'cpu',
      // llama.cpp's WebGPU backend offloads only where the adapter has shader-f16.
      gpu_offload: onGpu ? Boolean(wllama.isSupportWebGPU() && adapter?.features.has('shader-f16')) : null,
    };
  } finally {
    await wllama.exit();
  }
}

/** The text both chat requests of a vision run ask, the picture before it in the second. */
const VISION_QUESTION = 'What is in this picture?';

/** mmproj=URL&image=URL: the model loaded with its projector (mtmd), then the time llama.cpp
 *  takes to turn the picture's file into its embeddings, from a chat request with the picture
 *  after `warmup` untimed ones. llama-server encodes a picture (mtmd_batch_encode) without
 *  logging the time, so it is what the picture adds to the prompt's time (llama-server's
 *  prompt_ms: the same question asked with and without it), less the language model's
 *  evaluation of the picture's rows, which mtmd does log ("image decoded (batch i/n) in N ms").
 *  What is left is decoding the file (stb_image), resizing, normalizing and encoding. */
async function visionRun(Wllama, wasmUrl, { model, mmproj, image, threads, ctx, warmup }) {
  /** The times mtmd logged for the language model's evaluation of picture rows. */
  const evaluated = [];
  const note = (...args) => {
    const line = args.map((a) => (typeof a === 'object' ? JSON.stringify(a) : String(a))).join(' ');
    const match = /image decoded \(batch \d+\/\d+\) in (\d+) ms/.exec(line);
    if (match) evaluated.push(Number(match[1]));
  };
  const logger = { debug: note, log: note, info: note, warn: note, error: (...a) => console.error(...a) };
  const wllama = new Wllama({ default: wasmUrl }, { suppressNativeLog: false, logger });
  const fetchBlob = async (url) => {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`GET ${url}: HTTP ${response.status}`);
    return response.blob();
  };
  showStatus('downloading the model and its projector');
  const loadStarted = performance.now();
  const [modelBlob, projector, picture] = await Promise.all([model, mmproj, image].map(fetchBlob));
  showStatus('loading the model and its projector');
  await wllama.loadModel([modelBlob, projector], {
    n_ctx: ctx,
    n_threads: threads,
    n_gpu_layers: 0,
    n_parallel: 1,
  });
  const load_ms = performance.now() - loadStarted;
  try {
    if (!wllama.supportInputModality('image')) throw new Error('wllama loaded no vision projector');
    const data = await picture.arrayBuffer();
    const ask = async (withPicture) => {
      const content = withPicture
        ? [
            { type: 'image', data },
            { type: 'text', text: VISION_QUESTION },
          ]
        : VISION_QUESTION;
      const response = await wllama.createChatCompletion({
        messages: [{ role: 'user', content }],
        max_tokens: 1,
        temperature: 0,
        cache_prompt: false,
        stream: false,
      });
      if (!response.timings) throw new Error('wllama returned no timings');
      return response;
    };
    for (let i = 0; i < warmup; i++) {
      showStatus(`warm-up run ${i + 1} of ${warmup}`);
      await ask(true);
    }
    showStatus('timed run');
    evaluated.length = 0;
    const withPicture = await ask(true);
    if (evaluated.length === 0)
      throw new Error('mtmd logged no evaluation of the picture rows (is its log line still there?)');
    const picture_rows_ms = evaluated.reduce((sum, ms) => sum + ms, 0);
    const textOnly = await ask(false);
    const picture_prompt_ms = withPicture.timings.prompt_ms - textOnly.timings.prompt_ms;
    return {
      ...(await runFacts(Wllama, wllama, model)),
      simd: await wasmSimd(wasmUrl),
      warmup,
      load_ms,
      projector_bytes: projector.size,
      prompt_tokens_with_picture: withPicture.timings.prompt_n,
      prompt_tokens_without_picture: textOnly.timings.prompt_n,
      image_ms: picture_prompt_ms - picture_rows_ms,
      picture_rows_ms,
      prompt_with_picture_ms: withPicture.timings.prompt_ms,
      prompt_without_picture_ms: textOnly.timings.prompt_ms,
    };
  } finally {
    await wllama.exit();
  }
}

/** embed=N: the texts of embeddingTexts(N), one createEmbedding request each, timed around
 *  them all in this page (wllama's worker does the work), after `warmup` untimed rounds.
 *  One request per text because wllama 3.8.1 answers an array `input` of two or more texts
 *  with one embedding (and with 32 texts did not answer in 120 s). */
async function embeddingRun(wllama, n, warmup) {
  const texts = embeddingTexts(n);
  const embedAll = async () => {
    const responses = [];
    for (const input of texts) responses.push(await wllama.createEmbedding({ input }));
    return responses;
  };
  for (let i = 0; i < warmup; i++) {
    showStatus(`warm-up run ${i + 1} of ${warmup}`);
    await embedAll();
  }
  showStatus('timed run');
  const started = performance.now();
  const responses = await embedAll();
  const ms = performance.now() - started;
  if (!responses.every((r) => r.data?.length === 1))
    throw new Error('wllama returned no embedding for a text');
  return {
    warmup,
    embed_texts: n,
    embed_tokens: responses.reduce((sum, r) => sum + (r.usage?.prompt_tokens ?? 0), 0),
    embed_ms: ms,
    embed_per_s: (n * 1000) / ms,
    embed_pooling: 'mean',
    embed_vector0: Array.from(responses[0].data[0].embedding),
  };
}

/** Greedy completion of `maxTokens` tokens from an empty cache; returns llama.cpp's timings. */
async function complete(wllama, prompt, maxTokens) {
  const started = performance.now();
  const response = await wllama.createCompletion({
    prompt,
    max_tokens: maxTokens,
    temperature: 0,
    ignore_eos: true,
    cache_prompt: false,
    stream: false,
  });
  const wall_ms = performance.now() - started;
  if (!response.timings) throw new Error('wllama returned no timings');
  return { ...response.timings, content: response.choices?.[0]?.text ?? null, wall_ms };
}

async function timeRun(wllama, prompt, pp, tg) {
  const t = await complete(wllama, prompt, tg + 1);
  if (t.prompt_n !== pp || (t.cache_n ?? 0) !== 0) {
    throw new Error(
      `wllama evaluated ${t.prompt_n} prompt tokens (${t.cache_n} cached), expected ${pp} fresh`,
    );
  }
  if (t.predicted_n !== tg + 1)
    throw new Error(`wllama predicted ${t.predicted_n} tokens, expected ${tg + 1}`);
  return t;
}

/** What every result says of the engine that produced it. */
async function runFacts(Wllama, wllama, model) {
  return {
    engine: 'wllama',
    version: await wllamaVersion(),
    llama_cpp: Wllama.getLibllamaVersion(),
    runner: "page + wllama's own Web Worker",
    model,
    architecture: wllama.getLoadedContextInfo().metadata?.['general.architecture'],
    threads: wllama.getNumThreads(),
  };
}

/** Whether wllama's wasm binary uses SIMD128. */
async function wasmSimd(wasmUrl) {
  return wasmUsesSimd(new Uint8Array(await (await fetch(wasmUrl)).arrayBuffer()));
}

/** The package version, from its package.json (copied next to the vendored files). */
async function wllamaVersion() {
  try {
    return (await (await fetch(new URL('package.json', VENDOR))).json()).version ?? null;
  } catch {
    return null;
  }
}

async function main() {
  let params;
  try {
    params = readParams();
    showParams(params);
    publish(tidy(await run(params)));
  } catch (error) {
    publish({ error: errorMessage(error) });
  }
}

main();
