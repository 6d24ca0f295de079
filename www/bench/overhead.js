// @ts-check
// The per-token cost outside the engine's forward pass, early and late in a long answer
// (scripts/answer-overhead.mjs runs this page headless and prints its result). Over a window
// of 50 token chunks: the time from the chunk before the window to its last, less the steps'
// own `ms` (the engine running the previous token and choosing this one), per token (sums,
// not per-chunk differences, since two chunks may reach the caller together). What is left is
// the worker's
// pump, the JS/wasm boundary, reading the answer (stop strings, the reply's deltas), the
// message to the page and the client's chunk. It must not grow with the answer: steps 1-50 and
// the last 50 should cost the same.

import { Inferno } from '../lib/inferno.js';

const params = new URLSearchParams(location.search);
const tokens = Number(params.get('tokens') ?? 1000);
/** Greedy decoding of a small model loops rather than ending: a long answer either way. */
const answers = [
  {
    name: 'plain chat (SmolLM2)',
    model: params.get('model') ?? '../models/SmolLM2-135M-Instruct.Q4_1.gguf',
    request: { messages: [{ role: 'user', content: 'Write a very long story about a cat.' }] },
  },
  {
    // A reasoning model's answer is read as a message (its reasoning apart) at every token.
    name: 'structured: reasoning (Qwen3 micro)',
    model: params.get('thinking') ?? '../models/qwen3-micro-q4_0.gguf',
    request: { messages: [{ role: 'user', content: 'Think about a cat.' }], enable_thinking: true },
  },
];

async function measure({ name, model, request }) {
  const engine = await Inferno.load(model, { threads: 1 });
  try {
    /** Each token chunk's arrival time and engine time. */
    const rows = [];
    // A short answer first, so that the measured one meets warm code (JIT, caches) from
    // its first step.
    await engine.chat.completions.create({ ...request, temperature: 0, max_tokens: 64 });
    const stream = await engine.chat.completions.create({
      ...request,
      temperature: 0,
      max_tokens: tokens,
      stream: true,
    });
    for await (const chunk of stream) {
      const step = chunk.inferno?.step;
      if (step) rows.push({ at: performance.now(), ms: step.ms });
    }
    /** Per token of rows[from + 1 ..= to]: [outside the engine, in it]. */
    const window = (from, to) => {
      const inside = rows.slice(from + 1, to + 1).reduce((sum, r) => sum + r.ms, 0);
      return [(rows[to].at - rows[from].at - inside) / (to - from), inside / (to - from)];
    };
    const last = rows.length - 1;
    const [earlyOutsideMs, earlyEngineMs] = window(0, Math.min(50, last));
    const [lateOutsideMs, lateEngineMs] = window(Math.max(0, last - 50), last);
    return { name, steps: rows.length, earlyOutsideMs, lateOutsideMs, earlyEngineMs, lateEngineMs };
  } finally {
    engine.terminate();
  }
}

const out = /** @type {HTMLElement} */ (document.getElementById('out'));
try {
  const results = [];
  for (const answer of answers) results.push(await measure(answer));
  out.textContent = results
    .map(
      (r) =>
        `${r.name}: ${r.steps} steps; outside the engine ${r.earlyOutsideMs.toFixed(3)} ms (steps 1-50) vs ` +
        `${r.lateOutsideMs.toFixed(3)} ms (last 50); engine ${r.earlyEngineMs.toFixed(2)} vs ${r.lateEngineMs.toFixed(2)} ms`,
    )
    .join('\n');
  /** @type {any} */ (window).__result = { results };
} catch (error) {
  out.textContent = String(error?.stack ?? error);
  /** @type {any} */ (window).__result = { error: String(error?.message ?? error) };
}
