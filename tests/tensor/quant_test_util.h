// Shared helpers of the quantization tests: test data of several distributions, per-type
// error bounds, and float/double dot products.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tensor/quant_ref.h"
#include "tensor/types.h"

namespace troupe::test {

// Every type the reference encodes and decodes.
inline const std::vector<DType>& all_ref_types() {
    static const std::vector<DType> types = {
        DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
        DType::Q8_0, DType::Q8_1, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K};
    return types;
}

// The weight types (those with a dot product).
inline const std::vector<DType>& weight_types() {
    static const std::vector<DType> types = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,
                                             DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                                             DType::Q4_K, DType::Q5_K, DType::Q6_K};
    return types;
}

enum class Dist {
    Normal,
    Uniform,
    Positive,
    Laplace,
    Student3,
    Outliers,
    Bimodal,
    Sparse,
    MixedScale
};

inline const std::vector<Dist>& all_dists() {
    static const std::vector<Dist> d = {Dist::Normal,  Dist::Uniform,  Dist::Positive,
                                        Dist::Laplace, Dist::Student3, Dist::Outliers,
                                        Dist::Bimodal, Dist::Sparse,   Dist::MixedScale};
    return d;
}

inline std::string dist_name(Dist d) {
    const char* names[] = {"normal",   "uniform", "positive", "laplace",    "student3",
                           "outliers", "bimodal", "sparse",   "mixed-scale"};
    return names[int(d)];
}

// n values of distribution d (deterministic for a seed). MixedScale multiplies each run of 16
// values by a factor between 1e-3 and 1, so sub-blocks of very different ranges share a block.
inline std::vector<float> make_data(Dist d, int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    std::exponential_distribution<float> expo(1.0f);
    std::student_t_distribution<float> student(3.0f);
    std::vector<float> x(static_cast<size_t>(n));
    float group_scale = 1.0f;
    for (int64_t i = 0; i < n; ++i) {
        float& v = x[size_t(i)];
        switch (d) {
            case Dist::Normal:
                v = normal(rng);
                break;
            case Dist::Uniform:
                v = uni(rng);
                break;
            case Dist::Positive:
                v = 1.0f + uni(rng);
                break;
            case Dist::Laplace:
                v = expo(rng) * (uni(rng) < 0 ? -1.0f : 1.0f);
                break;
            case Dist::Student3:
                v = student(rng);
                break;
            case Dist::Outliers:
                v = i % 97 == 5 ? 5.0f : 0.01f * normal(rng);
                break;
            case Dist::Bimodal:
                v = (uni(rng) < 0 ? -3.0f : 3.0f) + 0.1f * normal(rng);
                break;
            case Dist::Sparse:
                v = i % 13 == 0 ? normal(rng) : 0.0f;
                break;
            case Dist::MixedScale:
                if (i % 16 == 0) group_scale = std::pow(10.0f, -3.0f * (0.5f + 0.5f * uni(rng)));
                v = group_scale * normal(rng);
                break;
        }
    }
    return x;
}

inline std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
    std::vector<uint8_t> q(row_bytes(t, int64_t(x.size())));
    quantize_row(t, x.data(), q.data(), int64_t(x.size()));
    return q;
}

inline std::vector<float> dequantize(DType t, const std::vector<uint8_t>& q, int64_t n) {
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(t, q.data(), y.data(), n);
    return y;
}

inline double dot_double(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
    return s;
}

inline double dot_abs(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += std::fabs(double(a[i]) * double(b[i]));
    return s;
}

// Bound on |float sum - exact sum| for n float additions of terms whose magnitudes add to
// `mag`: (n + 8) * 2^-24 * mag (recursive summation, plus a few roundings per term).
inline double float_sum_bound(int64_t n, double mag) {
    return double(n + 8) * 0x1p-24 * mag;
}

}  // namespace troupe::test
