// Shared harness of the page tests: one static server and one headless browser per test
// file, a fresh browser context per test, console errors collected and failing the test,
// and a screenshot of every test's final state in target/page-screenshots for a human.
//
// The tests are written against Playwright's API. In Chromium that is playwright-core itself;
// with INFERNO_BROWSER=firefox it is firefox-page.mjs, the same API over puppeteer-core driving
// stock Firefox (WebDriver BiDi). A test that cannot run in one browser says so with
// `skip: onlyIn('chromium', reason)`, and the reason is printed with the results.
//
// Environment:
//   INFERNO_BROWSER      chromium (default) or firefox
//   INFERNO_TEST_MODELS  folder with gemma3-270m-q4_k_m.gguf and SmolLM2-135M-Instruct.Q4_1.gguf
//                        (default .cache/models; build.sh fetches them)
//   (the small synthetic Qwen3 files are committed under tests/fixtures/models)
//   INFERNO_WWW          the folder to serve (default www)
//   CHROMIUM             the browser binary (default /usr/bin/chromium)
//   FIREFOX              the Firefox binary (default /usr/bin/firefox-esr)

import { after, afterEach, before, beforeEach, describe } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startServer } from '../../scripts/serve.mjs';
import { CHROMIUM_ARGS, chromiumPath } from '../../scripts/chromium.mjs';
import { firefoxPath } from '../../scripts/firefox.mjs';
import { launchFirefox } from './firefox-page.mjs';

/** The browser the page tests drive: 'chromium' or 'firefox' (INFERNO_BROWSER). */
export const browserName = process.env.INFERNO_BROWSER ?? 'chromium';
if (!['chromium', 'firefox'].includes(browserName))
  throw new Error(`INFERNO_BROWSER must be chromium or firefox, not ${browserName}`);

/**
 * For a test's `skip` option: false in `browser`, else the reason the test cannot run in the
 * other one (node --test prints it next to the skipped test).
 */
export function onlyIn(browser, reason) {
  return browserName === browser ? false : `${browser} only: ${reason}`;
}

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
export const modelsDir = path.resolve(repoRoot, process.env.INFERNO_TEST_MODELS ?? '.cache/models');
export const fixtureModelsDir = path.join(repoRoot, 'tests', 'fixtures', 'models');
export const wwwRoot = path.resolve(repoRoot, process.env.INFERNO_WWW ?? 'www');
const screenshotDir = path.join(
  repoRoot,
  'target',
  'page-screenshots',
  ...(browserName === 'chromium' ? [] : [browserName]),
);

export const TEST_TIMEOUT_MS = 90_000;

// What each test model must show. Counts come from the gguf Python package's reader; `runs`
// is the inspector's "can it chat" line (default: yes).
export const MODELS = {
  gemma3: {
    file: path.join(modelsDir, 'gemma3-270m-q4_k_m.gguf'),
    architecture: 'gemma3',
    tensors: 236,
    metadata: 33,
    tensorNames: ['token_embd.weight', 'blk.0.attn_q.weight', 'blk.17.ffn_down.weight', 'output_norm.weight'],
  },
  smollm2: {
    file: path.join(modelsDir, 'SmolLM2-135M-Instruct.Q4_1.gguf'),
    architecture: 'llama',
    tensors: 272,
    metadata: 33,
    tensorNames: ['token_embd.weight', 'blk.0.attn_q.weight', 'blk.29.ffn_down.weight', 'output_norm.weight'],
  },
  qwen3Micro: {
    file: path.join(fixtureModelsDir, 'qwen3-micro-q4_0.gguf'),
    architecture: 'qwen3',
    tensors: 25,
    metadata: 25,
    tensorNames: ['output.weight', 'token_embd.weight', 'blk.0.attn_q.weight', 'blk.1.ffn_up.weight'],
  },
  qwen2Micro: {
    file: path.join(fixtureModelsDir, 'qwen2-micro-q8_0.gguf'),
    architecture: 'qwen2',
    tensors: 26,
    metadata: 21,
    tensorNames: ['token_embd.weight', 'blk.0.attn_q.bias', 'blk.1.ffn_down.weight', 'output_norm.weight'],
  },
  qwen3Vocab: {
    file: path.join(fixtureModelsDir, 'qwen3-vocab.gguf'),
    architecture: 'qwen3',
    tensors: 0,
    metadata: 23,
    tensorNames: [],
    runs: /^No: model tensors: `token_embd\.weight` is missing$/,
  },
};

/** Fails (never skips) when a model is missing: build.sh fetches them before page tests. */
export function requireModel(model) {
  return requireFile(model.file);
}

/** `file`, a test model; a missing one fails the test with the command that makes it. */
export function requireFile(file) {
  if (!existsSync(file)) {
    assert.fail(
      `test model missing: ${file}\n` +
        'Run ./build.sh models (it makes the test models), or point INFERNO_TEST_MODELS at them.',
    );
  }
  return file;
}

// ---------------------------------------------------------------------------------------
// Browser, server and per-test page with console-error capture.

/** What the running test works with; page and context change from test to test. */
export const h = { server: null, browser: null, scratchDir: null, context: null, page: null, problems: [] };

before(async () => {
  if (browserName === 'firefox') {
    assert.ok(
      existsSync(firefoxPath),
      `Firefox not found at ${firefoxPath} (apt-get install firefox-esr, or set FIREFOX)`,
    );
  } else {
    assert.ok(
      existsSync(chromiumPath),
      `Chromium not found at ${chromiumPath} (apt-get install chromium, or set CHROMIUM)`,
    );
  }
  assert.ok(
    existsSync(path.join(wwwRoot, 'lib', 'pkg', 'inferno.js')),
    `${path.join(wwwRoot, 'lib', 'pkg', 'inferno.js')} is missing: build the wasm package first (./build.sh)`,
  );
  mkdirSync(screenshotDir, { recursive: true });
  h.scratchDir = mkdtempSync(path.join(os.tmpdir(), 'inferno-page-'));
  h.server = await startServer({ root: wwwRoot, port: 0 });
  h.browser =
    browserName === 'firefox'
      ? await launchFirefox()
      : await chromium.launch({ executablePath: chromiumPath, args: CHROMIUM_ARGS });
});

after(async () => {
  await h.browser?.close();
  await h.server?.close();
  if (h.scratchDir) rmSync(h.scratchDir, { recursive: true, force: true });
});

/**
 * Firefox's own note when a navigation cancels a request that the service worker was
 * answering (the chat's "is there a demo model?" probe of a .gguf file, cut short by a
 * reload): the app handles the cancelled request; Chromium logs nothing for it.
 */
function browserLogOnly(text) {
  return (
    browserName === 'firefox' &&
    /ServiceWorker intercepted the request and encountered an unexpected error/.test(text) &&
    /\.gguf/.test(text)
  );
}

/** Wires a page's console errors, page errors and its workers' errors into h.problems. */
export function watchForProblems(page) {
  const onConsole = (where) => (message) => {
    if (message.type() !== 'error' || browserLogOnly(message.text())) return;
    h.problems.push(`${where} console error: ${message.text()}`);
  };
  page.on('console', onConsole('page'));
  page.on('pageerror', (error) => h.problems.push(`page error: ${error.message}`));
  page.on('worker', (worker) => worker.on('console', onConsole('worker')));
}

/** Opens the app (at `hash`, e.g. "#inspect") and waits for the engine to start. */
async function openApp(page, hash = '') {
  await page.goto(h.server.url + hash);
  await page.waitForSelector('#engine-info.ok, #engine-info.failed');
  const engineFailed = await page.locator('#engine-info.failed').count();
  if (engineFailed) assert.fail(`the wasm engine did not start: ${await page.locator('#error').innerText()}`);
}

/**
 * Opens the app in a fresh context. `contextOptions` go to newContext; `beforeOpen(page)` runs
 * before the first navigation (routes, a fake clock).
 */
export async function openPage(hash = '', { contextOptions = {}, beforeOpen = null } = {}) {
  h.problems = [];
  h.context = await h.browser.newContext({ viewport: { width: 1280, height: 900 }, ...contextOptions });
  h.page = await h.context.newPage();
  watchForProblems(h.page);
  await beforeOpen?.(h.page);
  await openApp(h.page, hash);
}

/** Screenshots the page for a human to look at, then fails on any logged error. */
export async function closePage(t) {
  const name = t.name
    .replace(/[^a-z0-9]+/gi, '-')
    .replace(/^-|-$/g, '')
    .toLowerCase();
  await h.page?.screenshot({ path: path.join(screenshotDir, `${name}.png`), fullPage: true }).catch(() => {});
  await h.context?.close();
  assert.deepEqual(h.problems, [], 'the page logged errors');
}

/**
 * A suite whose every test gets a fresh page (own browser context), opened at `hash`;
 * `timeout` bounds the whole suite.
 */
export function pageSuite(name, body, { hash = '', timeout = TEST_TIMEOUT_MS } = {}) {
  describe(name, { timeout }, () => {
    beforeEach(() => openPage(hash));
    afterEach(closePage);
    body();
  });
}

/** The trimmed text of the first element matching selector on the current page. */
export async function text(selector) {
  return (await h.page.locator(selector).innerText()).trim();
}
