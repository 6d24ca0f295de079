// @ts-check
// The engine worker's text requests: tokenize, detokenize and sentence embeddings. Their inputs
// are checked in inferno.js, and the engine checks every value again.

import { WorkerError, requireModel, runExclusive, yieldToMessages } from './worker-engine.js';

/** @param {import('./protocol.js').TokenizeRequest} request
 *  @returns {import('./protocol.js').TokensReply} */
export function tokenize(request) {
  const { engine } = requireModel();
  /** @param {boolean | undefined | null} value */
  const flag = (value) => (value === undefined || value === null ? undefined : Boolean(value));
  const ids = engine.tokenize(request.text, flag(request.addSpecial), flag(request.parseSpecial));
  return { type: 'tokens', ids: Array.from(ids) };
}

/** @param {import('./protocol.js').DetokenizeRequest} request
 *  @returns {import('./protocol.js').TextReply} */
export function detokenize(request) {
  const { engine } = requireModel();
  return {
    type: 'text',
    text: engine.detokenize(Uint32Array.from(request.ids), Boolean(request.renderSpecial)),
  };
}

/** Sentence embeddings, one batch of texts per wasm call (the engine's plan: short texts
 *  packed together): stop (or a newer load) ends the request between two.
 *  @param {import('./protocol.js').EmbedRequest} request
 *  @returns {Promise<import('./protocol.js').EmbeddingsReply>} */
export function embed(request) {
  const { engine } = requireModel();
  const { input, pooling, dimensions, normalize } = request;
  const options = { pooling: pooling ?? undefined, dimensions: dimensions ?? undefined, normalize };
  return runExclusive(async (run) => {
    const started = performance.now();
    const batches = engine.plan_embedding(input, options);
    const vectors = [];
    let promptTokens = 0;
    let used = input.length === 0 ? engine.embed([], options).pooling : null;
    let at = 0;
    for (const size of batches) {
      if (run.stopRequested) throw new WorkerError('AbortError', 'aborted', 'the embedding was stopped');
      const result = engine.embed(input.slice(at, at + size), options);
      vectors.push(...result.vectors);
      promptTokens += result.prompt_tokens;
      used = result.pooling;
      at += size;
      await yieldToMessages();
    }
    return { type: 'embeddings', vectors, promptTokens, pooling: used, ms: performance.now() - started };
  });
}
