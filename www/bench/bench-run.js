// @ts-check
// What the benchmark workers share (bench-worker.js, bench-ab-worker.js): reading and
// streaming a model, and one timed prefill + decode run (what each clock covers: see
// bench-worker.js's header).

import { errorMessage, promptText } from './bench-common.js';

/** Posts a progress line to the page. */
export const progress = (text) => postMessage({ type: 'progress', text });

/** Answers the page's one message, {params}, with {type: 'result', result: await run(params)}
 *  or {type: 'error', error}. */
export function serve(run) {
  self.onmessage = async ({ data }) => {
    try {
      postMessage({ type: 'result', result: await run(data.params) });
    } catch (error) {
      postMessage({ type: 'error', error: errorMessage(error) });
    }
  };
}

/** fetch + response.body reader, the bytes counted and dropped; returns the count. */
export async function readOnly(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`GET ${url}: HTTP ${response.status}`);
  const reader = response.body.getReader();
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return bytes;
    bytes += value.length;
  }
}

/** fetch + response.body reader, each chunk pushed straight into wasm memory; also returns how
 *  long the last step (validating the file and building the engine) took. */
/** @param {(text: string) => void} [progress] */
export async function streamModel(wasm, url, progress = () => {}) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`GET ${url}: HTTP ${response.status}`);
  const size = Number(response.headers.get('Content-Length'));
  if (!size) throw new Error(`GET ${url}: no Content-Length, the loader needs the size up front`);
  const loader = new wasm.ModelLoader(size);
  try {
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      loader.push(value);
    }
  } catch (error) {
    loader.free();
    throw error;
  }
  progress('validating the model');
  const finishStarted = performance.now();
  const engine = loader.finish();
  return { engine, finish_ms: performance.now() - finishStarted };
}

/** The `depth` ids that fill the cache before a run at that depth: the benchmark's word
 *  sequence, tokenized by `engine` and cut to length. */
export function depthTokens(engine, depth) {
  if (depth === 0) return new Uint32Array(0);
  const ids = engine.tokenize(promptText(depth + 16)).subarray(0, depth);
  if (ids.length !== depth) throw new Error(`the depth text made ${ids.length} tokens, expected ${depth}`);
  return ids;
}

/** One prefill + decode from an empty cache, or after the untimed `depth` tokens (the cache
 *  keeps them, and the timed prefill evaluates only `tokens`); see the header for what each
 *  clock covers. On the GPU each call's work is awaited before the next (on the CPU there is
 *  nothing to await). `onPhase('prefill' | 'decode')` is told as each timed phase starts.
 *  @param {(phase: 'prefill' | 'decode') => void} [onPhase] */
export async function timeRun(
  engine,
  tokens,
  tg,
  ctx,
  grammar = undefined,
  depth = new Uint32Array(0),
  onPhase = () => {},
) {
  engine.set_sampling({ temperature: 0 });
  if (grammar) engine.set_grammar(grammar);
  engine.reset();
  if (depth.length > 0) {
    engine.prepare_tokens(depth, ctx);
    await engine.pending?.();
  }
  const prompt = depth.length > 0 ? Uint32Array.from([...depth, ...tokens]) : tokens;
  onPhase('prefill');
  const started = performance.now();
  const prepared = engine.prepare_tokens(prompt, ctx);
  await engine.pending?.();
  const texts = [await step(engine)];
  const prefilled = performance.now();
  onPhase('decode');
  for (let i = 0; i < tg; i++) texts.push(await step(engine));
  const finished = performance.now();
  if (prepared.evaluated !== tokens.length) {
    throw new Error(
      `prefill evaluated ${prepared.evaluated} tokens, expected ${tokens.length} (cache not as left?)`,
    );
  }
  return {
    context_size: prepared.context_size,
    prefill_ms: prefilled - started,
    decode_ms: finished - prefilled,
    output: texts.join(''),
  };
}

/** One sampling step (after the forward pass it needs); returns its text. */
async function step(engine) {
  if (engine.advance?.()) await engine.pending();
  const out = engine.step(0, undefined);
  if (out.context_full) throw new Error('the context filled up during the benchmark; raise ctx');
  return out.text;
}
