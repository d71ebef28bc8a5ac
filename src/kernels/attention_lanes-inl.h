// Attention for many query vectors (prefill rows, or the rows of several sequences over the
// prompt prefix they share), query vectors in lanes: group g holds query vectors
// g*N .. g*N+N-1, one per lane. Per step of up to kStepKeys keys of one block:
//   K and V rows are converted to float once (kf, vf) for all query vectors;
//   scores  broadcast key values times the transposed queries (no horizontal sums), in the
//           canonical order of attention_common-inl.h: per key, N partial sums over the
//           dimensions d = r mod N, then their balanced tree (the tree kernel's lanes);
//   softmax element-wise over the lanes: one maximum per query vector from vector maxima,
//           one Exp per key and group, the output rescaled only for query vectors whose
//           score exceeds the running maximum by more than kMaxLag; sums of exponentials
//           per key position of the step, as the tree kernel keeps them;
//   values  o[q] += sum_j p[j][q] v_j with the head dimension in lanes, a tile of query
//           vectors x chunks of the head in registers, p[j][q] broadcast from memory.
#if defined(TROUPE_KERNELS_ATTENTION_LANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TROUPE_KERNELS_ATTENTION_LANES_INL_H_
#undef TROUPE_KERNELS_ATTENTION_LANES_INL_H_
#else
#define TROUPE_KERNELS_ATTENTION_LANES_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/highway.h"
#include "kernels/attention_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#if HWY_TARGET != HWY_SCALAR

// Keys whose scores are accumulated at once. Each holds log2(N) + 1 vectors of partial sums
// at the deepest point of its tree. Measured (prefill): on AVX-512, 8 keys are no faster than
// 4; on AVX2 8 match 4 despite spills, on SSE4 8 are 1.4x faster than 4 (fewer query loads).
constexpr int kLanesScoreKeys = HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL ? 4 : 8;

// The scratch of AttendLanes, carved from one 64-byte aligned buffer.
struct LanesScratch {
    float* qt;      // [n_groups][hd_pad][N] scaled query vectors, transposed
    int32_t* qpos;  // [n_groups][N] positions (INT32_MAX in unused lanes: sees every key)
    float* m;       // [n_groups][N] running maxima
    float* l;       // [n_groups][kStepKeys][N] sums of exponentials per key position
    float* kf;      // [kStepKeys][hd_pad] the step's K rows in float
    float* vf;      // [kStepKeys][hd_pad] the step's V rows in float
    float* s;       // [kStepKeys][N] one group's scores
    float* p;       // [kStepKeys][n_groups * N] exponentials, by key then query vector
    float* alpha;   // [N] rescale factors

    // Sizes of the parts in order, each rounded up to 16 floats (64 bytes).
    static void Sizes(int nq, size_t hd, size_t hd_pad, size_t (&sizes)[9]) {
        const size_t N = hn::Lanes(AF());
        const size_t n_groups = (size_t(nq) + N - 1) / N;
        const size_t raw[9] = {n_groups * hd_pad * N,
                               n_groups * N,
                               n_groups * N,
                               n_groups * kStepKeys * N,
                               kStepKeys * hd_pad,
                               kStepKeys * hd_pad,
                               kStepKeys * N,
                               kStepKeys * n_groups * N,
                               N};
        for (int i = 0; i < 9; ++i) sizes[i] = (raw[i] + 15) / 16 * 16;
    }
    static size_t Floats(int nq, size_t hd, size_t hd_pad) {
        size_t sizes[9], total = 0;
        Sizes(nq, hd, hd_pad, sizes);
        for (size_t s : sizes) total += s;
        return total;
    }

    LanesScratch(float* base, int nq, size_t hd, size_t hd_pad) {
        size_t sizes[9];
        Sizes(nq, hd, hd_pad, sizes);
        float* parts[9];
        for (int i = 0; i < 9; ++i) {
            parts[i] = base;
            base += sizes[i];
        }
        qt = parts[0];
        qpos = reinterpret_cast<int32_t*>(parts[1]);
        m = parts[2];
        l = parts[3];
        kf = parts[4];
        vf = parts[5];
        s = parts[6];
        p = parts[7];
        alpha = parts[8];
    }
};

// Partial sums of keys kf[j * hd_pad], j < kJ, with one group (qt: [hd_pad][N]) over the
// dimensions d = r mod N, r in [r0, r0 + 2^kLevel), summed as the balanced tree: out[j].
template <int kLevel, int kJ, size_t kChunks>
HWY_INLINE void LanesScoreTree(const float* HWY_RESTRICT qt, const float* HWY_RESTRICT kf,
                               size_t hd_pad, size_t r0, AV (&out)[kJ]) {
    const AF df;
    constexpr size_t N = kMaxLanes;
    if constexpr (kLevel == 0) {
        const size_t n_chunks = kChunks ? kChunks : hd_pad / N;
        AV q = hn::Load(df, qt + r0 * N);
        for (int j = 0; j < kJ; ++j) out[j] = hn::Mul(hn::Set(df, kf[size_t(j) * hd_pad + r0]), q);
        for (size_t c = 1; c < n_chunks; ++c) {
            const size_t d = c * N + r0;
            q = hn::Load(df, qt + d * N);
            for (int j = 0; j < kJ; ++j)
                out[j] = hn::MulAdd(hn::Set(df, kf[size_t(j) * hd_pad + d]), q, out[j]);
        }
    } else {
        constexpr size_t kHalf = size_t(1) << (kLevel - 1);
        AV a[kJ], b[kJ];
        LanesScoreTree<kLevel - 1, kJ, kChunks>(qt, kf, hd_pad, r0, a);
        LanesScoreTree<kLevel - 1, kJ, kChunks>(qt, kf, hd_pad, r0 + kHalf, b);
        for (int j = 0; j < kJ; ++j) out[j] = hn::Add(a[j], b[j]);
    }
}

// Scores of the step's first n keys (kf) against one group (qt: [hd_pad][N]): s[j][lane].
// kChunks != 0: hd_pad = kChunks * N (known offsets).
template <int kJ, size_t kChunks>
HWY_INLINE void LanesScores(const float* HWY_RESTRICT qt, const float* HWY_RESTRICT kf,
                            size_t hd_pad_rt, int n, float* HWY_RESTRICT s) {
    static_assert(kMaxLanes <= 16 && kStepKeys % kJ == 0, "whole tiles of keys");
    const AF df;
    const size_t N = hn::Lanes(df);
    const size_t hd_pad = kChunks ? kChunks * kMaxLanes : hd_pad_rt;
    for (size_t j0 = 0; j0 < size_t(n); j0 += kJ) {
        AV acc[kJ];
        LanesScoreTree<Log2Lanes(kMaxLanes), kJ, kChunks>(qt, kf + j0 * hd_pad, hd_pad, 0, acc);
        for (int j = 0; j < kJ; ++j) hn::Store(acc[j], df, s + (j0 + size_t(j)) * N);
    }
}

// The online softmax of one group over the step's keys [0, n) at positions pos0 ..: masks
// (keys beyond n, keys after a query vector's position), updates m and l ([kStepKeys][N]:
// per key position), rescales the rows
// o[i * hd_pad] of the group's n_rows query vectors when their maximum moves, and writes the
// exponentials to p[j * p_stride + lane].
HWY_INLINE void LanesSoftmax(const float* HWY_RESTRICT s, int n, int32_t pos0,
                             const int32_t* HWY_RESTRICT qpos, float* HWY_RESTRICT m,
                             float* HWY_RESTRICT l, float* HWY_RESTRICT p, size_t p_stride,
                             float* HWY_RESTRICT alpha, float* HWY_RESTRICT o, size_t hd_pad,
                             int n_rows) {
    const AF df;
    const hn::RebindToSigned<AF> di;
    const size_t N = hn::Lanes(df);
    const AV neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
    const auto qp = hn::Load(di, qpos);
    const bool causal = !hn::AllFalse(di, hn::Lt(qp, hn::Set(di, pos0 + n - 1)));
    AV sv[kStepKeys];
    AV mx = neg_inf;
    for (int j = 0; j < int(kStepKeys); ++j) {
        AV x = j < n ? hn::Load(df, s + size_t(j) * N) : neg_inf;
        if (causal)
            x = hn::IfThenElse(hn::RebindMask(df, hn::Lt(qp, hn::Set(di, pos0 + j))), neg_inf, x);
        sv[j] = x;
        mx = hn::Max(mx, x);
    }
    AV mo = hn::Load(df, m);
    const auto grow = hn::Gt(mx, hn::Add(mo, hn::Set(df, kMaxLag)));
    if (HWY_UNLIKELY(!hn::AllFalse(df, grow))) {
        const AV mn = hn::IfThenElse(grow, mx, mo);
        const AV a = ExpSoftmax(hn::Sub(mo, mn));  // 1 where unchanged, 0 from -inf
        for (size_t j = 0; j < kStepKeys; ++j)
            hn::Store(hn::Mul(hn::Load(df, l + j * N), a), df, l + j * N);
        hn::Store(mn, df, m);
        hn::Store(a, df, alpha);
        for (int i = 0; i < n_rows; ++i) {
            if (alpha[i] == 1.0f) continue;
            const AV ai = hn::Set(df, alpha[i]);
            float* row = o + size_t(i) * hd_pad;
            for (size_t c = 0; c < hd_pad; c += N)
                hn::StoreU(hn::Mul(hn::LoadU(df, row + c), ai), df, row + c);
        }
        mo = mn;
    }
    // Lanes that have seen no key yet keep m = -inf: subtract 0 there (their scores are -inf).
    const AV mu = hn::IfThenElse(hn::Eq(mo, neg_inf), hn::Zero(df), mo);
    for (size_t j = 0; j < kStepKeys; ++j) {
        const AV pj = ExpSoftmax(hn::Sub(sv[j], mu));
        hn::Store(hn::Add(hn::Load(df, l + j * N), pj), df, l + j * N);
        hn::Store(pj, df, p + j * p_stride);
    }
}

// o[t][c0 + c] += sum_{j < n} p[j * p_stride + t] vf[j][c0 + c] for kT query vectors (rows
// of o, hd_pad apart) and kCS chunks of the head.
template <int kT, size_t kCS, size_t kChunks>
HWY_INLINE void LanesValues(const float* HWY_RESTRICT p, size_t p_stride,
                            const float* HWY_RESTRICT vf, size_t hd_pad_rt, int n, size_t c0,
                            float* HWY_RESTRICT o) {
    const AF df;
    const size_t N = hn::Lanes(df);
    const size_t hd_pad = kChunks ? kChunks * kMaxLanes : hd_pad_rt;
    AV acc[kT][kCS];
    for (int t = 0; t < kT; ++t)
        for (size_t c = 0; c < kCS; ++c)
            acc[t][c] = hn::LoadU(df, o + size_t(t) * hd_pad + (c0 + c) * N);
    for (int j = 0; j < n; ++j) {
        const float* pj = p + size_t(j) * p_stride;
        AV v[kCS];
        for (size_t c = 0; c < kCS; ++c)
            v[c] = hn::Load(df, vf + size_t(j) * hd_pad + (c0 + c) * N);
        for (int t = 0; t < kT; ++t) {
            const AV pb = hn::Set(df, pj[t]);
            for (size_t c = 0; c < kCS; ++c) acc[t][c] = hn::MulAdd(pb, v[c], acc[t][c]);
        }
    }
    for (int t = 0; t < kT; ++t)
        for (size_t c = 0; c < kCS; ++c)
            hn::StoreU(acc[t][c], df, o + size_t(t) * hd_pad + (c0 + c) * N);
}

// All query vectors over the step's values, in register tiles of kCS chunks.
template <size_t kCS, size_t kChunks>
HWY_INLINE void LanesAllValues(const float* p, size_t p_stride, const float* vf, size_t hd_pad,
                               int n, int nq, float* o) {
    constexpr int kT = int((kFewRegisters ? 10 : 24) / kCS);
    const size_t n_chunks = hd_pad / hn::Lanes(AF());
    for (size_t c0 = 0; c0 < n_chunks; c0 += kCS) {
        int q = 0;
        for (; q + kT <= nq; q += kT)
            LanesValues<kT, kCS, kChunks>(p + q, p_stride, vf, hd_pad, n, c0,
                                          o + size_t(q) * hd_pad);
        for (; q < nq; ++q)
            LanesValues<1, kCS, kChunks>(p + q, p_stride, vf, hd_pad, n, c0,
                                         o + size_t(q) * hd_pad);
    }
}

// Scratch floats of AttendLanes (beyond the scaled queries).
HWY_INLINE size_t LanesScratchFloats(int nq, size_t hd, size_t hd_pad) {
    return LanesScratch::Floats(nq, hd, hd_pad);
}

// Query vectors qs[i] (scaled, [nq][hd_pad]) at positions qpos[i] over the keys [k0, end) of
// kv head `head`; states m[i], l[i], o[i][hd_pad] updated in place. scratch: 64-byte aligned,
// LanesScratchFloats floats.
template <size_t kChunks, bool kF16>
HWY_NOINLINE void AttendLanes(const ops::KvLayerView& kv, int head, const int32_t* block_table,
                              int32_t k0, int32_t end, const float* qs, const int32_t* qpos, int nq,
                              float* m, float* l, float* o, float* scratch) {
    const size_t N = hn::Lanes(AF());
    const size_t hd = size_t(kv.head_dim);
    const size_t hd_pad = PaddedHeadDim(kv.head_dim);
    const int n_groups = int((size_t(nq) + N - 1) / N);
    const size_t p_stride = size_t(n_groups) * N;
    const LanesScratch sc(scratch, nq, hd, hd_pad);
    for (int g = 0; g < n_groups; ++g)
        for (size_t lane = 0; lane < N; ++lane) {
            const int i = g * int(N) + int(lane);
            const size_t at = size_t(g) * N + lane;
            float* qt = sc.qt + size_t(g) * hd_pad * N + lane;
            for (size_t d = 0; d < hd_pad; ++d)
                qt[d * N] = i < nq ? qs[size_t(i) * hd_pad + d] : 0.0f;
            sc.qpos[at] = i < nq ? qpos[i] : std::numeric_limits<int32_t>::max();
            sc.m[at] = i < nq ? m[i] : -std::numeric_limits<float>::infinity();
            float* lg = sc.l + size_t(g) * kStepKeys * N + lane;
            for (size_t j = 0; j < kStepKeys; ++j) lg[j * N] = 0.0f;
            lg[0] = i < nq ? l[i] : 0.0f;
        }
    const hn::RebindToSigned<AF> di;
    ForEachKeyStep(kv, head, block_table, k0, end, hd * (kF16 ? 2 : 4),
                   [&](const uint8_t* kr, const uint8_t* vr, int n, int32_t pos0) {
                       const size_t row_bytes = hd * (kF16 ? 2 : 4);
                       ConvertKvRows<kF16, kChunks>(kr, row_bytes, n, hd, hd_pad, sc.kf);
                       ConvertKvRows<kF16, kChunks>(vr, row_bytes, n, hd, hd_pad, sc.vf);
                       for (int g = 0; g < n_groups; ++g) {
                           const int32_t* qp = sc.qpos + size_t(g) * N;
                           float* pg = sc.p + size_t(g) * N;
                           if (hn::AllTrue(di, hn::Lt(hn::Load(di, qp), hn::Set(di, pos0)))) {
                               for (size_t j = 0; j < kStepKeys; ++j)
                                   hn::Store(hn::Zero(AF()), AF(), pg + j * p_stride);
                               continue;  // the whole step is in the group's future
                           }
                           LanesScores<kLanesScoreKeys, kChunks>(sc.qt + size_t(g) * hd_pad * N,
                                                                 sc.kf, hd_pad, n, sc.s);
                           LanesSoftmax(sc.s, n, pos0, qp, sc.m + size_t(g) * N,
                                        sc.l + size_t(g) * kStepKeys * N, pg, p_stride, sc.alpha,
                                        o + size_t(g) * N * hd_pad, hd_pad,
                                        std::min(int(N), nq - g * int(N)));
                       }
                       const size_t n_chunks = hd_pad / N;
                       if (n_chunks % 4 == 0) {
                           LanesAllValues<4, kChunks>(sc.p, p_stride, sc.vf, hd_pad, n, nq, o);
                       } else if (n_chunks % 2 == 0) {
                           LanesAllValues<2, kChunks>(sc.p, p_stride, sc.vf, hd_pad, n, nq, o);
                       } else {
                           LanesAllValues<1, kChunks>(sc.p, p_stride, sc.vf, hd_pad, n, nq, o);
                       }
                   });
    HWY_ALIGN float l16[kStepKeys];
    for (int i = 0; i < nq; ++i) {
        m[i] = sc.m[i];
        const float* li = sc.l + size_t(i) / N * kStepKeys * N + size_t(i) % N;
        for (size_t j = 0; j < kStepKeys; ++j) l16[j] = li[j * N];
        l[i] = SumStepSums(l16);
    }
}

#endif  // HWY_TARGET != HWY_SCALAR
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
