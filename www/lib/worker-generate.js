// @ts-check
// The engine worker's generation: chat and text completions (prefill in parts, then the decode
// loop, one posted token at a time), branching from a step of the last answer, stop and reset.
// The last answer itself is the client's (lib/protocol.js says why): a branch brings what the
// worker needs of it.

import { DEFAULT_MAX_TOKENS, DEFAULT_TRACE_TOP } from './defaults.js';
import { onGenerationError } from './worker-load.js';
import {
  WorkerError,
  post,
  requireModel,
  runExclusive,
  state,
  toPlain,
  yieldToMessages,
} from './worker-engine.js';

/** @typedef {import('./worker-engine.js').WebEngine} WebEngine */
/** @typedef {import('./worker-engine.js').Run} Run */
/** @typedef {import('./protocol.js').DoneReply} DoneReply */
/** @typedef {import('./protocol.js').Step} Step */

// Prompt tokens per prefill call: one batch of the engine's (PREFILL_BATCH), so parts cost
// nothing over a single call, and even a large model on one thread answers a stop or a ping
// within seconds.
const PREFILL_PART_TOKENS = 64;

/**
 * The answer being generated: its text so far (a structured answer is read as a message as it
 * grows) and whether it is read so.
 * @typedef {{text: string, structured: boolean}} Answer
 */

/**
 * The decode loop: one step per iteration, yielding between steps so a stop message is
 * handled at once. Step 0 only samples from the prefill's logits; every later step first
 * runs the previous token through the model, so decode speed is measured over steps 1...
 * @param {number} id
 * @param {Run} run
 * @param {Answer} answer
 * @param {{first: number | undefined, startIndex: number, maxTokens: number, traceTop: number}} options
 */
async function decode(id, run, answer, { first, startIndex, maxTokens, traceTop }) {
  const { engine } = requireModel();
  const stats = { steps: 0, firstStepMs: 0, decodeMs: 0, decodeSteps: 0 };
  /** @type {DoneReply['reason']} */
  let reason = 'max_tokens';
  for (let i = 0; i < maxTokens; i++) {
    if (run.stopRequested) {
      reason = 'stopped';
      break;
    }
    const position = engine.context_used();
    const t0 = performance.now();
    const forced = i === 0 ? first : undefined;
    // The last token runs first (after a branch's rollback, the one before the step); on the
    // GPU its logits arrive through the event loop.
    if (engine.advance()) await engine.pending();
    const out = toPlain(engine.step(traceTop, forced));
    const ms = performance.now() - t0;
    if (out.context_full) {
      reason = 'context_full';
      break;
    }
    if (i === 0) stats.firstStepMs = ms;
    else {
      stats.decodeMs += ms;
      stats.decodeSteps += 1;
    }
    stats.steps += 1;
    /** @type {Step} */
    const step = {
      index: startIndex + i,
      position,
      token: out.token,
      text: out.text,
      piece: out.piece,
      piece_bytes: out.piece_bytes,
      endOfGeneration: out.end_of_generation,
      forced: i === 0 && first !== undefined,
      trace: out.trace,
      ms,
    };
    answer.text += step.text;
    // A structured answer (reasoning, tool calls) is read as it grows: the message so far.
    const reply = answer.structured ? toPlain(engine.parse_reply(answer.text, true)) : undefined;
    post({ type: 'token', id, event: true, step, reply });
    if (out.end_of_generation) {
      reason = 'end';
      break;
    }
    await yieldToMessages();
  }
  return { reason, stats };
}

/** The answer's final `text` (a stop string may have cut it) read as a message.
 *  @param {import('./protocol.js').ParseReplyRequest} request
 *  @returns {import('./protocol.js').ParseReplyReply} */
export function parseReply(request) {
  const { engine } = requireModel();
  return { type: 'reply', reply: toPlain(engine.parse_reply(request.text, false)) };
}

/** What `doneReply` measures a completion's stats from: its start, and the engine's counters.
 *  @param {WebEngine} engine */
function beginCompletion(engine) {
  return { started: performance.now(), replayedBefore: engine.replayed(), soloBefore: engine.solo_steps() };
}

/**
 * @param {DoneReply['reason']} reason
 * @param {{steps: number, decodeSteps: number, decodeMs?: number}} stats
 * @param {Partial<import('./protocol.js').GenerationStats>} prefill
 * @param {ReturnType<typeof beginCompletion>} begun
 * @returns {DoneReply}
 */
function doneReply(reason, stats, prefill, { started, replayedBefore, soloBefore }) {
  const { engine } = requireModel();
  const decodeTokS = stats.decodeSteps > 0 ? (1000 * stats.decodeSteps) / stats.decodeMs : null;
  const checkpoints = toPlain(engine.checkpoints());
  return {
    type: 'done',
    reason,
    stats: {
      ...prefill,
      generated: stats.steps,
      decodeTokS,
      contextUsed: engine.context_used(),
      totalMs: performance.now() - started,
      // Tokens run again because a recurrent state (Qwen3.5) went back to a checkpoint.
      replayed: engine.replayed() - replayedBefore,
      checkpoints: checkpoints.most > 0 ? checkpoints : null,
      // Decode steps that ran on one of the engine's threads, because one was found faster
      // (another program holding a core).
      soloSteps: engine.solo_steps() - soloBefore,
      // Model, cache and scratch all live in the wasm memory, which never shrinks: this is
      // what the engine holds of the machine's memory.
      memoryBytes: state.engineBuild?.memory?.buffer.byteLength ?? null,
    },
  };
}

/** A chat answer, or (`complete`) a legacy text completion.
 *  @param {import('./protocol.js').ChatRequest | import('./protocol.js').CompleteRequest} request */
export function chat(request) {
  const { engine } = requireModel();
  return runExclusive((run) => answerOn(engine, request, run).catch(onGenerationError));
}

/** The prompt of a chat (rendered through the template) or a completion (as it is).
 *  @param {WebEngine} engine
 *  @param {import('./protocol.js').ChatRequest | import('./protocol.js').CompleteRequest} request */
function prepare(engine, request) {
  if (request.type === 'complete') {
    return engine.prepare_text({
      prompt: request.prompt,
      grammar: request.grammar ?? undefined,
      settings: request.settings ?? {},
      context: request.context ?? undefined,
    });
  }
  return engine.prepare_chat({
    messages: request.messages,
    enable_thinking: request.enableThinking ?? undefined,
    grammar: request.grammar ?? undefined,
    tools: request.tools ?? undefined,
    tool_choice: request.toolChoice ?? undefined,
    parallel_tool_calls: request.parallelToolCalls ?? undefined,
    split_reasoning: request.splitReasoning ?? undefined,
    settings: request.settings ?? {},
    context: request.context ?? undefined,
  });
}

/**
 * @param {WebEngine} engine
 * @param {import('./protocol.js').ChatRequest | import('./protocol.js').CompleteRequest} request
 * @param {Run} run
 * @returns {Promise<DoneReply>}
 */
async function answerOn(engine, request, run) {
  const begun = beginCompletion(engine);
  const { started } = begun;
  const prepared = toPlain(prepare(engine, request));
  const prefilled = await prefillInParts(request.id, run, engine, prepared.prompt_tokens);
  const prefillMs = performance.now() - started;
  const prefill = {
    promptTokens: prepared.prompt_tokens,
    reused: prefilled.reused,
    evaluated: prefilled.evaluated,
    contextSize: prepared.context_size,
    prefillMs,
    prefillTokS: prefilled.evaluated > 0 ? (1000 * prefilled.evaluated) / prefillMs : null,
  };
  if (prefilled.remaining > 0) {
    return doneReply('stopped', { steps: 0, decodeSteps: 0 }, prefill, begun);
  }
  post({
    type: 'prepared',
    id: request.id,
    event: true,
    prepared: { ...prepared, ...prefilled },
    ms: prefillMs,
  });
  await yieldToMessages();
  const answer = { text: '', structured: prepared.structured };
  const { reason, stats } = await decode(request.id, run, answer, {
    maxTokens: request.maxTokens ?? DEFAULT_MAX_TOKENS,
    traceTop: request.traceTop ?? DEFAULT_TRACE_TOP,
    first: undefined,
    startIndex: 0,
  });
  return doneReply(reason, stats, { ...prefill, ttftMs: prefillMs + stats.firstStepMs }, begun);
}

/**
 * Brings the cache up to the prepared prompt PREFILL_PART_TOKENS at a time, posting progress
 * and yielding between parts; a stop ends it early (what was evaluated stays cached).
 * @param {number} id @param {Run} run @param {WebEngine} engine @param {number} promptTokens
 */
async function prefillInParts(id, run, engine, promptTokens) {
  let reused = null;
  let evaluated = 0;
  for (;;) {
    const part = toPlain(engine.prefill(PREFILL_PART_TOKENS));
    await engine.pending(); // On the GPU: the part is done (a stop or progress is then true).
    reused ??= part.reused;
    evaluated += part.evaluated;
    if (part.remaining === 0) return { reused, evaluated, remaining: 0, context_used: part.context_used };
    post({ type: 'prefill', id, event: true, evaluated, total: promptTokens - reused });
    await yieldToMessages();
    if (run.stopRequested)
      return { reused, evaluated, remaining: part.remaining, context_used: part.context_used };
  }
}

/** Regenerates the last answer from step `step` on, with `token` forced at that step. The KV
 *  cache is rolled back to the step, not recomputed (a recurrent state goes back to its nearest
 *  checkpoint and replays the tokens from there).
 *  @param {import('./protocol.js').BranchRequest} request */
export function branch(request) {
  const { engine } = requireModel();
  /** @param {Run} run */
  const branchOn = async (run) => {
    const begun = beginCompletion(engine);
    engine.truncate(request.position);
    const answer = { text: request.keptText, structured: request.structured };
    const { reason, stats } = await decode(request.id, run, answer, {
      maxTokens: request.maxTokens ?? DEFAULT_MAX_TOKENS,
      traceTop: request.traceTop ?? DEFAULT_TRACE_TOP,
      first: request.token,
      startIndex: request.step,
    });
    return doneReply(reason, stats, { ttftMs: stats.firstStepMs }, begun);
  };
  return runExclusive((run) => branchOn(run).catch(onGenerationError));
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
