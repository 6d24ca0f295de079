#!/usr/bin/env bash
# Inferno's one entry point: installs what is missing, builds, serves and tests.
#
#   ./build.sh serve [--port N]   set up, build the wasm package, fetch the demo model, serve www/
#   ./build.sh test               set up and run every test (native, wasm in Chromium, page)
#   ./build.sh setup              only install the toolchain pieces
#   ./build.sh build [FLAVOUR...] only build the wasm packages (www/lib/pkg, www/lib/pkg-*; default all
#                                 five: simd relaxed threads relaxed-threads memory64)
#   ./build.sh models             only fetch the real test models into .cache/models (and
#                                 write the 4.6 GiB one the 64-bit-memory test loads)
#   ./build.sh wasm-test [FLAVOUR] [BROWSER]  only the crate's wasm tests, for one build (simd,
#                                 relaxed or memory64; default simd) in headless chromium
#                                 (default), firefox, or webkit (WebKitGTK under Xvfb)
#   ./build.sh fuzz [SECONDS] [TARGET]  run the fuzz targets (parse_gguf, render_template,
#                                 tokenize, generate, grammar), each for SECONDS (default 600)
#   ./build.sh bench [MODEL...]   Inferno vs llama.cpp's wasm build (wllama) in headless Chromium
#   ./build.sh ab REV [MODEL...]  this tree against revision REV, side by side in one page:
#                                 median per-pair speed ratios (scripts/ab.mjs for the options)
#   ./build.sh profile MODEL [--phase decode|prefill] [--threads N]  where a run's time goes,
#                                 by wasm function (Linux perf over headless Chromium)
#
# Every install step checks first, so a second run with everything present takes seconds.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD

log() { printf '\033[1;34m==>\033[0m %s\n' "$*" >&2; }
die() {
  printf 'build.sh: %s\n' "$*" >&2
  exit 1
}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

APT_UPDATED=
apt_install() { # package...
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  if [ -z "$APT_UPDATED" ]; then
    as_root apt-get update -qq
    APT_UPDATED=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
}

# --- Rust for wasm32 -------------------------------------------------------------------------
# rustup's wasm32 std when it can be had; otherwise Debian's rustc-web, with std built from
# source (-Zbuild-std). See ../shared/TOOLCHAIN.md.
# INFERNO_WASM_TOOLCHAIN=buildstd forces the Debian route (to test it where rustup works).
WASM_MODE=${INFERNO_WASM_TOOLCHAIN:-}
choose_wasm_toolchain() {
  [ -n "$WASM_MODE" ] && return 0
  if command -v rustup >/dev/null && rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    WASM_MODE=rustup
  elif dpkg -s rustc-web rust-web-src lld-19 >/dev/null 2>&1; then
    WASM_MODE=buildstd
  elif command -v rustup >/dev/null && timeout 60 rustup target add wasm32-unknown-unknown </dev/null; then
    WASM_MODE=rustup
  else
    log "rustup cannot provide the wasm32 std here: using Debian's rustc-web with -Zbuild-std"
    apt_install rustc-web cargo-web rust-web-src lld-19
    WASM_MODE=buildstd
  fi
}

# The threaded flavours rebuild std with atomics, from rustup's rust-src where it can be had.
rustup_std_source() {
  rustup component list --installed 2>/dev/null | grep -qx rust-src ||
    timeout 60 rustup component add rust-src </dev/null >/dev/null 2>&1
}

# cargo for a wasm target in one of six flavours, each with a target dir of its own (its
# host build scripts may come from a different rustc than native builds, and the std builds
# differ):
#   simd             SIMD128, one thread: runs in every browser we support
#   relaxed          + relaxed SIMD (Chrome 114+, Firefox 145+; not Safari yet)
#   threads          SIMD128 + shared memory and atomics, helper threads in Web Workers: used
#                    where the page is cross-origin isolated. std is rebuilt with atomics.
#   relaxed-threads  both
#   memory64         wasm64 (64-bit memory, Chrome 133+, Firefox 145+) with relaxed SIMD, one
#                    thread: only for files too large for a 4 GiB wasm32 memory. Rust ships no
#                    wasm64 std, so it is always built from source.
#   memory64-threads the same with shared memory and helper threads
wasm_cargo() { # flavour cargo-subcommand args...
  choose_wasm_toolchain
  local flavour=$1 sub=$2
  shift 2
  # The wasm32 flavours carry the GPU backend (WebGPU through wgpu); the page picks CPU or GPU.
  # wgpu 30 takes wasm64 for a native target (its WebGPU backend is wasm32-only: it would
  # compile wgpu-core and naga in and then find no backend), so the 64-bit builds have none.
  local gpu=(--features gpu)
  case "$flavour" in memory64*) gpu=() ;; esac
  local features=+simd128 link_args=() cargo_args=(--no-default-features "${gpu[@]}") target=wasm32-unknown-unknown
  # V8 and SpiderMonkey cap a 32-bit memory at 4 GiB and a 64-bit one at 16 GiB.
  local max_memory=4294967296
  case "$flavour" in
    simd | relaxed | threads | relaxed-threads) ;;
    memory64 | memory64-threads)
      target=wasm64-unknown-unknown
      features+=,+relaxed-simd
      max_memory=17179869184
      link_args+=(--max-memory=$max_memory)
      ;;
    *) die "unknown wasm flavour $flavour" ;;
  esac
  case "$flavour" in relaxed*) features+=,+relaxed-simd ;; esac
  case "$flavour" in
    *threads)
      cargo_args=("${gpu[@]}")
      features+=,+atomics,+bulk-memory,+mutable-globals
      link_args=(--shared-memory --max-memory=$max_memory --import-memory --export=__wasm_init_tls
        --export=__tls_size --export=__tls_align --export=__tls_base)
      ;;
  esac
  local arg
  for arg in "${link_args[@]}"; do features+=" -C link-arg=$arg"; done
  local target_env
  target_env=$(echo "$target" | tr 'a-z-' 'A-Z_')
  # local -x: exported to cargo only, so a later native cargo keeps its own target dir.
  local -x CARGO_TARGET_DIR="$ROOT/target/wasm-$flavour"
  local -x "CARGO_TARGET_${target_env}_RUSTFLAGS=-C target-feature=$features"
  local -x "CARGO_TARGET_${target_env}_RUNNER=$ROOT/scripts/wasm-test-runner.sh"
  local needs_std_build=
  case "$flavour" in *threads | memory64*) needs_std_build=1 ;; esac
  if [ "$WASM_MODE" = rustup ] && [ -z "$needs_std_build" ]; then
    cargo "$sub" --target "$target" "${cargo_args[@]}" "$@"
  elif [ "$WASM_MODE" = rustup ] && rustup_std_source; then
    RUSTC_BOOTSTRAP=1 cargo "$sub" --target "$target" -Zbuild-std=std,panic_abort "${cargo_args[@]}" "$@"
  else
    # Debian's toolchain: its std source is a package, so this route always has one.
    apt_install rustc-web cargo-web rust-web-src lld-19
    local -x "CARGO_TARGET_${target_env}_LINKER=/usr/lib/llvm-19/bin/wasm-ld"
    RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1 \
      /usr/bin/cargo "$sub" --target "$target" -Zbuild-std=std,panic_abort "${cargo_args[@]}" "$@"
  fi
}

# --- wasm-bindgen-cli at exactly the version in Cargo.lock ---------------------------------
wasm_bindgen_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock
}

setup_wasm_bindgen() {
  [ -f Cargo.lock ] || cargo generate-lockfile
  local want have
  want=$(wasm_bindgen_version)
  [ -n "$want" ] || die "no wasm-bindgen in Cargo.lock"
  have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}') || true
  if [ "$have" != "$want" ]; then
    log "installing wasm-bindgen-cli $want (a few minutes, once)"
    # --locked first; its lock file can name a since-yanked crate, so fall back to a fresh resolve.
    cargo install --quiet wasm-bindgen-cli --version "$want" --locked </dev/null ||
      cargo install --quiet --force wasm-bindgen-cli --version "$want" </dev/null
  fi
}

setup_browser() {
  # WebKitGTK (Safari's engine) has no headless mode: its driver runs under xvfb-run.
  apt_install chromium chromium-driver firefox-esr webkit2gtk-driver xvfb xauth
  # geckodriver drives Firefox for wasm-bindgen-test; Debian has none, crates.io has it.
  command -v geckodriver >/dev/null || {
    log "installing geckodriver (a few minutes, once)"
    cargo install --quiet --locked geckodriver </dev/null || cargo install --quiet geckodriver </dev/null
  }
}

# The crate's wasm tests for one flavour in one browser (chromium, firefox or webkit), headless
# (WebKitGTK under a virtual display); the runner drives whichever browser's driver the
# environment names.
wasm_test() { # flavour browser
  (
    export WASM_BINDGEN_TEST_TIMEOUT=300
    unset CHROMEDRIVER GECKODRIVER SAFARIDRIVER
    case "$2" in
      chromium) export CHROMEDRIVER=/usr/bin/chromedriver ;;
      firefox) GECKODRIVER=$(command -v geckodriver) && export GECKODRIVER ;;
      webkit)
        export SAFARIDRIVER=/usr/bin/WebKitWebDriver JSC_useSharedArrayBuffer=1
        virtual_display
        ;;
      *) die "unknown browser $2" ;;
    esac
    wasm_cargo "$1" test --release --tests --features kernel-checks
  )
}

# A virtual X display for WebKitGTK, which has no headless mode (without one its driver's
# `POST /session` hangs): Xvfb, on a display number it picks, for the life of the calling
# subshell. Does nothing where a display is set. (The page tests and the bench start their
# own, in scripts/webkit.mjs; wasm-bindgen's runner starts the driver itself.)
virtual_display() {
  [ -n "${DISPLAY:-}" ] && return 0
  local fifo
  fifo=$(mktemp -u) && mkfifo "$fifo"
  Xvfb -displayfd 3 -screen 0 1280x1024x24 -nolisten tcp 3>"$fifo" >/dev/null 2>&1 &
  local pid=$! display
  read -r -t 20 display <"$fifo" || die "Xvfb did not start"
  rm -f "$fifo"
  trap "kill $pid 2>/dev/null" EXIT
  export DISPLAY=":$display"
}

setup_node_packages() {
  command -v npm >/dev/null || apt_install nodejs npm
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    log "installing npm packages"
    npm ci --no-audit --no-fund --loglevel=error </dev/null
  fi
}

# Mesa's software Vulkan (lavapipe): the adapter the native GPU kernel tests run on.
setup_gpu() {
  apt_install mesa-vulkan-drivers
}

setup_python() {
  # llama.cpp's own GGUF reader, used to cross-check the inspector.
  python3 -c 'import gguf' 2>/dev/null ||
    pip install --quiet --disable-pip-version-check 'gguf==0.19.0' </dev/null
}

setup() {
  export PATH="$HOME/.cargo/bin:$PATH"
  command -v cargo >/dev/null || die "cargo not found: install Rust (https://rustup.rs) first"
  choose_wasm_toolchain
  setup_wasm_bindgen
  setup_browser
  setup_node_packages
  setup_python
  setup_gpu
}

fetch_models() {
  scripts/fetch-models.sh
  make_big_model
}

# The file over 4 GiB that the 64-bit-memory page test loads: written here (about a minute,
# 4.6 GiB of disk), never committed, and rewritten only when its generator changes.
BIG_MODEL=.cache/models/big-4.6gib-q4_0.gguf
make_big_model() {
  local stamp
  stamp=$(sha256sum scripts/make_big_model.py | cut -d' ' -f1)
  [ -f "$BIG_MODEL" ] && [ "$(cat "$BIG_MODEL.stamp" 2>/dev/null)" = "$stamp" ] && return 0
  log "writing the 4.6 GiB test model $BIG_MODEL (once)"
  rm -f "$BIG_MODEL" "$BIG_MODEL.stamp"
  python3 scripts/make_big_model.py "$BIG_MODEL.part"
  mv "$BIG_MODEL.part" "$BIG_MODEL"
  echo "$stamp" >"$BIG_MODEL.stamp"
}

# One package per flavour: www/lib/pkg (the baseline), www/lib/pkg-relaxed, www/lib/pkg-threads,
# www/lib/pkg-relaxed-threads, www/lib/pkg-memory64 and www/lib/pkg-memory64-threads. The page
# picks one at run time (www/lib/engine-loader.js).
WASM_FLAVOURS=(simd relaxed threads relaxed-threads memory64 memory64-threads)
build_wasm() { # [flavour...] (default: all)
  local flavours=("${@:-${WASM_FLAVOURS[@]}}")
  log "building the wasm packages (release; ${flavours[*]}; $WASM_MODE toolchain)"
  local flavour out helpers arch
  for flavour in "${flavours[@]}"; do
    wasm_cargo "$flavour" build --release --lib
    out=www/lib/pkg-$flavour
    [ "$flavour" = simd ] && out=www/lib/pkg
    rm -rf "$out"
    arch=wasm32
    case "$flavour" in memory64*) arch=wasm64 ;; esac
    scripts/fold-load-offsets.sh "target/wasm-$flavour/$arch-unknown-unknown/release/inferno.wasm"
    wasm-bindgen --target web --no-typescript --out-dir "$out" \
      "target/wasm-$flavour/$arch-unknown-unknown/release/inferno.wasm"
    case "$flavour" in *threads) ;; *) continue ;; esac
    # The pool's helper script (src/web/pool_helpers.js) imports the glue four folders up.
    helpers=$(find "$out/snippets" -name pool_helpers.js)
    [ -n "$helpers" ] && [ -f "$(dirname "$helpers")/../../../../inferno.js" ] ||
      die "the pool helper script is missing from $out, or is not four folders below its glue"
  done
  # The service worker's list of files to keep offline (www/builds.json). An older revision
  # built by `ab` has no such script, and its list is not used.
  [ ! -f scripts/sw-manifest.mjs ] || node scripts/sw-manifest.mjs www
}

# The demo model is served from www/models (git-ignored), hard-linked from the cache.
place_demo_model() {
  mkdir -p www/models
  ln -f .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf www/models/ 2>/dev/null ||
    cp -f .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf www/models/
}

# --- tests: each runner's output is kept so the totals can be added up at the end ----------
TEST_LOG=
run_suite() { # name command...
  local name=$1
  shift
  log "test suite: $name"
  local status=0
  "$@" 2>&1 | tee -a "$TEST_LOG" || status=$?
  [ "$status" = 0 ] || FAILED_SUITES+=("$name")
}

run_tests() {
  TEST_LOG=$(mktemp)
  FAILED_SUITES=()

  # Mesa's Vulkan loader complains on every device without a runtime directory (none in CI).
  run_suite "native (cargo test, GPU kernels on lavapipe)" \
    env XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}" cargo test --release --all-targets --features gpu
  run_suite "wasm SIMD128 in headless Chromium (wasm-bindgen-test)" wasm_test simd chromium
  run_suite "wasm relaxed SIMD in headless Chromium (wasm-bindgen-test)" wasm_test relaxed chromium
  run_suite "wasm64 (Memory64) in headless Chromium (wasm-bindgen-test)" wasm_test memory64 chromium
  run_suite "wasm SIMD128 in headless Firefox (wasm-bindgen-test)" wasm_test simd firefox
  run_suite "wasm relaxed SIMD in headless Firefox (wasm-bindgen-test)" wasm_test relaxed firefox
  run_suite "wasm64 (Memory64) in headless Firefox (wasm-bindgen-test)" wasm_test memory64 firefox
  # WebKitGTK has neither relaxed SIMD nor Memory64: the SIMD128 build is the one Safari runs.
  run_suite "wasm SIMD128 in WebKitGTK under Xvfb (wasm-bindgen-test)" wasm_test simd webkit
  run_suite "JS: API types (tsc) and formatting (prettier)" node --test --test-reporter=spec tests/js/
  # One test file at a time: each drives its own browser running real models. The same files
  # run in Firefox through tests/page/firefox-page.mjs (Playwright's API over puppeteer-core).
  run_suite "page (playwright-core + Chromium)" node --test --test-concurrency=1 --test-reporter=spec tests/page/
  run_suite "page (puppeteer-core + Firefox)" env INFERNO_BROWSER=firefox \
    node --test --test-concurrency=1 --test-reporter=spec tests/page/
  # WebKit's page tests drive it through a plain WebDriver client (selenium-webdriver), which
  # the Playwright-shaped suites above do not speak: its own file of the core flows.
  run_suite "page (selenium-webdriver + WebKitGTK under Xvfb)" \
    node --test --test-concurrency=1 --test-reporter=spec tests/webkit/

  # cargo: "test result: ok. 12 passed; 0 failed"; node: "ℹ pass 3" / "ℹ fail 0" (the first
  # field is matched by position: mawk reads "ℹ" as three bytes).
  local passed failed
  passed=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($(i) ~ /^passed;?$/) s += $(i - 1) }
                NF == 3 && $2 == "pass" && $3 ~ /^[0-9]+$/ { s += $3 } END { print s + 0 }' "$TEST_LOG")
  failed=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($(i) ~ /^failed;?$/) s += $(i - 1) }
                NF == 3 && $2 == "fail" && $3 ~ /^[0-9]+$/ { s += $3 } END { print s + 0 }' "$TEST_LOG")
  rm -f "$TEST_LOG"
  echo
  if [ ${#FAILED_SUITES[@]} -gt 0 ]; then
    echo "failed suites: ${FAILED_SUITES[*]}"
    echo "all suites: $passed passed, $((failed > 0 ? failed : 1)) failed"
    exit 1
  fi
  echo "all suites: $passed passed, $failed failed"
}

FUZZ_TARGETS=(parse_gguf render_template tokenize generate grammar reply)
run_fuzz() { # seconds [target]: each target (or the one named) for that long
  local seconds=${1:-600} target
  command -v cargo-fuzz >/dev/null || cargo install --quiet cargo-fuzz </dev/null
  (cd fuzz && cargo run --quiet --example seed_corpus)
  for target in "${2:-${FUZZ_TARGETS[@]}}"; do
    log "fuzzing $target for $seconds s"
    # generate's seeds are whole models (up to 250 KB). Templates can build reference cycles
    # through minijinja namespaces, which leak (fuzz/README.md): leak checks stay off there.
    local max_len=65536 detect_leaks=1
    [ "$target" = generate ] && max_len=300000
    case $target in render_template | generate) detect_leaks=0 ;; esac
    # New inputs go to corpus/ (git-ignored); the committed seeds are read from seeds/.
    mkdir -p "fuzz/corpus/$target"
    (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" "corpus/$target" "seeds/$target" -- \
      -max_total_time="$seconds" -rss_limit_mb=2048 \
      -max_len="$max_len" -detect_leaks="$detect_leaks" -print_final_stats=1)
  done
}

# --- A/B: this tree's build against another revision's (scripts/ab.mjs) ------------------------
# The flavour the A/B arguments run: one thread or more, relaxed SIMD or not (as the app picks).
ab_flavour() { # ab.mjs args...
  local threads=1 relaxed=1 previous= arg
  for arg in "$@"; do
    [ "$previous" = --threads ] && threads=$arg
    case "$arg" in --threads=*) threads=${arg#--threads=} ;; --no-relaxed) relaxed= ;; esac
    previous=$arg
  done
  case "$threads:$relaxed" in
    1:1) echo relaxed ;;
    1:) echo simd ;;
    *:1) echo relaxed-threads ;;
    *) echo threads ;;
  esac
}

# Builds REV's sources (checked out in a scratch worktree) with this script's flags into
# .cache/ab/<commit>/, once per commit and flavour, and sets AB_BASE to that folder (not
# printed: a command substitution would run the build without set -e). The scratch worktree
# keeps one path and one target folder, so each revision after the first rebuilds only the crate.
ab_revision_build() { # rev flavour
  local sha folder scratch pkg=pkg-$2
  sha=$(git rev-parse --verify --quiet "$1^{commit}") || die "no such revision: $1"
  folder=$ROOT/.cache/ab/$sha
  [ "$2" = simd ] && pkg=pkg
  if [ ! -f "$folder/$pkg/inferno_bg.wasm" ]; then
    scratch=$ROOT/.cache/ab/worktree
    git worktree remove --force "$scratch" 2>/dev/null || rm -rf "$scratch"
    git worktree prune
    git worktree add --detach --quiet "$scratch" "$sha" >&2
    mkdir -p "$ROOT/.cache/ab/target"
    ln -s "$ROOT/.cache/ab/target" "$scratch/target"
    ln -s "$ROOT/node_modules" "$scratch/node_modules" # binaryen, for fold-load-offsets.sh
    (
      cd "$scratch"
      ROOT=$scratch
      build_wasm "$2"
    ) >&2
    mkdir -p "$folder"
    rm -rf "${folder:?}/$pkg"
    cp -r "$scratch/www/lib/$pkg" "$folder/"
    git worktree remove --force "$scratch"
  fi
  AB_BASE=$folder
}

command=${1:-help}
shift || true
case "$command" in
  setup) setup ;;
  build)
    setup
    build_wasm "$@"
    ;;
  models) fetch_models ;;
  serve)
    setup
    build_wasm
    fetch_models
    place_demo_model
    exec node scripts/serve.mjs --root www "$@"
    ;;
  test)
    setup
    fetch_models
    build_wasm
    place_demo_model # The page tests load it the way a newcomer does.
    run_tests
    ;;
  wasm-test)
    setup
    wasm_test "${1:-simd}" "${2:-chromium}"
    ;;
  fuzz)
    setup
    run_fuzz "$@"
    ;;
  bench)
    setup
    build_wasm
    fetch_models
    exec node scripts/bench.mjs "$@"
    ;;
  ab)
    [ $# -ge 1 ] || die "usage: ./build.sh ab REV [MODEL...] [--threads N] [--pairs N] [...]"
    setup
    fetch_models
    revision=$1
    shift
    flavour=$(ab_flavour "$@")
    ab_revision_build "$revision" "$flavour"
    build_wasm "$flavour"
    exec node scripts/ab.mjs --a "$AB_BASE" --b www/lib "$@"
    ;;
  profile)
    setup
    apt_install linux-perf
    build_wasm
    exec node scripts/profile.mjs "$@"
    ;;
  help | -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) die "unknown command '$command' (try ./build.sh help)" ;;
esac
