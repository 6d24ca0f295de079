#!/usr/bin/env node
// Runs the reduction in headless Firefox (the one the page tests drive) and in headless
// Chromium for contrast: N starts of a worker that starts a nested worker, module and classic.
//
//   node docs/repro/firefox-nested-worker/run.mjs [N]   (default 300)

import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';
import { chromium } from 'playwright-core';
import { startServer } from '../../../scripts/serve.mjs';
import { firefoxLaunchOptions } from '../../../scripts/firefox.mjs';
import { CHROMIUM_ARGS, chromiumPath } from '../../../scripts/chromium.mjs';

const n = Number(process.argv[2] ?? 300);
const server = await startServer({ root: fileURLToPath(new URL('.', import.meta.url)), port: 0 });
try {
  const firefox = await puppeteer.launch(firefoxLaunchOptions());
  await report(await firefox.version(), await firefox.newPage());
  await firefox.close();
  const chrome = await chromium.launch({ executablePath: chromiumPath, args: CHROMIUM_ARGS });
  await report(`Chromium ${chrome.version()}`, await chrome.newPage());
  await chrome.close();
} finally {
  await server.close();
}

async function report(browser, page) {
  await page.goto(`${server.url}index.html`);
  await page.waitForFunction(() => window.ready === true);
  for (const type of ['module', 'classic']) {
    const result = await page.evaluate(({ n, type }) => window.runNested(n, type), { n, type });
    console.log(`${browser}: ${JSON.stringify(result)}`);
  }
}
