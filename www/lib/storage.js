// @ts-check
// What the page keeps between visits: model files in the Origin Private File System (so a
// model reopens without being dropped again, and is read from disk in chunks, never held
// twice in memory), each model's vision projector beside it (a directory of their own, under
// the model's name), the conversation and settings in localStorage, and the conversation's
// pictures in IndexedDB (Blobs, which localStorage cannot hold).

const MODELS_DIR = 'models';
const PROJECTORS_DIR = 'projectors';
const CHAT_KEY = 'inferno.chat.v1';
const PICTURES_DB = 'inferno-pictures';

export function opfsAvailable() {
  return typeof navigator.storage?.getDirectory === 'function';
}

async function modelsDir(name = MODELS_DIR) {
  const root = await navigator.storage.getDirectory();
  return root.getDirectoryHandle(name, { create: true });
}

/** OPFS names are the file's own name, minus anything a directory entry cannot hold. */
function storedName(name) {
  const safe = String(name)
    .replace(/[\\/:*?"<>|\u0000-\u001f]/g, '_')
    .slice(0, 200);
  return safe && safe !== '.' && safe !== '..' ? safe : 'model.gguf';
}

/** Copies in progress are written under this prefix and renamed when complete. */
const PARTIAL_PREFIX = '.partial-';

/** [{name, size, modified, projector}] of the models kept in this browser, newest first;
 *  `projector` is the size of the vision projector kept beside one, else null. */
export async function listStoredModels() {
  if (!opfsAvailable()) return [];
  const dir = await modelsDir();
  await removeUnfinishedCopies(dir);
  const projectors = await modelsDir(PROJECTORS_DIR);
  await removeUnfinishedCopies(projectors);
  const models = [];
  for await (const [name, handle] of dir.entries()) {
    if (handle.kind !== 'file' || name.startsWith(PARTIAL_PREFIX)) continue;
    const file = await /** @type {FileSystemFileHandle} */ (handle).getFile();
    const projector = await projectors
      .getFileHandle(name)
      .then((beside) => beside.getFile())
      .then((beside) => beside.size)
      .catch(() => null);
    models.push({ name, size: file.size, modified: file.lastModified, projector });
  }
  return models.sort((a, b) => b.modified - a.modified);
}

/** The stored file itself: a disk-backed File the worker reads slice by slice. */
export async function openStoredModel(name) {
  const dir = await modelsDir();
  const handle = await dir.getFileHandle(storedName(name));
  return handle.getFile();
}

/** The vision projector kept beside model `name` (a disk-backed File), or null. */
export async function openStoredProjector(name) {
  const dir = await modelsDir(PROJECTORS_DIR);
  return dir
    .getFileHandle(storedName(name))
    .then((handle) => handle.getFile())
    .catch(() => null);
}

/** Keeps a vision projector beside model `name` (as storeModel copies, streaming).
 *  @param {string} name @param {Blob | string | URL} source
 *  @param {(bytes: number, total: number | null) => void} [onProgress] */
export function storeProjector(name, source, onProgress) {
  return storeFile(PROJECTORS_DIR, name, source, onProgress);
}

/**
 * Copies a model into OPFS from a File/Blob or a URL, streaming (never a whole copy in
 * memory). The copy is written under a temporary name and takes the model's name only when
 * complete, so a copy that fails halfway leaves any model already stored under that name as
 * it was (the half-written file is removed).
 * @param {string} name
 * @param {Blob | string | URL} source
 * @param {(bytes: number, total: number | null) => void} [onProgress]
 */
export function storeModel(name, source, onProgress) {
  return storeFile(MODELS_DIR, name, source, onProgress);
}

/** storeModel's copy into the OPFS directory `dirName`.
 *  @param {string} dirName @param {string} name @param {Blob | string | URL} source
 *  @param {(bytes: number, total: number | null) => void} [onProgress] */
async function storeFile(dirName, name, source, onProgress = () => {}) {
  if (!opfsAvailable()) throw new Error('this browser has no Origin Private File System');
  const dir = await modelsDir(dirName);
  const fileName = storedName(name);
  let stream;
  let total;
  if (source instanceof Blob) {
    stream = source.stream();
    total = source.size;
  } else {
    const response = await fetch(source);
    if (!response.ok) throw new Error(`${source} answered ${response.status}`);
    stream = response.body;
    total = Number(response.headers.get('Content-Length')) || null;
  }
  const estimate = await navigator.storage.estimate?.();
  if (total && estimate && estimate.quota - estimate.usage < total) {
    const free = ((estimate.quota - estimate.usage) / 1e6).toFixed(0);
    throw new Error(`not enough browser storage: ${(total / 1e6).toFixed(0)} MB needed, ${free} MB free`);
  }
  const partialName = `${PARTIAL_PREFIX}${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
  const partial = await dir.getFileHandle(partialName, { create: true });
  let written = 0;
  const counter = new TransformStream({
    transform(chunk, controller) {
      written += chunk.byteLength;
      onProgress(written, total);
      controller.enqueue(chunk);
    },
  });
  try {
    await stream.pipeThrough(counter).pipeTo(await partial.createWritable());
    if (total && written !== total) throw new Error(`the copy stopped at ${written} of ${total} bytes`);
    await dir.removeEntry(fileName).catch(() => {}); // the older copy, if any: replaced now
    if (typeof partial.move === 'function') {
      await partial.move(fileName);
    } else {
      // No rename in this browser: copy the finished file under its name (disk to disk).
      const target = await dir.getFileHandle(fileName, { create: true });
      await (await partial.getFile()).stream().pipeTo(await target.createWritable());
      await dir.removeEntry(partialName);
    }
  } catch (error) {
    await dir.removeEntry(partialName).catch(() => {});
    throw error;
  }
  return { name: fileName, size: written };
}

/** Removes copies that a tab closed while storing left unfinished: those started a day ago or
 *  more (a younger one may still be running in another tab). Called with the model list. */
async function removeUnfinishedCopies(dir) {
  const dayAgo = Date.now() - 24 * 3600 * 1000;
  const stale = [];
  for await (const [name] of dir.entries()) {
    if (!name.startsWith(PARTIAL_PREFIX)) continue;
    const started = parseInt(name.slice(PARTIAL_PREFIX.length).split('-')[0], 36);
    if (!(started > dayAgo)) stale.push(name);
  }
  await Promise.all(stale.map((name) => dir.removeEntry(name).catch(() => {})));
}

/** Deletes a kept model, and the projector kept beside it. */
export async function deleteStoredModel(name) {
  const dir = await modelsDir();
  await dir.removeEntry(storedName(name));
  const projectors = await modelsDir(PROJECTORS_DIR);
  await projectors.removeEntry(storedName(name)).catch(() => {});
}

export async function isStored(name, size) {
  if (!opfsAvailable()) return false;
  try {
    const file = await openStoredModel(name);
    return file.size === size;
  } catch {
    return false;
  }
}

export async function storageEstimate() {
  return (await navigator.storage?.estimate?.()) ?? null;
}

/** The saved conversation, settings and last model, or null. Bad JSON counts as none. */
export function loadChatState() {
  try {
    const saved = JSON.parse(localStorage.getItem(CHAT_KEY) ?? 'null');
    return saved && typeof saved === 'object' && Array.isArray(saved.messages) ? saved : null;
  } catch {
    return null;
  }
}

export function saveChatState(state) {
  try {
    localStorage.setItem(CHAT_KEY, JSON.stringify(state));
    return true;
  } catch {
    return false; // Quota exceeded or storage disabled: the chat still works, unsaved.
  }
}

// --- the conversation's pictures (IndexedDB) ---------------------------------------------------

/** @returns {Promise<IDBDatabase | null>} null where IndexedDB is unavailable (private modes). */
function picturesDb() {
  return new Promise((resolve) => {
    try {
      const request = indexedDB.open(PICTURES_DB, 1);
      request.onupgradeneeded = () => request.result.createObjectStore('pictures');
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => resolve(null);
    } catch {
      resolve(null);
    }
  });
}

/** Runs one request against the pictures store; its result, or null where it failed.
 *  @template T @param {'readonly' | 'readwrite'} mode
 *  @param {(store: IDBObjectStore) => IDBRequest<T>} make @returns {Promise<T | null>} */
async function withPictures(mode, make) {
  const db = await picturesDb();
  if (!db) return null;
  return new Promise((resolve) => {
    const transaction = db.transaction('pictures', mode);
    const request = make(transaction.objectStore('pictures'));
    transaction.oncomplete = () => {
      db.close();
      resolve(request.result ?? null);
    };
    transaction.onerror = transaction.onabort = () => {
      db.close();
      resolve(null);
    };
  });
}

/** Keeps a picture of the conversation under `id`; false where it could not (no IndexedDB,
 *  quota), and the chat goes on with the picture unsaved.
 *  @param {string} id @param {Blob} blob */
export async function keepPicture(id, blob) {
  return (await withPictures('readwrite', (store) => store.put(blob, id))) !== null;
}

/** A kept picture, or null. @param {string} id @returns {Promise<Blob | null>} */
export async function storedPicture(id) {
  const blob = await withPictures('readonly', (store) => store.get(id));
  return blob instanceof Blob ? blob : null;
}

/** Deletes every kept picture but those of `ids` (the pictures of the saved conversation).
 *  @param {string[]} ids */
export async function forgetPicturesExcept(ids) {
  const keep = new Set(ids);
  const all = await withPictures('readonly', (store) => store.getAllKeys());
  const stale = (all ?? []).map(String).filter((id) => !keep.has(id));
  for (const id of stale) await withPictures('readwrite', (store) => store.delete(id));
}
