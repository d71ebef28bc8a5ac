// Helpers for kernel tests: run a check on every compiled SIMD target, random inputs with a
// fixed seed, and buffers at deliberately misaligned addresses.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/targets.h"

namespace troupe::test {

// Calls fn() once per SIMD target this CPU can run, with that target forced.
template <class Fn>
void for_each_target(Fn&& fn) {
    for (const kernels::SimdTarget& t : kernels::available_targets()) {
        SCOPED_TRACE("target " + t.name);
        kernels::ScopedTarget forced(t.id);
        fn();
    }
}

// Sizes from 0 to beyond two of the widest vectors (16 floats), odd ones, and model shapes.
inline std::vector<int64_t> test_sizes() {
    std::vector<int64_t> s;
    for (int64_t n = 0; n <= 40; ++n) s.push_back(n);
    for (int64_t n : {47, 63, 64, 65, 100, 127, 288, 576, 1000, 1536}) s.push_back(n);
    return s;
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// n elements of T starting `offset` elements (or bytes, for byte types) past a 64-byte
// boundary, so kernels see unaligned pointers. Copy data in with assign().
template <class T>
class OffsetBuffer {
  public:
    OffsetBuffer(size_t n, size_t offset) : storage_((n + offset) * sizeof(T) + 128), n_(n) {
        uintptr_t base = reinterpret_cast<uintptr_t>(storage_.data());
        base = (base + 63) / 64 * 64 + offset * sizeof(T);
        ptr_ = reinterpret_cast<T*>(base);
    }
    void assign(const std::vector<T>& v) {
        if (!v.empty()) std::memcpy(ptr_, v.data(), v.size() * sizeof(T));
    }
    std::vector<T> to_vector() const { return std::vector<T>(ptr_, ptr_ + n_); }
    T* data() { return ptr_; }
    size_t size() const { return n_; }

  private:
    std::vector<uint8_t> storage_;
    size_t n_;
    T* ptr_;
};

// |a - b| <= abs_tol + rel_tol * |b|, element by element, with the first failure reported.
inline void expect_near_all(const float* got, const float* want, size_t n, float abs_tol,
                            float rel_tol, const char* what) {
    for (size_t i = 0; i < n; ++i) {
        const float tol = abs_tol + rel_tol * std::fabs(want[i]);
        if (!(std::fabs(got[i] - want[i]) <= tol)) {
            ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", reference " << want[i]
                          << " (tolerance " << tol << ", n " << n << ")";
            return;
        }
    }
}

}  // namespace troupe::test
