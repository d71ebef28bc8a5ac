#!/usr/bin/env bash
# Builds the kernel tests for arm64 (NEON) with the cross compiler and runs them under qemu:
# the same Highway source as x86, checked on the target phones use. Needs the packages
# g++-aarch64-linux-gnu and qemu-user (scripts/setup.sh --arm64 installs them).
#   scripts/check-arm64-kernels.sh            build in build-arm64/ and run every test
set -euo pipefail
cd "$(dirname "$0")/.."
command -v aarch64-linux-gnu-g++ >/dev/null && command -v qemu-aarch64 >/dev/null || {
  echo "check-arm64-kernels: needs g++-aarch64-linux-gnu and qemu-user (scripts/setup.sh --arm64)" >&2
  exit 1
}
out=build-arm64
mkdir -p "$out/include"
ln -sfn /usr/include/hwy "$out/include/hwy"  # Highway is header-only for a static NEON build
gtest=/usr/src/googletest/googletest
CXX=(aarch64-linux-gnu-g++ -std=c++20 -O2 -Wall -Wextra -Wno-unused-parameter -Isrc -Itests
     -I"$out/include" -I"$gtest/include" -I"$gtest")

# libhwy's three run-time target functions, for a build whose only target is NEON.
cat > "$out/hwy_static_targets.cpp" <<'CPP'
#include <hwy/targets.h>
namespace hwy {
namespace {
int64_t g_forced = 0;
}
int64_t SupportedTargets() { return g_forced ? g_forced : HWY_TARGETS; }
void SetSupportedTargetsForTest(int64_t targets) { g_forced = targets; }
ChosenTarget& GetChosenTarget() {
    static ChosenTarget chosen;
    return chosen;
}
}  // namespace hwy
CPP

# The newest header of the sources: an object older than it is rebuilt too (the kernels live
# in -inl.h headers, which the .cpp files of the targets include).
newest_header=$(ls -t $(find src tests -name '*.h') | head -1)
compile() {  # source object
  [ "$2" -nt "$1" ] && [ "$2" -nt "$newest_header" ] || "${CXX[@]}" -c "$1" -o "$2"
}
objs=()
for src in src/kernels/*.cpp src/tensor/*.cpp src/util/large_buffer.cpp; do
  obj="$out/$(basename "${src%.cpp}").o"
  compile "$src" "$obj"
  objs+=("$obj")
done
"${CXX[@]}" -include src/kernels/simd_targets.h -c "$out/hwy_static_targets.cpp" -o "$out/hwy_static_targets.o"
compile "$gtest/src/gtest-all.cc" "$out/gtest-all.o"
compile "$gtest/src/gtest_main.cc" "$out/gtest_main.o"
status=0
for test in tests/kernels/*_test.cpp; do
  name=$(basename "${test%.cpp}")
  compile "$test" "$out/$name.o"
  "${CXX[@]}" -static "$out/$name.o" "${objs[@]}" "$out/hwy_static_targets.o" "$out/gtest-all.o" \
    "$out/gtest_main.o" -pthread -o "$out/$name" 2> >(grep -v "getaddrinfo\|MakeConnection\|gtest-all.cc:" >&2 || true)
  if qemu-aarch64 "$out/$name" --gtest_brief=1 > "$out/$name.log" 2>&1; then
    echo "arm64 $name: passed"
  else
    echo "arm64 $name: FAILED (see $out/$name.log)"
    status=1
  fi
done
exit $status
