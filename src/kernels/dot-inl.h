// 8-bit integer dot products, the inner step of every quantised matmul.
//
// All forms compute, for each int32 lane i of the result, acc[i] plus the sum of the four
// products of bytes 4i .. 4i+3 of a and b: the same lane grouping on every target, so
// callers can scale groups of lanes (sub-blocks) differently.
//
// - AVX3_DL: one VNNI instruction (vpdpbusd, unsigned x signed bytes).
// - AVX2 / AVX3: vpmaddubsw + vpmaddwd (unsigned x signed bytes into 16-bit pairs; exact as
//   long as 2 * max(a) * 127 < 2^15, i.e. a <= 128, which every caller guarantees).
// - Other targets (SSE4, NEON, SVE, ...): Highway's widening 16-bit multiply-add on the
//   sign- or zero-extended even and odd bytes.
//
// Signed x signed products use |a| and sign(b, a) (b must not be -128: activations are
// quantised to [-127, 127]).
#if defined(TROUPE_KERNELS_DOT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TROUPE_KERNELS_DOT_INL_H_
#undef TROUPE_KERNELS_DOT_INL_H_
#else
#define TROUPE_KERNELS_DOT_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
// Highway 1.0's AVX3_DL target string lacks AVX512-VNNI (its run-time check requires it).
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_GCC_ACTUAL
#pragma GCC target("avx512vnni")
#endif
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Whether DotU8I8 is one instruction whose unsigned operand may use all 8 bits (VNNI).
#if HWY_TARGET == HWY_AVX3_DL
constexpr bool kHasVnni = true;
#else
constexpr bool kHasVnni = false;
#endif

#if HWY_TARGET == HWY_AVX3_DL
template <class D32, class V8>
HWY_INLINE hn::Vec<D32> DotU8I8(D32 /*d32*/, V8 a, V8 b, hn::Vec<D32> acc) {
    if constexpr (sizeof(a.raw) == 64) {
        return hn::Vec<D32>{_mm512_dpbusd_epi32(acc.raw, a.raw, b.raw)};
    } else {
        // The EVEX form, written out: with Highway's target string (which enables AVX-VNNI)
        // the compiler would pick the VEX form, which Ice Lake does not have.
        auto r = acc.raw;
        asm("%{evex%} vpdpbusd %[b], %[a], %[r]" : [r] "+v"(r) : [a] "v"(a.raw), [b] "v"(b.raw));
        return hn::Vec<D32>{r};
    }
}
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
template <class D32, class V8>
HWY_INLINE hn::Vec<D32> DotU8I8(D32 /*d32*/, V8 a, V8 b, hn::Vec<D32> acc) {
    if constexpr (sizeof(a.raw) == 64) {
        const __m512i p16 = _mm512_maddubs_epi16(a.raw, b.raw);
        return hn::Vec<D32>{
            _mm512_add_epi32(acc.raw, _mm512_madd_epi16(p16, _mm512_set1_epi16(1)))};
    } else if constexpr (sizeof(a.raw) == 32) {
        const __m256i p16 = _mm256_maddubs_epi16(a.raw, b.raw);
        return hn::Vec<D32>{
            _mm256_add_epi32(acc.raw, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)))};
    } else {
        const __m128i p16 = _mm_maddubs_epi16(a.raw, b.raw);
        return hn::Vec<D32>{_mm_add_epi32(acc.raw, _mm_madd_epi16(p16, _mm_set1_epi16(1)))};
    }
}
#else
// Portable form: 16-bit products of the even bytes and of the odd bytes, each reduced to
// 32-bit pairs (RearrangeToOddPlusEven makes lane i the sum of 16-bit lanes 2i and 2i+1).
template <class D32, class V16>
HWY_INLINE hn::Vec<D32> PairDot16(D32 d32, V16 a, V16 b) {
    auto sum1 = hn::Zero(d32);
    const auto sum0 = hn::ReorderWidenMulAccumulate(d32, a, b, hn::Zero(d32), sum1);
    return hn::RearrangeToOddPlusEven(sum0, sum1);
}

template <class D32, class V8>
HWY_INLINE hn::Vec<D32> DotU8I8(D32 d32, V8 a, V8 b, hn::Vec<D32> acc) {
    const hn::Repartition<int16_t, D32> d16;
    const auto a16 = hn::BitCast(d16, a), b16 = hn::BitCast(d16, b);
    const auto a_even = hn::And(a16, hn::Set(d16, 0xFF));  // zero-extended
    const auto a_odd = hn::BitCast(
        d16, hn::ShiftRight<8>(hn::BitCast(hn::RebindToUnsigned<decltype(d16)>(), a16)));
    const auto b_even = hn::ShiftRight<8>(hn::ShiftLeft<8>(b16));  // sign-extended
    const auto b_odd = hn::ShiftRight<8>(b16);
    return hn::Add(acc, hn::Add(PairDot16(d32, a_even, b_even), PairDot16(d32, a_odd, b_odd)));
}
#endif

// acc + s * DotU8I8(a, b) lane by lane, for a <= 128 and |s| < 2^15 (the K-quants'
// sub-block scales). On x86 the scale rides in the vpmaddwd that widens the 16-bit pair
// sums (by s instead of by ones): the scale is a 16-bit lane (ScaleTag). Elsewhere DotU8I8's
// int32 sums are multiplied (the scale a 32-bit lane). Both are the exact integers.
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX2 || \
    HWY_TARGET == HWY_SSE4
constexpr bool kScaleInPairs = true;
template <class D32>
using ScaleTag = hn::Repartition<int16_t, D32>;

template <class D32, class V8>
HWY_INLINE hn::Vec<D32> ScaledDotU8I8(D32 /*d32*/, V8 a, V8 b, hn::Vec<ScaleTag<D32>> s,
                                      hn::Vec<D32> acc) {
#if HWY_TARGET != HWY_SSE4  // SSE4 has no 256- or 512-bit types
    if constexpr (sizeof(a.raw) == 64) {
        const __m512i p16 = _mm512_maddubs_epi16(a.raw, b.raw);
        return hn::Vec<D32>{_mm512_add_epi32(acc.raw, _mm512_madd_epi16(p16, s.raw))};
    } else if constexpr (sizeof(a.raw) == 32) {
        const __m256i p16 = _mm256_maddubs_epi16(a.raw, b.raw);
        return hn::Vec<D32>{_mm256_add_epi32(acc.raw, _mm256_madd_epi16(p16, s.raw))};
    } else
#endif
    {
        const __m128i p16 = _mm_maddubs_epi16(a.raw, b.raw);
        return hn::Vec<D32>{_mm_add_epi32(acc.raw, _mm_madd_epi16(p16, s.raw))};
    }
}
#else
constexpr bool kScaleInPairs = false;
template <class D32>
using ScaleTag = D32;

template <class D32, class V8>
HWY_INLINE hn::Vec<D32> ScaledDotU8I8(D32 d32, V8 a, V8 b, hn::Vec<D32> s, hn::Vec<D32> acc) {
    return hn::Add(acc, hn::Mul(DotU8I8(d32, a, b, hn::Zero(d32)), s));
}
#endif

// Signed x signed: |a| * sign(b, a). b must not hold -128.
template <class D32, class V8>
HWY_INLINE hn::Vec<D32> DotI8I8(D32 d32, V8 a, V8 b, hn::Vec<D32> acc) {
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
    if constexpr (sizeof(a.raw) <= 32) {
        // vpsignb exists for 128/256-bit vectors only.
        if constexpr (sizeof(a.raw) == 32) {
            return DotU8I8(d32, V8{_mm256_sign_epi8(a.raw, a.raw)},
                           V8{_mm256_sign_epi8(b.raw, a.raw)}, acc);
        } else {
            return DotU8I8(d32, V8{_mm_sign_epi8(a.raw, a.raw)}, V8{_mm_sign_epi8(b.raw, a.raw)},
                           acc);
        }
    } else {
        const hn::Repartition<int8_t, D32> d8;
        const auto neg = hn::Lt(a, hn::Zero(d8));
        return DotU8I8(d32, hn::Abs(a), hn::IfThenElse(neg, hn::Neg(b), b), acc);
    }
#else
    const hn::Repartition<int16_t, D32> d16;
    const auto a16 = hn::BitCast(d16, a), b16 = hn::BitCast(d16, b);
    const auto a_even = hn::ShiftRight<8>(hn::ShiftLeft<8>(a16));
    const auto b_even = hn::ShiftRight<8>(hn::ShiftLeft<8>(b16));
    const auto a_odd = hn::ShiftRight<8>(a16);
    const auto b_odd = hn::ShiftRight<8>(b16);
    return hn::Add(acc, hn::Add(PairDot16(d32, a_even, b_even), PairDot16(d32, a_odd, b_odd)));
#endif
}

}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
