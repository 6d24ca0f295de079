// @ts-check
// One completion as the caller sees it: the engine's events (src/engine/generation.rs, through
// the worker) in, OpenAI-shaped chunks out, as a stream or one whole completion.

import { InfernoError } from './worker-client.js';

/** OpenAI's floor for a log probability (a probability of 0 has none). */
const LOGPROB_FLOOR = -9999;

export function abortError() {
  return new InfernoError({ name: 'AbortError', kind: 'aborted', message: 'the request was aborted' });
}

/** One completion as it streams: the engine's events in, OpenAI-shaped chunks out. The engine
 *  reads the answer (src/engine/answer.rs): each token arrives with what it adds to the
 *  message (`content`, `reasoning_content`, tool calls), stop strings already applied. A chat
 *  answer goes out as `chat.completion.chunk`s, a plain completion (`textMode`) as legacy
 *  `text_completion` chunks. */
export class CompletionRun {
  constructor({ base, textMode, logprobs, topLogprobs, settings, stop, whole }) {
    this.base = base;
    this.logprobs = logprobs;
    this.topLogprobs = topLogprobs;
    this.settings = settings;
    this.stopWorker = stop;
    this.textMode = textMode;
    this.queue = [];
    this.wake = null;
    this.ended = false;
    this.error = null;
    this.aborted = false;
    this.started = false;
    this.structured = false;
    this.callIds = []; // each tool call's id, by index
    // A whole completion (stream: false) returns every step and log probability; a stream has
    // sent each with its chunk, and keeps none (a long answer's steps would only pile up).
    this.whole = whole;
    this.collected = { logprobs: [], steps: [] };
  }

  chunk(delta, finishReason = null, extra = {}) {
    const rest = { ...(extra.usage ? { usage: extra.usage } : {}), inferno: extra.inferno ?? null };
    if (this.textMode) {
      const logprobs = extra.logprobs ? legacyLogprobs(extra.logprobs.content) : null;
      const choice = { index: 0, text: delta.content ?? '', logprobs, finish_reason: finishReason };
      return { ...this.base, object: 'text_completion', choices: [choice], ...rest };
    }
    const choice = { index: 0, delta, logprobs: extra.logprobs ?? null, finish_reason: finishReason };
    return { ...this.base, object: 'chat.completion.chunk', choices: [choice], ...rest };
  }

  push(chunk) {
    this.queue.push(chunk);
    this.wake?.();
  }

  /** The engine's delta as OpenAI's: a plain answer's content (even empty), a structured
   *  one's fields that grew, each tool call with its id and name the first time.
   *  @param {import('./protocol.js').Delta} delta */
  openAiDelta(delta) {
    if (!this.structured) return { content: delta.content ?? '' };
    /** @type {Record<string, unknown>} */
    const out = {};
    if (delta.content) out.content = delta.content;
    if (delta.reasoning_content) out.reasoning_content = delta.reasoning_content;
    if (delta.tool_calls?.length) {
      out.tool_calls = delta.tool_calls.map(({ index, name, arguments: args }) => {
        if (name === undefined) return { index, function: { arguments: args } };
        const id = `call_${this.base.id.replace(/^\w+-/, '')}_${index}`;
        this.callIds[index] = id;
        return { index, id, type: 'function', function: { name, arguments: args } };
      });
    }
    return out;
  }

  /** The first chunk: the role, and the prompt's facts (or the branch's). */
  begin(inferno, structured = false, delta = {}) {
    if (this.started) return;
    this.started = true;
    this.structured = structured && !this.textMode;
    const first = this.openAiDelta(delta);
    this.push(
      this.chunk(this.textMode ? first : { role: 'assistant', content: '', ...first }, null, { inferno }),
    );
  }

  /** A branch's first chunk: the steps it keeps, and their text.
   *  @param {import('./protocol.js').BranchedEvent} event */
  branched(event) {
    this.settings ??= /** @type {Record<string, number>} */ (event.settings);
    const kept = event.kept.map((step) => ({ ...step, settings: this.settings }));
    if (this.whole) {
      this.collected.steps.push(...kept);
      if (this.logprobs) this.collected.logprobs.push(...kept.map((step) => this.logprobEntry(step)));
    }
    this.begin({ branch: { step: event.step, token: event.token } }, event.structured, event.delta);
  }

  /** @param {import('./protocol.js').Step} step @param {import('./protocol.js').Delta} delta */
  token(step, delta) {
    if (this.aborted) return; // The worker is being stopped.
    const shown = { ...step, settings: this.settings };
    const logprobs = this.logprobs ? { content: [this.logprobEntry(step)] } : null;
    if (this.whole) {
      this.collected.steps.push(shown);
      if (logprobs) this.collected.logprobs.push(logprobs.content[0]);
    }
    this.push(this.chunk(this.openAiDelta(delta), null, { logprobs, inferno: { step: shown } }));
  }

  logprobEntry(step) {
    const trace = step.trace;
    const logprob = (p) => (p > 0 ? Math.max(LOGPROB_FLOOR, Math.log(p)) : LOGPROB_FLOOR);
    return {
      token: step.piece,
      logprob: logprob(trace?.chosen_probability ?? 0),
      bytes: Array.from(step.piece_bytes ?? []),
      top_logprobs: (trace?.candidates ?? []).slice(0, this.topLogprobs).map((candidate, rank) => ({
        token: trace.pieces[rank],
        logprob: logprob(candidate.probability),
        bytes: Array.from(trace.piece_bytes?.[rank] ?? []),
      })),
    };
  }

  abort() {
    if (this.ended) return;
    this.aborted = true;
    this.stopWorker();
  }

  /** The last chunk: what the end adds (text held back for a stop string that never came, the
   *  answer read as finished), why it ended, the usage and the statistics.
   *  @param {import('./protocol.js').DoneReply} done */
  finish(done) {
    if (!this.started) this.begin(null); // Stopped before the prompt was read.
    const finishReason = this.aborted ? 'abort' : done.finish_reason;
    const { prompt_tokens, completion_tokens, cached_tokens, image_tokens } = done.usage;
    const usage = {
      prompt_tokens,
      completion_tokens,
      total_tokens: prompt_tokens + completion_tokens,
      prompt_tokens_details: { cached_tokens, image_tokens },
    };
    const inferno = {
      finish: done.finish,
      stop_string: done.stop_string,
      warnings: done.warnings,
      stats: done.stats,
    };
    this.push(this.chunk(this.openAiDelta(done.delta), finishReason, { usage, inferno }));
    this.summary = { finishReason, usage, inferno };
    this.ended = true;
    this.wake?.();
  }

  fail(error) {
    this.error = this.aborted && error.kind === 'cancelled' ? abortError() : error;
    this.ended = true;
    this.wake?.();
  }

  async *chunks() {
    try {
      for (;;) {
        if (this.queue.length > 0) {
          yield this.queue.shift();
        } else if (this.error) {
          throw this.error;
        } else if (this.ended) {
          return;
        } else {
          await new Promise((resolve) => (this.wake = resolve));
          this.wake = null;
        }
      }
    } finally {
      // The caller stopped reading early (break): stop the engine too.
      if (!this.ended) this.abort();
    }
  }

  /** The whole completion (stream: false). */
  async collect() {
    let text = '';
    const message = new MessageBuilder();
    for await (const chunk of this.chunks()) {
      if (this.textMode) text += chunk.choices[0].text;
      else message.add(chunk.choices[0].delta);
    }
    const { finishReason, usage, inferno } = this.summary;
    const extra = { ...inferno, steps: this.collected.steps, settings: this.settings };
    if (this.textMode) {
      const logprobs = this.logprobs ? legacyLogprobs(this.collected.logprobs) : null;
      const choice = { index: 0, text, logprobs, finish_reason: finishReason };
      return { ...this.base, object: 'text_completion', choices: [choice], usage, inferno: extra };
    }
    const choice = {
      index: 0,
      message: message.message(),
      logprobs: this.logprobs ? { content: this.collected.logprobs } : null,
      finish_reason: finishReason,
    };
    return { ...this.base, object: 'chat.completion', choices: [choice], usage, inferno: extra };
  }
}

/**
 * Joins a chat stream's deltas into its message, as an OpenAI client does: content and
 * reasoning concatenated, each tool call's pieces joined by `index`.
 */
export class MessageBuilder {
  constructor() {
    this.content = '';
    this.reasoning = '';
    this.calls = [];
  }

  add(delta) {
    this.content += delta.content ?? '';
    this.reasoning += delta.reasoning_content ?? '';
    for (const piece of delta.tool_calls ?? []) {
      const call = (this.calls[piece.index] ??= {
        id: piece.id,
        type: 'function',
        function: { name: '', arguments: '' },
      });
      if (piece.id) call.id = piece.id;
      call.function.name += piece.function?.name ?? '';
      call.function.arguments += piece.function?.arguments ?? '';
    }
  }

  /** @returns {import('./inferno.js').AssistantMessage} */
  message() {
    /** @type {import('./inferno.js').AssistantMessage} */
    const message = {
      role: 'assistant',
      content: this.calls.length > 0 && !this.content ? null : this.content,
    };
    if (this.reasoning) message.reasoning_content = this.reasoning;
    if (this.calls.length > 0) message.tool_calls = this.calls;
    return message;
  }
}

/** Chat-shaped log probabilities as the legacy completions' `{tokens, token_logprobs,
 *  top_logprobs, text_offset}`. */
function legacyLogprobs(entries) {
  let offset = 0;
  const text_offset = [];
  for (const entry of entries) {
    text_offset.push(offset);
    offset += entry.token.length;
  }
  return {
    tokens: entries.map((entry) => entry.token),
    token_logprobs: entries.map((entry) => entry.logprob),
    top_logprobs: entries.map((entry) =>
      Object.fromEntries(entry.top_logprobs.map((t) => [t.token, t.logprob])),
    ),
    text_offset,
  };
}
