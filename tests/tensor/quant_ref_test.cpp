// Round-trip error bounds, edge cases and dot products of the scalar quantization reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "quant_test_util.h"
#include "util/fp16.h"

namespace troupe {
namespace {

using test::Dist;

int64_t block_size(DType t) {
    return traits(t).block_size;
}

// The "block" an error bound refers to: the group that shares one scale (a K-quant super-block
// for the K types, one element for the float types).
int64_t scale_group(DType t) {
    return block_size(t);
}

// Largest allowed |dequantize(quantize(x))_i - x_i|, derived from each type's levels. `g` is
// the group of values sharing the scale of element i; amax = max |g|, range = max g - min g.
//   F16/BF16: rounding to 11 / 8 significant bits (half a unit in the last place).
//   Q8_0, Q8_1: 255 levels over [-amax, amax], step amax/127: half a step, plus the f16
//     rounding of d (at most 2^-11 relative) times |q| <= 127.
//   Q8_K: the same with an f32 scale.
//   Q4_0: 16 levels d*(q-8) with d = -max/8: the signed max is a level, the far end of the range
//     stops at 7/8 amax, so values there lose a whole step (amax/8); plus f16 rounding of d.
//   Q5_0: 32 levels, the same argument with step amax/16.
//   Q4_1, Q5_1: 16 / 32 levels from min to max: half a step (range/30, range/62), plus the f16
//     rounding of d (times the top level) and of m.
//   Q4_K, Q5_K, Q6_K: per sub-block levels fitted by search, then 6-bit (Q6_K: 8-bit) sub-block
//     scales: at most one step of a sub-block spanning the whole range of the super-block
//     (2 amax/15, 2 amax/31, amax/32): half a step for rounding, half for the quantized scales
//     and the search's trade-offs.
double error_bound(DType t, const float* g, int64_t n_g, float xi) {
    float amax = 0, mn = g[0], mx = g[0];
    for (int64_t k = 0; k < n_g; ++k) {
        amax = std::max(amax, std::fabs(g[k]));
        mn = std::min(mn, g[k]);
        mx = std::max(mx, g[k]);
    }
    const double range = double(mx) - mn, a = amax, h = 0x1p-11;
    const double slack = 1e-6 * a;  // float rounding in the encoders themselves
    switch (t) {
        case DType::F32:
            return 0;
        case DType::F16:
            return std::fabs(xi) * h + 0x1p-25;
        case DType::BF16:
            return std::fabs(xi) * 0x1p-8;
        case DType::Q8_0:
        case DType::Q8_1:
            return a * (1.0 / 254 + h) + slack;
        case DType::Q8_K:
            return a / 254 + slack;
        case DType::Q4_0:
            return a * (1.0 / 8 + h) + slack;
        case DType::Q5_0:
            return a * (1.0 / 16 + h) + slack;
        case DType::Q4_1:
            return range / 30 + (range + std::fabs(mn)) * h + slack;
        case DType::Q5_1:
            return range / 62 + (range + std::fabs(mn)) * h + slack;
        case DType::Q4_K:
            return a * 2 / 15 + slack;
        case DType::Q5_K:
            return a * 2 / 31 + slack;
        case DType::Q6_K:
            return a / 32 + slack;
        default:
            return 0;
    }
}

// Checks every element of x against its bound; returns the relative RMS error.
double check_round_trip(DType t, const std::vector<float>& x, const std::string& what) {
    const int64_t n = int64_t(x.size());
    const std::vector<float> y = test::dequantize(t, test::quantize(t, x), n);
    const int64_t g = scale_group(t);
    double e2 = 0, x2 = 0;
    int n_bad = 0;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t g0 = i / g * g;
        const double bound = error_bound(t, x.data() + g0, g, x[size_t(i)]);
        const double err = std::fabs(double(y[size_t(i)]) - x[size_t(i)]);
        if (!(err <= bound) && n_bad++ < 3) {
            ADD_FAILURE() << type_name(t) << " " << what << ": element " << i << " = " << x[i]
                          << " decoded as " << y[i] << ", error " << err << " > bound " << bound;
        }
        e2 += err * err;
        x2 += double(x[size_t(i)]) * x[size_t(i)];
    }
    return x2 > 0 ? std::sqrt(e2 / x2) : 0.0;
}

class QuantRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(QuantRoundTrip, WithinBoundOnEveryDistribution) {
    const DType t = GetParam();
    const int64_t bs = std::max<int64_t>(block_size(t), 32);
    for (Dist d : test::all_dists()) {
        for (int64_t n : {bs, 16 * bs}) {  // one block, many blocks
            for (uint32_t seed = 1; seed <= 4; ++seed)
                check_round_trip(t, test::make_data(d, n, seed),
                                 test::dist_name(d) + " n=" + std::to_string(n));
        }
    }
}

// Quality guard: relative RMS error on Gaussian data, each bound ~10% above what the encoder
// reaches (and what llama.cpp's reference encoders reach: ours match them byte for byte).
TEST_P(QuantRoundTrip, GaussianRmsError) {
    const DType t = GetParam();
    const double bound = [&] {
        switch (t) {
            case DType::F32:
                return 0.0;
            case DType::F16:
                return 2.3e-4;
            case DType::BF16:
                return 1.85e-3;
            case DType::Q8_0:
            case DType::Q8_1:
                return 0.0060;
            case DType::Q8_K:
                return 0.0078;
            case DType::Q4_0:
                return 0.095;
            case DType::Q4_1:
                return 0.086;
            case DType::Q5_0:
                return 0.047;
            case DType::Q5_1:
                return 0.042;
            case DType::Q4_K:
                return 0.078;
            case DType::Q5_K:
                return 0.040;
            case DType::Q6_K:
                return 0.0195;
            default:
                return 0.0;
        }
    }();
    const double rms = check_round_trip(t, test::make_data(Dist::Normal, 256 * 64, 11), "normal");
    EXPECT_LE(rms, bound) << type_name(t);
}

TEST_P(QuantRoundTrip, AllZerosDecodeToZeros) {
    const DType t = GetParam();
    const std::vector<float> x(size_t(2 * std::max<int64_t>(block_size(t), 32)), 0.0f);
    for (float v : test::dequantize(t, test::quantize(t, x), int64_t(x.size())))
        ASSERT_EQ(v, 0.0f) << type_name(t);
}

TEST_P(QuantRoundTrip, ConstantBlocks) {
    const DType t = GetParam();
    const int64_t n = std::max<int64_t>(block_size(t), 32);
    for (float c : {0.37f, -2.5f, 0.02f, 300.0f})
        check_round_trip(t, std::vector<float>(size_t(n), c), "constant " + std::to_string(c));
}

// One large value among small ones: within the bound everywhere; for the types whose signed
// maximum is an exact level (Q4_0, Q5_0, Q8_0, Q8_1, Q8_K) the outlier itself keeps its value
// up to the f16 rounding of the scale.
TEST_P(QuantRoundTrip, OneLargeOutlier) {
    const DType t = GetParam();
    const int64_t n = 4 * std::max<int64_t>(block_size(t), 32);
    for (float big : {100.0f, -100.0f}) {
        std::vector<float> x = test::make_data(Dist::Normal, n, 5);
        for (float& v : x) v *= 1e-3f;
        x[7] = big;
        check_round_trip(t, x, "outlier");
        const float got = test::dequantize(t, test::quantize(t, x), n)[7];
        if (t == DType::Q4_0 || t == DType::Q5_0 || t == DType::Q8_0 || t == DType::Q8_1 ||
            t == DType::Q8_K) {
            EXPECT_NEAR(got, big, 100.0 * 0x1p-11) << type_name(t);
        }
    }
}

// Non-finite and huge inputs give unspecified values in their own block but no crash or
// undefined behaviour (the sanitizer build checks), and do not leak into the next block.
TEST_P(QuantRoundTrip, NonFiniteInputsStayInTheirBlock) {
    const DType t = GetParam();
    const int64_t bs = std::max<int64_t>(block_size(t), 32);
    for (float bad : {NAN, INFINITY, -INFINITY, 3e38f}) {
        std::vector<float> x = test::make_data(Dist::Normal, 2 * bs, 9);
        x[3] = bad;
        const std::vector<float> y = test::dequantize(t, test::quantize(t, x), 2 * bs);
        const std::vector<float> tail(x.begin() + bs, x.end());
        check_round_trip(t, tail, "block after a non-finite one");
        for (int64_t i = bs; i < 2 * bs; ++i)
            ASSERT_EQ(y[size_t(i)],
                      test::dequantize(t, test::quantize(t, tail), bs)[size_t(i - bs)]);
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantRoundTrip, ::testing::ValuesIn(test::all_ref_types()),
                         [](const auto& info) { return std::string(type_name(info.param)); });

// Largest |offset| (minimum) of element i's block, for the types that add one; the two terms
// of a K-quant or Q4_1/Q5_1 dot can each be much larger than their difference.
double offset_bound(DType t, const uint8_t* row, int64_t i) {
    switch (t) {
        case DType::Q4_1:
            return std::fabs(fp16_to_fp32(reinterpret_cast<const BlockQ4_1*>(row)[i / 32].m));
        case DType::Q5_1:
            return std::fabs(fp16_to_fp32(reinterpret_cast<const BlockQ5_1*>(row)[i / 32].m));
        case DType::Q4_K:
            return fp16_to_fp32(reinterpret_cast<const BlockQ4_K*>(row)[i / QK_K].dmin) * 63.0;
        case DType::Q5_K:
            return fp16_to_fp32(reinterpret_cast<const BlockQ5_K*>(row)[i / QK_K].dmin) * 63.0;
        default:
            return 0.0;
    }
}

class QuantDot : public ::testing::TestWithParam<DType> {};

TEST_P(QuantDot, VecDotF32IsTheDotOfTheDequantizedRow) {
    const DType t = GetParam();
    for (int64_t nb : {1, 3, 16}) {
        const int64_t n = nb * std::max<int64_t>(block_size(t), 32);
        const std::vector<float> w = test::make_data(Dist::Normal, n, 21);
        const std::vector<float> x = test::make_data(Dist::Laplace, n, 22);
        const std::vector<uint8_t> q = test::quantize(t, w);
        const std::vector<float> wd = test::dequantize(t, q, n);
        const double exact = test::dot_double(wd, x);
        EXPECT_NEAR(vec_dot_f32(t, q.data(), x.data(), n), exact,
                    test::float_sum_bound(n, test::dot_abs(wd, x)))
            << type_name(t) << " n=" << n;
    }
}

// vec_dot_act equals the dot of the two dequantized rows up to float rounding. The tolerance
// counts the magnitude of both terms of the types with a minimum; for Q4_1/Q5_1 it adds the
// f16 rounding of Q8_1's s = d * sum(q), which is computed from d before its own rounding:
// at most 2^-10 |s| per block, times |m|.
TEST_P(QuantDot, VecDotActIsTheDotOfBothDequantizedRows) {
    const DType t = GetParam();
    const DType at = act_type(t);
    for (Dist d : {Dist::Normal, Dist::Positive, Dist::MixedScale}) {
        for (int64_t nb : {1, 4, 16}) {
            const int64_t n = nb * std::max<int64_t>(block_size(t), 32);
            const std::vector<uint8_t> q = test::quantize(t, test::make_data(d, n, 31));
            const std::vector<uint8_t> xa =
                test::quantize(at, test::make_data(Dist::Normal, n, 32));
            const std::vector<float> wd = test::dequantize(t, q, n);
            const std::vector<float> xd = test::dequantize(at, xa, n);
            double mag = 0, extra = 0;
            for (int64_t i = 0; i < n; ++i) {
                const double off = offset_bound(t, q.data(), i);
                mag += (std::fabs(wd[i]) + 2 * off) * std::fabs(xd[i]);
                if (t == DType::Q4_1 || t == DType::Q5_1)
                    extra += 0x1p-10 * 1.01 * off * std::fabs(xd[i]);
            }
            EXPECT_NEAR(vec_dot_act(t, q.data(), xa.data(), n), test::dot_double(wd, xd),
                        test::float_sum_bound(n, mag) + extra)
                << type_name(t) << " " << test::dist_name(d) << " n=" << n;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, QuantDot, ::testing::ValuesIn(test::weight_types()),
                         [](const auto& info) { return std::string(type_name(info.param)); });

}  // namespace
}  // namespace troupe
