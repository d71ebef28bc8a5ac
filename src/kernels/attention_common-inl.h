// What the attention kernel's parts share: vector types, the canonical arithmetic, K and V of
// the paged cache in float, and the walk over a key range in steps of at most kStepKeys keys.
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
#include <type_traits>

#include "hwy/highway.h"
#include "kernels/ops.h"
#include "kernels/simd-inl.h"
#include "util/fp16.h"

HWY_BEFORE_NAMESPACE();
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#if HWY_TARGET != HWY_SCALAR

using AF = hn::ScalableTag<float>;
using AV = hn::Vec<AF>;
constexpr size_t kMaxLanes = hn::MaxLanes(AF());

// Keys per step: the softmax takes one maximum per step and query vector.
constexpr size_t kStepKeys = size_t(ops::kAttentionStepKeys);
constexpr size_t kStepVecs = kStepKeys / kMaxLanes;  // key vectors per step
static_assert(kStepKeys % kMaxLanes == 0, "a step is whole vectors of keys");

// Targets with 16 vector registers (the others have 32): smaller register tiles.
constexpr bool kFewRegisters = HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4;

// The running maximum of a query vector may lag the largest score seen by up to this much
// (exponentials up to e^8 ~ 3e3, harmless in float): the output is rescaled only when a score
// exceeds it by more, which after the first keys almost never happens.
constexpr float kMaxLag = 8.0f;

// e^x for x <= 88 (the softmax's exponentials: x <= kMaxLag), 0 below -87 and for -inf
// and NaN (ExpInRange, simd-inl.h).
HWY_INLINE AV ExpSoftmax(AV x) {
    const AF df;
    return hn::IfThenElseZero(hn::Gt(x, hn::Set(df, -87.0f)), ExpInRange(df, x));
}

// The canonical arithmetic. A query vector's result must not depend on the path that computes
// it nor on the other query vectors of its task (batch invariance: a row decoded alone, in a
// prefill chunk or through a shared prefix gives the same bits), so every path computes, per
// target:
//   score   of q (already multiplied by the scale, rounded to float) and key k: s = q_0 k_0,
//           then s = FMA(q_d, k_d, s) for d = 1 .. head_dim - 1 in ascending order (keys
//           in lanes: one FMA chain per key, no horizontal sums); with a BF16 cache, q is
//           rounded to BF16 (subnormals flushed, as K's are when stored) and the chain runs
//           over the dimension pairs i = 0 .. head_dim / 2 - 1 from s = 0: s = FMA(q_2i+1,
//           k_2i+1, s), then s = FMA(q_2i, k_2i, s) (the order of the BF16 pair dot product
//           instruction, whose products are exact in float);
//   chunks  the keys [0, position] of a query vector are cut at the multiples of the key
//           chunk (ops::kAttentionKeyChunk rounded to whole blocks, attention.cpp); each
//           chunk gives one partial state (m, l, o), starting from m = -inf, l = 0, o = 0;
//   steps   a chunk is cut further at the multiples of kStepKeys (ForEachKeyStep); keys a
//           query vector does not see score -inf (an exact 0 after Exp);
//   softmax per step: if a visible score exceeds the running maximum m by more than
//           kMaxLag, m becomes the step's largest visible score and l and o are multiplied
//           by ExpSoftmax(m_old - m_new) (0 for the first visible score, m_old = -inf); then
//           p_j = ExpSoftmax(s_j - m); a step with no visible key changes nothing;
//   sums    l is kept per key index j < kStepKeys within the steps, l_j += p_j, and summed
//           at the end by SumStepSums; o[d] = FMA(p_j, v_j[d], o[d]) for the step's keys in
//           ascending order; with a BF16 cache the values are weighted by p_j rounded to
//           BF16 (RNE; l sums the unrounded p_j), over the pairs of keys (j, j + 1), j = 0,
//           2, .. from the step's first key: o[d] = FMA(p_j+1, v_j+1[d], o[d]) (skipped when
//           j + 1 is beyond the step's keys), then o[d] = FMA(p_j, v_j[d], o[d]) (the order
//           of the pair dot product instruction, as for the scores);
//   merge   the chunk states in key order by MergeStates (attention-inl.h): m = max m_c,
//           w_c = std::exp(m_c - m), l = sum l_c w_c, o = sum o_c w_c (FMAs in key order),
//           out = o * (1 / l); states with l_c = 0 are skipped.

// Floats per padded head vector: head_dim rounded up to whole vectors.
HWY_INLINE size_t PaddedHeadDim(int head_dim) {
    const size_t N = hn::Lanes(AF());
    return (size_t(head_dim) + N - 1) / N * N;
}

// The sum of exponentials of a query vector from its per-index sums l[kStepKeys] (64-byte
// aligned): the one order every path uses.
HWY_INLINE float SumStepSums(const float* HWY_RESTRICT l) {
    const AF df;
    const size_t N = hn::Lanes(df);
    AV sum = hn::Zero(df);
    for (size_t v = 0; v < kStepKeys; v += N) sum = hn::Add(sum, hn::Load(df, l + v));
    return ReduceSum(df, sum);
}

// The element types of the cache as the kernel reads them: uint16_t (F16 bits), float (F32),
// and for a BF16 cache either Bf16 (scores by float multiply-adds of the widened pairs) or
// Bf16Dot (the same bits; scores by the CPU's BF16 pair dot product, attention_tile-inl.h).
// Both BF16 forms compute the same arithmetic (attention_common's canonical form, below).
struct Bf16 {
    uint16_t bits;
};
struct Bf16Dot {
    uint16_t bits;
};
template <class T>
constexpr bool kIsBf16 = std::is_same_v<T, Bf16> || std::is_same_v<T, Bf16Dot>;

// N consecutive elements of the cache (F16 or BF16 bits, F32) or of a float scratch in float.
HWY_INLINE AV LoadKv(const uint16_t* HWY_RESTRICT p) {
    return F32FromF16Bits(AF(), hn::LoadU(hn::Rebind<uint16_t, AF>(), p));
}
HWY_INLINE AV LoadKv(const float* HWY_RESTRICT p) {
    return hn::LoadU(AF(), p);
}
template <class T, std::enable_if_t<kIsBf16<T>, int> = 0>
HWY_INLINE AV LoadKv(const T* HWY_RESTRICT p) {
    const hn::Rebind<uint16_t, AF> du16;
    return F32FromBF16Bits(AF(), hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p)));
}

// One element of the cache in float.
HWY_INLINE float KvToFloat(uint16_t h) {
    return fp16_to_fp32(h);
}
HWY_INLINE float KvToFloat(float f) {
    return f;
}
template <class T, std::enable_if_t<kIsBf16<T>, int> = 0>
HWY_INLINE float KvToFloat(T h) {
    return bf16_to_fp32(h.bits);
}

// Chunk c (lanes c*N ..) of a V row in float. kChunks != 0: the head is exactly kChunks
// vectors; 0: any size (a partial last chunk is read without overrun, zero-padded).
template <class T, size_t kChunks>
HWY_INLINE AV LoadVChunk(const T* HWY_RESTRICT row, size_t c, size_t hd) {
    const size_t N = hn::Lanes(AF());
    const size_t i = c * N;
    if (kChunks != 0 || i + N <= hd) return LoadKv(row + i);
    if constexpr (kIsBf16<T>) {
        const hn::Rebind<uint16_t, AF> du16;
        return F32FromBF16Bits(AF(),
                               LoadTail(du16, reinterpret_cast<const uint16_t*>(row + i), hd - i));
    } else if constexpr (sizeof(T) == 2) {
        const hn::Rebind<uint16_t, AF> du16;
        return F32FromF16Bits(AF(), LoadTail(du16, row + i, hd - i));
    } else {
        return LoadTail(AF(), row + i, hd - i);
    }
}

// Elements between consecutive keys of one dimension (or dimension pair) of K in a block:
// 2 in the BF16 pair layout (ops::kv_key_elem), else 1.
template <class T>
constexpr size_t kKeyElems = kIsBf16<T> ? 2 : 1;

// One step of keys as the kernel reads them: n keys at positions pos0 .. pos0 + n - 1.
// K is stored transposed in a block (ops.h): dimension d of key j is at k[j] + d * k_stride
// elements, or for BF16 (pairs) at k[j] + (d / 2) * k_stride + d % 2 (KeyElem). V rows are
// contiguous: v[j] is the row of key j. `aligned`: every run of N keys from index 0 lies in
// one block, so that k[v * N] .. are N consecutive keys (N pairs for BF16).
template <class T>
struct KeyStep {
    int32_t pos0 = 0;
    int n = 0;
    bool aligned = false;
    size_t k_stride = 0;
    const T* k[kStepKeys];
    const T* v[kStepKeys];
};

// Dimension d of key j of a step.
template <class T>
HWY_INLINE T KeyElem(const KeyStep<T>& ks, int j, size_t d) {
    if constexpr (kIsBf16<T>) {
        return ks.k[j][(d / 2) * ks.k_stride + d % 2];
    } else {
        return ks.k[j][d * ks.k_stride];
    }
}

// Starts loading the K and V of one kv head of a block into L2 (software prefetch): a
// sequence's blocks are one run of memory only where they were allocated together (agents
// decoding side by side get their new blocks interleaved), and the hardware prefetcher needs
// some misses to find a run. L2, not L1: a task's queries, states and sums of exponentials
// already fill most of L1.
HWY_INLINE void PrefetchKvBlock(const ops::KvLayerView& kv, int32_t block, int head) {
    const size_t at = ops::kv_block_offset(kv, block) + size_t(head) * kv.head_stride;
    const size_t bytes = size_t(kv.block_size) * size_t(kv.head_dim) * ops::kv_elem_bytes(kv.type);
    for (size_t o = 0; o < bytes; o += 64) {
        __builtin_prefetch(kv.k + at + o, 0, 2);
        __builtin_prefetch(kv.v + at + o, 0, 2);
    }
}

// Calls step(const KeyStep<T>&) for the keys [k0, end) of kv head `head` (T: uint16_t for an
// F16 cache, float for F32, Bf16 / Bf16Dot for BF16), cut at the multiples of kStepKeys.
template <class T, class Step>
HWY_INLINE void ForEachKeyStep(const ops::KvLayerView& kv, int head, const int32_t* block_table,
                               int32_t k0, int32_t end, const Step& step) {
    constexpr int32_t kPrefetchKeys = 2 * int32_t(kStepKeys);  // two steps ahead
    const int32_t bs = kv.block_size;
    const size_t N = hn::Lanes(AF());
    const size_t hd = size_t(kv.head_dim);
    const auto block_base = [&](const uint8_t* base, int32_t b) {
        return base + ops::kv_block_offset(kv, block_table[b]) + size_t(head) * kv.head_stride;
    };
    const int32_t last_block = (end - 1) / bs;
    int32_t prefetched = k0 / bs;  // blocks < prefetched are requested (the first step's too:
                                   // their misses then overlap)
    KeyStep<T> st;
    st.k_stride = size_t(bs) * kKeyElems<T>;
    st.aligned = bs % int32_t(N) == 0 && k0 % int32_t(N) == 0;
    for (int32_t s0 = k0; s0 < end; s0 = (s0 / int32_t(kStepKeys) + 1) * int32_t(kStepKeys)) {
        const int32_t s1 = std::min(end, (s0 / int32_t(kStepKeys) + 1) * int32_t(kStepKeys));
        for (; prefetched <= std::min(last_block, (s1 - 1 + kPrefetchKeys) / bs); ++prefetched)
            PrefetchKvBlock(kv, block_table[prefetched], head);
        st.pos0 = s0;
        st.n = int(s1 - s0);
        for (int32_t p = s0; p < s1;) {  // runs of keys within one block
            const int32_t b = p / bs, run_end = std::min(s1, (b + 1) * bs);
            const T* kb =
                reinterpret_cast<const T*>(block_base(kv.k, b)) + size_t(p - b * bs) * kKeyElems<T>;
            const T* vb = reinterpret_cast<const T*>(block_base(kv.v, b)) + size_t(p - b * bs) * hd;
            for (int j = int(p - s0); p < run_end; ++p, ++j, kb += kKeyElems<T>, vb += hd) {
                st.k[j] = kb;
                st.v[j] = vb;
            }
        }
        step(st);
    }
}

#endif  // HWY_TARGET != HWY_SCALAR
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
