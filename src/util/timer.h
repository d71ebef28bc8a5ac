// Monotonic time for traces and benchmarks.
#pragma once

#include <chrono>
#include <cstdint>

namespace troupe {

inline int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

inline double now_ms() {
    return double(now_us()) / 1000.0;
}

}  // namespace troupe
