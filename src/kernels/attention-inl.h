// Attention over the paged KV cache, one kv head and one range of key positions at a time,
// for a set of query vectors (a query row of one head) that all read that kv head: the
// online-softmax (flash) form. Each K/V block is converted to float once and used by every
// query vector of the set: with the rows of several sequences that share a prompt prefix
// the shared blocks are read once for all of them (attention as matrix-matrix work).
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

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/ops.h"
#include "kernels/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#if HWY_TARGET != HWY_SCALAR

using AF = hn::ScalableTag<float>;
using AV = hn::Vec<AF>;

// Floats per padded head vector: head_dim rounded up to whole vectors.
HWY_INLINE size_t PaddedHeadDim(int head_dim) {
    const size_t N = hn::Lanes(AF());
    return (size_t(head_dim) + N - 1) / N * N;
}

// Slots [s0, s1) of one kv head of a physical block into dst[(s - s0) * hd_pad + d]; the
// padding columns and rows up to n_rows are zero.
HWY_INLINE void LoadKvRows(const ops::KvLayerView& kv, const uint8_t* base, int32_t block, int head,
                           int s0, int s1, float* HWY_RESTRICT dst, size_t hd_pad, size_t n_rows) {
    const AF df;
    const size_t N = hn::Lanes(df);
    const size_t hd = size_t(kv.head_dim);
    const size_t elem = kv.type == DType::F16 ? 2 : 4;
    const uint8_t* src = base + size_t(block) * kv.block_stride + size_t(head) * kv.head_stride +
                         size_t(s0) * hd * elem;
    for (int s = s0; s < s1; ++s, src += hd * elem) {
        float* row = dst + size_t(s - s0) * hd_pad;
        size_t i = 0;
        if (kv.type == DType::F16) {
            const hn::Rebind<uint16_t, AF> du16;
            const auto* h = reinterpret_cast<const uint16_t*>(src);
            for (; i + N <= hd; i += N)
                hn::StoreU(F32FromF16Bits(df, hn::LoadU(du16, h + i)), df, row + i);
            if (i < hd) hn::StoreU(F32FromF16Bits(df, LoadTail(du16, h + i, hd - i)), df, row + i);
        } else {
            const auto* f = reinterpret_cast<const float*>(src);
            for (; i + N <= hd; i += N) hn::StoreU(hn::LoadU(df, f + i), df, row + i);
            if (i < hd) hn::StoreU(LoadTail(df, f + i, hd - i), df, row + i);
        }
    }
    for (size_t r = size_t(s1 - s0); r < n_rows; ++r)
        std::memset(dst + r * hd_pad, 0, hd_pad * sizeof(float));
}

// Lane j of the result is the sum of the lanes of v[j], for N = Lanes vectors (v is
// clobbered). Pairwise halving: ConcatEven + ConcatOdd put the pair sums of two vectors
// side by side, so after log2(N) rounds the sums sit in order.
HWY_INLINE AV TransposeReduce(AV* v) {
    const AF df;
    for (size_t n = hn::Lanes(df); n > 1; n /= 2)
        for (size_t i = 0; i < n / 2; ++i)
            v[i] = hn::Add(hn::ConcatEven(df, v[2 * i + 1], v[2 * i]),
                           hn::ConcatOdd(df, v[2 * i + 1], v[2 * i]));
    return v[0];
}

// One query vector over the key rows of one block (kf, vf: [rows][hd_pad], rows a multiple
// of N): updates its state (m, l, o[hd_pad]). Key j has position pos0 + j; keys at or beyond
// n_valid, or after the query's position, are masked. kChunks = hd_pad / N when known at
// compile time (the output stays in registers), else 0.
template <size_t kChunks>
HWY_INLINE void AttendBlock(const float* HWY_RESTRICT q, int32_t qpos, const float* HWY_RESTRICT kf,
                            const float* HWY_RESTRICT vf, size_t hd_pad, int32_t pos0, int n_valid,
                            float& m, float& l, float* HWY_RESTRICT o) {
    const AF df;
    const size_t N = hn::Lanes(df);
    const size_t n_chunks = kChunks ? kChunks : hd_pad / N;
    const int visible = std::min(n_valid, int(qpos - pos0 + 1));
    constexpr size_t kMaxN = hn::MaxLanes(AF());
    HWY_ALIGN float p[kMaxN];
    for (int g0 = 0; g0 < visible; g0 += int(N)) {
        // Scores of N keys: N dot products, then one transposing reduction.
        AV acc[kMaxN];
        for (size_t j = 0; j < N; ++j) acc[j] = hn::Zero(df);
        const float* kg = kf + size_t(g0) * hd_pad;
        for (size_t c = 0; c < n_chunks; ++c) {
            const AV qv = hn::LoadU(df, q + c * N);
            for (size_t j = 0; j < N; ++j)
                acc[j] = hn::MulAdd(qv, hn::LoadU(df, kg + j * hd_pad + c * N), acc[j]);
        }
        AV s = TransposeReduce(acc);
        const size_t n_here = size_t(std::min(int(N), visible - g0));
        s = hn::IfThenElse(hn::FirstN(df, n_here), s,
                           hn::Set(df, -std::numeric_limits<float>::infinity()));
        const float mx = ReduceMax(df, s);
        // The running maximum rarely changes after the first keys: then nothing rescales.
        const float alpha = mx > m ? std::exp(m - mx) : 1.0f;  // 0 for the first keys (m = -inf)
        const float m_new = mx > m ? mx : m;
        const AV pv = hn::Exp(df, hn::Sub(s, hn::Set(df, m_new)));
        hn::Store(pv, df, p);
        l = l * alpha + ReduceSum(df, pv);
        m = m_new;
        // o = o * alpha + sum_j p_j v_j.
        const float* vg = vf + size_t(g0) * hd_pad;
        if constexpr (kChunks != 0) {
            AV a[kChunks], b[kChunks];  // two sets: halves the dependency chains
            for (size_t c = 0; c < kChunks; ++c) {
                a[c] = hn::Mul(hn::LoadU(df, o + c * N), hn::Set(df, alpha));
                b[c] = hn::Zero(df);
            }
            size_t j = 0;
            for (; j + 2 <= n_here; j += 2) {
                const AV p0 = hn::Set(df, p[j]), p1 = hn::Set(df, p[j + 1]);
                for (size_t c = 0; c < kChunks; ++c) {
                    a[c] = hn::MulAdd(p0, hn::LoadU(df, vg + j * hd_pad + c * N), a[c]);
                    b[c] = hn::MulAdd(p1, hn::LoadU(df, vg + (j + 1) * hd_pad + c * N), b[c]);
                }
            }
            if (j < n_here) {
                const AV p0 = hn::Set(df, p[j]);
                for (size_t c = 0; c < kChunks; ++c)
                    a[c] = hn::MulAdd(p0, hn::LoadU(df, vg + j * hd_pad + c * N), a[c]);
            }
            for (size_t c = 0; c < kChunks; ++c) hn::StoreU(hn::Add(a[c], b[c]), df, o + c * N);
        } else {
            for (size_t c = 0; c < hd_pad; c += N) {
                AV a0 = hn::Mul(hn::LoadU(df, o + c), hn::Set(df, alpha)), a1 = hn::Zero(df);
                size_t j = 0;
                for (; j + 2 <= n_here; j += 2) {
                    a0 = hn::MulAdd(hn::Set(df, p[j]), hn::LoadU(df, vg + j * hd_pad + c), a0);
                    a1 = hn::MulAdd(hn::Set(df, p[j + 1]), hn::LoadU(df, vg + (j + 1) * hd_pad + c),
                                    a1);
                }
                if (j < n_here)
                    a0 = hn::MulAdd(hn::Set(df, p[j]), hn::LoadU(df, vg + j * hd_pad + c), a0);
                hn::StoreU(hn::Add(a0, a1), df, o + c);
            }
        }
    }
}

// The query vectors of a task over one converted block.
template <size_t kChunks>
HWY_INLINE void AttendQueries(const float* qs, const int32_t* qpos, int nq, const float* kf,
                              const float* vf, size_t hd_pad, int32_t pos0, int n_valid, float* m,
                              float* l, float* o) {
    for (int i = 0; i < nq; ++i) {
        if (qpos[i] < pos0) continue;  // causal: the whole block is in its future
        AttendBlock<kChunks>(qs + size_t(i) * hd_pad, qpos[i], kf, vf, hd_pad, pos0, n_valid, m[i],
                             l[i], o + size_t(i) * hd_pad);
    }
}

// Scratch floats AttendRange needs.
HWY_INLINE size_t AttendScratchFloats(const ops::KvLayerView& kv, int nq) {
    const size_t N = hn::Lanes(AF());
    const size_t rows = (size_t(kv.block_size) + N - 1) / N * N;
    return (2 * rows + size_t(nq)) * PaddedHeadDim(kv.head_dim) + 64;
}

// Query vectors q[i] (head_dim floats each; position qpos[i]) over the keys at positions
// [k0, k1) of kv head `head`, read through block_table. States: m[i], l[i], o[i * hd_pad]
// (hd_pad = PaddedHeadDim), updated in place (start from m = -inf, l = 0, o = 0).
void AttendRange(const ops::KvLayerView& kv, int head, const int32_t* block_table, int32_t k0,
                 int32_t k1, const float* const* q, const int32_t* qpos, int nq, float scale,
                 float* m, float* l, float* o, float* scratch) {
    const AF df;
    const size_t N = hn::Lanes(df);
    const size_t hd_pad = PaddedHeadDim(kv.head_dim);
    const size_t rows = (size_t(kv.block_size) + N - 1) / N * N;
    float* kf = scratch;
    float* vf = kf + rows * hd_pad;
    float* qs = vf + rows * hd_pad;  // scaled, padded queries
    int32_t max_pos = -1;
    for (int i = 0; i < nq; ++i) {
        float* dst = qs + size_t(i) * hd_pad;
        for (int d = 0; d < kv.head_dim; ++d) dst[d] = q[i][d] * scale;
        for (size_t d = size_t(kv.head_dim); d < hd_pad; ++d) dst[d] = 0.0f;
        max_pos = std::max(max_pos, qpos[i]);
    }
    const int bs = kv.block_size;
    for (int32_t b0 = k0 / bs * bs; b0 < k1 && b0 <= max_pos; b0 += bs) {
        const int s0 = std::max(k0, b0) - b0, s1 = std::min(k1, b0 + bs) - b0;
        const int32_t block = block_table[b0 / bs];
        const size_t n_rows = (size_t(s1 - s0) + N - 1) / N * N;
        LoadKvRows(kv, kv.k, block, head, s0, s1, kf, hd_pad, n_rows);
        LoadKvRows(kv, kv.v, block, head, s0, s1, vf, hd_pad, n_rows);
        const int32_t pos0 = b0 + s0;
        switch (hd_pad / N) {  // the usual head sizes keep the output in registers
            case 1:
                AttendQueries<1>(qs, qpos, nq, kf, vf, hd_pad, pos0, s1 - s0, m, l, o);
                break;
            case 2:
                AttendQueries<2>(qs, qpos, nq, kf, vf, hd_pad, pos0, s1 - s0, m, l, o);
                break;
            case 3:
                AttendQueries<3>(qs, qpos, nq, kf, vf, hd_pad, pos0, s1 - s0, m, l, o);
                break;
            case 4:
                AttendQueries<4>(qs, qpos, nq, kf, vf, hd_pad, pos0, s1 - s0, m, l, o);
                break;
            case 8:
                AttendQueries<8>(qs, qpos, nq, kf, vf, hd_pad, pos0, s1 - s0, m, l, o);
                break;
            default:
                AttendQueries<0>(qs, qpos, nq, kf, vf, hd_pad, pos0, s1 - s0, m, l, o);
                break;
        }
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
