// Matrix-vector kernels: rows of a weight matrix, as stored in the model file, times one
// converted activation row. Decode reads every weight once per token, so these are written
// to keep up with memory bandwidth: several rows at a time (independent accumulators), the
// block scales of a row converted up front with one gather per vector of blocks, and one
// integer dot product per 32 values.
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
#include "kernels/simd-inl.h"
#include "tensor/quant_blocks.h"
#include "util/fp16.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_GCC_ACTUAL
#pragma GCC target("avx512vnni")
#endif
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#ifndef TROUPE_PF
#define TROUPE_PF 8192
#endif
// Software prefetch distance. Decode streams the weights from DRAM; the hardware prefetcher
// alone leaves it idle between rows (measured: 40% of the read-bandwidth probe without
// software prefetch, 85-100% with it).
constexpr size_t kPrefetchBytes = TROUPE_PF;
#if HWY_TARGET != HWY_SCALAR  // the one-lane target uses the reference dot products

// Blocks whose scales are converted in one go (bounds the stack use per row).
constexpr int64_t kScaleChunk = 64;

// out[k] = f16 scale of block k (the uint16 at byte k * block_bytes of row) * act_scale[k],
// for k < n. One gather per vector of blocks.
template <size_t kBlockBytes>
HWY_INLINE void BlockScales(const uint8_t* row, const float* HWY_RESTRICT act_scale, float* out,
                            int64_t n) {
    const hn::ScalableTag<float> df;
    const hn::RebindToSigned<decltype(df)> di;
    const hn::Rebind<uint16_t, decltype(df)> du16;
    const size_t N = hn::Lanes(df);
    const auto offsets = hn::Mul(hn::Iota(di, 0), hn::Set(di, int32_t(kBlockBytes)));
    int64_t k = 0;
    for (; k + int64_t(N) <= n; k += int64_t(N)) {
        const auto raw = hn::GatherOffset(
            di, reinterpret_cast<const int32_t*>(row + size_t(k) * kBlockBytes), offsets);
        const auto bits = hn::DemoteTo(du16, hn::And(raw, hn::Set(di, 0xFFFF)));
        hn::StoreU(hn::Mul(F32FromF16Bits(df, bits), hn::LoadU(df, act_scale + k)), df, out + k);
    }
    for (; k < n; ++k) {
        uint16_t h;
        std::memcpy(&h, row + size_t(k) * kBlockBytes, 2);
        out[k] = fp16_to_fp32(h) * act_scale[k];
    }
}

// The float value of the IEEE half at p, in every lane of df.
template <class DF>
HWY_INLINE hn::Vec<DF> BroadcastF16(DF df, const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    const hn::Rebind<uint16_t, DF> du16;
    return F32FromF16Bits(df, hn::Set(du16, h));
}

// Q8_0 rows: y[r] = sum_k d_w[r,k] d_x[k] sum_i w[r,k,i] x[k,i] for kRows consecutive rows.
// pf: where to prefetch (the same offset of a row further down; within the task's rows).
template <int kRows>
HWY_INLINE void GemvQ8_0(const uint8_t* HWY_RESTRICT w, size_t stride, const uint8_t* pf,
                         const uint8_t* HWY_RESTRICT act, const ops::ActLayout& l,
                         float* HWY_RESTRICT y) {
    const hn::CappedTag<int8_t, QK8_0> d8;
    const hn::Repartition<int32_t, decltype(d8)> d32;
    const hn::Repartition<float, decltype(d8)> df;
    const size_t N8 = hn::Lanes(d8);
    const auto* xq = reinterpret_cast<const int8_t*>(act);
    const auto* xd = reinterpret_cast<const float*>(act + l.scale_offset);
    hn::Vec<decltype(df)> acc[kRows];
    for (int r = 0; r < kRows; ++r) acc[r] = hn::Zero(df);
    for (int64_t k = 0; k < l.n_blocks; ++k) {
        const size_t wo = size_t(k) * sizeof(BlockQ8_0);
        const int8_t* xb = xq + k * QK8_0;
        hn::Vec<decltype(d32)> isum[kRows];
        for (int r = 0; r < kRows; ++r) isum[r] = hn::Zero(d32);
        for (size_t i = 0; i < QK8_0; i += N8) {
            const auto xv = hn::LoadU(d8, xb + i);
            for (int r = 0; r < kRows; ++r) {
                const auto wv =
                    hn::LoadU(d8, reinterpret_cast<const int8_t*>(w + r * stride + wo + 2 + i));
                isum[r] = DotI8I8(d32, wv, xv, isum[r]);
            }
        }
        for (int r = 0; r < kRows; ++r) hwy::Prefetch(pf + r * stride + wo);
        const auto vxd = hn::Set(df, xd[k]);
        for (int r = 0; r < kRows; ++r) {
            const auto prod = hn::Mul(hn::ConvertTo(df, isum[r]), vxd);
            acc[r] = hn::MulAdd(prod, BroadcastF16(df, w + r * stride + wo), acc[r]);
        }
    }
    for (int r = 0; r < kRows; ++r) y[r] = ReduceSum(df, acc[r]);
}

// Prefetches the first rows of a task (before its loop's prefetches take over) and returns
// how many rows ahead the loop prefetches.
HWY_INLINE int64_t PrefetchStart(const uint8_t* w, size_t stride, int64_t o0, int64_t o1) {
    const int64_t ahead = int64_t((kPrefetchBytes + stride - 1) / stride);
    const uint8_t* begin = w + size_t(o0) * stride;
    const uint8_t* end = w + size_t(o0 + (o1 - o0 < ahead ? o1 - o0 : ahead)) * stride;
    for (const uint8_t* p = begin; p < end; p += 64) hwy::Prefetch(p);
    return ahead;
}

// Rows [o0, o1) of a Q8_0 matrix times one activation row: y[o - o0].
HWY_INLINE void GemvRowsQ8_0(const uint8_t* w, size_t stride, int64_t o0, int64_t o1,
                             const uint8_t* act, const ops::ActLayout& l, float* y) {
    constexpr int kRows = 4;
    const int64_t ahead = PrefetchStart(w, stride, o0, o1);
    auto pf_row = [&](int64_t o) { return w + size_t(o + ahead < o1 ? o + ahead : o) * stride; };
    int64_t o = o0;
    for (; o + kRows <= o1; o += kRows)
        GemvQ8_0<kRows>(w + size_t(o) * stride, stride, pf_row(o), act, l, y + (o - o0));
    for (; o < o1; ++o)
        GemvQ8_0<1>(w + size_t(o) * stride, stride, pf_row(o), act, l, y + (o - o0));
}

#endif  // HWY_TARGET != HWY_SCALAR
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
