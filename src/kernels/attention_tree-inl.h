// Attention for a few query vectors (decode: the heads of one GQA group of one row), head
// dimensions in lanes. The query vectors go in tiles of up to kMaxTreeTile; each K and V row
// is loaded and converted from F16 once per tile, in registers, and used by every query
// vector of the tile. Per step of up to kStepKeys keys:
//   scores  the products of a key with a query vector sum in a vector whose lanes a tree of
//           pairwise sums then reduces, leaving the score of key j in lane j;
//   softmax one vector Exp per query vector; the running maximum is only updated (and the
//           output rescaled) when a score exceeds it by more than kMaxLag;
//   values  o[m] += sum_j p[m][j] v_j, o in registers for the step.
#if defined(TROUPE_KERNELS_ATTENTION_TREE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TROUPE_KERNELS_ATTENTION_TREE_INL_H_
#undef TROUPE_KERNELS_ATTENTION_TREE_INL_H_
#else
#define TROUPE_KERNELS_ATTENTION_TREE_INL_H_
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

constexpr int kMaxTreeTile = 4;
constexpr size_t kStepVecs = kStepKeys / kMaxLanes;
// Output chunks per query vector held in registers at once.
constexpr size_t kTreeOutChunks = kFewRegisters ? 2 : (kMaxLanes >= 16 ? 8 : 4);

// One level of the reduction tree. a and b hold per-key partial sums in runs of kDist lanes;
// the result pairs lanes at distance kDist: lane i is x[i] + x[i ^ kDist] with x = a where
// bit kDist of i is clear, else b. After the levels kDist = 1, 2, .., N/2 lane j holds the
// whole dot product of key j. Blends and in-block shuffles, cheaper than two-source permutes.
template <size_t kDist>
HWY_INLINE AV PairSums(AV a, AV b) {
    const AF df;
    if constexpr (kDist == 1) {
        return hn::Add(hn::OddEven(b, a), hn::Shuffle2301(hn::OddEven(a, b)));
    } else if constexpr (kDist == 2) {
        const hn::Repartition<uint64_t, AF> du64;
        const AV lo = hn::BitCast(df, hn::OddEven(hn::BitCast(du64, b), hn::BitCast(du64, a)));
        const AV hi = hn::BitCast(df, hn::OddEven(hn::BitCast(du64, a), hn::BitCast(du64, b)));
        return hn::Add(lo, hn::Shuffle1032(hi));
    } else if constexpr (kDist == 4) {  // 128-bit blocks
        return hn::Add(hn::OddEvenBlocks(b, a), hn::SwapAdjacentBlocks(hn::OddEvenBlocks(a, b)));
    } else {  // halves of a 512-bit vector
        static_assert(kDist == 8 && kMaxLanes == 16, "vectors of up to 16 floats");
        return hn::Add(hn::ConcatUpperLower(df, b, a), hn::ConcatLowerUpper(df, b, a));
    }
}

// Tile of kM query vectors (qs: [kM][hd_pad], scaled, zero-padded) against one K row:
// acc[m] = per-lane partial sums of q_m . k.
template <size_t kChunks, int kM, bool kF16>
HWY_INLINE void ScoreLeaf(const float* HWY_RESTRICT qs, size_t hd_pad, size_t hd,
                          const uint8_t* HWY_RESTRICT krow, AV (&acc)[kM]) {
    const AF df;
    const size_t N = hn::Lanes(df);
    const size_t n_chunks = kChunks ? kChunks : hd_pad / N;
    const AV k0 = LoadKvChunk<kF16, kChunks>(krow, 0, hd);
    for (int m = 0; m < kM; ++m) acc[m] = hn::Mul(hn::LoadU(df, qs + size_t(m) * hd_pad), k0);
    for (size_t c = 1; c < n_chunks; ++c) {
        const AV k = LoadKvChunk<kF16, kChunks>(krow, c, hd);
        for (int m = 0; m < kM; ++m)
            acc[m] = hn::MulAdd(hn::LoadU(df, qs + size_t(m) * hd_pad + c * N), k, acc[m]);
    }
}

// Scores of keys [j0, j0 + 2^kLevel) (rows of krows, row_bytes apart; rows >= n are not
// read): out[m] in runs as PairSums describes, the whole dot products at the top level.
template <int kLevel, size_t kChunks, int kM, bool kF16>
HWY_INLINE void ScoreTree(const float* HWY_RESTRICT qs, size_t hd_pad, size_t hd,
                          const uint8_t* HWY_RESTRICT krows, size_t row_bytes, int j0, int n,
                          AV (&out)[kM]) {
    if (j0 >= n) {
        for (int m = 0; m < kM; ++m) out[m] = hn::Zero(AF());
        return;
    }
    if constexpr (kLevel == 0) {
        ScoreLeaf<kChunks, kM, kF16>(qs, hd_pad, hd, krows + size_t(j0) * row_bytes, out);
    } else {
        constexpr int kHalf = 1 << (kLevel - 1);
        AV a[kM], b[kM];
        ScoreTree<kLevel - 1, kChunks, kM, kF16>(qs, hd_pad, hd, krows, row_bytes, j0, n, a);
        ScoreTree<kLevel - 1, kChunks, kM, kF16>(qs, hd_pad, hd, krows, row_bytes, j0 + kHalf, n,
                                                 b);
        for (int m = 0; m < kM; ++m) out[m] = PairSums<size_t(kHalf)>(a[m], b[m]);
    }
}

// State of a tile's query vectors, in the caller's arrays between steps.
struct TreeState {
    float* m;  // [kM] running maximum (see kMaxLag)
    float* l;  // [kM][kStepKeys] per-lane sums of exponentials (summed at the end)
    float* o;  // [kM][hd_pad] unnormalised output
};

// Multiplies the output and the sums of query vector m by exp(m_old - m_new) and sets its
// maximum to m_new (exp(-inf) = 0 for the first keys).
HWY_INLINE void RescaleTreeState(const TreeState& st, int m, float m_new, size_t hd_pad) {
    const AF df;
    const size_t N = hn::Lanes(df);
    const AV alpha = ExpSoftmax(hn::Set(df, st.m[m] - m_new));
    float* o = st.o + size_t(m) * hd_pad;
    for (size_t c = 0; c < hd_pad; c += N)
        hn::StoreU(hn::Mul(hn::LoadU(df, o + c), alpha), df, o + c);
    float* l = st.l + size_t(m) * kStepKeys;
    for (size_t v = 0; v < kStepKeys; v += N)
        hn::Store(hn::Mul(hn::Load(df, l + v), alpha), df, l + v);
    st.m[m] = m_new;
}

// Keys [0, n) at kr / vr (row_bytes apart), n <= kStepKeys, for the tile's kM query vectors;
// n_vis[m] <= n: the keys vector m sees (causal mask; <= 0: none).
template <size_t kChunks, int kM, bool kF16>
HWY_NOINLINE void TreeStep(const float* HWY_RESTRICT qs, size_t hd_pad, size_t hd,
                           const uint8_t* HWY_RESTRICT kr, const uint8_t* HWY_RESTRICT vr,
                           size_t row_bytes, int n, const int* n_vis, const TreeState& st) {
    const AF df;
    const size_t N = hn::Lanes(df);
    const size_t n_chunks = kChunks ? kChunks : hd_pad / N;
    const AV neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());

    AV s[kM][kStepVecs];
    for (size_t v = 0; v < kStepVecs; ++v) {
        AV t[kM];
        ScoreTree<Log2Lanes(kMaxLanes), kChunks, kM, kF16>(qs, hd_pad, hd, kr, row_bytes,
                                                           int(v * N), n, t);
        for (int m = 0; m < kM; ++m) s[m][v] = t[m];
    }

    HWY_ALIGN float p[kM][kStepKeys];
    int n_pv = 0;
    for (int m = 0; m < kM; ++m) {
        const int vis = n_vis[m];
        n_pv = std::max(n_pv, vis);
        bool lags = false;  // a score beyond the running maximum + kMaxLag
        const AV limit = hn::Set(df, st.m[m] + kMaxLag);
        for (size_t v = 0; v < kStepVecs; ++v) {
            const int in_vec = std::min(int(N), vis - int(v * N));
            if (in_vec < int(N))
                s[m][v] = in_vec <= 0
                              ? neg_inf
                              : hn::IfThenElse(hn::FirstN(df, size_t(in_vec)), s[m][v], neg_inf);
            lags |= !hn::AllFalse(df, hn::Gt(s[m][v], limit));
        }
        if (HWY_UNLIKELY(lags)) {
            AV mx = s[m][0];
            for (size_t v = 1; v < kStepVecs; ++v) mx = hn::Max(mx, s[m][v]);
            RescaleTreeState(st, m, hn::GetLane(hn::MaxOfLanes(df, mx)), hd_pad);
        }
        // No visible key so far: m = -inf, and every score is -inf too.
        const AV mu = hn::Set(df, vis > 0 ? st.m[m] : 0.0f);
        float* l = st.l + size_t(m) * kStepKeys;
        for (size_t v = 0; v < kStepVecs; ++v) {
            const AV pv = ExpSoftmax(hn::Sub(s[m][v], mu));
            hn::Store(pv, df, p[m] + v * N);
            hn::Store(hn::Add(hn::Load(df, l + v * N), pv), df, l + v * N);
        }
    }

    // o[m] += sum_j p[m][j] v_j, the accumulators of up to kTreeOutChunks chunks in registers.
    constexpr size_t kSlice = kChunks ? std::min(kChunks, kTreeOutChunks) : kTreeOutChunks;
    for (size_t c0 = 0; c0 < n_chunks; c0 += kSlice) {
        const size_t n_slice = kChunks ? kSlice : std::min(kSlice, n_chunks - c0);
        AV acc[kM][kSlice];
        for (int m = 0; m < kM; ++m)
            for (size_t c = 0; c < n_slice; ++c)
                acc[m][c] = hn::LoadU(df, st.o + size_t(m) * hd_pad + (c0 + c) * N);
        const uint8_t* vrow = vr;
        for (int j = 0; j < n_pv; ++j, vrow += row_bytes) {
            for (size_t c = 0; c < n_slice; ++c) {
                const AV v = LoadKvChunk<kF16, kChunks>(vrow, c0 + c, hd);
                for (int m = 0; m < kM; ++m)
                    acc[m][c] = hn::MulAdd(hn::Set(df, p[m][j]), v, acc[m][c]);
            }
        }
        for (int m = 0; m < kM; ++m)
            for (size_t c = 0; c < n_slice; ++c)
                hn::StoreU(acc[m][c], df, st.o + size_t(m) * hd_pad + (c0 + c) * N);
    }
}

// Scratch floats of AttendTree for nq query vectors (beyond the scaled queries).
HWY_INLINE size_t TreeScratchFloats(int nq) {
    return size_t(nq) * kStepKeys;
}

// Query vectors qs[i] (scaled, [nq][hd_pad]) at positions qpos[i] over the keys [k0, end) of
// kv head `head`; states m[i], l[i], o[i][hd_pad] updated in place. lv: scratch, 64-byte
// aligned, TreeScratchFloats(nq).
template <size_t kChunks, bool kF16>
HWY_NOINLINE void AttendTree(const ops::KvLayerView& kv, int head, const int32_t* block_table,
                             int32_t k0, int32_t end, const float* qs, const int32_t* qpos, int nq,
                             float* m, float* l, float* o, float* lv) {
    const size_t hd = size_t(kv.head_dim);
    const size_t hd_pad = PaddedHeadDim(kv.head_dim);
    const size_t row_bytes = hd * (kF16 ? 2 : 4);
    for (int i = 0; i < nq; ++i) {
        float* li = lv + size_t(i) * kStepKeys;
        std::fill(li, li + kStepKeys, 0.0f);
        li[0] = l[i];
    }
    const int n_tiles = (nq + kMaxTreeTile - 1) / kMaxTreeTile;
    ForEachKeyStep(
        kv, head, block_table, k0, end, row_bytes,
        [&](const uint8_t* kr, const uint8_t* vr, int n, int32_t pos0) {
            for (int t = 0, i0 = 0; t < n_tiles; ++t) {
                const int tile = (nq - i0) / (n_tiles - t);  // as even as possible
                int n_vis[kMaxTreeTile];
                bool any = false;
                for (int i = 0; i < tile; ++i) {
                    n_vis[i] = std::min(n, int(qpos[i0 + i] - pos0 + 1));
                    any |= n_vis[i] > 0;
                }
                const TreeState st{m + i0, lv + size_t(i0) * kStepKeys, o + size_t(i0) * hd_pad};
                const float* q = qs + size_t(i0) * hd_pad;
                if (!any) {
                } else if (tile == 1) {
                    TreeStep<kChunks, 1, kF16>(q, hd_pad, hd, kr, vr, row_bytes, n, n_vis, st);
                } else if (tile == 2) {
                    TreeStep<kChunks, 2, kF16>(q, hd_pad, hd, kr, vr, row_bytes, n, n_vis, st);
                } else if (tile == 3) {
                    TreeStep<kChunks, 3, kF16>(q, hd_pad, hd, kr, vr, row_bytes, n, n_vis, st);
                } else {
                    TreeStep<kChunks, 4, kF16>(q, hd_pad, hd, kr, vr, row_bytes, n, n_vis, st);
                }
                i0 += tile;
            }
        });
    for (int i = 0; i < nq; ++i) l[i] = SumStepSums(lv + size_t(i) * kStepKeys);
}

#endif  // HWY_TARGET != HWY_SCALAR
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
