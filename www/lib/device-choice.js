// @ts-check
// What `device: 'auto'` measured for a model on this machine, kept in IndexedDB (workers have no
// localStorage), so that the next load of the same file on the same adapter, build and thread
// count skips the probe. Only a cache of a measurement: where storage is refused (a private
// window, a full disk) every load measures again, and nothing fails.

const DATABASE = 'inferno-device-choices';
const STORE = 'choices';

/**
 * A probe's result: each device's milliseconds per decode step and when they were measured.
 * @typedef {{device: 'gpu' | 'cpu', gpuMs: number, cpuMs: number, measuredAt: number}} DeviceChoice
 */

/** @returns {Promise<IDBDatabase | null>} */
function openDatabase() {
  return new Promise((resolve) => {
    let request;
    try {
      if (!self.indexedDB) return resolve(null);
      request = self.indexedDB.open(DATABASE, 1);
    } catch {
      return resolve(null); // Opaque origins and some private modes throw here.
    }
    request.onupgradeneeded = () => request.result.createObjectStore(STORE);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => resolve(null);
    request.onblocked = () => resolve(null);
  });
}

/**
 * Runs `use` on the store in a transaction of `mode`; its request's result, or null.
 * @template T
 * @param {IDBTransactionMode} mode @param {(store: IDBObjectStore) => IDBRequest<T>} use
 * @returns {Promise<T | null>}
 */
async function withStore(mode, use) {
  const database = await openDatabase();
  if (!database) return null;
  try {
    return await new Promise((resolve) => {
      const transaction = database.transaction(STORE, mode);
      const request = use(transaction.objectStore(STORE));
      transaction.oncomplete = () => resolve(request.result ?? null);
      transaction.onerror = () => resolve(null);
      transaction.onabort = () => resolve(null);
    });
  } catch {
    return null;
  } finally {
    database.close();
  }
}

/** @param {unknown} value @returns {value is DeviceChoice} */
function isChoice(value) {
  const choice = /** @type {Partial<DeviceChoice> | null} */ (value);
  return (
    (choice?.device === 'gpu' || choice?.device === 'cpu') &&
    [choice.gpuMs, choice.cpuMs, choice.measuredAt].every((n) => typeof n === 'number' && Number.isFinite(n))
  );
}

/** The choice kept under `key`, or null. @param {string} key @returns {Promise<DeviceChoice | null>} */
export async function recalledChoice(key) {
  const value = await withStore('readonly', (store) => store.get(key));
  return isChoice(value) ? value : null;
}

/** Keeps `choice` under `key` (quietly not, where storage is refused).
 *  @param {string} key @param {DeviceChoice} choice */
export async function rememberChoice(key, choice) {
  await withStore('readwrite', (store) => store.put(choice, key));
}
