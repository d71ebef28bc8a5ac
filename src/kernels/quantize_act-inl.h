// Conversion of float activation rows to act_type(weight type), in the layout of
// matmul_act.h. Bit-identical to tensor/quant_ref's quantize_row: same scale arithmetic,
// same rounding (halves away from zero for Q8_0/Q8_1, to even for Q8_K), same clamping.
#if defined(TROUPE_KERNELS_QUANTIZE_ACT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TROUPE_KERNELS_QUANTIZE_ACT_INL_H_
#undef TROUPE_KERNELS_QUANTIZE_ACT_INL_H_
#else
#define TROUPE_KERNELS_QUANTIZE_ACT_INL_H_
#endif

#include <cmath>
#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "kernels/matmul_act.h"
#include "kernels/simd-inl.h"
#include "util/fp16.h"

HWY_BEFORE_NAMESPACE();
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// std::round: to nearest, halves away from zero (exact: v - trunc(v) is exact in float).
template <class D>
HWY_INLINE hn::Vec<D> RoundHalfAway(D d, hn::Vec<D> v) {
    const auto t = hn::Trunc(v);
    const auto frac = hn::Abs(hn::Sub(v, t));
    const auto step = hn::CopySign(hn::Set(d, 1.0f), v);
    return hn::IfThenElse(hn::Ge(frac, hn::Set(d, 0.5f)), hn::Add(t, step), t);
}

// std::round for |v| < 256 (the activations scaled to at most 127): trunc(v + pred(0.5) with
// v's sign), three instructions instead of RoundHalfAway's seven (checked against std::round
// on every float of magnitude below 256).
template <class D>
HWY_INLINE hn::Vec<D> RoundHalfAwaySmall(D d, hn::Vec<D> v) {
    return hn::Trunc(hn::Add(v, hn::CopySign(hn::Set(d, 0.49999997f), v)));
}

// Q8_0 / Q8_1: per block of 32, d = amax / 127, q = round(x / d) in [-127, 127]. The blocks
// go in groups of kQ8Group: first every block's maximum (independent chains), then the
// group's scales as vectors (d, its f16 rounding, 1 / d), then each block's values; a block
// at a time, the scalar steps between the maximum and the values made the conversion a
// chain of latencies (18 blocks of 576 values took 380 ns).
template <bool kQ81>
void QuantizeRowQ8(const float* HWY_RESTRICT x, uint8_t* HWY_RESTRICT row,
                   const ops::ActLayout& l) {
    const hn::CappedTag<float, QK8_0> df;
    const hn::RebindToSigned<decltype(df)> di;
    const hn::Rebind<int8_t, decltype(df)> d8;
    const hn::ScalableTag<float> dv;  // the group's scales
    const size_t N = hn::Lanes(df);
    constexpr int64_t kQ8Group = 16;
    auto* qs = reinterpret_cast<int8_t*>(row);
    auto* scale = reinterpret_cast<float*>(row + l.scale_offset);
    auto* sums = row + l.sum_offset;
    const auto lo = hn::Set(df, -127.0f), hi = hn::Set(df, 127.0f);
    HWY_ALIGN float amax[kQ8Group], inv[kQ8Group], rounded[kQ8Group];
    for (int64_t b0 = 0; b0 < l.n_blocks; b0 += kQ8Group) {
        const int64_t nb = l.n_blocks - b0 < kQ8Group ? l.n_blocks - b0 : kQ8Group;
        for (int64_t b = 0; b < kQ8Group; ++b) {
            if (b >= nb) {
                amax[b] = 0.0f;
                continue;
            }
            const float* xb = x + (b0 + b) * QK8_0;
            auto vmax = hn::Zero(df);
            for (size_t i = 0; i < QK8_0; i += N)
                vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xb + i)));
            amax[b] = ReduceMax(df, vmax);
        }
        for (size_t i = 0; i < size_t(kQ8Group); i += hn::Lanes(dv)) {
            const auto d = hn::Div(hn::Load(dv, amax + i), hn::Set(dv, 127.0f));
            hn::Store(F32FromF16Bits(dv, F16BitsFromF32(dv, d)), dv, rounded + i);
            hn::Store(hn::IfThenZeroElse(hn::Eq(d, hn::Zero(dv)), hn::Div(hn::Set(dv, 1.0f), d)),
                      dv, inv + i);
        }
        std::memcpy(scale + b0, rounded, size_t(nb) * sizeof(float));
        for (int64_t b = 0; b < nb; ++b) {
            const float* xb = x + (b0 + b) * QK8_0;
            const auto vid = hn::Set(df, inv[b]);
            auto vsum = hn::Zero(di);
            for (size_t i = 0; i < QK8_0; i += N) {
                const auto r = RoundHalfAwaySmall(df, hn::Mul(hn::LoadU(df, xb + i), vid));
                const auto q = hn::ConvertTo(di, hn::Min(hn::Max(r, lo), hi));
                vsum = hn::Add(vsum, q);
                hn::StoreU(hn::DemoteTo(d8, q), d8, qs + (b0 + b) * QK8_0 + i);
            }
            const int32_t sum = ReduceSum(di, vsum);
            const int64_t k = b0 + b;
            if constexpr (kQ81) {
                // d unrounded (amax / 127), as the reference's s = d * sum.
                reinterpret_cast<float*>(sums)[k] =
                    fp16_to_fp32(fp32_to_fp16(float(sum) * (amax[b] / 127.0f)));
            } else {
                reinterpret_cast<int32_t*>(sums)[k] = sum;
                reinterpret_cast<int32_t*>(row + l.corr_offset)[k] = -128 * sum;
            }
        }
    }
}

// Q8_K: per block of 256, iscale = -127 / max (max: the first value of largest magnitude,
// with its sign), q = nearest-even(iscale * x) in [-128, 127], d = 1 / iscale, and the sums
// of each 16 values.
void QuantizeRowQ8K(const float* HWY_RESTRICT x, uint8_t* HWY_RESTRICT row,
                    const ops::ActLayout& l) {
    const hn::CappedTag<float, 16> df;
    const hn::RebindToSigned<decltype(df)> di;
    const hn::Rebind<int8_t, decltype(df)> d8;
    const size_t N = hn::Lanes(df);
    auto* qs = reinterpret_cast<int8_t*>(row);
    auto* scale = reinterpret_cast<float*>(row + l.scale_offset);
    auto* bsums = reinterpret_cast<int32_t*>(row + l.sum_offset);
    const auto lo = hn::Set(df, -128.0f), hi = hn::Set(df, 127.0f);
    for (int64_t b = 0; b < l.n_blocks; ++b) {
        const float* xb = x + b * QK_K;
        auto vmax = hn::Zero(df);
        for (size_t i = 0; i < QK_K; i += N) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xb + i)));
        const float amax = ReduceMax(df, vmax);
        if (amax == 0.0f) {
            std::memset(qs + b * QK_K, 0, QK_K);
            std::memset(bsums + b * (QK_K / 16), 0, (QK_K / 16) * sizeof(int32_t));
            scale[b] = 0.0f;
            continue;
        }
        float max = 0.0f;
        for (int i = 0; i < QK_K; ++i)
            if (std::fabs(xb[i]) == amax) {
                max = xb[i];
                break;
            }
        const float iscale = -127.0f / max;
        const auto vis = hn::Set(df, iscale);
        for (int g = 0; g < QK_K / 16; ++g) {
            auto vsum = hn::Zero(di);
            for (size_t i = 0; i < 16; i += N) {
                const size_t at = size_t(16 * g) + i;
                const auto r = hn::Round(hn::Mul(vis, hn::LoadU(df, xb + at)));
                const auto q = hn::ConvertTo(di, hn::Min(hn::Max(r, lo), hi));
                vsum = hn::Add(vsum, q);
                hn::StoreU(hn::DemoteTo(d8, q), d8, qs + b * QK_K + at);
            }
            bsums[b * (QK_K / 16) + g] = ReduceSum(di, vsum);
        }
        scale[b] = 1.0f / iscale;
    }
}

// The floats of x rounded to f16 (or bf16) and back: the values the reference multiplies.
void RoundRowF16(const float* HWY_RESTRICT x, uint8_t* HWY_RESTRICT row, int64_t n, bool bf16) {
    const hn::ScalableTag<float> df;
    const size_t N = hn::Lanes(df);
    auto* out = reinterpret_cast<float*>(row);
    auto round = [&](auto v) {
        return bf16 ? F32FromBF16Bits(df, BF16BitsFromF32(df, v))
                    : F32FromF16Bits(df, F16BitsFromF32(df, v));
    };
    size_t i = 0;
    for (; i + N <= size_t(n); i += N) hn::StoreU(round(hn::LoadU(df, x + i)), df, out + i);
    if (i < size_t(n))
        StoreTail(df, round(LoadTail(df, x + i, size_t(n) - i)), out + i, size_t(n) - i);
}

// One activation row of l.n_in floats into l's layout.
void QuantizeActRow(const float* HWY_RESTRICT x, uint8_t* HWY_RESTRICT row,
                    const ops::ActLayout& l) {
    switch (l.type) {
        case DType::Q8_0:
            return QuantizeRowQ8<false>(x, row, l);
        case DType::Q8_1:
            return QuantizeRowQ8<true>(x, row, l);
        case DType::Q8_K:
            return QuantizeRowQ8K(x, row, l);
        case DType::F16:
            return RoundRowF16(x, row, l.n_in, false);
        case DType::BF16:
            return RoundRowF16(x, row, l.n_in, true);
        default:
            std::memcpy(row, x, size_t(l.n_in) * sizeof(float));
            return;
    }
}

}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
