// What the chat page tests do again and again: load a model, change settings, ask, and read
// back the answer the page shows.

import assert from 'node:assert/strict';
import { h } from './harness.mjs';

export const CHAT_TIMEOUT_MS = 60_000;

/** Chooses a model file and waits until the chat has loaded it (or failed to). */
export async function loadModel(filePath, page = h.page) {
  const before = await page.evaluate(() => Number(document.body.dataset.loads ?? 0));
  await page.setInputFiles('#file-input', filePath);
  await page.waitForFunction((count) => Number(document.body.dataset.loads ?? 0) > count, before, {
    timeout: CHAT_TIMEOUT_MS,
  });
}

export async function assertModelLoaded(name, page = h.page) {
  if (await page.locator('#chat-error').isVisible())
    assert.fail(`load failed: ${await page.locator('#chat-error').innerText()}`);
  assert.equal(await page.evaluate(() => document.body.dataset.model), name);
  assert.equal(await page.locator('#composer').isVisible(), true, 'the composer is shown');
}

export async function setSettings(settings) {
  for (const [key, value] of Object.entries(settings)) {
    await h.page.fill(`#set-${key.replace(/_/g, '-')}`, String(value));
  }
}

export async function answersSoFar() {
  return h.page.evaluate(() => Number(document.body.dataset.answers ?? 0));
}

/** Sends a message and waits for the answer to finish; returns what the page shows. */
export async function ask(message) {
  const before = await answersSoFar();
  await h.page.fill('#prompt', message);
  await h.page.press('#prompt', 'Enter');
  await h.page.waitForFunction((count) => Number(document.body.dataset.answers ?? 0) > count, before, {
    timeout: CHAT_TIMEOUT_MS,
  });
  return lastAnswer();
}

export async function lastAnswer() {
  return h.page.evaluate(() => ({
    reason: document.body.dataset.lastReason,
    text: document.querySelector('.message.assistant:last-child .answer-text')?.textContent ?? '',
    meta: document.querySelector('.message.assistant:last-child .bubble-meta')?.textContent ?? '',
    tokens: [...document.querySelectorAll('#viz-strip .viz-chip')].map((chip) => chip.textContent),
    prefilled: Number(document.body.dataset.lastPrefill),
    reused: Number(document.body.dataset.lastReused),
  }));
}

/**
 * Sends a message, clicks Stop once the strip shows `chips` steps, and waits for the answer to
 * settle; returns it with the number of steps shown when Stop was clicked.
 */
export async function askAndStop(message, chips) {
  const before = await answersSoFar();
  await h.page.fill('#prompt', message);
  await h.page.press('#prompt', 'Enter');
  await h.page.waitForFunction(
    (count) => document.querySelectorAll('#viz-strip .viz-chip').length >= count,
    chips,
    { timeout: CHAT_TIMEOUT_MS },
  );
  // The tokens the page had received when Stop was clicked: the live stats count each as it
  // arrives, while the visualizer draws its chips a frame later (Firefox lags several steps).
  const atStop = await h.page.evaluate(() => {
    document.getElementById('stop').click();
    const chips = document.querySelectorAll('#viz-strip .viz-chip').length;
    const counted = /(\d+) tokens/.exec(document.getElementById('chat-stats').textContent);
    return Math.max(chips, counted ? Number(counted[1]) : 0);
  });
  await h.page.waitForFunction((count) => Number(document.body.dataset.answers ?? 0) > count, before, {
    timeout: CHAT_TIMEOUT_MS,
  });
  return { ...(await lastAnswer()), atStop };
}
