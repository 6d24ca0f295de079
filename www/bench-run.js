// What the benchmark workers share (bench-worker.js, bench-ab-worker.js): reading and
// streaming a model, and one timed prefill + decode run (what each clock covers: see
// bench-worker.js's header).

import { errorMessage } from './bench-common.js';

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

/** One prefill + decode from an empty cache; see the header for what each clock covers. On the
 *  GPU each call's work is awaited before the next (on the CPU there is nothing to await). */
export async function timeRun(engine, tokens, tg, ctx, grammar = undefined) {
  engine.set_sampling({ temperature: 0 });
  if (grammar) engine.set_grammar(grammar);
  engine.reset();
  const started = performance.now();
  const prepared = engine.prepare_tokens(tokens, ctx);
  await engine.pending?.();
  const texts = [await step(engine)];
  const prefilled = performance.now();
  for (let i = 0; i < tg; i++) texts.push(await step(engine));
  const finished = performance.now();
  if (prepared.evaluated !== tokens.length) {
    throw new Error(
      `prefill evaluated ${prepared.evaluated} tokens, expected ${tokens.length} (cache not empty?)`,
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
