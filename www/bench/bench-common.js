// @ts-check
// What the two benchmark pages (bench.html for Inferno, bench-wllama.html for llama.cpp's wasm
// build through @wllama/wllama) share: the URL parameters, the prompt text, and how a result or
// an error is published (window.__result, for scripts/bench.mjs) and shown.
//
// Both pages measure the same thing, in the same units:
//   prefill  the prompt's pp tokens evaluated as one batch from an empty KV cache, then the first
//            token sampled from the last position's logits;
//   decode   tg single-token steps, each evaluating the previously sampled token and sampling
//            the next one (greedy).
// prefill_tok_s = pp / prefill time, decode_tok_s = tg / decode time.
//
// The prompt is the same text on both sides: promptText(words), a fixed English word sequence,
// with the word count found by sizePrompt() so that the text is exactly pp tokens, BOS included.
// Each side counts with its own tokenizer (Inferno: WebEngine.tokenize; wllama: llama.cpp's
// prompt_n), from the same starting guess, so with equal tokenizers both pick the same text and
// evaluate the same ids. Every result carries `prompt_words`; scripts/bench.mjs fails a model
// whose two sides used different texts.
/** Upper bounds of the benchmark settings: a page link cannot ask for unbounded work. */
export const PARAM_LIMITS = {
  pp: 4096,
  tg: 4096,
  depth: 16384,
  threads: 64,
  ctx: 32768,
  warmup: 10,
  embed: 256,
};

/** Benchmark settings from the page URL: ?model=URL&pp=64&tg=32&threads=1[&depth=0][&ctx=N][&warmup=1]
 *  [&relaxed=0][&probe=0][&schema=JSON][&embed=N].
 *  The model must be on this page's own origin (a link cannot make the page fetch another
 *  site), and every number is bounded by PARAM_LIMITS. */
export function readParams(search = location.search, base = location.href) {
  const query = new URLSearchParams(search);
  /** A file parameter as a URL on this page's own origin, or null where it is absent. */
  const sameOrigin = (name) => {
    const raw = query.get(name);
    if (!raw) return null;
    let url;
    try {
      url = new URL(raw, base);
    } catch {
      throw new Error(`${name} "${raw}" is not a URL`);
    }
    if (url.origin !== new URL(base).origin) {
      throw new Error(
        `${name} must be served by this page's origin (${new URL(base).origin}), not ${url.origin}`,
      );
    }
    return url.href;
  };
  const model = sameOrigin('model');
  if (!model) throw new Error('missing ?model=URL (a .gguf file served with Content-Length)');
  // mmproj=URL&image=URL: instead of prefill and decode, the picture's embeddings (the
  // projector's encoder) are timed.
  const mmproj = sameOrigin('mmproj');
  const image = sameOrigin('image');
  if (Boolean(mmproj) !== Boolean(image)) throw new Error('mmproj and image go together');
  const integer = (name, fallback, min) => {
    const raw = query.get(name);
    const max = PARAM_LIMITS[name];
    if (raw === null || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new Error(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
    }
    return value;
  };
  const pp = integer('pp', 64, 1);
  const tg = integer('tg', 32, 1);
  const threads = integer('threads', 1, 1);
  // depth=D: D tokens already in the cache before the timed prefill and decode, as
  // `llama-bench -d D` measures (Inferno's page only).
  const depth = integer('depth', 0, 0);
  // The same KV-cache size on both sides: room for depth + pp + tg + the pending token, rounded
  // up to a multiple of 256 (256 for the default pp=64, tg=32).
  // embed=N (below) needs room for several texts at once on wllama's side (its server packs
  // them into one batch): 2048.
  const embedding = query.get('embed') !== null && query.get('embed') !== '0';
  const needed = embedding ? 2048 : depth + pp + tg + 1;
  const ctx = integer('ctx', Math.ceil(needed / 256) * 256, needed);
  const warmup = integer('warmup', 1, 0);
  const relaxed = query.get('relaxed') !== '0'; // relaxed=0: Inferno's plain SIMD128 build
  const probe = query.get('probe') !== '0'; // probe=0: no memory read probe after the runs
  const device = query.get('device') ?? 'cpu';
  if (!['cpu', 'gpu'].includes(device)) throw new Error(`device must be cpu or gpu, got "${device}"`);
  // precision=exact: attention's sums in F16 as llama.cpp's CPU (Inferno's page only).
  const precision = query.get('precision') ?? 'fast';
  if (!['fast', 'exact'].includes(precision))
    throw new Error(`precision must be fast or exact, got "${precision}"`);
  // cache_type_k, cache_type_v = f16 | q8_0 | f32: what Inferno's KV cache keeps keys and values
  // as (llama.cpp's -ctk/-ctv; Inferno's page only: compare with native llama-bench -ctk -ctv).
  const [cacheTypeK, cacheTypeV] = ['cache_type_k', 'cache_type_v'].map((name) => {
    const value = query.get(name) ?? 'f16';
    if (!['f16', 'q8_0', 'f32'].includes(value))
      throw new Error(`${name} must be f16, q8_0 or f32, got "${value}"`);
    return value;
  });
  // schema=JSON: Inferno's decode is timed a second time held to this JSON schema.
  const schema = query.get('schema') || null;
  if (schema !== null) {
    try {
      JSON.parse(schema);
    } catch {
      throw new Error('schema must be a JSON schema (JSON text)');
    }
  }
  // embed=N: instead of prefill and decode, N short texts embedded in one request (mean
  // pooling, unit length), as embeddingTexts(N) gives them.
  const embed = integer('embed', 0, 0);
  return {
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
  };
}

const EMBEDDING_SENTENCES = [
  'The cat sat on the warm windowsill all afternoon.',
  'Interest rates rose again this quarter.',
  'How do I reset my password?',
  'A quiet lake reflects the mountains at dawn.',
  'The recipe needs two cups of flour and an egg.',
  'Our train was delayed by forty minutes.',
  'Photosynthesis turns light into chemical energy.',
  'She plays the violin in a small orchestra.',
  'Where is the nearest pharmacy?',
  'The museum opens at nine on weekdays.',
];

/** The embedding benchmark's texts: `n` short sentences (6 to 9 words), the fixed ten above in
 *  turn, each numbered so that no two are the same. */
export function embeddingTexts(n) {
  return Array.from(
    { length: n },
    (_, i) => `${i + 1}. ${EMBEDDING_SENTENCES[i % EMBEDDING_SENTENCES.length]}`,
  );
}

const PROMPT_WORDS = 'the of and to in is that for it was on with as be at by this from or one'.split(' ');

/** The benchmark prompt: the first `words` words of a fixed English sequence (every word one
 *  token in the benchmark models' vocabularies). */
export function promptText(words) {
  return Array.from({ length: words }, (_, i) => PROMPT_WORDS[i % PROMPT_WORDS.length]).join(' ');
}

/**
 * The prompt of exactly pp tokens: tries promptText(pp) and corrects the word count by the
 * difference until `countTokens(text)` (sync or async; BOS included) is pp. Both pages call this
 * with the same starting guess, so the same tokenization gives the same text.
 */
export async function sizePrompt(countTokens, pp, engineName) {
  let words = pp;
  const tried = [];
  for (let attempt = 0; attempt < 5; attempt++) {
    const count = await countTokens(promptText(words));
    if (count === pp) return { text: promptText(words), words };
    tried.push(`${words} words -> ${count} tokens`);
    words = Math.max(1, words + pp - count);
  }
  throw new Error(
    `${engineName}: could not make a text prompt of exactly ${pp} tokens (${tried.join(', ')})`,
  );
}

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Rounds every number in a result to 2 decimals, for a readable JSON. */
export function tidy(result) {
  return JSON.parse(
    JSON.stringify(result, (_, v) =>
      typeof v === 'number' && !Number.isInteger(v) ? Math.round(v * 100) / 100 : v,
    ),
  );
}

const $ = (id) => document.getElementById(id);

export function showStatus(text) {
  $('status').textContent = text;
}

export function showParams(params) {
  $('params').textContent =
    `model ${params.model}\n` +
    (params.mmproj
      ? `projector ${params.mmproj}\npicture ${params.image}`
      : params.embed
        ? `embed ${params.embed} texts`
        : `pp ${params.pp} · tg ${params.tg}${params.depth ? ` · depth ${params.depth}` : ''}`) +
    ` · threads ${params.threads} · ctx ${params.ctx} · warm-up runs ${params.warmup}`;
}

/** A benchmark's result: the JSON its worker posts, read field by field by the summaries and by
 *  scripts/bench.mjs. @typedef {Record<string, any>} BenchResult */

/** Runs a benchmark worker (the module Web Worker at `url`) on `params`: shows its progress,
 *  then publishes its result, made final by `finish`, with the line `summarize` makes of it,
 *  or its error.
 *  @param {URL} url
 *  @param {ReturnType<typeof readParams>} params
 *  @param {{finish?: (result: BenchResult) => BenchResult, summarize?: (result: BenchResult) => string}} [options] */
export function runWorker(url, params, { finish = (result) => result, summarize } = {}) {
  showParams(params);
  const worker = new Worker(url, { type: 'module' });
  worker.onmessage = ({ data }) => {
    if (data.type?.startsWith('inferno_pool_helper_')) return; // The engine's own (pool_helpers.js).
    if (data.type === 'progress') {
      showStatus(data.text);
      return;
    }
    worker.terminate();
    if (data.type === 'result') publish(tidy(finish(data.result)), summarize);
    else publish({ error: data.error });
  };
  worker.onerror = (event) => {
    event.preventDefault();
    worker.terminate();
    publish({ error: `worker failed: ${event.message || 'could not start (are the builds there?)'}` });
  };
  worker.postMessage({ params });
}

/** The one-line summary of a benchmark result (bench.html's). */
function runSummary(result) {
  if (result.image_ms !== undefined) {
    return `load ${result.load_ms.toFixed(0)} ms · the picture's ${result.image_tokens} embeddings in ${result.image_ms.toFixed(0)} ms`;
  }
  if (result.embed_texts) {
    return `load ${result.load_ms.toFixed(0)} ms · ${result.embed_texts} texts (${result.embed_tokens} tokens) in ${result.embed_ms.toFixed(0)} ms: ${result.embed_per_s.toFixed(1)} texts/s`;
  }
  return [
    result.read_ms !== undefined ? `read ${result.read_ms.toFixed(0)} ms` : null,
    `load ${result.load_ms.toFixed(0)} ms${result.finish_ms !== undefined ? ` (last ${result.finish_ms.toFixed(0)} ms after the last byte)` : ''}`,
    `prefill ${result.prefill_tok_s.toFixed(1)} tok/s`,
    `decode ${result.decode_tok_s.toFixed(1)} tok/s`,
    result.memory_bytes !== undefined
      ? `wasm memory ${(result.memory_bytes / 2 ** 20).toFixed(0)} MiB`
      : null,
  ]
    .filter(Boolean)
    .join(' · ');
}

/** Publishes the final result (or {error}) for the bench script and shows it, with the line
 *  `summarize` makes of a result. */
export function publish(result, summarize = runSummary) {
  window.__result = result;
  const failed = 'error' in result;
  $('status').textContent = failed ? 'failed' : 'done';
  const summary = $('summary');
  summary.textContent = failed ? result.error : summarize(result);
  summary.className = failed ? 'error' : 'ok';
  $('result').textContent = JSON.stringify(result, null, 2);
}

export function errorMessage(error) {
  if (error instanceof Error) return `${error.name === 'Error' ? '' : `${error.name}: `}${error.message}`;
  return String(error);
}

/**
 * Whether a wasm binary declares SIMD (v128) locals in any function: a quick, honest check that a
 * third-party build really uses SIMD128, by reading the local declarations of the code section.
 */
export function wasmUsesSimd(bytes) {
  let p = 8;
  const leb = () => {
    let result = 0;
    let shift = 0;
    let byte;
    do {
      byte = bytes[p++];
      result += (byte & 0x7f) * 2 ** shift;
      shift += 7;
    } while (byte & 0x80);
    return result;
  };
  while (p < bytes.length) {
    const id = bytes[p++];
    const size = leb();
    const end = p + size;
    if (id === 10) {
      const count = leb();
      for (let f = 0; f < count; f++) {
        const bodySize = leb();
        const bodyEnd = p + bodySize;
        const groups = leb();
        for (let g = 0; g < groups; g++) {
          leb();
          if (bytes[p++] === 0x7b) return true;
        }
        p = bodyEnd;
      }
      return false;
    }
    p = end;
  }
  return false;
}
