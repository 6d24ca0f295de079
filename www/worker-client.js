// Promise-based client for worker.js: request(type, fields, onEvent) posts
// {type, id, ...fields} and resolves with the final reply carrying the same id, or rejects
// with its error. Events the worker posts before that reply (progress, tokens) go to onEvent.

/** An error reply from the worker, keeping the engine's name and kind. */
export class EngineError extends Error {
  constructor({ name, kind, message }) {
    super(message);
    this.name = name || 'Error';
    this.kind = kind || 'internal';
  }
}

export class EngineClient {
  constructor(workerUrl) {
    this.worker = new Worker(workerUrl, { type: 'module' });
    this.pending = new Map();
    this.nextId = 1;
    this.worker.addEventListener('message', (event) => this.settle(event.data));
    // A worker script that fails to load or throws at top level answers nothing:
    // fail every pending request instead of leaving them hanging.
    this.worker.addEventListener('error', (event) => {
      event.preventDefault();
      this.failAll({ name: 'WorkerError', kind: 'worker_failed', message: event.message || 'the engine worker failed to start' });
    });
    this.worker.addEventListener('messageerror', () => {
      this.failAll({ name: 'WorkerError', kind: 'bad_reply', message: 'a reply from the engine worker could not be decoded' });
    });
  }

  request(type, fields = {}, onEvent = null) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onEvent });
      this.worker.postMessage({ ...fields, type, id });
    });
  }

  settle(reply) {
    const waiter = this.pending.get(reply?.id);
    if (!waiter) return;
    if (reply.event) {
      try {
        waiter.onEvent?.(reply);
      } catch (error) {
        console.error(error); // A rendering bug must not lose the final reply.
      }
      return;
    }
    this.pending.delete(reply.id);
    if (reply.type === 'error') waiter.reject(new EngineError(reply.error ?? {}));
    else waiter.resolve(reply);
  }

  failAll(errorInfo) {
    for (const waiter of this.pending.values()) waiter.reject(new EngineError(errorInfo));
    this.pending.clear();
  }
}
