// @ts-check
// bench-ab.html: two builds of Inferno side by side (bench-ab-worker.js does the work; this page
// passes the URL parameters and publishes the result for scripts/ab.mjs).

import { errorMessage, median, publish, readParams, runWorker } from './bench-common.js';

/** Most pairs one page link may ask for. */
const MAX_PAIRS = 100;

/** The benchmark settings plus ?a=FOLDER&b=FOLDER (each holding pkg-* builds, on this page's
 *  origin) and ?pairs=N. */
function readAbParams() {
  const params = readParams();
  const query = new URLSearchParams(location.search);
  for (const side of ['a', 'b']) {
    const folder = query.get(side);
    if (!folder) throw new Error(`missing ?${side}=FOLDER (a folder holding pkg-* builds)`);
    const url = new URL(folder.endsWith('/') ? folder : `${folder}/`, location.href);
    if (url.origin !== location.origin)
      throw new Error(`${side} must be on this page's origin (${location.origin}), not ${url.origin}`);
    params[side] = url.href;
  }
  const pairs = Number(query.get('pairs') ?? 10);
  if (!Number.isInteger(pairs) || pairs < 1 || pairs > MAX_PAIRS)
    throw new Error(`pairs must be an integer from 1 to ${MAX_PAIRS}, got "${query.get('pairs')}"`);
  params.pairs = pairs;
  return params;
}

/** Medians of each side and of the per-pair ratios b / a, with the ratios' range. */
function summarize(result) {
  const summary = {};
  for (const measure of ['prefill_tok_s', 'decode_tok_s']) {
    const ratios = result.a[measure].map((a, i) => result.b[measure][i] / a);
    summary[measure] = {
      a: median(result.a[measure]),
      b: median(result.b[measure]),
      ratio: median(ratios),
      ratio_min: Math.min(...ratios),
      ratio_max: Math.max(...ratios),
    };
  }
  return { ...result, summary };
}

/** b / a for prefill and decode, as a line. */
function summaryLine({ summary }) {
  const line = (name, s) =>
    `${name} ${s.a.toFixed(1)} → ${s.b.toFixed(1)} tok/s (b/a ${s.ratio.toFixed(3)}, pairs ${s.ratio_min.toFixed(2)}-${s.ratio_max.toFixed(2)})`;
  return `${line('prefill', summary.prefill_tok_s)} · ${line('decode', summary.decode_tok_s)}`;
}

function main() {
  let params;
  try {
    params = readAbParams();
  } catch (error) {
    publish({ error: errorMessage(error) });
    return;
  }
  runWorker(new URL('./bench-ab-worker.js', import.meta.url), params, {
    finish: summarize,
    summarize: summaryLine,
  });
}

main();
