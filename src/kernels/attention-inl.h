// Attention over the paged KV cache, one kv head and one range of key positions at a time,
// for a set of query vectors that all read that kv head (query rows of the heads of a GQA
// group, of one sequence or of several that share a prompt prefix): the online-softmax
// (flash) form, with one of two kernels by the number of query vectors:
//   few (decode)            attention_tree-inl.h: head dimensions in lanes, each K/V row
//                           converted once per tile of up to 4 query vectors;
//   many (prefill, prefix)  attention_lanes-inl.h: query vectors in lanes, each K/V row
//                           converted once for all of them.
//
// The result is a partial state per query vector: the running maximum m, the sum of
// exponentials l and the unnormalised output o = sum_p exp(s_p - m) v_p. States of disjoint
// key ranges merge by log-sum-exp (attention.cpp), and out = o / l at the end.
#if defined(TROUPE_KERNELS_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TROUPE_KERNELS_ATTENTION_INL_H_
#undef TROUPE_KERNELS_ATTENTION_INL_H_
#else
#define TROUPE_KERNELS_ATTENTION_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hwy/highway.h"
#include "kernels/attention_common-inl.h"
#include "kernels/attention_lanes-inl.h"
#include "kernels/attention_tree-inl.h"
#include "kernels/ops.h"
#include "kernels/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#if HWY_TARGET != HWY_SCALAR

// From this many query vectors on, AttendRange uses the lanes kernel.
HWY_INLINE int LanesMinQueries() {
    return int(hn::Lanes(AF()));
}

// Scratch floats AttendRange needs for nq query vectors.
HWY_INLINE size_t AttendScratchFloats(const ops::KvLayerView& kv, int nq) {
    const size_t hd_pad = PaddedHeadDim(kv.head_dim);
    const size_t kernel = nq >= LanesMinQueries()
                              ? LanesScratchFloats(nq, size_t(kv.head_dim), hd_pad)
                              : TreeScratchFloats(nq);
    return size_t(nq) * hd_pad + kernel + 16;
}

// Query vectors q[i] (head_dim floats each; position qpos[i]) over the keys at positions
// [k0, k1) of kv head `head`, read through block_table. States: m[i], l[i], o[i * hd_pad]
// (hd_pad = PaddedHeadDim), updated in place (start from m = -inf, l = 0, o = 0).
// scratch: AttendScratchFloats(kv, nq) floats.
void AttendRange(const ops::KvLayerView& kv, int head, const int32_t* block_table, int32_t k0,
                 int32_t k1, const float* const* q, const int32_t* qpos, int nq, float scale,
                 float* m, float* l, float* o, float* scratch) {
    const size_t N = hn::Lanes(AF());
    const size_t hd_pad = PaddedHeadDim(kv.head_dim);
    // 64-byte aligned: the scaled, zero-padded queries [nq][hd_pad], then the kernel's part.
    float* qs = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) / 64 * 64);
    float* rest = qs + (size_t(nq) * hd_pad + 15) / 16 * 16;
    int32_t max_pos = -1;
    for (int i = 0; i < nq; ++i) {
        float* dst = qs + size_t(i) * hd_pad;
        for (int d = 0; d < kv.head_dim; ++d) dst[d] = q[i][d] * scale;
        for (size_t d = size_t(kv.head_dim); d < hd_pad; ++d) dst[d] = 0.0f;
        max_pos = std::max(max_pos, qpos[i]);
    }
    const int32_t end = std::min(k1, max_pos + 1);  // no query sees keys beyond its position
    if (end <= k0) return;
    const bool f16 = kv.type == DType::F16;
    const bool lanes = nq >= LanesMinQueries();
    auto run = [&](auto chunks) {
        constexpr size_t kC = decltype(chunks)::value;
        if (lanes && f16) {
            AttendLanes<kC, true>(kv, head, block_table, k0, end, qs, qpos, nq, m, l, o, rest);
        } else if (lanes) {
            AttendLanes<kC, false>(kv, head, block_table, k0, end, qs, qpos, nq, m, l, o, rest);
        } else if (f16) {
            AttendTree<kC, true>(kv, head, block_table, k0, end, qs, qpos, nq, m, l, o, rest);
        } else {
            AttendTree<kC, false>(kv, head, block_table, k0, end, qs, qpos, nq, m, l, o, rest);
        }
    };
    // The usual head sizes with whole vectors unroll completely.
    const size_t n_chunks = hd_pad / N;
    if (size_t(kv.head_dim) != hd_pad) {
        run(std::integral_constant<size_t, 0>());
    } else if (n_chunks == 4) {
        run(std::integral_constant<size_t, 4>());
    } else if (n_chunks == 8) {
        run(std::integral_constant<size_t, 8>());
    } else if (n_chunks == 16) {
        run(std::integral_constant<size_t, 16>());
    } else {
        run(std::integral_constant<size_t, 0>());
    }
}

// dst[i] = f16(src[i]) or a copy, for kv_store.
void StoreKvVector(DType type, const float* HWY_RESTRICT src, uint8_t* HWY_RESTRICT dst, int n) {
    if (type != DType::F16) {
        std::memcpy(dst, src, size_t(n) * sizeof(float));
        return;
    }
    const AF df;
    const hn::Rebind<uint16_t, AF> du16;
    const size_t N = hn::Lanes(df);
    auto* h = reinterpret_cast<uint16_t*>(dst);
    size_t i = 0;
    for (; i + N <= size_t(n); i += N)
        hn::StoreU(F16BitsFromF32(df, hn::LoadU(df, src + i)), du16, h + i);
    if (i < size_t(n))
        StoreTail(du16, F16BitsFromF32(df, LoadTail(df, src + i, size_t(n) - i)), h + i,
                  size_t(n) - i);
}

#endif  // HWY_TARGET != HWY_SCALAR
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
