// Service worker: keeps the app shell (HTML, JS, CSS, wasm) so the page opens with the
// network off after one visit. Network first, so a rebuilt engine or page shows up at once
// when the server is reachable; the cache answers only when it is not. Model files are
// never cached here: they are hundreds of MB (the browser keeps them in OPFS on request).

const CACHE = 'inferno-shell-v2';
const SHELL = [
  './',
  './index.html',
  './style.css',
  './app.js',
  './chat.js',
  './visualizer.js',
  './storage.js',
  './dom.js',
  './format.js',
  './inspector.js',
  './metadata-table.js',
  './tensor-table.js',
  './worker-client.js',
  './worker.js',
  './engine-loader.js',
];
// The four wasm builds (pkg, pkg-relaxed, pkg-threads, pkg-relaxed-threads), listed by
// build.sh: the page picks one at run time, and the first visit's worker is not yet under
// this service worker's control, so all of them are kept up front (about 8 MB).
const BUILDS = './builds.json';

self.addEventListener('install', (event) => {
  event.waitUntil(
    (async () => {
      const cache = await caches.open(CACHE);
      const builds = await (await fetch(BUILDS, { cache: 'no-cache' })).json();
      await cache.addAll([...SHELL, BUILDS, ...builds]);
      await self.skipWaiting();
    })(),
  );
});

self.addEventListener('activate', (event) => {
  event.waitUntil(
    (async () => {
      for (const name of await caches.keys()) if (name !== CACHE) await caches.delete(name);
      await self.clients.claim();
    })(),
  );
});

function isShell(url) {
  return url.origin === self.location.origin && !url.pathname.endsWith('.gguf') && !url.pathname.includes('/models/');
}

/** "Is there a demo model?" asked with the server gone: no, quietly (not a network error). */
async function probeOffline(request) {
  try {
    return await fetch(request);
  } catch {
    return new Response(null, { status: 204, statusText: 'No Content (offline)' });
  }
}

self.addEventListener('fetch', (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (request.method === 'HEAD' && url.origin === self.location.origin) {
    event.respondWith(probeOffline(request));
    return;
  }
  if (request.method !== 'GET' || !isShell(url) || request.headers.has('Range')) return;
  event.respondWith(
    (async () => {
      try {
        const response = await fetch(request);
        if (response.ok && response.type === 'basic') {
          const copy = response.clone();
          caches.open(CACHE).then((cache) => cache.put(request, copy)).catch(() => {});
        }
        return response;
      } catch (error) {
        // The worker is loaded as worker.js?instance=N after a crash: same file.
        const cached = await caches.match(request, { ignoreSearch: true });
        if (cached) return cached;
        throw error;
      }
    })(),
  );
});
