// Smoke test of the scalar quantization reference (full tests follow).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tensor/quant_ref.h"

using namespace troupe;

TEST(QuantRefSmoke, RoundTripAndDots) {
    const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                           DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K,
                           DType::Q6_K, DType::Q8_1, DType::Q8_K};
    const int64_t n = 512;
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(n), w(n), back(n);
    for (auto& v : x) v = nd(rng);
    for (auto& v : w) v = nd(rng);
    for (DType t : types) {
        std::vector<uint8_t> q(row_bytes(t, n));
        quantize_row(t, w.data(), q.data(), n);
        dequantize_row(t, q.data(), back.data(), n);
        double err = 0, ref = 0;
        for (int64_t i = 0; i < n; ++i) {
            err += (back[i] - w[i]) * (back[i] - w[i]);
            ref += w[i] * w[i];
        }
        EXPECT_LT(std::sqrt(err / ref), 0.12) << type_name(t);
        if (t == DType::Q8_1 || t == DType::Q8_K) continue;
        double exact = 0;
        for (int64_t i = 0; i < n; ++i) exact += double(back[i]) * x[i];
        EXPECT_NEAR(vec_dot_f32(t, q.data(), x.data(), n), exact, 1e-3) << type_name(t);
        const DType at = act_type(t);
        std::vector<uint8_t> xa(row_bytes(at, n));
        quantize_row(at, x.data(), xa.data(), n);
        std::vector<float> xb(n);
        dequantize_row(at, xa.data(), xb.data(), n);
        double dq = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
            dq += double(back[i]) * xb[i];
            mag += std::fabs(double(back[i]) * xb[i]);
        }
        EXPECT_NEAR(vec_dot_act(t, q.data(), xa.data(), n), dq, 2e-3 * mag) << type_name(t);
    }
}
