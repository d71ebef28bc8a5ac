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

// Software prefetch distance. Decode streams the weights from DRAM; the hardware prefetcher
// alone leaves it idle between rows (measured on Zen 5: 40% of the read-bandwidth probe
// without software prefetch).
#ifndef TROUPE_PREFETCH_BYTES
#define TROUPE_PREFETCH_BYTES 8192
#endif
constexpr size_t kPrefetchBytes = TROUPE_PREFETCH_BYTES;

// Vector tags of the 8-bit kernels: at most one 32-value block per vector (256-bit on AVX2
// and AVX-512, 128-bit on SSE4 and NEON, two vectors per block there).
using D8 = hn::CappedTag<int8_t, 32>;
using DU8 = hn::RebindToUnsigned<D8>;
using D32 = hn::Repartition<int32_t, D8>;
using DF = hn::Repartition<float, D8>;
using V8 = hn::Vec<D8>;
using VI = hn::Vec<D32>;
using VF = hn::Vec<DF>;

// The IEEE half at p, as a float in every lane.
HWY_INLINE VF BroadcastF16(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    const DF df;
    return F32FromF16Bits(df, hn::Set(hn::Rebind<uint16_t, DF>(), h));
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

struct CodecQ8_0 {
    static constexpr size_t kBytes = sizeof(BlockQ8_0);
    static constexpr bool kSigned = true;
    static constexpr bool kHasMin = false;
    static HWY_INLINE V8 Levels(const uint8_t* b, size_t i) {
        return hn::LoadU(D8(), reinterpret_cast<const int8_t*>(b + 2 + i));
    }
};

struct CodecQ4_0 {
    static constexpr size_t kBytes = sizeof(BlockQ4_0);
    static constexpr bool kSigned = true;
    static constexpr bool kHasMin = false;
    static HWY_INLINE V8 Levels(const uint8_t* b, size_t i) {
        return hn::Sub(Nibbles32(b + 2, i), hn::Set(D8(), 8));
    }
};

struct CodecQ5_0 {
    static constexpr size_t kBytes = sizeof(BlockQ5_0);
    static constexpr bool kSigned = true;
    static constexpr bool kHasMin = false;
    static HWY_INLINE V8 Levels(const uint8_t* b, size_t i) {
        const V8 q = hn::Or(Nibbles32(b + 6, i), HighBits32(LoadU32(b + 2), i));
        return hn::Sub(q, hn::Set(D8(), 16));
    }
};

struct CodecQ4_1 {
    static constexpr size_t kBytes = sizeof(BlockQ4_1);
    static constexpr bool kSigned = false;
    static constexpr bool kHasMin = true;  // the f16 minimum m at byte 2
    static HWY_INLINE V8 Levels(const uint8_t* b, size_t i) { return Nibbles32(b + 4, i); }
};

struct CodecQ5_1 {
    static constexpr size_t kBytes = sizeof(BlockQ5_1);
    static constexpr bool kSigned = false;
    static constexpr bool kHasMin = true;
    static HWY_INLINE V8 Levels(const uint8_t* b, size_t i) {
        return hn::Or(Nibbles32(b + 8, i), HighBits32(LoadU32(b + 4), i));
    }
};

// kRows rows of a 32-value block type times Q8_0 (Q8_1 for types with a minimum):
// y[r] = sum_k d_w d_x isum_k (+ m_w s_x). pf: the same offset kPrefetchBytes further on.
template <class Codec, int kRows>
HWY_INLINE void GemvBlocks32(const uint8_t* HWY_RESTRICT w, size_t stride, const uint8_t* pf,
                             const uint8_t* HWY_RESTRICT act, const ops::ActLayout& l,
                             float* HWY_RESTRICT y) {
    const D8 d8;
    const D32 d32;
    const DF df;
    const size_t N8 = hn::Lanes(d8);
    const auto* xq = reinterpret_cast<const int8_t*>(act);
    const auto* xd = reinterpret_cast<const float*>(act + l.scale_offset);
    const auto* xs = reinterpret_cast<const float*>(act + l.sum_offset);  // Q8_1's s
    VF acc[kRows], macc[kRows];
    for (int r = 0; r < kRows; ++r) acc[r] = macc[r] = hn::Zero(df);
    for (int64_t k = 0; k < l.n_blocks; ++k) {
        const size_t bo = size_t(k) * Codec::kBytes;
        VI isum[kRows];
        for (int r = 0; r < kRows; ++r) isum[r] = hn::Zero(d32);
        for (size_t i = 0; i < 32; i += N8) {
            const V8 xv = hn::LoadU(d8, xq + k * 32 + i);
            for (int r = 0; r < kRows; ++r) {
                const V8 lv = Codec::Levels(w + r * stride + bo, i);
                isum[r] =
                    Codec::kSigned ? DotI8I8(d32, lv, xv, isum[r]) : DotU8I8(d32, lv, xv, isum[r]);
            }
        }
        for (int r = 0; r < kRows; ++r) hwy::Prefetch(pf + r * stride + bo);
        const VF vxd = hn::Set(df, xd[k]);
        for (int r = 0; r < kRows; ++r) {
            const uint8_t* b = w + r * stride + bo;
            acc[r] = hn::MulAdd(hn::Mul(hn::ConvertTo(df, isum[r]), vxd), BroadcastF16(b), acc[r]);
            if constexpr (Codec::kHasMin)
                macc[r] = hn::MulAdd(BroadcastF16(b + 2), hn::Set(df, xs[k]), macc[r]);
        }
    }
    for (int r = 0; r < kRows; ++r)
        y[r] = ReduceSum(df, acc[r]) + (Codec::kHasMin ? hn::GetLane(macc[r]) : 0.0f);
}

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

// Q4_K (kHasHigh false) and Q5_K rows: per super-block, d d_x sum_j sc_j isum_j -
// dmin d_x sum_j m_j (bsum_2j + bsum_2j+1).
template <bool kHasHigh, int kRows>
HWY_INLINE void GemvQ45K(const uint8_t* HWY_RESTRICT w, size_t stride, const uint8_t* pf,
                         const uint8_t* HWY_RESTRICT act, const ops::ActLayout& l,
                         float* HWY_RESTRICT y) {
    constexpr size_t kBytes = kHasHigh ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
    constexpr size_t kQs = kHasHigh ? 48 : 16;  // offset of qs (Q5_K: after qh[32])
    const D8 d8;
    const DU8 du8;
    const D32 d32;
    const DF df;
    const size_t N8 = hn::Lanes(d8);
    const auto* xq = reinterpret_cast<const int8_t*>(act);
    const auto* xd = reinterpret_cast<const float*>(act + l.scale_offset);
    const auto* bsums = reinterpret_cast<const int32_t*>(act + l.sum_offset);
    VF acc[kRows];
    float mins[kRows] = {};
    for (int r = 0; r < kRows; ++r) acc[r] = hn::Zero(df);
    for (int64_t k = 0; k < l.n_blocks; ++k) {
        const size_t bo = size_t(k) * kBytes;
        const int8_t* x = xq + k * QK_K;
        const int32_t* bs = bsums + k * (QK_K / 16);
        for (int r = 0; r < kRows; ++r) {
            const uint8_t* b = w + r * stride + bo;
            int32_t sc[8], m[8];
            UnpackScaleMin(b + 4, sc, m);
            VI sumi = hn::Zero(d32);
            for (int j = 0; j < 4; ++j) {
                for (size_t i = 0; i < 32; i += N8) {
                    const auto raw = hn::LoadU(du8, b + kQs + 32 * j + i);
                    auto lo = hn::And(raw, hn::Set(du8, 15));
                    auto hi = hn::ShiftRight<4>(raw);
                    if constexpr (kHasHigh) {
                        const auto qh = hn::LoadU(du8, b + 16 + i);
                        const auto sixteen = hn::Set(du8, 16);
                        lo = hn::Or(
                            lo, hn::IfThenElseZero(
                                    hn::TestBit(qh, hn::Set(du8, uint8_t(1 << (2 * j)))), sixteen));
                        hi = hn::Or(
                            hi, hn::IfThenElseZero(
                                    hn::TestBit(qh, hn::Set(du8, uint8_t(2 << (2 * j)))), sixteen));
                    }
                    const VI dlo = DotU8I8(d32, hn::BitCast(d8, lo), hn::LoadU(d8, x + 64 * j + i),
                                           hn::Zero(d32));
                    const VI dhi = DotU8I8(d32, hn::BitCast(d8, hi),
                                           hn::LoadU(d8, x + 64 * j + 32 + i), hn::Zero(d32));
                    sumi = hn::Add(sumi, hn::Add(hn::Mul(dlo, hn::Set(d32, sc[2 * j])),
                                                 hn::Mul(dhi, hn::Set(d32, sc[2 * j + 1]))));
                }
            }
            int32_t msum = 0;
            for (int j = 0; j < 8; ++j) msum += m[j] * (bs[2 * j] + bs[2 * j + 1]);
            const VF dd = BroadcastF16(b);
            acc[r] = hn::MulAdd(hn::Mul(dd, hn::Set(df, xd[k])), hn::ConvertTo(df, sumi), acc[r]);
            mins[r] += LoadF16(b + 2) * xd[k] * float(msum);
        }
        for (int r = 0; r < kRows; ++r)
            for (size_t o = 0; o < kBytes; o += 64) hwy::Prefetch(pf + r * stride + bo + o);
    }
    for (int r = 0; r < kRows; ++r) y[r] = ReduceSum(df, acc[r]) - mins[r];
}

// Q6_K rows: per super-block, d d_x sum_j sc_j (sum_i q_i x_i - 32 bsum_j) over the 16
// sub-blocks of 16 values (q in 0..63 is the stored level; the reference subtracts 32 first).
template <int kRows>
HWY_INLINE void GemvQ6K(const uint8_t* HWY_RESTRICT w, size_t stride, const uint8_t* pf,
                        const uint8_t* HWY_RESTRICT act, const ops::ActLayout& l,
                        float* HWY_RESTRICT y) {
    constexpr size_t kBytes = sizeof(BlockQ6_K);
    const D8 d8;
    const DU8 du8;
    const D32 d32;
    const DF df;
    const size_t N8 = hn::Lanes(d8);
    const auto* xq = reinterpret_cast<const int8_t*>(act);
    const auto* xd = reinterpret_cast<const float*>(act + l.scale_offset);
    const auto* bsums = reinterpret_cast<const int32_t*>(act + l.sum_offset);
    VF acc[kRows];
    for (int r = 0; r < kRows; ++r) acc[r] = hn::Zero(df);
    // Scales of the sub-blocks of elements i .. i + N8 of a 32-value group: one per 16.
    auto scale_vec = [&](const int8_t* sc, size_t i) -> VI {
        if constexpr (hn::MaxLanes(D8()) >= 32) {
            const hn::Half<D32> dh;
            return hn::Combine(d32, hn::Set(dh, int32_t(sc[1])), hn::Set(dh, int32_t(sc[0])));
        } else {
            return hn::Set(d32, int32_t(sc[i / 16]));
        }
    };
    for (int64_t k = 0; k < l.n_blocks; ++k) {
        const size_t bo = size_t(k) * kBytes;
        const int8_t* x = xq + k * QK_K;
        const int32_t* bs = bsums + k * (QK_K / 16);
        for (int r = 0; r < kRows; ++r) {
            const uint8_t* b = w + r * stride + bo;
            const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
            VI sumi = hn::Zero(d32);
            for (int h = 0; h < 2; ++h) {
                const uint8_t* ql = b + 64 * h;
                const uint8_t* qh = b + 128 + 32 * h;
                const int8_t* xh = x + 128 * h;
                const int8_t* sch = sc + 8 * h;
                for (size_t i = 0; i < 32; i += N8) {
                    const auto a = hn::LoadU(du8, ql + i), c = hn::LoadU(du8, ql + 32 + i);
                    const auto q = hn::LoadU(du8, qh + i);
                    const auto low = hn::Set(du8, 15);
                    const auto q0 =
                        hn::Or(hn::And(a, low), hn::ShiftLeft<4>(hn::And(q, hn::Set(du8, 3))));
                    const auto q1 =
                        hn::Or(hn::And(c, low), hn::ShiftLeft<2>(hn::And(q, hn::Set(du8, 12))));
                    const auto q2 = hn::Or(hn::ShiftRight<4>(a), hn::And(q, hn::Set(du8, 48)));
                    const auto q3 = hn::Or(hn::ShiftRight<4>(c),
                                           hn::ShiftRight<2>(hn::And(q, hn::Set(du8, 192))));
                    const VI z = hn::Zero(d32);
                    const VI d0 = DotU8I8(d32, hn::BitCast(d8, q0), hn::LoadU(d8, xh + i), z);
                    const VI d1 = DotU8I8(d32, hn::BitCast(d8, q1), hn::LoadU(d8, xh + 32 + i), z);
                    const VI d2 = DotU8I8(d32, hn::BitCast(d8, q2), hn::LoadU(d8, xh + 64 + i), z);
                    const VI d3 = DotU8I8(d32, hn::BitCast(d8, q3), hn::LoadU(d8, xh + 96 + i), z);
                    sumi = hn::Add(sumi, hn::Add(hn::Add(hn::Mul(d0, scale_vec(sch + 0, i)),
                                                         hn::Mul(d1, scale_vec(sch + 2, i))),
                                                 hn::Add(hn::Mul(d2, scale_vec(sch + 4, i)),
                                                         hn::Mul(d3, scale_vec(sch + 6, i)))));
                }
            }
            int32_t corr = 0;
            for (int j = 0; j < 16; ++j) corr += int32_t(sc[j]) * bs[j];
            const int32_t total = ReduceSum(d32, sumi) - 32 * corr;
            acc[r] = hn::MulAdd(hn::Mul(BroadcastF16(b + 208), hn::Set(df, xd[k])),
                                hn::Set(df, float(total)), acc[r]);
        }
        for (int r = 0; r < kRows; ++r)
            for (size_t o = 0; o < kBytes; o += 64) hwy::Prefetch(pf + r * stride + bo + o);
    }
    // Every lane holds the same sum: take one.
    for (int r = 0; r < kRows; ++r) y[r] = hn::GetLane(acc[r]);
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

template <DType kType, int kRows>
HWY_INLINE void GemvFloat(const uint8_t* HWY_RESTRICT w, size_t stride, const uint8_t* pf,
                          const uint8_t* HWY_RESTRICT act, const ops::ActLayout& l,
                          float* HWY_RESTRICT y) {
    const hn::ScalableTag<float> df;
    const size_t N = hn::Lanes(df);
    const size_t n = size_t(l.n_in);
    const auto* x = reinterpret_cast<const float*>(act);
    constexpr size_t kElem = kType == DType::F32 ? 4 : 2;
    hn::Vec<decltype(df)> acc[kRows];
    for (int r = 0; r < kRows; ++r) acc[r] = hn::Zero(df);
    size_t i = 0;
    for (; i + N <= n; i += N) {
        const auto xv = hn::LoadU(df, x + i);
        for (int r = 0; r < kRows; ++r)
            acc[r] = hn::MulAdd(LoadWeights<kType>(w + r * stride, i, N), xv, acc[r]);
        if ((i * kElem) % 64 < N * kElem)
            for (int r = 0; r < kRows; ++r) hwy::Prefetch(pf + r * stride + i * kElem);
    }
    if (i < n) {
        const auto xv = LoadTail(df, x + i, n - i);
        for (int r = 0; r < kRows; ++r)
            acc[r] = hn::MulAdd(LoadWeights<kType>(w + r * stride, i, n - i), xv, acc[r]);
    }
    for (int r = 0; r < kRows; ++r) y[r] = ReduceSum(df, acc[r]);
}

// ---- Row loops ---------------------------------------------------------------------------

// Prefetches the first rows of a task (before the kernels' own prefetches, which run a
// distance ahead, take over) and returns that distance in rows.
HWY_INLINE int64_t PrefetchStart(const uint8_t* w, size_t stride, int64_t o0, int64_t o1) {
    const int64_t ahead = int64_t((kPrefetchBytes + stride - 1) / stride);
    const uint8_t* begin = w + size_t(o0) * stride;
    const uint8_t* end = w + size_t(o0 + (o1 - o0 < ahead ? o1 - o0 : ahead)) * stride;
    for (const uint8_t* p = begin; p < end; p += 64) hwy::Prefetch(p);
    return ahead;
}

// Rows [o0, o1) of w times one activation row: y[o - o0]. Kernel<kRows>::Run computes
// kRows consecutive rows.
template <template <int> class Kernel>
HWY_INLINE void GemvRows(const uint8_t* w, size_t stride, int64_t o0, int64_t o1,
                         const uint8_t* act, const ops::ActLayout& l, float* y) {
    constexpr int kRows = 4;
    const int64_t ahead = PrefetchStart(w, stride, o0, o1);
    auto pf_row = [&](int64_t o) { return w + size_t(o + ahead < o1 ? o + ahead : o) * stride; };
    int64_t o = o0;
    for (; o + kRows <= o1; o += kRows)
        Kernel<kRows>::Run(w + size_t(o) * stride, stride, pf_row(o), act, l, y + (o - o0));
    for (; o < o1; ++o)
        Kernel<1>::Run(w + size_t(o) * stride, stride, pf_row(o), act, l, y + (o - o0));
}

template <class Codec>
struct Blocks32Kernel {
    template <int kRows>
    struct K {
        static HWY_INLINE void Run(const uint8_t* w, size_t s, const uint8_t* pf, const uint8_t* a,
                                   const ops::ActLayout& l, float* y) {
            GemvBlocks32<Codec, kRows>(w, s, pf, a, l, y);
        }
    };
};
template <int kRows>
struct Q4KKernel {
    static HWY_INLINE void Run(const uint8_t* w, size_t s, const uint8_t* pf, const uint8_t* a,
                               const ops::ActLayout& l, float* y) {
        GemvQ45K<false, kRows>(w, s, pf, a, l, y);
    }
};
template <int kRows>
struct Q5KKernel {
    static HWY_INLINE void Run(const uint8_t* w, size_t s, const uint8_t* pf, const uint8_t* a,
                               const ops::ActLayout& l, float* y) {
        GemvQ45K<true, kRows>(w, s, pf, a, l, y);
    }
};
template <int kRows>
struct Q6KKernel {
    static HWY_INLINE void Run(const uint8_t* w, size_t s, const uint8_t* pf, const uint8_t* a,
                               const ops::ActLayout& l, float* y) {
        GemvQ6K<kRows>(w, s, pf, a, l, y);
    }
};
template <DType kType>
struct FloatKernel {
    template <int kRows>
    struct K {
        static HWY_INLINE void Run(const uint8_t* w, size_t s, const uint8_t* pf, const uint8_t* a,
                                   const ops::ActLayout& l, float* y) {
            GemvFloat<kType, kRows>(w, s, pf, a, l, y);
        }
    };
};

// Rows [o0, o1) of any supported weight type times one activation row. Returns false for a
// type without a kernel here.
HWY_INLINE bool GemvAnyType(const ops::Weight& wt, int64_t o0, int64_t o1, const uint8_t* act,
                            const ops::ActLayout& l, float* y) {
    const uint8_t* w = wt.data;
    const size_t s = wt.row_stride;
    switch (wt.type) {
        case DType::Q8_0:
            GemvRows<Blocks32Kernel<CodecQ8_0>::K>(w, s, o0, o1, act, l, y);
            return true;
        case DType::Q4_0:
            GemvRows<Blocks32Kernel<CodecQ4_0>::K>(w, s, o0, o1, act, l, y);
            return true;
        case DType::Q5_0:
            GemvRows<Blocks32Kernel<CodecQ5_0>::K>(w, s, o0, o1, act, l, y);
            return true;
        case DType::Q4_1:
            GemvRows<Blocks32Kernel<CodecQ4_1>::K>(w, s, o0, o1, act, l, y);
            return true;
        case DType::Q5_1:
            GemvRows<Blocks32Kernel<CodecQ5_1>::K>(w, s, o0, o1, act, l, y);
            return true;
        case DType::Q4_K:
            GemvRows<Q4KKernel>(w, s, o0, o1, act, l, y);
            return true;
        case DType::Q5_K:
            GemvRows<Q5KKernel>(w, s, o0, o1, act, l, y);
            return true;
        case DType::Q6_K:
            GemvRows<Q6KKernel>(w, s, o0, o1, act, l, y);
            return true;
        case DType::F32:
            GemvRows<FloatKernel<DType::F32>::K>(w, s, o0, o1, act, l, y);
            return true;
        case DType::F16:
            GemvRows<FloatKernel<DType::F16>::K>(w, s, o0, o1, act, l, y);
            return true;
        case DType::BF16:
            GemvRows<FloatKernel<DType::BF16>::K>(w, s, o0, o1, act, l, y);
            return true;
        default:
            return false;
    }
}

#endif  // HWY_TARGET != HWY_SCALAR
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
