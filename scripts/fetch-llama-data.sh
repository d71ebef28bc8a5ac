#!/usr/bin/env bash
# Fetches llama.cpp's tokenizer test vocabularies (models/ggml-vocab-*.gguf with .inp/.out
# cases) and chat templates (models/templates/) into .cache/llama-data/. They come from the
# llama.cpp source tree that the npm package node-llama-cpp carries as a git bundle; only
# these data files are kept, no code. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

PKG="node-llama-cpp@3.21.1"
DEST=".cache/llama-data"
STAMP="$DEST/.complete-$PKG"
[ -f "$STAMP" ] && exit 0

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetch: $PKG from the npm registry"
(cd "$work" && npm pack --silent "$PKG" >/dev/null)
tar -xzf "$work"/node-llama-cpp-*.tgz -C "$work" package/llama/gitRelease.bundle
git clone --quiet "$work/package/llama/gitRelease.bundle" "$work/llama.cpp" 2>/dev/null

rm -rf "$DEST"
mkdir -p "$DEST/vocab" "$DEST/templates"
cp "$work"/llama.cpp/models/ggml-vocab-*.gguf* "$DEST/vocab/"
cp -r "$work"/llama.cpp/models/templates/. "$DEST/templates/"
touch "$STAMP"
echo "fetch: $(ls "$DEST/vocab" | wc -l) vocab files, $(ls "$DEST/templates" | wc -l) templates in $DEST"
