#!/usr/bin/env node
// Inferno against llama.cpp's wasm build (@wllama/wllama), side by side in headless Chromium
// (playwright-core), headless Firefox (--browser firefox: stock Firefox ESR through
// puppeteer-core over WebDriver BiDi) or WebKitGTK (--browser webkit: selenium-webdriver, on a
// virtual display; scripts/webkit.mjs).
//
//   node scripts/bench.mjs [MODEL.gguf ...] [--runs 3] [--pp 64] [--tg 32] [--depth 0] [--threads 1]
//                          [--ctx N] [--warmup 1] [--timeout 900] [--no-relaxed] [--busy-core]
//                          [--only inferno|wllama] [--browser chromium|firefox|webkit] [--json] [--verbose]
//                          [--device cpu|gpu] [--swiftshader] [--precision fast|exact]
//                          [--cache-type-k f16|q8_0|f32] [--cache-type-v f16|q8_0|f32]
//
// --device gpu runs both engines on the browser's GPU (WebGPU; Chromium with
// --enable-unsafe-webgpu): Inferno on its own kernels, wllama with every layer offered to
// llama.cpp's WebGPU backend (which needs shader-f16, or it silently stays on the CPU: the table
// says so). It also prints the adapter, its copy bandwidth (a buffer copied in one submission:
// bytes read and written per second) and Inferno's decode weight bandwidth (the weights one step
// reads, times the decode rate), and their ratio: the decode efficiency, comparable across
// GPUs. --swiftshader picks Chromium's software WebGPU (a correctness check: its figures are no
// speed claims).
//
// --embed N measures embeddings instead: N short texts (embeddingTexts in www/bench/bench-common.js:
// numbered sentences of 6 to 9 words) in one request, mean pooling, unit length, on both sides:
// Inferno's WebEngine.embed in its worker (one call: short texts packed into shared batches),
// wllama's createEmbedding (llama-server's embeddings route) once per text, since wllama 3.8.1
// answers an array of texts with one embedding. It prints texts per second, the ratio,
// and the cosine between the two engines' vectors of the first text (the same file, so it
// should be ~1).
//
// --mmproj FILE --image PICTURE times a vision encoder instead: each engine loads the model
// with that projector, decodes the picture, and reports the time to the picture's embeddings
// (Inferno: its add_image call, which resizes, normalizes and encodes; wllama: mtmd's own
// "image slice encoded in N ms" log line, which leaves resizing out), after --warmup untimed
// encodings, and how much wasm memory the projector and the encodings took (Inferno). The ratio
// is wllama's time over Inferno's (above 1, Inferno is faster). Default model: Gemma 3 270M,
// whose width (640) the micro projectors of scripts/make_micro_mmproj.py share.
//
// --precision exact runs Inferno's attention as llama.cpp's CPU does (F16 sums, its bits);
// the default, fast, keeps them in f32.
// --cache-type-k and --cache-type-v keep Inferno's KV cache as that type (llama.cpp's -ctk/-ctv;
// Inferno's page only: compare with native `llama-bench -ctk T -ctv T`); its report gives the
// cache's bytes (cache_bytes).
// --depth D fills the cache with D tokens (untimed) before the timed prefill and decode, as
// `llama-bench -d D` does: Inferno only (wllama's completion API cannot hold a cache of exactly
// D tokens before a prompt of exactly pp), so it needs --only inferno; compare with native
// `llama-bench -d D` run right after.
// On the CPU each Inferno run also reads a 256 MiB buffer with SIMD128 loads: the page's read
// bandwidth, the physical limit of decode, printed beside decode's weight bandwidth.
// --only runs one side (no ratios then). --busy-core runs a busy loop in another process for the whole benchmark, holding one core, to
// show how each engine's threads cope when the machine is not theirs alone.
//   (./build.sh bench [...] builds www/lib/pkg* and fetches the models first)
//
// For every model it loads www/bench/bench.html (Inferno, in a module Web Worker) and
// www/bench/bench-wllama.html (wllama, CPU only, one thread) alternately, `--runs` times each, each
// load in a fresh browser context; every page loads the model, does `--warmup` untimed runs and
// one timed run of a pp-token prefill and tg greedy decode steps (the same prompt text, tokenized
// by each engine to exactly pp tokens; same context size, same thread count on both sides: see
// www/bench/bench-common.js). It prints the medians and the ratio Inferno/wllama for prefill and
// decode tokens/s; --json prints everything as JSON. A model whose two sides were given
// different prompt texts (different word counts: the tokenizers disagree) fails, with no ratio;
// whether the two greedy outputs agree is reported too (informational: near-ties may differ).
//
// Default models: SmolLM2-135M-Instruct Q4_1 and Gemma 3 270M Q4_K_M from .cache/models, and the
// Qwen3-0.6B-shaped Q8_0 file (/tmp/qwen3-0.6b-q8_0.gguf or .cache/models/; generated into
// .cache/models/ with ../shared/models/make_qwen3_0_6b.py when missing and that script exists).

import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';
import { defaultModels, linkModels, visionModel } from './bench-models.mjs';
import { startServer } from './serve.mjs';
import { CHROMIUM_ARGS, chromiumPath } from './chromium.mjs';
import { firefoxLaunchOptions } from './firefox.mjs';
import { launchWebKit } from './webkit.mjs';

const repoRoot = fileURLToPath(new URL('../', import.meta.url));
const www = path.join(repoRoot, 'www');
const wllamaDir = path.join(repoRoot, 'node_modules', '@wllama', 'wllama');

const USAGE = `usage: node scripts/bench.mjs [MODEL.gguf ...] [--runs 3] [--pp 64] [--tg 32] [--depth 0] [--threads 1]
                           [--ctx N] [--warmup 1] [--timeout 900] [--no-relaxed]
                           [--busy-core] [--only inferno|wllama] [--browser chromium|firefox|webkit]
                           [--json] [--verbose] [--device cpu|gpu] [--swiftshader] [--precision fast|exact]
                           [--cache-type-k f16|q8_0|f32] [--cache-type-v f16|q8_0|f32]
                           [--json-schema FILE] [--embed N] [--mmproj FILE --image PICTURE]`;

function parseArgs(argv) {
  const options = {
    browser: 'chromium',
    models: [],
    runs: 3,
    pp: 64,
    tg: 32,
    depth: 0,
    threads: 1,
    ctx: null,
    warmup: 1,
    timeout: 900,
    json: false,
    verbose: false,
    device: 'cpu',
    precision: 'fast',
    cacheTypeK: 'f16',
    cacheTypeV: 'f16',
    swiftshader: false,
  };
  const numbers = {
    '--runs': ['runs', 1],
    '--pp': ['pp', 1],
    '--tg': ['tg', 1],
    '--depth': ['depth', 0],
    '--threads': ['threads', 1],
    '--ctx': ['ctx', 1],
    '--warmup': ['warmup', 0],
    '--timeout': ['timeout', 1],
    '--embed': ['embed', 1],
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s, 2);
    if (flag in numbers) {
      const [key, min] = numbers[flag];
      const raw = inline ?? argv[++i];
      const value = Number(raw);
      if (!Number.isInteger(value) || value < min)
        throw new Error(`${flag} must be an integer >= ${min}, got "${raw}"`);
      options[key] = value;
    } else if (flag === '--json') options.json = true;
    else if (flag === '--no-relaxed') options.relaxed = false;
    else if (flag === '--busy-core') options.busyCore = true;
    else if (flag === '--only') {
      options.only = inline ?? argv[++i];
      if (!ENGINES.some((e) => e.name === options.only))
        throw new Error(`--only takes ${ENGINES.map((e) => e.name).join(' or ')}`);
    } else if (flag === '--browser') {
      options.browser = inline ?? argv[++i];
      if (!['chromium', 'firefox', 'webkit'].includes(options.browser))
        throw new Error('--browser takes chromium, firefox or webkit');
    } else if (flag === '--device') {
      options.device = inline ?? argv[++i];
      if (!['cpu', 'gpu'].includes(options.device)) throw new Error('--device takes cpu or gpu');
    } else if (flag === '--precision') {
      options.precision = inline ?? argv[++i];
      if (!['fast', 'exact'].includes(options.precision)) throw new Error('--precision takes fast or exact');
    } else if (flag === '--cache-type-k' || flag === '--cache-type-v') {
      const value = inline ?? argv[++i];
      if (!['f16', 'q8_0', 'f32'].includes(value)) throw new Error(`${flag} takes f16, q8_0 or f32`);
      options[flag === '--cache-type-k' ? 'cacheTypeK' : 'cacheTypeV'] = value;
    } else if (flag === '--swiftshader') options.swiftshader = true;
    else if (flag === '--json-schema') {
      const file = inline ?? argv[++i];
      options.schemaFile = path.resolve(file);
      options.schema = JSON.stringify(JSON.parse(readFileSync(file, 'utf8')));
    } else if (flag === '--mmproj' || flag === '--image') {
      const file = path.resolve(inline ?? argv[++i]);
      if (!existsSync(file)) throw new Error(`no such file: ${file}`);
      options[flag.slice(2)] = file;
    } else if (flag === '--verbose' || flag === '-v') options.verbose = true;
    else if (flag === '--help' || flag === '-h') options.help = true;
    else if (flag.startsWith('-')) throw new Error(`unknown option ${argv[i]}`);
    else options.models.push(path.resolve(argv[i]));
  }
  if (Boolean(options.mmproj) !== Boolean(options.image)) throw new Error('--mmproj and --image go together');
  if (options.depth > 0 && options.only !== 'inferno')
    throw new Error('--depth runs Inferno only (compare with native llama-bench -d): add --only inferno');
  return options;
}

const log = (text) => process.stderr.write(`${text}\n`);

/** Copies wllama's ES module, wasm and package.json to www/vendor/wllama/ (git-ignored). */
function vendorWllama() {
  const pkg = path.join(wllamaDir, 'package.json');
  if (!existsSync(pkg)) throw new Error('node_modules/@wllama/wllama is missing: run npm ci');
  const target = path.join(www, 'vendor', 'wllama');
  mkdirSync(target, { recursive: true });
  copyFileSync(path.join(wllamaDir, 'esm', 'index.js'), path.join(target, 'index.js'));
  copyFileSync(path.join(wllamaDir, 'esm', 'wasm', 'wllama.wasm'), path.join(target, 'wllama.wasm'));
  copyFileSync(pkg, path.join(target, 'package.json'));
  return JSON.parse(readFileSync(pkg, 'utf8')).version;
}

const median = (values) => {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

const ENGINES = [
  { name: 'inferno', page: 'bench/bench.html' },
  { name: 'wllama', page: 'bench/bench-wllama.html' },
];

/**
 * The browser the pages run in, as {version, newContext(), close()}: a context has newPage()
 * and close(); a page has on('console' | 'pageerror'), goto, waitForFunction and evaluate,
 * which playwright-core (Chromium) and puppeteer-core (Firefox) spell alike but for the
 * context and the wait's arguments. WebKitGTK (selenium-webdriver: scripts/webkit.mjs) opens a
 * WebDriver session per context and has no console events.
 */
async function launchBrowser(name, options) {
  if (name === 'webkit') {
    const webkit = await launchWebKit();
    const probe = await webkit.newSession();
    const version = `WebKitGTK ${(await probe.getCapabilities()).get('browserVersion')}`;
    await probe.quit();
    return {
      version,
      newContext: async () => {
        const driver = await webkit.newSession();
        await driver.manage().setTimeouts({ script: options.timeout * 1000 });
        return {
          close: () => driver.quit(),
          newPage: async () => ({
            on: () => {},
            goto: (url) => driver.get(url),
            evaluate: (fn) => driver.executeScript(`return (${fn})()`),
            waitForFunction: async (fn, arg, { timeout, polling }) => {
              const end = Date.now() + timeout;
              while (!(await driver.executeScript(`return (${fn})(arguments[0])`, arg))) {
                if (Date.now() > end) throw new Error(`timed out after ${timeout} ms`);
                await new Promise((resolve) => setTimeout(resolve, polling));
              }
            },
          }),
        };
      },
      close: () => webkit.stop(),
    };
  }
  if (name === 'firefox') {
    const browser = await puppeteer.launch(firefoxLaunchOptions());
    const version = await browser.version();
    return {
      version: version.replace(/^firefox\//i, 'Firefox '),
      newContext: async () => {
        const context = await browser.createBrowserContext();
        return {
          close: () => context.close(),
          newPage: async () => {
            const page = await context.newPage();
            return {
              on: (event, handler) => page.on(event, handler),
              goto: (url) => page.goto(url),
              evaluate: (fn) => page.evaluate(fn),
              waitForFunction: (fn, arg, { timeout, polling }) =>
                page.waitForFunction(fn, { timeout, polling }),
            };
          },
        };
      },
      close: () => browser.close(),
    };
  }
  const gpuArgs = [
    '--enable-unsafe-webgpu',
    '--enable-features=Vulkan',
    ...(options.swiftshader ? ['--use-webgpu-adapter=swiftshader'] : []),
  ];
  const args =
    options.device === 'gpu'
      ? [...CHROMIUM_ARGS.filter((arg) => arg !== '--disable-gpu'), ...gpuArgs]
      : CHROMIUM_ARGS;
  const browser = await chromium.launch({ executablePath: chromiumPath, args, headless: true });
  return {
    version: `Chromium ${browser.version()}`,
    newContext: () => browser.newContext(),
    close: () => browser.close(),
  };
}

async function runPage(browser, baseUrl, engine, modelUrl, options, visionUrls) {
  const query = new URLSearchParams({
    model: `/${modelUrl}`,
    pp: options.pp,
    tg: options.tg,
    threads: options.threads,
    warmup: options.warmup,
    device: options.device,
  });
  if (options.relaxed === false) query.set('relaxed', '0');
  if (options.ctx !== null) query.set('ctx', options.ctx);
  if (options.depth > 0) query.set('depth', options.depth);
  if (options.precision !== 'fast' && engine.name === 'inferno') query.set('precision', options.precision);
  if (engine.name === 'inferno') {
    if (options.cacheTypeK !== 'f16') query.set('cache_type_k', options.cacheTypeK);
    if (options.cacheTypeV !== 'f16') query.set('cache_type_v', options.cacheTypeV);
  }
  if (options.embed) query.set('embed', options.embed);
  if (visionUrls) {
    query.set('mmproj', `/${visionUrls[0]}`);
    query.set('image', `/${visionUrls[1]}`);
  }
  if (options.schema && engine.name === 'inferno') query.set('schema', options.schema);
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    if (options.verbose) {
      page.on('console', (message) =>
        log(`    [${engine.name} console.${message.type()}] ${message.text()}`),
      );
    }
    page.on('pageerror', (error) => log(`    [${engine.name} page error] ${error.message}`));
    await page.goto(`${baseUrl}${engine.page}?${query}`);
    await page.waitForFunction(() => window.__result !== undefined, null, {
      timeout: options.timeout * 1000,
      polling: 250,
    });
    return await page.evaluate(() => window.__result);
  } catch (error) {
    return { error: `${engine.page}: ${error.message.split('\n')[0]}` };
  } finally {
    await context.close();
  }
}

const fmt = (value, digits = 1) => (value === null || value === undefined ? '—' : value.toFixed(digits));

function summarize(sides) {
  const out = {};
  for (const [name, runs] of Object.entries(sides)) {
    const ok = runs.filter((r) => !('error' in r));
    out[name] = {
      runs,
      ok: ok.length,
      load_ms: median(ok.map((r) => r.load_ms)),
      prefill_tok_s: median(ok.map((r) => r.prefill_tok_s)),
      decode_tok_s: median(ok.map((r) => r.decode_tok_s)),
      embed_per_s: median(ok.map((r) => r.embed_per_s).filter((v) => v !== undefined)),
      image_ms: median(ok.map((r) => r.image_ms).filter((v) => v !== undefined)),
      image_tokens: ok.find((r) => r.image_tokens)?.image_tokens ?? null,
      memory_growth_bytes: median(ok.map((r) => r.memory_growth_bytes).filter((v) => v !== undefined)),
      projector_bytes: ok.find((r) => r.projector_bytes)?.projector_bytes ?? null,
      embed_tokens: ok.find((r) => r.embed_tokens)?.embed_tokens ?? null,
      embed_vector0: ok.find((r) => r.embed_vector0)?.embed_vector0 ?? null,
      schema_decode_tok_s: median(ok.map((r) => r.schema_decode_tok_s).filter((v) => v !== undefined)),
      schema_compile_ms: median(ok.map((r) => r.schema_compile_ms).filter((v) => v !== undefined)),
      read_ms: median(ok.map((r) => r.read_ms).filter((v) => v !== undefined)),
      finish_ms: median(ok.map((r) => r.finish_ms).filter((v) => v !== undefined)),
      memory_bytes: median(ok.map((r) => r.memory_bytes).filter((v) => v !== undefined)),
      cache_bytes: ok.find((r) => r.cache_bytes)?.cache_bytes ?? null,
      file_bytes: ok.find((r) => r.file_bytes)?.file_bytes ?? null,
      gpu: ok.find((r) => r.gpu)?.gpu ?? null,
      copy_gb_s: median(ok.map((r) => r.copy_gb_s).filter((v) => v !== undefined)),
      read_gb_s: median(ok.map((r) => r.read_gb_s).filter((v) => v !== undefined)),
      decode_weight_gb_s: median(ok.map((r) => r.decode_weight_gb_s).filter((v) => typeof v === 'number')),
      gpu_offload: ok.find((r) => r.gpu_offload !== undefined)?.gpu_offload ?? null,
      errors: [...new Set(runs.filter((r) => 'error' in r).map((r) => r.error))],
    };
  }
  // Both sides must have been given the same text (promptText(prompt_words)), or the ratio would
  // compare different prompts.
  const promptWords = (name) => [
    ...new Set(out[name].runs.filter((r) => !('error' in r)).map((r) => r.prompt_words)),
  ];
  const words = { inferno: promptWords('inferno'), wllama: promptWords('wllama') };
  const samePrompt = new Set([...words.inferno, ...words.wllama]).size <= 1;
  if (!samePrompt) {
    out.mismatch = `different prompts: Inferno tokenized ${words.inferno.join('/')} words to pp tokens, llama.cpp ${words.wllama.join('/')} words`;
  }
  const outputs = (name) => new Set(out[name].runs.filter((r) => !('error' in r)).map((r) => r.output));
  const [a, b] = [outputs('inferno'), outputs('wllama')];
  out.same_output = a.size > 0 && b.size > 0 ? a.size === 1 && b.size === 1 && [...a][0] === [...b][0] : null;
  out.prompt_words = samePrompt ? (words.inferno[0] ?? words.wllama[0] ?? null) : null;
  const ratio = (key) =>
    samePrompt && out.inferno[key] && out.wllama[key] ? out.inferno[key] / out.wllama[key] : null;
  const [v, w] = [out.inferno.embed_vector0, out.wllama.embed_vector0];
  out.embed_cosine = v && w && v.length === w.length ? cosine(v, w) : null;
  return {
    ...out,
    ratio: {
      prefill: ratio('prefill_tok_s'),
      decode: ratio('decode_tok_s'),
      embed: ratio('embed_per_s'),
      // A time: llama.cpp's over Inferno's, so that above 1 Inferno is faster, as for the rates.
      image: out.inferno.image_ms && out.wllama.image_ms ? out.wllama.image_ms / out.inferno.image_ms : null,
    },
  };
}

function cosine(a, b) {
  let [ab, aa, bb] = [0, 0, 0];
  for (let i = 0; i < a.length; i++) [ab, aa, bb] = [ab + a[i] * b[i], aa + a[i] * a[i], bb + b[i] * b[i]];
  return ab / Math.sqrt(aa * bb);
}

/** A table in aligned columns: the first left-aligned, the others right-aligned. */
function printColumns(header, rows) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  console.log(line(header));
  for (const row of rows) console.log(line(row));
}

function printEmbeddingTable(report) {
  const header = [
    'model',
    'inferno texts/s',
    'wllama texts/s',
    'ratio',
    'tokens (inferno / wllama)',
    'cosine',
  ];
  const rows = report.models.map((m) => [
    path.basename(m.file),
    fmt(m.inferno.embed_per_s),
    fmt(m.wllama.embed_per_s),
    fmt(m.ratio.embed, 2),
    `${m.inferno.embed_tokens ?? '—'} / ${m.wllama.embed_tokens ?? '—'}`,
    fmt(m.embed_cosine, 5),
  ]);
  printColumns(header, rows);
  console.log(
    `\n${report.embed} short texts (Inferno: one request; wllama: one request each), mean pooling, unit length; median of ${report.runs} alternating runs ` +
      `(after ${report.warmup} warm-up request per page), ${report.threads} ${report.threads === 1 ? 'thread' : 'threads'} on both sides; ` +
      `ratio = inferno / wllama; cosine between the two engines' vectors of the first text.\n` +
      `wllama ${report.wllama_version} (llama.cpp ${report.llama_cpp ?? '?'}), ${report.browser}.`,
  );
  for (const m of report.models) {
    for (const side of ['inferno', 'wllama']) {
      for (const error of m[side].errors) console.log(`${path.basename(m.file)} ${side} failed: ${error}`);
    }
  }
}

function printVisionTable(report) {
  const header = ['model', 'projector', 'inferno ms', 'wllama ms', 'ratio', 'image tokens', 'inferno memory'];
  const mb = (bytes) => (bytes ? `${(bytes / 2 ** 20).toFixed(0)} MiB` : '—');
  const rows = report.models.map((m) => [
    path.basename(m.file),
    path.basename(report.mmproj),
    fmt(m.inferno.image_ms, 0),
    fmt(m.wllama.image_ms, 0),
    fmt(m.ratio.image, 2),
    String(m.inferno.image_tokens ?? '—'),
    `+${mb(m.inferno.memory_growth_bytes)} for ${mb(m.inferno.projector_bytes)} of weights`,
  ]);
  printColumns(header, rows);
  console.log(
    `\nthe picture's embeddings (${path.basename(report.image)}), median of ${report.runs} alternating runs ` +
      `(after ${report.warmup} warm-up encoding per page), ${report.threads} ${report.threads === 1 ? 'thread' : 'threads'} on both sides; ` +
      `Inferno: its add_image call (resize, normalize, encode); wllama: mtmd's logged encode time (resizing not included); ` +
      `ratio = wllama / inferno (above 1, Inferno is faster). Inferno's memory: how much the wasm memory grew for the projector and the encodings.\n` +
      `wllama ${report.wllama_version} (llama.cpp ${report.llama_cpp ?? '?'}), ${report.browser}.`,
  );
  for (const m of report.models) {
    for (const side of ['inferno', 'wllama']) {
      for (const error of m[side].errors) console.log(`${path.basename(m.file)} ${side} failed: ${error}`);
    }
  }
}

function printTable(report) {
  if (report.mmproj) return printVisionTable(report);
  if (report.embed) return printEmbeddingTable(report);
  const { pp, tg } = report;
  const header = [
    'model',
    `inferno pp${pp}`,
    `wllama pp${pp}`,
    'ratio',
    `inferno tg${tg}`,
    `wllama tg${tg}`,
    'ratio',
    'load ms (inferno / wllama)',
  ];
  const rows = report.models.map((m) => [
    path.basename(m.file),
    fmt(m.inferno.prefill_tok_s),
    fmt(m.wllama.prefill_tok_s),
    fmt(m.ratio.prefill, 2),
    fmt(m.inferno.decode_tok_s),
    fmt(m.wllama.decode_tok_s),
    fmt(m.ratio.decode, 2),
    `${fmt(m.inferno.load_ms, 0)} / ${fmt(m.wllama.load_ms, 0)}`,
  ]);
  printColumns(header, rows);
  console.log(
    `\ntokens/s, median of ${report.runs} alternating runs each (after ${report.warmup} warm-up run per page), ` +
      `${report.threads} ${report.threads === 1 ? 'thread' : 'threads'} on both sides` +
      `${report.depth ? `, after ${report.depth} tokens already in the cache (llama-bench -d ${report.depth})` : ''}` +
      `${report.busy_core ? ', with a busy loop holding one core' : ''}${report.relaxed ? '' : ', Inferno without relaxed SIMD'}` +
      `, Inferno's attention ${report.precision}` +
      `${report.cache_type_k === 'f16' && report.cache_type_v === 'f16' ? '' : `, its KV cache keys ${report.cache_type_k}, values ${report.cache_type_v}`}` +
      `; ratio = inferno / wllama.\n` +
      `wllama ${report.wllama_version} (llama.cpp ${report.llama_cpp ?? '?'}), ${report.browser}.`,
  );
  if (report.device === 'gpu') {
    console.log(
      `On the GPU${report.swiftshader ? " (Chromium's SwiftShader: a software renderer, not a speed figure)" : ''}.`,
    );
    for (const m of report.models) {
      const i = m.inferno;
      if (i.gpu) {
        const efficiency = i.decode_weight_gb_s && i.copy_gb_s ? i.decode_weight_gb_s / i.copy_gb_s : null;
        console.log(
          `${path.basename(m.file)}: Inferno on ${i.gpu.name || 'the adapter'} (${i.gpu.backend}): decode reads ` +
            `${fmt(i.decode_weight_gb_s, 2)} GB/s of weights; the adapter copies ${fmt(i.copy_gb_s, 2)} GB/s; ` +
            `decode efficiency ${fmt(efficiency, 2)}.`,
        );
      }
      if (m.wllama.gpu_offload === false) {
        console.log(
          `${path.basename(m.file)}: wllama ran on the CPU: the adapter has no shader-f16, which llama.cpp's WebGPU backend needs.`,
        );
      }
    }
  }
  if (report.device !== 'gpu') {
    for (const m of report.models) {
      const i = m.inferno;
      if (i.read_gb_s && i.decode_weight_gb_s) {
        console.log(
          `${path.basename(m.file)}: Inferno's decode reads ${fmt(i.decode_weight_gb_s, 2)} GB/s of weights; ` +
            `one thread of the page reads ${fmt(i.read_gb_s, 2)} GB/s with SIMD128 loads (decode at ${fmt((100 * i.decode_weight_gb_s) / i.read_gb_s, 0)} % of that).`,
        );
      }
    }
  }
  for (const m of report.models) {
    const i = m.inferno;
    if (i.schema_decode_tok_s && i.decode_tok_s) {
      // Per decode step: the time held to the schema over the time without, in the same runs.
      const share = i.decode_tok_s / i.schema_decode_tok_s - 1;
      console.log(
        `${path.basename(m.file)}: with the JSON schema (${path.basename(report.json_schema)}) Inferno decodes ` +
          `${fmt(i.schema_decode_tok_s)} tok/s against ${fmt(i.decode_tok_s)} without: the grammar adds ` +
          `${fmt(100 * share)} % to a decode step (median of the runs; compile ${fmt(i.schema_compile_ms, 0)} ms).`,
      );
    }
  }
  const mb = (bytes) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
  for (const m of report.models) {
    const i = m.inferno;
    if (i.read_ms && i.load_ms && i.memory_bytes && i.file_bytes) {
      console.log(
        `${path.basename(m.file)}: Inferno loads in ${fmt(i.load_ms, 0)} ms what the page reads in ${fmt(i.read_ms, 0)} ms ` +
          `(${fmt(i.load_ms / i.read_ms, 2)}x; of that, ${fmt(i.finish_ms, 0)} ms validating and building after the last byte); wasm memory after the runs ${mb(i.memory_bytes)} for a ${mb(i.file_bytes)} file ` +
          `(+${mb(i.memory_bytes - i.file_bytes)})` +
          `${i.cache_bytes ? `, of which its KV cache of ${i.runs[0]?.ctx ?? '?'} positions ${mb(i.cache_bytes)}` : ''}.`,
      );
    }
  }
  for (const m of report.models) {
    if (m.mismatch) console.log(`${path.basename(m.file)} FAILED: ${m.mismatch}`);
    else if (m.same_output === false)
      console.log(`${path.basename(m.file)}: the greedy outputs differ (same prompt; see --json)`);
    for (const side of ['inferno', 'wllama']) {
      for (const error of m[side].errors) console.log(`${path.basename(m.file)} ${side} failed: ${error}`);
    }
  }
}

async function main() {
  let options;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (error) {
    console.error(`bench.mjs: ${error.message}\n${USAGE}`);
    process.exit(2);
  }
  if (options.help) {
    console.log(USAGE);
    return;
  }
  for (const file of ['inferno.js', 'inferno_bg.wasm']) {
    if (!existsSync(path.join(www, 'lib', 'pkg', file)))
      throw new Error(`www/lib/pkg/${file} is missing: run ./build.sh build`);
  }
  for (const model of options.models) {
    if (!existsSync(model)) throw new Error(`no such model file: ${model}`);
  }
  const models =
    options.models.length > 0 ? options.models : options.mmproj ? [visionModel()] : defaultModels();
  if (models.length === 0) throw new Error('no models to run');
  const wllamaVersion = vendorWllama();
  const modelUrls = linkModels(models);
  const visionUrls = options.mmproj ? linkModels([options.mmproj, options.image], 'vision') : null;

  // A separate process spinning on one core for as long as the benchmark runs.
  const busyLoop = options.busyCore
    ? spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' })
    : null;
  busyLoop?.unref(); // It must not keep this script alive...
  process.on('exit', () => busyLoop?.kill()); // ...nor outlive it.
  // The models are symlinked under www/models/bench: the server may follow those links only.
  const served = [...models, ...(options.mmproj ? [options.mmproj, options.image] : [])];
  const allow = [...new Set(served.map((file) => path.dirname(realpathSync(file))))];
  const server = await startServer({ root: www, port: 0, allow });
  const browser = await launchBrowser(options.browser, options);
  const report = {
    pp: options.pp,
    tg: options.tg,
    depth: options.depth,
    embed: options.embed ?? 0,
    mmproj: options.mmproj ?? null,
    image: options.image ?? null,
    threads: options.threads,
    busy_core: Boolean(options.busyCore),
    relaxed: options.relaxed !== false,
    runs: options.runs,
    warmup: options.warmup,
    ctx: options.ctx,
    device: options.device,
    precision: options.precision,
    cache_type_k: options.cacheTypeK,
    cache_type_v: options.cacheTypeV,
    swiftshader: options.swiftshader,
    json_schema: options.schemaFile ?? null,
    browser: browser.version,
    wllama_version: wllamaVersion,
    llama_cpp: null,
    models: [],
  };
  let failures = 0;
  try {
    for (const [index, model] of models.entries()) {
      const name = path.basename(model);
      const sides = { inferno: [], wllama: [] };
      for (let run = 1; run <= options.runs; run++) {
        for (const engine of ENGINES.filter((e) => !options.only || e.name === options.only)) {
          const result = await runPage(browser, server.url, engine, modelUrls[index], options, visionUrls);
          sides[engine.name].push(result);
          if ('error' in result) {
            failures++;
            log(`${name} run ${run}/${options.runs} ${engine.name}: failed: ${result.error}`);
          } else {
            if (result.llama_cpp) report.llama_cpp = result.llama_cpp;
            if (options.mmproj) {
              log(
                `${name} run ${run}/${options.runs} ${engine.name.padEnd(7)}: the picture's embeddings in ${fmt(result.image_ms, 0)} ms` +
                  `, load ${fmt(result.load_ms, 0)} ms, threads ${result.threads}`,
              );
              continue;
            }
            if (options.embed) {
              log(
                `${name} run ${run}/${options.runs} ${engine.name.padEnd(7)}: ${fmt(result.embed_per_s)} texts/s ` +
                  `(${result.embed_tokens} tokens in ${fmt(result.embed_ms, 0)} ms), load ${fmt(result.load_ms, 0)} ms, threads ${result.threads}`,
              );
              continue;
            }
            log(
              `${name} run ${run}/${options.runs} ${engine.name.padEnd(7)}: prefill ${fmt(result.prefill_tok_s)} tok/s, ` +
                `decode ${fmt(result.decode_tok_s)} tok/s, load ${fmt(result.load_ms, 0)} ms, prompt ${result.prompt_words} words` +
                ` (threads ${result.threads}, ${result.build ?? `simd ${result.simd}`}, isolated ${result.cross_origin_isolated})`,
            );
          }
        }
      }
      const summary = summarize(sides);
      if (summary.mismatch) {
        failures++;
        log(`${name}: FAILED: ${summary.mismatch}`);
      }
      report.models.push({ file: model, ...summary });
    }
  } finally {
    busyLoop?.kill();
    await browser.close();
    await server.close();
  }
  if (options.json) console.log(JSON.stringify(report, null, 2));
  else printTable(report);
  if (failures > 0) process.exitCode = 1;
}

main().catch((error) => {
  console.error(`bench.mjs: ${error.message}`);
  process.exit(1);
});
