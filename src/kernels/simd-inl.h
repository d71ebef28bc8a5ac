// Small Highway helpers shared by the kernels: partial loads and stores for the tails of
// rows, and horizontal sums. Compiled once per target (included from kernel .cpp files
// after hwy/foreach_target.h).
#if defined(TROUPE_KERNELS_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TROUPE_KERNELS_SIMD_INL_H_
#undef TROUPE_KERNELS_SIMD_INL_H_
#else
#define TROUPE_KERNELS_SIMD_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Keeps the value of v in a register as computed at this point, and makes the compiler take
// it as changed there. GCC reassociates a chain of integer additions across an unrolled loop
// into a tree whose partial sums spill when the target has 16 vector registers (AVX2,
// SSE4): a barrier after each addition keeps the chain a chain. (x86 and NEON; elsewhere a
// no-op.)
template <class V>
HWY_INLINE void KeepInRegister(V& v) {
#if HWY_ARCH_X86 && HWY_COMPILER_GCC && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
    asm("" : "+v"(v.raw));
#elif HWY_ARCH_ARM_A64 && HWY_COMPILER_GCC && HWY_TARGET == HWY_NEON
    asm("" : "+w"(v.raw));
#else
    (void)v;
#endif
}

// Loads the first n < Lanes(d) values of p (the rest zero) without touching memory past
// p + n: the tail of a row whose length is not a multiple of the vector.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE hn::Vec<D> LoadTail(D d, const T* HWY_RESTRICT p, size_t n) {
    HWY_ALIGN T buf[hn::MaxLanes(d)] = {};
    std::memcpy(buf, p, n * sizeof(T));
    return hn::Load(d, buf);
}

// Stores the first n < Lanes(d) lanes of v to p without touching memory past p + n.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE void StoreTail(D d, hn::Vec<D> v, T* HWY_RESTRICT p, size_t n) {
    HWY_ALIGN T buf[hn::MaxLanes(d)];
    hn::Store(v, d, buf);
    std::memcpy(p, buf, n * sizeof(T));
}

template <class D>
HWY_INLINE hn::TFromD<D> ReduceSum(D d, hn::Vec<D> v) {
    return hn::GetLane(hn::SumOfLanes(d, v));
}

template <class D>
HWY_INLINE hn::TFromD<D> ReduceMax(D d, hn::Vec<D> v) {
    return hn::GetLane(hn::MaxOfLanes(d, v));
}

// IEEE half bits of v, rounded to nearest even exactly like fp32_to_fp16 (util/fp16.h).
// Highway 1.0 converts with F16C / NEON where the CPU has them (same rounding) but truncates
// in its software fallback, so the other targets use the bit-exact integer form.
template <class DF>
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> F16BitsFromF32(DF df, hn::Vec<DF> v) {
    const hn::Rebind<uint16_t, DF> du16;
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) || \
    (HWY_ARCH_ARM_A64 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128)
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::BitCast(du16, hn::DemoteTo(dh, v));
#else
    const hn::RebindToUnsigned<DF> du;
    const hn::RebindToSigned<DF> di;
    const auto x = hn::BitCast(du, v);
    const auto sign = hn::And(hn::ShiftRight<16>(x), hn::Set(du, 0x8000u));
    const auto abs = hn::And(x, hn::Set(du, 0x7fffffffu));
    const auto nan =
        hn::Or(hn::Set(du, 0x7e00u), hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 0x3ffu)));
    const auto odd = hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 1u));
    const auto normal = hn::ShiftRight<13>(hn::Add(hn::Add(abs, hn::Set(du, 0xc8000fffu)), odd));
    // Subnormal halves: adding 0.5 lets the FPU round the mantissa.
    const auto sub = hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(df, abs), hn::Set(df, 0.5f))),
                             hn::Set(du, 0x3f000000u));
    const auto absi = hn::BitCast(di, abs);
    auto h = hn::IfThenElse(hn::RebindMask(du, hn::Lt(absi, hn::Set(di, 0x38800000))), sub, normal);
    h = hn::IfThenElse(hn::RebindMask(du, hn::Gt(absi, hn::Set(di, 0x477fefff))),
                       hn::Set(du, 0x7c00u), h);
    h = hn::IfThenElse(hn::RebindMask(du, hn::Gt(absi, hn::Set(di, 0x7f800000))), nan, h);
    return hn::DemoteTo(du16, hn::BitCast(di, hn::Or(sign, h)));
#endif
}

// bfloat16 bits of v, rounded to nearest even like fp32_to_bf16 (util/fp16.h).
template <class DF>
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> BF16BitsFromF32(DF df, hn::Vec<DF> v) {
    const hn::Rebind<uint16_t, DF> du16;
    const hn::RebindToUnsigned<DF> du;
    const hn::RebindToSigned<DF> di;
    const auto u = hn::BitCast(du, v);
    const auto odd = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
    const auto rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), odd)));
    const auto nan = hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 64u));
    const auto is_nan =
        hn::Gt(hn::BitCast(di, hn::And(u, hn::Set(du, 0x7fffffffu))), hn::Set(di, 0x7f800000));
    return hn::DemoteTo(du16,
                        hn::BitCast(di, hn::IfThenElse(hn::RebindMask(du, is_nan), nan, rounded)));
}

// Float values of n IEEE halves / bfloat16s.
template <class DF>
HWY_INLINE hn::Vec<DF> F32FromF16Bits(DF df, hn::Vec<hn::Rebind<uint16_t, DF>> h) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::BitCast(dh, h));
}

template <class DF>
HWY_INLINE hn::Vec<DF> F32FromBF16Bits(DF df, hn::Vec<hn::Rebind<uint16_t, DF>> h) {
    const hn::RebindToUnsigned<DF> du;
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, h)));
}

// e^x for -87 < x <= 88 (outside that range the caller decides): within 2 ulp of std::exp.
// x = n ln2 + r with |r| <= ln2/2, e^r by a polynomial (hwy's Exp coefficients), 2^n from
// n's bits. About 13 instructions, two thirds of hwy's Exp (which handles the whole range).
template <class DF>
HWY_INLINE hn::Vec<DF> ExpInRange(DF df, hn::Vec<DF> x) {
    const hn::RebindToUnsigned<DF> du;
    // t = round(x / ln2) + 127 in the low bits of a float near 1.5 * 2^23.
    const auto magic = hn::Set(df, 12582912.0f + 127.0f);
    const auto t = hn::MulAdd(x, hn::Set(df, 1.44269504088896341f), magic);
    const auto n = hn::Sub(t, magic);
    auto r = hn::MulAdd(n, hn::Set(df, -0.693145751953125f), x);
    r = hn::MulAdd(n, hn::Set(df, -1.428606765330187045e-6f), r);
    auto p = hn::Set(df, 0.000198527617612853646278381f);
    p = hn::MulAdd(p, r, hn::Set(df, 0.00139304355252534151077271f));
    p = hn::MulAdd(p, r, hn::Set(df, 0.00833336077630519866943359f));
    p = hn::MulAdd(p, r, hn::Set(df, 0.0416664853692054748535156f));
    p = hn::MulAdd(p, r, hn::Set(df, 0.166666671633720397949219f));
    p = hn::MulAdd(p, r, hn::Set(df, 0.5f));
    p = hn::MulAdd(p, r, hn::Set(df, 1.0f));
    p = hn::MulAdd(p, r, hn::Set(df, 1.0f));
    return hn::Mul(p, hn::BitCast(df, hn::ShiftLeft<23>(hn::BitCast(du, t))));  // p * 2^n
}

}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
