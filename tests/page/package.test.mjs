// The embeddable library as a web developer gets it: `npm pack` (scripts/pack.mjs), installed
// into a scratch directory with npm, imported by a plain HTML page that knows nothing of
// Inferno's own page. The page streams a chat with logprobs, asks the same question without
// streaming, aborts a long answer, branches from a candidate, asks for JSON by schema (and a
// Lark grammar), round-trips the tokenizer and checks the errors; the test reads back what it
// saw.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  copyFileSync,
  linkSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import os from 'node:os';
import { gzipSync } from 'node:zlib';
import path from 'node:path';
import { pack } from '../../scripts/pack.mjs';
import { startServer } from '../../scripts/serve.mjs';
import Ajv from 'ajv';
import { MODELS, h, requireModel, watchForProblems } from './harness.mjs';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

/** The seeds of the llguidance suite's schemas in the page (4e). */
const SUITE_SEEDS = [1, 2];

const PAGE = String.raw`<!doctype html>
<meta charset="utf-8">
<title>Embedding Inferno</title>
<link rel="icon" href="data:,">
<pre id="out"></pre>
<script type="importmap">{ "imports": { "inferno-web": "./node_modules/inferno-web/inferno.js" } }</script>
<script type="module">
import { Inferno, InfernoError } from 'inferno-web';

const out = document.getElementById('out');
const question = { messages: [{ role: 'user', content: 'What is the capital of France?' }], temperature: 0, max_tokens: 12 };

const SUITE_SEEDS = ${JSON.stringify(SUITE_SEEDS)};

const kindOf = async (promise) => promise.then(() => 'no error', (e) => (e instanceof InfernoError ? e.kind : 'not an InfernoError: ' + e));

async function scenario() {
  const result = {};
  const phases = new Set();
  const engine = await Inferno.load('model.gguf', { onProgress: (p) => phases.add(p.phase) });
  result.model = engine.model;
  result.phases = [...phases];

  // 1. Streamed, with log probabilities.
  const chunks = [];
  for await (const chunk of await engine.chat.completions.create({ ...question, stream: true, logprobs: true, top_logprobs: 3 })) {
    chunks.push(chunk);
    out.textContent += chunk.choices[0].delta.content ?? '';
  }
  result.streamed = chunks;

  // 2. The same question, one completion (greedy: the same text; the prompt is in the cache).
  result.whole = await engine.chat.completions.create({ ...question, stream: false });

  // 3. Aborted after the third token.
  const controller = new AbortController();
  const aborted = [];
  const long = { messages: [{ role: 'user', content: 'Count from 1 to 200, one number per line.' }], temperature: 0, max_tokens: 300 };
  for await (const chunk of await engine.chat.completions.create({ ...long, stream: true, signal: controller.signal })) {
    aborted.push(chunk);
    const tokens = aborted.filter((c) => c.inferno?.step).length;
    // One answer at a time: a second request meanwhile is refused, and the first goes on.
    if (tokens === 1 && !result.busy) result.busy = await kindOf(engine.chat.completions.create(question));
    if (tokens === 3) controller.abort();
  }
  result.aborted = aborted;

  // 4. Branch from step 1 of the aborted answer, with its runner-up candidate forced.
  const step1 = aborted.find((c) => c.inferno?.step?.index === 1).inferno.step;
  const runnerUp = step1.trace.candidates[1].id;
  result.branchToken = runnerUp;
  result.branch = await engine.branch({ step: 1, token: runnerUp, max_tokens: 6 });

  // 4b. Structured output: at temperature 1 and five seeds, every answer is JSON the schema
  // accepts; a branch to a token the grammar forbids is refused; bad schemas and grammars are
  // refused before any token, each with its kind.
  const schema = {
    type: 'object',
    properties: {
      name: { type: 'string', maxLength: 20 },
      legs: { type: 'integer', minimum: 0, maximum: 8 },
      colour: { enum: ['black', 'white', 'ginger', 'grey'] },
    },
    required: ['name', 'legs', 'colour'],
    additionalProperties: false,
  };
  const asJson = {
    messages: [{ role: 'user', content: 'Describe a cat as JSON.' }],
    temperature: 1,
    max_tokens: 120,
    logprobs: true,
    response_format: { type: 'json_schema', json_schema: { name: 'cat', schema } },
  };
  result.structured = [];
  for (const seed of [1, 2, 3, 4, 5]) {
    const reply = await engine.chat.completions.create({ ...asJson, seed });
    const first = reply.inferno.steps[0].trace;
    result.structured.push({
      content: reply.choices[0].message.content,
      finish: reply.choices[0].finish_reason,
      firstAllowed: first.grammar.allowed,
      firstForbidden: first.forbidden_pieces.length,
    });
  }
  const anObject = await engine.chat.completions.create({ ...asJson, seed: 9, max_tokens: 200, response_format: { type: 'json_object' } });
  result.jsonObject = { content: anObject.choices[0].message.content, finish: anObject.choices[0].finish_reason };
  // The first step of the JSON-object answer allowed no letter: forcing one is refused.
  const letter = (await engine.tokenize('Hello', { addSpecial: false }))[0];
  result.forbiddenBranch = await kindOf(engine.branch({ step: 0, token: letter, max_tokens: 2 }));
  result.grammarErrors = {
    schema: await kindOf(engine.chat.completions.create({ ...asJson, response_format: { type: 'json_schema', json_schema: { schema: { type: 'integer', minimum: 5, maximum: 1 } } } })),
    grammar: await kindOf(engine.chat.completions.create({ ...asJson, response_format: { type: 'grammar', grammar: 'start: (' } })),
    format: await kindOf(engine.chat.completions.create({ ...asJson, response_format: { type: 'yaml' } })),
  };
  // A keyword the grammar engine lacks: a strict schema is refused naming it; otherwise the
  // answer runs without it and says so.
  const unique = { type: 'array', items: { type: 'integer' }, uniqueItems: true };
  result.lenient = await engine.chat.completions.create({ ...asJson, seed: 3, response_format: { type: 'json_schema', json_schema: { name: 'u', schema: unique } } });
  result.strictError = await engine.chat.completions
    .create({ ...asJson, response_format: { type: 'json_schema', json_schema: { name: 'u', schema: unique, strict: true } } })
    .then(() => null, (e) => ({ kind: e.kind, message: e.message }));
  result.yesNo = (await engine.chat.completions.create({ ...asJson, response_format: { type: 'grammar', grammar: 'start: "yes" | "no"' } })).choices[0].message.content;

  // 4c. Tool calls (SmolLM2's template has no tool format: the generic JSON route). A
  // required call, streamed at temperature 1 with three seeds, arrives as tool_calls deltas
  // that join into a call with arguments its schema accepts; the call and its result go back
  // in and the next answer runs; a named function is the one called; mistakes are bad_tools.
  const weather = {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city.',
      parameters: { type: 'object', properties: { city: { enum: ['Paris', 'Oslo', 'Lima'] }, celsius: { type: 'boolean' } }, required: ['city'] },
    },
  };
  const alarm = { type: 'function', function: { name: 'set_alarm', parameters: { type: 'object', properties: { hour: { type: 'integer', minimum: 0, maximum: 23 } }, required: ['hour'] } } };
  const ask = { messages: [{ role: 'user', content: 'What is the weather in Paris?' }], tools: [weather, alarm], temperature: 1, max_tokens: 60 };
  result.tools = [];
  for (const seed of [1, 2, 3]) {
    const calls = [];
    let finish = null;
    for await (const chunk of await engine.chat.completions.create({ ...ask, tool_choice: 'required', parallel_tool_calls: false, seed, stream: true })) {
      for (const piece of chunk.choices[0].delta.tool_calls ?? []) {
        calls[piece.index] ??= { id: piece.id, name: piece.function.name, arguments: '', pieces: 0 };
        calls[piece.index].arguments += piece.function.arguments ?? '';
        calls[piece.index].pieces += 1;
      }
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    const next = await engine.chat.completions.create({
      ...ask,
      seed,
      messages: [
        ...ask.messages,
        { role: 'assistant', content: null, tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) },
        ...calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: '{"temperature": 21, "sky": "clear"}' })),
      ],
    });
    result.tools.push({ calls, finish, next: { message: next.choices[0].message, finish: next.choices[0].finish_reason } });
  }
  const named = await engine.chat.completions.create({ ...ask, seed: 4, parallel_tool_calls: false, tool_choice: { type: 'function', function: { name: 'set_alarm' } } });
  result.namedTool = named.choices[0].message.tool_calls;
  result.toolErrors = {
    name: await kindOf(engine.chat.completions.create({ ...ask, tools: [{ type: 'function', function: { name: 'two words' } }] })),
    unknown: await kindOf(engine.chat.completions.create({ ...ask, tool_choice: { type: 'function', function: { name: 'nope' } } })),
    withFormat: await kindOf(engine.chat.completions.create({ ...ask, response_format: { type: 'json_object' } })),
  };

  // 4d. Plain completions: the prompt as it is, streamed and whole (greedy: the same text).
  const prompt = { prompt: 'The capital of France is', temperature: 0, max_tokens: 6, logprobs: 2 };
  let streamedText = '';
  for await (const chunk of await engine.completions.create({ ...prompt, stream: true })) streamedText += chunk.choices[0].text;
  const whole = await engine.completions.create(prompt);
  result.completion = { streamedText, whole };

  // 4f. A stop string across two tokens, from the middle of a greedy answer: asked again
  // with it (and one that never comes), the answer ends at the token that completes it.
  const free = await engine.completions.create({ prompt: 'The capital of France is', temperature: 0, max_tokens: 16 });
  const texts = free.inferno.steps.map((s) => s.text);
  let k = texts.length >> 1;
  while (k < texts.length - 2 && !(texts[k] && texts[k + 1])) k++;
  const stop = Array.from(texts[k]).at(-1) + Array.from(texts[k + 1])[0];
  const stopped = await engine.completions.create({ prompt: 'The capital of France is', temperature: 0, max_tokens: 16, stop: ['never seen', stop] });
  let stoppedStream = '';
  for await (const chunk of await engine.completions.create({ prompt: 'The capital of France is', temperature: 0, max_tokens: 16, stop, stream: true })) stoppedStream += chunk.choices[0].text;
  result.stopString = { texts, stop, stopped, stoppedStream };

  // 4e. The JSON schemas of llama.cpp's llguidance suite (schemas.json, from
  // .cache/llguidance-cases.json) on a micro model, two seeds each at temperature 1: the test
  // validates every answer that ended with an independent validator (ajv). The five-seed sweep
  // of the same schemas on the same model is tests/structured.rs's, natively.
  const micro = await Inferno.load('micro.gguf');
  result.suite = [];
  for (const { name, schema } of await (await fetch('schemas.json')).json()) {
    for (const seed of SUITE_SEEDS) {
      const reply = await micro.chat.completions.create({
        messages: [{ role: 'user', content: 'Answer in JSON.' }],
        enable_thinking: false,
        temperature: 1,
        seed,
        max_tokens: 200,
        response_format: { type: 'json_schema', json_schema: { name: 'suite', schema } },
      });
      result.suite.push({ name, seed, content: reply.choices[0].message.content, finish: reply.choices[0].finish_reason });
    }
  }
  // 4f. Embeddings: the micro Qwen3-Embedding file's vectors for each pooling against
  // llama.cpp's (embeddings.json, from tests/fixtures/golden), in OpenAI's shape; base64, a
  // cut to fewer dimensions, the errors, and a chat model that embeds only when told how.
  const golden = await (await fetch('embeddings.json')).json();
  const embedder = await Inferno.load('embed.gguf');
  const cosine = (a, b) => {
    let [ab, aa, bb] = [0, 0, 0];
    for (let i = 0; i < a.length; i++) [ab, aa, bb] = [ab + a[i] * b[i], aa + a[i] * a[i], bb + b[i] * b[i]];
    return ab / Math.sqrt(aa * bb);
  };
  const length = (v) => Math.sqrt(v.reduce((sum, x) => sum + x * x, 0));
  result.embeddings = { purpose: embedder.model.purpose, pooling: embedder.model.pooling, poolings: {} };
  for (const [pooling, texts] of Object.entries(golden.poolings)) {
    const reply = await embedder.embeddings.create({ input: texts.map((t) => t.text), pooling, normalize: false });
    result.embeddings.poolings[pooling] = {
      object: reply.object,
      used: reply.inferno.pooling,
      indices: reply.data.map((d) => d.index),
      promptTokens: reply.usage.prompt_tokens,
      goldenTokens: texts.reduce((n, t) => n + t.tokens.length, 0),
      cosines: reply.data.map((d, i) => cosine(d.embedding, texts[i].embedding)),
    };
  }
  const one = golden.poolings.last[1];
  const unit = (await embedder.embeddings.create({ input: one.text })).data[0].embedding;
  const encoded = (await embedder.embeddings.create({ input: [one.text], encoding_format: 'base64' })).data[0].embedding;
  const decoded = new Float32Array(Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0)).buffer);
  const cut = (await embedder.embeddings.create({ input: one.text, dimensions: 32 })).data[0].embedding;
  result.embeddings.unit = { length: length(unit), cosine: cosine(unit, one.embedding), base64Same: decoded.every((v, i) => v === unit[i]) };
  result.embeddings.cut = { values: cut.length, length: length(cut), cosine: cosine(cut, one.embedding.slice(0, 32)) };
  result.embeddings.errors = {
    empty: await embedder.embeddings.create({ input: ['fine', ''] }).then(() => 'no error', (e) => e.kind + ': ' + e.message),
    dimensions: await kindOf(embedder.embeddings.create({ input: 'a', dimensions: 257 })),
    pooling: await kindOf(embedder.embeddings.create({ input: 'a', pooling: 'max' })),
    format: await kindOf(embedder.embeddings.create({ input: 'a', encoding_format: 'int8' })),
    noInput: await kindOf(embedder.embeddings.create({ input: [] })),
  };
  // A request of many texts stops between two when its signal aborts.
  const stopper = new AbortController();
  const many = embedder.embeddings.create({ input: Array(2000).fill(golden.poolings.last[5].text), signal: stopper.signal });
  setTimeout(() => stopper.abort(), 50);
  result.embeddings.aborted = await kindOf(many);
  result.embeddings.afterAbort = (await embedder.embeddings.create({ input: 'x' })).data.length;
  embedder.terminate();
  // The encoders (micro BERT and Nomic BERT) against llama.cpp's vectors; they refuse to chat.
  result.embeddings.encoders = {};
  for (const name of ['bert', 'nomic-bert']) {
    const encoderGolden = await (await fetch(name + '.embeddings.json')).json();
    const encoder = await Inferno.load(name + '.gguf');
    const cosines = {};
    for (const [pooling, texts] of Object.entries(encoderGolden.poolings)) {
      const reply = await encoder.embeddings.create({ input: texts.map((t) => t.text), pooling, normalize: false });
      cosines[pooling] = reply.data.map((d, i) => cosine(d.embedding, texts[i].embedding));
    }
    result.embeddings.encoders[name] = {
      generates: encoder.model.generates,
      purpose: encoder.model.purpose,
      cosines,
      chat: await kindOf(encoder.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 })),
    };
    encoder.terminate();
  }
  result.embeddings.chatModel = {
    purpose: micro.model.purpose,
    generates: micro.model.generates,
    refused: await micro.embeddings.create({ input: 'a' }).then(() => 'no error', (e) => e.kind + ': ' + e.message),
    mean: (await micro.embeddings.create({ input: ['a', 'b'], pooling: 'mean' })).data.map((d) => d.embedding.length),
  };

  // 4h. Pictures: Gemma 3 270M with the micro projector made for its width, the golden's
  // picture as a data: URL in OpenAI's content parts, and llama.cpp's mtmd tokens as the
  // answer; a follow-up with the picture again (as a blob: URL) encodes nothing; the errors.
  const vision = await (await fetch('vision.json')).json();
  const visionPhases = new Set();
  const seer = await Inferno.load('gemma3.gguf', { mmproj: 'mmproj.gguf', precision: 'exact', onProgress: (p) => visionPhases.add(p.phase) });
  const picture = await (await fetch('picture.png')).blob();
  const dataUrl = 'data:image/png;base64,' + btoa(String.fromCharCode(...new Uint8Array(await picture.arrayBuffer())));
  const progress = [];
  const askAbout = (url, text, extra = {}) => seer.chat.completions.create({
    messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text }] }, ...(extra.more ?? [])],
    temperature: 0, max_tokens: 8, onPrefillProgress: (p) => progress.push(p.phase),
  });
  const seen = await askAbout(dataUrl, 'What is in this picture?');
  const blobUrl = URL.createObjectURL(picture);
  const followUp = await askAbout(blobUrl, 'What is in this picture?', {
    more: [{ role: 'assistant', content: seen.choices[0].message.content }, { role: 'user', content: 'And the colours?' }],
  });
  const forged = new Uint8Array(await picture.slice(0, 64).arrayBuffer());
  forged.set([0, 0, 0x4e, 0x20, 0, 0, 0x4e, 0x20], 16); // IHDR: 20,000 x 20,000
  const forgedUrl = URL.createObjectURL(new Blob([forged, new Uint8Array(1024)]));
  const withPicture = (url) => ({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: 'Hi' }] }], max_tokens: 2 });
  result.vision = {
    model: seer.model.vision,
    phases: [...visionPhases],
    ids: seen.inferno.steps.map((step) => step.token),
    golden: vision.generated_ids.slice(0, 8),
    usage: seen.usage,
    followUp: { usage: followUp.usage, encoded: followUp.inferno.stats.imagesEncoded },
    encoded: seen.inferno.stats.imagesEncoded,
    progress: [...new Set(progress)],
    errors: {
      notPicture: await kindOf(seer.chat.completions.create(withPicture('data:text/plain,hello'))),
      tooLarge: await kindOf(seer.chat.completions.create(withPicture(forgedUrl))),
      missing: await kindOf(seer.chat.completions.create(withPicture('no-such-picture.png'))),
      badPart: await kindOf(seer.chat.completions.create({ messages: [{ role: 'user', content: [{ type: 'input_audio' }] }] })),
      noProjector: await kindOf(micro.chat.completions.create(withPicture(dataUrl))),
      mismatch: await kindOf(micro.attachProjector('mmproj.gguf')),
      microVision: micro.model.vision,
    },
    afterErrors: (await askAbout(dataUrl, 'What is in this picture?')).inferno.steps.map((step) => step.token),
  };
  seer.terminate();

  // 4i. Limits on a picture's rows (llama.cpp's --image-min/max-tokens): the micro Gemma 4 and
  // its projector, the wide picture taking 70 rows limited to 40-80 (mtmd's count) instead of
  // 300; limits the projector cannot take are refused.
  const wide = await (await fetch('wide.png')).blob();
  const wideUrl = URL.createObjectURL(wide);
  const gemma4 = await Inferno.load('gemma4-vl.gguf', { mmproj: 'gemma4v.gguf', image_min_tokens: 40, image_max_tokens: 80 });
  const limitedRows = async () => (await gemma4.chat.completions.create(withPicture(wideUrl))).usage.prompt_tokens_details.image_tokens;
  result.limits = {
    loaded: gemma4.model.vision.image_tokens,
    rows: await limitedRows(),
    reattached: (await gemma4.attachProjector('gemma4v.gguf')).image_tokens,
    rowsAfter: await limitedRows(),
    tooMany: await kindOf(gemma4.attachProjector('gemma4v.gguf', { image_max_tokens: 2000 })),
    notWhole: await kindOf(Inferno.load('gemma4-vl.gguf', { mmproj: 'gemma4v.gguf', image_max_tokens: 0.5 })),
  };
  gemma4.terminate();

  // 4g. A split model (llama-gguf-split's three shards of the micro file): from the first
  // shard's URL (the others found by their names), from Files in another order, inspected as
  // one model; a missing shard is named. Greedy answers equal the whole file's.
  const greedy = { messages: [{ role: 'user', content: 'Hi' }], temperature: 0, max_tokens: 6 };
  const answer = async (engine) => (await engine.chat.completions.create(greedy)).choices[0].message.content;
  const unsplit = await Inferno.load('split/whole.gguf');
  const wholeMicro = await answer(unsplit);
  unsplit.terminate();
  const shardName = (no) => 'split/qwen3-micro-q8_0-llama-split-0000' + no + '-of-00003.gguf';
  const byUrl = await Inferno.load(shardName(1));
  const shardFiles = await Promise.all([3, 1, 2].map(async (no) => new File([await (await fetch(shardName(no))).blob()], shardName(no).split('/')[1])));
  result.split = { byUrl: { model: byUrl.model, answer: await answer(byUrl) }, whole: wholeMicro };
  await byUrl.load(shardFiles);
  result.split.byFiles = { model: byUrl.model, answer: await answer(byUrl) };
  const inspected = await byUrl.inspectFile(shardFiles);
  result.split.inspected = { tensors: inspected.report.gguf.tensor_count, shards: inspected.report.gguf.shards, runs: inspected.report.runs.ok };
  result.split.missing = await byUrl.load([shardFiles[0], shardFiles[1]]).then(() => 'no error', (e) => e.kind + ': ' + e.message);
  result.split.lone = (await byUrl.inspectFile(shardFiles[1])).report.runs;
  byUrl.terminate();
  micro.terminate();

  // 5. The tokenizer, both ways.
  const ids = await engine.tokenize('Hello world', { addSpecial: false });
  result.tokens = { ids, text: await engine.detokenize(ids) };

  // 6. Errors carry a stable kind.
  result.errors = {
    emptyMessages: await kindOf(engine.chat.completions.create({ messages: [] })),
    badToken: await kindOf(engine.detokenize([1e9])),
    missingFile: await kindOf(Inferno.load('no-such-model.gguf')),
  };
  // 7. A failed load keeps the loaded model when it fails before the new file is read (a URL
  // that answers 404, a File whose header is not GGUF), and loses it after (a URL whose data
  // ends early: the old model's memory went to the new one).
  const stillChats = async () => (await engine.chat.completions.create({ ...question, max_tokens: 2 })).choices[0].message.content.length > 0;
  result.kept = {
    missing: await kindOf(engine.load('no-such-model.gguf')),
    missingModel: engine.model?.name,
    missingChats: await stillChats(),
    notGguf: await kindOf(engine.load(new File(['just some notes, not a model'], 'notes.txt'))),
    notGgufModel: engine.model?.name,
    notGgufChats: await stillChats(),
    compressed: await kindOf(engine.load('http://127.0.0.1:' + new URLSearchParams(location.search).get('gzip') + '/model.gguf')),
    compressedModel: engine.model?.name,
    truncated: await kindOf(engine.load('truncated.gguf')),
    truncatedModel: engine.model,
    truncatedChat: await kindOf(engine.chat.completions.create(question)),
  };
  await engine.load('model.gguf');

  // 8. workerUrl: relative to the page; not a URL is bad_request; a missing file is named.
  const relative = Inferno.create({ workerUrl: 'node_modules/inferno-web/worker.js' });
  result.workerUrl = { relative: (await relative.engineInfo()).version };
  relative.terminate();
  result.workerUrl.invalid = await kindOf((async () => Inferno.create({ workerUrl: 'http://[' }))());
  const missing = Inferno.create({ workerUrl: 'missing/worker.js' });
  result.workerUrl.missing = await missing.engineInfo().then(() => 'no error', (e) => ({ kind: e.kind, message: e.message }));
  missing.terminate();

  await engine.unload();
  result.unloaded = await kindOf(engine.chat.completions.create(question));
  engine.terminate();
  return result;
}

scenario().then(
  // As JSON: WebDriver BiDi (Firefox) hands shared references back as empty.
  (result) => (window.__result = JSON.parse(JSON.stringify(result))),
  (error) => (window.__result = { failed: { name: error.name, kind: error.kind, message: error.message } }),
);
</script>
`;

/** The `test_schema` cases of llama.cpp's test-grammar-llguidance.cpp, as fetched by
 *  scripts/fetch-models.sh: their grammar is `start: %json SCHEMA`. */
function suiteSchemas() {
  const cases = JSON.parse(readFileSync(path.join(ROOT, '.cache', 'llguidance-cases.json'), 'utf8'));
  const prefix = '%llguidance {}\nstart: %json ';
  return cases
    .filter((c) => c.grammar.startsWith(prefix))
    .map((c) => ({
      name: `line ${c.line}: ${c.description}`,
      schema: JSON.parse(c.grammar.slice(prefix.length)),
    }));
}

describe('the npm package in a plain page', { timeout: 420_000 }, () => {
  let scratch;
  let server;
  let gzipServer;

  before(() => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'inferno-package-'));
    const tarball = pack(path.join(scratch, 'dist'));
    const app = path.join(scratch, 'app');
    execFileSync('mkdir', ['-p', app]);
    writeFileSync(path.join(app, 'package.json'), '{ "name": "embedding-test", "private": true }\n');
    execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', tarball], {
      cwd: app,
      stdio: 'inherit',
    });
    writeFileSync(path.join(app, 'index.html'), PAGE);
    writeFileSync(path.join(app, 'schemas.json'), JSON.stringify(suiteSchemas()));
    copyFileSync(requireModel(MODELS.qwen3Micro), path.join(app, 'micro.gguf'));
    copyFileSync(
      path.join(ROOT, 'tests/fixtures/models/qwen3-embed-micro-q8_0.gguf'),
      path.join(app, 'embed.gguf'),
    );
    copyFileSync(
      path.join(ROOT, 'tests/fixtures/golden/qwen3-embed-micro-q8_0.embeddings.json'),
      path.join(app, 'embeddings.json'),
    );
    for (const name of ['bert', 'nomic-bert']) {
      copyFileSync(
        path.join(ROOT, `tests/fixtures/models/${name}-micro-q8_0.gguf`),
        path.join(app, `${name}.gguf`),
      );
      copyFileSync(
        path.join(ROOT, `tests/fixtures/golden/${name}-micro-q8_0.embeddings.json`),
        path.join(app, `${name}.embeddings.json`),
      );
    }
    execFileSync('cp', ['-r', path.join(ROOT, 'tests/fixtures/models/split'), path.join(app, 'split')]);
    // 4h: Gemma 3 270M, the micro projector made for its width, the golden's picture.
    const golden = JSON.parse(
      readFileSync(path.join(ROOT, 'tests/fixtures/golden/clip-gemma3-micro.images.json')),
    );
    writeFileSync(path.join(app, 'vision.json'), JSON.stringify(golden.chat));
    copyFileSync(
      path.join(ROOT, 'tests/fixtures/models/clip-gemma3-micro.gguf'),
      path.join(app, 'mmproj.gguf'),
    );
    copyFileSync(path.join(ROOT, 'tests/fixtures', golden.chat.picture), path.join(app, 'picture.png'));
    // 4i: the micro Gemma 4, its projector and the wide picture.
    copyFileSync(
      path.join(ROOT, 'tests/fixtures/models/gemma4-vl-micro-q8_0.gguf'),
      path.join(app, 'gemma4-vl.gguf'),
    );
    copyFileSync(
      path.join(ROOT, 'tests/fixtures/models/clip-gemma4v-micro.gguf'),
      path.join(app, 'gemma4v.gguf'),
    );
    copyFileSync(path.join(ROOT, 'tests/fixtures/images/wide-480x360.png'), path.join(app, 'wide.png'));
    try {
      linkSync(requireModel(MODELS.gemma3), path.join(app, 'gemma3.gguf'));
    } catch {
      copyFileSync(requireModel(MODELS.gemma3), path.join(app, 'gemma3.gguf'));
    }
    copyFileSync(
      path.join(ROOT, 'tests/fixtures/models/qwen3-micro-q8_0.gguf'),
      path.join(app, 'split/whole.gguf'),
    );
    const model = requireModel(MODELS.smollm2);
    // The model's first 8 MiB: a whole header, and data that ends early.
    const head = Buffer.alloc(8 << 20);
    const fd = openSync(model, 'r');
    readSync(fd, head, 0, head.length, 0);
    closeSync(fd);
    writeFileSync(path.join(app, 'truncated.gguf'), head);
    try {
      linkSync(model, path.join(app, 'model.gguf'));
    } catch {
      copyFileSync(model, path.join(app, 'model.gguf'));
    }
  });

  after(async () => {
    await server?.close();
    gzipServer?.close();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  test('streams with logprobs, completes, aborts, branches and reports errors', async () => {
    server = await startServer({ root: path.join(scratch, 'app'), port: 0 });
    // A server that gzips the model and answers no Range request: its size cannot be known.
    const gzipped = gzipSync(readFileSync(path.join(scratch, 'app', 'truncated.gguf')));
    gzipServer = createServer((request, response) => {
      response.writeHead(200, {
        'Content-Encoding': 'gzip',
        'Content-Type': 'application/octet-stream',
        'Access-Control-Allow-Origin': '*',
        'Cross-Origin-Resource-Policy': 'cross-origin',
      });
      response.end(gzipped);
    });
    await new Promise((resolve) => gzipServer.listen(0, '127.0.0.1', resolve));
    h.problems = [];
    const context = await h.browser.newContext();
    const page = await context.newPage();
    watchForProblems(page);
    try {
      await page.goto(`${server.url}index.html?gzip=${gzipServer.address().port}`);
      await page.waitForFunction(() => window.__result !== undefined, null, { timeout: 360_000 });
      const result = await page.evaluate(() => window.__result);
      assert.equal(result.failed, undefined, `the scenario failed: ${JSON.stringify(result.failed)}`);

      assert.equal(result.model.architecture, 'llama');
      assert.equal(result.model.name, 'model.gguf');
      assert.ok(
        result.phases.includes('reading') && result.phases.includes('ready'),
        `progress phases: ${result.phases}`,
      );

      // 1. The stream: a role chunk with the prompt facts, a chunk per token, a final one.
      const chunks = result.streamed;
      const [first] = chunks;
      const last = chunks.at(-1);
      assert.equal(first.object, 'chat.completion.chunk');
      assert.equal(first.choices[0].delta.role, 'assistant');
      assert.ok(first.inferno.prompt.prompt_tokens > 5, 'the prompt facts come first');
      const tokenChunks = chunks.filter((c) => c.inferno?.step);
      const content = chunks.map((c) => c.choices[0].delta.content ?? '').join('');
      assert.ok(content.trim().length > 0, 'an answer');
      assert.equal(
        content,
        tokenChunks.map((c) => c.inferno.step.text).join(''),
        "the deltas are the steps' text",
      );
      assert.ok(['stop', 'length'].includes(last.choices[0].finish_reason));
      assert.equal(last.usage.completion_tokens, tokenChunks.length);
      assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + last.usage.completion_tokens);
      assert.ok(last.inferno.stats.decodeTokS > 0);
      const { soloSteps } = last.inferno.stats;
      assert.ok(
        Number.isInteger(soloSteps) && soloSteps >= 0 && soloSteps <= last.usage.completion_tokens,
        `decode steps run on one thread: ${soloSteps}`,
      );
      for (const chunk of tokenChunks) {
        const [entry] = chunk.choices[0].logprobs.content;
        const step = chunk.inferno.step;
        assert.ok(entry.logprob <= 0, 'a log probability');
        assert.equal(entry.top_logprobs.length, 3);
        // Greedy: the drawn token is the best candidate.
        assert.equal(entry.token, entry.top_logprobs[0].token);
        assert.equal(entry.logprob, entry.top_logprobs[0].logprob);
        assert.ok(Math.abs(Math.exp(entry.logprob) - step.trace.chosen_probability) < 1e-6);
        assert.deepEqual(entry.bytes, [...new TextEncoder().encode(step.piece)]);
        assert.equal(step.settings.temperature, 0, 'the settings in force');
        assert.equal(typeof step.trace.entropy_bits, 'number');
      }

      // 2. The same question without streaming: the same text, the prompt reused from the cache.
      const whole = result.whole;
      assert.equal(whole.object, 'chat.completion');
      assert.equal(whole.choices[0].message.content, content);
      assert.equal(whole.choices[0].logprobs, null, 'no logprobs unless asked');
      assert.ok(whole.usage.prompt_tokens_details.cached_tokens > 0, 'the cache was reused');
      assert.equal(whole.inferno.steps.length, whole.usage.completion_tokens);

      // 3. The abort ends the answer within a step of the request.
      const aborted = result.aborted;
      const abortedEnd = aborted.at(-1);
      assert.equal(abortedEnd.choices[0].finish_reason, 'abort');
      assert.ok(
        abortedEnd.usage.completion_tokens <= 5,
        `stopped within a step: ${abortedEnd.usage.completion_tokens} tokens`,
      );

      // 4. The branch keeps step 0, forces the runner-up at step 1 and continues from there.
      const abortedSteps = aborted.filter((c) => c.inferno?.step).map((c) => c.inferno.step);
      const branch = result.branch;
      const steps = branch.inferno.steps;
      assert.equal(steps[0].token, abortedSteps[0].token);
      assert.equal(steps[1].token, result.branchToken);
      assert.equal(steps[1].forced, true);
      assert.ok(steps.length <= 6 && steps.length >= 2);
      assert.ok(
        branch.choices[0].message.content.startsWith(abortedSteps[0].text),
        'the kept text comes first',
      );
      assert.equal(branch.choices[0].message.content, steps.map((s) => s.text).join(''));

      // 4g. uniqueItems: refused when strict, left out (and named) otherwise.
      assert.equal(result.strictError?.kind, 'bad_schema');
      assert.match(result.strictError.message, /uniqueItems/);
      const lenient = result.lenient;
      assert.ok(
        lenient.inferno.warnings.some((w) => w.includes('uniqueItems')),
        JSON.stringify(lenient.inferno.warnings),
      );
      if (lenient.choices[0].finish_reason === 'stop') {
        const value = JSON.parse(lenient.choices[0].message.content);
        assert.ok(Array.isArray(value) && value.every(Number.isInteger), lenient.choices[0].message.content);
      }

      // 4f. The stop string ended decoding at the token that completed it.
      {
        const { texts, stop, stopped, stoppedStream } = result.stopString;
        const whole = texts.join('');
        const at = whole.indexOf(stop);
        let end = 0;
        const completing = texts.findIndex((t) => (end += t.length) >= at + stop.length);
        assert.ok(at >= 0 && completing >= 0, `${JSON.stringify(stop)} in ${JSON.stringify(whole)}`);
        assert.equal(stopped.inferno.steps.length, completing + 1, 'decode steps up to the completing token');
        assert.equal(stopped.usage.completion_tokens, completing + 1);
        assert.equal(stopped.choices[0].finish_reason, 'stop');
        assert.equal(stopped.inferno.finish, 'stop_string');
        assert.equal(stopped.inferno.stop_string, stop);
        assert.equal(stopped.choices[0].text, whole.slice(0, at));
        assert.equal(stoppedStream, whole.slice(0, at), 'streamed, nothing of the stop string went out');
      }

      // 5 and 6.
      // Embeddings: llama.cpp's vectors within the bound, in every pooling.
      const embeddings = result.embeddings;
      assert.equal(embeddings.purpose, 'chat_and_embedding');
      assert.equal(embeddings.pooling, 'last');
      assert.deepEqual(Object.keys(embeddings.poolings).sort(), ['cls', 'last', 'mean']);
      for (const [pooling, got] of Object.entries(embeddings.poolings)) {
        assert.equal(got.object, 'list');
        assert.equal(got.used, pooling);
        assert.deepEqual(got.indices, [0, 1, 2, 3, 4, 5]);
        assert.equal(got.promptTokens, got.goldenTokens, `${pooling}: the same tokens as llama.cpp`);
        for (const c of got.cosines) assert.ok(c >= 0.9999, `${pooling}: cosine ${c} to llama.cpp's vector`);
      }
      assert.ok(Math.abs(embeddings.unit.length - 1) < 1e-5, `unit length: ${embeddings.unit.length}`);
      assert.ok(embeddings.unit.cosine >= 0.9999);
      assert.ok(embeddings.unit.base64Same, 'base64 decodes to the float vector');
      assert.equal(embeddings.cut.values, 32);
      assert.ok(Math.abs(embeddings.cut.length - 1) < 1e-5 && embeddings.cut.cosine >= 0.9999);
      assert.deepEqual(embeddings.errors, {
        empty: 'empty_input: input 1 is empty',
        dimensions: 'bad_dimensions',
        pooling: 'bad_request',
        format: 'bad_request',
        noInput: 'bad_request',
      });
      assert.equal(embeddings.aborted, 'aborted');
      assert.equal(embeddings.afterAbort, 1);
      assert.equal(embeddings.chatModel.purpose, 'chat');
      assert.equal(embeddings.chatModel.generates, true);
      for (const [name, encoder] of Object.entries(embeddings.encoders)) {
        assert.equal(encoder.generates, false, name);
        assert.equal(encoder.purpose, 'embedding', name);
        assert.equal(encoder.chat, 'embedding_only', name);
        assert.deepEqual(Object.keys(encoder.cosines).sort(), ['cls', 'mean'], name);
        for (const [pooling, cosines] of Object.entries(encoder.cosines)) {
          assert.equal(cosines.length, 6);
          for (const c of cosines) assert.ok(c >= 0.9999, `${name} ${pooling}: cosine ${c}`);
        }
      }
      assert.match(embeddings.chatModel.refused, /^no_pooling: this model's file declares no pooling/);
      assert.deepEqual(embeddings.chatModel.mean, [256, 256]);

      // The split model: one model whichever way its shards come.
      const split = result.split;
      assert.ok(split.whole.length > 0);
      assert.equal(split.byUrl.model.shards, 3);
      assert.equal(split.byUrl.model.name, 'qwen3-micro-q8_0-llama-split.gguf');
      assert.equal(split.byUrl.answer, split.whole);
      assert.equal(split.byFiles.model.shards, 3);
      assert.equal(split.byFiles.answer, split.whole);
      assert.deepEqual(split.inspected, { tensors: 25, shards: 3, runs: true });
      assert.equal(split.missing, 'missing_shard: shard 2 of 3 of this split model is missing');
      assert.equal(split.lone.ok, false);
      assert.match(split.lone.reason, /^this file is shard 1 of 3 of a model split with gguf-split/);

      // 4h. Pictures, as llama.cpp's mtmd reads them (the golden's 8 greedy ids).
      const vision = result.vision;
      assert.equal(vision.model.projector, 'gemma3');
      assert.equal(vision.model.output_width, 640);
      assert.ok(vision.phases.includes('projector'), vision.phases.join());
      assert.deepEqual(vision.ids, vision.golden);
      assert.equal(
        vision.usage.prompt_tokens,
        33,
        'BOS, the turn, 16 rows between their markers, the question',
      );
      assert.equal(vision.usage.prompt_tokens_details.image_tokens, 16);
      assert.deepEqual(vision.progress, ['image']);
      assert.equal(vision.encoded, 1);
      assert.equal(vision.followUp.encoded, 1, 'the same picture, by another URL, is not encoded again');
      assert.ok(vision.followUp.usage.prompt_tokens_details.cached_tokens >= 33);
      assert.equal(vision.followUp.usage.prompt_tokens_details.image_tokens, 16);
      assert.deepEqual(vision.errors, {
        notPicture: 'bad_image',
        tooLarge: 'image_too_large',
        missing: 'fetch_failed',
        badPart: 'bad_request',
        noProjector: 'no_mmproj',
        mismatch: 'mmproj_mismatch',
        microVision: null,
      });
      assert.deepEqual(vision.afterErrors, vision.golden, 'the engine goes on after each refusal');
      assert.deepEqual(result.limits, {
        loaded: [40, 80],
        rows: 70,
        reattached: [70, 1120],
        rowsAfter: 300,
        tooMany: 'bad_request',
        notWhole: 'bad_request',
      });

      assert.equal(result.tokens.text, 'Hello world');
      assert.ok(result.tokens.ids.length >= 2);
      assert.deepEqual(result.errors, {
        emptyMessages: 'bad_request',
        badToken: 'bad_token',
        missingFile: 'fetch_failed',
      });
      assert.equal(result.unloaded, 'no_model');

      // 4e. The suite's schemas: every answer that ended is JSON its schema accepts, and at
      // least 20 schemas had both answers end within 200 tokens.
      const ajv = new Ajv({ strict: false, allErrors: true });
      const ended = new Map();
      for (const { name, seed, content, finish } of result.suite) {
        ended.set(name, (ended.get(name) ?? 0) + (finish === 'stop' ? 1 : 0));
        if (finish !== 'stop') continue;
        const { schema } = suiteSchemas().find((s) => s.name === name);
        const value = JSON.parse(content);
        assert.ok(ajv.validate(schema, value), `${name}, seed ${seed}: ${content} ${ajv.errorsText()}`);
      }
      const wholeSchemas = [...ended.values()].filter((n) => n === SUITE_SEEDS.length).length;
      assert.ok(wholeSchemas >= 20, `only ${wholeSchemas} schemas had all their answers end`);

      // 4c. Tool calls.
      assert.equal(result.tools.length, 3);
      for (const { calls, finish, next } of result.tools) {
        assert.equal(finish, 'tool_calls', JSON.stringify(calls));
        assert.equal(calls.length, 1, JSON.stringify(calls));
        for (const call of calls) {
          assert.match(call.id, /^call_/);
          assert.ok(call.pieces > 1, `the arguments streamed in pieces: ${call.pieces}`);
          const args = JSON.parse(call.arguments);
          if (call.name === 'get_weather')
            assert.ok(['Paris', 'Oslo', 'Lima'].includes(args.city), call.arguments);
          else {
            assert.equal(call.name, 'set_alarm');
            assert.ok(Number.isInteger(args.hour) && args.hour >= 0 && args.hour <= 23, call.arguments);
          }
        }
        // The next answer is held to the generic route's JSON: a reply or more calls.
        assert.ok(['stop', 'tool_calls', 'length'].includes(next.finish), next.finish);
        if (next.finish === 'tool_calls') assert.ok(next.message.tool_calls.length > 0);
        if (next.finish === 'stop') assert.equal(typeof next.message.content, 'string');
      }
      // Named: that function, once (parallel calls off).
      assert.equal(result.namedTool.length, 1);
      for (const call of result.namedTool) {
        assert.equal(call.function.name, 'set_alarm');
        assert.ok(Number.isInteger(JSON.parse(call.function.arguments).hour), call.function.arguments);
      }
      assert.deepEqual(result.toolErrors, {
        name: 'bad_tools',
        unknown: 'bad_tools',
        withFormat: 'bad_tools',
      });

      // 4d. Plain completions.
      const { streamedText, whole: completion } = result.completion;
      assert.equal(completion.object, 'text_completion');
      assert.match(completion.id, /^cmpl-/);
      assert.equal(completion.choices[0].text, streamedText);
      assert.ok(streamedText.length > 0);
      assert.equal(completion.usage.completion_tokens, 6);
      assert.equal(completion.choices[0].finish_reason, 'length');
      const legacy = completion.choices[0].logprobs;
      assert.equal(legacy.tokens.length, 6);
      assert.equal(legacy.tokens.join(''), streamedText);
      assert.equal(Object.keys(legacy.top_logprobs[0]).length, 2);
      assert.ok(legacy.token_logprobs.every((lp) => lp <= 0));

      // 4b. Structured output.
      assert.equal(result.structured.length, 5);
      for (const { content, finish, firstAllowed, firstForbidden } of result.structured) {
        assert.equal(finish, 'stop', `ended by the grammar: ${content}`);
        const value = JSON.parse(content);
        assert.deepEqual(Object.keys(value).sort(), ['colour', 'legs', 'name'], content);
        assert.ok(typeof value.name === 'string' && value.name.length <= 20, content);
        assert.ok(Number.isInteger(value.legs) && value.legs >= 0 && value.legs <= 8, content);
        assert.ok(['black', 'white', 'ginger', 'grey'].includes(value.colour), content);
        assert.ok(firstAllowed > 0 && firstAllowed < 1000, `the first step allowed ${firstAllowed} tokens`);
        assert.ok(firstForbidden > 0, 'the trace names what the grammar forbade');
      }
      // Any object: SmolLM2 135M, sampled hot, often keeps adding keys past max_tokens; what
      // it wrote is an object's beginning, and a whole object where it ended.
      const { content: objectText, finish: objectFinish } = result.jsonObject;
      assert.match(objectText, /^\s*\{/);
      if (objectFinish === 'stop') {
        const anObject = JSON.parse(objectText);
        assert.ok(anObject !== null && typeof anObject === 'object' && !Array.isArray(anObject), objectText);
      }
      assert.equal(result.forbiddenBranch, 'grammar_forbids');
      assert.deepEqual(result.grammarErrors, {
        schema: 'bad_schema',
        grammar: 'bad_grammar',
        format: 'bad_request',
      });
      assert.ok(['yes', 'no'].includes(result.yesNo), result.yesNo);

      // 7 and 8.
      assert.deepEqual(result.kept, {
        missing: 'fetch_failed',
        missingModel: 'model.gguf',
        missingChats: true,
        notGguf: 'bad_magic',
        notGgufModel: 'model.gguf',
        notGgufChats: true,
        compressed: 'no_length',
        compressedModel: 'model.gguf',
        truncated: 'tensor_past_end',
        truncatedModel: null,
        truncatedChat: 'no_model',
      });
      assert.equal(typeof result.workerUrl.relative, 'string');
      assert.equal(result.workerUrl.invalid, 'bad_request');
      assert.equal(result.workerUrl.missing.kind, 'worker_failed');
      assert.match(result.workerUrl.missing.message, /\/missing\/worker\.js/);
      assert.equal(result.busy, 'busy');
    } finally {
      await context.close();
    }
    // The deliberately missing model, picture and worker are what the browser may log (Firefox
    // as a page error, the library as a console error naming the worker).
    const problems = h.problems.filter(
      (problem) =>
        !/(worker|page) console error: .*status of 404/.test(problem) &&
        !/missing\/worker\.js/.test(problem) &&
        !/no-such-picture\.png/.test(problem),
    );
    assert.deepEqual(problems, [], 'the page logged errors');
  });
});
