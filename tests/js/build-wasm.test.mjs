// scripts/build-wasm.mjs: the wasm build matrix is one table, and it agrees with the page's
// loader (www/lib/engine-loader.js imports one glue file per build) and with what each build
// must be compiled with.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { FLAVOURS, cargoPlan, flavour } from '../../scripts/build-wasm.mjs';

const loader = readFileSync(new URL('../../www/lib/engine-loader.js', import.meta.url), 'utf8');

test('the loader imports exactly the builds the table makes', () => {
  const imported = [...loader.matchAll(/from '\.\/(pkg[^/]*)\/inferno\.js'/g)].map((m) => m[1]);
  assert.deepEqual(imported.sort(), FLAVOURS.map((f) => f.out).sort());
});

test('each flavour compiles with its target, features and memory limits', () => {
  const simd = cargoPlan(flavour('simd'));
  assert.equal(simd.target, 'wasm32-unknown-unknown');
  assert.equal(simd.rustflags, '-C target-feature=+simd128');
  assert.deepEqual(simd.cargoArgs, ['--no-default-features', '--features', 'gpu']);
  assert.equal(simd.buildsStd, false);

  const relaxedThreads = cargoPlan(flavour('relaxed-threads'));
  assert.match(
    relaxedThreads.rustflags,
    /target-feature=\+simd128,\+relaxed-simd,\+atomics,\+bulk-memory,\+mutable-globals/,
  );
  for (const arg of ['--shared-memory', '--import-memory', '--max-memory=4294967296', '--export=__tls_base'])
    assert.ok(relaxedThreads.rustflags.includes(`-C link-arg=${arg}`), arg);
  assert.deepEqual(relaxedThreads.cargoArgs, ['--features', 'gpu']); // the thread pool is a default feature
  assert.equal(relaxedThreads.buildsStd, true);

  const memory64 = cargoPlan(flavour('memory64'));
  assert.equal(memory64.target, 'wasm64-unknown-unknown');
  assert.match(memory64.rustflags, /\+relaxed-simd/);
  assert.ok(memory64.rustflags.includes('-C link-arg=--max-memory=17179869184'));
  assert.deepEqual(memory64.cargoArgs, ['--no-default-features']); // wgpu has no wasm64 WebGPU backend
  assert.equal(memory64.buildsStd, true);

  const memory64Threads = cargoPlan(flavour('memory64-threads'));
  assert.ok(memory64Threads.rustflags.includes('-C link-arg=--max-memory=17179869184'));
  assert.ok(memory64Threads.rustflags.includes('-C link-arg=--shared-memory'));
});

test('an unknown flavour is refused by name', () => {
  assert.throws(() => flavour('simd256'), /unknown wasm flavour simd256/);
});

test('the builds in www/lib have no test hooks (they are built into target/test-hooks)', (t) => {
  const glue = FLAVOURS.map((f) => new URL(`../../www/lib/${f.out}/inferno.js`, import.meta.url));
  const built = glue.filter((file) => existsSync(file));
  if (built.length === 0) return t.skip('no wasm builds yet (./build.sh build)');
  for (const file of built) assert.doesNotMatch(readFileSync(file, 'utf8'), /deliberate_trap/, file.pathname);
});
