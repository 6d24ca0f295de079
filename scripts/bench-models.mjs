// The models the browser benchmarks run (scripts/bench.mjs, scripts/ab.mjs): the default
// files, and links that put any file where the static server may send it.

import { existsSync, lstatSync, mkdirSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = fileURLToPath(new URL('../', import.meta.url));
const www = path.join(repoRoot, 'www');
const cacheModels = path.join(repoRoot, '.cache', 'models');
const sharedDir = process.env.INFERNO_SHARED ?? path.join(repoRoot, '..', 'shared');

const QWEN3_FILE = 'qwen3-0.6b-q8_0.gguf';

const log = (text) => process.stderr.write(`${text}\n`);

/** The default models that exist (generating the Qwen3-shaped one when possible); skips say why. */
export function defaultModels() {
  const models = [];
  for (const file of ['SmolLM2-135M-Instruct.Q4_1.gguf', 'gemma3-270m-q4_k_m.gguf']) {
    const full = path.join(cacheModels, file);
    if (existsSync(full)) models.push(full);
    else log(`skipping ${file}: not in .cache/models (./build.sh models fetches it)`);
  }
  const qwen = qwen3Model();
  if (qwen) models.push(qwen);
  return models;
}

function qwen3Model() {
  for (const candidate of [path.join('/tmp', QWEN3_FILE), path.join(cacheModels, QWEN3_FILE)]) {
    if (existsSync(candidate)) return candidate;
  }
  const generator = path.join(sharedDir, 'models', 'make_qwen3_0_6b.py');
  if (!existsSync(generator)) {
    log(`skipping ${QWEN3_FILE}: not in /tmp or .cache/models, and no generator at ${generator}`);
    return null;
  }
  log(`generating ${QWEN3_FILE} into .cache/models with ${generator} (about 30 s)`);
  mkdirSync(cacheModels, { recursive: true });
  const target = path.join(cacheModels, QWEN3_FILE);
  const partial = `${target}.partial`;
  const result = spawnSync('python3', [generator, partial], { stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.status !== 0) {
    rmSync(partial, { force: true });
    log(`skipping ${QWEN3_FILE}: the generator failed (it needs: pip install gguf numpy)`);
    return null;
  }
  renameSync(partial, target);
  return target;
}

/** The language model of a vision benchmark: Gemma 3 270M, as wide (640) as the micro projectors
 *  of scripts/make_micro_mmproj.py. */
export function visionModel() {
  const full = path.join(cacheModels, 'gemma3-270m-q4_k_m.gguf');
  if (!existsSync(full))
    throw new Error('gemma3-270m-q4_k_m.gguf is not in .cache/models (./build.sh models fetches it)');
  return full;
}

/** Makes each file reachable under /models/bench/ (or /models/<folder>/; git-ignored) with a
 *  symlink; returns URL paths. */
export function linkModels(models, folder = 'bench') {
  const dir = path.join(www, 'models', folder);
  mkdirSync(dir, { recursive: true });
  const used = new Set();
  return models.map((model, index) => {
    let name = path.basename(model);
    if (used.has(name)) name = `${index}-${name}`;
    used.add(name);
    const link = path.join(dir, name);
    if (existsSync(link) || isLink(link)) rmSync(link);
    symlinkSync(model, link);
    return `models/${folder}/${encodeURIComponent(name)}`;
  });
}

function isLink(file) {
  try {
    return lstatSync(file).isSymbolicLink();
  } catch {
    return false;
  }
}
