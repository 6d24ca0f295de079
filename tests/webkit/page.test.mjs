// The page in WebKit (Safari's engine), driven by a plain W3C WebDriver client
// (selenium-webdriver over WebKitGTK's WebKitWebDriver: Playwright and puppeteer cannot drive
// WebKitGTK). It loads SmolLM2, answers greedily exactly as the same SIMD128 build does in
// Chromium, stops, branches and inspects; and the page says what WebKit lacks and what runs
// instead.
//
//   node --test tests/webkit/   (scripts/webkit.mjs starts the driver, and Xvfb where no
//   display is set: WebKitGTK has no headless mode)

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { By } from 'selenium-webdriver';
import { CHROMIUM_ARGS, chromiumPath } from '../../scripts/chromium.mjs';
import { startServer } from '../../scripts/serve.mjs';
import { launchWebKit } from '../../scripts/webkit.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MODEL = path.resolve(
  ROOT,
  process.env.INFERNO_TEST_MODELS ?? '.cache/models',
  'SmolLM2-135M-Instruct.Q4_1.gguf',
);
const MODEL_NAME = 'SmolLM2-135M-Instruct.Q4_1.gguf';
const TIMEOUT_MS = 120_000;
const QUESTION = 'Name three colours.';

/** The greedy answer of `tokens` tokens to QUESTION from the plain SIMD128 build (the one
 *  WebKit runs) in headless Chromium, through the library: the same wasm must give the same
 *  bits in every engine. (Native x86 sums in other orders and differs by a token here.) */
async function chromiumAnswer(serverUrl, tokens) {
  const browser = await chromium.launch({ executablePath: chromiumPath, args: CHROMIUM_ARGS });
  try {
    const page = await browser.newPage();
    await page.route(
      (url) => url.pathname === '/blank.html',
      (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><title>reference</title>' }),
    );
    await page.goto(`${serverUrl}blank.html`);
    return await page.evaluate(
      async ({ url, question, tokens }) => {
        const { Inferno } = await import('./lib/inferno.js');
        const engine = await Inferno.load(url, { relaxed: false, threads: 1 });
        const reply = await engine.chat.completions.create({
          messages: [{ role: 'user', content: question }],
          temperature: 0,
          max_tokens: tokens,
        });
        engine.terminate();
        return reply.choices[0].message.content;
      },
      { url: `models/${MODEL_NAME}`, question: QUESTION, tokens },
    );
  } finally {
    await browser.close();
  }
}

describe('the page in WebKitGTK', { timeout: 600_000 }, () => {
  let server;
  let webkit;
  let driver;
  let site;

  before(async () => {
    assert.ok(existsSync(MODEL), `${MODEL} is missing: ./build.sh models fetches it`);
    // The page's files, and the test fixtures beside them (micro models and their goldens).
    const www = path.join(ROOT, 'www');
    const fixtures = path.join(ROOT, 'tests/fixtures');
    site = mkdtempSync(path.join(tmpdir(), 'inferno-webkit-'));
    for (const entry of readdirSync(www)) symlinkSync(path.join(www, entry), path.join(site, entry));
    symlinkSync(fixtures, path.join(site, 'fixtures'));
    server = await startServer({ root: site, port: 0, allow: [www, fixtures] });
    webkit = await launchWebKit();
    driver = await webkit.newSession();
    await driver.manage().setTimeouts({ script: TIMEOUT_MS });
  });

  after(async () => {
    await driver?.quit().catch(() => {});
    webkit?.stop();
    await server?.close();
    if (site) rmSync(site, { recursive: true, force: true });
  });

  /** fn(arg) run in the page; its (awaited) result. */
  const evaluate = (fn, arg) =>
    driver.executeAsyncScript(
      `const done = arguments[arguments.length - 1];
       Promise.resolve((${fn})(arguments[0])).then(done, (e) => done({ thrown: String(e) }));`,
      arg,
    );

  /** Polls fn(arg) in the page until it is truthy. */
  async function waitFor(fn, arg, what, timeout = TIMEOUT_MS) {
    const end = Date.now() + timeout;
    for (;;) {
      const value = await evaluate(fn, arg);
      if (value) return value;
      if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Sets a field's value as typing would. */
  const fill = (selector, value) =>
    evaluate(
      ({ selector, value }) => {
        const field = document.querySelector(selector);
        field.value = value;
        field.dispatchEvent(new Event('input', { bubbles: true }));
        field.dispatchEvent(new Event('change', { bubbles: true }));
      },
      { selector, value: String(value) },
    );

  const answers = () => evaluate(() => Number(document.body.dataset.answers ?? 0));

  async function lastAnswer() {
    return evaluate(() => ({
      reason: document.body.dataset.lastReason,
      text: document.querySelector('.message.assistant:last-child .answer-text')?.textContent ?? '',
      tokens: [...document.querySelectorAll('#viz-strip .viz-chip')].map((chip) => chip.textContent),
      prefilled: Number(document.body.dataset.lastPrefill),
    }));
  }

  /** Sends `message` (Enter in the prompt, as a person does) and waits for the answer. */
  async function ask(message) {
    const before = await answers();
    await fill('#prompt', message);
    await driver.findElement(By.id('prompt')).sendKeys('\uE007'); // Enter
    await waitFor((count) => Number(document.body.dataset.answers ?? 0) > count, before, 'the answer');
    return lastAnswer();
  }

  test('loads, answers as Chromium does, stops, branches and inspects; says what it lacks', async () => {
    await driver.get(server.url);
    await waitFor(() => document.querySelector('#engine-info.ok, #engine-info.failed'), null, 'the engine');
    const badge = await driver.findElement(By.id('engine-info')).getText();
    assert.match(badge, /SIMD128/);
    assert.doesNotMatch(badge, /relaxed SIMD/, 'WebKit has no relaxed SIMD: the plain build runs');

    // What WebKit lacks, and what runs instead, as the page says it.
    const capabilities = await evaluate(() =>
      import('./lib/inferno.js').then(({ Inferno }) => Inferno.capabilities()),
    );
    assert.equal(capabilities.relaxedSimd, false);
    assert.equal(capabilities.memory64, false);
    assert.equal(capabilities.webgpu, false);
    assert.equal(capabilities.threads, true, 'cross-origin isolated, with JSC_useSharedArrayBuffer');
    assert.equal(capabilities.coresBucketed, true);
    if (capabilities.hardwareThreads === 4) {
      assert.equal(capabilities.defaultThreads, 2, "WebKit's 4 may mean 2 cores");
      assert.match(badge, /· 2 threads$/);
    }
    const fallbacks = await evaluate(() => document.getElementById('browser-fallbacks').textContent);
    for (const feature of capabilities.missing.map((m) => m.feature))
      assert.ok(fallbacks.includes(feature), feature);
    assert.match(fallbacks, /relaxed SIMD \(so: the plain SIMD128 build/);
    assert.match(fallbacks, /Memory64 \(so: the 32-bit build: models up to about 4 GiB\)/);
    assert.match(fallbacks, /WebGPU \(so: the CPU runs every model\)/);
    if (!capabilities.opfs) assert.match(fallbacks, /OPFS/);

    // Load: a file chosen in the file input.
    const loads = await evaluate(() => Number(document.body.dataset.loads ?? 0));
    await driver.findElement(By.id('file-input')).sendKeys(MODEL);
    await waitFor((count) => Number(document.body.dataset.loads ?? 0) > count, loads, 'the load');
    assert.equal(await evaluate(() => document.body.dataset.model), MODEL_NAME);

    // A greedy answer, token for token what the same build gives in Chromium.
    await fill('#set-temperature', 0);
    await fill('#set-max-tokens', 24);
    const answer = await ask(QUESTION);
    assert.equal(answer.reason, 'max_tokens');
    assert.equal(answer.text, await chromiumAnswer(server.url, 24));

    // Stop: a long answer, stopped a few steps in.
    await fill('#set-max-tokens', 400);
    await evaluate(() => document.getElementById('new-chat').click());
    const before = await answers();
    await fill('#prompt', 'Tell me a long story about a lighthouse keeper.');
    await driver.findElement(By.id('prompt')).sendKeys('\uE007');
    await waitFor(() => document.querySelectorAll('#viz-strip .viz-chip').length >= 4, null, 'four steps');
    const atStop = await evaluate(() => {
      document.getElementById('stop').click();
      return document.querySelectorAll('#viz-strip .viz-chip').length;
    });
    await waitFor((count) => Number(document.body.dataset.answers ?? 0) > count, before, 'the stop');
    const stopped = await lastAnswer();
    assert.equal(stopped.reason, 'stopped');
    assert.ok(
      stopped.tokens.length < atStop + 50,
      `${stopped.tokens.length} steps after stopping at ${atStop}`,
    );

    // Branch: another candidate at step 3 regenerates from there; the prompt is not run again.
    await fill('#set-max-tokens', 12);
    await evaluate(() => document.getElementById('new-chat').click());
    const original = await ask('Write a haiku about the sea.');
    const step = 3;
    const forced = await evaluate((step) => {
      document.querySelectorAll('#viz-strip .viz-chip')[step].click();
      const candidate = document.querySelector('#viz-bars .viz-bar:not(.chosen) button:not([disabled])');
      const piece = candidate.querySelector('.viz-token').innerText;
      window.__answersBefore = Number(document.body.dataset.answers ?? 0);
      candidate.click();
      return piece;
    }, step);
    await waitFor(
      () => Number(document.body.dataset.answers ?? 0) > window.__answersBefore,
      null,
      'the branch',
    );
    const branched = await lastAnswer();
    assert.deepEqual(branched.tokens.slice(0, step), original.tokens.slice(0, step));
    assert.equal(branched.tokens[step], forced);
    assert.equal(branched.prefilled, original.prefilled, 'the prompt was not evaluated again');

    // Inspect: the loaded model's report.
    await evaluate(() => document.getElementById('tab-inspect').click());
    await waitFor(() => document.getElementById('summary-runs')?.textContent, null, 'the report');
    const report = await evaluate(() => ({
      runs: document.getElementById('summary-runs').textContent,
      text: document.getElementById('inspect-view').textContent,
    }));
    assert.match(report.runs, /^Yes/);
    assert.match(report.text, /llama/);
    assert.match(report.text, /272/, 'the tensor count');
  });

  test("embeddings: the micro Qwen3-Embedding, BERT and Nomic BERT files match llama.cpp's vectors", async () => {
    const cosines = await evaluate(async () => {
      const { Inferno } = await import('./lib/inferno.js');
      const cosine = (a, b) => {
        let [ab, aa, bb] = [0, 0, 0];
        for (let i = 0; i < a.length; i++)
          [ab, aa, bb] = [ab + a[i] * b[i], aa + a[i] * a[i], bb + b[i] * b[i]];
        return ab / Math.sqrt(aa * bb);
      };
      const found = {};
      for (const name of ['qwen3-embed-micro-q8_0', 'bert-micro-q8_0', 'nomic-bert-micro-q8_0']) {
        const golden = await (await fetch(`fixtures/golden/${name}.embeddings.json`)).json();
        const engine = await Inferno.load(`fixtures/models/${name}.gguf`);
        for (const [pooling, texts] of Object.entries(golden.poolings)) {
          const input = texts.map((t) => t.text);
          const reply = await engine.embeddings.create({ input, pooling, normalize: false });
          found[`${name} ${pooling}`] = reply.data.map((d, i) => cosine(d.embedding, texts[i].embedding));
        }
        engine.terminate();
      }
      return found;
    });
    assert.equal(cosines.thrown, undefined, cosines.thrown);
    assert.equal(Object.keys(cosines).length, 3 + 2 + 2);
    for (const [what, values] of Object.entries(cosines)) {
      assert.equal(values.length, 6, what);
      for (const c of values) assert.ok(c >= 0.9999, `${what}: cosine ${c}`);
    }
  });
});
