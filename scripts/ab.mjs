#!/usr/bin/env node
// Two builds of Inferno side by side in one headless Chromium page: how a change moves prefill
// and decode speed, with the machine's noise weighing on both builds alike.
//
//   node scripts/ab.mjs --a FOLDER --b FOLDER [MODEL.gguf ...] [--pairs 10] [--pp 64] [--tg 32]
//                       [--depth 0] [--threads 1] [--warmup 1] [--no-relaxed] [--timeout 1800] [--json]
//   (./build.sh ab REV [...] builds REV's package and this tree's, then runs this with them)
//
// Each FOLDER holds builds laid out as www/lib/ does (pkg/, pkg-relaxed/, pkg-relaxed-threads/...);
// the page picks the one for --threads and --no-relaxed in each, as the app would. One Web
// Worker loads the model into both (www/bench/bench-ab-worker.js), then times `--pairs` rounds of one
// run each, alternating which goes first. Printed per model: each build's median tokens/s and
// the median of the per-pair ratios b/a with their range, which is the figure to quote (two
// medians of separately noisy runs say less). Whether both builds' greedy outputs agree is
// printed too: a change meant to keep every sum must keep them.

import { existsSync, mkdirSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { defaultModels, linkModels } from './bench-models.mjs';
import { CHROMIUM_ARGS, chromiumPath } from './chromium.mjs';
import { startServer } from './serve.mjs';

const www = fileURLToPath(new URL('../www/', import.meta.url));

const USAGE = `usage: node scripts/ab.mjs --a FOLDER --b FOLDER [MODEL.gguf ...] [--pairs 10] [--pp 64]
                         [--tg 32] [--depth 0] [--threads 1] [--warmup 1] [--no-relaxed] [--timeout 1800] [--json]`;

function parseArgs(argv) {
  const options = { models: [], pairs: 10, pp: 64, tg: 32, depth: 0, threads: 1, warmup: 1, timeout: 1800 };
  const numbers = ['pairs', 'pp', 'tg', 'depth', 'threads', 'warmup', 'timeout'];
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s, 2);
    const name = flag.replace(/^--/, '');
    if (numbers.includes(name)) {
      const value = Number(inline ?? argv[++i]);
      if (!Number.isInteger(value) || value < (['warmup', 'depth'].includes(name) ? 0 : 1))
        throw new Error(`${flag} takes a whole number`);
      options[name] = value;
    } else if (flag === '--a' || flag === '--b') {
      const folder = inline ?? argv[++i];
      if (!folder || !existsSync(folder)) throw new Error(`${flag}: no such folder: ${folder}`);
      options[name] = path.resolve(folder);
    } else if (flag === '--no-relaxed') options.relaxed = false;
    else if (flag === '--json') options.json = true;
    else if (flag === '--help' || flag === '-h') options.help = true;
    else if (flag.startsWith('-')) throw new Error(`unknown option ${argv[i]}`);
    else options.models.push(path.resolve(argv[i]));
  }
  if (!options.help && (!options.a || !options.b)) throw new Error('--a and --b are both needed');
  return options;
}

/** Links each build folder under www/ab/ (git-ignored) so the server sends it; URL paths. */
function linkBuilds(folders) {
  const dir = path.join(www, 'ab');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return Object.entries(folders).map(([side, folder]) => {
    symlinkSync(folder, path.join(dir, side));
    return `/ab/${side}/`;
  });
}

const fmt = (value, digits = 1) => value.toFixed(digits);

async function runPage(browser, baseUrl, query, timeout) {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    page.on('pageerror', (error) => process.stderr.write(`page error: ${error.message}\n`));
    await page.goto(`${baseUrl}bench/bench-ab.html?${query}`);
    await page.waitForFunction(() => window.__result !== undefined, null, {
      timeout: timeout * 1000,
      polling: 1000,
    });
    return await page.evaluate(() => window.__result);
  } finally {
    await context.close();
  }
}

function printModel(file, result, folders) {
  const { summary } = result;
  console.log(
    `${path.basename(file)}: threads ${result.threads}, ${result.pairs} pairs, pp${result.pp} tg${result.tg}${result.depth ? ` at depth ${result.depth}` : ''}, ` +
      `${result.a.build} of a (${folders.a}) and b (${folders.b})`,
  );
  for (const [label, key] of [
    ['prefill', 'prefill_tok_s'],
    ['decode', 'decode_tok_s'],
  ]) {
    const s = summary[key];
    console.log(
      `  ${label.padEnd(8)} a ${fmt(s.a).padStart(7)} tok/s   b ${fmt(s.b).padStart(7)} tok/s   ` +
        `b/a ${fmt(s.ratio, 3)} (pairs ${fmt(s.ratio_min, 2)}-${fmt(s.ratio_max, 2)})`,
    );
  }
  console.log(`  greedy outputs ${result.outputs_agree ? 'agree' : 'DIFFER'}`);
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  if (options.help) {
    console.log(USAGE);
    return;
  }
  for (const model of options.models) {
    if (!existsSync(model)) throw new Error(`no such model file: ${model}`);
  }
  const models = options.models.length > 0 ? options.models : defaultModels();
  if (models.length === 0) throw new Error('no models to run');
  const modelUrls = linkModels(models);
  const [a, b] = linkBuilds({ a: options.a, b: options.b });
  const allow = [
    ...new Set([...models.map((model) => path.dirname(realpathSync(model))), options.a, options.b]),
  ].map((place) => realpathSync(place));
  const server = await startServer({ root: www, port: 0, allow });
  const browser = await chromium.launch({ executablePath: chromiumPath, args: CHROMIUM_ARGS });
  const results = [];
  let failures = 0;
  try {
    for (const [index, model] of models.entries()) {
      const query = new URLSearchParams({
        model: `/${modelUrls[index]}`,
        a,
        b,
        pairs: options.pairs,
        pp: options.pp,
        tg: options.tg,
        depth: options.depth,
        threads: options.threads,
        warmup: options.warmup,
      });
      if (options.relaxed === false) query.set('relaxed', '0');
      const result = await runPage(browser, server.url, query, options.timeout);
      results.push({ file: model, ...result });
      if ('error' in result) {
        failures++;
        console.error(`${path.basename(model)}: failed: ${result.error}`);
      } else if (!options.json) printModel(model, result, options);
    }
  } finally {
    await browser.close();
    await server.close();
  }
  if (options.json) console.log(JSON.stringify(results, null, 2));
  if (failures > 0) process.exitCode = 1;
}

main().catch((error) => {
  console.error(`ab.mjs: ${error.message}`);
  process.exit(1);
});
