// WebKitGTK (Safari's engine) for the page tests and the benchmark: its WebDriver server
// (Debian's webkit2gtk-driver), on a virtual display when none is set (WebKitGTK has no
// headless mode; without a display a new session hangs instead of failing), with
// SharedArrayBuffer switched on (JSC_useSharedArrayBuffer=1: WebKitGTK keeps it off unless
// told). Sessions are opened with selenium-webdriver, a plain W3C client: playwright-core and
// puppeteer-core cannot drive WebKitGTK.

import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { Builder } from 'selenium-webdriver';

export const webkitDriverPath = process.env.WEBKIT_WEBDRIVER ?? '/usr/bin/WebKitWebDriver';

/** A port nobody listens on now. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Xvfb on a display it picks; resolves to {display, stop()}. */
function startXvfb() {
  return new Promise((resolve, reject) => {
    const xvfb = spawn('Xvfb', ['-displayfd', '1', '-screen', '0', '1280x1024x24', '-nolisten', 'tcp'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const timer = setTimeout(() => reject(new Error('Xvfb did not start (apt-get install xvfb)')), 20_000);
    xvfb.once('error', reject);
    xvfb.stdout.once('data', (chunk) => {
      clearTimeout(timer);
      resolve({ display: `:${String(chunk).trim()}`, stop: () => xvfb.kill() });
    });
  });
}

/**
 * Starts WebKitWebDriver (and Xvfb where no display is set). Resolves to
 * {newSession(): a selenium WebDriver, stop()}.
 */
export async function launchWebKit() {
  const xvfb = process.env.DISPLAY ? null : await startXvfb();
  const port = await freePort();
  const driver = spawn(webkitDriverPath, [`--port=${port}`], {
    env: { ...process.env, JSC_useSharedArrayBuffer: '1', ...(xvfb ? { DISPLAY: xvfb.display } : {}) },
    stdio: 'ignore',
  });
  const url = `http://127.0.0.1:${port}`;
  // Ready when its status answers.
  for (let tries = 0; ; tries++) {
    try {
      if ((await fetch(`${url}/status`)).ok) break;
    } catch {
      // Not listening yet.
    }
    if (tries > 100) throw new Error(`${webkitDriverPath} did not start`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    newSession: () => new Builder().forBrowser('MiniBrowser').usingServer(url).build(),
    stop: () => {
      driver.kill();
      xvfb?.stop();
    },
  };
}
