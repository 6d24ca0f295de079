#!/usr/bin/env bash
# llama.cpp's Vulkan backend, the GPU engine measured beside ours: `llama-bench` built from the
# llama.cpp of the goldens (vendor/llama.cpp in llama-cpp-python's sdist, which
# scripts/fetch-models.sh fetches) into the build cache, once.
#
#   scripts/build-llama-vulkan.sh     prints the path of llama-bench (building it if needed)
#
# scripts/setup.sh gpu-bench runs it after installing cmake, glslc, libvulkan-dev and spirv-headers.
# `scripts/gpu-check.sh prepare` carries the binary to a GPU machine, and the check prints its
# figures beside ours on the same adapter. The binary is static (one file to carry) and built for
# x86-64-v3, not this machine's CPU: the GPU machine is another.
#
# Debian 12's Vulkan headers (1.3.239) lack VK_EXT_layer_settings, which ggml-vulkan.cpp uses
# only to switch on the validation layer's best-practice checks when it creates its instance:
# here that instance is created without them (a patched copy; the sdist is untouched). Debian's
# glslc also lacks GL_EXT_integer_dot_product and the cooperative-matrix extensions, so llama.cpp
# builds here without its integer-dot and coopmat shaders: every figure from this build says so.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1;34m==>\033[0m %s\n' "$*" >&2; }
die() {
  printf 'build-llama-vulkan: %s\n' "$*" >&2
  exit 1
}

VERSION=0.3.36
SDIST=.cache/wheels/llama_cpp_python-$VERSION.tar.gz
CACHE=${INFERNO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inferno}
ROOT=$CACHE/llama.cpp-vulkan-$VERSION
BENCH=$ROOT/build/bin/llama-bench

if [ -x "$BENCH" ]; then
  echo "$BENCH"
  exit 0
fi
for tool in cmake glslc c++; do
  command -v "$tool" >/dev/null || die "$tool is missing: run scripts/setup.sh gpu-bench"
done
[ -f /usr/include/vulkan/vulkan.hpp ] || die "Vulkan's headers are missing: run scripts/setup.sh gpu-bench"
[ -f "$SDIST" ] || scripts/fetch-models.sh >&2

if [ ! -f "$ROOT/src/.complete" ]; then
  log "extracting llama.cpp from $SDIST"
  rm -rf "$ROOT/src"
  mkdir -p "$ROOT/src"
  tar -xzf "$SDIST" -C "$ROOT/src" --strip-components=3 "llama_cpp_python-$VERSION/vendor/llama.cpp"
  if ! grep -q VK_EXT_layer_settings /usr/include/vulkan/vulkan_core.h; then
    log "these Vulkan headers lack VK_EXT_layer_settings: the instance is created without it"
    python3 - "$ROOT/src/ggml/src/ggml-vulkan/ggml-vulkan.cpp" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
# From the best-practice setting to the create-info that chains it: one plain create-info.
pattern = re.compile(
    r"    VkBool32 enable_best_practice = layer_settings;\n.*?"
    r"vk::InstanceCreateInfo instance_create_info\(vk::InstanceCreateFlags\{\}, &app_info, layers, extensions, &layer_setting_info\);\n",
    re.S,
)
text, count = pattern.subn(
    "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions);\n", text
)
if count != 1:
    sys.exit(f"{path}: the layer-settings block was not found once ({count})")
open(path, "w").write(text)
PY
  fi
  touch "$ROOT/src/.complete"
fi

log "building llama.cpp's llama-bench with the Vulkan backend (about 9 min on 2 cores, once)"
cmake -S "$ROOT/src" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release -DGGML_VULKAN=ON \
  -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DGGML_BMI2=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF >&2
cmake --build "$ROOT/build" --target llama-bench -j "$(nproc)" >&2
[ -x "$BENCH" ] || die "the build gave no $BENCH"
strip "$BENCH"
echo "$BENCH"
