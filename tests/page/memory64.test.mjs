// Files over 4 GiB: a 4.6 GiB model (scripts/make_big_model.py, which `./build.sh test`
// writes into .cache/models once) is inspected as chattable, loads through the 64-bit-memory
// build (threaded, on the machine's cores) and streams an answer in headless Chromium; the next small file goes back to the
// wasm32 builds; and a browser without Memory64 (relaxed SIMD switched off rules it out) says
// why it cannot load the file, before copying any of it.
//
//   node --test tests/page/memory64.test.mjs   (environment: see harness.mjs)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import path from 'node:path';
import { MODELS, h, modelsDir, pageSuite, requireModel, text } from './harness.mjs';

const BIG = { file: path.join(modelsDir, 'big-4.6gib-q4_0.gguf') };
const BIG_NAME = path.basename(BIG.file);
const LOAD_TIMEOUT_MS = 240_000;

/** Chooses a file in the chat tab and waits until it has loaded or failed. */
async function chooseAndWait(filePath) {
  const before = await h.page.evaluate(() => Number(document.body.dataset.loads ?? 0));
  await h.page.setInputFiles('#file-input', filePath);
  await h.page.waitForFunction((count) => Number(document.body.dataset.loads ?? 0) > count, before, {
    timeout: LOAD_TIMEOUT_MS,
  });
}

/** The model's line and where it runs ("CPU · 1 thread"). */
async function modelDetails() {
  return `${await text('#model-details')} · ${await text('#model-device')}`;
}

/** Asks with greedy sampling for at most `tokens` tokens; returns the answer's facts. */
async function askGreedy(question, tokens) {
  await h.page.fill('#set-temperature', '0');
  await h.page.fill('#set-max-tokens', String(tokens));
  const before = await h.page.evaluate(() => Number(document.body.dataset.answers ?? 0));
  await h.page.fill('#prompt', question);
  await h.page.press('#prompt', 'Enter');
  await h.page.waitForFunction((count) => Number(document.body.dataset.answers ?? 0) > count, before, {
    timeout: LOAD_TIMEOUT_MS,
  });
  return h.page.evaluate(() => ({
    reason: document.body.dataset.lastReason,
    meta: document.querySelector('.message.assistant:last-child .bubble-meta')?.textContent ?? '',
    tokens: document.querySelectorAll('#viz-strip .viz-chip').length,
  }));
}

pageSuite(
  'files over 4 GiB',
  () => {
    test('a 4.6 GiB file loads through the 64-bit-memory build and chats; a small one goes back', async () => {
      const size = statSync(requireModel(BIG)).size;
      assert.ok(size > 4 * 2 ** 30, `the test file must be over 4 GiB (${size} bytes)`);
      await chooseAndWait(BIG.file);
      if (await h.page.locator('#chat-error').isVisible())
        assert.fail(`load failed: ${await text('#chat-error')}`);
      assert.equal(await h.page.evaluate(() => document.body.dataset.model), BIG_NAME);
      const details = await modelDetails();
      assert.match(details, /64-bit memory/);
      // The threaded 64-bit build where the page is isolated and the machine has the cores.
      const cores = await h.page.evaluate(() => Math.min(navigator.hardwareConcurrency, 8));
      if (cores > 1)
        assert.match(details, new RegExp(`\\b${cores} threads\\b`), 'the 64-bit build runs threads');
      const answer = await askGreedy('Hi', 4);
      assert.equal(answer.reason, 'max_tokens', answer.meta);
      assert.equal(answer.tokens, 4);
      console.log(`# ${BIG_NAME} (${size} bytes): ${details} | ${answer.meta}`);

      // The inspector says it can chat here, from the header alone.
      await h.page.click('#tab-inspect');
      await h.page.waitForSelector('#summary-runs');
      assert.match(await text('#summary-runs'), /^Yes: this page can load it and chat$/);
      await h.page.click('#tab-chat');

      // A small file goes back to a wasm32 build (whose memory does not keep the 4.6 GiB).
      await chooseAndWait(requireModel(MODELS.smollm2));
      assert.equal(
        await h.page.evaluate(() => document.body.dataset.model),
        'SmolLM2-135M-Instruct.Q4_1.gguf',
      );
      assert.doesNotMatch(await modelDetails(), /64-bit memory/);
      const small = await askGreedy('What is the capital of France?', 8);
      assert.equal(small.tokens > 0, true, small.meta);
    });
  },
  { timeout: 600_000 },
);

pageSuite(
  'files over 4 GiB without Memory64',
  () => {
    test('the inspector and the loader say the file needs 64-bit memory', async () => {
      requireModel(BIG);
      await chooseAndWait(BIG.file);
      assert.equal(await h.page.locator('#chat-error').isVisible(), true, 'the load fails');
      assert.equal(await text('#chat-error-kind'), 'too_large');
      assert.match(await text('#chat-error-message'), /needs WebAssembly's 64-bit memory/);
      await h.page.click('#tab-inspect');
      await h.page.waitForSelector('#summary-runs');
      assert.match(await text('#summary-runs'), /^No: .*needs WebAssembly's 64-bit memory/);
    });
  },
  { hash: '?relaxed=0', timeout: 300_000 },
);
