#!/usr/bin/env bash
# The GPU check: Inferno's GPU backend on a machine with a real GPU, which has no Rust
# toolchain and no network and gets only a folder of at most 64 MiB.
#
#   scripts/gpu-check.sh prepare [DIR]   here: writes the folder (default target/gpu-check):
#                                        a portable `--features gpu` build of the CLI
#                                        (x86-64-v3, not target-cpu=native), llama.cpp's
#                                        Vulkan llama-bench (setup.sh gpu-bench), the micro test
#                                        files that cannot be made there, llama.cpp's goldens,
#                                        the scripts that make the rest with numpy, the `gguf`
#                                        package, and a Vulkan loader for a machine without one
#   DIR/gpu-check.sh [ARGS]              there, from the folder alone (python3 with numpy):
#                                        finds the Vulkan driver, makes the test files, and
#                                        prints two tables (logits against llama.cpp's goldens
#                                        on the GPU; speed on the GPU and the CPU, with llama.cpp's
#                                        Vulkan llama-bench from bin/llama-bench.xz),
#                                        written as JSON to $OUT/gpu-check.json (or DIR's)
#   scripts/gpu-check.sh [ARGS]          here: prepare, then run from the folder (lavapipe;
#                                        --quick for a small speed run)
#
# ARGS go to scripts/gpu_check.py (--types, --pp, --tg, --runs, --skip-bench, --skip-parity).
# Figures from a software adapter (lavapipe, SwiftShader: device type Cpu) are no speed claim.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf '\033[1;34m==>\033[0m %s\n' "$*" >&2; }
die() {
  printf 'gpu-check: %s\n' "$*" >&2
  exit 1
}

# Micro files the `gguf` package cannot write (llama-quantize's K-quants) or that the others are
# made from; every other golden's file is made there (scripts/gpu_check.py).
CARRIED_MODELS=(qwen3-micro-f32 qwen3-micro-q2_k qwen3-micro-q3_k_s qwen3-micro-q4_k_s
  qwen3-micro-q5_k_s qwen3-micro-q6_k qwen3-vocab clip-qwen25vl-micro)
CARRIED_SCRIPTS=(gpu_check.py make_micro_quants.py make_micro_models.py make_qwen3_shaped.py make_micro_mmproj.py)
LIMIT_MIB=64

prepare() {
  local repo dir cache target
  repo=$(cd "$HERE/.." && pwd)
  dir=${1:-$repo/target/gpu-check}
  cache=${INFERNO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inferno}
  target=$cache/target/gpu-check
  log "building the CLI with the GPU backend for any x86-64-v3 machine ($target)"
  (cd "$repo" && CARGO_TARGET_DIR=$target RUSTFLAGS="-C target-cpu=x86-64-v3" \
    RUSTC_BOOTSTRAP=1 CARGO_UNSTABLE_CHECKSUM_FRESHNESS=true \
    cargo build --release --features gpu --bin inferno)
  rm -rf "$dir"
  mkdir -p "$dir"/{bin,lib,py,scripts,tests/fixtures/models,tests/fixtures/golden,tests/fixtures/images}
  cp "$target/release/inferno" "$dir/bin/inferno"
  strip "$dir/bin/inferno"
  # llama.cpp's Vulkan llama-bench (built once into the cache by setup.sh gpu-bench): its
  # figures print beside ours on the same adapter. Compressed (38 MB of mostly SPIR-V to 6),
  # and unpacked there with Python's lzma.
  "$repo/scripts/setup.sh" gpu-bench
  xz -9 -T2 -c "$("$repo/scripts/build-llama-vulkan.sh")" >"$dir/bin/llama-bench.xz"
  cp "$HERE/gpu-check.sh" "$dir/gpu-check.sh"
  for script in "${CARRIED_SCRIPTS[@]}"; do cp "$HERE/$script" "$dir/scripts/"; done
  # Compressed as llama-bench is (8 MB fewer, the vocabulary file most), unpacked there in place.
  for model in "${CARRIED_MODELS[@]}"; do
    xz -9 -T2 -c "$repo/tests/fixtures/models/$model.gguf" >"$dir/tests/fixtures/models/$model.gguf.xz"
  done
  find "$repo/tests/fixtures/golden" -maxdepth 1 -name '*.json' ! -name '*.embeddings.json' \
    -exec cp {} "$dir/tests/fixtures/golden/" \;
  # The picture the encoder's bench takes.
  cp "$repo/tests/fixtures/images/wide-480x360.png" "$dir/tests/fixtures/images/"
  # Vulkan's loader, for a machine that has the GPU's driver but not the loader.
  local loader
  loader=$(libraries | awk '/libvulkan\.so\.1 .*x86-64/ {print $NF; exit}')
  [ -n "$loader" ] || die "no libvulkan.so.1 here (scripts/setup.sh test installs it)"
  cp -L "$loader" "$dir/lib/libvulkan.so.1"
  # The gguf package (and PyYAML, which it imports), pure Python, the versions the test files
  # were checked with; numpy is the GPU machine's own.
  python3 - "$dir/py" <<'PY'
import shutil, sys
from pathlib import Path
import gguf, yaml
for module in (gguf, yaml):
    source = Path(module.__file__).parent
    shutil.copytree(source, Path(sys.argv[1]) / source.name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
PY
  local commit
  commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
  cat >"$dir/README.txt" <<EOF
Inferno's GPU check, prepared $(date -u '+%Y-%m-%d %H:%M UTC') from commit $commit
($(git -C "$repo" status --porcelain 2>/dev/null | grep -q . && echo "with uncommitted changes" || echo "clean")).

Run it from this folder, on the machine with the GPU:   ./gpu-check.sh
It needs python3 with numpy, and the GPU's Vulkan driver. It writes gpu-check.json into \$OUT
(or here) and prints the tables. Made by scripts/gpu-check.sh prepare in the repository.
EOF
  local size
  size=$(du -sm "$dir" | cut -f1)
  log "$dir: ${size} MiB (the GPU machine takes at most $LIMIT_MIB)"
  [ "$size" -le "$LIMIT_MIB" ] || die "$dir is ${size} MiB, over $LIMIT_MIB"
}

# The dynamic linker's list of libraries (ldconfig is in sbin, often off a plain PATH).
libraries() {
  local ldconfig
  for ldconfig in ldconfig /sbin/ldconfig /usr/sbin/ldconfig; do
    if command -v "$ldconfig" >/dev/null; then
      "$ldconfig" -p 2>/dev/null || true
      return
    fi
  done
}

# There: the Vulkan loader and the GPU's driver, found or supplied, then the runner.
run_here() {
  local dir=$HERE
  [ -x "$dir/bin/inferno" ] || die "no bin/inferno beside this script: run scripts/gpu-check.sh prepare first"
  command -v python3 >/dev/null || die "python3 is missing (the check makes its test files with it)"
  python3 -c 'import numpy' 2>/dev/null || die "python3 has no numpy (the check makes its test files with it)"
  export PYTHONPATH=$dir/py${PYTHONPATH:+:$PYTHONPATH}
  if ! libraries | grep -q 'libvulkan\.so\.1 '; then
    log "no Vulkan loader on this machine: using the folder's"
    export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  # A container given the GPU for compute only may have NVIDIA's Vulkan driver library without
  # its ICD file: write one, so the loader finds the driver.
  local icds nvidia_icd glx
  icds=$(ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json /usr/local/share/vulkan/icd.d/*.json 2>/dev/null || true)
  log "Vulkan ICD files: ${icds:-none}"
  nvidia_icd=$(grep -l -i nvidia $icds /dev/null 2>/dev/null || true)
  if [ -z "$nvidia_icd" ]; then
    glx=$(libraries | awk '/libGLX_nvidia\.so\.0 / {print $NF; exit}')
    [ -n "$glx" ] || glx=$(find /usr/lib /usr/lib64 /usr/local/nvidia /usr/lib/x86_64-linux-gnu -name 'libGLX_nvidia.so.0' 2>/dev/null | head -1 || true)
    if [ -n "$glx" ]; then
      mkdir -p "${TMPDIR:-/tmp}/inferno-gpu-check"
      local icd=${TMPDIR:-/tmp}/inferno-gpu-check/nvidia_icd.json
      printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "%s", "api_version": "1.3.0"}}\n' "$glx" >"$icd"
      export VK_ICD_FILENAMES=$icd VK_DRIVER_FILES=$icd
      log "NVIDIA's driver library without an ICD file: wrote $icd for $glx"
    elif command -v nvidia-smi >/dev/null; then
      log "an NVIDIA GPU without its Vulkan driver (no libGLX_nvidia.so.0: a container needs NVIDIA_DRIVER_CAPABILITIES to include graphics); wgpu may find only a software adapter"
    fi
  fi
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >&2 || true
  fi
  local out=${OUT:-$dir} llama=() packed
  for packed in "$dir"/tests/fixtures/models/*.gguf.xz; do
    [ -f "$packed" ] && [ ! -f "${packed%.xz}" ] || continue
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
      "$packed" "${packed%.xz}" || die "cannot unpack $packed beside itself"
  done
  if [ -f "$dir/bin/llama-bench.xz" ]; then
    local unpacked=${TMPDIR:-/tmp}/inferno-gpu-check/llama-bench
    mkdir -p "$(dirname "$unpacked")"
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
      "$dir/bin/llama-bench.xz" "$unpacked"
    chmod +x "$unpacked"
    llama=(--llama-bench "$unpacked")
  fi
  python3 "$dir/scripts/gpu_check.py" --bin "$dir/bin/inferno" "${llama[@]}" --json "$out/gpu-check.json" "$@"
}

# In the prepared folder this script sits beside bin/; in the repository, in scripts/.
if [ -x "$HERE/bin/inferno" ]; then
  run_here "$@"
  exit
fi
case "${1:-}" in
  prepare)
    shift
    prepare "$@"
    ;;
  *)
    repo=$(cd "$HERE/.." && pwd)
    prepare "$repo/target/gpu-check"
    args=("$@")
    if [ "${1:-}" = --quick ]; then
      args=(--types q4_0 --pp 16 --tg 4 --runs 1 "${@:2}")
    fi
    cache=${INFERNO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inferno}
    "$repo/target/gpu-check/gpu-check.sh" --models "$cache/files/models" "${args[@]}"
    ;;
esac
