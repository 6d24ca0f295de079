// Models kept in the browser (OPFS): a copy that fails halfway must leave the model already
// stored under the same name as it was.
//
//   node --test tests/page/storage.test.mjs   (environment: see harness.mjs)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { h, pageSuite } from './harness.mjs';

pageSuite('storage', () => {
  test('a failed copy keeps the stored model of the same name', async () => {
    const outcome = await h.page.evaluate(async () => {
      const storage = await import('./lib/storage.js');
      const read = async (name) => new Uint8Array(await (await storage.openStoredModel(name)).arrayBuffer());
      await storage.storeModel('kept.gguf', new Blob([new Uint8Array(1000).fill(7)]));
      // A download that breaks after 300 of its announced 1000 bytes.
      const realFetch = window.fetch;
      window.fetch = async () =>
        new Response(
          new ReadableStream({
            start(controller) {
              controller.enqueue(new Uint8Array(300).fill(9));
              controller.error(new Error('connection lost'));
            },
          }),
          { headers: { 'Content-Length': '1000' } },
        );
      let error = null;
      try {
        await storage.storeModel('kept.gguf', 'models/broken.gguf');
      } catch (e) {
        error = e.message;
      } finally {
        window.fetch = realFetch;
      }
      const kept = await read('kept.gguf');
      // A complete copy replaces it.
      await storage.storeModel('kept.gguf', new Blob([new Uint8Array(500).fill(3)]));
      const replaced = await read('kept.gguf');
      const listed = (await storage.listStoredModels()).map((m) => `${m.name}:${m.size}`);
      await storage.deleteStoredModel('kept.gguf');
      return {
        error,
        keptSize: kept.length,
        keptByte: kept[0],
        replacedSize: replaced.length,
        replacedByte: replaced[0],
        listed,
      };
    });
    assert.match(outcome.error ?? '', /connection lost/);
    assert.deepEqual([outcome.keptSize, outcome.keptByte], [1000, 7]);
    assert.deepEqual([outcome.replacedSize, outcome.replacedByte], [500, 3]);
    assert.deepEqual(outcome.listed, ['kept.gguf:500'], 'no unfinished copy is listed');
  });
});
