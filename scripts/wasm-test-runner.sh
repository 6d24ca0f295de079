#!/usr/bin/env bash
# cargo's runner for the wasm tests: the test module gets the same offset folding as the
# packages the page loads (scripts/fold-load-offsets.sh), then wasm-bindgen-test-runner runs it.
set -euo pipefail
"$(dirname "$0")/fold-load-offsets.sh" "$1"
exec wasm-bindgen-test-runner "$@"
