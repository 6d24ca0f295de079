// @ts-check
// What the page keeps between visits: model files in the Origin Private File System (so a
// model reopens without being dropped again, and is read from disk in chunks, never held
// twice in memory), and the conversation and settings in localStorage.

const MODELS_DIR = 'models';
const CHAT_KEY = 'inferno.chat.v1';

export function opfsAvailable() {
  return typeof navigator.storage?.getDirectory === 'function';
}

async function modelsDir() {
  const root = await navigator.storage.getDirectory();
  return root.getDirectoryHandle(MODELS_DIR, { create: true });
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

/** [{name, size, modified}] of the models kept in this browser, newest first. */
export async function listStoredModels() {
  if (!opfsAvailable()) return [];
  const dir = await modelsDir();
  await removeUnfinishedCopies(dir);
  const models = [];
  for await (const [name, handle] of dir.entries()) {
    if (handle.kind !== 'file' || name.startsWith(PARTIAL_PREFIX)) continue;
    const file = await /** @type {FileSystemFileHandle} */ (handle).getFile();
    models.push({ name, size: file.size, modified: file.lastModified });
  }
  return models.sort((a, b) => b.modified - a.modified);
}

/** The stored file itself: a disk-backed File the worker reads slice by slice. */
export async function openStoredModel(name) {
  const dir = await modelsDir();
  const handle = await dir.getFileHandle(storedName(name));
  return handle.getFile();
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
export async function storeModel(name, source, onProgress = () => {}) {
  if (!opfsAvailable()) throw new Error('this browser has no Origin Private File System');
  const dir = await modelsDir();
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

export async function deleteStoredModel(name) {
  const dir = await modelsDir();
  await dir.removeEntry(storedName(name));
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
