// The part of Playwright's Browser / BrowserContext / Page / Locator API that the page tests
// use, implemented over puppeteer-core driving stock Firefox through WebDriver BiDi
// (Playwright only drives its own patched Firefox). The same test files then run in both
// browsers; harness.mjs picks this when INFERNO_BROWSER=firefox.
//
// Semantics follow Playwright's where the tests depend on them: locators are lazy and
// re-resolved on every call; actions wait for their element (visible and enabled for clicks
// and typing); `:visible` and `:text("...")` work at the end of a selector; fill() edits the
// field as typing does (an `input` event, and `change` when focus leaves); waits poll and
// time out after 30 s unless told otherwise. Not implemented: Playwright's strictness checks
// (a locator matching several elements acts on the first; Chromium runs keep those checks).

import puppeteer from 'puppeteer-core';
import { firefoxLaunchOptions } from '../../scripts/firefox.mjs';

const DEFAULT_TIMEOUT_MS = 30_000;
const POLL_MS = 50;

/** Launches headless Firefox; resolves to a Playwright-like Browser. */
export async function launchFirefox() {
  const browser = await puppeteer.launch(firefoxLaunchOptions());
  return new FirefoxBrowser(browser);
}

class FirefoxBrowser {
  constructor(browser) {
    this.browser = browser;
  }

  async newContext(options = {}) {
    return new FirefoxContext(await this.browser.createBrowserContext(), options);
  }

  version() {
    return this.browser.version();
  }

  async close() {
    await this.browser.close();
  }
}

// In the page: what Playwright's contextOptions.serviceWorkers = 'block' does (registration
// never reaches the browser, so every request goes through page.route).
function blockServiceWorkers() {
  if (navigator.serviceWorker) {
    navigator.serviceWorker.register = () =>
      Promise.reject(new Error('service workers are blocked in this test context'));
  }
}

/**
 * An init script as Playwright runs it: in every document the page loads, but not in a new
 * page's initial about:blank (Firefox's preload scripts run there too, where storage throws):
 * only in http(s) documents.
 */
function initScriptSource(script, arg) {
  // Reading the location there can itself throw ("The operation is insecure").
  return `(() => {
    let web = false;
    try { web = /^https?:$/.test(location.protocol); } catch {}
    if (web) (${script})(${arg === undefined ? '' : JSON.stringify(arg)});
  })();`;
}

class FirefoxContext {
  constructor(context, options) {
    this.context = context;
    this.options = options;
    this.initScripts = [];
    this.pages = [];
    if (options.serviceWorkers === 'block') this.initScripts.push([blockServiceWorkers, undefined]);
  }

  async newPage() {
    const page = await this.context.newPage();
    await page.setViewport(this.options.viewport ?? { width: 1280, height: 720 });
    page.setDefaultTimeout(DEFAULT_TIMEOUT_MS);
    for (const [script, arg] of this.initScripts)
      await page.evaluateOnNewDocument(initScriptSource(script, arg));
    const wrapped = new FirefoxPage(this, page);
    this.pages.push(wrapped);
    return wrapped;
  }

  async addInitScript(script, arg) {
    this.initScripts.push([script, arg]);
    for (const page of this.pages) await page.page.evaluateOnNewDocument(initScriptSource(script, arg));
  }

  /**
   * Playwright grants clipboard access per origin; Firefox has no such permission for
   * pages: writing needs a user gesture (the tests click), and reading is allowed by the
   * profile's dom.events.testing.asyncClipboard preference (scripts/firefox.mjs).
   */
  async grantPermissions(permissions) {
    const known = new Set(['clipboard-read', 'clipboard-write']);
    const unknown = permissions.filter((p) => !known.has(p));
    if (unknown.length) throw new Error(`grantPermissions: not available in Firefox: ${unknown.join(', ')}`);
  }

  async newCDPSession() {
    throw new Error('newCDPSession: the Chrome DevTools Protocol is Chromium-only');
  }

  async close() {
    await this.context.close();
  }
}

// ---------------------------------------------------------------------------------------
// Selectors: CSS, with Playwright's `:visible` and `:text("...")` at the end of a selector.

function parseSelector(selector) {
  let css = selector.trim();
  let onlyVisible = false;
  let hasText = null;
  for (;;) {
    const visible = /:visible$/.exec(css);
    const text = /:text\("((?:[^"\\]|\\.)*)"\)$/.exec(css);
    if (visible) {
      onlyVisible = true;
      css = css.slice(0, visible.index);
    } else if (text) {
      hasText = JSON.parse(`"${text[1]}"`);
      css = css.slice(0, text.index);
    } else {
      break;
    }
  }
  if (/:(visible|text|has-text|nth-match)\b/.test(css))
    throw new Error(`selector not supported by the Firefox adapter: ${selector}`);
  return { css, onlyVisible, hasText };
}

// Runs in the page (serialised into each call): the elements a list of steps designates.
function resolveSteps(steps) {
  const isVisible = (el) => {
    if (el.checkVisibility && !el.checkVisibility()) return false;
    const rect = el.getBoundingClientRect();
    return rect.width > 0 && rect.height > 0 && getComputedStyle(el).visibility === 'visible';
  };
  let found = [document];
  for (const step of steps) {
    if (step.nth !== undefined) {
      const i = step.nth < 0 ? found.length + step.nth : step.nth;
      found = found[i] ? [found[i]] : [];
      continue;
    }
    const next = [];
    for (const root of found) {
      for (const el of root.querySelectorAll(step.css)) if (!next.includes(el)) next.push(el);
    }
    found = next.filter(
      (el) =>
        (!step.onlyVisible || isVisible(el)) &&
        (step.hasText === null ||
          el.textContent.replace(/\s+/g, ' ').toLowerCase().includes(step.hasText.toLowerCase())),
    );
  }
  return found;
}

// Runs in the page: whether an element is in the state an action waits for.
function elementState(el, state) {
  if (!el) return state === 'hidden' || state === 'detached';
  if (state === 'attached') return true;
  if (state === 'detached') return false;
  const visible =
    (!el.checkVisibility || el.checkVisibility()) &&
    el.getBoundingClientRect().width > 0 &&
    el.getBoundingClientRect().height > 0 &&
    getComputedStyle(el).visibility === 'visible';
  if (state === 'visible') return visible;
  if (state === 'hidden') return !visible;
  const disabled = el.disabled === true || !!el.closest('fieldset[disabled]');
  if (state === 'enabled') return visible && !disabled;
  throw new Error(`unknown element state ${state}`);
}

const stepsExpression = (steps) => `(${resolveSteps})(${JSON.stringify(steps)})`;

class Locator {
  constructor(page, steps) {
    this.page = page;
    this.steps = steps;
  }

  toString() {
    return this.steps
      .map((s) =>
        s.nth !== undefined
          ? `nth=${s.nth}`
          : s.css +
            (s.onlyVisible ? ':visible' : '') +
            (s.hasText !== null ? `:text(${JSON.stringify(s.hasText)})` : ''),
      )
      .join(' >> ');
  }

  locator(selector) {
    return new Locator(this.page, [...this.steps, parseSelector(selector)]);
  }

  nth(index) {
    return new Locator(this.page, [...this.steps, { nth: index }]);
  }

  first() {
    return this.nth(0);
  }

  last() {
    return this.nth(-1);
  }

  async count() {
    return this.page.page.evaluate(`${stepsExpression(this.steps)}.length`);
  }

  /** Waits until the first match is in `state` (attached, visible, hidden, enabled...). */
  async waitFor({ state = 'visible', timeout = DEFAULT_TIMEOUT_MS } = {}) {
    const expression = `(${elementState})(${stepsExpression(this.steps)}[0], ${JSON.stringify(state)})`;
    try {
      await this.page.page.waitForFunction(expression, { timeout, polling: POLL_MS });
    } catch (error) {
      throw new Error(`waiting for ${this} to be ${state}: ${error.message}`);
    }
  }

  /** The first match, once it is in `state`, as a puppeteer ElementHandle. */
  async element(state = 'attached', timeout = DEFAULT_TIMEOUT_MS) {
    await this.waitFor({ state, timeout });
    const handle = await this.page.page.evaluateHandle(`${stepsExpression(this.steps)}[0]`);
    if (!handle.asElement()) {
      await handle.dispose();
      throw new Error(`${this} matches no element`);
    }
    return handle;
  }

  /** Runs fn(element, arg) in the page on the first match. */
  async evaluate(fn, arg, state = 'attached') {
    const handle = await this.element(state);
    try {
      return await handle.evaluate(fn, arg);
    } finally {
      await handle.dispose();
    }
  }

  async evaluateAll(fn, arg) {
    const handle = await this.page.page.evaluateHandle(stepsExpression(this.steps));
    try {
      return await handle.evaluate(fn, arg);
    } finally {
      await handle.dispose();
    }
  }

  async isVisible() {
    return this.page.page.evaluate(`(${elementState})(${stepsExpression(this.steps)}[0], 'visible')`);
  }

  async isHidden() {
    return !(await this.isVisible());
  }

  async isEnabled() {
    return this.evaluate((el) => !(el.disabled === true || !!el.closest('fieldset[disabled]')));
  }

  async isDisabled() {
    return !(await this.isEnabled());
  }

  innerText() {
    return this.evaluate((el) => el.innerText);
  }

  textContent() {
    return this.evaluate((el) => el.textContent);
  }

  getAttribute(name) {
    return this.evaluate((el, attribute) => el.getAttribute(attribute), name);
  }

  inputValue() {
    return this.evaluate((el) => el.value);
  }

  dispatchEvent(type) {
    return this.evaluate(
      (el, eventType) =>
        el.dispatchEvent(new Event(eventType, { bubbles: true, cancelable: true, composed: true })),
      type,
    );
  }

  async #act(state, action) {
    const handle = await this.element(state);
    try {
      return await action(handle);
    } finally {
      await handle.dispose();
    }
  }

  click() {
    return this.#act('enabled', (handle) => handle.click());
  }

  hover() {
    return this.#act('visible', (handle) => handle.hover());
  }

  focus() {
    return this.#act('attached', (handle) => handle.focus());
  }

  /** Replaces the field's text as an edit would (input event now, change on blur). */
  fill(value) {
    return this.#act('enabled', (handle) =>
      handle.evaluate((el, text) => {
        el.focus();
        if (typeof el.select === 'function') el.select();
        else document.execCommand('selectAll');
        if (text) document.execCommand('insertText', false, text);
        else document.execCommand('delete');
        if (el.value !== text) {
          el.value = text;
          el.dispatchEvent(new InputEvent('input', { bubbles: true, inputType: 'insertText', data: text }));
        }
      }, String(value)),
    );
  }

  press(key) {
    return this.#act('attached', async (handle) => {
      await handle.focus();
      await this.page.page.keyboard.press(key);
    });
  }

  selectOption(value) {
    return this.#act('enabled', (handle) =>
      handle.evaluate((el, wanted) => {
        const option =
          [...el.options].find((o) => o.value === wanted) ?? [...el.options].find((o) => o.label === wanted);
        if (!option) throw new Error(`no option ${wanted}`);
        el.value = option.value;
        el.dispatchEvent(new Event('input', { bubbles: true }));
        el.dispatchEvent(new Event('change', { bubbles: true }));
        return [option.value];
      }, value),
    );
  }

  async setChecked(checked) {
    await this.#act('enabled', async (handle) => {
      if ((await handle.evaluate((el) => el.checked)) !== checked) await handle.click();
      if ((await handle.evaluate((el) => el.checked)) !== checked)
        throw new Error(`${this} did not become ${checked ? '' : 'un'}checked`);
    });
  }

  check() {
    return this.setChecked(true);
  }

  uncheck() {
    return this.setChecked(false);
  }

  setInputFiles(files) {
    return this.#act('attached', (handle) => handle.uploadFile(...[files].flat()));
  }
}

// ---------------------------------------------------------------------------------------
// Page.

// In the page, before its scripts: Playwright's clock.install() as the tests use it. Time
// runs as usual; fastForward(ms) moves Date, performance.now() and every timer's schedule
// ahead by ms, firing each timer that falls due once (as Playwright's fastForward does).
function installClock() {
  if (window.__testClock) return;
  const realNow = performance.now.bind(performance);
  const RealDate = Date;
  const realSetTimeout = window.setTimeout.bind(window);
  const realClearTimeout = window.clearTimeout.bind(window);
  const realSetInterval = window.setInterval.bind(window);
  const realClearInterval = window.clearInterval.bind(window);
  let offset = 0;
  const now = () => realNow() + offset;
  const timers = new Map(); // id -> {callback, args, delay, due, repeat}
  performance.now = now;
  window.Date = class extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(RealDate.now() + offset);
      else super(...args);
    }
    static now() {
      return RealDate.now() + offset;
    }
  };
  const fire = (id) => {
    const timer = timers.get(id);
    if (!timer) return;
    if (timer.repeat) timer.due = now() + timer.delay;
    else timers.delete(id);
    if (typeof timer.callback === 'function') timer.callback(...timer.args);
  };
  window.setTimeout = (callback, delay = 0, ...args) => {
    const id = realSetTimeout(() => fire(id), delay);
    timers.set(id, {
      callback,
      args,
      delay: Number(delay) || 0,
      due: now() + (Number(delay) || 0),
      repeat: false,
    });
    return id;
  };
  window.setInterval = (callback, delay = 0, ...args) => {
    const id = realSetInterval(() => fire(id), delay);
    timers.set(id, {
      callback,
      args,
      delay: Number(delay) || 0,
      due: now() + (Number(delay) || 0),
      repeat: true,
    });
    return id;
  };
  window.clearTimeout = (id) => {
    timers.delete(id);
    realClearTimeout(id);
  };
  window.clearInterval = (id) => {
    timers.delete(id);
    realClearInterval(id);
  };
  window.__testClock = {
    fastForward(ms) {
      offset += ms;
      const due = [...timers.entries()].filter(([, t]) => t.due <= now()).sort((a, b) => a[1].due - b[1].due);
      for (const [id] of due) fire(id);
    },
  };
}

class FirefoxPage {
  constructor(context, page) {
    this._context = context;
    this.page = page;
    this.routes = [];
    this.keyboard = { press: (key) => page.keyboard.press(key) };
    this.clock = {
      install: () => this._context.addInitScript(installClock),
      fastForward: (ms) => page.evaluate((jump) => window.__testClock.fastForward(jump), ms),
    };
  }

  context() {
    return this._context;
  }

  on(event, handler) {
    if (event === 'console' || event === 'pageerror') {
      this.page.on(event, handler);
    } else if (event === 'worker') {
      // Firefox reports a worker's console messages and uncaught errors as the page's own
      // (WebDriver BiDi log entries), so the page's handlers already see them: the worker
      // object handed out takes listeners without wiring them a second time.
      this.page.on('workercreated', (worker) => handler({ url: () => worker.url(), on: () => {} }));
    } else {
      throw new Error(`page.on('${event}') is not implemented for Firefox`);
    }
  }

  async goto(url) {
    return this.page.goto(url, { waitUntil: 'load' });
  }

  async reload() {
    return this.page.reload({ waitUntil: 'load' });
  }

  locator(selector) {
    return new Locator(this, [parseSelector(selector)]);
  }

  async waitForSelector(selector, { state = 'visible', timeout = DEFAULT_TIMEOUT_MS } = {}) {
    await this.locator(selector).waitFor({ state, timeout });
  }

  async waitForFunction(fn, arg, { timeout = DEFAULT_TIMEOUT_MS } = {}) {
    const handle = await this.page.waitForFunction(fn, { timeout, polling: POLL_MS }, arg);
    await handle.dispose();
  }

  evaluate(fn, arg) {
    return this.page.evaluate(fn, arg);
  }

  workers() {
    return this.page.workers();
  }

  screenshot(options) {
    return this.page.screenshot(options);
  }

  // Element shortcuts, as Playwright's page.* forms of the locator actions.
  click(selector) {
    return this.locator(selector).click();
  }
  hover(selector) {
    return this.locator(selector).hover();
  }
  focus(selector) {
    return this.locator(selector).focus();
  }
  fill(selector, value) {
    return this.locator(selector).fill(value);
  }
  press(selector, key) {
    return this.locator(selector).press(key);
  }
  selectOption(selector, value) {
    return this.locator(selector).selectOption(value);
  }
  check(selector) {
    return this.locator(selector).check();
  }
  uncheck(selector) {
    return this.locator(selector).uncheck();
  }
  setInputFiles(selector, files) {
    return this.locator(selector).setInputFiles(files);
  }
  getAttribute(selector, name) {
    return this.locator(selector).getAttribute(name);
  }
  inputValue(selector) {
    return this.locator(selector).inputValue();
  }

  /**
   * page.route(urlPredicate, handler) with route.fetch() (the real response, fetched from
   * Node) and route.fulfill({response, body}); other requests continue untouched.
   */
  async route(predicate, handler) {
    if (typeof predicate !== 'function')
      throw new Error('page.route: only URL predicates are implemented for Firefox');
    this.routes.push({ predicate, handler });
    if (this.routes.length > 1) return;
    await this.page.setRequestInterception(true);
    this.page.on('request', (request) => {
      this.#onRequest(request).catch((error) => {
        console.error(`route for ${request.url()} failed: ${error.stack}`);
        request.abort().catch(() => {});
      });
    });
  }

  async #onRequest(request) {
    const url = new URL(request.url());
    const route = this.routes.find((r) => r.predicate(url));
    if (!route) return request.continue();
    await route.handler({
      request: () => request,
      continue: () => request.continue(),
      fetch: async () => {
        const response = await fetch(request.url(), { method: request.method() });
        const body = Buffer.from(await response.arrayBuffer());
        const headers = Object.fromEntries(
          [...response.headers].filter(
            ([name]) =>
              !/^(content-length|content-encoding|transfer-encoding|connection|keep-alive)$/i.test(name),
          ),
        );
        return {
          status: () => response.status,
          headers: () => headers,
          body: async () => body,
          text: async () => body.toString('utf8'),
          raw: { status: response.status, headers, body },
        };
      },
      fulfill: ({ response, status, headers, body, contentType } = {}) =>
        request.respond({
          status: status ?? response?.raw.status ?? 200,
          headers: headers ?? response?.raw.headers ?? {},
          contentType,
          body: body ?? response?.raw.body ?? '',
        }),
    });
  }
}
