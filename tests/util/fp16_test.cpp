// util/fp16.h: conversions between float and IEEE half / bfloat16, checked exhaustively where
// the domain is small (all 65536 16-bit patterns) and against an independent reference
// (exact comparisons in double, ties to even) on sweeps of the float range.
#include "util/fp16.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace troupe {
namespace {

bool half_is_nan(uint16_t h) {
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}
bool bf16_is_nan(uint16_t h) {
    return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
}

// Value of a half from its definition.
double half_value(uint16_t h) {
    const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (exp == 31) return mant ? NAN : sign * INFINITY;
    if (exp == 0) return sign * std::ldexp(double(mant), -24);
    return sign * std::ldexp(double(1024 + mant), exp - 25);
}

// Reference float -> half: the nearest half, ties to the even pattern; |f| >= 65520 (the
// midpoint between 65504 and the next step 65536) overflows to infinity. Not for NaN.
uint16_t ref_fp32_to_fp16(float f) {
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    const double a = std::fabs(double(f));
    if (a >= 65520.0) return sign | 0x7c00;
    uint16_t lo = 0, hi = 0x7bff;  // the largest positive finite half <= a
    while (lo < hi) {
        const uint16_t mid = uint16_t((lo + hi + 1) / 2);
        if (half_value(mid) <= a)
            lo = mid;
        else
            hi = uint16_t(mid - 1);
    }
    const double below = a - half_value(lo), above = half_value(uint16_t(lo + 1)) - a;
    const uint16_t pick = below < above   ? lo
                          : above < below ? uint16_t(lo + 1)
                                          : (lo & 1 ? uint16_t(lo + 1) : lo);
    return sign | pick;
}

// |value| of a bf16 pattern, the infinity pattern counting as the next step 2^128 (the rounding
// boundary to infinity is the midpoint between the largest bf16 and 2^128).
double bf16_magnitude(uint16_t h) {
    if ((h & 0x7fff) == 0x7f80) return std::ldexp(1.0, 128);
    return std::fabs(double(bf16_to_fp32(h)));
}

// Reference float -> bf16 (finite input): candidates are the truncation and the next pattern.
uint16_t ref_fp32_to_bf16(float f) {
    const uint16_t lo = uint16_t(float_to_bits(f) >> 16), hi = uint16_t(lo + 1);
    const double a = std::fabs(double(f));
    const double below = a - bf16_magnitude(lo), above = bf16_magnitude(hi) - a;
    if (below < above) return lo;
    if (above < below) return hi;
    return (lo & 1) ? hi : lo;
}

// Floats to check: a sweep over all bit patterns, the midpoints between neighbouring 16-bit
// values and their float neighbours, and random values.
std::vector<float> probe_floats(bool half) {
    std::vector<float> v;
    for (uint64_t u = 0; u < (1ull << 32); u += 4093) v.push_back(bits_to_float(uint32_t(u)));
    for (uint32_t h = 0; h < (half ? 0x7c00u : 0x7f80u); ++h) {
        const double lo = half ? half_value(uint16_t(h)) : bf16_to_fp32(uint16_t(h));
        const double hi = half ? (h == 0x7bff ? 65536.0 : half_value(uint16_t(h + 1)))
                               : bf16_magnitude(uint16_t(h + 1));
        const float mid = float((lo + hi) / 2);  // exact: one more bit than the 16-bit format
        for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
            v.push_back(m);
            v.push_back(-m);
        }
    }
    std::mt19937 rng(42);
    for (int i = 0; i < 200000; ++i) v.push_back(bits_to_float(uint32_t(rng())));
    return v;
}

TEST(Fp16, EveryHalfConvertsToItsValueAndBack) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = fp16_to_fp32(uint16_t(h));
        if (half_is_nan(uint16_t(h))) {
            EXPECT_TRUE(std::isnan(f)) << h;
            EXPECT_TRUE(half_is_nan(fp32_to_fp16(f))) << h;
            EXPECT_EQ(fp32_to_fp16(f) & 0x8000, h & 0x8000) << h;
            continue;
        }
        EXPECT_EQ(double(f), half_value(uint16_t(h))) << h;
        EXPECT_EQ(fp32_to_fp16(f), h) << h;
    }
}

TEST(Fp16, RoundsToNearestEvenWithOverflowAndSubnormals) {
    EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);      // halfway, to the even 1.0
    EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);  // halfway, to the even mantissa 2
    EXPECT_EQ(fp32_to_fp16(std::nextafter(1.0f + 0x1p-11f, 2.0f)), 0x3c01);
    EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
    EXPECT_EQ(fp32_to_fp16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
    EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // halfway to 2^16: overflows to infinity
    EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00);
    EXPECT_EQ(fp32_to_fp16(-FLT_MAX), 0xfc00);
    EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xfc00);
    EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
    EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);      // smallest subnormal
    EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);      // halfway to it: to the even zero
    EXPECT_EQ(fp32_to_fp16(3 * 0x1p-25f), 0x0002);  // halfway between 1 and 2 units: 2
    EXPECT_EQ(fp32_to_fp16(0x1p-26f), 0x0000);
    EXPECT_EQ(fp32_to_fp16(1023 * 0x1p-24f), 0x03ff);     // largest subnormal
    EXPECT_EQ(fp32_to_fp16(1023.5f * 0x1p-24f), 0x0400);  // halfway: to the even smallest normal
    EXPECT_EQ(fp32_to_fp16(0x1p-14f), 0x0400);
    EXPECT_TRUE(half_is_nan(fp32_to_fp16(NAN)));
    EXPECT_TRUE(half_is_nan(fp32_to_fp16(bits_to_float(0x7f800001u))));  // payload below bit 13
}

TEST(Fp16, MatchesTheReferenceRoundingOnSweeps) {
    int n_bad = 0;
    for (float f : probe_floats(true)) {
        if (std::isnan(f)) continue;
        if (fp32_to_fp16(f) != ref_fp32_to_fp16(f) && n_bad++ < 5)
            ADD_FAILURE() << "bits " << std::hex << float_to_bits(f) << ": " << fp32_to_fp16(f)
                          << " != " << ref_fp32_to_fp16(f);
    }
}

#if defined(__FLT16_MAX__)
TEST(Fp16, MatchesTheCompilersFloat16) {
    std::mt19937 rng(7);
    for (int i = 0; i < 1000000; ++i) {
        const float f = bits_to_float(uint32_t(rng()));
        if (std::isnan(f)) continue;
        const _Float16 h = static_cast<_Float16>(f);
        uint16_t bits;
        std::memcpy(&bits, &h, 2);
        ASSERT_EQ(fp32_to_fp16(f), bits) << std::hex << float_to_bits(f);
    }
}
#endif

TEST(Bf16, EveryBf16ConvertsToFloatAndBack) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = bf16_to_fp32(uint16_t(h));
        EXPECT_EQ(float_to_bits(f), h << 16);
        if (bf16_is_nan(uint16_t(h))) {
            EXPECT_TRUE(bf16_is_nan(fp32_to_bf16(f))) << h;
            EXPECT_EQ(fp32_to_bf16(f) & 0x8000, h & 0x8000) << h;
        } else {
            EXPECT_EQ(fp32_to_bf16(f), h) << h;
        }
    }
}

TEST(Bf16, RoundsToNearestEven) {
    EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);      // halfway, to the even 1.0
    EXPECT_EQ(fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);  // halfway, to the even mantissa
    EXPECT_EQ(fp32_to_bf16(std::nextafter(1.0f + 0x1p-8f, 2.0f)), 0x3f81);
    EXPECT_EQ(fp32_to_bf16(FLT_MAX), 0x7f80);  // rounds up past the largest bf16: infinity
    EXPECT_EQ(fp32_to_bf16(-INFINITY), 0xff80);
    EXPECT_EQ(fp32_to_bf16(bits_to_float(0x00008000u)), 0x0000);  // subnormal tie, to even
    EXPECT_EQ(fp32_to_bf16(bits_to_float(0x00018000u)), 0x0002);
    EXPECT_TRUE(bf16_is_nan(fp32_to_bf16(bits_to_float(0x7f800001u))));  // stays NaN
    EXPECT_TRUE(bf16_is_nan(fp32_to_bf16(NAN)));
    int n_bad = 0;
    for (float f : probe_floats(false)) {
        if (std::isnan(f) || std::isinf(f)) continue;
        if (fp32_to_bf16(f) != ref_fp32_to_bf16(f) && n_bad++ < 5)
            ADD_FAILURE() << "bits " << std::hex << float_to_bits(f);
    }
}

}  // namespace
}  // namespace troupe
