// Page tests for what a long-lived chat tab must survive: a crash in the engine, an engine
// that stops answering, and hundreds of turns of chatting, stopping, regenerating and
// branching without memory or workers piling up.
//
//   node --test tests/page/resilience.test.mjs   (environment: see harness.mjs)
//   INFERNO_SOAK_TURNS=1000 node --test tests/page/resilience.test.mjs   (a longer soak)

import { afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { MODELS, browserName, closePage, h, openPage, repoRoot, requireModel } from './harness.mjs';
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
const SOAK_TURNS = Number(process.env.INFERNO_SOAK_TURNS ?? 200);

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

// --- The soak ---------------------------------------------------------------------------

/** A small seeded generator, so a failing soak can be replayed turn by turn. */
function mulberry32(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const QUESTIONS = [
  'Hi!',
  'What is the capital of France?',
  'Name a color.',
  'Count to five.',
  'Tell me a joke.',
  'Why is the sky blue?',
];
const NEW_CHAT_EVERY = 25;

/** Waits for the answer count to pass `before`, clicking Stop once `stopAt` steps are shown. */
async function settleAnswer(before, stopAt) {
  if (stopAt) {
    await h.page.waitForFunction(
      ({ count, steps }) =>
        Number(document.body.dataset.answers ?? 0) > count ||
        document.querySelectorAll('#viz-strip .viz-chip').length >= steps,
      { count: before, steps: stopAt },
      { timeout: CHAT_TIMEOUT_MS },
    );
    await h.page.evaluate(
      () => document.getElementById('stop').hidden || document.getElementById('stop').click(),
    );
  }
  await h.page.waitForFunction((count) => Number(document.body.dataset.answers ?? 0) > count, before, {
    timeout: CHAT_TIMEOUT_MS,
  });
}

/** One turn: a new question (stopped early now and then), a regeneration or a branch. */
async function soakTurn(random, counts) {
  const before = await answersSoFar();
  const chips = await h.page.locator('#viz-strip .viz-chip:visible').count();
  const canRevise = chips > 1 && (await h.page.locator('#regenerate').isVisible());
  const roll = random();
  if (canRevise && roll < 0.2) {
    counts.regenerate += 1;
    await h.page.click('#regenerate');
    await settleAnswer(before, null);
  } else if (canRevise && roll < 0.4) {
    counts.branch += 1;
    await h.page
      .locator('#viz-strip .viz-chip:visible')
      .nth(Math.floor(random() * chips))
      .click();
    const candidates = h.page.locator('#viz-bars .viz-bar:not(.chosen) button:not([disabled])');
    const n = await candidates.count();
    assert.ok(n > 0, 'a step offers other candidates');
    await candidates.nth(Math.floor(random() * Math.min(n, 5))).click();
    await settleAnswer(before, null);
  } else {
    const stopAt = random() < 0.3 ? 1 + Math.floor(random() * 6) : null;
    counts[stopAt ? 'stopped' : 'asked'] += 1;
    await h.page.fill('#prompt', QUESTIONS[Math.floor(random() * QUESTIONS.length)]);
    await h.page.press('#prompt', 'Enter');
    await settleAnswer(before, stopAt);
  }
  if (await h.page.locator('#chat-error').isVisible())
    assert.fail(`turn failed: ${await h.page.locator('#chat-error').innerText()}`);
}

/**
 * Engine memory (wasm), the page's JS heap after a collection (null without `cdp`), and the
 * page's workers.
 */
async function footprint(cdp) {
  let heapBytes = null;
  if (cdp) {
    await cdp.send('HeapProfiler.collectGarbage');
    heapBytes = (await cdp.send('Runtime.getHeapUsage')).usedSize;
  }
  return {
    wasmBytes: Number(await h.page.evaluate(() => document.body.dataset.engineMemory)),
    heapBytes,
    workers: h.page.workers().length,
  };
}

const MB = 1 << 20;
// After the warm-up, the engine's memory must not grow at all beyond allocator slack, and the
// page's heap by no more than a few MB (it holds at most NEW_CHAT_EVERY turns of conversation).
const WASM_GROWTH_LIMIT = 2 * MB;
const HEAP_GROWTH_LIMIT = 8 * MB;

describe('a long session', { timeout: 1_800_000 }, () => {
  afterEach(closePage);

  test(`${SOAK_TURNS} turns of asking, stopping, regenerating and branching leave memory and workers flat`, async (t) => {
    assert.ok(SOAK_TURNS >= 2 * NEW_CHAT_EVERY, `INFERNO_SOAK_TURNS must be at least ${2 * NEW_CHAT_EVERY}`);
    await openPage();
    // The JS heap is read through the Chrome DevTools Protocol (a forced collection, then the
    // used size); Firefox offers a page no such measure, so there the heap check is left out.
    const cdp = browserName === 'chromium' ? await h.context.newCDPSession(h.page) : null;
    if (!cdp)
      t.diagnostic(
        `${browserName}: JS heap growth not checked (needs the Chrome DevTools Protocol); wasm memory and workers are`,
      );
    await loadModel(SMOLLM2());
    await assertModelLoaded(SMOLLM2_NAME);
    await setSettings({ max_tokens: 8, seed: 11 });
    const random = mulberry32(20261124);
    const counts = { asked: 0, stopped: 0, regenerate: 0, branch: 0 };
    let warm = null;
    const started = Date.now();
    for (let turn = 0; turn < SOAK_TURNS; turn++) {
      if (turn > 0 && turn % NEW_CHAT_EVERY === 0) await h.page.click('#new-chat');
      await soakTurn(random, counts);
      // Measured at the same point of a chat (its last turn), after one whole chat of warm-up.
      if (turn === 2 * NEW_CHAT_EVERY - 1) warm = await footprint(cdp);
    }
    const end = await footprint(cdp);
    const seconds = ((Date.now() - started) / 1000).toFixed(0);
    console.log(
      `soak: ${SOAK_TURNS} turns in ${seconds} s ${JSON.stringify(counts)}; warm ${JSON.stringify(warm)}, end ${JSON.stringify(end)}`,
    );
    for (const kind of Object.keys(counts)) assert.ok(counts[kind] > 0, `the soak did ${kind} at least once`);
    assert.ok(end.wasmBytes > 0, 'the page shows the engine memory');
    assert.ok(
      end.wasmBytes - warm.wasmBytes <= WASM_GROWTH_LIMIT,
      `engine memory grew ${warm.wasmBytes} -> ${end.wasmBytes}`,
    );
    if (cdp)
      assert.ok(
        end.heapBytes - warm.heapBytes <= HEAP_GROWTH_LIMIT,
        `JS heap grew ${warm.heapBytes} -> ${end.heapBytes}`,
      );
    assert.equal(end.workers, warm.workers, 'no workers piled up');
  });
});
