// @ts-check
// Promise-based client for worker.js: request(type, fields, onEvent) posts
// {type, id, ...fields} and resolves with the final reply carrying the same id, or rejects
// with its error. Events the worker posts before that reply (progress, tokens) go to onEvent.
//
// A stall watchdog runs while requests are pending: after PING_AFTER_MS without a message
// from the worker it pings (a worker waiting on a slow disk or network answers at once; one
// stuck inside a wasm call cannot), and after `stallMs` without any message it ends the
// worker, fails the pending requests with kind "stalled" and starts a new worker. Every wasm
// call the worker makes is short (a prefill part, a decode step, a chunk of a file), so the
// default leaves a wide margin.
//
// A threaded engine whose helper threads do not start within 20 s ends its worker and answers
// `engine_start_timeout`; the client then starts a new worker and sends it the pending
// requests once more.
//
// A worker that has said nothing at all NEVER_STARTED_MS after it was created, pings included,
// is taken for one that never ran its script, replaced, and given the pending requests again,
// up to MAX_START_RETRIES times in a row. (Page tests in headless Firefox 153 once counted 1 to 3
// such workers in 40 starts; most likely they were the frozen helper start below, met by a
// worker's first request: 540 starts of this worker from pages, with no helper, all ran.)
//
// A threaded engine worker says when it calls `new Worker()` for a pool helper and when that
// returned (src/web/pool_helpers.js): in headless Firefox 153 about 1 such call in 100 never
// returns and freezes the worker (docs/repro/firefox-nested-worker). One stuck for SPAWN_STUCK_MS
// is replaced and gets the pending requests again, up to MAX_START_RETRIES times in a row.
//
// A load may be answered `switch_build {memory64}`: the file needs the other memory (64-bit
// for files over 4 GiB). The client then starts a worker of that kind and sends the same load
// again, with any inspection still pending (both depend only on their file), so callers never
// see the switch; other pending requests fail as `cancelled`, as in any restart.

/** Every error the engine and its API report: the engine's name (GgufError, EngineError,
 *  WorkerError...) and a stable machine-readable `kind` (bad_magic, too_large, busy, stalled...). */
export class InfernoError extends Error {
  constructor({ name, kind, message }) {
    super(message);
    this.name = name || 'Error';
    this.kind = kind || 'internal';
  }
}

export const DEFAULT_STALL_MS = 60_000;

/** What a worker's `error` event says: the script and line where it has them (an exception at
 *  the top level), else that `where` or one of its imports could not be loaded (browsers say
 *  nothing more for a module that failed to fetch). */
function workerFailure(event, where) {
  const at = event.filename ? ` (${event.filename}${event.lineno ? `:${event.lineno}` : ''})` : '';
  if (event.message) return `the engine worker failed: ${event.message}${at}`;
  return (
    `the engine worker failed to start: ${where} or a file it imports (engine-loader.js, a ` +
    "pkg*/inferno.js glue file) could not be loaded. The browser's network panel shows which; a " +
    'server that answers missing files with index.html, or a bundler that did not emit them, ' +
    'causes this.'
  );
}
/** Requests that a new worker can answer as well as the old one. */
const RESENT_ON_SWITCH = new Set(['load', 'inspect']);
const PING_AFTER_MS = 5_000;
const NEVER_STARTED_MS = 8_000;
const MAX_START_RETRIES = 2;
const SPAWN_STUCK_MS = 3_000;
const HELPER_SPAWNING = 'inferno_pool_helper_spawning';
const HELPER_SPAWNED = 'inferno_pool_helper_spawned';
const WATCH_EVERY_MS = 1_000;

export class EngineClient {
  /** `createWorker()`: a new engine worker (worker.js); `where`: how an error names it;
   *  `threads`: the count it starts with (null: its default); `relaxed: false` forces the plain
   *  SIMD128 build; `stallMs`: silence after which a busy worker counts as stalled. */
  constructor(
    createWorker,
    { where = 'worker.js', threads = null, relaxed = true, stallMs = DEFAULT_STALL_MS } = {},
  ) {
    this.createWorker = createWorker;
    this.where = where;
    this.relaxed = relaxed;
    this.pending = new Map();
    this.nextId = 1;
    this.memory64 = false; // whether the worker runs the 64-bit-memory build
    this.stallMs = stallMs;
    this.watchdog = null;
    this.start(threads);
  }

  start(threads) {
    this.threads = threads;
    const worker = this.createWorker();
    this.worker = worker;
    this.lastHeard = performance.now();
    this.startedAt = this.lastHeard;
    this.heardSinceStart = false;
    this.spawningSince = null;
    worker.addEventListener('message', (event) => {
      if (worker !== this.worker) return;
      this.lastHeard = performance.now();
      const type = event.data?.type;
      if (type === HELPER_SPAWNING || type === HELPER_SPAWNED) {
        this.spawningSince = type === HELPER_SPAWNING ? this.lastHeard : null;
        if (type === HELPER_SPAWNED) this.spawnRetries = 0;
        return; // Says nothing about a request, nor that the worker is healthy.
      }
      this.heardSinceStart = true;
      this.startRetries = 0;
      this.settle(event.data);
    });
    // A worker script that fails to load or throws at top level answers nothing:
    // fail every pending request instead of leaving them hanging.
    worker.addEventListener('error', (event) => {
      event.preventDefault();
      if (worker !== this.worker) return;
      const message = workerFailure(event, this.where);
      console.error(`Inferno: ${message}`); // Also said where a developer looks first.
      this.failAll({ name: 'WorkerError', kind: 'worker_failed', message });
    });
    worker.addEventListener('messageerror', () => {
      if (worker !== this.worker) return;
      this.failAll({
        name: 'WorkerError',
        kind: 'bad_reply',
        message: 'a reply from the engine worker could not be decoded',
      });
    });
    worker.postMessage({
      type: 'configure',
      id: null,
      threads: threads || null,
      relaxed: this.relaxed,
      memory64: this.memory64,
    });
  }

  /** Ends the worker (and its model) and starts a new one with `threads`. Pending requests fail. */
  restart(threads = this.threads) {
    this.worker.terminate();
    this.failAll({ name: 'WorkerError', kind: 'cancelled', message: 'the engine was restarted' });
    this.start(threads);
  }

  /** Ends the worker for good: pending and later requests fail with kind "terminated". */
  terminate() {
    this.terminated = true;
    this.worker.terminate();
    this.failAll({ name: 'WorkerError', kind: 'terminated', message: 'the engine was terminated' });
  }

  /** Restarts the worker when it runs with another thread count; true if it did. */
  useThreads(threads) {
    if ((threads || null) === (this.threads || null)) return false;
    this.restart(threads || null);
    return true;
  }

  /**
   * Posts a request (lib/protocol.js types each) and resolves with its final reply.
   * @template {import('./protocol.js').RequestType} T
   * @param {T} type
   * @param {import('./protocol.js').RequestFields<T>} [fields]
   * @param {((event: import('./protocol.js').WorkerEvent) => void) | null} [onEvent]
   * @returns {Promise<import('./protocol.js').ReplyOf<T> & {id: number}>}
   */
  request(type, fields = /** @type {import('./protocol.js').RequestFields<T>} */ ({}), onEvent = null) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (this.terminated) {
        reject(
          new InfernoError({ name: 'WorkerError', kind: 'terminated', message: 'the engine was terminated' }),
        );
        return;
      }
      if (this.pending.size === 0) this.lastHeard = performance.now(); // Silence while idle is fine.
      const message = { ...fields, type, id };
      this.pending.set(id, { resolve, reject, onEvent, message, switched: false });
      this.worker.postMessage(message);
      this.watchdog ??= setInterval(() => this.watch(), WATCH_EVERY_MS);
    });
  }

  /** The stall watchdog's tick (see the file comment). */
  watch() {
    if (this.pending.size === 0) {
      clearInterval(this.watchdog);
      this.watchdog = null;
      return;
    }
    const silentMs = performance.now() - this.lastHeard;
    const neverStarted = !this.heardSinceStart && performance.now() - this.startedAt >= NEVER_STARTED_MS;
    const stuckSpawning =
      this.spawningSince !== null && performance.now() - this.spawningSince >= SPAWN_STUCK_MS;
    if (neverStarted && (this.startRetries ?? 0) < MAX_START_RETRIES) {
      this.startRetries = (this.startRetries ?? 0) + 1;
      this.restartAndResend(() => true, {});
    } else if (stuckSpawning && (this.spawnRetries ?? 0) < MAX_START_RETRIES) {
      this.spawnRetries = (this.spawnRetries ?? 0) + 1;
      this.restartAndResend(() => true, {});
    } else if (silentMs >= this.stallMs) {
      const seconds = Math.round(silentMs / 1000);
      this.worker.terminate();
      this.failAll({
        name: 'WorkerError',
        kind: 'stalled',
        message: `the engine stopped answering for ${seconds} s; it was ended and a new one started`,
      });
      this.start(this.threads);
    } else if (silentMs >= PING_AFTER_MS) {
      this.worker.postMessage({ type: 'ping', id: null });
    }
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
    if (reply.type === 'switch_build' && !waiter.switched) {
      this.switchBuild(Boolean(reply.memory64));
      return;
    }
    if (reply.type === 'error' && reply.error?.kind === 'engine_start_timeout' && !waiter.retried) {
      this.retryOnNewWorker();
      return;
    }
    this.pending.delete(reply.id);
    if (reply.type === 'switch_build') {
      waiter.reject(
        new InfernoError({
          name: 'WorkerError',
          kind: 'bad_reply',
          message: 'the engine asked twice for another build',
        }),
      );
    } else if (reply.type === 'error') {
      waiter.reject(new InfernoError(reply.error ?? {}));
    } else {
      waiter.resolve(reply);
    }
    // The worker ends itself after a trap in the threaded build: carry on with a new one.
    if (reply.fatal) this.restart();
  }

  /** Restarts the worker with the other memory and sends it the pending loads and
   *  inspections again, in their order. */
  switchBuild(memory64) {
    this.memory64 = memory64;
    this.restartAndResend((waiter) => RESENT_ON_SWITCH.has(waiter.message.type), { switched: true });
  }

  /** The engine's threads did not start (the worker has ended itself): a new worker gets every
   *  pending request again, once. */
  retryOnNewWorker() {
    this.restartAndResend(() => true, { retried: true });
  }

  /** Starts a new worker and sends it the pending requests that `keep` selects, marked with
   *  `mark`; the others fail as cancelled. */
  restartAndResend(keep, mark) {
    const resent = [...this.pending].filter(([, waiter]) => keep(waiter));
    for (const [id] of resent) this.pending.delete(id);
    this.restart();
    for (const [id, waiter] of resent) {
      this.pending.set(id, { ...waiter, ...mark });
      this.worker.postMessage(waiter.message);
    }
  }

  failAll(errorInfo) {
    for (const waiter of this.pending.values()) waiter.reject(new InfernoError(errorInfo));
    this.pending.clear();
  }
}
