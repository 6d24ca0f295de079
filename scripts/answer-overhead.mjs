#!/usr/bin/env node
// The per-token cost outside the engine's forward pass, steps 1-50 against the last 50 of a
// long answer, in headless Chromium on one thread (www/bench/overhead.html says what is
// measured). Prints one line per answer, and --json everything.
//
//   node scripts/answer-overhead.mjs [--tokens 1000] [--runs 3] [--www DIR] [--json]
//
// --www serves another checkout's www/ (its pkg built), to measure before and after a change.
// Models: SmolLM2-135M-Instruct Q4_1 (.cache/models, linked into www/models by ./build.sh
// models) and the Qwen3 micro file (tests/fixtures/models), served as www/models/.

import { copyFileSync, existsSync, linkSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS, chromiumPath } from './chromium.mjs';
import { startServer } from './serve.mjs';

const ROOT = path.resolve(import.meta.dirname, '..');

function parseArgs(argv) {
  const options = { tokens: 1000, runs: 3, www: path.join(ROOT, 'www'), json: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--json') options.json = true;
    else if (arg === '--tokens') options.tokens = Number(argv[++i]);
    else if (arg === '--runs') options.runs = Number(argv[++i]);
    else if (arg === '--www') options.www = path.resolve(argv[++i]);
    else throw new Error(`unknown argument ${arg}`);
  }
  return options;
}

const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];

async function main() {
  const options = parseArgs(process.argv.slice(2));
  // The models sit in www/models/ (ignored by git): SmolLM2 from ./build.sh models, the micro
  // file linked in here.
  for (const [from, name] of [
    [
      path.join(ROOT, '.cache', 'models', 'SmolLM2-135M-Instruct.Q4_1.gguf'),
      'SmolLM2-135M-Instruct.Q4_1.gguf',
    ],
    [path.join(ROOT, 'tests', 'fixtures', 'models', 'qwen3-micro-q4_0.gguf'), 'qwen3-micro-q4_0.gguf'],
  ]) {
    const to = path.join(options.www, 'models', name);
    if (existsSync(to)) continue;
    try {
      linkSync(from, to);
    } catch {
      copyFileSync(from, to);
    }
  }
  const server = await startServer({ root: options.www, port: 0 });
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    args: CHROMIUM_ARGS,
    headless: true,
  });
  const runs = [];
  try {
    for (let run = 0; run < options.runs; run++) {
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(`${server.url}bench/overhead.html?tokens=${options.tokens}`);
      await page.waitForFunction(() => window.__result !== undefined, null, { timeout: 900_000 });
      const result = await page.evaluate(() => window.__result);
      await context.close();
      if (result.error) throw new Error(result.error);
      runs.push(result.results);
    }
  } finally {
    await browser.close();
    await server.close();
  }
  if (options.json) {
    console.log(JSON.stringify(runs, null, 2));
    return;
  }
  console.log(`Chromium, 1 thread, ${options.tokens}-token answers, medians of ${options.runs} runs:`);
  for (let i = 0; i < runs[0].length; i++) {
    const of = (key) => median(runs.map((r) => r[i][key]));
    const early = of('earlyOutsideMs');
    const late = of('lateOutsideMs');
    console.log(
      `  ${runs[0][i].name}: ${of('steps')} steps; outside the engine ${early.toFixed(3)} ms a token ` +
        `(steps 1-50) vs ${late.toFixed(3)} ms (last 50): ${((late / early - 1) * 100).toFixed(1)}%; ` +
        `engine ${of('earlyEngineMs').toFixed(2)} vs ${of('lateEngineMs').toFixed(2)} ms`,
    );
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
