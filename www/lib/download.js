// @ts-check
// Downloads that survive: a model URL fetched in a few parallel HTTP Range requests, written
// into the Origin Private File System as the bytes arrive, with the progress of each range
// saved beside it. A dropped connection resumes its range where it stopped; a reload (or a
// cancelled load) that asks for the same URL again continues from what is on disk, as long
// as the server still sends the same file (its ETag or Last-Modified). The engine worker
// then reads the finished file from disk into the loader, and removes it.
//
// Runs in the engine worker (it needs synchronous OPFS access handles, which only workers
// have). Where it cannot run (no OPFS, a server without Range requests, another tab writing
// the same download, too little storage) the caller streams the URL once, as before.

/** Files at least this large download resumably unless the load says otherwise; a smaller
 *  one costs little to fetch again. */
export const RESUMABLE_MIN_BYTES = 256 * 1024 * 1024;

/** A range is at least this large; a file gets up to MAX_PARTS of them. */
const MIN_PART_BYTES = 16 * 1024 * 1024;
const MAX_PARTS = 4;
/** Attempts of a range in a row that bring no new byte before the download fails. */
const MAX_RETRIES = 5;
/** How often the ranges' progress is flushed to disk and saved. */
const SAVE_INTERVAL_MS = 1000;
/** Unfinished downloads older than this are removed when another one starts. */
const STALE_MS = 7 * 24 * 3600 * 1000;
const DIRECTORY = 'downloads';

/** An answer the download cannot use (as the worker's WorkerError: a name and a kind). */
class DownloadError extends Error {
  constructor(name, kind, message) {
    super(message);
    this.name = name;
    this.kind = kind;
  }
}

/** Whether this worker can write OPFS files synchronously (Chromium, Firefox, Safari). */
export function resumableAvailable() {
  return (
    typeof navigator.storage?.getDirectory === 'function' &&
    typeof self.FileSystemFileHandle?.prototype?.createSyncAccessHandle === 'function'
  );
}

/**
 * What a server says of `url` to a one-byte Range request: `{size, validator}` where it
 * answers 206 with the whole size, else null (no Range support: stream it instead).
 */
export async function probeRanges(url) {
  let response;
  try {
    response = await fetch(url, { headers: { Range: 'bytes=0-0' } });
  } catch {
    return null;
  }
  response.body?.cancel().catch(() => {});
  const total = /^bytes\s+0-0\/(\d+)\s*$/i.exec(response.headers.get('Content-Range') ?? '')?.[1];
  const size = Number(total);
  if (response.status !== 206 || !Number.isSafeInteger(size) || size <= 0) return null;
  return { size, validator: validatorOf(response) };
}

/** The server's name for this version of the file: its strong or weak ETag, else its date. */
export function validatorOf(response) {
  return response.headers.get('ETag') ?? response.headers.get('Last-Modified') ?? null;
}

/**
 * Downloads `url` (`size` bytes, `validator` from probeRanges) into OPFS, resuming what an
 * earlier download of it left. `report(bytes, resumedFrom)` hears of progress;
 * `cancelled()` is asked between chunks (a cancelled download keeps its bytes for next time).
 * Resolves to `{file, remove, resumedFrom, retries, parts}`: the finished file (disk-backed),
 * and a function that deletes it; `{cancelled: true}` when cancelled; null where it cannot
 * start (the caller streams).
 */
export async function download(url, { size, validator }, { report, cancelled }) {
  let directory, key;
  try {
    directory = await (
      await navigator.storage.getDirectory()
    ).getDirectoryHandle(DIRECTORY, { create: true });
    await removeStale(directory);
    key = await keyOf(url);
  } catch {
    return null;
  }
  const saved = await readState(directory, key);
  const fresh = !(saved && saved.url === url && saved.size === size && saved.validator === validator);
  if (fresh) {
    const estimate = await navigator.storage.estimate?.().catch(() => null);
    if (estimate && estimate.quota - estimate.usage < size) return null;
  }
  const handle = await openExclusive(directory, `${key}.part`);
  if (!handle) return null; // Another tab is writing this download, or the browser refuses.
  const state = fresh ? newState(url, size, validator) : saved;
  const resumedFrom = doneBytes(state);
  // Saves run one after another (a failed one does not stop the next): what the state claims
  // is flushed to disk before it says so.
  let saving = Promise.resolve();
  const save = () => {
    saving = saving
      .catch(() => {})
      .then(async () => {
        handle.flush();
        state.updated = Date.now();
        await writeState(directory, key, state);
      });
    return saving;
  };
  let retries = 0;
  let lastSave = performance.now();
  const progress = () => report(doneBytes(state), resumedFrom);
  // Once one range fails for good, the others stop too (the handle is about to close).
  let failed = false;
  const halted = () => failed || cancelled();
  try {
    if (fresh) {
      handle.truncate(size);
      await save();
    }
    progress();
    await Promise.all(
      state.parts.map(async (part) => {
        let failures = 0;
        while (part.done < part.end - part.start) {
          if (halted()) return;
          const before = part.done;
          try {
            await fetchPart(url, state, part, handle, halted, async () => {
              progress();
              if (performance.now() - lastSave >= SAVE_INTERVAL_MS) {
                lastSave = performance.now();
                await save();
              }
            });
          } catch (error) {
            if (halted()) return;
            if (error instanceof DownloadError) {
              failed = true;
              throw error;
            }
            // A dropped connection: try again from the range's last byte written.
            failures = part.done > before ? 1 : failures + 1;
            retries += 1;
            if (failures > MAX_RETRIES) {
              failed = true;
              throw new DownloadError(
                'NetworkError',
                'fetch_failed',
                `${url}: the download broke off ${failures} times in a row at byte ${part.start + part.done} ` +
                  `(${error.message ?? error}); load it again to continue from there`,
              );
            }
            await sleep(200 * 2 ** (failures - 1));
          }
        }
        await save(); // A finished range is on record even if another one never finishes.
      }),
    );
    await save();
  } catch (error) {
    await save().catch(() => {});
    throw error;
  } finally {
    handle.close();
  }
  if (cancelled()) return { cancelled: true };
  const fileHandle = await directory.getFileHandle(`${key}.part`);
  return {
    file: await fileHandle.getFile(),
    resumedFrom,
    retries,
    parts: state.parts.length,
    remove: async () => {
      await directory.removeEntry(`${key}.part`).catch(() => {});
      await directory.removeEntry(`${key}.json`).catch(() => {});
    },
  };
}

/** Fetches the rest of one range and writes it at its place; throws on a dropped
 *  connection (the caller retries) and DownloadError on an answer that cannot be used. */
async function fetchPart(url, state, part, handle, cancelled, onChunk) {
  const from = part.start + part.done;
  const response = await fetch(url, { headers: { Range: `bytes=${from}-${part.end - 1}` } });
  const range = /^bytes\s+(\d+)-(\d+)\/(\d+)\s*$/i.exec(response.headers.get('Content-Range') ?? '');
  if (response.status !== 206 || !range || Number(range[1]) !== from || Number(range[3]) !== state.size) {
    response.body?.cancel().catch(() => {});
    throw new DownloadError(
      'NetworkError',
      'fetch_failed',
      `${url} answered ${response.status} to a Range request for bytes ${from}-${part.end - 1}, ` +
        'where it answered 206 before',
    );
  }
  if (state.validator !== null && validatorOf(response) !== state.validator) {
    response.body?.cancel().catch(() => {});
    throw new DownloadError(
      'NetworkError',
      'file_changed',
      `${url} changed on the server during the download (ETag or Last-Modified differs); load it again`,
    );
  }
  const reader = response.body.getReader();
  try {
    for (;;) {
      if (cancelled()) return;
      const { done, value } = await reader.read();
      if (done) break;
      const room = part.end - part.start - part.done;
      const chunk = value.length > room ? value.subarray(0, room) : value;
      handle.write(chunk, { at: part.start + part.done });
      part.done += chunk.length;
      await onChunk();
    }
  } finally {
    reader.cancel().catch(() => {});
  }
  if (part.done < part.end - part.start) throw new Error('the connection closed early');
}

/** A synchronous access handle of the file, or null. A worker of a page just reloaded may
 *  hold it for a moment yet: tried for about two seconds. */
async function openExclusive(directory, name) {
  for (let attempt = 0; attempt < 8; attempt++) {
    try {
      const fileHandle = await directory.getFileHandle(name, { create: true });
      return await fileHandle.createSyncAccessHandle();
    } catch (error) {
      if (error?.name !== 'NoModificationAllowedError') return null;
      await sleep(250);
    }
  }
  return null;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function newState(url, size, validator) {
  const count = Math.max(1, Math.min(MAX_PARTS, Math.floor(size / MIN_PART_BYTES)));
  const step = Math.ceil(size / count);
  const parts = [];
  for (let start = 0; start < size; start += step)
    parts.push({ start, end: Math.min(size, start + step), done: 0 });
  return { url, size, validator, parts, updated: Date.now() };
}

function doneBytes(state) {
  return state.parts.reduce((sum, part) => sum + part.done, 0);
}

/** A download's saved state, or null where none (or an unreadable one) is saved. Its ranges
 *  must tile the file, in order, each with whole bytes done within it. */
async function readState(directory, key) {
  try {
    const file = await (await directory.getFileHandle(`${key}.json`)).getFile();
    const state = JSON.parse(await file.text());
    const { parts, size } = state;
    const tiles =
      Number.isSafeInteger(size) &&
      Array.isArray(parts) &&
      parts.length > 0 &&
      parts.every(
        (p, i) =>
          Number.isSafeInteger(p.start) &&
          Number.isSafeInteger(p.end) &&
          Number.isSafeInteger(p.done) &&
          p.start === (i === 0 ? 0 : parts[i - 1].end) &&
          p.start < p.end &&
          p.done >= 0 &&
          p.done <= p.end - p.start,
      ) &&
      parts.at(-1).end === size;
    return tiles ? state : null;
  } catch {
    return null;
  }
}

async function writeState(directory, key, state) {
  const writable = await (await directory.getFileHandle(`${key}.json`, { create: true })).createWritable();
  await writable.write(JSON.stringify(state));
  await writable.close();
}

/** Removes downloads nobody came back for in a week (a younger one may be resumed yet). */
async function removeStale(directory) {
  const old = [];
  for await (const [name, handle] of directory.entries()) {
    if (handle.kind !== 'file' || !name.endsWith('.json')) continue;
    const state = await readState(directory, name.slice(0, -'.json'.length));
    if (!state || !(Date.now() - state.updated < STALE_MS)) old.push(name.slice(0, -'.json'.length));
  }
  for (const key of old) {
    await directory.removeEntry(`${key}.part`).catch(() => {});
    await directory.removeEntry(`${key}.json`).catch(() => {});
  }
}

/** A file name for the URL's download: its SHA-256, in hex. */
async function keyOf(url) {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(url));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}
