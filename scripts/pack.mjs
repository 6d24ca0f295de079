// Packs the embeddable library as an npm package: everything in www/lib/ (the public API,
// inferno.js and its types, the engine worker and what it imports, and every wasm build), with
// docs/api.md as its README and a LICENSE holding both licences.
// Needs the wasm builds (./build.sh build).
//
//   node scripts/pack.mjs [DEST]   -> DEST/inferno-web-<version>.tgz (default target/npm)
//
// Prints the tarball's path. The package has no dependencies; pages import the bare
// 'inferno-web' through a bundler or an import map (tests/page/bundlers.test.mjs).

import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const www = path.join(root, 'www');

const lib = path.join(root, 'www', 'lib');

/** The wasm builds engine-loader.js imports: each must be there before packing. */
function builds() {
  const source = readFileSync(path.join(lib, 'engine-loader.js'), 'utf8');
  return [...source.matchAll(/from '\.\/(pkg[^/']*)\/inferno\.js'/g)].map((match) => match[1]);
}

function crateVersion() {
  const match = /^version\s*=\s*"([^"]+)"/m.exec(readFileSync(path.join(root, 'Cargo.toml'), 'utf8'));
  if (!match) throw new Error('Cargo.toml has no version');
  return match[1];
}

/** The API's documentation (docs/api.md) as the package's README. */
function embeddingReadme() {
  const api = readFileSync(path.join(root, 'docs', 'api.md'), 'utf8');
  if (!api.startsWith('# Embedding Inferno in a page'))
    throw new Error('docs/api.md does not start with its title');
  return `${api.trim()}\n\n## License\n\nMIT OR Apache-2.0 (LICENSE holds both).\n`;
}

/** Both licences the package may be used under, the MIT one first. */
function license() {
  const read = (file) => readFileSync(path.join(root, file), 'utf8').trim();
  return (
    'inferno-web is licensed under either of the MIT license or the Apache License, Version 2.0, at\n' +
    'your option. Both follow.\n\n' +
    `MIT License\n\n${read('LICENSE-MIT')}\n\n${'-'.repeat(80)}\n\n${read('LICENSE-APACHE')}\n`
  );
}

export function pack(dest = path.join(root, 'target', 'npm')) {
  const stage = path.join(dest, 'package');
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(stage, { recursive: true });
  for (const build of builds()) {
    const from = path.join(lib, build);
    if (!existsSync(path.join(from, 'inferno_bg.wasm')))
      throw new Error(`${from} is missing: run ./build.sh build first`);
  }
  cpSync(lib, stage, { recursive: true });
  const version = crateVersion();
  const manifest = {
    name: 'inferno-web',
    version,
    description:
      'GGUF language models in the browser: inspect, tokenize and chat offline, with the reason for every token',
    type: 'module',
    main: './inferno.js',
    types: './inferno.d.ts',
    // One entry point: the worker, its imports and the wasm builds are reached by relative
    // URLs from inferno.js, which bundlers follow without an export of their own.
    exports: {
      '.': { types: './inferno.d.ts', default: './inferno.js' },
      './package.json': './package.json',
    },
    files: [...readdirSync(lib), 'README.md', 'LICENSE'],
    // The worker's entry and the thread helper run code when loaded; nothing else does.
    sideEffects: ['./worker.js', './pkg*/snippets/**/pool_helpers.js'],
    license: 'MIT OR Apache-2.0',
    keywords: ['gguf', 'llm', 'webassembly', 'llama.cpp', 'inference', 'browser'],
  };
  writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  writeFileSync(path.join(stage, 'README.md'), embeddingReadme());
  writeFileSync(path.join(stage, 'LICENSE'), license());
  const output = execFileSync('npm', ['pack', '--json', '--pack-destination', dest], {
    cwd: stage,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [{ filename }] = JSON.parse(output);
  return path.join(dest, filename);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  console.log(pack(process.argv[2] ? path.resolve(process.argv[2]) : undefined));
}
