// Page tests for the four wasm builds: the page picks the threaded one where it is
// cross-origin isolated, the single-threaded one where it is not, and plain SIMD128 where
// relaxed SIMD is switched off (what Safari gets); every one of them chats, and the thread
// count changes nothing in a greedy answer.
//
//   node --test tests/page/builds.test.mjs   (environment: see harness.mjs)

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../../scripts/serve.mjs';
import { MODELS, h, requireModel, watchForProblems, wwwRoot } from './harness.mjs';

const TIMEOUT_MS = 120_000;
const SMOLLM2_NAME = 'SmolLM2-135M-Instruct.Q4_1.gguf';

/** Opens the app at `url` in a fresh context; returns the page. */
async function open(url) {
  const context = await h.browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  watchForProblems(page);
  await page.goto(url);
  await page.waitForSelector('#engine-info.ok, #engine-info.failed');
  return page;
}

async function loadSmolLM2(page) {
  const before = await page.evaluate(() => Number(document.body.dataset.loads ?? 0));
  await page.setInputFiles('#file-input', requireModel(MODELS.smollm2));
  await page.waitForFunction((count) => Number(document.body.dataset.loads ?? 0) > count, before, {
    timeout: TIMEOUT_MS,
  });
  assert.equal(
    await page.evaluate(() => document.body.dataset.model),
    SMOLLM2_NAME,
    await page.locator('#chat-error').innerText(),
  );
}

/** A greedy answer of 24 tokens to a fixed question, in a new chat. */
async function greedyAnswer(page) {
  // Always a new, empty chat first (the click waits for the button): a question asked into
  // the previous chat would answer differently.
  await page.click('#new-chat');
  await page.waitForFunction(() => document.querySelectorAll('.message').length === 0);
  await page.fill('#set-temperature', '0');
  await page.fill('#set-max-tokens', '24');
  const before = await page.evaluate(() => Number(document.body.dataset.answers ?? 0));
  await page.fill('#prompt', 'Name three colours.');
  await page.press('#prompt', 'Enter');
  await page.waitForFunction((count) => Number(document.body.dataset.answers ?? 0) > count, before, {
    timeout: TIMEOUT_MS,
  });
  return page.evaluate(() => ({
    text: document.querySelector('.message.assistant:last-child .answer-text')?.textContent ?? '',
    meta: document.querySelector('.message.assistant:last-child .bubble-meta')?.textContent ?? '',
  }));
}

/** What the worker says about its build: {threads, build, relaxed_simd, ...}. */
async function engineInfo(page) {
  return page.evaluate(() => document.getElementById('engine-info').textContent);
}

/** Runs `run(page)` on a page of a fresh context (service workers blocked, so every request
 *  reaches the route) that gets the pool's helper script (src/web/pool_helpers.js, one copy per
 *  threaded build) as `patch(body, url)` makes it; then checks the page logged no errors. */
async function withHelperScript(patch, run) {
  h.problems = [];
  const context = await h.browser.newContext({
    viewport: { width: 1280, height: 900 },
    serviceWorkers: 'block',
  });
  const page = await context.newPage();
  watchForProblems(page);
  await page.route(
    (url) => url.pathname.endsWith('/pool_helpers.js'),
    async (route) => {
      const response = await route.fetch();
      await route.fulfill({ response, body: patch(await response.text(), route.request().url()) });
    },
  );
  try {
    await run(page);
  } finally {
    await context.close();
  }
  assert.deepEqual(h.problems, [], 'the page logged errors');
}

/** Whether the page runs more than one thread (on one core it starts no pool helpers). */
async function threaded(page) {
  return Math.min(await page.evaluate(() => navigator.hardwareConcurrency), 8) >= 2;
}

describe('wasm builds', { timeout: 600_000 }, () => {
  test('an isolated page runs the threaded relaxed build, and one thread answers the same', async () => {
    h.problems = [];
    const page = await open(h.server.url);
    try {
      assert.equal(await page.evaluate(() => self.crossOriginIsolated), true);
      const cores = await page.evaluate(() => navigator.hardwareConcurrency);
      const expected = Math.min(cores, 8);
      await loadSmolLM2(page);
      assert.match(await engineInfo(page), new RegExp(`relaxed SIMD · ${expected} threads?$`));
      assert.match(
        await page.locator('#model-device').innerText(),
        new RegExp(`^CPU · ${expected} threads?`),
      );
      const many = await greedyAnswer(page);
      assert.match(many.meta, new RegExp(`${expected} threads?`));
      assert.ok(many.text.length > 10, many.text);

      // Choosing 1 thread reloads the model into a new worker running the single-threaded build.
      const loads = await page.evaluate(() => Number(document.body.dataset.loads ?? 0));
      await page.selectOption('#set-threads', '1');
      await page.waitForFunction((count) => Number(document.body.dataset.loads ?? 0) > count, loads, {
        timeout: TIMEOUT_MS,
      });
      assert.equal(await page.evaluate(() => document.body.dataset.model), SMOLLM2_NAME);
      await page.waitForFunction(() =>
        /· 1 thread$/.test(document.getElementById('engine-info').textContent),
      );
      const one = await greedyAnswer(page);
      assert.match(one.meta, /1 thread/);
      // Each answer's meta line (threads, seed, speeds) goes with a mismatch: this assertion
      // failed again on 2026-11-29, the 2-thread answer each time unlike greedy; cause not found.
      const why = `threads split rows and heads, never a sum (meta: ${many.meta} | ${one.meta})`;
      assert.equal(one.text, many.text, why);
    } finally {
      await page.context().close();
    }
    assert.deepEqual(h.problems, [], 'the page logged errors');
  });

  test('a pool helper that never takes a part leaves the engine answering on its other threads', async () => {
    // The helper script is served with its entry into the pool cut out: the helper starts and
    // reports ready, then never works, as a helper the browser stops running would. rayon's
    // pool start waited synchronously for every helper to enter its loop: the engine worker
    // would have frozen for good.
    let idleHelpers = 0;
    const patch = (body) => {
      assert.ok(body.includes('glue.runPoolHelper();'), 'the helper script enters the pool where expected');
      idleHelpers += 1;
      return body.replace('glue.runPoolHelper();', '/* never joins */');
    };
    await withHelperScript(patch, async (page) => {
      await page.goto(h.server.url);
      await page.waitForSelector('#engine-info.ok, #engine-info.failed');
      if (!(await threaded(page))) return;
      await loadSmolLM2(page);
      // The engine worker's glue imports the script too: one fetch for it and one per helper.
      assert.ok(idleHelpers >= 2, `helper scripts served: ${idleHelpers}`);
      const answer = await greedyAnswer(page);
      assert.ok(answer.text.length > 10, answer.text);
    });
  });

  test('an engine worker stuck starting a pool helper is replaced, and the load goes on in a new one', async () => {
    // Headless Firefox 153 now and then never returns from `new Worker()` inside a worker
    // (docs/repro/firefox-nested-worker). The first engine worker gets a helper script that hangs
    // exactly there; the client must see it stuck and give the load to a new worker.
    const seen = new Set();
    let served = 0;
    const patch = (body, url) => {
      const spawn = 'const worker = new Worker(';
      assert.ok(body.includes(spawn), 'the helper script spawns where expected');
      served += 1;
      // Each threaded build has its own copy, and the first engine worker imports all three.
      const first = !seen.has(url);
      seen.add(url);
      // The stuck worker first says when it got stuck (a synchronous request, answered below).
      const stuck = `{ const at = new XMLHttpRequest(); at.open('GET', '/__stuck-spawn', false); at.send(); }`;
      return first ? body.replace(spawn, `${stuck}\n      for (;;);\n      ${spawn}`) : body;
    };
    let stuckAt = null;
    const workerStarts = [];
    await withHelperScript(patch, async (page) => {
      await page.route(
        (url) => url.pathname === '/__stuck-spawn',
        async (route) => {
          stuckAt ??= Date.now();
          await route.fulfill({ status: 204, body: '' });
        },
      );
      await page.route(
        (url) => url.pathname.endsWith('/worker.js'),
        async (route) => {
          workerStarts.push(Date.now());
          await route.fulfill({ response: await route.fetch() });
        },
      );
      await page.goto(h.server.url);
      // The page starts its engine at once (to show what it runs): that start is the stuck one.
      await page.waitForSelector('#engine-info.ok, #engine-info.failed');
      if (!(await threaded(page))) return;
      assert.equal(await page.locator('#engine-info.ok').count(), 1, 'the engine started');
      // Replaced after 3 s stuck (SPAWN_STUCK_MS, checked each 1 s): before the client's
      // never-started retry (8 s), let alone the start timeout (20 s, which a frozen worker
      // cannot even run) or the stall (60 s). Timed from the stuck spawn to the new worker's
      // start, the watchdog's part alone: timed from the page's start, as it was, the bound
      // also held two fetches and compiles of the wasm build, which on a busy machine (Firefox's
      // first run after a rebuild) took past 7.5 s.
      assert.ok(stuckAt !== null, 'the first engine worker got stuck spawning a helper');
      const replaced = workerStarts.find((at) => at > stuckAt);
      assert.ok(replaced !== undefined, 'a new engine worker started after the stuck one');
      const seconds = (replaced - stuckAt) / 1000;
      assert.ok(
        seconds >= 2.9 && seconds < 5.5,
        `the stuck worker was replaced ${seconds} s after it got stuck`,
      );
      assert.ok(
        served > seen.size,
        `helper scripts served: ${served} (stuck worker, new worker, its helper)`,
      );
      await loadSmolLM2(page);
      const answer = await greedyAnswer(page);
      assert.ok(answer.text.length > 10, answer.text);
    });
  });

  test('a saved thread count starts the engine with it: a dropped file is inspected and loaded at once', async () => {
    h.problems = [];
    const context = await h.browser.newContext({ viewport: { width: 1280, height: 900 } });
    const key = 'inferno.chat.v1'; // CHAT_KEY in www/lib/storage.js
    await context.addInitScript(
      ([storageKey]) => {
        if (!localStorage.getItem(storageKey)) {
          localStorage.setItem(storageKey, JSON.stringify({ messages: [], settings: { threads: '1' } }));
        }
      },
      [key],
    );
    const page = await context.newPage();
    watchForProblems(page);
    try {
      await page.goto(h.server.url);
      await page.waitForSelector('#engine-info.ok');
      assert.match(await engineInfo(page), /· 1 thread$/);
      assert.equal(await page.locator('#set-threads').inputValue(), '1');
      await loadSmolLM2(page); // Inspects the file and loads it, both in the same worker.
      await page.waitForFunction(() => Number(document.body.dataset.inspections ?? 0) > 0);
      assert.equal(await page.locator('#error').isVisible(), false, await page.locator('#error').innerText());
      assert.match(await engineInfo(page), /· 1 thread$/);
    } finally {
      await context.close();
    }
    assert.deepEqual(h.problems, [], 'the page logged errors');
  });

  test('without cross-origin isolation the page chats on one thread', async () => {
    const server = await startServer({ root: wwwRoot, port: 0, isolation: false });
    h.problems = [];
    const page = await open(server.url);
    try {
      assert.equal(await page.evaluate(() => self.crossOriginIsolated), false);
      assert.equal(await page.locator('#set-threads').isDisabled(), true);
      assert.match(await page.locator('#threads-note').innerText(), /not cross-origin isolated/);
      await loadSmolLM2(page);
      assert.match(await engineInfo(page), /· 1 thread$/);
      const answer = await greedyAnswer(page);
      assert.ok(answer.text.length > 10, answer.text);
      assert.match(answer.meta, /1 thread/);
    } finally {
      await page.context().close();
      await server.close();
    }
    assert.deepEqual(h.problems, [], 'the page logged errors');
  });

  test('with relaxed SIMD switched off the plain SIMD128 build chats, threaded', async () => {
    h.problems = [];
    const page = await open(`${h.server.url}?relaxed=0`);
    try {
      await loadSmolLM2(page);
      const info = await engineInfo(page);
      assert.match(info, /SIMD128/);
      assert.doesNotMatch(info, /relaxed/);
      const answer = await greedyAnswer(page);
      assert.ok(answer.text.length > 10, answer.text);
    } finally {
      await page.context().close();
    }
    assert.deepEqual(h.problems, [], 'the page logged errors');
  });
});
