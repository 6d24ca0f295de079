#!/usr/bin/env node
// Where the time of a prefill or a decode goes, by wasm function: the benchmark page
// (www/bench/bench.html) in headless Chromium with V8 writing a perf map (--perf-basic-prof), sampled
// by Linux `perf record` (cpu-clock, every thread of the machine) over the timed run's phase
// alone: from the moment the page says it starts to the page's result.
//
//   node scripts/profile.mjs MODEL.gguf [--phase decode|prefill] [--tokens N] [--depth D] [--threads 1]
//                            [--warmup 1] [--top 25] [--no-relaxed]
//   node scripts/profile.mjs MODEL.gguf --phase image --mmproj FILE --image PICTURE [...]
//   (./build.sh profile [...] builds www/lib/pkg* first)
//
// --phase decode samples N decode steps (default 128) after a one-token prompt, with D tokens
// (default 0) put in the cache first, unsampled: --depth 2048 profiles decode steps that attend
// to about 2100 positions; --phase prefill samples an N-token prompt (default 128) after the D
// cached tokens, and one decode step; --phase image samples one encoding of the picture by the
// projector (bench.mjs's vision mode). It prints the share of the renderer
// process's samples per symbol (wasm functions by their Rust names, V8 and Chromium code by
// theirs), and the share of samples that fell in other processes. Needs `perf` (Debian's
// linux-perf) and the right to sample the whole machine (root, or perf_event_paranoid <= 0).

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, realpathSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { linkModels } from './bench-models.mjs';
import { startServer } from './serve.mjs';
import { CHROMIUM_ARGS, chromiumPath } from './chromium.mjs';

const repoRoot = fileURLToPath(new URL('../', import.meta.url));
const www = path.join(repoRoot, 'www');
const USAGE = `usage: node scripts/profile.mjs MODEL.gguf [--phase decode|prefill] [--tokens N] [--depth D] [--threads 1]
                              [--warmup 1] [--top 25] [--no-relaxed]
       node scripts/profile.mjs MODEL.gguf --phase image --mmproj FILE --image PICTURE [--threads 1] [...]`;

function parseArgs(argv) {
  const options = { phase: 'decode', tokens: 128, depth: 0, threads: 1, warmup: 1, top: 25, relaxed: true };
  let model = null;
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s, 2);
    const value = () => inline ?? argv[++i];
    if (flag === '--phase') {
      options.phase = value();
      if (!['decode', 'prefill', 'image'].includes(options.phase))
        throw new Error('--phase takes decode, prefill or image');
    } else if (flag === '--mmproj' || flag === '--image') {
      const file = path.resolve(value());
      if (!existsSync(file)) throw new Error(`no such file: ${file}`);
      options[flag.slice(2)] = file;
    } else if (['--tokens', '--depth', '--threads', '--warmup', '--top'].includes(flag)) {
      const raw = value();
      const number = Number(raw);
      if (!Number.isInteger(number) || number < (flag === '--warmup' ? 0 : 1))
        throw new Error(`${flag} must be a positive integer, got "${raw}"`);
      options[flag.slice(2)] = number;
    } else if (flag === '--no-relaxed') options.relaxed = false;
    else if (flag.startsWith('-')) throw new Error(`unknown option ${argv[i]}`);
    else if (model === null) model = path.resolve(argv[i]);
    else throw new Error('one model at a time');
  }
  if (model === null) throw new Error('which model?');
  if (!existsSync(model)) throw new Error(`no such model file: ${model}`);
  if ((options.phase === 'image') !== Boolean(options.mmproj && options.image))
    throw new Error('--phase image goes with --mmproj FILE and --image PICTURE');
  return { ...options, model };
}

/** The perf maps V8 wrote since `since` (ms), newest first: one per renderer process. */
function perfMapsSince(since) {
  return readdirSync(os.tmpdir())
    .filter((name) => /^perf-\d+\.map$/.test(name))
    .map((name) => path.join(os.tmpdir(), name))
    .filter((file) => statSync(file).mtimeMs >= since)
    .sort((a, b) => statSync(b).size - statSync(a).size);
}

async function main() {
  let options;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (error) {
    console.error(`profile.mjs: ${error.message}\n${USAGE}`);
    process.exit(2);
  }
  if (spawnSync('perf', ['--version']).status !== 0)
    throw new Error('perf is missing (apt install linux-perf)');
  const [modelUrl] = linkModels([options.model]);
  const vision = options.phase === 'image' ? [options.mmproj, options.image] : [];
  const visionUrls = linkModels(vision, 'vision');
  const server = await startServer({
    root: www,
    port: 0,
    allow: [...new Set([options.model, ...vision].map((file) => path.dirname(realpathSync(file))))],
  });
  const started = Date.now();
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    // --perf-basic-prof: V8 writes /tmp/perf-<pid>.map, which `perf report` reads for JIT code;
    // it also turns on V8's event log, which would land in the working directory.
    args: [...CHROMIUM_ARGS, '--js-flags=--perf-basic-prof --no-logfile-per-isolate --logfile=/dev/null'],
    headless: true,
  });
  const data = path.join(os.tmpdir(), `inferno-profile-${process.pid}.data`);
  let recorder = null;
  try {
    // Decode: N steps after D tokens put in the cache untimed (and unsampled, below) and a
    // one-token prompt; prefill: an N-token prompt after D cached tokens.
    const [pp, tg] = options.phase === 'decode' ? [1, options.tokens] : [options.tokens, 1];
    const query = new URLSearchParams({
      model: `/${modelUrl}`,
      pp,
      tg,
      depth: options.depth,
      threads: options.threads,
      warmup: options.warmup,
      probe: 0, // the memory probe would be sampled too
    });
    if (!options.relaxed) query.set('relaxed', '0');
    if (visionUrls.length > 0) {
      query.set('mmproj', `/${visionUrls[0]}`);
      query.set('image', `/${visionUrls[1]}`);
    }
    const page = await browser.newPage();
    page.on('pageerror', (error) => console.error(`page error: ${error.message}`));
    await page.goto(`${server.url}bench/bench.html?${query}`);
    // Sample the timed run's phase alone: the page says when it starts (www/bench/bench-worker.js), so
    // neither the load, the warm-up runs nor the cache filled up to the depth are counted.
    await page.waitForFunction(
      (phase) =>
        window.__result !== undefined ||
        new RegExp(`timed run.*: ${phase}`).test(document.getElementById('status')?.textContent ?? ''),
      options.phase,
      { timeout: 1_800_000, polling: 20 },
    );
    recorder = spawn('perf', ['record', '-q', '-a', '-e', 'cpu-clock', '-F', '1999', '-o', data], {
      stdio: 'ignore',
    });
    await page.waitForFunction(() => window.__result !== undefined, null, {
      timeout: 1_800_000,
      polling: 100,
    });
    const result = await page.evaluate(() => window.__result);
    recorder.kill('SIGINT');
    await new Promise((resolve) => recorder.on('exit', resolve));
    recorder = null;
    if (result.error) throw new Error(`the page failed: ${result.error}`);
    const [map] = perfMapsSince(started);
    if (!map) throw new Error('V8 wrote no perf map (is /tmp writable by Chromium?)');
    const renderer = path.basename(map).match(/\d+/)[0];
    console.log(
      options.phase === 'image'
        ? `${path.basename(options.mmproj)} on ${path.basename(options.image)}, ${options.threads} thread(s), ` +
            `build ${result.build ?? '?'}: the picture's ${result.image_tokens} embeddings in ${result.image_ms?.toFixed(0)} ms`
        : `${path.basename(options.model)}, ${options.phase} (pp ${pp}, tg ${tg}), ${options.threads} thread(s), ` +
            `build ${result.build ?? '?'}: prefill ${result.prefill_tok_s?.toFixed(1)} tok/s, decode ${result.decode_tok_s?.toFixed(1)} tok/s`,
    );
    report(data, renderer, options.top);
  } finally {
    recorder?.kill('SIGINT');
    await browser.close();
    server.close();
    rmSync(data, { force: true });
    // Every Chromium process of this run wrote a map; they are of no use after the report.
    for (const map of perfMapsSince(started)) rmSync(map, { force: true });
    rmSync(`${data}.old`, { force: true });
  }
}

/** Prints the renderer's top symbols by share of its samples, and how many samples were elsewhere. */
function report(data, renderer, top) {
  const run = (args) => {
    const out = spawnSync('perf', ['report', '-i', data, '--stdio', '--no-children', ...args], {
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    });
    if (out.status !== 0) throw new Error(`perf report failed: ${out.stderr}`);
    return out.stdout;
  };
  // Shares of all samples (perf's "pid" is a thread: sum the renderer's threads); the machine's
  // idle time (pid 0, swapper) is left out, so the figure says how much of the busy time was ours.
  const shares = (args) =>
    run(['--sort', 'pid', ...args])
      .split('\n')
      .map((line) => line.match(/^\s+([\d.]+)%\s+(\d+):/))
      .filter(Boolean)
      .map(([, share, pid]) => ({ share: Number(share), pid }));
  const idle = shares([]).find(({ pid }) => pid === '0')?.share ?? 0;
  const ours = shares(['--pid', renderer]).reduce((sum, { share }) => sum + share, 0);
  console.log(
    `renderer process ${renderer}: ${((100 * ours) / Math.max(100 - idle, 1e-9)).toFixed(1)} % of the machine's busy samples; its symbols:`,
  );
  const symbols = run(['--pid', renderer, '--sort', 'sym', '--percentage', 'relative'])
    .split('\n')
    .filter((line) => /^\s+\d/.test(line))
    .slice(0, top);
  for (const line of symbols) {
    const [, share, name] = line.match(/^\s+([\d.]+)%\s+\[[^\]]*\]\s+(.*)$/) ?? [null, null, line.trim()];
    // Rust's hashes and crate disambiguators and V8's function index say nothing to a reader.
    const tidy = name
      .replace(/^JS:/, '')
      .replace(/\[[0-9a-f]{16}\]/g, '')
      .replace(/(::h[0-9a-f]{16})?-\d+-(turbofan|liftoff)$/, ' ($2)');
    console.log(share === null ? `  ${tidy}` : `  ${share.padStart(6)} %  ${tidy}`);
  }
}

main().catch((error) => {
  console.error(`profile.mjs: ${error.message}`);
  process.exit(1);
});
