// Attention over the paged KV cache, one kv head and one range of key positions at a time,
// for a set of query vectors that all read that kv head (query rows of the heads of a GQA
// group, of one sequence or of several that share a prompt prefix): the online-softmax
// (flash) form, with the kernel of attention_tile-inl.h.
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
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "hwy/highway.h"
#include "kernels/attention_common-inl.h"
#include "kernels/attention_tile-inl.h"
#include "kernels/ops.h"
#include "kernels/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#if HWY_TARGET != HWY_SCALAR

// Scratch floats AttendRange needs for nq query vectors.
HWY_INLINE size_t AttendScratchFloats(const ops::KvLayerView& kv, int nq) {
    const size_t hd_pad = PaddedHeadDim(kv.head_dim);
    return size_t(nq) * hd_pad + TileScratchFloats(nq, size_t(kv.head_dim)) + 32;
}

// Floats per partial state (ops::kAttnState* layout), a multiple of 16.
HWY_INLINE size_t AttnStateFloats(int head_dim) {
    return (size_t(ops::kAttnStateO) + PaddedHeadDim(head_dim) + 15) / 16 * 16;
}

// The AttendTile instance for a cache of element type T (uint16_t: F16, float: F32, Bf16 /
// Bf16Dot: BF16) and this head size: the usual sizes with whole vectors unroll completely.
using AttendTileFn = void (*)(const ops::KvLayerView&, int, const int32_t*, int32_t, int32_t,
                              const float*, const int32_t*, int, float*, size_t,
                              const ops::AttentionTail*, float*, const PrefetchRuns*);
template <class T>
AttendTileFn PickAttendTile(int head_dim) {
    const size_t hd_pad = PaddedHeadDim(head_dim);
    const size_t n_chunks = hd_pad / hn::Lanes(AF());
    if (size_t(head_dim) != hd_pad) return &AttendTile<0, T>;
    if (n_chunks == 4) return &AttendTile<4, T>;
    if (n_chunks == 8) return &AttendTile<8, T>;
    return &AttendTile<0, T>;
}

// The BF16 cache's bits of x: BF16BitsFromF32 with subnormals flushed to zero, their sign
// kept (fp32_to_bf16_ftz, util/fp16.h).
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, AF>> KvBf16Bits(AV x) {
    const hn::Rebind<uint16_t, AF> du16;
    const auto h = BF16BitsFromF32(AF(), x);
    return hn::IfThenElse(hn::Eq(hn::And(h, hn::Set(du16, uint16_t(0x7f80))), hn::Zero(du16)),
                          hn::And(h, hn::Set(du16, uint16_t(0x8000))), h);
}

// dst[hd] = src * scale; for a BF16 cache (hd even) rounded to BF16 (KvBf16Bits): as floats,
// or with `packed` as the BF16 bits in dimension order (the pairs ScoreTileDot reads: word i
// holds dimension 2i in its low half, 2i + 1 in its high half).
HWY_INLINE void ScaleQuery(const float* HWY_RESTRICT src, int hd, float scale, DType type,
                           bool packed, float* HWY_RESTRICT dst) {
    const AF df;
    const hn::Rebind<uint16_t, AF> du16;
    const size_t N = hn::Lanes(df);
    const AV sv = hn::Set(df, scale);
    auto* bits = reinterpret_cast<uint16_t*>(dst);
    for (size_t d = 0; d < size_t(hd); d += N) {
        const size_t n = std::min(N, size_t(hd) - d);
        const AV x = hn::Mul(n == N ? hn::LoadU(df, src + d) : LoadTail(df, src + d, n), sv);
        if (type != DType::BF16) {
            n == N ? hn::StoreU(x, df, dst + d) : StoreTail(df, x, dst + d, n);
            continue;
        }
        const auto h = KvBf16Bits(x);
        if (packed) {
            n == N ? hn::StoreU(h, du16, bits + d) : StoreTail(du16, h, bits + d, n);
        } else {
            const AV r = F32FromBF16Bits(df, h);
            n == N ? hn::StoreU(r, df, dst + d) : StoreTail(df, r, dst + d, n);
        }
    }
}

// Query vectors q[i] (head_dim floats each; position qpos[i]) over the keys at positions
// [k0, k1) of kv head `head`, read through block_table, cut at the multiples of `chunk`: the
// partial state of chunk c (c = 0 from k0) and query vector i goes to
// states + (c * nq + i) * stride (ops::kAttnState* layout; 64-byte aligned). tail (may be
// null): keys from tail->split on read per member (ops::AttentionTail). scratch:
// AttendScratchFloats(kv, nq) floats. next (may be null): memory read after this range (the
// next task's first keys), prefetched during the last chunk.
void AttendRange(const ops::KvLayerView& kv, int head, const int32_t* block_table, int32_t k0,
                 int32_t k1, int32_t chunk, const float* const* q, const int32_t* qpos, int nq,
                 float scale, float* states, size_t stride, const ops::AttentionTail* tail,
                 float* scratch, const PrefetchRuns* next) {
    const size_t hd_pad = PaddedHeadDim(kv.head_dim);
    // 64-byte aligned: the scaled queries [nq][hd_pad] (the kernel reads d < head_dim), then
    // the kernel's part.
    float* qs = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) / 64 * 64);
    float* rest = qs + (size_t(nq) * hd_pad + 15) / 16 * 16;
    int32_t max_pos = -1;
    const bool bf16 = kv.type == DType::BF16;
    const bool dot = bf16 && HasDotBf16();
    for (int i = 0; i < nq; ++i) {
        ScaleQuery(q[i], kv.head_dim, scale, kv.type, dot, qs + size_t(i) * hd_pad);
        max_pos = std::max(max_pos, qpos[i]);
    }
    AttendTileFn attend;
    if (kv.type == DType::F16) {
        attend = PickAttendTile<uint16_t>(kv.head_dim);
#ifdef TROUPE_ATTN_DPBF16
    } else if (dot) {
        attend = PickAttendTile<Bf16Dot>(kv.head_dim);
#endif
    } else if (bf16) {
        attend = PickAttendTile<Bf16>(kv.head_dim);
    } else {
        attend = PickAttendTile<float>(kv.head_dim);
    }
    // The last chunk with keys some query vector sees: it prefetches `next`.
    const int32_t last_c0 = std::max(k0, (std::min(k1, max_pos + 1) - 1) / chunk * chunk);
    for (int32_t c0 = k0; c0 < k1; c0 = (c0 / chunk + 1) * chunk, states += size_t(nq) * stride) {
        for (int i = 0; i < nq; ++i) {
            float* st = states + size_t(i) * stride;
            st[ops::kAttnStateM] = -std::numeric_limits<float>::infinity();
            st[ops::kAttnStateL] = 0.0f;
            std::fill(st + ops::kAttnStateO, st + ops::kAttnStateO + hd_pad, 0.0f);
        }
        // No query sees keys beyond its position.
        const int32_t end = std::min({k1, (c0 / chunk + 1) * chunk, max_pos + 1});
        if (end > c0)
            attend(kv, head, block_table, c0, end, qs, qpos, nq, states, stride, tail, rest,
                   c0 == last_c0 ? next : nullptr);
    }
}

// out[hd] = the log-sum-exp merge of n partial states in key order, state k at
// base + (slots ? slots[k] : k) * stride: m = max m_k, w_k = exp(m_k - m), l = sum l_k w_k,
// out = (sum o_k w_k) / l, states with l_k = 0 (no visible key) skipped. The one merge of
// every path, so that results do not depend on how key ranges were split into tasks.
void MergeStates(const float* base, const int* slots, size_t stride, int n, int hd, float* out) {
    const AF df;
    const size_t N = hn::Lanes(df);
    const size_t hd_pad = PaddedHeadDim(hd);
    const auto at = [&](int k) { return base + size_t(slots ? slots[k] : k) * stride; };
    float m = -std::numeric_limits<float>::infinity();
    for (int k = 0; k < n; ++k) m = std::max(m, at(k)[ops::kAttnStateM]);
    float l = 0.0f;
    constexpr size_t kMaxChunks = 512 / kMaxLanes;
    AV acc[kMaxChunks];
    for (size_t c = 0; c < hd_pad / N; ++c) acc[c] = hn::Zero(df);
    for (int k = 0; k < n; ++k) {
        const float* st = at(k);
        if (st[ops::kAttnStateL] == 0.0f) continue;
        const float w = std::exp(st[ops::kAttnStateM] - m);
        l += st[ops::kAttnStateL] * w;
        const AV wv = hn::Set(df, w);
        for (size_t c = 0; c < hd_pad / N; ++c)
            acc[c] = hn::MulAdd(hn::Load(df, st + ops::kAttnStateO + c * N), wv, acc[c]);
    }
    const AV inv = hn::Set(df, l > 0.0f ? 1.0f / l : 0.0f);
    for (size_t c = 0; c < hd_pad / N; ++c) {
        const size_t d = c * N;
        const AV v = hn::Mul(acc[c], inv);
        if (d + N <= size_t(hd)) {
            hn::StoreU(v, df, out + d);
        } else {
            StoreTail(df, v, out + d, size_t(hd) - d);
        }
    }
}

// dst[i * stride] = f16(src[i]), bf16(src[i]) or src[i] (stride in elements: 1 for a V row,
// block_size for an F16 / F32 K vector, which the cache stores transposed), for kv_store.
void StoreKvVector(DType type, const float* HWY_RESTRICT src, uint8_t* HWY_RESTRICT dst, int n,
                   size_t stride) {
    if (type == DType::F32) {
        if (stride == 1) {
            std::memcpy(dst, src, size_t(n) * sizeof(float));
        } else {
            for (int i = 0; i < n; ++i)
                std::memcpy(dst + size_t(i) * stride * sizeof(float), src + i, sizeof(float));
        }
        return;
    }
    if (stride != 1) {
        HWY_ALIGN uint16_t tmp[512];
        for (int i0 = 0; i0 < n; i0 += 512) {
            const int len = std::min(512, n - i0);
            StoreKvVector(type, src + i0, reinterpret_cast<uint8_t*>(tmp), len, 1);
            for (int i = 0; i < len; ++i)
                std::memcpy(dst + (size_t(i0 + i) * stride) * 2, tmp + i, 2);
        }
        return;
    }
    const AF df;
    const hn::Rebind<uint16_t, AF> du16;
    const size_t N = hn::Lanes(df);
    auto* h = reinterpret_cast<uint16_t*>(dst);
    const auto bits = [&](AV x) {
        return type == DType::BF16 ? KvBf16Bits(x) : F16BitsFromF32(df, x);
    };
    size_t i = 0;
    for (; i + N <= size_t(n); i += N) hn::StoreU(bits(hn::LoadU(df, src + i)), du16, h + i);
    if (i < size_t(n))
        StoreTail(du16, bits(LoadTail(df, src + i, size_t(n) - i)), h + i, size_t(n) - i);
}

#endif  // HWY_TARGET != HWY_SCALAR
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
