// Docs that enumerate what the code holds are checked against it, so they cannot drift: the
// fuzz targets build.sh lists and runs, the architectures the README and the architecture
// notes name, and the number of wasm builds the docs speak of.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const read = (file) => readFileSync(path.join(ROOT, file), 'utf8');
const sorted = (values) => [...new Set(values)].sort();

test("build.sh's fuzz targets, in its help and its list, are the fuzz crate's", () => {
  const targets = sorted(
    readdirSync(path.join(ROOT, 'fuzz', 'fuzz_targets')).map((f) => f.replace(/\.rs$/, '')),
  );
  const script = read('build.sh');
  const list = script
    .match(/^FUZZ_TARGETS=\(([^)]*)\)/m)?.[1]
    .trim()
    .split(/\s+/);
  assert.deepEqual(sorted(list ?? []), targets, 'FUZZ_TARGETS');
  // The help names them in parentheses after `./build.sh fuzz`, over one or more comment lines.
  const help = script.match(
    /\.\/build\.sh fuzz \[SECONDS\] \[TARGET\]\s+run the fuzz targets \(([^)]*)\)/,
  )?.[1];
  const named = (help ?? '')
    .replace(/#/g, ' ')
    .split(/[\s,]+/)
    .filter(Boolean);
  assert.deepEqual(sorted(named), targets, "build.sh help's fuzz line");
});

test("the README's architecture table and the architecture notes name the engine's architectures", () => {
  const names = sorted([...read('src/model/arch.rs').matchAll(/name: "([a-z0-9-]+)"/g)].map((m) => m[1]));
  assert.ok(names.length >= 10, `${names}`);
  // README "What runs": a row per architecture, `| \`name\` |` (two share the embedding row).
  const whatRuns = read('README.md').split('\n## What runs')[1].split('\n## ')[0];
  const rows = [...whatRuns.matchAll(/^\| (`[a-z0-9-]+`(?:, `[a-z0-9-]+`)*) \|/gm)];
  const inReadme = rows.flatMap((m) => [...m[1].matchAll(/`([a-z0-9-]+)`/g)].map((n) => n[1]));
  assert.deepEqual(sorted(inReadme), names, "README's What runs table");
  const notes =
    read('docs/architecture.md').match(/`arch\.rs`: one row per architecture, ([^:]*?): /)?.[1] ?? '';
  // The names run up to the first item that is words, not a name.
  const listed = notes.split(/,\s*/);
  const end = listed.findIndex((item) => !/^[a-z0-9-]+$/.test(item));
  assert.deepEqual(
    sorted(listed.slice(0, end < 0 ? undefined : end)),
    names,
    'docs/architecture.md, the model row',
  );
});

test('the docs speak of as many wasm builds as build-wasm.mjs has', () => {
  const flavours = execFileSync(process.execPath, [path.join(ROOT, 'scripts', 'build-wasm.mjs'), 'list'], {
    encoding: 'utf8',
  })
    .trim()
    .split('\n');
  const words = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'];
  for (const file of ['README.md', 'docs/architecture.md', 'docs/api.md']) {
    const counts = [
      ...read(file).matchAll(
        /\b(one|two|three|four|five|six|seven|eight|nine|ten) wasm (?:builds|flavours|packages)\b/g,
      ),
    ];
    assert.ok(counts.length > 0 || file === 'docs/api.md', `${file} names no count`);
    for (const [phrase, word] of counts)
      assert.equal(words.indexOf(word) + 1, flavours.length, `${file}: "${phrase}"`);
  }
});
