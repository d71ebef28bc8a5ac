// Matrix-vector kernels: rows of a weight matrix, as stored in the model file, times one
// converted activation row (matmul_act.h). Decode reads every weight once per token, so
// these are written to keep up with memory bandwidth: four rows at a time (independent
// accumulators, one activation load for four rows), software prefetch a few kilobytes ahead,
// one integer dot product per 32 values, and the block scales applied in float lanes.
//
// Every type follows its reference dot product (tensor/quant_ref) block by block: the same
// integer sums, the same scales; only the order of the float additions differs.
#if defined(TROUPE_KERNELS_GEMV_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TROUPE_KERNELS_GEMV_INL_H_
#undef TROUPE_KERNELS_GEMV_INL_H_
#else
#define TROUPE_KERNELS_GEMV_INL_H_
#endif

#include <cstdint>
#include <cstring>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/dot-inl.h"
#include "kernels/line_prefetch.h"
#include "kernels/matmul_act.h"
#include "kernels/ops.h"
#include "kernels/simd-inl.h"
#include "tensor/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_GCC_ACTUAL
#pragma GCC target("avx512vnni")
#endif
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#if HWY_TARGET != HWY_SCALAR  // the one-lane target uses the reference dot products

// Software prefetch distance (line_prefetch.h): decode streams the weights from DRAM.
constexpr size_t kPrefetchBytes = kStreamPrefetchBytes;

// Vector tags of the 8-bit kernels: at most one 32-value block per vector (256-bit on AVX2
// and AVX-512, 128-bit on SSE4 and NEON, two vectors per block there).
using D8 = hn::CappedTag<int8_t, 32>;
using DU8 = hn::RebindToUnsigned<D8>;
using D32 = hn::Repartition<int32_t, D8>;
using DF = hn::Repartition<float, D8>;
using V8 = hn::Vec<D8>;
using VI = hn::Vec<D32>;
using VF = hn::Vec<DF>;

// The IEEE half at p, as a float in every lane of a vector of df.
template <class D>
HWY_INLINE hn::Vec<D> BroadcastF16To(D df, const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return F32FromF16Bits(df, hn::Set(hn::Rebind<uint16_t, D>(), h));
}

HWY_INLINE VF BroadcastF16(const uint8_t* p) {
    return BroadcastF16To(DF(), p);
}

HWY_INLINE float LoadF16(const uint8_t* p) {
    return hn::GetLane(BroadcastF16(p));
}

// Elements i .. i + Lanes(D8) of a 32-value block stored as 16 bytes of nibbles (element j
// in the low nibble of byte j for j < 16, in the high nibble of byte j - 16 otherwise).
HWY_INLINE V8 Nibbles32(const uint8_t* qs, size_t i) {
    const D8 d8;
    const DU8 du8;
    if constexpr (hn::MaxLanes(D8()) >= 32) {
        const hn::Half<DU8> dh;
        const auto v = hn::LoadU(dh, qs);
        return hn::BitCast(d8, hn::Combine(du8, hn::ShiftRight<4>(v), hn::And(v, hn::Set(dh, 15))));
    } else {
        const auto v = hn::LoadU(du8, qs);
        return hn::BitCast(d8, i == 0 ? hn::And(v, hn::Set(du8, 15)) : hn::ShiftRight<4>(v));
    }
}

// 16 (0x10) in the bytes of elements i .. i + Lanes(D8) whose bit is set in qh (bit j for
// element j): the fifth bit of Q5_0 / Q5_1 values.
HWY_INLINE V8 HighBits32(uint32_t qh, size_t i) {
    alignas(32) static constexpr uint8_t kByteOfBit[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1,
                                                           1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2,
                                                           2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    alignas(32) static constexpr uint8_t kBit[32] = {1,  2,   4,  8,  16,  32, 64, 128, 1,  2,  4,
                                                     8,  16,  32, 64, 128, 1,  2,  4,   8,  16, 32,
                                                     64, 128, 1,  2,  4,   8,  16, 32,  64, 128};
    const D8 d8;
    const DU8 du8;
    const auto bytes = hn::BitCast(du8, hn::Set(hn::Repartition<uint32_t, DU8>(), qh));
    const auto sel = hn::TableLookupBytes(bytes, hn::LoadU(du8, kByteOfBit + i));
    const auto set = hn::TestBit(sel, hn::LoadU(du8, kBit + i));
    return hn::BitCast(d8, hn::IfThenElseZero(set, hn::Set(du8, 16)));
}

HWY_INLINE uint32_t LoadU32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// ---- 32-value block types: levels of elements i .. i + Lanes(D8) of one block ----------

// Levels() gives the levels the reference multiplies (signed, or unsigned for the types with
// a minimum); Unsigned() the same plus kOffset as unsigned bytes (for unsigned x signed dot
// products: sum (L + kOffset) x - kOffset sum x).
struct CodecQ8_0 {
    static constexpr size_t kBytes = sizeof(BlockQ8_0);
    static constexpr bool kSigned = true;
    static constexpr bool kHasMin = false;
    static constexpr int kOffset = 128;
    static HWY_INLINE V8 Levels(const uint8_t* b, size_t i) {
        return hn::LoadU(D8(), reinterpret_cast<const int8_t*>(b + 2 + i));
    }
    static HWY_INLINE V8 Unsigned(const uint8_t* b, size_t i) {
        return hn::Xor(Levels(b, i), hn::Set(D8(), int8_t(-128)));
    }
};

struct CodecQ4_0 {
    static constexpr size_t kBytes = sizeof(BlockQ4_0);
    static constexpr bool kSigned = true;
    static constexpr bool kHasMin = false;
    static constexpr int kOffset = 8;
    static HWY_INLINE V8 Levels(const uint8_t* b, size_t i) {
        return hn::Sub(Unsigned(b, i), hn::Set(D8(), 8));
    }
    static HWY_INLINE V8 Unsigned(const uint8_t* b, size_t i) { return Nibbles32(b + 2, i); }
};

struct CodecQ5_0 {
    static constexpr size_t kBytes = sizeof(BlockQ5_0);
    static constexpr bool kSigned = true;
    static constexpr bool kHasMin = false;
    static constexpr int kOffset = 16;
    static HWY_INLINE V8 Levels(const uint8_t* b, size_t i) {
        return hn::Sub(Unsigned(b, i), hn::Set(D8(), 16));
    }
    static HWY_INLINE V8 Unsigned(const uint8_t* b, size_t i) {
        return hn::Or(Nibbles32(b + 6, i), HighBits32(LoadU32(b + 2), i));
    }
};

struct CodecQ4_1 {
    static constexpr size_t kBytes = sizeof(BlockQ4_1);
    static constexpr bool kSigned = false;
    static constexpr bool kHasMin = true;  // the f16 minimum m at byte 2
    static constexpr int kOffset = 0;
    static HWY_INLINE V8 Levels(const uint8_t* b, size_t i) { return Nibbles32(b + 4, i); }
    static HWY_INLINE V8 Unsigned(const uint8_t* b, size_t i) { return Levels(b, i); }
};

struct CodecQ5_1 {
    static constexpr size_t kBytes = sizeof(BlockQ5_1);
    static constexpr bool kSigned = false;
    static constexpr bool kHasMin = true;
    static constexpr int kOffset = 0;
    static HWY_INLINE V8 Levels(const uint8_t* b, size_t i) {
        return hn::Or(Nibbles32(b + 8, i), HighBits32(LoadU32(b + 4), i));
    }
    static HWY_INLINE V8 Unsigned(const uint8_t* b, size_t i) { return Levels(b, i); }
};

// The activation rows of up to kMaxGemvTokens tokens, as the row kernels read them.
constexpr int kMaxGemvTokens = 3;
struct GemvActs {
    const uint8_t* row[kMaxGemvTokens];
};

// ---- K-quants (256-value super-blocks) times Q8_K -------------------------------------

// The 6-bit scales and mins of the 8 sub-blocks of a Q4_K / Q5_K super-block.
HWY_INLINE void UnpackScaleMin(const uint8_t* q, int32_t* sc, int32_t* m) {
    for (int j = 0; j < 4; ++j) {
        sc[j] = q[j] & 63;
        m[j] = q[j + 4] & 63;
        sc[j + 4] = (q[j + 8] & 0x0f) | ((q[j] >> 6) << 4);
        m[j + 4] = (q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4);
    }
}

// The same in one 128-bit vector, by 32-bit lanes: bytes 0 .. 8 the scales, 8 .. 16 the
// mins. Byte j of each lane is sub-block j (or j + 4) of UnpackScaleMin; the top two bits of
// scales and mins 4..7 come from bits 6-7 of bytes 0..7. Reads 16 bytes from q (the
// 12 of the scales and 4 of the block's next field).
HWY_INLINE hn::Vec<hn::Full128<uint8_t>> UnpackScaleMin16(const uint8_t* q) {
    const hn::Full128<uint32_t> du32;
    const auto v = hn::LoadU(du32, reinterpret_cast<const uint32_t*>(q));  // u0 u1 u2 -
    const auto u2 = hn::Broadcast<2>(v);
    const auto low4 = hn::And(hn::OddEven(hn::ShiftRight<4>(u2), u2), hn::Set(du32, 0x0f0f0f0fu));
    const auto top2 = hn::ShiftLeft<4>(hn::And(hn::ShiftRight<6>(v), hn::Set(du32, 0x03030303u)));
    const auto first = hn::And(v, hn::Set(du32, 0x3f3f3f3fu));  // scales 0-3, mins 0-3
    const auto second = hn::Or(low4, top2);                     // scales 4-7, mins 4-7
    return hn::BitCast(hn::Full128<uint8_t>(), hn::InterleaveLower(du32, first, second));
}

using SD = ScaleTag<D32>;  // ScaledDotU8I8's scale lanes
using VS = hn::Vec<SD>;

// Eight small integers (sub-block scales or mins of a super-block) for ScaledDotU8I8 and
// MinSumLanes. kScaleInPairs targets hold them as 16-bit lanes of every 128-bit block: one
// byte shuffle puts one of them in every lane. The others keep the integers. (Dummy defers
// the members' instantiation to the form the target uses.)
template <bool kInPairs, class Dummy = void>
struct SubScalesT;

template <class Dummy>
struct SubScalesT<true, Dummy> {
    VS table;

    HWY_INLINE explicit SubScalesT(hn::Vec<hn::Full128<int16_t>> v)
        : table(InEveryBlock(SD(), v)) {}
    template <class D>
    static HWY_INLINE hn::Vec<D> InEveryBlock(D d, hn::Vec<hn::Full128<int16_t>> v) {
        if constexpr (hn::MaxLanes(d) > 8) {
            return hn::Combine(d, v, v);
        } else {
            return v;
        }
    }
    // Bytes 0 .. 8 (kUpper false: the scales) or 8 .. 16 (the mins) of UnpackScaleMin16's vector.
    template <bool kUpper>
    static HWY_INLINE SubScalesT Half(hn::Vec<hn::Full128<uint8_t>> bytes) {
        const hn::Full128<int16_t> d16;
        const hn::Half<hn::Full128<uint8_t>> dh;
        return SubScalesT(
            hn::PromoteTo(d16, kUpper ? hn::UpperHalf(dh, bytes) : hn::LowerHalf(dh, bytes)));
    }
    HWY_INLINE explicit SubScalesT(const int8_t* v)
        : SubScalesT(hn::PromoteTo(hn::Full128<int16_t>(), hn::LoadU(hn::Full64<int8_t>(), v))) {}
    // Value s in every lane; with kNextPerBlock, value s + b in 128-bit block b.
    template <bool kNextPerBlock = false>
    HWY_INLINE VS Get(int s) const {
        const SD sd;
        auto idx = hn::Set(sd, int16_t(s));
        if constexpr (kNextPerBlock) idx = hn::Add(idx, hn::ShiftRight<3>(hn::Iota(sd, 0)));
        // Bytes 2 idx and 2 idx + 1 of the block.
        const auto ctrl = hn::Add(hn::Mul(idx, hn::Set(sd, 514)), hn::Set(sd, 256));
        const hn::Repartition<uint8_t, SD> du8;
        return hn::BitCast(sd,
                           hn::TableLookupBytes(hn::BitCast(du8, table), hn::BitCast(du8, ctrl)));
    }
    // Int32 lane i of vector v (of 16 / Lanes(d32)) holds value (v Lanes(d32) + i) / 2.
    HWY_INLINE VI Pairs(size_t v) const {
        const D32 d32;
        const hn::RebindToUnsigned<D32> du32;
        const auto idx = hn::ShiftRight<1>(
            hn::Add(hn::Iota(du32, 0), hn::Set(du32, uint32_t(v * hn::Lanes(d32)))));
        // Bytes 2 idx, 2 idx + 1, then two zero bytes (index bit 7 set).
        const auto ctrl = hn::Add(hn::Mul(idx, hn::Set(du32, 514u)), hn::Set(du32, 0x80800100u));
        const hn::Repartition<uint8_t, SD> du8;
        return hn::BitCast(
            d32, hn::TableLookupBytesOr0(hn::BitCast(du8, table), hn::BitCast(du8, ctrl)));
    }
};

template <class Dummy>
struct SubScalesT<false, Dummy> {
    int32_t value[8];

    template <typename T>
    HWY_INLINE explicit SubScalesT(const T* v) {
        for (int i = 0; i < 8; ++i) value[i] = v[i];
    }
    template <bool kUpper>
    static HWY_INLINE SubScalesT Half(hn::Vec<hn::Full128<uint8_t>> bytes) {
        HWY_ALIGN uint8_t b[16];
        hn::Store(bytes, hn::Full128<uint8_t>(), b);
        return SubScalesT(b + (kUpper ? 8 : 0));
    }
    template <bool kNextPerBlock = false>
    HWY_INLINE VI Get(int s) const {  // VS is VI on these targets
        static_assert(!kNextPerBlock || hn::MaxLanes(D32()) <= 4, "one 128-bit block");
        return hn::Set(D32(), value[s]);
    }
    HWY_INLINE VI Pairs(size_t v) const {
        const D32 d32;
        HWY_ALIGN int32_t p[hn::MaxLanes(D32())];
        for (size_t i = 0; i < hn::Lanes(d32); ++i) p[i] = value[(v * hn::Lanes(d32) + i) / 2];
        return hn::Load(d32, p);
    }
};
using SubScales = SubScalesT<kScaleInPairs>;

// Lanes whose sum is sum_i m[i / 2] bs[i] over the 16 sums of 16 activations of a
// super-block (the mins term of Q4_K / Q5_K: m_j times sub-block j's 32 activations).
HWY_INLINE VI MinSumLanes(const SubScales& m, const int32_t* bs) {
    const D32 d32;
    const size_t N = hn::Lanes(d32);
    VI sum = hn::Mul(hn::LoadU(d32, bs), m.Pairs(0));
    for (size_t v = 1; v < 16 / N; ++v)
        sum = hn::Add(sum, hn::Mul(hn::LoadU(d32, bs + v * N), m.Pairs(v)));
    return sum;
}

// The sums of the lanes of a and of b (exact integers), reduced together.
template <class D32>
HWY_INLINE void ReduceSum2(D32 d32, hn::Vec<D32> a, hn::Vec<D32> b, int32_t& sa, int32_t& sb) {
    // Per 128-bit block: [a0 + a2, b0 + b2, a1 + a3, b1 + b3], then [a, b, a, b].
    auto v = hn::Add(hn::InterleaveLower(d32, a, b), hn::InterleaveUpper(d32, a, b));
    v = hn::Add(v, hn::Shuffle1032(v));
    if constexpr (hn::MaxLanes(d32) == 8) {
        const hn::Half<D32> dh;
        const auto s = hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v));
        sa = hn::GetLane(s);
        sb = hn::ExtractLane(s, 1);
    } else {
        static_assert(hn::MaxLanes(d32) == 4, "one or two 128-bit blocks");
        sa = hn::GetLane(v);
        sb = hn::ExtractLane(v, 1);
    }
}

// Prefetches the bytes of one block (whole cache lines).
template <size_t kBytes>
HWY_INLINE void PrefetchBlock(const uint8_t* p) {
    for (size_t o = 0; o < kBytes; o += 64) hwy::Prefetch(p + o);
}

// The canonical float steps of the K-quants, shared with the matrix-matrix kernels
// (gemm_kquant-inl.h), so that a token's result does not depend on its batch: per
// super-block k in order, with the exact integer sums S_k (and M_k for the mins),
//   acc = MulAdd(float(S_k), dx_k * d_k, acc), then for Q4_K / Q5_K
//   acc = NegMulAdd(float(M_k), dx_k * dmin_k, acc),
// with Highway's MulAdd / NegMulAdd (fused where the target has FMA, a product and a sum
// where it has not). Both paths call these: the matrix-matrix kernels with tokens in lanes,
// the matrix-vector ones on one-lane vectors (DK1). s, m: the sums in float; dx: the
// activation scales.
template <class D>
HWY_INLINE hn::Vec<D> KQuantStep(D d, hn::Vec<D> acc, hn::Vec<D> s, hn::Vec<D> dx, float scale) {
    return hn::MulAdd(s, hn::Mul(dx, hn::Set(d, scale)), acc);
}
template <class D>
HWY_INLINE hn::Vec<D> KQuantMinStep(D d, hn::Vec<D> acc, hn::Vec<D> m, hn::Vec<D> dx, float dmin) {
    return hn::NegMulAdd(m, hn::Mul(dx, hn::Set(d, dmin)), acc);
}
// The same with the weight's scale per lane (rows in the lanes of the pair kernels).
template <class D>
HWY_INLINE hn::Vec<D> KQuantStep(D, hn::Vec<D> acc, hn::Vec<D> s, hn::Vec<D> dx, hn::Vec<D> scale) {
    return hn::MulAdd(s, hn::Mul(dx, scale), acc);
}
template <class D>
HWY_INLINE hn::Vec<D> KQuantMinStep(D, hn::Vec<D> acc, hn::Vec<D> m, hn::Vec<D> dx,
                                    hn::Vec<D> dmin) {
    return hn::NegMulAdd(m, hn::Mul(dx, dmin), acc);
}
using DK1 = hn::CappedTag<float, 1>;
using VK1 = hn::Vec<DK1>;

// 16 in the bytes of q whose bit `bit` is set (Q5_K's fifth bits), else 0: one 16-bit shift
// by at most 4 (which brings no bit of the neighbouring byte to bit 4) and a mask.
HWY_INLINE hn::Vec<DU8> BitAs16(hn::Vec<DU8> q, int bit) {
    const DU8 du8;
    const hn::Repartition<uint16_t, DU8> du16;
    const auto q16 = hn::BitCast(du16, q);
    const auto v = bit <= 4 ? hn::ShiftLeftSame(q16, 4 - bit) : hn::ShiftRightSame(q16, bit - 4);
    return hn::And(hn::BitCast(du8, v), hn::Set(du8, 16));
}

// One Q4_K (kHasHigh false) or Q5_K row times T tokens: per super-block,
// d d_x sum_j sc_j isum_j - dmin d_x sum_j m_j (bsum_2j + bsum_2j+1), in KQuantStep's order.
template <bool kHasHigh, int T>
HWY_INLINE void GemvRowQ45K(const uint8_t* HWY_RESTRICT w, const uint8_t* pf, const GemvActs& a,
                            const ops::ActLayout& l, float* y, int64_t ldy) {
    constexpr size_t kBytes = kHasHigh ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
    constexpr size_t kQs = kHasHigh ? 48 : 16;  // offset of qs (Q5_K: after qh[32])
    const D8 d8;
    const DU8 du8;
    const D32 d32;
    const size_t N8 = hn::Lanes(d8);
    VK1 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = hn::Zero(DK1());
    for (int64_t k = 0; k < l.n_blocks; ++k) {
        const uint8_t* b = w + size_t(k) * kBytes;
        PrefetchBlock<kBytes>(pf + size_t(k) * kBytes);
        const auto scm = UnpackScaleMin16(b + 4);
        const SubScales sc = SubScales::Half<false>(scm), mins = SubScales::Half<true>(scm);
        VI sumi[T];
        for (int t = 0; t < T; ++t) sumi[t] = hn::Zero(d32);
        for (int j = 0; j < 4; ++j) {
            const VS s_lo = sc.Get(2 * j), s_hi = sc.Get(2 * j + 1);
            for (size_t i = 0; i < 32; i += N8) {
                const auto raw = hn::LoadU(du8, b + kQs + 32 * j + i);
                auto lo = hn::And(raw, hn::Set(du8, 15));
                auto hi = hn::ShiftRight<4>(raw);
                if constexpr (kHasHigh) {
                    const auto qh = hn::LoadU(du8, b + 16 + i);
                    lo = hn::Or(lo, BitAs16(qh, 2 * j));
                    hi = hn::Or(hi, BitAs16(qh, 2 * j + 1));
                }
                for (int t = 0; t < T; ++t) {
                    const auto* x = reinterpret_cast<const int8_t*>(a.row[t]) + k * QK_K;
                    sumi[t] = ScaledDotU8I8(d32, hn::BitCast(d8, lo), hn::LoadU(d8, x + 64 * j + i),
                                            s_lo, sumi[t]);
                    sumi[t] = ScaledDotU8I8(d32, hn::BitCast(d8, hi),
                                            hn::LoadU(d8, x + 64 * j + 32 + i), s_hi, sumi[t]);
                }
            }
        }
        const float d = LoadF16(b), dmin = LoadF16(b + 2);
        for (int t = 0; t < T; ++t) {
            const float dx = reinterpret_cast<const float*>(a.row[t] + l.scale_offset)[k];
            const auto* bs =
                reinterpret_cast<const int32_t*>(a.row[t] + l.sum_offset) + k * (QK_K / 16);
            int32_t isum, msum;
            ReduceSum2(d32, sumi[t], MinSumLanes(mins, bs), isum, msum);
            const DK1 d1;
            const VK1 dxv = hn::Set(d1, dx);
            acc[t] = KQuantStep(d1, acc[t], hn::Set(d1, float(isum)), dxv, d);
            acc[t] = KQuantMinStep(d1, acc[t], hn::Set(d1, float(msum)), dxv, dmin);
        }
    }
    for (int t = 0; t < T; ++t) y[t * ldy] = hn::GetLane(acc[t]);
}

// One Q6_K row times T tokens: per super-block, d d_x sum_j sc_j (sum_i q_i x_i - 32 bsum_j)
// over the 16 sub-blocks of 16 values (q in 0..63 is the stored level; the reference
// subtracts 32 first), in KQuantStep's order.
template <int T>
HWY_INLINE void GemvRowQ6K(const uint8_t* HWY_RESTRICT w, const uint8_t* pf, const GemvActs& a,
                           const ops::ActLayout& l, float* y, int64_t ldy) {
    constexpr size_t kBytes = sizeof(BlockQ6_K);
    const D8 d8;
    const DU8 du8;
    const D32 d32;
    const size_t N8 = hn::Lanes(d8);
    const hn::Rebind<int8_t, D32> d8x32;  // one int8 per int32 lane
    const size_t N32 = hn::Lanes(d32);
    constexpr bool kWide = hn::MaxLanes(D8()) >= 32;  // a vector holds two sub-blocks
    VK1 total[T];
    for (int t = 0; t < T; ++t) total[t] = hn::Zero(DK1());
    for (int64_t k = 0; k < l.n_blocks; ++k) {
        const uint8_t* b = w + size_t(k) * kBytes;
        PrefetchBlock<kBytes>(pf + size_t(k) * kBytes);
        const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
        VI sumi[T];
        for (int t = 0; t < T; ++t) sumi[t] = hn::Zero(d32);
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = b + 64 * h;
            const uint8_t* qh = b + 128 + 32 * h;
            const SubScales sch(sc + 8 * h);
            for (size_t i = 0; i < 32; i += N8) {
                const auto c0 = hn::LoadU(du8, ql + i), c1 = hn::LoadU(du8, ql + 32 + i);
                const auto q = hn::LoadU(du8, qh + i);
                const auto low = hn::Set(du8, 15);
                const auto q0 =
                    hn::Or(hn::And(c0, low), hn::ShiftLeft<4>(hn::And(q, hn::Set(du8, 3))));
                const auto q1 =
                    hn::Or(hn::And(c1, low), hn::ShiftLeft<2>(hn::And(q, hn::Set(du8, 12))));
                const auto q2 = hn::Or(hn::ShiftRight<4>(c0), hn::And(q, hn::Set(du8, 48)));
                const auto q3 =
                    hn::Or(hn::ShiftRight<4>(c1), hn::ShiftRight<2>(hn::And(q, hn::Set(du8, 192))));
                // Sub-blocks 2p, 2p + 1 of the half (16 values each): both in a wide vector,
                // the one of values i .. i + 15 otherwise.
                VS s[4];
                for (int p = 0; p < 4; ++p)
                    s[p] = kWide ? sch.Get<kWide>(2 * p) : sch.Get(2 * p + int(i / 16));
                for (int t = 0; t < T; ++t) {
                    const int8_t* xh =
                        reinterpret_cast<const int8_t*>(a.row[t]) + k * QK_K + 128 * h;
                    sumi[t] = ScaledDotU8I8(d32, hn::BitCast(d8, q0), hn::LoadU(d8, xh + i), s[0],
                                            sumi[t]);
                    sumi[t] = ScaledDotU8I8(d32, hn::BitCast(d8, q1), hn::LoadU(d8, xh + 32 + i),
                                            s[1], sumi[t]);
                    sumi[t] = ScaledDotU8I8(d32, hn::BitCast(d8, q2), hn::LoadU(d8, xh + 64 + i),
                                            s[2], sumi[t]);
                    sumi[t] = ScaledDotU8I8(d32, hn::BitCast(d8, q3), hn::LoadU(d8, xh + 96 + i),
                                            s[3], sumi[t]);
                }
            }
        }
        // The reference's levels are q - 32: subtract 32 sum_j sc_j bs_j, in the lanes.
        VI scv[16 / hn::MaxLanes(D32())];
        for (size_t v = 0; v < 16 / N32; ++v)
            scv[v] = hn::PromoteTo(d32, hn::LoadU(d8x32, sc + v * N32));
        const float d = LoadF16(b + 208);
        for (int t = 0; t < T; ++t) {
            const auto* bs =
                reinterpret_cast<const int32_t*>(a.row[t] + l.sum_offset) + k * (QK_K / 16);
            VI is = sumi[t];
            for (size_t v = 0; v < 16 / N32; ++v)
                is = hn::Sub(is, hn::ShiftLeft<5>(hn::Mul(scv[v], hn::LoadU(d32, bs + v * N32))));
            const float dx = reinterpret_cast<const float*>(a.row[t] + l.scale_offset)[k];
            const DK1 d1;
            total[t] = KQuantStep(d1, total[t], hn::Set(d1, float(ReduceSum(d32, is))),
                                  hn::Set(d1, dx), d);
        }
    }
    for (int t = 0; t < T; ++t) y[t * ldy] = hn::GetLane(total[t]);
}

// ---- Float types: F32, F16, BF16 weights times float activations ----------------------

template <DType kType>
HWY_INLINE hn::Vec<hn::ScalableTag<float>> LoadWeights(const uint8_t* row, size_t i, size_t n) {
    const hn::ScalableTag<float> df;
    const size_t N = hn::Lanes(df);
    if constexpr (kType == DType::F32) {
        const auto* p = reinterpret_cast<const float*>(row) + i;
        return n >= N ? hn::LoadU(df, p) : LoadTail(df, p, n);
    } else {
        const hn::Rebind<uint16_t, decltype(df)> du16;
        const auto* p = reinterpret_cast<const uint16_t*>(row) + i;
        const auto bits = n >= N ? hn::LoadU(du16, p) : LoadTail(du16, p, n);
        if constexpr (kType == DType::F16) {
            return F32FromF16Bits(df, bits);
        } else {
            return F32FromBF16Bits(df, bits);
        }
    }
}

template <DType kType, int T>
HWY_INLINE void GemvRowFloat(const uint8_t* HWY_RESTRICT w, const uint8_t* pf, const GemvActs& a,
                             const ops::ActLayout& l, float* y, int64_t ldy) {
    const hn::ScalableTag<float> df;
    const size_t N = hn::Lanes(df);
    const size_t n = size_t(l.n_in);
    constexpr size_t kElem = kType == DType::F32 ? 4 : 2;
    hn::Vec<decltype(df)> acc[T][2];
    for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = hn::Zero(df);
    size_t i = 0;
    for (; i + 2 * N <= n; i += 2 * N) {
        hwy::Prefetch(pf + i * kElem);
        if (2 * N * kElem > 64) hwy::Prefetch(pf + i * kElem + 64);
        const auto w0 = LoadWeights<kType>(w, i, N), w1 = LoadWeights<kType>(w, i + N, N);
        for (int t = 0; t < T; ++t) {
            const auto* x = reinterpret_cast<const float*>(a.row[t]);
            acc[t][0] = hn::MulAdd(w0, hn::LoadU(df, x + i), acc[t][0]);
            acc[t][1] = hn::MulAdd(w1, hn::LoadU(df, x + i + N), acc[t][1]);
        }
    }
    for (; i < n; i += N) {
        const size_t m = n - i < N ? n - i : N;
        const auto wv = LoadWeights<kType>(w, i, m);
        for (int t = 0; t < T; ++t) {
            const auto* x = reinterpret_cast<const float*>(a.row[t]);
            acc[t][0] =
                hn::MulAdd(wv, m == N ? hn::LoadU(df, x + i) : LoadTail(df, x + i, m), acc[t][0]);
        }
    }
    for (int t = 0; t < T; ++t) y[t * ldy] = ReduceSum(df, hn::Add(acc[t][0], acc[t][1]));
}

// ---- Row loops ---------------------------------------------------------------------------

// Rows [o0, o1) of w times T tokens: y[t * ldy + (o - o0)]. Kernel::Run does one row.
// Prefetching runs kPrefetchBytes ahead within the task's rows (the first rows are
// prefetched up front).
template <class Kernel, int T>
HWY_NOINLINE void GemvRowsT(const uint8_t* w, size_t stride, int64_t o0, int64_t o1,
                            const GemvActs& a, const ops::ActLayout& l, float* y, int64_t ldy) {
    const int64_t ahead = int64_t((kPrefetchBytes + stride - 1) / stride);
    const uint8_t* begin = w + size_t(o0) * stride;
    const uint8_t* end = w + size_t(o0 + (o1 - o0 < ahead ? o1 - o0 : ahead)) * stride;
    for (const uint8_t* p = begin; p < end; p += 64) hwy::Prefetch(p);
    for (int64_t o = o0; o < o1; ++o) {
        const uint8_t* pf = w + size_t(o + ahead < o1 ? o + ahead : o) * stride;
        Kernel::template Run<T>(w + size_t(o) * stride, pf, a, l, y + (o - o0), ldy);
    }
}

template <class Kernel>
HWY_INLINE void GemvRows(const uint8_t* w, size_t stride, int64_t o0, int64_t o1, const GemvActs& a,
                         int n_tokens, const ops::ActLayout& l, float* y, int64_t ldy) {
    switch (n_tokens) {
        case 1:
            return GemvRowsT<Kernel, 1>(w, stride, o0, o1, a, l, y, ldy);
        case 2:
            return GemvRowsT<Kernel, 2>(w, stride, o0, o1, a, l, y, ldy);
        default:
            return GemvRowsT<Kernel, 3>(w, stride, o0, o1, a, l, y, ldy);
    }
}

template <bool kHasHigh>
struct Q45KKernel {
    template <int T>
    static HWY_INLINE void Run(const uint8_t* w, const uint8_t* pf, const GemvActs& a,
                               const ops::ActLayout& l, float* y, int64_t ldy) {
        GemvRowQ45K<kHasHigh, T>(w, pf, a, l, y, ldy);
    }
};
struct Q6KKernel {
    template <int T>
    static HWY_INLINE void Run(const uint8_t* w, const uint8_t* pf, const GemvActs& a,
                               const ops::ActLayout& l, float* y, int64_t ldy) {
        GemvRowQ6K<T>(w, pf, a, l, y, ldy);
    }
};
template <DType kType>
struct FloatKernel {
    template <int T>
    static HWY_INLINE void Run(const uint8_t* w, const uint8_t* pf, const GemvActs& a,
                               const ops::ActLayout& l, float* y, int64_t ldy) {
        GemvRowFloat<kType, T>(w, pf, a, l, y, ldy);
    }
};

#endif  // HWY_TARGET != HWY_SCALAR
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
