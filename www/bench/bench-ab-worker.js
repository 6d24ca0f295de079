// @ts-check
// Module Web Worker for bench-ab.html: two builds of Inferno (two revisions, say) side by side
// in one worker, on the same file and the same prompt, so that what the machine is doing at
// the time weighs on both alike. Each build gets its own engine (its own wasm memory, and with
// threads its own pool; an idle pool's helpers park, so the one not running leaves the cores
// free). After `warmup` untimed runs each, `pairs` rounds time one run of each, alternating
// which goes first. A run is bench-worker.js's: one pp-token prefill and tg decode steps.
//
// Protocol: receives {params} once; posts {type: 'progress', text} while working, then
// {type: 'result', result} or {type: 'error', error}.

import { sizePrompt } from './bench-common.js';
import { depthTokens, progress, serve, streamModel, timeRun } from './bench-run.js';
import { buildFor, resolveThreads } from '../lib/capabilities.js';
import { startBuild } from '../lib/engine-loader.js';

serve(run);

async function run({ model, pp, tg, depth, threads, ctx, warmup, relaxed, a, b, pairs }) {
  const resolved = resolveThreads(threads);
  if (resolved.threads !== threads)
    throw new Error(`Inferno cannot run ${threads} threads here: ${resolved.reason}`);
  const sides = [];
  try {
    for (const [name, base] of [
      ['a', a],
      ['b', b],
    ]) {
      progress(`starting build ${name} (${base})`);
      // Each side's build comes from its own folder, so it is imported by URL, not statically.
      const build = buildFor(threads, { relaxed });
      const glue = await import(new URL(`${build}/inferno.js`, new URL(base, location.href)).href);
      const started = { ...(await startBuild(glue, threads)), build };
      progress(`loading the model into build ${name}`);
      const { engine } = await streamModel(started.module, model, progress);
      sides.push({
        name,
        base,
        build: started.build,
        version: started.module.engine_info().version,
        engine,
        prefill_tok_s: [],
        decode_tok_s: [],
        outputs: new Set(),
      });
    }
    const prompt = await sizePrompt((text) => sides[0].engine.tokenize(text).length, pp, 'Inferno');
    const tokens = sides.map((side) => side.engine.tokenize(prompt.text));
    if (tokens.some((ids) => ids.length !== pp || ids.some((id, i) => id !== tokens[0][i])))
      throw new Error(`the two builds tokenize the ${prompt.words}-word prompt differently`);
    const depthIds = sides.map((side) => depthTokens(side.engine, depth));
    for (const [index, side] of sides.entries()) {
      for (let i = 0; i < warmup; i++) {
        progress(`warm-up run ${i + 1} of ${warmup}, build ${side.name}`);
        await timeRun(side.engine, tokens[index], tg, ctx, undefined, depthIds[index]);
      }
    }
    for (let pair = 0; pair < pairs; pair++) {
      progress(`pair ${pair + 1} of ${pairs}`);
      const order = pair % 2 === 0 ? [0, 1] : [1, 0];
      for (const index of order) {
        const side = sides[index];
        const timed = await timeRun(side.engine, tokens[index], tg, ctx, undefined, depthIds[index]);
        side.prefill_tok_s.push((pp * 1000) / timed.prefill_ms);
        side.decode_tok_s.push((tg * 1000) / timed.decode_ms);
        side.outputs.add(timed.output);
      }
    }
    const [first, second] = sides.map((side) => [...side.outputs]);
    return {
      model,
      pp,
      depth,
      tg,
      threads,
      pairs,
      warmup,
      prompt_words: prompt.words,
      // Greedy decoding is deterministic in each build; builds that differ here compute
      // different logits (expected only from a change meant to alter results).
      outputs_agree: first.length === 1 && second.length === 1 && first[0] === second[0],
      ...Object.fromEntries(
        sides.map((side) => [
          side.name,
          {
            base: side.base,
            build: side.build,
            version: side.version,
            prefill_tok_s: side.prefill_tok_s,
            decode_tok_s: side.decode_tok_s,
            output: [...side.outputs][0],
          },
        ]),
      ),
    };
  } finally {
    for (const side of sides) side.engine.free();
  }
}
