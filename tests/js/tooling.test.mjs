// The JavaScript side's own checks, run by ./build.sh test: the public API's TypeScript
// declarations against an example that uses all of it, the type check of every JS file under
// www/ (JSDoc, lib/protocol.js, and inferno.js against inferno.d.ts), and one formatting for
// every JS file.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const bin = (name) => fileURLToPath(new URL(`../../node_modules/.bin/${name}`, import.meta.url));

function run(command, args) {
  const result = spawnSync(command, args, { cwd: root, encoding: 'utf8' });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

test('inferno.d.ts types the embedding example (tsc --noEmit)', () => {
  const { status, output } = run(bin('tsc'), ['-p', 'tests/types/tsconfig.json']);
  assert.equal(status, 0, output);
});

test('the front end type-checks: every JS file under www/, the worker protocol included (tsc -p www)', () => {
  for (const config of ['www/tsconfig.json', 'www/tsconfig.sw.json']) {
    const { status, output } = run(bin('tsc'), ['-p', config]);
    assert.equal(status, 0, `tsc -p ${config}\n${output}`);
  }
});

test('every JS file is formatted by prettier (npx prettier --write . fixes it)', () => {
  const { status, output } = run(bin('prettier'), ['--check', '.']);
  assert.equal(status, 0, output);
});
