// The library on the GPU, in a headless Chromium whose WebGPU is SwiftShader (a software
// renderer: slow, so the model is the micro Qwen3 and answers are a few tokens). What a web
// developer does with `device`: 'auto' passes over a software adapter for the CPU engine,
// 'gpu' runs on it and answers as the CPU does (greedy, parting only at a near tie), streams,
// stops, branches and reuses its cache on a second turn; a GPU lost mid-answer fails that
// answer with gpu_lost and the next one runs on the CPU. Chromium without WebGPU's flag has
// no adapter: 'gpu' is refused with no_gpu and 'auto' runs on the CPU.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS, chromiumPath } from '../../scripts/chromium.mjs';
import { startServer } from '../../scripts/serve.mjs';
import {
  MODELS,
  browserName,
  fixtureModelsDir,
  h,
  modelsDir,
  onlyIn,
  repoRoot,
  requireFile,
  requireModel,
  watchForProblems,
  wwwRoot,
} from './harness.mjs';
import { ask, loadModel, setSettings } from './chat-helpers.mjs';

const WEBGPU_ARGS = [
  ...CHROMIUM_ARGS.filter((arg) => arg !== '--disable-gpu'),
  '--enable-unsafe-webgpu',
  '--use-webgpu-adapter=swiftshader',
];
const TIMEOUT_MS = 600_000;
/** How far below the CPU's best log-probability the GPU's pick may be: a near tie. */
const TIE = 1.0;

/**
 * Greedy on both devices: the GPU's steps (`{token}`) are the CPU's (`{token, trace}`) until,
 * at most, a near tie that the CPU's candidates show (the GPU's pick within TIE of the best in
 * log-probability).
 */
function agreesUntilANearTie(cpuSteps, gpuSteps, label) {
  const parted = gpuSteps.findIndex((step, i) => step.token !== cpuSteps[i]?.token);
  if (parted === -1) return;
  const candidates = cpuSteps[parted].trace;
  const picked = candidates.find((c) => c.id === gpuSteps[parted].token);
  assert.ok(picked, `${label} step ${parted}: the GPU's token is not among the CPU's candidates`);
  const short = Math.log(candidates[0].probability) - Math.log(picked.probability);
  assert.ok(short <= TIE, `${label} step ${parted}: the GPU's pick is ${short} below the CPU's`);
}

/**
 * Serves worker.js with a test-only listener in front of its own: a chat whose messages say
 * `__lose_gpu__` destroys the worker's GPU device after the answer's first token, as a driver
 * reset would. Nothing of this ships.
 */
async function routeLosableGpu(page) {
  await page.route(
    (url) => url.pathname.endsWith('/worker.js'),
    async (route) => {
      const response = await route.fetch();
      // SwiftShader calls itself a fallback adapter, where the engine reads back every logit
      // (ranking the best costs more than that on a software adapter). Told otherwise, the
      // engine ranks them on the device, as on a GPU, so these tests run that path too; the
      // page still knows it for SwiftShader by its name.
      const injected = `const adapterInfo = Object.getOwnPropertyDescriptor(GPUAdapter.prototype, 'info').get;
Object.defineProperty(GPUAdapter.prototype, 'info', {
  get() {
    const info = adapterInfo.call(this);
    return {
      vendor: info.vendor,
      architecture: info.architecture,
      device: info.device,
      description: info.description,
      subgroupMinSize: info.subgroupMinSize,
      subgroupMaxSize: info.subgroupMaxSize,
      isFallbackAdapter: false,
    };
  },
});
let currentGpu = null;
import('./worker-load.js').then((loading) => (currentGpu = loading.currentGpu));
self.addEventListener('message', (event) => {
  if (!JSON.stringify(event.data?.messages ?? null).includes('__lose_gpu__')) return;
  const post = self.postMessage.bind(self);
  self.postMessage = (message, ...rest) => {
    post(message, ...rest);
    if (message?.type === 'token') {
      self.postMessage = post;
      currentGpu().then((opened) => opened.gpu.destroy());
    }
  };
});
`;
      await route.fulfill({ response, body: injected + (await response.text()) });
    },
  );
}

/**
 * Serves worker.js with SwiftShader posing as a hardware adapter (so that `auto` measures it
 * rather than passing over it) and one device slowed by `SLOW_MS` a decode step (a busy wait in
 * the glue's `WebEngine.step` while the engine runs there), so the probe has a clear winner.
 * Nothing of this ships.
 * @param {'gpu' | 'cpu'} slowDevice
 */
async function routePosingHardware(page, slowDevice) {
  await page.route(
    (url) => url.pathname.endsWith('/worker.js'),
    async (route) => {
      const response = await route.fetch();
      const injected = `Object.defineProperty(GPUAdapter.prototype, 'info', {
  get: () => ({ vendor: 'stand-in', architecture: 'hardware', description: 'a software adapter posing as hardware', isFallbackAdapter: false }),
});
for (const build of ['pkg', 'pkg-relaxed', 'pkg-threads', 'pkg-relaxed-threads'])
  import('./' + build + '/inferno.js').then(({ WebEngine }) => {
    const step = WebEngine.prototype.step;
    WebEngine.prototype.step = function (...args) {
      if (this.device() === ${JSON.stringify(slowDevice)}) {
        const until = performance.now() + ${SLOW_MS};
        while (performance.now() < until);
      }
      return step.apply(this, args);
    };
  });
`;
      await route.fulfill({ response, body: injected + (await response.text()) });
    },
  );
}
/** What the slowed device loses a decode step: far more than the micro model's step on either
 *  (on two cores: about 3 ms on the CPU, about 215 ms on SwiftShader). */
const SLOW_MS = 1000;

/**
 * A page of the app's origin that runs nothing itself (a script of the package, shown as text),
 * the model's bytes in `window.modelBytes`; `losable` routes the test-only worker in.
 */
async function blankPage(browser, { losable = true, model = MODELS.qwen3Micro, slowDevice = null } = {}) {
  const context = await browser.newContext({ serviceWorkers: 'block' });
  const page = await context.newPage();
  watchForProblems(page);
  if (losable) await routeLosableGpu(page);
  if (slowDevice) await routePosingHardware(page, slowDevice);
  await page.goto(`${h.server.url}lib/defaults.js`);
  const bytes = readFileSync(requireModel(model)).toString('base64');
  await page.evaluate((base64) => {
    window.modelBytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  }, bytes);
  return { context, page };
}

describe('the library on the GPU (SwiftShader WebGPU)', { timeout: TIMEOUT_MS }, () => {
  let browser;
  before(async () => {
    if (browserName === 'chromium')
      browser = await chromium.launch({ executablePath: chromiumPath, args: WEBGPU_ARGS });
  });
  after(async () => {
    await browser?.close();
  });

  test(
    'auto passes over a software GPU; gpu answers as the CPU does, stops, branches and reuses its cache',
    {
      skip: onlyIn('chromium', 'Firefox ESR has no WebGPU'),
    },
    async () => {
      const { context, page } = await blankPage(browser);
      const result = await page.evaluate(async () => {
        const { Inferno } = await import('/lib/inferno.js');
        const model = new Blob([window.modelBytes]);
        const question = {
          messages: [{ role: 'user', content: 'What is the capital of France?' }],
          temperature: 0,
        };
        const stream = async (engine, params) => {
          const chunks = [];
          for await (const chunk of await engine.chat.completions.create({ ...params, stream: true }))
            chunks.push(chunk);
          return chunks;
        };
        const steps = (chunks) => chunks.map((c) => c.inferno?.step).filter(Boolean);
        const out = { capabilities: Inferno.capabilities(), adapter: await Inferno.gpuAdapter() };

        const auto = await Inferno.load(model);
        out.auto = auto.model.device;
        const askCpu = { ...question, max_tokens: 5, logprobs: true, top_logprobs: 5 };
        out.cpu = steps(await stream(auto, askCpu)).map((s) => ({
          token: s.token,
          trace: s.trace.candidates,
        }));
        auto.terminate();

        const engine = await Inferno.load(model, { device: 'gpu' });
        out.gpuDevice = engine.model.device;
        out.gpu = steps(await stream(engine, askCpu)).map((s) => s.token);

        // Stopped after the second token.
        const controller = new AbortController();
        const stopped = [];
        const long = { ...question, max_tokens: 40, signal: controller.signal };
        for await (const chunk of await engine.chat.completions.create({ ...long, stream: true })) {
          if (chunk.inferno?.step) stopped.push(chunk.inferno.step);
          if (stopped.length === 2) controller.abort();
        }
        out.stopped = stopped.length;

        // A branch from step 1 with its runner-up forced.
        const runnerUp = stopped[1].trace.candidates[1].id;
        const branch = await engine.branch({ step: 1, token: runnerUp, max_tokens: 3 });
        out.branch = {
          runnerUp,
          steps: branch.inferno.steps.map((step) => ({ token: step.token, forced: step.forced })),
        };
        out.stoppedFirst = stopped[0].token;

        // A second turn: the first turn's prompt and answer come from the cache.
        const first = await engine.chat.completions.create({ ...question, max_tokens: 3 });
        const second = await engine.chat.completions.create({
          messages: [
            ...question.messages,
            first.choices[0].message,
            { role: 'user', content: 'And of Spain?' },
          ],
          temperature: 0,
          max_tokens: 3,
        });
        out.secondTurn = second.usage;
        out.device = engine.model.device;
        engine.terminate();
        return out;
      });
      assert.equal(result.capabilities.webgpu, true);
      assert.equal(result.adapter.software, true, JSON.stringify(result.adapter));
      assert.equal(result.auto.type, 'cpu');
      assert.match(result.auto.reason, /software renderer/);
      assert.equal(result.gpuDevice.type, 'gpu');
      assert.match(result.gpuDevice.name, /swiftshader/i);
      agreesUntilANearTie(
        result.cpu,
        result.gpu.map((token) => ({ token })),
        'qwen3 micro',
      );
      assert.equal(result.gpu.length, result.cpu.length);
      assert.equal(result.stopped, 2);
      // The branch keeps step 0, forces the runner-up at step 1 and goes on from there.
      assert.deepEqual(result.branch.steps.slice(0, 2), [
        { token: result.stoppedFirst, forced: false },
        { token: result.branch.runnerUp, forced: true },
      ]);
      assert.equal(result.branch.steps.length, 3);
      assert.ok(result.secondTurn.prompt_tokens_details.cached_tokens > 0, JSON.stringify(result.secondTurn));
      assert.equal(result.device.type, 'gpu');
      await context.close();
    },
  );

  test(
    'auto on a hardware adapter times both devices, keeps the faster, says why and remembers it; the probe leaves no tokens behind',
    {
      skip: onlyIn('chromium', 'Firefox ESR has no WebGPU'),
    },
    async () => {
      for (const slowDevice of /** @type {const} */ (['cpu', 'gpu'])) {
        const { context, page } = await blankPage(browser, { losable: false, slowDevice });
        const result = await page.evaluate(async () => {
          const { Inferno } = await import('/lib/inferno.js');
          const model = new Blob([window.modelBytes]);
          const question = {
            messages: [{ role: 'user', content: 'What is the capital of France?' }],
            temperature: 0,
            max_tokens: 4,
            logprobs: true,
            top_logprobs: 5,
          };
          const steps = (reply) =>
            reply.inferno.steps.map((s) => ({ token: s.token, trace: s.trace?.candidates }));
          const out = {};
          const first = await Inferno.load(model);
          out.first = first.model.device;
          out.firstSteps = steps(await first.chat.completions.create(question));
          first.terminate();
          const again = await Inferno.load(model);
          out.again = again.model.device;
          again.terminate();
          const cpu = await Inferno.load(model, { device: 'cpu' });
          out.cpuSteps = steps(await cpu.chat.completions.create(question));
          cpu.terminate();
          return out;
        });
        const label = `${slowDevice} slowed`;
        const fast = slowDevice === 'cpu' ? 'gpu' : 'cpu';
        const { first, again } = result;
        assert.equal(first.type, fast, `${label}: ${JSON.stringify(first)}`);
        assert.match(
          first.reason,
          new RegExp(`^the ${fast.toUpperCase()} is faster here: [0-9.]+ ms a token`),
        );
        const slowMs = slowDevice === 'cpu' ? first.measured.cpu_ms : first.measured.gpu_ms;
        const fastMs = slowDevice === 'cpu' ? first.measured.gpu_ms : first.measured.cpu_ms;
        assert.ok(slowMs >= SLOW_MS && fastMs < slowMs, `${label}: ${JSON.stringify(first.measured)}`);
        assert.equal(first.measured.remembered, false);
        // The next load of the same file skips the probe and says when it was measured.
        assert.equal(again.type, fast);
        assert.deepEqual(again.measured, { ...first.measured, remembered: true });
        assert.match(again.reason, /\(measured \d{4}-\d{2}-\d{2}\)$/);
        // The probe's tokens are gone: the first answer is the CPU's, greedy (up to a near tie).
        agreesUntilANearTie(result.cpuSteps, result.firstSteps, label);
        assert.equal(result.firstSteps.length, result.cpuSteps.length);
        await context.close();
      }
    },
  );

  test(
    'qwen35 on the GPU: its recurrent state and checkpoints live on the device; a branch replays from one, regenerating runs nothing',
    {
      skip: onlyIn('chromium', 'Firefox ESR has no WebGPU'),
    },
    async () => {
      const qwen35 = { file: MODELS.qwen3Micro.file.replace('qwen3-micro-q4_0', 'qwen35-micro-q8_0') };
      const { context, page } = await blankPage(browser, { losable: false, model: qwen35 });
      const result = await page.evaluate(async () => {
        const { Inferno } = await import('/lib/inferno.js');
        const model = new Blob([window.modelBytes]);
        const question = {
          messages: [{ role: 'user', content: 'What is the capital of France?' }],
          temperature: 0,
          max_tokens: 6,
          logprobs: true,
          top_logprobs: 5,
        };
        const answer = async (engine, params) => {
          const steps = [];
          let last = null;
          for await (const chunk of await engine.chat.completions.create({ ...params, stream: true })) {
            if (chunk.inferno?.step) steps.push(chunk.inferno.step);
            last = chunk;
          }
          return { steps, usage: last.usage, stats: last.inferno.stats };
        };
        const out = {};
        const cpu = await Inferno.load(model, { device: 'cpu' });
        out.cpu = (await answer(cpu, question)).steps.map((s) => ({
          token: s.token,
          trace: s.trace.candidates,
        }));
        cpu.terminate();

        const engine = await Inferno.load(model, { device: 'gpu' });
        out.device = engine.model.device.type;
        const first = await answer(engine, question);
        out.gpu = first.steps.map((s) => s.token);
        out.checkpoints = first.stats.checkpoints;
        // Branch from step 3 with its runner-up: back to the prompt's checkpoint, 3 replayed.
        const runnerUp = first.steps[3].trace.candidates[1].id;
        const branch = await engine.branch({ step: 3, token: runnerUp, max_tokens: 2 });
        out.branch = {
          runnerUp,
          tokens: branch.inferno.steps.map((s) => s.token),
          replayed: branch.inferno.stats.replayed,
        };
        // The same question again: the prompt's checkpoint kept its logits (read back after
        // the checkpoint was taken), so nothing is evaluated.
        const again = await answer(engine, question);
        out.again = { tokens: again.steps.map((s) => s.token), stats: again.stats };
        engine.terminate();
        return out;
      });
      assert.equal(result.device, 'gpu');
      agreesUntilANearTie(
        result.cpu,
        result.gpu.map((token) => ({ token })),
        'qwen35',
      );
      assert.equal(result.gpu.length, 6);
      assert.ok(
        result.checkpoints.held >= 1 && result.checkpoints.bytes_each > 0,
        JSON.stringify(result.checkpoints),
      );
      assert.deepEqual(result.branch.tokens.slice(0, 4), [...result.gpu.slice(0, 3), result.branch.runnerUp]);
      assert.equal(result.branch.replayed, 3);
      assert.deepEqual(result.again.tokens, result.gpu);
      assert.equal(result.again.stats.evaluated, 0, JSON.stringify(result.again.stats));
      assert.equal(result.again.stats.replayed, 0);
      await context.close();
    },
  );

  test(
    "the real models' weight type that tests/web/gpu.rs lacks, Q4_1, loaded by URL, answers on the GPU as on the CPU",
    {
      skip: onlyIn('chromium', 'Firefox ESR has no WebGPU'),
    },
    async () => {
      // SmolLM2 Q4_1 and Gemma 3 Q4_K_M themselves run on the GPU natively (tests/gpu.rs, on
      // lavapipe, the same WGSL); here, on SwiftShader, their four tokens each took five and a
      // half minutes of a two-core machine. In this browser's WGSL compiler, tests/web/gpu.rs
      // runs Q4_K, Q6_K and the Llama and Gemma layers on micro files; this runs the one weight
      // type it has no file for (the micro Q4_1 file is made, not committed).
      const files = { 'qwen3-q4_1': path.join(modelsDir, 'qwen3-micro-q4_1.gguf') };
      for (const file of Object.values(files)) requireFile(file);
      // Served by a server of the app's own, which may follow links to the models (as the
      // benchmark's does).
      const linkDir = path.join(wwwRoot, 'models', 'gpu-test');
      rmSync(linkDir, { recursive: true, force: true });
      mkdirSync(linkDir, { recursive: true });
      for (const [name, file] of Object.entries(files))
        symlinkSync(realpathSync(file), path.join(linkDir, `${name}.gguf`));
      const allow = [...new Set(Object.values(files).map((file) => path.dirname(realpathSync(file))))];
      const server = await startServer({ root: wwwRoot, port: 0, allow });
      const context = await browser.newContext({ serviceWorkers: 'block' });
      const page = await context.newPage();
      watchForProblems(page);
      await page.goto(`${server.url}lib/defaults.js`);
      const results = await page.evaluate(async (names) => {
        const { Inferno } = await import('/lib/inferno.js');
        const question = {
          messages: [{ role: 'user', content: 'What is the capital of France?' }],
          temperature: 0,
          max_tokens: 4,
          logprobs: true,
          top_logprobs: 5,
        };
        const answer = async (device, url) => {
          const engine = await Inferno.load(url, { device });
          const reply = await engine.chat.completions.create(question);
          const steps = reply.inferno.steps.map((s) => ({ token: s.token, trace: s.trace.candidates }));
          const used = engine.model.device.type;
          engine.terminate();
          return { device: used, steps };
        };
        const out = {};
        for (const name of names) {
          const url = `/models/gpu-test/${name}.gguf`;
          out[name] = { cpu: await answer('cpu', url), gpu: await answer('gpu', url) };
        }
        return out;
      }, Object.keys(files));
      for (const [name, { cpu, gpu }] of Object.entries(results)) {
        assert.equal(gpu.device, 'gpu', name);
        assert.equal(gpu.steps.length, 4, name);
        agreesUntilANearTie(cpu.steps, gpu.steps, name);
      }
      await context.close();
      await server.close();
      rmSync(linkDir, { recursive: true, force: true });
    },
  );

  test(
    'a GPU lost mid-answer fails it with gpu_lost, and the next answer runs on the CPU',
    {
      skip: onlyIn('chromium', 'Firefox ESR has no WebGPU'),
    },
    async () => {
      const { context, page } = await blankPage(browser);
      const result = await page.evaluate(async () => {
        const { Inferno } = await import('/lib/inferno.js');
        const engine = await Inferno.load(new Blob([window.modelBytes]), { device: 'gpu' });
        const out = { before: engine.model.device.type, tokens: 0 };
        const ask = (content) => ({
          messages: [{ role: 'user', content }],
          temperature: 0,
          max_tokens: 4,
          stream: true,
        });
        try {
          for await (const chunk of await engine.chat.completions.create(ask('__lose_gpu__'))) {
            if (chunk.inferno?.step) out.tokens += 1;
          }
          out.lost = 'no error';
        } catch (error) {
          out.lost = error.kind;
        }
        out.after = engine.model.device;
        const next = await engine.chat.completions.create({ ...ask('Hello'), stream: false });
        out.next = next.choices[0].finish_reason;
        out.worker = (await engine.engineInfo()).version;
        engine.terminate();
        return out;
      });
      assert.equal(result.before, 'gpu');
      assert.equal(result.lost, 'gpu_lost');
      assert.equal(result.tokens, 1);
      assert.deepEqual(result.after, {
        type: 'cpu',
        threads: result.after.threads,
        reason: 'the GPU was lost',
      });
      assert.ok(['stop', 'length'].includes(result.next), result.next);
      // The device reported its loss on the console; that is the test's doing.
      h.problems = [];
      await context.close();
    },
  );

  test(
    'the chat page runs on the GPU when its settings say so, and shows it',
    {
      skip: onlyIn('chromium', 'Firefox ESR has no WebGPU'),
    },
    async () => {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      watchForProblems(page);
      const harnessPage = h.page;
      h.page = page;
      try {
        await page.goto(h.server.url);
        await page.waitForSelector('#engine-info.ok');
        await page.evaluate(() => {
          document.getElementById('set-device').closest('details').open = true;
        });
        await page.selectOption('#set-device', 'auto');
        await loadModel(requireModel(MODELS.qwen3Micro), page);
        assert.match(await page.locator('#model-device').innerText(), /^CPU · .*software renderer/);
        await page.selectOption('#set-device', 'gpu'); // Reloads the model on the GPU.
        await page.waitForFunction(
          () => document.getElementById('model-device').dataset.device === 'gpu',
          null,
          {
            timeout: 60_000,
          },
        );
        assert.match(await page.locator('#model-device').innerText(), /^GPU · .*swiftshader/i);
        await setSettings({ temperature: 0, max_tokens: 3 });
        const answer = await ask('What is the capital of France?');
        assert.equal(answer.tokens.length, 3, JSON.stringify(answer));
        assert.match(answer.meta, /on the GPU/);
      } finally {
        h.page = harnessPage;
        await context.close();
      }
    },
  );

  test(
    'a picture on the GPU: Qwen2.5-VL encoded there (window attention) answers as on the CPU, and a follow-up does not encode it again',
    {
      skip: onlyIn('chromium', 'Firefox ESR has no WebGPU'),
    },
    async () => {
      const fixtures = path.join(repoRoot, 'tests/fixtures');
      const model = { file: path.join(fixtures, 'models/qwen2vl-micro-q8_0.gguf') };
      const { context, page } = await blankPage(browser, { losable: false, model });
      const base64 = (file) => readFileSync(path.join(fixtures, file)).toString('base64');
      const result = await page.evaluate(
        async ({ mmproj, picture }) => {
          const { Inferno } = await import('/lib/inferno.js');
          const bytes = (b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
          const url = 'data:image/png;base64,' + picture;
          const ask = (engine, more = []) =>
            engine.chat.completions.create({
              messages: [
                {
                  role: 'user',
                  content: [
                    { type: 'image_url', image_url: { url } },
                    { type: 'text', text: 'What is in this picture?' },
                  ],
                },
                ...more,
              ],
              temperature: 0,
              max_tokens: 4,
              logprobs: true,
              top_logprobs: 5,
            });
          const run = async (device) => {
            const engine = await Inferno.load(new Blob([window.modelBytes]), {
              device,
              mmproj: new Blob([bytes(mmproj)]),
            });
            const first = await ask(engine);
            const followUp = await ask(engine, [
              { role: 'assistant', content: first.choices[0].message.content },
              { role: 'user', content: 'And the colours?' },
            ]);
            const out = {
              device: engine.model.device.type,
              steps: first.inferno.steps.map((s) => ({ token: s.token, trace: s.trace.candidates })),
              usage: first.usage,
              encoded: [first.inferno.stats.imagesEncoded, followUp.inferno.stats.imagesEncoded],
            };
            engine.terminate();
            return out;
          };
          return { cpu: await run('cpu'), gpu: await run('gpu') };
        },
        { mmproj: base64('models/clip-qwen25vl-micro.gguf'), picture: base64('images/stripes-300x200.png') },
      );
      assert.equal(result.gpu.device, 'gpu');
      assert.equal(result.cpu.device, 'cpu');
      assert.deepEqual(result.gpu.usage, result.cpu.usage, 'the same prompt, picture rows counted alike');
      agreesUntilANearTie(result.cpu.steps, result.gpu.steps, 'qwen2.5-vl picture');
      assert.deepEqual(result.gpu.encoded, [1, 1], 'encoded once, found again by its hash');
      await context.close();
    },
  );

  test(
    "weights: 'gpu' streams a URL's weights into GPU buffers: the answer of weights in memory, in a fraction of the wasm memory",
    {
      skip: onlyIn('chromium', 'Firefox ESR has no WebGPU'),
    },
    async () => {
      // The micro Qwen3 in F32 (22 MiB): SwiftShader runs it in seconds, where SmolLM2 took
      // minutes a token (above), and it is large enough for its bytes to show in wasm memory.
      const file = path.join(fixtureModelsDir, 'qwen3-micro-f32.gguf');
      const linkDir = path.join(wwwRoot, 'models', 'gpu-stream-test');
      rmSync(linkDir, { recursive: true, force: true });
      mkdirSync(linkDir, { recursive: true });
      symlinkSync(realpathSync(file), path.join(linkDir, 'qwen3-f32.gguf'));
      const server = await startServer({ root: wwwRoot, port: 0, allow: [path.dirname(realpathSync(file))] });
      const context = await browser.newContext({ serviceWorkers: 'block' });
      const page = await context.newPage();
      watchForProblems(page);
      await page.goto(`${server.url}lib/defaults.js`);
      const result = await page.evaluate(async () => {
        const { Inferno } = await import('/lib/inferno.js');
        const url = '/models/gpu-stream-test/qwen3-f32.gguf';
        const ask = {
          messages: [{ role: 'user', content: 'Name a colour.' }],
          temperature: 0,
          max_tokens: 4,
          logprobs: true,
        };
        const answer = async (engine) => {
          const reply = await engine.chat.completions.create(ask);
          return {
            tokens: reply.inferno.steps.map((step) => step.token),
            memory: reply.inferno.stats.memoryBytes,
            model: engine.model,
          };
        };
        const out = {};
        out.refused = await Inferno.load(url, { weights: 'gpu', device: 'cpu' }).then(
          () => 'loaded',
          (error) => error.kind,
        );
        const streamed = await Inferno.load(url, { weights: 'gpu', resumable: false });
        out.streamed = await answer(streamed);
        streamed.terminate();
        const held = await Inferno.load(url, { device: 'gpu', resumable: false });
        out.held = await answer(held);
        held.terminate();
        return out;
      });
      await context.close();
      await server.close();
      rmSync(linkDir, { recursive: true, force: true });
      assert.equal(result.refused, 'bad_request');
      const { streamed, held } = result;
      assert.equal(streamed.model.weights, 'gpu');
      assert.equal(streamed.model.device.type, 'gpu');
      assert.match(streamed.model.device.reason, /straight to the GPU/);
      assert.equal(held.model.weights, 'memory');
      // The same kernels over the same bytes: the same tokens.
      assert.equal(streamed.tokens.length, 4);
      assert.deepEqual(streamed.tokens, held.tokens);
      // The held engine's memory has the whole file; the streamed one its header and norms
      // (264 KiB) and a chunk of the response at a time.
      const size = readFileSync(file).length;
      assert.ok(
        streamed.memory + 0.7 * size < held.memory,
        `wasm memory ${streamed.memory} streamed against ${held.memory} held, for ${size} bytes`,
      );
      console.log(
        `# wasm memory: ${streamed.memory} bytes streamed, ${held.memory} held (${size}-byte file)`,
      );
    },
  );

  test(
    "a 4.55 GiB file's weights stream to the GPU through a 32-bit build, and little of it stays in wasm memory",
    {
      skip: onlyIn('chromium', 'Firefox ESR has no WebGPU'),
    },
    async () => {
      // Loaded, not run: its one token costs a billion multiply-adds, minutes on SwiftShader.
      // The streamed forward pass itself is checked natively and in the test above.
      const big = path.join(modelsDir, 'big-4.6gib-q4_0.gguf');
      requireFile(big);
      const { context, page } = await blankPage(browser, { losable: false });
      await page.evaluate(() => {
        const input = document.createElement('input');
        input.type = 'file';
        input.id = 'big-file';
        document.body.append(input);
      });
      // The browser reads the file from disk: nothing is copied through the test.
      await page.setInputFiles('#big-file', big);
      // Without Memory64 (no relaxed SIMD, as in Safari) the inspector's verdict follows the
      // device a load would ask for: 'gpu' streams the weights there; 'auto' takes no software
      // adapter (SwiftShader), so the file is too large.
      const inspected = await page.evaluate(async () => {
        const { Inferno } = await import('/lib/inferno.js');
        const input = /** @type {HTMLInputElement} */ (document.getElementById('big-file'));
        const engine = Inferno.create({ relaxed: false });
        try {
          const gpu = (await engine.inspectFile(input.files[0], { device: 'gpu' })).report.runs;
          const auto = (await engine.inspectFile(input.files[0])).report.runs;
          return { gpu, auto };
        } finally {
          engine.terminate();
        }
      });
      assert.deepEqual(
        [inspected.gpu.ok, inspected.gpu.on_gpu, inspected.gpu.too_large],
        [true, true, true],
        JSON.stringify(inspected.gpu),
      );
      assert.match(inspected.gpu.reason, /needs WebAssembly's 64-bit memory/);
      assert.deepEqual(
        [inspected.auto.ok, inspected.auto.on_gpu],
        [false, false],
        JSON.stringify(inspected.auto),
      );
      assert.equal(inspected.auto.too_large, true);
      const result = await page.evaluate(async () => {
        const { Inferno } = await import('/lib/inferno.js');
        const input = /** @type {HTMLInputElement} */ (document.getElementById('big-file'));
        const engine = await Inferno.load(input.files[0], { device: 'gpu' });
        const out = { model: engine.model, info: await engine.engineInfo() };
        engine.terminate();
        return out;
      });
      await context.close();
      const { model, info } = result;
      assert.ok(model.size > 4 * 2 ** 30, `${model.size} bytes`);
      assert.equal(model.weights, 'gpu');
      assert.equal(model.memory64, false, 'a 32-bit build');
      assert.equal(model.device.type, 'gpu');
      // The header (Gemma 3's tokenizer), the norms and a 16 MiB chunk of the file.
      assert.ok(info.memory_bytes < 128 * 2 ** 20, `wasm memory ${info.memory_bytes} bytes`);
      console.log(`# ${model.size}-byte file streamed to the GPU: wasm memory ${info.memory_bytes} bytes`);
    },
  );

  test(
    "the inspector's verdict on a file too large for memory here follows the Device setting",
    {
      skip: onlyIn('chromium', 'Firefox ESR has no WebGPU'),
    },
    async () => {
      const big = path.join(modelsDir, 'big-4.6gib-q4_0.gguf');
      requireFile(big);
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      try {
        // No relaxed SIMD, so no Memory64: Safari's case.
        await page.goto(`${h.server.url}?relaxed=0`);
        await page.waitForSelector('#engine-info.ok');
        await page.evaluate(() => {
          document.getElementById('set-device').closest('details').open = true;
        });
        await page.selectOption('#set-device', 'cpu');
        const inspections = () => page.evaluate(() => Number(document.body.dataset.inspections ?? 0));
        const inspected = async (action) => {
          const before = await inspections();
          await action();
          await page.waitForFunction((n) => Number(document.body.dataset.inspections ?? 0) > n, before, {
            timeout: 60_000,
          });
          return page.evaluate(() => document.getElementById('summary-runs').textContent);
        };
        const onCpu = await inspected(() => page.setInputFiles('#file-input', big));
        assert.match(onCpu, /^No: .*needs WebAssembly's 64-bit memory/);
        // Choosing the GPU inspects the file again (and reloads it there, streaming).
        const onGpu = await inspected(() => page.selectOption('#set-device', 'gpu'));
        assert.match(onGpu, /^Yes, on the GPU: .*streamed into GPU memory.*64-bit memory/);
      } finally {
        await context.close();
      }
    },
  );

  test('without WebGPU, gpu is refused with no_gpu and auto runs on the CPU', async () => {
    // The harness's browser runs without WebGPU's flag (Firefox ESR has none at all).
    const { context, page } = await blankPage(h.browser, { losable: false });
    const result = await page.evaluate(async () => {
      const { Inferno } = await import('/lib/inferno.js');
      const model = new Blob([window.modelBytes]);
      const out = {};
      out.refused = await Inferno.load(model, { device: 'gpu' }).then(
        () => 'loaded',
        (error) => error.kind,
      );
      const auto = await Inferno.load(model);
      out.auto = auto.model.device;
      auto.terminate();
      return out;
    });
    assert.equal(result.refused, 'no_gpu');
    assert.equal(result.auto.type, 'cpu');
    assert.match(result.auto.reason, /WebGPU|no GPU adapter/);
    await context.close();
  });
});
