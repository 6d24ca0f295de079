// Loading while a load runs: the newest file always wins, and the page shows what the
// engine holds.
//
//   node --test tests/page/loading.test.mjs   (environment: see harness.mjs)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MODELS, h, pageSuite, requireModel } from './harness.mjs';

pageSuite('loading', () => {
  test('three files dropped in quick succession load the third', async () => {
    requireModel(MODELS.smollm2);
    const before = await h.page.evaluate(() => Number(document.body.dataset.loads ?? 0));
    await h.page.evaluate(async () => {
      const blob = await (await fetch('models/SmolLM2-135M-Instruct.Q4_1.gguf')).blob();
      for (const name of ['first.gguf', 'second.gguf', 'third.gguf']) {
        const transfer = new DataTransfer();
        transfer.items.add(new File([blob], name));
        window.dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, cancelable: true }));
      }
    });
    await h.page.waitForFunction((count) => Number(document.body.dataset.loads ?? 0) > count, before, {
      timeout: 120_000,
    });
    assert.equal(
      await h.page.evaluate(() => document.body.dataset.model),
      'third.gguf',
      await h.page.locator('#chat-error').innerText(),
    );
    assert.equal(await h.page.locator('#chat-error').isVisible(), false, 'no error shown');
    assert.equal(await h.page.locator('#model-name').innerText(), 'third.gguf');
  });
});
