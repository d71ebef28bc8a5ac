#!/usr/bin/env bash
# Regenerates tests/tokenizer/data/llama_cpp_expected.tsv: llama.cpp's tokens and detokenized
# text (as hashes) for every cached vocabulary on the stress texts (and the shared held-out
# text when present). Needs a llama.cpp build of the same source the vocab files come from:
#   mkdir -p /tmp/llama-src && cd /tmp/llama-src && npm pack node-llama-cpp@3.21.1 &&
#   tar xzf node-llama-cpp-3.21.1.tgz package/llama/gitRelease.bundle &&
#   git clone -q package/llama/gitRelease.bundle llama.cpp &&
#   cmake -S llama.cpp -B build -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF && cmake --build build --target llama
#   LLAMA_SRC=/tmp/llama-src/llama.cpp LLAMA_BUILD=/tmp/llama-src/build tests/tokenizer/tools/gen_llama_expectations.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
: "${LLAMA_SRC:?path of the llama.cpp source tree}" "${LLAMA_BUILD:?path of its build tree}"
tool=$(mktemp -d)/llama_expectations
trap 'rm -rf "$(dirname "$tool")"' EXIT
g++ -O2 -std=c++17 -I"$LLAMA_SRC/include" -I"$LLAMA_SRC/ggml/include" \
  tests/tokenizer/tools/llama_expectations.cpp -L"$LLAMA_BUILD/bin" -lllama -lggml -lggml-base \
  -Wl,-rpath,"$LLAMA_BUILD/bin" -o "$tool"
texts=(tests/tokenizer/data/stress-utf8.txt tests/tokenizer/data/stress-bytes.bin)
heldout=${TROUPE_SHARED_MODELS_DIR:-../shared/models}/heldout.txt
[ -f "$heldout" ] && texts+=("$heldout")
out=tests/tokenizer/data/llama_cpp_expected.tsv
{
  echo -e "# vocab\tfile\tparse_special\tadd_special\tn_tokens\tfnv_ids\tfnv_detok\tfnv_detok_special"
  for f in .cache/llama-data/vocab/ggml-vocab-*.gguf; do
    name=$(basename "$f" .gguf); name=${name#ggml-vocab-}
    case $name in bert-bge|nomic-bert-moe) continue;; esac
    "$tool" "$f" "$name" "${texts[@]}"
  done
} > "$out"
echo "wrote $(($(wc -l < "$out") - 1)) expectations to $out"
