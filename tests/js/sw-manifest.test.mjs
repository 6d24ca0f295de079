// scripts/sw-manifest.mjs: the service worker's list of what the app keeps offline.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { manifest, writeManifest } from '../../scripts/sw-manifest.mjs';

/** A www/ folder in the repository's layout, with a file of each kind. */
function fakeWww() {
  const www = mkdtempSync(path.join(os.tmpdir(), 'inferno-sw-manifest-'));
  const files = {
    'index.html': '<!doctype html>',
    'sw.js': '// service worker',
    'app/app.js': '// app',
    'app/style.css': 'body {}',
    'lib/inferno.js': '// library',
    'lib/inferno.d.ts': '// types',
    'lib/pkg/inferno.js': '// glue',
    'lib/pkg/inferno_bg.wasm': 'wasm',
    'lib/pkg-threads/snippets/inferno-0123/src/web/pool_helpers.js': '// helper',
    'bench/bench.html': '<!doctype html>',
    'bench/bench.js': '// bench',
    'models/demo.gguf': 'GGUF',
    'vendor/wllama/index.js': '// vendored',
    'ab/a/pkg/inferno.js': '// another build',
  };
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(www, file)), { recursive: true });
    writeFileSync(path.join(www, file), text);
  }
  return www;
}

test('lists every build file and the app shell, not the bench pages, models or sw.js', () => {
  const www = fakeWww();
  try {
    const { version, shell, files } = manifest(www);
    assert.match(version, /^[0-9a-f]{16}$/);
    assert.deepEqual(files, [
      './lib/pkg-threads/snippets/inferno-0123/src/web/pool_helpers.js',
      './lib/pkg/inferno.js',
      './lib/pkg/inferno_bg.wasm',
    ]);
    assert.deepEqual(shell, ['./', './app/app.js', './app/style.css', './index.html', './lib/inferno.js']);
  } finally {
    rmSync(www, { recursive: true, force: true });
  }
});

test('the version changes with any page or build file, and only with them', () => {
  const www = fakeWww();
  try {
    const first = manifest(www).version;
    writeFileSync(path.join(www, 'models', 'demo.gguf'), 'another model');
    assert.equal(manifest(www).version, first, 'a model is not part of the build');
    writeFileSync(path.join(www, 'lib', 'pkg', 'inferno_bg.wasm'), 'rebuilt');
    const second = manifest(www).version;
    assert.notEqual(second, first);
    writeFileSync(path.join(www, 'app', 'app.js'), '// changed');
    assert.notEqual(manifest(www).version, second);
  } finally {
    rmSync(www, { recursive: true, force: true });
  }
});

test('writes builds.json beside the page', () => {
  const www = fakeWww();
  try {
    const written = JSON.parse(readFileSync(writeManifest(www), 'utf8'));
    assert.deepEqual(written, manifest(www));
  } finally {
    rmSync(www, { recursive: true, force: true });
  }
});
