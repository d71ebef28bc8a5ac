// What the two attention kernels share (attention_tree-inl.h for a few query vectors,
// attention_lanes-inl.h for many): vector types, reading K/V rows of the paged cache in float,
// and the walk over the blocks of a key range in steps of at most kStepKeys keys.
#if defined(TROUPE_KERNELS_ATTENTION_COMMON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TROUPE_KERNELS_ATTENTION_COMMON_INL_H_
#undef TROUPE_KERNELS_ATTENTION_COMMON_INL_H_
#else
#define TROUPE_KERNELS_ATTENTION_COMMON_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/ops.h"
#include "kernels/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#if HWY_TARGET != HWY_SCALAR

using AF = hn::ScalableTag<float>;
using AV = hn::Vec<AF>;
constexpr size_t kMaxLanes = hn::MaxLanes(AF());

// Keys per step: the softmax takes one maximum per step and query vector.
constexpr size_t kStepKeys = 16;
static_assert(kStepKeys % kMaxLanes == 0, "a step is whole vectors of keys");

// Targets with 16 vector registers (the others have 32): smaller register tiles.
constexpr bool kFewRegisters = HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4;

// The running maximum of a query vector may lag the largest score seen by up to this much
// (exponentials up to e^8 ~ 3e3, harmless in float): the output is rescaled only when a score
// exceeds it by more, which after the first keys almost never happens.
constexpr float kMaxLag = 8.0f;

// e^x for x <= 88 (the softmax's exponentials: x <= kMaxLag), 0 below -87 and for -inf
// and NaN. Within 2 ulp of std::exp: x = n ln2 + r with |r| <= ln2/2, e^r by a polynomial
// (hwy's Exp coefficients), 2^n from n's bits. About 15 instructions, two thirds of hwy's
// Exp (which handles the whole range).
HWY_INLINE AV ExpSoftmax(AV x) {
    const AF df;
    const hn::RebindToUnsigned<AF> du;
    // t = round(x / ln2) + 127 in the low bits of a float near 1.5 * 2^23.
    const AV magic = hn::Set(df, 12582912.0f + 127.0f);
    const AV t = hn::MulAdd(x, hn::Set(df, 1.44269504088896341f), magic);
    const AV n = hn::Sub(t, magic);
    AV r = hn::MulAdd(n, hn::Set(df, -0.693145751953125f), x);
    r = hn::MulAdd(n, hn::Set(df, -1.428606765330187045e-6f), r);
    AV p = hn::Set(df, 0.000198527617612853646278381f);
    p = hn::MulAdd(p, r, hn::Set(df, 0.00139304355252534151077271f));
    p = hn::MulAdd(p, r, hn::Set(df, 0.00833336077630519866943359f));
    p = hn::MulAdd(p, r, hn::Set(df, 0.0416664853692054748535156f));
    p = hn::MulAdd(p, r, hn::Set(df, 0.166666671633720397949219f));
    p = hn::MulAdd(p, r, hn::Set(df, 0.5f));
    p = hn::MulAdd(p, r, hn::Set(df, 1.0f));
    p = hn::MulAdd(p, r, hn::Set(df, 1.0f));
    const AV scale = hn::BitCast(df, hn::ShiftLeft<23>(hn::BitCast(du, t)));  // 2^n
    return hn::IfThenElseZero(hn::Gt(x, hn::Set(df, -87.0f)), hn::Mul(p, scale));
}

// The canonical arithmetic. A query vector's result must not depend on the kernel that computes
// it nor on the other query vectors of its task (batch invariance: a row decoded alone, in a
// prefill chunk or through a shared prefix gives the same bits), so both kernels compute,
// per target (N lanes, head padded with zeros to whole vectors):
//   score   of q and key k: N partial sums P_r, r < N, each the FMA chain over the chunks
//           c = 0, 1, .. of q[cN + r] * k[cN + r] (the first a product); then the balanced
//           pairwise tree over them: adjacent aligned pairs, then pairs of pairs, ..
//           ((P_0 + P_1) + (P_2 + P_3)) + .. (the tree kernel's lanes, see PairSums);
//   steps   of up to kStepKeys keys from ForEachKeyStep (aligned to the task's key range and
//           the blocks), keys a query vector does not see score -inf (an exact 0 after Exp);
//   softmax per step: if a visible score exceeds the running maximum m by more than
//           kMaxLag, m becomes the step's largest visible score and l and o are multiplied
//           by ExpSoftmax(m_old - m_new); then p_j = ExpSoftmax(s_j - m) (m = 0 before any
//           visible key);
//   sums    l is kept per key position j < kStepKeys of the steps, l_j += p_j, and summed
//           at the end by SumStepSums; o[d] = FMA(p_j, v_j[d], o[d]) for the step's keys in
//           ascending order.

constexpr int Log2Lanes(size_t n) {
    return n <= 1 ? 0 : 1 + Log2Lanes(n / 2);
}

// Floats per padded head vector: head_dim rounded up to whole vectors.
HWY_INLINE size_t PaddedHeadDim(int head_dim) {
    const size_t N = hn::Lanes(AF());
    return (size_t(head_dim) + N - 1) / N * N;
}

// The sum of exponentials of a query vector from its per-position sums l16[kStepKeys]
// (64-byte aligned): the one order every kernel uses.
HWY_INLINE float SumStepSums(const float* HWY_RESTRICT l16) {
    const AF df;
    const size_t N = hn::Lanes(df);
    AV sum = hn::Zero(df);
    for (size_t v = 0; v < kStepKeys; v += N) sum = hn::Add(sum, hn::Load(df, l16 + v));
    return ReduceSum(df, sum);
}

// Chunk c (lanes c*N ..) of a K or V row in float. kChunks != 0: the head is exactly
// kChunks vectors; 0: any size (a partial last chunk is read without overrun, zero-padded).
template <bool kF16, size_t kChunks>
HWY_INLINE AV LoadKvChunk(const uint8_t* HWY_RESTRICT row, size_t c, size_t hd) {
    const AF df;
    const size_t N = hn::Lanes(df);
    const size_t i = c * N;
    if constexpr (kF16) {
        const hn::Rebind<uint16_t, AF> du16;
        const auto* h = reinterpret_cast<const uint16_t*>(row) + i;
        if (kChunks != 0 || i + N <= hd) return F32FromF16Bits(df, hn::LoadU(du16, h));
        return F32FromF16Bits(df, LoadTail(du16, h, hd - i));
    } else {
        const auto* f = reinterpret_cast<const float*>(row) + i;
        if (kChunks != 0 || i + N <= hd) return hn::LoadU(df, f);
        return LoadTail(df, f, hd - i);
    }
}

// Rows [0, n) at src (row_bytes apart) in float into dst[j * hd_pad + d]; the padding
// columns and the rows n .. kStepKeys are zero. kChunks as for LoadKvChunk.
template <bool kF16, size_t kChunks>
HWY_INLINE void ConvertKvRows(const uint8_t* HWY_RESTRICT src, size_t row_bytes, int n, size_t hd,
                              size_t hd_pad, float* HWY_RESTRICT dst) {
    const AF df;
    const size_t N = hn::Lanes(df);
    const size_t n_chunks = kChunks ? kChunks : hd_pad / N;
    for (int j = 0; j < n; ++j, src += row_bytes, dst += hd_pad)
        for (size_t c = 0; c < n_chunks; ++c)
            hn::Store(LoadKvChunk<kF16, kChunks>(src, c, hd), df, dst + c * N);
    for (int j = n; j < int(kStepKeys); ++j, dst += hd_pad)
        for (size_t c = 0; c < n_chunks; ++c) hn::Store(hn::Zero(df), df, dst + c * N);
}

// Starts loading the K and V rows of one kv head of a block (software prefetch): a block's
// rows are contiguous but blocks are far apart, so the hardware prefetcher only finds each
// block after some misses.
HWY_INLINE void PrefetchKvBlock(const ops::KvLayerView& kv, int32_t block, int head) {
    const size_t at = size_t(block) * kv.block_stride + size_t(head) * kv.head_stride;
    const size_t bytes =
        size_t(kv.block_size) * size_t(kv.head_dim) * (kv.type == DType::F16 ? 2 : 4);
    for (size_t o = 0; o < bytes; o += 64) {
        hwy::Prefetch(kv.k + at + o);
        hwy::Prefetch(kv.v + at + o);
    }
}

// Calls step(k_rows, v_rows, n, pos0) for the keys [k0, end) of kv head `head` in runs of
// n <= kStepKeys consecutive keys of one block, starting at position pos0.
template <class Step>
HWY_INLINE void ForEachKeyStep(const ops::KvLayerView& kv, int head, const int32_t* block_table,
                               int32_t k0, int32_t end, size_t row_bytes, const Step& step) {
    constexpr int32_t kPrefetchBlocks = 3;
    const int bs = kv.block_size;
    for (int32_t b = k0 / bs + 1; b < k0 / bs + kPrefetchBlocks && b * bs < end; ++b)
        PrefetchKvBlock(kv, block_table[b], head);
    for (int32_t b0 = k0 / bs * bs; b0 < end; b0 += bs) {
        const int32_t ahead = b0 + kPrefetchBlocks * bs;
        if (ahead < end) PrefetchKvBlock(kv, block_table[ahead / bs], head);
        const size_t at =
            size_t(block_table[b0 / bs]) * kv.block_stride + size_t(head) * kv.head_stride;
        const int s_end = std::min(end, b0 + bs) - b0;
        for (int s0 = std::max(k0, b0) - b0; s0 < s_end; s0 += int(kStepKeys)) {
            const int n = std::min(int(kStepKeys), s_end - s0);
            step(kv.k + at + size_t(s0) * row_bytes, kv.v + at + size_t(s0) * row_bytes, n,
                 b0 + s0);
        }
    }
}

#endif  // HWY_TARGET != HWY_SCALAR
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
