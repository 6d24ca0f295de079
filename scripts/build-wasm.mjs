// The wasm build matrix, in one table, and the one way to run cargo for a wasm flavour.
//
//   node scripts/build-wasm.mjs build [FLAVOUR...] [--root DIR] [--out DIR] [--test-hooks]
//       builds the packages (default: every flavour) into www/lib/pkg* (or DIR/pkg*), then
//       writes the service worker's manifest (scripts/sw-manifest.mjs); --test-hooks builds the
//       page tests' module instead (examples/test_hooks.rs: the engine plus a deliberate trap)
//       into target/test-hooks/pkg* unless --out says otherwise: never into www/lib
//   node scripts/build-wasm.mjs test FLAVOUR [CARGO-ARGS...]
//       the crate's wasm tests (tests/web/) for that flavour, in the
//       browser its environment names (build.sh wasm-test; `--no-run` only builds them)
//   node scripts/build-wasm.mjs cargo FLAVOUR SUBCOMMAND [ARGS...]
//       runs `cargo SUBCOMMAND` for that flavour's target and flags
//   node scripts/build-wasm.mjs list
//       prints the flavours
//
// Installs nothing: the toolchain is scripts/setup.sh's job (./build.sh setup). A Node script
// rather than bash or a `cargo xtask`: the table is data that the build, the wasm tests, the
// A/B builds and the page's own loader logic are checked against, Node is already required
// (npm, the page tests), and an xtask would be one more crate to compile before every build.

import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.join(HERE, '..');
/** The per-user build cache every clone shares (build.sh sets INFERNO_CACHE to the same). */
export const CACHE =
  process.env.INFERNO_CACHE ??
  path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'inferno');
const GIB = 1024 ** 3;

/**
 * What is built for tests changes no feature of the library: the wasm tests and the page tests'
 * module (examples/test_hooks.rs) link the release library as built, in the flavour's own target
 * folder. A feature would make a second library unit that shares its cdylib's fingerprint with
 * the first (the cdylib's file name has no hash), so cargo would rebuild the engine at every
 * switch; and a folder of its own per test build compiled std and every dependency again.
 */
const TEST_HOOKS_EXAMPLE = 'test_hooks';

// The std crates built from source. `test` is listed even for builds that are not tests: cargo
// adds it to a test's std on its own, which resolves std's units anew, and the engine built
// against them then counts as changed (each `cargo test` after a `cargo build` of the same
// flavour rebuilt the engine, and the next build again: about 2:30 a run of the Memory64 tests).
// Listing it always gives both one std; it is a library nothing links unless a test harness does.
const BUILD_STD = '-Zbuild-std=std,panic_abort,test';

/**
 * Every build the page can pick (www/lib/engine-loader.js chooses at run time).
 * - `memory`: wasm32, or wasm64 (Memory64) for files too large for a 4 GiB memory. Rust ships no
 *   wasm64 std, so those always rebuild std. V8 and SpiderMonkey cap a 32-bit memory at 4 GiB
 *   and a 64-bit one at 16 GiB.
 * - `relaxed`: relaxed SIMD (Chrome 114+, Firefox 145+; not Safari yet) on top of SIMD128.
 * - `threads`: shared memory and atomics, helper threads in Web Workers, used where the page is
 *   cross-origin isolated; std is rebuilt with atomics.
 * - `gpu`: the WebGPU backend (wgpu). wgpu 30 takes wasm64 for a native target (its WebGPU
 *   backend is wasm32-only), so the 64-bit builds have none.
 */
export const FLAVOURS = [
  { name: 'simd', memory: 32, relaxed: false, threads: false, gpu: true, out: 'pkg' },
  { name: 'relaxed', memory: 32, relaxed: true, threads: false, gpu: true, out: 'pkg-relaxed' },
  { name: 'threads', memory: 32, relaxed: false, threads: true, gpu: true, out: 'pkg-threads' },
  {
    name: 'relaxed-threads',
    memory: 32,
    relaxed: true,
    threads: true,
    gpu: true,
    out: 'pkg-relaxed-threads',
  },
  { name: 'memory64', memory: 64, relaxed: true, threads: false, gpu: false, out: 'pkg-memory64' },
  {
    name: 'memory64-threads',
    memory: 64,
    relaxed: true,
    threads: true,
    gpu: false,
    out: 'pkg-memory64-threads',
  },
];

export function flavour(name) {
  const found = FLAVOURS.find((f) => f.name === name);
  if (!found) throw new Error(`unknown wasm flavour ${name} (${FLAVOURS.map((f) => f.name).join(', ')})`);
  return found;
}

/** The target triple, rustc flags and cargo arguments of a flavour. */
export function cargoPlan(f) {
  const target = f.memory === 64 ? 'wasm64-unknown-unknown' : 'wasm32-unknown-unknown';
  const maxMemory = f.memory === 64 ? 16 * GIB : 4 * GIB;
  const features = ['+simd128'];
  if (f.relaxed) features.push('+relaxed-simd');
  let linkArgs = f.memory === 64 ? [`--max-memory=${maxMemory}`] : [];
  if (f.threads) {
    features.push('+atomics', '+bulk-memory', '+mutable-globals');
    linkArgs = [
      '--shared-memory',
      `--max-memory=${maxMemory}`,
      '--import-memory',
      ...['__wasm_init_tls', '__tls_size', '__tls_align', '__tls_base'].map((name) => `--export=${name}`),
    ];
  }
  const rustflags = [`-C target-feature=${features.join(',')}`, ...linkArgs.map((a) => `-C link-arg=${a}`)];
  // The threaded builds keep the default features (the thread pool); the others leave it out.
  const cargoArgs = [
    ...(f.threads ? [] : ['--no-default-features']),
    ...(f.gpu ? ['--features', 'gpu'] : []),
  ];
  // Threads need std with atomics, and wasm64 has no prebuilt std at all.
  const buildsStd = f.threads || f.memory === 64;
  return { target, rustflags: rustflags.join(' '), cargoArgs, buildsStd };
}

function succeeds(command, args) {
  const result = spawnSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  return result.status === 0 ? result.stdout : null;
}

/**
 * Which toolchain builds for wasm here (scripts/setup.sh installs one): rustup's wasm32 std, or
 * Debian's rustc-web with std built from source (../shared/TOOLCHAIN.md).
 * INFERNO_WASM_TOOLCHAIN=buildstd forces the Debian route.
 */
function toolchain() {
  const forced = process.env.INFERNO_WASM_TOOLCHAIN;
  const rustupSrc = () =>
    (succeeds('rustup', ['component', 'list', '--installed']) ?? '').includes('rust-src');
  if (forced === 'buildstd') return { mode: 'buildstd' };
  const targets = succeeds('rustup', ['target', 'list', '--installed']) ?? '';
  if (forced === 'rustup' || targets.split('\n').includes('wasm32-unknown-unknown'))
    return { mode: 'rustup', stdSource: rustupSrc() };
  if (succeeds('dpkg', ['-s', 'rustc-web', 'rust-web-src', 'lld-19']) !== null) return { mode: 'buildstd' };
  throw new Error('no Rust toolchain for wasm32 here: run ./build.sh setup first');
}

/** Where cargo builds for `root`: the shared cache for this checkout, `root`/target for another. */
function targetRoot(root) {
  return path.resolve(root) === path.resolve(REPO) ? path.join(CACHE, 'target') : path.join(root, 'target');
}

/** The target folder of flavour `f` in `root`. */
function targetDir(f, root) {
  return path.join(targetRoot(root), `wasm-${f.name}`);
}

/**
 * Removes the wasm target folders in `root`'s target root that no flavour owns (those of builds
 * since retired, as the per-flavour folders for tests were: about 0.5 GB each).
 */
function pruneRetiredFolders(root) {
  const dir = targetRoot(root);
  if (!existsSync(dir)) return;
  const owned = new Set(FLAVOURS.map((f) => path.basename(targetDir(f, root))));
  for (const entry of readdirSync(dir, { withFileTypes: true }))
    if (entry.isDirectory() && entry.name.startsWith('wasm-') && !owned.has(entry.name))
      rmSync(path.join(dir, entry.name), { recursive: true, force: true });
}

/**
 * Runs cargo SUBCOMMAND ARGS for flavour `f`, in `root`, with its own target folder: in the
 * shared cache for this checkout (another root, as the A/B builds' scratch tree, keeps its own).
 */
export function runCargo(f, subcommand, args, { root = REPO } = {}) {
  const plan = cargoPlan(f);
  const chain = toolchain();
  const envName = plan.target.toUpperCase().replaceAll('-', '_');
  const env = {
    ...process.env,
    // Its own folder per flavour: host build scripts may come from a different rustc than
    // native builds, and the std builds differ.
    CARGO_TARGET_DIR: targetDir(f, root),
    // A fresh clone's sources are newer than any build: freshness by checksum, not by time
    // (unstable, hence RUSTC_BOOTSTRAP), so clones sharing the cache rebuild only what differs.
    RUSTC_BOOTSTRAP: '1',
    CARGO_UNSTABLE_CHECKSUM_FRESHNESS: 'true',
    // An input of the build (src/web/mod.rs says why): a build from another checkout is redone.
    INFERNO_CHECKOUT: root,
    [`CARGO_TARGET_${envName}_RUSTFLAGS`]: plan.rustflags,
    [`CARGO_TARGET_${envName}_RUNNER`]: path.join(HERE, 'wasm-test-runner.sh'),
  };
  let cargo = 'cargo';
  const cargoArgs = [subcommand, '--target', plan.target];
  if (chain.mode === 'rustup' && (!plan.buildsStd || chain.stdSource)) {
    if (plan.buildsStd) cargoArgs.push(BUILD_STD);
  } else {
    // Debian's toolchain: its std source is a package, so this route always has one.
    if (succeeds('dpkg', ['-s', 'rustc-web', 'rust-web-src', 'lld-19']) === null)
      throw new Error(`the ${f.name} build needs std's source: run ./build.sh setup first`);
    cargo = '/usr/bin/cargo';
    Object.assign(env, {
      RUSTC: '/usr/bin/rustc',
      RUSTDOC: '/usr/bin/rustdoc',
      RUSTC_BOOTSTRAP: '1',
      [`CARGO_TARGET_${envName}_LINKER`]: '/usr/lib/llvm-19/bin/wasm-ld',
    });
    cargoArgs.push(BUILD_STD);
  }
  cargoArgs.push(...plan.cargoArgs, ...args);
  const result = spawnSync(cargo, cargoArgs, { cwd: root, env, stdio: 'inherit' });
  return result.status ?? 1;
}

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: 'inherit', ...options });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed`);
}

/** Files named `name` anywhere under `dir`. */
function findAll(dir, name) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name === name)
    .map((entry) => path.join(entry.parentPath ?? entry.path, entry.name));
}

/** Builds flavour `f` of the crate in `root` into `outDir`/`f.out`. */
export function buildFlavour(f, { root, outDir, testHooks = false }) {
  const what = testHooks ? 'wasm package with test hooks' : 'wasm package';
  console.error(`\x1b[1;34m==>\x1b[0m building the ${f.name} ${what} (release)`);
  const target = testHooks ? ['--example', TEST_HOOKS_EXAMPLE] : ['--lib'];
  const built = runCargo(f, 'build', ['--release', ...target], { root });
  if (built !== 0) throw new Error(`cargo build of ${f.name} failed`);
  const release = path.join(targetDir(f, root), cargoPlan(f).target, 'release');
  const wasm = testHooks
    ? path.join(release, 'examples', `${TEST_HOOKS_EXAMPLE}.wasm`)
    : path.join(release, 'inferno.wasm');
  run(path.join(HERE, 'fold-load-offsets.sh'), [wasm]);
  const out = path.join(outDir, f.out);
  rmSync(out, { recursive: true, force: true });
  // --out-name: the example's module answers to the engine's name (inferno.js, inferno_bg.wasm).
  run('wasm-bindgen', [
    '--target',
    'web',
    '--no-typescript',
    '--out-name',
    'inferno',
    '--out-dir',
    out,
    wasm,
  ]);
  if (f.threads) {
    // The pool's helper script (src/web/pool_helpers.js) imports the glue four folders up.
    const helpers = findAll(path.join(out, 'snippets'), 'pool_helpers.js');
    if (helpers.length !== 1 || !existsSync(path.join(path.dirname(helpers[0]), '../../../../inferno.js')))
      throw new Error(`the pool helper script is missing from ${out}, or is not four folders below its glue`);
  }
}

function main(argv) {
  const [command, ...rest] = argv;
  if (command === 'list') {
    for (const f of FLAVOURS) console.log(f.name);
    return 0;
  }
  if (command === 'cargo') {
    const [name, subcommand, ...args] = rest;
    if (!name || !subcommand) throw new Error('usage: build-wasm.mjs cargo FLAVOUR SUBCOMMAND [ARGS...]');
    return runCargo(flavour(name), subcommand, args);
  }
  if (command === 'test') {
    const [name, ...extra] = rest;
    if (!name) throw new Error('usage: build-wasm.mjs test FLAVOUR [CARGO-ARGS...]');
    // Only the suites that run in a browser: the others are native-only.
    const args = ['--release', '--test', 'web', ...extra];
    return runCargo(flavour(name), 'test', args);
  }
  if (command === 'build') {
    let root = path.join(HERE, '..');
    let outDir = null;
    let testHooks = false;
    const names = [];
    for (let i = 0; i < rest.length; i++) {
      if (rest[i] === '--root') root = path.resolve(rest[++i]);
      else if (rest[i] === '--out') outDir = path.resolve(rest[++i]);
      else if (rest[i] === '--test-hooks') testHooks = true;
      else names.push(rest[i]);
    }
    const flavours = names.length ? names.map(flavour) : FLAVOURS;
    pruneRetiredFolders(root);
    const www = path.join(root, 'www');
    if (testHooks) outDir ??= path.join(root, 'target', 'test-hooks');
    for (const f of flavours) buildFlavour(f, { root, outDir: outDir ?? path.join(www, 'lib'), testHooks });
    // The service worker's list of what to keep offline, for the page in this tree.
    if (!outDir) run('node', [path.join(HERE, 'sw-manifest.mjs'), www]);
    return 0;
  }
  throw new Error(
    'usage: build-wasm.mjs build [FLAVOUR...] | test FLAVOUR | cargo FLAVOUR SUBCOMMAND [ARGS...] | list',
  );
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (error) {
    console.error(`build-wasm: ${error.message}`);
    process.exitCode = 1;
  }
}
