// The page test for what a long-lived chat tab must survive: hundreds of turns of chatting,
// stopping, regenerating and branching without memory or workers piling up. Run in Chromium
// only by ./build.sh test: Firefox gives a page no measure of its JS heap, and what the soak
// measures there too (the engine's memory, the workers) is the same code as in Chromium.
//
//   node --test tests/page/soak.test.mjs   (environment: see harness.mjs)
//   INFERNO_SOAK_TURNS=1000 node --test tests/page/soak.test.mjs   (a longer soak)

import { afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { MODELS, browserName, closePage, h, openPage, requireModel } from './harness.mjs';
import { CHAT_TIMEOUT_MS, answersSoFar, assertModelLoaded, loadModel, setSettings } from './chat-helpers.mjs';

const SMOLLM2 = () => requireModel(MODELS.smollm2);
const SMOLLM2_NAME = 'SmolLM2-135M-Instruct.Q4_1.gguf';
const SOAK_TURNS = Number(process.env.INFERNO_SOAK_TURNS ?? 200);

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
