// Page tests for chatting in the browser: the real page, the real wasm engine in its Web
// Worker and real GGUF files, driven in headless Chromium by playwright-core.
//
//   node --test tests/page/chat.test.mjs   (environment: see harness.mjs)

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startServer } from '../../scripts/serve.mjs';
import {
  MODELS,
  TEST_TIMEOUT_MS,
  fixtureModelsDir,
  h,
  pageSuite,
  repoRoot,
  requireModel,
  text,
  watchForProblems,
  wwwRoot,
} from './harness.mjs';
import {
  CHAT_TIMEOUT_MS,
  answersSoFar,
  ask,
  askAndStop,
  assertModelLoaded,
  lastAnswer,
  loadModel,
  setSettings,
} from './chat-helpers.mjs';

// Whole suites: each test loads a model and generates.
const SUITE = { timeout: 600_000 };

/** Counts how often the last answer's text changed before the answer finished. */
async function countStreamedUpdates() {
  await h.page.evaluate(() => {
    window.__updates = 0;
    new MutationObserver(() => {
      if (document.body.dataset.generating === 'true') window.__updates += 1;
    }).observe(document.getElementById('messages'), { subtree: true, childList: true, characterData: true });
  });
}

/** Selects each step of the strip in turn and collects the bar kinds shown for it. */
async function barKindsOverSteps(maxSteps = 40) {
  const chips = await h.page.locator('#viz-strip .viz-chip').count();
  const kinds = new Set();
  for (let i = 0; i < Math.min(chips, maxSteps); i++) {
    await h.page.locator('#viz-strip .viz-chip').nth(i).click();
    for (const kind of await h.page
      .locator('#viz-bars .viz-bar')
      .evaluateAll((bars) => bars.map((b) => b.dataset.kind)))
      kinds.add(kind);
  }
  return kinds;
}

const SMOLLM2 = () => requireModel(MODELS.smollm2);

/** Drops files on the page as a person drags them from the desktop: {file: path, type}. */
async function dropFiles(files) {
  const payload = files.map(({ file, type }) => ({
    name: path.basename(file),
    type,
    base64: readFileSync(file).toString('base64'),
  }));
  await h.page.evaluate((files) => {
    const transfer = new DataTransfer();
    for (const { name, type, base64 } of files) {
      const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
      transfer.items.add(new File([bytes], name, { type }));
    }
    window.dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
  }, payload);
}
const SMOLLM2_NAME = 'SmolLM2-135M-Instruct.Q4_1.gguf';
// With llama.cpp's default sampling, seed 4 answers "The capital of France is Paris." in 8
// tokens natively; the wasm build draws the same way (tests/web/ pins seeded draws).
const ENDING_SEED = 4;

pageSuite(
  'chat with SmolLM2',
  () => {
    test('streams an answer that ends, with the sampling visualizer and speed', async () => {
      await loadModel(SMOLLM2());
      await assertModelLoaded(SMOLLM2_NAME);
      assert.match(await text('#model-details'), /llama · 98\.4 MB · 49,152 tokens/);
      await setSettings({ seed: ENDING_SEED, max_tokens: 96 });
      await countStreamedUpdates();
      const answer = await ask('What is the capital of France?');
      assert.equal(answer.reason, 'end', `the answer should end by itself: ${answer.text}`);
      assert.match(answer.text, /Paris/);
      assert.ok((await h.page.evaluate(() => window.__updates)) >= 3, 'tokens arrived one by one');
      assert.ok(answer.tokens.length >= 3, 'the strip shows the generated tokens');
      assert.match(
        answer.meta,
        /prefill \d+ tok at [\d.]+ tok\/s · first token [\d.]+ m?s · \d+ tokens at [\d.]+ tok\/s · context \d+ \/ 4096 · seed 4/,
      );
      assert.equal(await h.page.locator('.message.user').count(), 1);

      const kinds = await barKindsOverSteps();
      assert.ok(kinds.has('chosen'), 'a gold bar for the drawn token');
      assert.ok(kinds.has('nucleus'), 'green bars for other tokens inside the nucleus');
      assert.equal((await h.page.locator('#viz-bars .viz-bar').count()) >= 20, true, 'top-20 candidates');
      assert.match(await text('#viz-facts'), /Nucleus\s+[\d,]+ tokens?, [\d.<]+% of the mass/);
      assert.match(await text('#viz-facts'), /Entropy\s+[\d.]+ bits/);
      assert.match(await text('#viz-facts'), /temp 0\.8 · top-k 40 · top-p 0\.95 · min-p 0\.05/);

      // Arrow keys step through the answer.
      await h.page.locator('#viz-strip .viz-chip').nth(1).click();
      await h.page.focus('#viz-strip');
      await h.page.keyboard.press('ArrowRight');
      assert.equal(await h.page.locator('#visualizer').getAttribute('data-selected'), '2');
      await h.page.keyboard.press('ArrowLeft');
      await h.page.keyboard.press('ArrowLeft');
      assert.equal(await h.page.locator('#visualizer').getAttribute('data-selected'), '0');

      // Copy puts the answer on the clipboard.
      await h.context.grantPermissions(['clipboard-read', 'clipboard-write'], {
        origin: new URL(h.server.url).origin,
      });
      await h.page.hover('.message.assistant .bubble');
      await h.page.click('.message.assistant .bubble-copy');
      await h.page.waitForSelector('.message.assistant .bubble-copy:text("Copied")');
      assert.equal(await h.page.evaluate(() => navigator.clipboard.readText()), answer.text.trim());
    });

    test('stop halts generation within a step', async () => {
      await loadModel(SMOLLM2());
      // Greedy decoding of this question loops ("la femme, la femme, ...") until max tokens.
      await setSettings({ temperature: 0, max_tokens: 2000 });
      const answer = await askAndStop('What is the capital of France?', 10);
      const { atStop } = answer;
      assert.equal(answer.reason, 'stopped');
      assert.ok(
        answer.tokens.length <= atStop + 2,
        `${answer.tokens.length} tokens after stopping at ${atStop}`,
      );
      assert.match(answer.meta, /stopped/);
      assert.equal(await h.page.locator('#send').isVisible(), true, 'ready for the next message');
    });

    test('a long prompt shows its prefill progress and can be stopped before the first token', async () => {
      await loadModel(SMOLLM2());
      await setSettings({ max_tokens: 8 });
      const before = await answersSoFar();
      // About 700 tokens: parts of 64, so a stop lands well before the end.
      await h.page.fill(
        '#prompt',
        'Summarize this. ' + 'The quick brown fox jumps over the lazy dog. '.repeat(60),
      );
      await h.page.press('#prompt', 'Enter');
      await h.page.waitForFunction(
        () =>
          /reading the prompt: [\d,]+ of [\d,]+ tokens/.test(
            document.getElementById('chat-stats').textContent,
          ),
        null,
        { timeout: CHAT_TIMEOUT_MS },
      );
      await h.page.click('#stop');
      await h.page.waitForFunction((count) => Number(document.body.dataset.answers ?? 0) > count, before, {
        timeout: CHAT_TIMEOUT_MS,
      });
      const stopped = await lastAnswer();
      assert.equal(stopped.reason, 'stopped');
      assert.equal(stopped.tokens.length, 0, 'no token was generated');
      assert.match(stopped.meta, /stopped/);
      // What the stopped prefill evaluated stays cached: regenerating finishes it from there.
      await h.page.click('#regenerate');
      await h.page.waitForFunction(
        (count) => Number(document.body.dataset.answers ?? 0) > count + 1,
        before,
        { timeout: CHAT_TIMEOUT_MS },
      );
      const resumed = await lastAnswer();
      assert.ok(resumed.reused >= 64, `reused ${resumed.reused} tokens of the stopped prefill`);
      assert.ok(resumed.tokens.length > 0);
    });

    test('a second turn prefills only the new message', async () => {
      await loadModel(SMOLLM2());
      await setSettings({ seed: ENDING_SEED, max_tokens: 96 });
      const first = await ask('What is the capital of France?');
      assert.equal(first.reused, 0);
      const firstContext = Number(/context (\d+) \//.exec(first.meta)[1]);
      const second = await ask('And of Italy?');
      // The whole first exchange stays in the KV cache; only the new turn is evaluated.
      assert.ok(second.reused >= firstContext - 1, `reused ${second.reused} of ${firstContext}`);
      assert.ok(
        second.prefilled > 0 && second.prefilled <= 20,
        `prefilled ${second.prefilled} tokens for the new turn`,
      );
      assert.match(
        second.meta,
        new RegExp(`prefill ${second.prefilled} tok \\(\\+${second.reused} reused\\)`),
      );
      assert.equal(await h.page.locator('.message').count(), 4);
    });

    test('regenerate answers again from the cache, the same way for the same seed', async () => {
      await loadModel(SMOLLM2());
      await setSettings({ seed: ENDING_SEED, max_tokens: 96 });
      const first = await ask('What is the capital of France?');
      const before = await answersSoFar();
      await h.page.click('#regenerate');
      await h.page.waitForFunction((count) => Number(document.body.dataset.answers ?? 0) > count, before, {
        timeout: CHAT_TIMEOUT_MS,
      });
      const again = await lastAnswer();
      assert.equal(again.text, first.text, 'same seed, same conversation, same answer');
      assert.ok(again.prefilled <= 1, `the prompt is all cached: prefilled ${again.prefilled}`);
      assert.equal(await h.page.locator('.message').count(), 2, 'the old answer was replaced');
    });

    test('a newer file replaces one still loading', async () => {
      const gemma = requireModel(MODELS.gemma3);
      const before = await h.page.evaluate(() => Number(document.body.dataset.loads ?? 0));
      await h.page.setInputFiles('#file-input', gemma);
      await h.page.waitForSelector('#load-progress:not([hidden])');
      await h.page.setInputFiles('#file-input', SMOLLM2());
      await h.page.waitForFunction(
        ({ count, name }) =>
          Number(document.body.dataset.loads ?? 0) > count && document.body.dataset.model === name,
        { count: before, name: SMOLLM2_NAME },
        { timeout: CHAT_TIMEOUT_MS },
      );
      await assertModelLoaded(SMOLLM2_NAME);
      assert.equal(await h.page.locator('#chat-error').isHidden(), true, 'the replaced load is not an error');
    });

    test('branching from a candidate regenerates the answer from that step', async () => {
      await loadModel(SMOLLM2());
      await setSettings({ temperature: 0, max_tokens: 12 });
      const original = await ask('Write a haiku about the sea.');
      assert.ok(original.tokens.length >= 6);
      const prefilledBefore = original.prefilled;
      const step = 3;
      await h.page.locator('#viz-strip .viz-chip').nth(step).click();
      const candidate = h.page.locator('#viz-bars .viz-bar:not(.chosen) button:not([disabled])').first();
      const forcedId = await candidate.evaluate((button) => button.closest('.viz-bar').dataset.id);
      const forcedPiece = await candidate.locator('.viz-token').innerText();
      const before = await answersSoFar();
      await candidate.click();
      await h.page.waitForFunction((count) => Number(document.body.dataset.answers ?? 0) > count, before, {
        timeout: CHAT_TIMEOUT_MS,
      });
      const branched = await lastAnswer();
      assert.deepEqual(
        branched.tokens.slice(0, step),
        original.tokens.slice(0, step),
        'steps before the branch are kept',
      );
      assert.equal(branched.tokens[step], forcedPiece, 'the chosen candidate was forced at that step');
      await h.page.locator('#viz-strip .viz-chip').nth(step).click();
      assert.equal(await h.page.locator('#viz-bars .viz-bar.chosen').getAttribute('data-id'), forcedId);
      assert.notEqual(branched.text, original.text, 'the answer changed from that step on');
      assert.equal(branched.prefilled, prefilledBefore, 'the prompt was not evaluated again');
      assert.match(await text('#viz-facts'), /forced by you/);
    });

    test('the tools demo: a call, the result the page gives and the answer that uses it, kept over a reload', async () => {
      await loadModel(SMOLLM2());
      await setSettings({ temperature: 0, max_tokens: 80 });
      await h.page.selectOption('#set-tools-demo', 'required');
      const before = await answersSoFar();
      await h.page.fill('#prompt', 'What is the weather in Paris?');
      await h.page.press('#prompt', 'Enter');
      // Two answers: the call, then (the page having answered it) the reply.
      await h.page.waitForFunction(
        (count) => Number(document.body.dataset.answers ?? 0) >= count + 2,
        before,
        {
          timeout: CHAT_TIMEOUT_MS,
        },
      );
      const call = h.page.locator('.message.assistant .tool-call[data-tool="get_weather"]').first();
      assert.equal(await call.locator('.tool-label').innerText(), 'Called get_weather');
      const args = JSON.parse(await call.locator('.tool-code').innerText());
      assert.equal(args.city, 'Paris');
      const result = JSON.parse(await text('.message.tool .tool-code'));
      assert.equal(result.city, 'Paris');
      assert.ok(Number.isInteger(result.temperature));
      const reply = await lastAnswer();
      assert.equal(reply.reason, 'end');
      assert.ok(reply.text.length > 0, 'the last answer is text');
      const roles = await h.page.evaluate(() =>
        [...document.querySelectorAll('.message')].map((node) => node.dataset.role),
      );
      assert.deepEqual(roles, ['user', 'assistant', 'tool', 'assistant']);
      // The call and its result survive a reload, and the setting with them.
      await h.page.reload();
      await h.page.waitForSelector('#engine-info.ok');
      await h.page.waitForFunction(() => document.querySelectorAll('.message').length === 4);
      assert.equal(await h.page.locator('.message.tool .tool-code').count(), 1);
      assert.equal(await h.page.inputValue('#set-tools-demo'), 'required');
      await loadModel(SMOLLM2());
      await h.page.selectOption('#set-tools-demo', 'off');
      await h.page.click('#new-chat');
    });

    test('reload restores the conversation and settings', async () => {
      await loadModel(SMOLLM2());
      await setSettings({ seed: ENDING_SEED, max_tokens: 96 });
      await h.page.fill('#system-prompt', 'You are terse.');
      await h.page.locator('#system-prompt').dispatchEvent('change');
      const answer = await ask('What is the capital of France?');
      await h.page.reload();
      await h.page.waitForSelector('#engine-info.ok');
      await h.page.waitForFunction(() => document.querySelectorAll('.message').length === 2);
      assert.equal(await text('.message.user .answer-text'), 'What is the capital of France?');
      assert.equal(await text('.message.assistant .answer-text'), answer.text.trim());
      assert.equal(await h.page.inputValue('#set-seed'), String(ENDING_SEED));
      assert.equal(await h.page.inputValue('#system-prompt'), 'You are terse.');
    });

    test('a model kept in the browser (OPFS) reopens after reload, and can be deleted', async () => {
      await loadModel(SMOLLM2());
      await h.page.click('#keep-model');
      await h.page.waitForSelector('#keep-model[data-stored="true"]', { timeout: CHAT_TIMEOUT_MS });
      await h.page.reload();
      await h.page.waitForSelector('#engine-info.ok');
      await h.page.waitForFunction((name) => document.body.dataset.model === name, SMOLLM2_NAME, {
        timeout: CHAT_TIMEOUT_MS,
      });
      await assertModelLoaded(SMOLLM2_NAME);
      assert.equal(await h.page.locator('#keep-model').innerText(), 'Kept in browser ✓');
      // The reopened model answers, and the inspector shows the stored file.
      await setSettings({ seed: ENDING_SEED, max_tokens: 96 });
      assert.equal((await ask('What is the capital of France?')).reason, 'end');
      await h.page.click('#tab-inspect');
      await h.page.waitForSelector('#report:not([hidden])');
      assert.equal(await text('#summary-architecture'), 'llama');

      await h.page.click('#tab-chat');
      await h.page.click('#unload-model');
      await h.page.waitForSelector(`#stored-list li[data-name="${SMOLLM2_NAME}"]`);
      assert.match(await text('#stored-list'), /98\.4 MB/);
      await h.page.click(`#stored-list li[data-name="${SMOLLM2_NAME}"] button.danger`);
      await h.page.waitForSelector('#stored-models', { state: 'hidden' });
    });

    test('a malformed file shows an error, and a good file loads afterwards', async () => {
      const broken = path.join(h.scratchDir, 'broken.gguf');
      writeFileSync(broken, Buffer.concat([Buffer.from('NOTGGUF!'), Buffer.alloc(4096)]));
      await loadModel(broken);
      assert.equal(await h.page.locator('#chat-error').isVisible(), true);
      assert.equal(await text('#chat-error-kind'), 'bad_magic');
      assert.match(await text('#chat-error-title'), /Could not load broken\.gguf/);
      assert.equal(await h.page.locator('#composer').isHidden(), true);

      // A header-only file parses but cannot run: a clear engine error, not a crash.
      await loadModel(requireModel(MODELS.qwen3Vocab));
      assert.equal(await h.page.locator('#chat-error').isVisible(), true);
      assert.equal(await text('#chat-error-kind'), 'missing_tensor');

      await loadModel(SMOLLM2());
      await assertModelLoaded(SMOLLM2_NAME);
      assert.equal(await h.page.locator('#chat-error').isHidden(), true, 'the good file clears the error');

      // A file that is not GGUF fails before it is read: the loaded model stays, and says so.
      await loadModel(broken);
      assert.equal(await text('#chat-error-kind'), 'bad_magic');
      assert.match(await text('#chat-error-title'), /Could not load broken\.gguf; .* is still loaded/);
      assert.equal(await h.page.evaluate(() => document.body.dataset.model), SMOLLM2_NAME);
      assert.equal(await h.page.locator('#composer').isVisible(), true, 'the composer stays');
    });

    test('thinking blocks render collapsed and expand', async () => {
      const saved = {
        messages: [
          { role: 'user', content: 'Why?' },
          { role: 'assistant', content: '<think>\nFirst, the premise.\n</think>\n\nBecause.' },
        ],
        settings: {},
      };
      await h.page.evaluate((state) => localStorage.setItem('inferno.chat.v1', JSON.stringify(state)), saved);
      await h.page.reload();
      // The stored-model list and the demo offer render after the messages and move them: a
      // click before they settle can land beside the summary (seen in Firefox).
      await h.page.waitForFunction(() => document.body.dataset.restored === 'true');
      await h.page.waitForSelector('details.think');
      assert.equal(await h.page.locator('details.think').getAttribute('open'), null, 'collapsed');
      assert.equal(await text('.message.assistant .answer-text'), 'Because.');
      assert.match(await text('details.think summary'), /Thought for 3 words/);
      // A details element opens as the click lands; one that landed beside the summary while
      // the page still settled (seen once in Firefox, in a full run) is clicked again.
      const opened = () => h.page.evaluate(() => document.querySelector('details.think')?.open === true);
      for (let attempt = 0; attempt < 2 && !(await opened()); attempt++) {
        await h.page.click('details.think summary');
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
      await h.page.waitForSelector('details.think[open]');
      assert.equal(await h.page.locator('.think-body').innerText(), 'First, the premise.');
    });
  },
  SUITE,
);

pageSuite(
  'chat with other models',
  () => {
    test('gemma 3 chats with the built-in template', async () => {
      const gemma = requireModel(MODELS.gemma3);
      await loadModel(gemma);
      await assertModelLoaded(path.basename(gemma));
      assert.match(await text('#model-details'), /gemma3 · .* built-in gemma template/);
      await setSettings({ temperature: 0, max_tokens: 8 });
      const answer = await ask('What is the capital of France?');
      // The test file is Gemma 3 270M *base* (no instruction tuning): it rambles, so the
      // answer runs to max tokens rather than ending.
      assert.ok(['end', 'max_tokens'].includes(answer.reason));
      assert.ok(answer.tokens.length >= 1 && answer.tokens.length <= 8);
      assert.ok((await h.page.locator('#viz-bars .viz-bar').count()) >= 20);
    });

    test('a picture: Gemma 3 with its projector dropped beside it answers as llama.cpp (mtmd) does; a follow-up does not encode it again', async () => {
      const golden = JSON.parse(
        readFileSync(path.join(repoRoot, 'tests/fixtures/golden/clip-gemma3-micro.images.json'), 'utf8'),
      ).chat;
      const picture = path.join(repoRoot, 'tests/fixtures', golden.picture);
      const mmproj = path.join(fixtureModelsDir, 'clip-gemma3-micro.gguf');
      const gemma = requireModel(MODELS.gemma3);
      await loadModel(gemma);
      await assertModelLoaded(path.basename(gemma));
      assert.equal(
        await h.page.locator('#attach-picture').isHidden(),
        true,
        'no projector, no picture button',
      );
      const projectors = () => h.page.evaluate(() => Number(document.body.dataset.projectors ?? 0));

      // A picture dropped on a model without a projector: refused, saying how to give it one.
      await dropFiles([{ file: picture, type: 'image/png' }]);
      await h.page.waitForSelector('#chat-error:not([hidden])');
      assert.equal(await text('#chat-error-kind'), 'no_mmproj');
      assert.match(await text('#chat-error-message'), /drop its mmproj \.gguf file/);

      // Its projector dropped beside it (told apart from a model by its header).
      const attached = await projectors();
      await dropFiles([{ file: mmproj, type: '' }]);
      await h.page.waitForFunction(
        (count) => Number(document.body.dataset.projectors ?? 0) > count,
        attached,
        {
          timeout: CHAT_TIMEOUT_MS,
        },
      );
      assert.match(await text('#model-details'), /sees pictures \(gemma3 projector\)/);
      assert.equal(await h.page.locator('#attach-picture').isVisible(), true);
      // Exact attention, as the golden's llama.cpp: the reload keeps the projector.
      await h.page.evaluate(() => {
        document.getElementById('set-precision').closest('details').open = true;
      });
      const reattached = await projectors();
      await h.page.selectOption('#set-precision', 'exact');
      await h.page.waitForFunction(
        (count) => Number(document.body.dataset.projectors ?? 0) > count,
        reattached,
        {
          timeout: CHAT_TIMEOUT_MS,
        },
      );
      assert.match(await text('#model-details'), /sees pictures/);

      await setSettings({ temperature: 0, max_tokens: 8 });
      await h.page.setInputFiles('#picture-input', picture);
      assert.equal(await h.page.locator('#picture-tray img').count(), 1);
      await ask(golden.prompt.match(/<__media__>(.*)<end_of_turn>/)[1]);
      const ids = await h.page.evaluate(() =>
        [...document.querySelectorAll('#viz-strip .viz-chip')].map((chip) => Number(chip.dataset.token)),
      );
      assert.deepEqual(ids, golden.generated_ids.slice(0, 8), "llama.cpp's greedy tokens");
      const first = await lastAnswer();
      assert.equal(
        first.prefilled,
        golden.n_past,
        'the turn, the 16 rows between their markers, the question',
      );
      assert.equal(await h.page.evaluate(() => document.body.dataset.imagesEncoded), '1');
      assert.equal(await h.page.locator('.message.user img.bubble-picture').count(), 1, 'its thumbnail');
      assert.equal(await h.page.locator('#picture-tray').isHidden(), true, 'the tray is emptied');

      const next = await ask('And the colours?');
      assert.equal(
        await h.page.evaluate(() => document.body.dataset.imagesEncoded),
        '1',
        'not encoded again',
      );
      assert.ok(next.reused >= golden.n_past, `the picture's rows are reused: ${next.reused}`);

      // The picture is kept over a reload (IndexedDB), shown and sent again.
      await h.page.reload();
      await h.page.waitForFunction(() => document.body.dataset.restored === 'true');
      assert.equal(await h.page.locator('.message.user img.bubble-picture').count(), 1);
      assert.match(await h.page.locator('.message.user img.bubble-picture').getAttribute('src'), /^blob:/);
      // The next models have no projector: a fresh start, with the default settings.
      await h.page.evaluate(() => localStorage.removeItem('inferno.chat.v1'));
      await h.page.reload();
      await h.page.waitForFunction(() => document.body.dataset.restored === 'true');
    });

    test('a picture: a model and its tiling projector dropped together (micro LFM2-VL) answer as llama.cpp (mtmd) does', async () => {
      const golden = JSON.parse(
        readFileSync(path.join(repoRoot, 'tests/fixtures/golden/clip-lfm2-micro.images.json'), 'utf8'),
      ).chat;
      const model = path.join(fixtureModelsDir, 'lfm2-vl-micro-q8_0.gguf');
      const loads = await h.page.evaluate(() => Number(document.body.dataset.loads ?? 0));
      await dropFiles([
        { file: model, type: '' },
        { file: path.join(fixtureModelsDir, 'clip-lfm2-micro.gguf'), type: '' },
      ]);
      await h.page.waitForFunction((count) => Number(document.body.dataset.loads ?? 0) > count, loads, {
        timeout: CHAT_TIMEOUT_MS,
      });
      await assertModelLoaded(path.basename(model));
      assert.match(
        await text('#model-details'),
        /sees pictures \(lfm2 projector, 64 to 256 rows a picture\)/,
      );
      await setSettings({ temperature: 0, max_tokens: 8 });
      await h.page.setInputFiles('#picture-input', path.join(repoRoot, 'tests/fixtures', golden.picture));
      await ask(golden.prompt.match(/<__media__>(.*)<\|im_end\|>/)[1]);
      const ids = await h.page.evaluate(() =>
        [...document.querySelectorAll('#viz-strip .viz-chip')].map((chip) => Number(chip.dataset.token)),
      );
      assert.deepEqual(ids, golden.generated_ids.slice(0, 8), "llama.cpp's greedy tokens");
      const answer = await lastAnswer();
      assert.equal(answer.prefilled, golden.n_past, 'the turn, 247 rows between their markers, the question');
      await h.page.evaluate(() => localStorage.removeItem('inferno.chat.v1'));
      await h.page.reload();
      await h.page.waitForFunction(() => document.body.dataset.restored === 'true');
    });

    test("a picture's rows limited in the settings (micro Qwen3.5): the projector attached again, the answer as llama.cpp (mtmd) gives it under the same limits", async () => {
      const limited = JSON.parse(
        readFileSync(path.join(repoRoot, 'tests/fixtures/golden/clip-qwen3vl-micro.images.json'), 'utf8'),
      ).limited;
      const golden = limited.chat;
      const model = path.join(fixtureModelsDir, 'qwen35-micro-q8_0.gguf');
      const loads = await h.page.evaluate(() => Number(document.body.dataset.loads ?? 0));
      await dropFiles([
        { file: model, type: '' },
        { file: path.join(fixtureModelsDir, 'clip-qwen3vl-micro.gguf'), type: '' },
      ]);
      await h.page.waitForFunction((count) => Number(document.body.dataset.loads ?? 0) > count, loads, {
        timeout: CHAT_TIMEOUT_MS,
      });
      await assertModelLoaded(path.basename(model));
      assert.match(
        await text('#model-details'),
        /sees pictures \(qwen3vl_merger projector, 8 to 4,096 rows a picture\)/,
      );
      const projectors = await h.page.evaluate(() => Number(document.body.dataset.projectors ?? 0));
      await setSettings({ temperature: 0, max_tokens: 8, image_min_tokens: 16, image_max_tokens: 64 });
      await h.page.evaluate(() =>
        document.getElementById('set-image-max-tokens').dispatchEvent(new Event('change')),
      );
      await h.page.waitForFunction(
        (count) => Number(document.body.dataset.projectors ?? 0) > count,
        projectors,
        { timeout: CHAT_TIMEOUT_MS },
      );
      // Each of the two settings attaches the projector again: the first attach (16 to 4,096)
      // can count before the second is done.
      await h.page.waitForFunction(
        () => /16 to 64 rows a picture/.test(document.getElementById('model-details')?.textContent ?? ''),
        null,
        { timeout: CHAT_TIMEOUT_MS },
      );
      assert.match(await text('#model-details'), /16 to 64 rows a picture/);
      await h.page.setInputFiles('#picture-input', path.join(repoRoot, 'tests/fixtures', golden.picture));
      await ask(golden.prompt.match(/<__media__>(.*)<\|im_end\|>/)[1]);
      const ids = await h.page.evaluate(() =>
        [...document.querySelectorAll('#viz-strip .viz-chip')].map((chip) => Number(chip.dataset.token)),
      );
      assert.deepEqual(ids, golden.generated_ids.slice(0, 8), "llama.cpp's greedy tokens under the limits");
      const rows = golden.chunks.reduce(
        (sum, chunk) => sum + (chunk.image_tokens ?? chunk.text_ids.length),
        0,
      );
      assert.equal(
        (await lastAnswer()).prefilled,
        rows,
        'the turn with the picture in 54 rows (247 without limits)',
      );
      // Limits the projector refuses fail a load with it before the model loaded is freed.
      await h.page.evaluate(() => {
        document.getElementById('set-image-max-tokens').value = '5000';
      });
      const before = await h.page.evaluate(() => Number(document.body.dataset.loads ?? 0));
      await dropFiles([
        { file: model, type: '' },
        { file: path.join(fixtureModelsDir, 'clip-qwen3vl-micro.gguf'), type: '' },
      ]);
      await h.page.waitForFunction((count) => Number(document.body.dataset.loads ?? 0) > count, before, {
        timeout: CHAT_TIMEOUT_MS,
      });
      assert.equal(await text('#chat-error-kind'), 'bad_request');
      assert.match(await text('#chat-error'), /at most 4096 rows a picture, not 5000/);
      assert.match(await text('#chat-error-title'), /is still loaded/);
      assert.equal(await h.page.evaluate(() => document.body.dataset.model), path.basename(model));
      await h.page.evaluate(() => localStorage.removeItem('inferno.chat.v1'));
      await h.page.reload();
      await h.page.waitForFunction(() => document.body.dataset.restored === 'true');
    });

    // The micro files of scripts/make_micro_models.py: every architecture beyond the real models
    // loads in the page and streams an answer with the template from its file, and so does an
    // i-quant file. Each weight type's kernels follow llama.cpp's logits in tests/web/, in
    // every build and engine; here the nine i-quant files (one architecture, one template) ran
    // the same page flow nine times.
    for (const file of [
      'qwen2-micro-q8_0.gguf',
      'smollm3-micro-q8_0.gguf',
      'phi3-micro-q8_0.gguf',
      'gemma2-micro-q8_0.gguf',
      'llama-micro-iq2_xxs.gguf',
      'llama-micro-llama3.gguf',
      'gemma4-micro-q8_0.gguf',
      'qwen3moe-micro-q8_0.gguf',
      'granitemoe-micro-q8_0.gguf',
      'granite-micro-q8_0.gguf',
      'lfm2moe-micro-q8_0.gguf',
      'gpt-oss-micro-q8_0.gguf',
    ]) {
      test(`${file} chats with the template from its file`, async () => {
        await loadModel(requireModel({ file: path.join(fixtureModelsDir, file) }));
        await assertModelLoaded(file);
        assert.match(await text('#model-details'), new RegExp(`^${file.replace(/-micro-.*$/, '')} · `));
        await setSettings({ temperature: 0, max_tokens: 4 });
        const answer = await ask('Hello');
        assert.equal(answer.tokens.length, 4);
      });
    }

    // Qwen3.5's DeltaNet layers, LFM2's short convolutions and Granite 4.0-H's Mamba-2 layers
    // keep a recurrent state that
    // cannot be truncated: rollbacks go through the state checkpoints (at each prompt's end
    // and every 32 positions).
    for (const [file, arch] of [
      ['qwen35-micro-q8_0.gguf', 'qwen35'],
      ['lfm2-micro-q8_0.gguf', 'lfm2'],
      ['granitehybrid-micro-q8_0.gguf', 'granitehybrid'],
    ]) {
      test(`${arch} (recurrent layers) streams, stops, reuses its cache and branches`, async () => {
        await loadModel(requireModel({ file: path.join(fixtureModelsDir, file) }));
        await assertModelLoaded(file);
        assert.match(await text('#model-details'), new RegExp(`^${arch} · `));

        // Stream, then stop: greedy decoding of random weights runs to max tokens otherwise.
        await setSettings({ temperature: 0, max_tokens: 2000 });
        const stopped = await askAndStop('Hello', 40);
        const { atStop } = stopped;
        assert.equal(stopped.reason, 'stopped');
        // This file decodes in about a millisecond a token: steps already queued still arrive.
        assert.ok(stopped.tokens.length < atStop + 100, `${stopped.tokens.length} tokens after ${atStop}`);
        // The prompt's end and a stretch of the answer are checkpointed.
        assert.match(await text('#chat-stats'), /[2-8] of [2-8] state checkpoints × [\d.]+ [kM]B/);

        // A second turn keeps at least the first turn's prompt and reads the new message.
        await setSettings({ temperature: 0, max_tokens: 12 });
        const second = await ask('And again?');
        assert.ok(second.reused >= 9, `reused ${second.reused}`);
        assert.ok(second.prefilled > 0, `prefilled ${second.prefilled}`);
        assert.equal(second.tokens.length, 12);

        // Branch from step 3's runner-up: the recurrent state goes back to the prompt's
        // checkpoint and replays the 3 kept steps.
        const step = 3;
        await h.page.locator('#viz-strip .viz-chip').nth(step).click();
        const candidate = h.page.locator('#viz-bars .viz-bar:not(.chosen) button:not([disabled])').first();
        const forcedPiece = await candidate.locator('.viz-token').innerText();
        const beforeBranch = await answersSoFar();
        await candidate.click();
        await h.page.waitForFunction(
          (count) => Number(document.body.dataset.answers ?? 0) > count,
          beforeBranch,
          {
            timeout: CHAT_TIMEOUT_MS,
          },
        );
        const branched = await lastAnswer();
        assert.deepEqual(
          branched.tokens.slice(0, step),
          second.tokens.slice(0, step),
          'steps before are kept',
        );
        assert.equal(branched.tokens[step], forcedPiece, 'the candidate was forced at that step');
        assert.match(branched.meta, /3 replayed from a checkpoint/);
      });
    }

    test('a JSON schema in the settings makes the answer JSON, and the visualiser shows what the grammar removed', async () => {
      await loadModel(requireModel(MODELS.qwen3Micro));
      const schema = {
        type: 'object',
        properties: {
          city: { type: 'string', maxLength: 12 },
          visits: { type: 'integer', minimum: 0, maximum: 99 },
        },
        required: ['city', 'visits'],
        additionalProperties: false,
      };
      // Random weights sampled hot: without the grammar this model never writes JSON.
      await setSettings({ temperature: 1, max_tokens: 150, seed: 3, json_schema: JSON.stringify(schema) });
      const answer = await ask('Which city?');
      assert.equal(answer.reason, 'end', `the grammar ended it: ${answer.text}`);
      const value = JSON.parse(answer.text);
      assert.deepEqual(Object.keys(value).sort(), ['city', 'visits']);
      assert.ok(value.city.length <= 12 && Number.isInteger(value.visits), answer.text);
      assert.ok(
        (await h.page.locator('#viz-bars .viz-bar.forbidden').count()) > 0,
        'forbidden tokens are listed',
      );
      assert.match(
        await text('#viz-facts'),
        /Grammar\s*allowed [\d,]+ tokens?; removed [\d.<]+ ?% of what the model wanted/,
      );
      // Not JSON: refused before anything is sent.
      await setSettings({ json_schema: '{"type": ' });
      await h.page.fill('#prompt', 'Again?');
      await h.page.press('#prompt', 'Enter');
      await h.page.waitForSelector('#chat-error:not([hidden])');
      assert.match(await text('#chat-error'), /JSON schema must be a JSON object/);
      await setSettings({ json_schema: '' });
    });

    test('gpt-oss offers a reasoning effort, and the prompt carries it', async () => {
      const file = 'gpt-oss-micro-q8_0.gguf';
      await loadModel(requireModel({ file: path.join(fixtureModelsDir, file) }));
      await assertModelLoaded(file);
      assert.equal(await h.page.locator('#reasoning-effort').isVisible(), true);
      assert.equal(await h.page.locator('#thinking-toggle').isVisible(), false);
      await setSettings({ temperature: 0, max_tokens: 2 });
      // A second turn at the same effort reuses the whole first prompt from the cache; a third
      // at another effort differs from the system message's "Reasoning:" line on, well before
      // the end of the first prompt (its rules for channels, the user's turn follow).
      const askAt = async (effort, message) => {
        await h.page.selectOption('#reasoning-effort', effort);
        return ask(message);
      };
      const first = await askAt('low', 'Hello');
      const second = await askAt('low', 'Again');
      const third = await askAt('high', 'More');
      assert.ok(second.reused >= first.prefilled, JSON.stringify({ first, second }));
      assert.ok(third.reused < first.prefilled - 20, JSON.stringify({ first, third }));
    });

    test("attention's precision and the KV cache's types: each reloads the model and says so; Fast and F16 are the defaults", async () => {
      await loadModel(requireModel(MODELS.qwen3Micro));
      await assertModelLoaded('qwen3-micro-q4_0.gguf');
      const device = h.page.locator('#model-device');
      assert.equal(await device.getAttribute('data-precision'), 'fast');
      assert.doesNotMatch(await device.innerText(), /exact attention/);
      await h.page.evaluate(() => {
        document.getElementById('set-precision').closest('details').open = true;
      });
      const loads = await h.page.evaluate(() => Number(document.body.dataset.loads ?? 0));
      await h.page.selectOption('#set-precision', 'exact');
      await h.page.waitForFunction((count) => Number(document.body.dataset.loads ?? 0) > count, loads, {
        timeout: CHAT_TIMEOUT_MS,
      });
      await h.page.waitForFunction(
        () => document.getElementById('model-device').dataset.precision === 'exact',
      );
      assert.match(await device.innerText(), /^CPU · \d+ threads? · exact attention/);
      await setSettings({ temperature: 0, max_tokens: 4 });
      const answer = await ask('Hello');
      assert.equal(answer.tokens.length, 4);
      // The API refuses other values before loading anything.
      const refused = (options) =>
        h.page.evaluate(async (options) => {
          const { Inferno } = await import('/lib/inferno.js');
          return Inferno.load(new Blob([new Uint8Array(8)]), options).then(
            () => 'loaded',
            (error) => `${error.kind}: ${error.message}`,
          );
        }, options);
      assert.match(
        await refused({ precision: 'half' }),
        /^bad_request: precision must be one of fast, exact/,
      );
      await h.page.selectOption('#set-precision', 'fast');
      // The cache as llama.cpp's -ctk q8_0 -ctv q8_0.
      const cacheTypesShown = (types) =>
        h.page.waitForFunction(
          (types) => document.getElementById('model-device').dataset.cacheTypes === types,
          types,
          { timeout: CHAT_TIMEOUT_MS },
        );
      assert.equal(await device.getAttribute('data-cache-types'), 'f16/f16');
      assert.doesNotMatch(await device.innerText(), /KV cache/);
      await h.page.selectOption('#set-cache-k', 'q8_0');
      await h.page.selectOption('#set-cache-v', 'q8_0');
      await cacheTypesShown('q8_0/q8_0');
      assert.match(await device.innerText(), /^CPU · \d+ threads? · KV cache q8_0\/q8_0/);
      const quantized = await ask('Hello');
      assert.equal(quantized.tokens.length, 4);
      assert.match(
        await refused({ cache_type_v: 'q4_0' }),
        /^bad_request: cache_type_v must be one of f16, q8_0, f32/,
      );
      await h.page.selectOption('#set-cache-k', 'f16');
      await h.page.selectOption('#set-cache-v', 'f16');
      await cacheTypesShown('f16/f16');
    });

    test('qwen3 offers the thinking toggle', async () => {
      await loadModel(requireModel(MODELS.qwen3Micro));
      await assertModelLoaded('qwen3-micro-q4_0.gguf');
      assert.equal(await h.page.locator('#thinking-toggle').isVisible(), true);
      assert.equal(await h.page.locator('#reasoning-effort').isVisible(), false);
      await setSettings({ temperature: 0, max_tokens: 4 });
      const answer = await ask('Hello');
      assert.equal(answer.tokens.length, 4);
    });
  },
  SUITE,
);

pageSuite(
  'demo model',
  () => {
    test('the served demo model loads with one click, with progress, and can be inspected', async () => {
      const demo = path.join(wwwRoot, 'models', SMOLLM2_NAME);
      assert.ok(existsSync(demo), `${demo} is missing: build.sh places the demo model before the page tests`);
      await h.page.waitForSelector('#demo-offer:not([hidden])');
      assert.match(await text('#demo-size'), /98\.4 MB/);
      await h.page.evaluate(() => {
        window.__phases = [];
        new MutationObserver(() => {
          const phase = document.getElementById('load-progress').dataset.phase;
          if (phase && window.__phases.at(-1) !== phase) window.__phases.push(phase);
        }).observe(document.getElementById('load-progress'), {
          attributes: true,
          subtree: true,
          childList: true,
        });
      });
      const before = await h.page.evaluate(() => Number(document.body.dataset.loads ?? 0));
      await h.page.click('#demo-model');
      await h.page.waitForFunction((count) => Number(document.body.dataset.loads ?? 0) > count, before, {
        timeout: CHAT_TIMEOUT_MS,
      });
      await assertModelLoaded(SMOLLM2_NAME);
      const phases = await h.page.evaluate(() => window.__phases);
      assert.deepEqual(phases.filter((p) => p !== 'storing').slice(0, 2), ['reading', 'validating']);
      assert.equal(
        await h.page.locator('#load-progress').isHidden(),
        true,
        'the progress bar is gone when ready',
      );
      await h.page.click('#tab-inspect');
      await h.page.waitForSelector('#report:not([hidden])');
      assert.equal(await text('#summary-architecture'), 'llama');
    });
  },
  SUITE,
);

describe('offline', { timeout: TEST_TIMEOUT_MS }, () => {
  test('after one visit the app shell loads with the server gone', async () => {
    // A server of its own, so it can be shut down mid-test.
    const server = await startServer({ root: wwwRoot, port: 0 });
    h.problems = [];
    const context = await h.browser.newContext();
    const page = await context.newPage();
    try {
      await page.goto(server.url);
      await page.waitForSelector('#engine-info.ok');
      await page.evaluate(async () => {
        await navigator.serviceWorker.ready;
        if (!navigator.serviceWorker.controller) {
          await new Promise((resolve) =>
            navigator.serviceWorker.addEventListener('controllerchange', resolve, { once: true }),
          );
        }
      });
      // One complete cache, named after the build being served, and nothing cached at run
      // time: not even the URL a restarted worker is loaded from.
      const caches = await page.evaluate(async () => {
        await fetch('./lib/worker.js?instance=7');
        const { version } = await (await fetch('./builds.json')).json();
        const names = await caches.keys();
        const keys = await Promise.all(
          names.map(async (name) => (await (await caches.open(name)).keys()).map((r) => r.url)),
        );
        return { version, names, keys: keys.flat() };
      });
      assert.deepEqual(caches.names, [`inferno-shell-${caches.version}`]);
      assert.ok(
        caches.keys.some((url) => url.endsWith('/pkg/inferno_bg.wasm')),
        'the builds are kept',
      );
      assert.ok(
        !caches.keys.some((url) => url.includes('?')),
        `run-time entries: ${caches.keys.filter((u) => u.includes('?'))}`,
      );
      await server.close();
      watchForProblems(page); // From here on, nothing may fail.
      await page.reload();
      await page.waitForSelector('#engine-info.ok, #engine-info.failed');
      assert.equal(await page.locator('h1').innerText(), 'Inferno');
      assert.match(await page.locator('#engine-info').innerText(), /^engine \d+\.\d+\.\d+/);
      // The engine really runs offline: load a model from disk and chat.
      await loadModel(requireModel(MODELS.qwen3Micro), page);
      await assertModelLoaded('qwen3-micro-q4_0.gguf', page);
      // A shell URL the offline copy lacks is answered, not failed: a 503 that says why (a
      // rejected answer is what Firefox logs as an error even when nobody waits for it).
      const missing = await page.evaluate(async () => {
        const response = await fetch('./lib/not-in-the-offline-copy.js');
        return { status: response.status, body: await response.text() };
      });
      assert.equal(missing.status, 503);
      // Chromium logs any 4xx/5xx a page fetches; this one was asked for.
      h.problems = h.problems.filter(
        (problem) => !/status of 503 \(Service Unavailable \(offline\)\)/.test(problem),
      );
      assert.match(
        missing.body,
        /not-in-the-offline-copy\.js: the server cannot be reached .*no offline copy/,
      );
    } finally {
      await context.close();
      await server.close().catch(() => {});
    }
    assert.deepEqual(h.problems, [], 'the offline page logged errors');
  });
});
