// @ts-check
// The engine worker's generation: a pump. The engine's Generation (src/engine/generation.rs)
// owns an answer (prefill in parts, decoding, stop strings, the answer read into deltas, the
// steps a branch starts from); this file starts one, calls `next_events` until it is done,
// posts each event, and between calls awaits the GPU and lets a stop message in.

import { onGenerationError } from './worker-load.js';
import { addPictures } from './worker-images.js';
import { WorkerError, post, requireModel, runExclusive, state, yieldToMessages } from './worker-engine.js';

/** @typedef {import('./worker-engine.js').WebEngine} WebEngine */
/** @typedef {import('./worker-engine.js').Run} Run */
/** @typedef {import('./protocol.js').DoneReply} DoneReply */

/** A request's fields as the engine takes them: all but its type and id (protocol.js writes
 *  them in the engine's names, so nothing is renamed here).
 *  @template {{type: string, id: number}} R @param {R} request */
function engineFields({ type, id, ...fields }) {
  return fields;
}

/** A chat answer, or (`complete`) a legacy text completion. A chat's pictures are decoded and
 *  encoded first, in the order of the `<__media__>` markers in its messages.
 *  @param {import('./protocol.js').ChatRequest | import('./protocol.js').CompleteRequest} request */
export function chat(request) {
  const { engine } = requireModel();
  const start = () => {
    if (request.type === 'complete') return engine.start_text(engineFields(request));
    const { images, ...fields } = engineFields(request);
    return engine.start_chat(fields);
  };
  return runExclusive(async (run) => {
    const pictures = request.type === 'chat' ? (request.images ?? []) : [];
    try {
      await addPictures(request.id, run, engine, pictures);
      return await pump(request.id, run, engine, start);
    } catch (error) {
      try {
        engine.clear_images(); // A request that failed before it started leaves none behind.
      } catch {
        // After a trap the engine is gone, and its error is the one to report.
      }
      return onGenerationError(error);
    }
  });
}

/** Regenerates the last answer from step `step` on, with `token` forced at that step. The KV
 *  cache is rolled back to the step, not recomputed (a recurrent state goes back to its nearest
 *  checkpoint and replays the tokens from there).
 *  @param {import('./protocol.js').BranchRequest} request */
export function branch(request) {
  const { engine } = requireModel();
  const start = () => engine.start_branch(engineFields(request));
  return runExclusive((run) => pump(request.id, run, engine, start).catch(onGenerationError));
}

/**
 * Runs an answer to its end: one engine call at a time (a prefill part or a step), each call's
 * events posted, the GPU awaited and messages let in between calls.
 * @param {number} id @param {Run} run @param {WebEngine} engine @param {() => void} start
 * @returns {Promise<DoneReply>}
 */
async function pump(id, run, engine, start) {
  start();
  for (;;) {
    if (run.stopRequested) engine.stop_answer();
    const events = /** @type {import('./protocol.js').AnswerEvent[]} */ (engine.next_events());
    for (const event of events) {
      if (event.type === 'done') {
        // Model, cache and scratch all live in the wasm memory, which never shrinks: this is
        // what the engine holds of the machine's memory.
        const memoryBytes = state.engineBuild?.memory?.buffer.byteLength ?? null;
        const imagesEncoded = engine.images_encoded();
        return { ...event, stats: { ...event.stats, memoryBytes, imagesEncoded } };
      }
      post({ ...event, id, event: true });
    }
    await engine.pending(); // On the GPU: what the call submitted is done.
    await yieldToMessages();
  }
}

/** @returns {import('./protocol.js').StoppedReply} */
export function stop() {
  const wasGenerating = Boolean(state.busy);
  if (state.busy) state.busy.stopRequested = true;
  return { type: 'stopped', wasGenerating };
}

/** @returns {import('./protocol.js').ResetReply} */
export function reset() {
  if (state.busy) throw new WorkerError('ProtocolError', 'busy', 'stop the generation before resetting');
  state.model?.engine.reset();
  return { type: 'reset' };
}
