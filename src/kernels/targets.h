// Which SIMD targets the kernels were compiled for, which one runs, and a way to force one
// (tests run every kernel on every target; benchmarks compare them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::kernels {

struct SimdTarget {
    int64_t id = 0;    // Highway's target bit (HWY_AVX2, HWY_NEON, ...)
    std::string name;  // "AVX3_DL", "AVX2", "NEON", ...
};

// Targets compiled into the kernels that this CPU can run, best first.
std::vector<SimdTarget> available_targets();

// The target the dispatched ops use now (the best available unless a ScopedTarget is alive).
SimdTarget active_target();

// Whether the batched Q8_0 products of interleaved weights run on Intel AMX tiles
// (kernels/amx.h: Sapphire Rapids and later, the AVX3_DL target active, TROUPE_AMX not "0").
bool amx_in_use();

// The active target's name, with " + AMX" when amx_in_use(): what benchmarks report.
std::string active_units();

// While alive, every dispatched op runs the given target's kernels (which must be in
// available_targets()). Not thread-safe: for tests and benchmarks, one at a time.
class ScopedTarget {
  public:
    explicit ScopedTarget(int64_t target_id);
    ~ScopedTarget();
    ScopedTarget(const ScopedTarget&) = delete;
    ScopedTarget& operator=(const ScopedTarget&) = delete;
};

}  // namespace troupe::kernels
