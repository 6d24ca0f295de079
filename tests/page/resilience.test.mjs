// Page tests for what a chat tab must survive: a crash in the engine and an engine that stops
// answering. (Hundreds of turns without memory or workers piling up: soak.test.mjs.)
//
//   node --test tests/page/resilience.test.mjs   (environment: see harness.mjs)

import { afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { MODELS, closePage, h, openPage, repoRoot, requireModel } from './harness.mjs';
import {
  CHAT_TIMEOUT_MS,
  answersSoFar,
  ask,
  assertModelLoaded,
  loadModel,
  setSettings,
} from './chat-helpers.mjs';

const SMOLLM2 = () => requireModel(MODELS.smollm2);
const SMOLLM2_NAME = 'SmolLM2-135M-Instruct.Q4_1.gguf';

/**
 * The wasm build made for tests (`node scripts/build-wasm.mjs build --test-hooks simd`, which
 * ./build.sh test runs): the plain SIMD128 engine plus `deliberate_trap`, which the shipped
 * builds in www/lib/ do not have. One build serves: the faulty pages run on one thread
 * (a saved setting) with relaxed SIMD off (`?relaxed=0`), so the page starts that build.
 */
const TEST_HOOKS = path.join(repoRoot, 'target', 'test-hooks');
const ONE_THREAD_PLAIN_SIMD = '?relaxed=0';

/**
 * Serves worker.js with a test-only listener in front of its own: a chat whose messages say
 * `__trap__` becomes the worker's `trap` request (a real trap inside the real engine), and one
 * that says `__hang__` spins forever, as a worker stuck in a wasm call would. The wasm builds
 * are served from TEST_HOOKS, so the engine has the trap. Service workers are blocked in these
 * contexts so every request reaches the routes.
 */
async function routeFaultyWorker(page) {
  assert.ok(
    existsSync(path.join(TEST_HOOKS, 'pkg', 'inferno_bg.wasm')),
    `${TEST_HOOKS} has no build: node scripts/build-wasm.mjs build --test-hooks simd`,
  );
  // One thread, as a saved setting (CHAT_KEY in www/lib/storage.js).
  await h.context.addInitScript(() => {
    const key = 'inferno.chat.v1';
    if (!localStorage.getItem(key))
      localStorage.setItem(key, JSON.stringify({ messages: [], settings: { threads: '1' } }));
  });
  await page.route(
    (url) => /\/lib\/pkg\//.test(url.pathname),
    async (route) => {
      const response = await route.fetch();
      const relative = new URL(route.request().url()).pathname.replace(/^.*\/lib\//, '');
      const file = path.join(TEST_HOOKS, ...relative.split('/'));
      if (!existsSync(file)) return route.fulfill({ response });
      // The test build's own snippet paths may not exist in www/lib: its status and type, not theirs.
      const contentType = file.endsWith('.wasm') ? 'application/wasm' : 'text/javascript';
      await route.fulfill({ response, status: 200, contentType, body: readFileSync(file) });
    },
  );
  await page.route(
    (url) => url.pathname.endsWith('/worker.js'),
    async (route) => {
      const response = await route.fetch();
      const injected = `self.addEventListener('message', (event) => {
  const said = JSON.stringify(event.data?.messages ?? null);
  if (said.includes('__trap__')) {
    event.stopImmediatePropagation();
    handleRequest({ ...event.data, type: 'trap' });
  } else if (said.includes('__hang__')) {
    for (;;);
  }
});
`;
      await route.fulfill({ response, body: injected + (await response.text()) });
    },
  );
}

const FAULTY = { contextOptions: { serviceWorkers: 'block' }, beforeOpen: routeFaultyWorker };

/** The faulty page, on the one build that has the hooks. */
async function openFaultyPage(options = FAULTY) {
  await openPage(ONE_THREAD_PLAIN_SIMD, options);
  const engine = await h.page.locator('#engine-info').innerText();
  assert.match(engine, /· SIMD128 · 1 thread$/, 'the page runs the plain SIMD128 build on one thread');
}

/** Sends a message and waits until the page has finished with it, answered or failed. */
async function sendAndSettle(message) {
  const before = await answersSoFar();
  await h.page.fill('#prompt', message);
  await h.page.press('#prompt', 'Enter');
  await h.page.waitForFunction((count) => Number(document.body.dataset.answers ?? 0) > count, before, {
    timeout: CHAT_TIMEOUT_MS,
  });
}

async function errorBanner() {
  await h.page.waitForSelector('#chat-error:not([hidden])', { timeout: CHAT_TIMEOUT_MS });
  return {
    title: await h.page.locator('#chat-error-title').innerText(),
    kind: await h.page.locator('#chat-error-kind').innerText(),
    message: await h.page.locator('#chat-error-message').innerText(),
  };
}

async function waitFor(condition, what, timeoutMs = 10_000) {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** After a crash the model is gone; loading it again must work in the same page. */
async function reloadAndChat() {
  assert.equal(
    await h.page.evaluate(() => document.body.dataset.model ?? ''),
    '',
    'the lost model is not shown as loaded',
  );
  await loadModel(SMOLLM2());
  await assertModelLoaded(SMOLLM2_NAME);
  await h.page.click('#new-chat'); // The faulty message would be sent again with the history.
  const answer = await ask('Hello!');
  assert.ok(['end', 'max_tokens'].includes(answer.reason), `answered (${answer.reason})`);
  assert.ok(answer.tokens.length > 0);
}

describe('a crashed or stalled engine', { timeout: 300_000 }, () => {
  afterEach(async (t) => {
    // The deliberate panic is logged by the engine's panic hook: expected here, nothing else.
    h.problems = h.problems.filter((problem) => !/deliberate trap|RuntimeError: unreachable/.test(problem));
    await closePage(t);
  });

  test('a trap in the engine shows a clear error, and the next load works without reloading the page', async () => {
    await openFaultyPage();
    await loadModel(SMOLLM2());
    await assertModelLoaded(SMOLLM2_NAME);
    await setSettings({ max_tokens: 8 });
    await sendAndSettle('__trap__');
    const banner = await errorBanner();
    assert.equal(banner.title, 'The engine crashed while generating');
    assert.equal(banner.kind, 'wasm_trap');
    assert.match(banner.message, /crashed .*restarted/);
    await reloadAndChat();
  });

  test('a worker that stops answering is ended and replaced', async () => {
    await openFaultyPage({
      ...FAULTY,
      beforeOpen: async (page) => {
        await routeFaultyWorker(page);
        await page.clock.install(); // Time runs as usual until the test jumps it forward.
      },
    });
    await loadModel(SMOLLM2());
    await assertModelLoaded(SMOLLM2_NAME);
    const workersBefore = h.page.workers().length;
    const before = await answersSoFar();
    await h.page.fill('#prompt', '__hang__');
    await h.page.press('#prompt', 'Enter');
    await h.page.waitForFunction(() => document.body.dataset.generating === 'true');
    // Past the watchdog's 60 s of silence, without waiting for them.
    await h.page.clock.fastForward(61_000);
    await h.page.waitForFunction((count) => Number(document.body.dataset.answers ?? 0) > count, before, {
      timeout: CHAT_TIMEOUT_MS,
    });
    const banner = await errorBanner();
    assert.equal(banner.title, 'The engine stopped responding');
    assert.equal(banner.kind, 'stalled');
    // The stuck worker goes away (Chromium reports its end shortly after terminate()).
    await waitFor(
      () => h.page.workers().length <= workersBefore,
      `workers: ${workersBefore} before the stall`,
    );
    await reloadAndChat();
  });
});
