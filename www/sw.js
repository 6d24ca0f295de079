// @ts-check
// Service worker: keeps the app shell (HTML, JS, CSS, wasm) so the page opens with the
// network off after one visit. Network first, so a rebuilt engine or page shows up at once
// when the server is reachable; the cache answers only when it is not. Model files are
// never cached here: they are hundreds of MB (the browser keeps them in OPFS on request).
//
// The cache holds one whole build at a time: build.sh writes builds.json with a version (a
// hash of the page and the wasm builds) and the build files; the cache named after that
// version is filled completely (a sentinel entry goes in last) or deleted, and only then are
// older ones dropped. Offline, requests are answered from one complete cache only, so glue
// code and wasm of two different builds never meet. Nothing is cached at run time (a URL
// with a query string is answered by its path's entry).

/** This script's global scope, a service worker's (the type check reads `self` as any worker's). */
const worker = /** @type {ServiceWorkerGlobalScope} */ (/** @type {unknown} */ (self));

const PREFIX = 'inferno-shell-';
const COMPLETE = './__complete__';
// builds.json, written by build.sh, lists the page's files (`shell`: every HTML, JS and CSS
// file but the benchmark pages) and the wasm builds (`files`: the page picks one at run time,
// and the first visit's worker is not yet under this service worker's control, so all of
// them are kept up front).
const BUILDS = './builds.json';

/** Makes the cache of the current build complete (filling it if needed) and drops the others. */
async function refreshShell() {
  const listing = await (await fetch(BUILDS, { cache: 'no-cache' })).json();
  if (
    typeof listing?.version !== 'string' ||
    !Array.isArray(listing.files) ||
    !Array.isArray(listing.shell)
  ) {
    throw new Error('builds.json: no version, shell or files');
  }
  const name = PREFIX + listing.version;
  const cache = await caches.open(name);
  if (!(await cache.match(COMPLETE))) {
    try {
      const urls = [...listing.shell, BUILDS, ...listing.files];
      await cache.addAll(urls.map((url) => new Request(url, { cache: 'reload' })));
      await cache.put(COMPLETE, new Response(listing.version));
    } catch (error) {
      await caches.delete(name);
      throw error;
    }
  }
  for (const other of await caches.keys()) if (other !== name) await caches.delete(other);
}

/** The newest complete cache's answer to `request` (query strings ignored), if any. */
async function matchComplete(request) {
  for (const name of (await caches.keys()).reverse()) {
    if (!name.startsWith(PREFIX)) continue;
    const cache = await caches.open(name);
    if (!(await cache.match(COMPLETE))) continue;
    return cache.match(request, { ignoreSearch: true });
  }
  return undefined;
}

worker.addEventListener('install', (event) => {
  event.waitUntil(refreshShell().then(() => worker.skipWaiting()));
});

// Claiming is not waited for: in headless Firefox 153 claim() sometimes never settles (about
// one first visit in five; the page is claimed, so the likely holdouts are the engine's
// thread-pool workers, blocked in Atomics.wait), and an activation waiting on it never ends:
// every fetch through this worker then hangs ~60 s and fails. The page is claimed either way.
worker.addEventListener('activate', () => {
  worker.clients.claim().catch(() => {});
});

function isShell(url) {
  return (
    url.origin === worker.location.origin &&
    !url.pathname.endsWith('.gguf') &&
    !url.pathname.includes('/models/')
  );
}

/** "Is there a demo model?" asked with the server gone: no, quietly (not a network error). */
async function probeOffline(request) {
  try {
    return await fetch(request);
  } catch {
    return new Response(null, { status: 204, statusText: 'No Content (offline)' });
  }
}

worker.addEventListener('fetch', (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (request.method === 'HEAD' && url.origin === worker.location.origin) {
    event.respondWith(probeOffline(request));
    return;
  }
  if (request.method !== 'GET' || !isShell(url) || request.headers.has('Range')) return;
  // Each visit brings the offline copy up to the build being served (when it can be reached).
  if (request.mode === 'navigate') event.waitUntil(refreshShell().catch(() => {}));
  event.respondWith(
    (async () => {
      try {
        return await fetch(request);
      } catch (error) {
        const cached = await matchComplete(request);
        if (cached) return cached;
        // An answer, not a rejection: Firefox logs a rejected respondWith ("A ServiceWorker
        // intercepted the request and encountered an unexpected error") even when the reader
        // has gone. Once in CI a Firefox page test failed on that note alone, the page working
        // on; which request it was is not known. A reader still waiting sees a failure either
        // way, and this one says why.
        return new Response(
          `${url.pathname}: the server cannot be reached (${error}), and no offline copy holds it`,
          {
            status: 503,
            statusText: 'Service Unavailable (offline)',
            headers: { 'Content-Type': 'text/plain' },
          },
        );
      }
    })(),
  );
});
