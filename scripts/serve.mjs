#!/usr/bin/env node
// Zero-dependency static server for the Inferno page.
//
//   node scripts/serve.mjs [--port 8080] [--root www] [--no-isolation] [--no-ranges]
//                          [--drop-once PATH@BYTE] [--stall-once PATH@BYTE]
//
// Binds 127.0.0.1 only and answers only requests whose Host is a loopback name (a page on
// another site whose name was rebound to 127.0.0.1 gets 421). Sends the cross-origin
// isolation headers (COOP/COEP/CORP) on every response so the page can use
// SharedArrayBuffer and wasm threads (--no-isolation leaves them out, to try the
// single-threaded fallback), answers HTTP Range requests (model files are hundreds of MB
// and are streamed, never read whole), and refuses paths that escape the root, symlinks
// included (their real path must lie under the root or a directory given in `allow`).
// A file is sent with exactly the length announced, even if it changes meanwhile.
//
// For testing downloads that must survive: --no-ranges answers every request with the whole
// file (200, no Accept-Ranges); --drop-once cuts the connection of the first Range response
// that would send byte BYTE of PATH (with its query, if any), right before it; --stall-once
// sends up to there and then nothing more, holding the connection open (as a network that
// hangs).

import { createServer } from 'node:http';
import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const HOST = '127.0.0.1';
const DEFAULT_PORT = 8080;
const DEFAULT_ROOT = fileURLToPath(new URL('../www/', import.meta.url));

const MIME_TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/plain; charset=utf-8',
  '.wasm': 'application/wasm',
  '.gguf': 'application/octet-stream',
  '.bin': 'application/octet-stream',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
};

const ISOLATION_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
};
const BASE_HEADERS = {
  'Cache-Control': 'no-cache',
  'X-Content-Type-Options': 'nosniff',
};

/** The headers of every response: with the isolation headers unless the server was started
 *  without them (to test how the page copes without SharedArrayBuffer). */
function headersFor(req) {
  return req.isolation === false ? BASE_HEADERS : { ...ISOLATION_HEADERS, ...BASE_HEADERS };
}

export function mimeTypeFor(filePath) {
  return MIME_TYPES[path.extname(filePath).toLowerCase()] ?? 'application/octet-stream';
}

/**
 * Parses a Range header against a file size.
 * Returns null when the header is absent, malformed or multi-range (the whole file is
 * then served with 200, as RFC 9110 allows), 'unsatisfiable' for a well-formed range
 * that lies outside the file, or {start, end} with an inclusive end.
 */
export function parseRange(header, size) {
  if (!header) return null;
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match) return null;
  const [, first, last] = match;
  if (first === '' && last === '') return null;
  if (first === '') {
    // Suffix range: the last n bytes.
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  if (last !== '' && Number(last) < start) return null;
  if (start >= size) return 'unsatisfiable';
  return { start, end };
}

/** Maps a URL path to a file under root, or null when it would escape the root. */
function resolveUnderRoot(root, urlPath) {
  let decoded;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return null;
  }
  if (decoded.includes('\0') || decoded.includes('\\')) return null;
  if (decoded.split('/').includes('..')) return null;
  const resolved = path.resolve(root, '.' + path.posix.normalize('/' + decoded));
  if (resolved !== root && !resolved.startsWith(root + path.sep)) return null;
  return resolved;
}

function sendText(res, status, text, extraHeaders = {}) {
  const body = Buffer.from(text + '\n', 'utf8');
  res.writeHead(status, {
    ...headersFor(res.req),
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': body.length,
    ...extraHeaders,
  });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

/** Whether `filePath`'s real path (symlinks followed) lies in one of `places` (real paths). */
async function insideAllowed(filePath, places) {
  let real;
  try {
    real = await realpath(filePath);
  } catch {
    return true; // Missing: answered with 404 by findFile.
  }
  return places.some((place) => real === place || real.startsWith(place + path.sep));
}

/** Loopback Host names, with or without a port: the only ones this server answers. */
export function isLoopbackHost(host) {
  if (typeof host !== 'string') return false;
  const match = /^(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?$/i.exec(host);
  return match !== null;
}

async function findFile(filePath) {
  try {
    const stats = await stat(filePath);
    if (stats.isDirectory()) return { isDirectory: true };
    if (stats.isFile()) return { stats };
  } catch {
    // Missing or unreadable: reported as 404 below.
  }
  return null;
}

/** Sends bytes start..=end of the file: exactly Content-Length bytes, even if the file grows
 *  meanwhile; if it shrinks, the connection is cut so the client sees a short body. */
/** Sends bytes `start..=end` of the file; a `fault` ({kind: 'drop' | 'stall', at}) sends
 *  only those before byte `at`, then cuts the connection or leaves it hanging. */
function streamFile(res, filePath, status, headers, { start, end }, fault = null) {
  res.writeHead(status, headers);
  if (res.req.method === 'HEAD' || end < start) {
    res.end();
    return;
  }
  const last = fault ? fault.at - 1 : end;
  const stream = createReadStream(filePath, { start, end: last });
  let sent = 0;
  stream.on('data', (chunk) => {
    sent += chunk.length;
  });
  stream.on('error', () => res.destroy());
  stream.on('end', () => {
    if (fault?.kind === 'stall') return; // Nothing more, until the client gives up.
    if (sent !== end - start + 1) res.destroy();
  });
  res.on('close', () => stream.destroy());
  stream.pipe(res, { end: !fault });
}

/** The fault a Range response of bytes `start..=end` of `target` (path and query) meets, once
 *  per target and kind: the first response that would send the byte a fault names. */
function takeFault(faults, target, start, end) {
  for (const kind of ['drop', 'stall']) {
    const at = faults[kind]?.get(target);
    if (at !== undefined && start < at && at <= end) {
      faults[kind].delete(target);
      return { kind, at };
    }
  }
  return null;
}

async function handleRequest(root, places, req, res) {
  if (!isLoopbackHost(req.headers.host)) {
    sendText(res, 421, 'This server answers only to localhost, 127.0.0.1 or [::1]');
    return;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    sendText(res, 405, 'Method not allowed', { Allow: 'GET, HEAD' });
    return;
  }
  let url;
  try {
    url = new URL(req.url, 'http://localhost');
  } catch {
    sendText(res, 400, 'Bad request target');
    return;
  }
  let filePath = resolveUnderRoot(root, url.pathname);
  if (filePath === null || !(await insideAllowed(filePath, places))) {
    sendText(res, 403, 'Forbidden');
    return;
  }
  let found = await findFile(filePath);
  if (found?.isDirectory) {
    // Relative URLs in index.html only resolve correctly under a trailing slash. One leading
    // slash only: "//evil.com/" would send the browser to another site.
    if (!url.pathname.endsWith('/')) {
      const location = '/' + url.pathname.replace(/^\/+/, '') + '/' + url.search;
      res.writeHead(301, { ...headersFor(req), Location: location, 'Content-Length': 0 });
      res.end();
      return;
    }
    filePath = path.join(filePath, 'index.html');
    if (!(await insideAllowed(filePath, places))) {
      sendText(res, 403, 'Forbidden');
      return;
    }
    found = await findFile(filePath);
  }
  if (!found?.stats) {
    sendText(res, 404, 'Not found');
    return;
  }

  const size = found.stats.size;
  const etag = `W/"${size.toString(16)}-${Math.floor(found.stats.mtimeMs).toString(16)}"`;
  const headers = {
    ...headersFor(req),
    'Content-Type': mimeTypeFor(filePath),
    ...(req.faults.noRanges ? {} : { 'Accept-Ranges': 'bytes' }),
    'Last-Modified': found.stats.mtime.toUTCString(),
    ETag: etag,
  };
  if (req.headers['if-none-match'] === etag && !req.headers.range) {
    res.writeHead(304, headers);
    res.end();
    return;
  }

  const range = req.faults.noRanges ? null : parseRange(req.headers.range, size);
  if (range === 'unsatisfiable') {
    sendText(res, 416, 'Range not satisfiable', { 'Content-Range': `bytes */${size}` });
    return;
  }
  const fault = range ? takeFault(req.faults, url.pathname + url.search, range.start, range.end) : null;
  if (range) {
    headers['Content-Range'] = `bytes ${range.start}-${range.end}/${size}`;
    headers['Content-Length'] = range.end - range.start + 1;
    streamFile(res, filePath, 206, headers, range, fault);
  } else {
    headers['Content-Length'] = size;
    streamFile(res, filePath, 200, headers, { start: 0, end: size - 1 });
  }
}

/**
 * Starts the server. Resolves to {server, port, url, close} once listening; port 0 picks
 * a free port (the actual one is in the result). `allow` lists directories outside the root
 * that symlinks under it may point into (the benchmark links models that way). For tests of
 * downloads: `ranges: false`, and `dropOnce` / `stallOnce` ({'/url/path': byte}: see the
 * top of this file).
 */
export async function startServer({
  root = DEFAULT_ROOT,
  port = DEFAULT_PORT,
  host = HOST,
  isolation = true,
  allow = [],
  ranges = true,
  dropOnce = {},
  stallOnce = {},
} = {}) {
  const faults = {
    noRanges: !ranges,
    drop: new Map(Object.entries(dropOnce)),
    stall: new Map(Object.entries(stallOnce)),
  };
  const absoluteRoot = path.resolve(root);
  const places = await Promise.all([absoluteRoot, ...allow].map((dir) => realpath(path.resolve(dir))));
  const server = createServer((req, res) => {
    req.isolation = isolation;
    req.faults = faults;
    handleRequest(absoluteRoot, places, req, res).catch((error) => {
      if (!res.headersSent) sendText(res, 500, 'Internal server error');
      else res.destroy();
      console.error(error);
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const actualPort = server.address().port;
      resolve({
        server,
        port: actualPort,
        root: absoluteRoot,
        url: `http://${host}:${actualPort}/`,
        close: () =>
          new Promise((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

function parseArgs(argv) {
  const options = { port: DEFAULT_PORT, root: DEFAULT_ROOT };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inlineValue] = argv[i].split(/=(.*)/s, 2);
    const value = () => inlineValue ?? argv[++i];
    if (flag === '--port' || flag === '-p') options.port = Number(value());
    else if (flag === '--root' || flag === '-r') options.root = path.resolve(value());
    else if (flag === '--no-isolation') options.isolation = false;
    else if (flag === '--no-ranges') options.ranges = false;
    else if (flag === '--drop-once' || flag === '--stall-once') {
      const [where, at] = value().split('@');
      const key = flag === '--drop-once' ? 'dropOnce' : 'stallOnce';
      options[key] = { ...options[key], [where]: Number(at) };
    } else if (flag === '--help' || flag === '-h') options.help = true;
    else throw new Error(`unknown argument: ${argv[i]}`);
  }
  if (!Number.isInteger(options.port) || options.port < 0 || options.port > 65535) {
    throw new Error('--port must be an integer between 0 and 65535');
  }
  return options;
}

async function main() {
  let options;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (error) {
    console.error(`serve.mjs: ${error.message}`);
    process.exit(2);
  }
  if (options.help) {
    console.log(
      'usage: node scripts/serve.mjs [--port 8080] [--root www] [--no-isolation] [--no-ranges] ' +
        '[--drop-once PATH@BYTE] [--stall-once PATH@BYTE]',
    );
    return;
  }
  const { url } = await startServer(options);
  console.log(`Serving Inferno at ${url}`);
}

const invokedDirectly =
  process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href;
if (invokedDirectly) {
  main().catch((error) => {
    console.error(`serve.mjs: ${error.message}`);
    process.exit(1);
  });
}
