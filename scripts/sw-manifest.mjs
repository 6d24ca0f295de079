// The service worker's manifest, www/builds.json (read by www/sw.js): what the app keeps for
// offline use. build.sh writes it after building the wasm packages.
//
//   node scripts/sw-manifest.mjs [WWW]   -> WWW/builds.json (default www)
//
// - `files`: every file of the wasm builds (lib/pkg*/). The page picks one build at run time,
//   and the first visit's worker is not yet under the service worker's control, so all of them
//   are kept up front. Snippet paths carry hashes, which is why they are listed, not named.
// - `shell`: the app's page, "./", and every HTML, JS and CSS file it may load: the page's own
//   (index.html, app/) and the library's (lib/), not the benchmark pages (bench/) nor sw.js.
// - `version`: a hash of every page file and build file. It names the cache the service worker
//   fills, so an offline page never mixes the files of two builds.

import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Folders under www/ that hold no page files: fetched models, vendored code, A/B builds. */
const NOT_PAGE = new Set(['models', 'vendor', 'ab']);
const isBuild = (relative) => /^lib\/pkg[^/]*\//.test(relative);

/** Every file under `dir`, as sorted '/'-separated paths relative to `root`. */
function walk(root, dir = root) {
  const found = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    const relative = path.relative(root, full).split(path.sep).join('/');
    if (entry.isDirectory()) {
      if (dir === root && NOT_PAGE.has(entry.name)) continue;
      found.push(...walk(root, full));
    } else if (entry.isFile()) found.push(relative);
  }
  return found.sort();
}

/** The manifest for the front end in `www` (a folder laid out as this repository's www/). */
export function manifest(www) {
  const all = walk(www);
  const files = all.filter(isBuild);
  const page = all.filter((file) => !isBuild(file) && /\.(html|js|css)$/.test(file));
  const hash = createHash('sha256');
  for (const file of [...page, ...files]) hash.update(file).update(readFileSync(path.join(www, file)));
  const version = hash.digest('hex').slice(0, 16);
  const shell = [
    './',
    ...page.filter((file) => !/^bench\//.test(file) && file !== 'sw.js').map((f) => `./${f}`),
  ];
  return { version, shell, files: files.map((file) => `./${file}`) };
}

/** Writes `www`/builds.json; returns its path. */
export function writeManifest(www) {
  const target = path.join(www, 'builds.json');
  writeFileSync(target, `${JSON.stringify(manifest(www), null, 1)}\n`);
  return target;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  writeManifest(path.resolve(process.argv[2] ?? fileURLToPath(new URL('../www/', import.meta.url))));
}
