#!/usr/bin/env bash
# Installs what Inferno's builds and tests need, and nothing else builds or installs it:
#
#   scripts/setup.sh build   the wasm toolchain (rustup's wasm32 std, or Debian's rustc-web with
#                            std's source), wasm-bindgen-cli at exactly Cargo.lock's version,
#                            the npm packages (binaryen's wasm-opt is part of the build)
#   scripts/setup.sh test    the above, and the browsers and drivers (Chromium, Firefox with
#                            geckodriver, WebKitGTK's driver under Xvfb), Mesa's software Vulkan
#                            for the native GPU tests, and llama.cpp's gguf Python package
#   scripts/setup.sh models  llama.cpp's gguf Python package, which makes some test models
#   scripts/setup.sh perf    Linux perf, for ./build.sh profile
#   scripts/setup.sh gpu-bench  cmake, glslc and Vulkan's headers, and llama.cpp's Vulkan
#                            llama-bench built with them into the build cache (once, about 9 min
#                            on 2 cores: scripts/build-llama-vulkan.sh), for scripts/gpu-check.sh
#   scripts/setup.sh fuzz    cargo-fuzz, for ./build.sh fuzz
#
# Every step checks first, so a second run with everything present takes seconds. Runs
# without standard input (CI). ./build.sh calls it; see ../shared/TOOLCHAIN.md for why the
# wasm toolchain takes two routes.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

log() { printf '\033[1;34m==>\033[0m %s\n' "$*" >&2; }
die() {
  printf 'setup.sh: %s\n' "$*" >&2
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

DEBIAN_WASM=(rustc-web cargo-web rust-web-src lld-19)

# rustup's wasm32 std when it can be had; otherwise Debian's rustc-web, with std built from
# source (-Zbuild-std). The threaded and 64-bit builds rebuild std in any case, from rustup's
# rust-src where it can be had, else from Debian's. INFERNO_WASM_TOOLCHAIN=buildstd forces the
# Debian route (to test it where rustup works).
setup_wasm_toolchain() {
  local rustup_ok=
  [ "${INFERNO_WASM_TOOLCHAIN:-}" != buildstd ] && command -v rustup >/dev/null && rustup_ok=1
  if [ -n "$rustup_ok" ] && rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    setup_std_source
  elif dpkg -s "${DEBIAN_WASM[@]}" >/dev/null 2>&1; then
    return 0
  elif [ -n "$rustup_ok" ] && timeout 60 rustup target add wasm32-unknown-unknown </dev/null; then
    setup_std_source
  else
    log "rustup cannot provide the wasm32 std here: using Debian's rustc-web with -Zbuild-std"
    apt_install "${DEBIAN_WASM[@]}"
  fi
}

# std's source for the builds that rebuild it: rustup's rust-src, else Debian's.
setup_std_source() {
  rustup component list --installed 2>/dev/null | grep -qx rust-src ||
    timeout 60 rustup component add rust-src </dev/null >/dev/null 2>&1 ||
    apt_install "${DEBIAN_WASM[@]}"
}

# wasm-bindgen-cli at exactly the version in Cargo.lock, built --locked from its source with
# scripts/wasm-bindgen-cli-VERSION.lock: the crate's own lock file but for the one crate the
# registry no longer serves (webpki-roots 1.0.11, moved to 1.0.10), so every machine builds the
# same dependencies and none needs a fresh resolve.
setup_wasm_bindgen() {
  [ -f Cargo.lock ] || cargo generate-lockfile
  local want have
  want=$(sed -n '/^name = "wasm-bindgen"$/{n;s/^version = "\(.*\)"$/\1/p;q}' Cargo.lock)
  [ -n "$want" ] || die "no wasm-bindgen in Cargo.lock"
  have=$(wasm-bindgen --version 2>/dev/null | cut -d' ' -f2) || true
  [ "$have" = "$want" ] && return 0
  local lock=$PWD/scripts/wasm-bindgen-cli-$want.lock scratch source
  [ -f "$lock" ] || die "no $lock: copy wasm-bindgen-cli $want's Cargo.lock there (cargo update -p CRATE for any the registry lacks)"
  log "installing wasm-bindgen-cli $want (a few minutes, once)"
  scratch=$(mktemp -d)
  # The crate's source: fetched as the one dependency of a scratch package.
  mkdir -p "$scratch/fetch/src"
  touch "$scratch/fetch/src/lib.rs"
  printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nwasm-bindgen-cli = "=%s"\n' \
    "$want" >"$scratch/fetch/Cargo.toml"
  (cd "$scratch/fetch" && cargo fetch --quiet </dev/null 2>/dev/null)
  source=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -mindepth 2 -maxdepth 2 -type d -name "wasm-bindgen-cli-$want" | head -n 1)
  [ -n "$source" ] || die "cargo fetch did not bring wasm-bindgen-cli $want's source"
  cp -r "$source" "$scratch/cli"
  cp "$lock" "$scratch/cli/Cargo.lock"
  cargo install --quiet --locked --force --path "$scratch/cli" </dev/null
  rm -rf "$scratch"
}

setup_node_packages() {
  command -v npm >/dev/null || apt_install nodejs npm
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    log "installing npm packages"
    npm ci --no-audit --no-fund --loglevel=error </dev/null
  fi
}

setup_browsers() {
  # WebKitGTK (Safari's engine) has no headless mode: its driver runs under Xvfb.
  apt_install chromium chromium-driver firefox-esr webkit2gtk-driver xvfb xauth
  # geckodriver drives Firefox for wasm-bindgen-test; Debian has none, crates.io has it.
  command -v geckodriver >/dev/null || {
    log "installing geckodriver (a few minutes, once)"
    cargo install --quiet --locked geckodriver </dev/null || cargo install --quiet geckodriver </dev/null
  }
}

setup_gguf_py() {
  python3 -c 'import gguf' 2>/dev/null ||
    pip install --quiet --disable-pip-version-check 'gguf==0.19.0' </dev/null
}

setup_build() {
  command -v cargo >/dev/null || die "cargo not found: install Rust (https://rustup.rs) first"
  setup_wasm_toolchain
  setup_wasm_bindgen
  setup_node_packages
}

case "${1:-test}" in
  build) setup_build ;;
  test)
    setup_build
    setup_browsers
    # Mesa's software Vulkan (lavapipe): the adapter the native GPU kernel tests run on.
    apt_install mesa-vulkan-drivers
    # llama.cpp's own GGUF reader: it cross-checks the inspector and makes test models.
    setup_gguf_py
    ;;
  perf) apt_install linux-perf ;;
  gpu-bench)
    apt_install cmake g++ glslc libvulkan-dev spirv-headers mesa-vulkan-drivers
    scripts/build-llama-vulkan.sh >/dev/null
    ;;
  models) setup_gguf_py ;;
  fuzz) command -v cargo-fuzz >/dev/null || cargo install --quiet cargo-fuzz </dev/null ;;
  *) die "usage: scripts/setup.sh [build|test|models|perf|gpu-bench|fuzz]" ;;
esac
