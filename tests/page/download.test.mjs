// Downloads that survive (www/lib/download.js), as a page meets them through the library: a model
// URL loaded with `resumable: true` from scripts/serve.mjs while the server cuts one of its
// connections mid-file, then while it hangs one and the page reloads, then from a server that
// answers no Range request. Each time the loaded model's greedy answer equals the one it gives
// streamed plainly (a wrong byte in 98 MB of weights would change it, or fail the load).
//
//   node --test tests/page/download.test.mjs   (environment: see harness.mjs)

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../../scripts/serve.mjs';
import { MODELS, h, requireModel, watchForProblems, wwwRoot } from './harness.mjs';

const MODEL_PATH = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';
const SIZE = 98_362_432;

/** In the page: loads `url` into a new engine with `options`, and answers greedily; returns
 *  the phases, the largest rate and resumedFrom seen, the model's download story and the
 *  answer. A load still running is reachable as window.__progress. */
async function loadAndAnswer(page, url, options) {
  return page.evaluate(
    async ({ url, options }) => {
      const { Inferno } = await import('./lib/inferno.js');
      const seen = { phases: [], rate: 0, resumedFrom: null };
      window.__progress = seen;
      const engine = await Inferno.load(url, {
        ...options,
        onProgress: (p) => {
          if (!seen.phases.includes(p.phase)) seen.phases.push(p.phase);
          if (p.phase === 'downloading') seen.loaded = p.loaded;
          seen.rate = Math.max(seen.rate, p.rate);
          if (p.resumedFrom !== undefined) seen.resumedFrom = p.resumedFrom;
        },
      });
      const reply = await engine.chat.completions.create({
        messages: [{ role: 'user', content: 'Name three colours.' }],
        temperature: 0,
        max_tokens: 12,
      });
      const root = await navigator.storage.getDirectory();
      const left = [];
      const downloads = await root.getDirectoryHandle('downloads', { create: true });
      for await (const [name] of downloads.entries()) left.push(name);
      const result = {
        ...seen,
        download: engine.model.download ?? null,
        answer: reply.choices[0].message.content,
        left,
      };
      engine.terminate();
      return result;
    },
    { url, options },
  );
}

describe('resumable downloads', { timeout: 240_000 }, () => {
  let faulty;
  let plain;
  let context;
  let page;

  before(async () => {
    requireModel(MODELS.smollm2);
    // Byte 60,000,000 lies in the third of four ranges, 30,000,000 in the second. The hang
    // is of another URL (a query), so of another download.
    faulty = await startServer({
      root: wwwRoot,
      port: 0,
      dropOnce: { [MODEL_PATH]: 60_000_000 },
      stallOnce: { [`${MODEL_PATH}?hang`]: 30_000_000 },
    });
    plain = await startServer({ root: wwwRoot, port: 0, ranges: false });
  });

  after(async () => {
    await context?.close();
    await faulty?.close();
    await plain?.close();
  });

  /** A page of the faulty server's origin with nothing on it but the library to import. */
  async function openBlank(server) {
    await context?.close();
    h.problems = [];
    context = await h.browser.newContext();
    page = await context.newPage();
    watchForProblems(page);
    await page.route(
      (url) => url.pathname === '/blank.html',
      (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>downloads</title>' }),
    );
    await page.goto(`${server.url}blank.html`);
  }

  test('a dropped connection resumes its range; a hung one survives a reload; no Range, one stream', async () => {
    await openBlank(faulty);
    const url = faulty.url + MODEL_PATH.slice(1);
    const streamed = await loadAndAnswer(page, url, { resumable: false });
    assert.deepEqual(streamed.phases, ['reading', 'validating', 'device', 'ready']);
    assert.equal(streamed.download, null);
    assert.ok(streamed.rate > 0, 'reading has a rate');

    // The server cuts the third range's connection at byte 60,000,000 (once): that range
    // resumes from its last byte written.
    const dropped = await loadAndAnswer(page, url, { resumable: true });
    assert.equal(dropped.answer, streamed.answer);
    assert.deepEqual(dropped.phases.slice(0, 2), ['downloading', 'reading']);
    assert.equal(dropped.download.parts, 4);
    assert.equal(dropped.download.resumedFrom, 0);
    assert.ok(dropped.download.retries >= 1, `retries: ${dropped.download.retries}`);
    assert.ok(dropped.rate > 0, 'downloading has a rate');
    assert.deepEqual(dropped.left, [], 'a finished download is removed from OPFS');

    // The server hangs the second range at byte 30,000,000 (once): the page reloads while it
    // waits, and the next load continues from what the first wrote.
    const hung = `${url}?hang`;
    page.evaluate((u) => {
      import('./lib/inferno.js').then(({ Inferno }) =>
        Inferno.load(u, {
          resumable: true,
          onProgress: (p) => {
            window.__loaded = p.loaded;
          },
        }),
      );
    }, hung);
    // The three other ranges finish (each saved as it ends); the hung one never does.
    const threeRanges = 3 * Math.ceil(SIZE / 4);
    await page.waitForFunction((n) => window.__loaded >= n, threeRanges, { timeout: 60_000 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    await page.reload();
    const resumed = await loadAndAnswer(page, hung, { resumable: true });
    assert.equal(resumed.answer, streamed.answer);
    assert.ok(
      resumed.resumedFrom >= threeRanges && resumed.resumedFrom < SIZE,
      `resumed from ${resumed.resumedFrom}`,
    );
    assert.equal(resumed.download.resumedFrom, resumed.resumedFrom);
    assert.deepEqual(resumed.left, []);

    // A server without Range requests: one stream, no download phase.
    await openBlank(plain);
    const once = await loadAndAnswer(page, plain.url + MODEL_PATH.slice(1), { resumable: true });
    assert.equal(once.answer, streamed.answer);
    assert.deepEqual(once.phases, ['reading', 'validating', 'device', 'ready']);
    assert.equal(once.download, null);
    assert.deepEqual(h.problems, [], 'the page logged errors');
  });
});
