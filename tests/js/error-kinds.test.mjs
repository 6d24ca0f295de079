// Every error kind the engine and the API can raise is documented, in docs/api.md's table and in
// inferno.d.ts's InfernoErrorKind, and neither documents a kind that nothing raises. The kinds
// are read from the sources: the Rust error types' kind()/name() arms and the web bindings'
// js_error calls, and the JS library's `kind: '...'` fields and WorkerError constructions.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const read = (file) => readFileSync(`${root}${file}`, 'utf8');

/** The bodies of the functions named `name` in Rust source (braces counted). */
function rustFunctionBodies(source, name) {
  const bodies = [];
  for (const match of source.matchAll(new RegExp(`fn ${name}\\(`, 'g'))) {
    const open = source.indexOf('{', match.index);
    let depth = 0;
    for (let i = open; i < source.length; i++) {
      if (source[i] === '{') depth++;
      else if (source[i] === '}' && --depth === 0) {
        bodies.push(source.slice(open, i + 1));
        break;
      }
    }
  }
  return bodies;
}

/** The library's own JS files (www/lib/, the wasm builds' glue aside), relative to the root. */
function libraryFiles() {
  return readdirSync(`${root}www/lib`, { recursive: true })
    .map((file) => file.split('\\').join('/'))
    .filter((file) => file.endsWith('.js') && !file.startsWith('pkg'))
    .map((file) => `www/lib/${file}`);
}

/** The Rust error types whose kinds reach JavaScript (web/mod.rs maps each to a js_error). */
const RUST_KIND_FUNCTIONS = [
  ['src/gguf/error.rs', 'name'],
  ['src/model/loader.rs', 'kind'],
  ['src/model/error.rs', 'kind'],
  ['src/engine/error.rs', 'kind'],
  ['src/gpu/mod.rs', 'kind'],
  ['src/grammar/mod.rs', 'kind'],
];
const RUST_BINDINGS = [
  'src/web/mod.rs',
  'src/web/engine.rs',
  'src/web/inspect.rs',
  'src/web/load.rs',
  'src/web/gpu.rs',
];

function raisedKinds() {
  const kinds = new Map(); // kind -> where it was found
  const add = (kind, where) => kinds.has(kind) || kinds.set(kind, where);
  for (const [file, name] of RUST_KIND_FUNCTIONS) {
    for (const body of rustFunctionBodies(read(file), name))
      for (const [, kind] of body.matchAll(/=>\s*(?:\{\s*)?"([a-z0-9_]+)"/g)) add(kind, file);
  }
  for (const file of RUST_BINDINGS) {
    for (const [, kind] of read(file).matchAll(/js_error\(\s*"[A-Za-z]+",\s*"([a-z0-9_]+)"/g))
      add(kind, file);
  }
  for (const file of libraryFiles()) {
    const source = read(file);
    for (const [, kind] of source.matchAll(/\bkind: '([a-z0-9_]+)'/g)) add(kind, file);
    for (const [, kind] of source.matchAll(/(?:Worker|Download)Error\(\s*'[A-Za-z]+',\s*'([a-z0-9_]+)'/g))
      add(kind, file);
    const errorKind = /function errorKind\([^)]*\) \{[\s\S]*?\n\}/.exec(source)?.[0] ?? '';
    for (const [, kind] of errorKind.matchAll(/return '([a-z0-9_]+)'/g)) add(kind, file);
  }
  return kinds;
}

/** The kinds in docs/api.md's "Error kinds" table (first column, in backticks). */
function readmeKinds() {
  const readme = read('docs/api.md');
  const start = readme.indexOf('\n## Error kinds');
  assert.ok(start >= 0, 'docs/api.md has a "## Error kinds" section');
  const end = readme.indexOf('\n#', start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  return new Set([...section.matchAll(/^\| `([a-z0-9_]+)` \|/gm)].map((m) => m[1]));
}

/** The members of inferno.d.ts's InfernoErrorKind union. */
function typedKinds() {
  const union = /export type InfernoErrorKind =([^;]+);/.exec(read('www/lib/inferno.d.ts'));
  assert.ok(union, 'inferno.d.ts declares InfernoErrorKind');
  return new Set([...union[1].matchAll(/'([a-z0-9_]+)'/g)].map((m) => m[1]));
}

const raised = raisedKinds();

test('the sources raise a plausible set of error kinds (the scan itself works)', () => {
  for (const kind of [
    'bad_magic',
    'too_large',
    'missing_tensor',
    'prompt_too_long',
    'bad_token',
    'busy',
    'no_length',
  ])
    assert.ok(raised.has(kind), `${kind} found in the sources`);
  assert.ok(raised.size > 50, `${raised.size} kinds found`);
});

for (const [name, documented] of [
  ['docs/api.md', readmeKinds()],
  ['inferno.d.ts', typedKinds()],
]) {
  test(`${name} lists every error kind the code raises, and no other`, () => {
    const missing = [...raised.keys()].filter((kind) => !documented.has(kind));
    const extra = [...documented].filter((kind) => !raised.has(kind));
    assert.deepEqual(
      missing.map((kind) => `${kind} (${raised.get(kind)})`),
      [],
      `raised but not in ${name}`,
    );
    assert.deepEqual(extra, [], `in ${name} but raised nowhere`);
  });
}
