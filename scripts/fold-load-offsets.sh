#!/usr/bin/env bash
# Folds constant address offsets into the wasm module's loads and stores, in place:
#   scripts/fold-load-offsets.sh MODULE.wasm
#
# LLVM leaves `i32.add(p, 36)` before a load instead of `v128.load offset=36 (p)` whenever loop
# strength reduction has turned the address into an induction variable (it drops the flag that
# proves the add does not wrap), and V8 then spends an `lea` on every such load. binaryen's
# optimize-added-constants pass moves those constants into the offset fields. It assumes the
# lowest 1 KiB of memory is never reached by an address that wrapped past 4 GiB
# (--low-memory-unused), which holds for Rust: its pointer arithmetic never wraps. Nothing
# else is changed (no -O): the kernels' bits are those the tests check.
set -euo pipefail
module=$1
wasm_opt="$(dirname "$0")/../node_modules/binaryen/bin/wasm-opt"
[ -f "$wasm_opt" ] || { echo "fold-load-offsets: $wasm_opt is missing (run npm ci)" >&2; exit 1; }
folded=$(mktemp "$module.XXXXXX")
trap 'rm -f "$folded"' EXIT
# Features come from the module's target_features section; -g keeps the names section.
node "$wasm_opt" "$module" -g --low-memory-unused --optimize-added-constants-propagate -o "$folded"
mv "$folded" "$module"
