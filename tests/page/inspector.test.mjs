// Page tests for the Inferno inspector: the real page, the real wasm engine (www/lib/pkg, built
// by build.sh) and real GGUF files, driven in headless Chromium by playwright-core.
//
//   npm run test:page        (node --test tests/page/; environment: see harness.mjs)

import { describe, test } from 'node:test';
import http from 'node:http';
import assert from 'node:assert/strict';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  MODELS,
  TEST_TIMEOUT_MS,
  fixtureModelsDir,
  h,
  pageSuite,
  requireModel,
  text,
  wwwRoot,
} from './harness.mjs';

// ---------------------------------------------------------------------------------------
// A minimal GGUF v3 writer, for files whose strings are hostile HTML.

function ggufString(text) {
  const bytes = Buffer.from(text, 'utf8');
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(bytes.length));
  return Buffer.concat([length, bytes]);
}

function u32(value) {
  const buffer = Buffer.alloc(4);
  buffer.writeUInt32LE(value);
  return buffer;
}

function u64(value) {
  const buffer = Buffer.alloc(8);
  buffer.writeBigUInt64LE(BigInt(value));
  return buffer;
}

const GGUF_TYPE_STRING = 8;
const GGML_TYPE_F32 = 0;

/** strings: {key: value}; tensors: [{name, dims}] (F32, zero-filled). */
function buildGguf({ strings, tensors }) {
  const alignment = 32;
  const parts = [Buffer.from('GGUF'), u32(3), u64(tensors.length), u64(Object.keys(strings).length)];
  for (const [key, value] of Object.entries(strings))
    parts.push(ggufString(key), u32(GGUF_TYPE_STRING), ggufString(value));
  let offset = 0;
  for (const tensor of tensors) {
    parts.push(
      ggufString(tensor.name),
      u32(tensor.dims.length),
      ...tensor.dims.map(u64),
      u32(GGML_TYPE_F32),
      u64(offset),
    );
    const bytes = tensor.dims.reduce((a, b) => a * b, 1) * 4;
    offset += Math.ceil(bytes / alignment) * alignment;
  }
  const header = Buffer.concat(parts);
  const padding = Buffer.alloc((alignment - (header.length % alignment)) % alignment);
  return Buffer.concat([header, padding, Buffer.alloc(offset)]);
}

// ---------------------------------------------------------------------------------------
// Helpers that act like a person using the page.

/** The inspector suites start on the Inspect tab. */
const INSPECT = { hash: '#inspect' };

function finishedInspections() {
  return h.page.evaluate(() => Number(document.body.dataset.inspections ?? 0));
}

/** Chooses a file with the picker and waits until the page has finished with it. */
async function chooseFile(filePath) {
  const before = await finishedInspections();
  await h.page.setInputFiles('#file-input', filePath);
  await h.page.waitForFunction((count) => Number(document.body.dataset.inspections ?? 0) > count, before);
}

async function assertReportVisible() {
  if (await h.page.locator('#error').isVisible()) {
    assert.fail(`expected a report, the page shows an error: ${await h.page.locator('#error').innerText()}`);
  }
  assert.equal(await h.page.locator('#report').isVisible(), true, 'the report is shown');
}

async function assertErrorShown(fileName, kindPattern) {
  assert.equal(await h.page.locator('#error').isVisible(), true, 'the error banner is shown');
  assert.equal(await h.page.locator('#report').isHidden(), true, 'no stale report next to the error');
  assert.match(await text('#error-kind'), kindPattern);
  assert.ok((await text('#error-message')).length > 10, 'the error has a human message');
  assert.match(await text('#error'), new RegExp(fileName.replace('.', '\\.')));
}

async function bytesRead() {
  const node = h.page.locator('#bytes-read');
  return {
    bytesRead: Number(await node.getAttribute('data-bytes-read')),
    fileSize: Number(await node.getAttribute('data-file-size')),
    text: await node.innerText(),
  };
}

async function assertReportShows(model) {
  await assertReportVisible();
  assert.equal(await text('#summary-architecture'), model.architecture);
  assert.match(await text('#summary-runs'), model.runs ?? /^Yes: this page can load it and chat$/);
  assert.match(await text('#summary-purpose'), model.purpose ?? /^Chat model \(declares no pooling/);
  assert.match(await text('#summary'), new RegExp(`\\b${model.architecture}\\b`));
  assert.equal(await text('#tensor-count'), model.tensors.toLocaleString('en-US'));
  assert.equal(await h.page.locator('#tensor-table tr[data-tensor]').count(), model.tensors);
  for (const name of model.tensorNames) {
    assert.equal(
      await h.page.locator(`#tensor-table tr[data-tensor="${name}"]`).count(),
      1,
      `tensor row ${name}`,
    );
  }
  assert.equal(await text('#metadata-count'), String(model.metadata));
  assert.equal(await h.page.locator('#metadata-table tbody tr').count(), model.metadata);
  const architectureRow = h.page.locator('#metadata-table tr[data-key="general.architecture"]');
  assert.equal(await architectureRow.locator('td').nth(2).innerText(), model.architecture);
}

// ---------------------------------------------------------------------------------------

pageSuite(
  'landing page',
  () => {
    test('shows the product, the promise and a file picker, with no error', async () => {
      assert.equal(await text('h1'), 'Inferno');
      assert.match(
        await text('.tagline'),
        /Drop a \.gguf file to chat with it or inspect it\. Nothing leaves your machine\./,
      );
      assert.equal(await h.page.locator('#file-input').count(), 1);
      assert.equal(await h.page.locator('#error').isHidden(), true);
      assert.equal(await h.page.locator('#report').isHidden(), true);
      assert.match(await text('#engine-info'), /^engine \d+\.\d+\.\d+/);
    });
  },
  INSPECT,
);

pageSuite(
  'inspecting real models',
  () => {
    test('gemma3 270M Q4_K_M', async () => {
      await chooseFile(requireModel(MODELS.gemma3));
      await assertReportShows(MODELS.gemma3);
      assert.match(await text('#summary'), /Q4_K/);
    });

    test('SmolLM2 135M Q4_1', async () => {
      await chooseFile(requireModel(MODELS.smollm2));
      await assertReportShows(MODELS.smollm2);
      assert.match(await text('#tokenizer'), /gpt2/);
    });

    test('qwen3 micro Q4_0', async () => {
      await chooseFile(requireModel(MODELS.qwen3Micro));
      await assertReportShows(MODELS.qwen3Micro);
      assert.match(await text('#type-chart'), /Q4_0/);
      assert.match(await text('#tokenizer'), /qwen2/); // tokenizer.ggml.pre
      assert.match(await h.page.locator('#chat-template').innerText(), /<\|im_start\|>/);
    });

    test('an embedding model says so, with its pooling', async () => {
      const file = path.join(fixtureModelsDir, 'qwen3-embed-micro-q8_0.gguf');
      await chooseFile(file);
      await assertReportShows({
        ...MODELS.qwen3Micro,
        file,
        tensorNames: ['token_embd.weight', 'blk.0.attn_q.weight'],
        metadata: 27,
        purpose: /^Chat and embedding \(pooling: last, and a chat template\)$/,
      });
      const pooling = h.page.locator('#metadata-table tr[data-key="qwen3.pooling_type"]');
      assert.match(await pooling.innerText(), /3/);
    });

    test('a vision projector (mmproj) shows its own card and says why it does not chat', async () => {
      const file = path.join(fixtureModelsDir, 'clip-gemma3-micro.gguf');
      await chooseFile(file);
      await assertReportShows({
        architecture: 'clip',
        tensors: 39,
        tensorNames: ['v.patch_embd.weight', 'v.blk.1.ffn_down.weight', 'mm.input_projection.weight'],
        metadata: 16,
        runs: /^No: this file is a vision projector \(mmproj\) for Gemma 3 \(4B and up\).*drop both files on the page together/,
        purpose: /^Vision projector \(mmproj\)/,
      });
      assert.equal(await h.page.locator('#vision-section').isVisible(), true);
      assert.equal(await text('#vision-projector'), 'gemma3');
      assert.equal(await text('#vision-family'), 'Gemma 3 (4B and up)');
      assert.equal(await text('#vision-image'), '224 × 224 px, patches of 14 px (16 × 16)');
      assert.equal(await text('#vision-output-width'), '640');
      assert.equal(await h.page.locator('#vision-problems').count(), 0);
      // A language model next hides the card again.
      await chooseFile(requireModel(MODELS.qwen3Micro));
      assert.equal(await h.page.locator('#vision-section').isHidden(), true);
    });

    test("a split model's shards, chosen together in any order, show one model and load", async () => {
      const shard = (no) =>
        path.join(fixtureModelsDir, 'split', `qwen3-micro-q8_0-llama-split-0000${no}-of-00003.gguf`);
      await chooseFile([shard(2), shard(3), shard(1)]);
      await assertReportShows({
        ...MODELS.qwen3Micro,
        file: shard(1),
        tensorNames: ['token_embd.weight', 'blk.1.ffn_down.weight', 'output_norm.weight'],
        metadata: 28,
      });
      assert.match(await text('#summary'), /qwen3-micro-q8_0-llama-split\.gguf \(3 files\)/);
      // The chat side loads the same three files as one model.
      await h.page.waitForFunction(
        () => document.body.dataset.model === 'qwen3-micro-q8_0-llama-split.gguf',
        null,
        {
          timeout: 60_000,
        },
      );
      // Two of the three: the inspector names the missing shard.
      await chooseFile([shard(1), shard(3)]);
      assert.match(await text('#error'), /shard 2 of 3 of this split model is missing/);
    });

    test('qwen2 micro Q8_0 with its Q/K/V bias tensors', async () => {
      await chooseFile(requireModel(MODELS.qwen2Micro));
      await assertReportShows(MODELS.qwen2Micro);
      assert.match(await text('#type-chart'), /Q8_0/);
    });

    test('qwen3 vocabulary file without tensors', async () => {
      await chooseFile(requireModel(MODELS.qwen3Vocab));
      await assertReportShows(MODELS.qwen3Vocab);
      assert.match(await text('#tokenizer'), /151,936 tokens/);
      assert.match(await text('#tokenizer'), /151,387/);
      const tokens = h.page.locator('#metadata-table tr[data-key="tokenizer.ggml.tokens"]');
      assert.match(await tokens.locator('summary').innerText(), /string × 151,936/);
    });
  },
  INSPECT,
);

pageSuite(
  'tables',
  () => {
    test('tensor table filters, sorts and collapses layers', async () => {
      await chooseFile(requireModel(MODELS.qwen3Micro));
      await assertReportVisible();
      const visibleRows = h.page.locator('#tensor-table tr[data-tensor]:visible');

      await h.page.fill('#tensor-filter', 'attn_q');
      await h.page.waitForFunction(
        () => document.querySelectorAll('#tensor-table tr[data-tensor]').length === 4,
      );
      const names = await visibleRows.evaluateAll((rows) => rows.map((r) => r.dataset.tensor));
      assert.deepEqual(names.sort(), [
        'blk.0.attn_q.weight',
        'blk.0.attn_q_norm.weight',
        'blk.1.attn_q.weight',
        'blk.1.attn_q_norm.weight',
      ]);

      await h.page.fill('#tensor-filter', '');
      await h.page.selectOption('#tensor-type-filter', 'F32');
      await h.page.waitForFunction(
        () => document.querySelectorAll('#tensor-table tr[data-tensor]').length === 9,
      );
      const types = await visibleRows.evaluateAll((rows) => rows.map((r) => r.cells[1].textContent));
      assert.ok(types.every((type) => type === 'F32'));

      await h.page.selectOption('#tensor-type-filter', '');
      await h.page.uncheck('#tensor-group-toggle');
      await h.page.click('#tensor-table th[data-column="bytes"] button');
      await h.page.click('#tensor-table th[data-column="bytes"] button');
      assert.equal(
        await h.page.getAttribute('#tensor-table th[data-column="bytes"]', 'aria-sort'),
        'descending',
      );
      const first = await visibleRows.first().getAttribute('data-tensor');
      assert.ok(['output.weight', 'token_embd.weight'].includes(first), `largest tensor first, got ${first}`);

      await h.page.check('#tensor-group-toggle');
      await h.page.click('#tensor-table tr[data-group="blk.0"] button');
      assert.equal(await h.page.locator('#tensor-table tr[data-in-group="blk.0"]:visible').count(), 0);
      assert.equal(await h.page.locator('#tensor-table tr[data-in-group="blk.1"]:visible').count(), 11);
      await h.page.click('#tensor-table tr[data-group="blk.0"] button');
      assert.equal(await h.page.locator('#tensor-table tr[data-in-group="blk.0"]:visible').count(), 11);
    });

    test('long tables build 500 rows at a time', async () => {
      // 1,200 tensors and 1,200 keys: a hostile file can list tens of thousands of each.
      const strings = Object.fromEntries(
        Array.from({ length: 1200 }, (_, i) => [`test.key.${String(i).padStart(4, '0')}`, `value ${i}`]),
      );
      const tensors = Array.from({ length: 1200 }, (_, i) => ({
        name: `t${String(i).padStart(4, '0')}`,
        dims: [1],
      }));
      const file = path.join(h.scratchDir, 'many.gguf');
      writeFileSync(file, buildGguf({ strings, tensors }));
      await chooseFile(file);
      await assertReportVisible();
      const tensorRows = () => h.page.locator('#tensor-table tr[data-tensor]').count();
      const keyRows = () => h.page.locator('#metadata-table tr[data-key]').count();
      assert.equal(await tensorRows(), 500);
      assert.equal(await keyRows(), 500);
      assert.match(await h.page.locator('#tensor-table tr.more-rows').innerText(), /700 more not shown/);
      await h.page.click('#tensor-table tr.more-rows button');
      assert.equal(await tensorRows(), 1000);
      await h.page.click('#tensor-table tr.more-rows button');
      assert.equal(await tensorRows(), 1200);
      assert.equal(await h.page.locator('#tensor-table tr.more-rows').count(), 0);
      // A filter starts again from the first page, and finds rows that were never built.
      await h.page.fill('#tensor-filter', 't11');
      await h.page.waitForFunction(
        () => document.querySelectorAll('#tensor-table tr[data-tensor]').length === 100,
      );
      await h.page.fill('#metadata-search', 'test.key.119');
      await h.page.waitForFunction(
        () => document.querySelectorAll('#metadata-table tr[data-key]').length === 10,
      );
      await h.page.fill('#metadata-search', '');
      await h.page.waitForFunction(
        () => document.querySelectorAll('#metadata-table tr[data-key]').length === 500,
      );
      await h.page.click('#metadata-table tr.more-rows button');
      assert.equal(await keyRows(), 1000);
    });

    test('metadata search and array previews', async () => {
      await chooseFile(requireModel(MODELS.qwen3Micro));
      await assertReportVisible();
      await h.page.fill('#metadata-search', 'head_count');
      await h.page.waitForFunction(
        () => document.querySelectorAll('#metadata-table tbody tr:not([hidden])').length === 2,
      );
      await h.page.fill('#metadata-search', '');
      const tokens = h.page.locator('#metadata-table tr[data-key="tokenizer.ggml.tokens"]');
      assert.match(await tokens.locator('summary').innerText(), /string × 8,026/);
      await tokens.locator('summary').click();
      assert.ok((await tokens.locator('.array-preview li').count()) > 0);
    });
  },
  INSPECT,
);

pageSuite(
  'malformed files',
  () => {
    test('show a typed error, and a good file afterwards clears it', async () => {
      const good = readFileSync(requireModel(MODELS.qwen3Micro)); // header: the first 257,824 bytes
      const cases = [
        {
          name: 'not-a-model.gguf',
          bytes: Buffer.concat([Buffer.from('NOTGGUF!'), Buffer.alloc(120)]),
          kind: /^bad_magic$/,
        },
        { name: 'first-100-bytes.gguf', bytes: good.subarray(0, 100), kind: /^(truncated|count_too_large)$/ },
        { name: 'cut-in-tensor-infos.gguf', bytes: good.subarray(0, 257_000), kind: /^truncated$/ },
        { name: 'header-without-data.gguf', bytes: good.subarray(0, 300_000), kind: /^tensor_past_end$/ },
      ];
      for (const broken of cases) {
        const file = path.join(h.scratchDir, broken.name);
        writeFileSync(file, broken.bytes);
        await chooseFile(file);
        await assertErrorShown(broken.name, broken.kind);
      }

      await chooseFile(MODELS.qwen3Micro.file);
      assert.equal(await h.page.locator('#error').isHidden(), true, 'a good file clears the error');
      await assertReportShows(MODELS.qwen3Micro);
    });

    test('text from the file is shown as text, never as HTML', async () => {
      const hostile = path.join(h.scratchDir, 'hostile.gguf');
      const payload = '<img src=x onerror="window.__pwned = 1"><b id="pwned">bold</b>';
      const shortPayload = '<b id="pwned">x</b>'; // ggml caps tensor names at 63 bytes
      writeFileSync(
        hostile,
        buildGguf({
          strings: { 'general.architecture': 'llama', 'general.name': payload, 'test.note': payload },
          tensors: [{ name: `${shortPayload}.weight`, dims: [4] }],
        }),
      );
      await chooseFile(hostile);
      await assertReportVisible();
      assert.equal(await h.page.locator('#pwned').count(), 0);
      assert.equal(await h.page.evaluate(() => window.__pwned), undefined);
      assert.equal(await h.page.locator('#summary-title').innerText(), payload);
      assert.equal(
        await h.page.locator('#tensor-table tr[data-tensor] td').first().innerText(),
        `${shortPayload}.weight`,
      );
      assert.equal(
        await h.page.locator('#metadata-table tr[data-key="test.note"] td').nth(2).innerText(),
        payload,
      );
    });
  },
  INSPECT,
);

pageSuite(
  'worker',
  () => {
    test('reads only the header prefix of a large file', async () => {
      const gemma = requireModel(MODELS.gemma3);
      await chooseFile(gemma);
      await assertReportVisible();
      const read = await bytesRead();
      assert.equal(read.fileSize, statSync(gemma).size);
      assert.ok(read.bytesRead < read.fileSize / 10, `read ${read.bytesRead} of ${read.fileSize} bytes`);
      assert.match(read.text, /Read [\d.]+ MB of [\d.]+ MB \(header only\) in [\d.]+ m?s/);

      await chooseFile(requireModel(MODELS.qwen3Micro));
      await assertReportShows(MODELS.qwen3Micro);
      const micro = await bytesRead();
      assert.equal(micro.bytesRead, 1 << 20, 'a small header is covered by the first 1 MiB read');
      assert.ok(micro.bytesRead < micro.fileSize);
    });

    test('grows the prefix until the header fits', async () => {
      // qwen3-vocab.gguf is all header (5.9 MB of tokenizer), so 1 MiB is not enough.
      const vocab = requireModel(MODELS.qwen3Vocab);
      await chooseFile(vocab);
      await assertReportVisible();
      const read = await bytesRead();
      assert.equal(read.bytesRead, statSync(vocab).size);
      assert.match(read.text, /whole file/);
    });

    test('answers every request by id and survives failures', async () => {
      // A second file input gives the page a real File object to post to its own worker.
      await h.page.evaluate(() => {
        const input = Object.assign(document.createElement('input'), { type: 'file', id: 'probe-input' });
        document.body.append(input);
      });
      await h.page.setInputFiles('#probe-input', requireModel(MODELS.qwen3Micro));
      const replies = await h.page.evaluate(async () => {
        const worker = new Worker('./lib/worker.js', { type: 'module' });
        const received = [];
        worker.addEventListener('message', (event) => received.push(event.data));
        const waitFor = (id) =>
          new Promise((resolve) => {
            const check = () => {
              const reply = received.find((r) => r.id === id);
              if (reply) resolve(reply);
              else setTimeout(check, 10);
            };
            check();
          });
        const good = document.getElementById('probe-input').files[0];
        const bad = new File([new TextEncoder().encode('NOTGGUF!'.repeat(16))], 'bad.gguf');
        // One thread, as the client would configure it: a raw worker has none of the client's
        // watch over helper spawns, and headless Firefox now and then never returns from a
        // helper's `new Worker()` (docs/repro/firefox-nested-worker), which froze this test's
        // worker for its whole 90 s once (a cold cache's first Firefox run, 2026-11-29).
        worker.postMessage({ type: 'configure', id: null, threads: 1 });
        const requests = [
          { type: 'info', id: 1 },
          { type: 'frobnicate', id: 2 },
          { type: 'inspect', id: 3, file: bad },
          { type: 'inspect', id: 4 },
          { type: 'inspect', id: 5, file: good },
        ];
        requests.forEach((request) => worker.postMessage(request));
        const answers = await Promise.all(requests.map((r) => waitFor(r.id)));
        worker.terminate();
        return answers.map((a) => ({
          ...a,
          report: a.report ? { architecture: a.report.summary.architecture } : undefined,
        }));
      });
      const [info, unknown, bad, noFile, good] = replies;
      assert.equal(info.type, 'info');
      assert.match(info.info.version, /^\d+\.\d+\.\d+/);
      assert.equal(typeof info.info.simd128, 'boolean');
      assert.equal(unknown.type, 'error');
      assert.equal(unknown.error.kind, 'unknown_message_type');
      assert.equal(bad.type, 'error');
      assert.equal(bad.error.name, 'GgufError');
      assert.equal(bad.error.kind, 'bad_magic');
      assert.equal(noFile.type, 'error');
      assert.equal(noFile.error.kind, 'bad_request');
      assert.equal(good.type, 'inspected');
      assert.equal(good.report.architecture, 'qwen3');
      assert.equal(good.bytesRead, 1 << 20);
      assert.ok(good.ms >= 0);
    });

    test('a file dropped anywhere on the page is inspected', async () => {
      await h.page.evaluate(() => {
        const input = Object.assign(document.createElement('input'), {
          type: 'file',
          id: 'probe-input',
          hidden: true,
        });
        document.body.append(input);
      });
      await h.page.setInputFiles('#probe-input', requireModel(MODELS.qwen3Micro));
      await h.page.evaluate(() => {
        const transfer = new DataTransfer();
        transfer.items.add(document.getElementById('probe-input').files[0]);
        document
          .querySelector('main')
          .dispatchEvent(
            new DragEvent('dragenter', { dataTransfer: transfer, bubbles: true, cancelable: true }),
          );
      });
      await h.page.waitForSelector('#drop-zone', { state: 'visible' });
      const before = await finishedInspections();
      await h.page.evaluate(() => {
        const transfer = new DataTransfer();
        transfer.items.add(document.getElementById('probe-input').files[0]);
        document
          .getElementById('drop-zone')
          .dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
      });
      assert.equal(await h.page.locator('#drop-zone').isHidden(), true);
      await h.page.waitForFunction((count) => Number(document.body.dataset.inspections ?? 0) > count, before);
      await assertReportShows(MODELS.qwen3Micro);
    });
  },
  INSPECT,
);

// ---------------------------------------------------------------------------------------
// The static server (scripts/serve.mjs) the page depends on.

/** A raw GET/HEAD, so paths reach the server exactly as written (fetch would normalise them). */
function rawRequest(pathname, { method = 'GET', headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const request = http.request(
      { host: '127.0.0.1', port: h.server.port, path: pathname, method, headers },
      (response) => {
        const chunks = [];
        response.on('data', (chunk) => chunks.push(chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode, headers: response.headers, body: Buffer.concat(chunks) }),
        );
      },
    );
    request.on('error', reject);
    request.end();
  });
}

describe('static server', { timeout: TEST_TIMEOUT_MS }, () => {
  test('sends isolation headers and the right MIME types', async () => {
    for (const [file, type] of [
      ['/', 'text/html'],
      ['/app/app.js', 'text/javascript'],
      ['/app/style.css', 'text/css'],
      ['/lib/pkg/inferno_bg.wasm', 'application/wasm'],
    ]) {
      const response = await rawRequest(file);
      assert.equal(response.status, 200, file);
      assert.match(response.headers['content-type'], new RegExp(`^${type}`), file);
      assert.equal(response.headers['cross-origin-opener-policy'], 'same-origin');
      assert.equal(response.headers['cross-origin-embedder-policy'], 'require-corp');
      assert.equal(response.headers['cross-origin-resource-policy'], 'same-origin');
      assert.equal(response.headers['cache-control'], 'no-cache');
    }
    const missing = await rawRequest('/no-such-file.js');
    assert.equal(missing.status, 404);
    assert.equal(missing.headers['cross-origin-embedder-policy'], 'require-corp');
  });

  test('answers byte ranges, HEAD, and unsatisfiable ranges', async () => {
    const whole = readFileSync(path.join(wwwRoot, 'index.html'));
    const middle = await rawRequest('/index.html', { headers: { Range: 'bytes=2-9' } });
    assert.equal(middle.status, 206);
    assert.equal(middle.headers['content-range'], `bytes 2-9/${whole.length}`);
    assert.deepEqual(middle.body, whole.subarray(2, 10));
    const open = await rawRequest('/index.html', { headers: { Range: `bytes=${whole.length - 5}-` } });
    assert.deepEqual(open.body, whole.subarray(whole.length - 5));
    const suffix = await rawRequest('/index.html', { headers: { Range: 'bytes=-7' } });
    assert.equal(suffix.status, 206);
    assert.deepEqual(suffix.body, whole.subarray(whole.length - 7));
    const beyond = await rawRequest('/index.html', { headers: { Range: `bytes=${whole.length}-` } });
    assert.equal(beyond.status, 416);
    assert.equal(beyond.headers['content-range'], `bytes */${whole.length}`);
    const head = await rawRequest('/index.html', { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(Number(head.headers['content-length']), whole.length);
    assert.equal(head.headers['accept-ranges'], 'bytes');
    assert.equal(head.body.length, 0);
  });

  test('refuses paths that leave the root', async () => {
    for (const attempt of [
      '/../package.json',
      '/..%2fpackage.json',
      '/%2e%2e/%2e%2e/etc/passwd',
      '/lib/pkg/..%2f..%2f..%2fpackage.json',
      '/%00index.html',
    ]) {
      const response = await rawRequest(attempt);
      assert.ok([403, 404].includes(response.status), `${attempt} answered ${response.status}`);
      assert.doesNotMatch(response.body.toString(), /playwright-core|root:/);
    }
  });
});
