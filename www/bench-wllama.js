// bench-wllama.html: the peer side of the browser benchmark — llama.cpp compiled to wasm, through
// @wllama/wllama (v3: llama-server's server-context inside its own Web Worker). CPU only
// (n_gpu_layers: 0), `threads` threads (1: no pthread pool). scripts/bench.mjs copies the
// package's esm/index.js, esm/wasm/wllama.wasm and package.json to www/vendor/wllama/
// (git-ignored).
//
// The prompt. wllama v3 has no token-level calls any more (no tokenize/decode/sampling API), and
// its completion request only takes text: its glue converts the JSON prompt to a std::string, so
// an array of token ids aborts the request. So this side gets a fixed English word sequence
// ("the of and to in ...", every word one token in these vocabularies), its length calibrated
// with untimed one-token requests until llama.cpp's own prompt_n (BOS included) is exactly pp,
// and checked again on the timed run. Inferno gets pp fixed ids (www/bench-common.js): the same
// number of tokens; which ids they are does not change the work of a dense model.
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

import { errorMessage, publish, readParams, showParams, showStatus, tidy, wasmUsesSimd } from './bench-common.js';

const VENDOR = new URL('./vendor/wllama/', import.meta.url);

async function run(params) {
  const { model, pp, tg, threads, ctx, warmup } = params;
  let Wllama;
  try {
    ({ Wllama } = await import(new URL('index.js', VENDOR).href));
  } catch (error) {
    throw new Error(`cannot load www/vendor/wllama/index.js (scripts/bench.mjs copies it there): ${errorMessage(error)}`);
  }
  const wasmUrl = new URL('wllama.wasm', VENDOR).href;
  const wllama = new Wllama({ default: wasmUrl }, { suppressNativeLog: true });

  showStatus('downloading the model');
  const loadStarted = performance.now();
  const response = await fetch(model);
  if (!response.ok) throw new Error(`GET ${model}: HTTP ${response.status}`);
  const blob = await response.blob();
  showStatus('loading the model');
  await wllama.loadModel([blob], { n_ctx: ctx, n_threads: threads, n_gpu_layers: 0, n_parallel: 1 });
  const load_ms = performance.now() - loadStarted;

  try {
    const info = wllama.getLoadedContextInfo();
    showStatus('calibrating the prompt');
    const prompt = await calibratePrompt(wllama, pp);
    for (let i = 0; i < warmup; i++) {
      showStatus(`warm-up run ${i + 1} of ${warmup}`);
      await timeRun(wllama, prompt, pp, tg);
    }
    showStatus('timed run');
    const timed = await timeRun(wllama, prompt, pp, tg);
    const simd = wasmUsesSimd(new Uint8Array(await (await fetch(wasmUrl)).arrayBuffer()));
    return {
      engine: 'wllama',
      version: await wllamaVersion(),
      llama_cpp: Wllama.getLibllamaVersion(),
      runner: 'page + wllama\'s own Web Worker',
      model,
      architecture: info.metadata?.['general.architecture'],
      vocab_size: info.n_vocab,
      pp,
      tg,
      prompt: `${prompt.split(' ').length} English words = ${pp} tokens${wllama.mustAddBosToken() ? ' with BOS' : ''}`,
      ctx: info.n_ctx,
      warmup,
      threads: wllama.getNumThreads(),
      multithread: wllama.isMultithread(),
      simd,
      cross_origin_isolated: self.crossOriginIsolated,
      load_ms,
      prefill_ms: timed.prompt_ms,
      prefill_tok_s: (pp * 1000) / timed.prompt_ms,
      decode_ms: timed.predicted_ms,
      decode_tok_s: ((timed.predicted_n - 1) * 1000) / timed.predicted_ms,
      wall_ms: timed.wall_ms,
    };
  } finally {
    await wllama.exit();
  }
}

const WORDS = 'the of and to in is that for it was on with as be at by this from or one'.split(' ');
const words = (n) => Array.from({ length: n }, (_, i) => WORDS[i % WORDS.length]).join(' ');

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
  return { ...response.timings, wall_ms };
}

/** The word sequence that llama.cpp tokenizes to exactly pp tokens (BOS included). */
async function calibratePrompt(wllama, pp) {
  let count = pp;
  for (let attempt = 0; attempt < 5; attempt++) {
    const { prompt_n } = await complete(wllama, words(count), 1);
    if (prompt_n === pp) return words(count);
    count = Math.max(1, count + pp - prompt_n);
  }
  throw new Error(`could not make a text prompt of exactly ${pp} tokens for this vocabulary`);
}

async function timeRun(wllama, prompt, pp, tg) {
  const t = await complete(wllama, prompt, tg + 1);
  if (t.prompt_n !== pp || (t.cache_n ?? 0) !== 0) {
    throw new Error(`wllama evaluated ${t.prompt_n} prompt tokens (${t.cache_n} cached), expected ${pp} fresh`);
  }
  if (t.predicted_n !== tg + 1) throw new Error(`wllama predicted ${t.predicted_n} tokens, expected ${tg + 1}`);
  return t;
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
