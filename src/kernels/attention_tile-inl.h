// The attention kernel: a task's query vectors in tiles (12 x 2 key vectors while 12 remain,
// then up to kTileQ x 4; with 16 registers 3-4 x 3 or 1-2 x 4) over its keys in steps of
// kStepKeys, keys in lanes. Per step and tile:
//   scores  s[i][j] = q_i . k_j as one FMA chain per key over the head dimensions: K is stored
//           transposed in the cache (dimension d of N consecutive keys is one vector), each
//           element of a query vector is broadcast and multiplied into the key vectors of the
//           step, a register tile of kQ query vectors x up to kScoreVecs key vectors;
//   softmax one Exp per key vector and query vector; the running maximum is only updated (and
//           the output rescaled) when a score exceeds it by more than kMaxLag;
//   values  o[i] += sum_j p[i][j] v_j with the head dimension in lanes, a register tile of kQ
//           query vectors x up to 4 chunks of the head, p broadcast from memory (a BF16
//           cache: p rounded to BF16, keys in pairs; by vdpbf16ps where the CPU has it and
//           the head is an even number of vectors, ValuesStepDot).
// Every tile reads K and V straight from the F16 (or F32) cache, converting on load: measured,
// that beats converting each step to float once for all tiles (prefill 4% faster, shared
// prefixes 6%). Only block sizes that are not a multiple of N gather K into a float copy
// first. Every path computes the canonical arithmetic of attention_common-inl.h.
#if defined(TROUPE_KERNELS_ATTENTION_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TROUPE_KERNELS_ATTENTION_TILE_INL_H_
#undef TROUPE_KERNELS_ATTENTION_TILE_INL_H_
#else
#define TROUPE_KERNELS_ATTENTION_TILE_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "hwy/highway.h"
#include "kernels/attention_common-inl.h"
#include "kernels/line_prefetch.h"

HWY_BEFORE_NAMESPACE();
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#if HWY_TARGET != HWY_SCALAR

// Query vectors per tile, and key vectors (of N keys) per score tile: 6 x 4 accumulators of
// the 32 registers. With 32 registers, tasks with 12 or more query vectors also take tiles of
// 12 x 2 key vectors (and 12 x 2 head chunks for the values): half the K and V loads (each
// converting F16) per FMA, for twice the broadcasts. With 16 registers (AVX2, SSE4), tiles
// of up to 4 query vectors: 3 or 4 of them x 3 key vectors (or head chunks), 1 or 2 x 4; a
// GQA group of 3 heads is one tile. On Zen 3, a score tile alone (F16 keys, in L1) ran
// 1.88 FMAs a cycle at 4 x 3 against 1.54-1.65 at 2 x 4 (cycles at 3.15 GHz, about the
// clock the FMA probe implies).
constexpr int kTileQ = kFewRegisters ? 4 : 6;
constexpr int kWideTileQ = kFewRegisters ? 0 : 12;
constexpr int kMaxTileQ = kTileQ > kWideTileQ ? kTileQ : kWideTileQ;
constexpr size_t kScoreVecs = kStepVecs < 4 ? kStepVecs : 4;

// Key vectors per score tile and head chunks per values tile for a tile of kQ query vectors.
template <int kQ>
constexpr size_t TileVecs() {
    if constexpr (kFewRegisters) return kQ > 2 && kScoreVecs > 3 ? 3 : kScoreVecs;
    return kQ > kTileQ ? kScoreVecs / 2 : kScoreVecs;
}
template <int kQ>
constexpr size_t TileChunks() {
    if constexpr (kFewRegisters) return kQ > 2 ? 3 : 4;
    return kQ > kTileQ ? 2 : 4;
}

// Scores of a BF16 cache (K in dimension pairs, ops::kv_key_elem): the canonical pair chain
// of attention_common-inl.h, by float multiply-adds of the widened pairs (every target). Lane
// l of a pair vector holds dimensions 2i (low half) and 2i + 1 (high half) of key l. q: the
// query vectors rounded to BF16, as floats; kp[v] + i * stride: pair i of key vector v.
template <int kQ, size_t kV>
HWY_INLINE void ScoreTilePairs(const float* HWY_RESTRICT q, size_t hd_pad, size_t hd,
                               const Bf16* const* kp, size_t stride, size_t v0,
                               float* HWY_RESTRICT s, LinePrefetcher& pf) {
    const AF df;
    const hn::RebindToUnsigned<AF> du;
    const size_t N = hn::Lanes(df);
    const auto hi_mask = hn::Set(du, 0xffff0000u);
    AV acc[kQ][kV];
    for (int i = 0; i < kQ; ++i)
        for (size_t v = 0; v < kV; ++v) acc[i][v] = hn::Zero(df);
    for (size_t d = 0; d < hd; d += 2) {
        pf.tick();
        AV k_odd[kV], k_even[kV];
        for (size_t v = 0; v < kV; ++v) {
            const auto pair =
                hn::LoadU(du, reinterpret_cast<const uint32_t*>(kp[v] + (d / 2) * stride));
            k_odd[v] = hn::BitCast(df, hn::And(pair, hi_mask));
            k_even[v] = hn::BitCast(df, hn::ShiftLeft<16>(pair));
        }
        for (int i = 0; i < kQ; ++i) {
            const AV b_odd = hn::Set(df, q[size_t(i) * hd_pad + d + 1]);
            const AV b_even = hn::Set(df, q[size_t(i) * hd_pad + d]);
            for (size_t v = 0; v < kV; ++v) {
                acc[i][v] = hn::MulAdd(b_odd, k_odd[v], acc[i][v]);
                acc[i][v] = hn::MulAdd(b_even, k_even[v], acc[i][v]);
            }
        }
    }
    for (int i = 0; i < kQ; ++i)
        for (size_t v = 0; v < kV; ++v)
            hn::Store(acc[i][v], df, s + size_t(i) * kStepKeys + (v0 + v) * N);
}

#if HWY_TARGET == HWY_AVX3_DL && HWY_ARCH_X86_64 && (HWY_COMPILER_GCC_ACTUAL || HWY_COMPILER_CLANG)
#define TROUPE_ATTN_DPBF16 1
// The same scores by vdpbf16ps (AVX512_BF16: Cooper Lake, Sapphire Rapids, Zen 4 and later),
// which does a pair of multiply-adds per lane: half the instructions of ScoreTilePairs. Raw
// intrinsics because Highway 1.0 has no BF16 dot product. q here holds each query vector's
// dimension pairs packed as BF16 bits (low half 2i, high half 2i + 1), hd / 2 of them per
// row of hd_pad floats. Only called where the CPU has the instruction (HasDotBf16). The
// instruction treats subnormal inputs as zero and flushes subnormal results: the cache and
// the queries have none (KvBf16Bits); a subnormal partial sum is the one case where this and
// ScoreTilePairs may differ in the last bit, and the kernel runs one of them per CPU.
template <int kQ, size_t kV>
__attribute__((target("avx512bf16"))) HWY_NOINLINE void ScoreTileDot(
    const float* HWY_RESTRICT q, size_t hd_pad, size_t hd, const Bf16Dot* const* kp, size_t stride,
    size_t v0, float* HWY_RESTRICT s, LinePrefetcher& pf) {
    static_assert(hn::MaxLanes(AF()) == 16, "512-bit vectors");
    const uint32_t* qp = reinterpret_cast<const uint32_t*>(q);
    __m512 acc[kQ][kV];
    for (int i = 0; i < kQ; ++i)
        for (size_t v = 0; v < kV; ++v) acc[i][v] = _mm512_setzero_ps();
    for (size_t d = 0; d < hd / 2; ++d) {
        pf.tick();
        __m512bh k[kV];
        for (size_t v = 0; v < kV; ++v)
            k[v] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(kp[v] + d * stride));
        for (int i = 0; i < kQ; ++i) {
            const __m512bh b =
                reinterpret_cast<__m512bh>(_mm512_set1_epi32(int(qp[size_t(i) * hd_pad + d])));
            for (size_t v = 0; v < kV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], k[v], b);
        }
    }
    for (int i = 0; i < kQ; ++i)
        for (size_t v = 0; v < kV; ++v)
            _mm512_store_ps(s + size_t(i) * kStepKeys + (v0 + v) * 16, acc[i][v]);
}
#endif

// Whether this CPU runs ScoreTileDot (the Bf16Dot path of a BF16 cache).
HWY_INLINE bool HasDotBf16() {
#ifdef TROUPE_ATTN_DPBF16
    return __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

// s[i * kStepKeys + (v0 + v) * N + lane] = scores of kQ query vectors (q: rows hd_pad apart,
// scaled) and the key vectors v0 .. v0 + kV - 1; dimension d of key vector v at
// kp[v] + d * stride.
template <int kQ, size_t kV, class T>
HWY_INLINE void ScoreTile(const float* HWY_RESTRICT q, size_t hd_pad, size_t hd, const T* const* kp,
                          size_t stride, size_t v0, float* HWY_RESTRICT s, LinePrefetcher& pf) {
    if constexpr (std::is_same_v<T, Bf16>) {
        ScoreTilePairs<kQ, kV>(q, hd_pad, hd, kp, stride, v0, s, pf);
    } else if constexpr (std::is_same_v<T, Bf16Dot>) {
#ifdef TROUPE_ATTN_DPBF16
        ScoreTileDot<kQ, kV>(q, hd_pad, hd, kp, stride, v0, s, pf);
#else
        static_assert(!std::is_same_v<T, T>, "Bf16Dot needs the AVX3_DL target");
#endif
    } else {
        const AF df;
        const size_t N = hn::Lanes(df);
        AV acc[kQ][kV];
        {
            AV k[kV];
            for (size_t v = 0; v < kV; ++v) k[v] = LoadKv(kp[v]);
            for (int i = 0; i < kQ; ++i) {
                const AV b = hn::Set(df, q[size_t(i) * hd_pad]);
                for (size_t v = 0; v < kV; ++v) acc[i][v] = hn::Mul(b, k[v]);
            }
        }
        for (size_t d = 1; d < hd; ++d) {
            pf.tick();
            AV k[kV];
            for (size_t v = 0; v < kV; ++v) k[v] = LoadKv(kp[v] + d * stride);
            for (int i = 0; i < kQ; ++i) {
                const AV b = hn::Set(df, q[size_t(i) * hd_pad + d]);
                for (size_t v = 0; v < kV; ++v) acc[i][v] = hn::MulAdd(b, k[v], acc[i][v]);
            }
        }
        for (int i = 0; i < kQ; ++i)
            for (size_t v = 0; v < kV; ++v)
                hn::Store(acc[i][v], df, s + size_t(i) * kStepKeys + (v0 + v) * N);
    }
}

// Scores of kQ query vectors and the first n_vecs key vectors of the step (kt[v]: key vector
// v, dimensions `stride` elements apart), in register tiles of up to kScoreVecs key vectors.
template <int kQ, class T>
HWY_INLINE void Scores(const float* HWY_RESTRICT q, size_t hd_pad, size_t hd, const T* const* kt,
                       size_t stride, size_t n_vecs, float* HWY_RESTRICT s, LinePrefetcher& pf) {
    constexpr size_t kVecs = TileVecs<kQ>();
    size_t v0 = 0;
    for (; v0 + kVecs <= n_vecs; v0 += kVecs)
        ScoreTile<kQ, kVecs>(q, hd_pad, hd, kt + v0, stride, v0, s, pf);
    if constexpr (kVecs > 2) {
        if (v0 + 2 <= n_vecs) {
            ScoreTile<kQ, 2>(q, hd_pad, hd, kt + v0, stride, v0, s, pf);
            v0 += 2;
        }
    }
    if (v0 < n_vecs) ScoreTile<kQ, 1>(q, hd_pad, hd, kt + v0, stride, v0, s, pf);
}

// State of a task's query vectors between steps: the partial states (ops::kAttnState*
// layout, `stride` floats apart: m, then o[hd_pad] at kAttnStateO) and the sums of
// exponentials per key index, added into the states' l at the end.
struct TileState {
    float* states;  // [nq][stride]
    size_t stride;
    float* l;  // [nq][kStepKeys]
    float& m(int i) const { return states[size_t(i) * stride + ops::kAttnStateM]; }
    float* o(int i) const { return states + size_t(i) * stride + ops::kAttnStateO; }
};

// p rounded to the nearest BF16 (ties to even), as a float: the exponentials a BF16 cache's
// values are weighted with. ExpSoftmax is never subnormal nor NaN (0, or >= 2^-126), so
// this is fp32_to_bf16_ftz's rounding for every p.
HWY_INLINE AV RoundBf16(AV p) {
    const AF df;
    const hn::RebindToUnsigned<AF> du;
    const auto u = hn::BitCast(du, p);
    const auto odd = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
    const auto r = hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), odd);
    return hn::BitCast(df, hn::And(r, hn::Set(du, 0xffff0000u)));
}

// The online softmax of query vector i over its scores s[kStepKeys] (the first n_vecs key
// vectors computed; the first `vis` keys visible): updates m, l and (when the maximum moves)
// o; writes the exponentials to p[kStepKeys], with kRoundP rounded to BF16 (RoundBf16; l
// sums them unrounded).
template <bool kRoundP>
HWY_INLINE void SoftmaxRow(const TileState& st, int i, const float* HWY_RESTRICT s, size_t n_vecs,
                           int vis, size_t hd_pad, float* HWY_RESTRICT p) {
    const AF df;
    const size_t N = hn::Lanes(df);
    const AV neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
    float* l = st.l + size_t(i) * kStepKeys;
    float& m = st.m(i);
    if (vis <= 0) {  // sees none of the step: p = 0, nothing changes
        for (size_t v = 0; v < n_vecs; ++v) hn::Store(hn::Zero(df), df, p + v * N);
        return;
    }
    AV sv[kStepVecs];
    bool lags = false;  // a score beyond the running maximum + kMaxLag
    const AV limit = hn::Set(df, m + kMaxLag);
    for (size_t v = 0; v < n_vecs; ++v) {
        sv[v] = hn::Load(df, s + v * N);
        const int in_vec = vis - int(v * N);
        if (in_vec < int(N))
            sv[v] = in_vec <= 0 ? neg_inf
                                : hn::IfThenElse(hn::FirstN(df, size_t(in_vec)), sv[v], neg_inf);
        lags |= !hn::AllFalse(df, hn::Gt(sv[v], limit));
    }
    if (HWY_UNLIKELY(lags)) {
        AV mx = sv[0];
        for (size_t v = 1; v < n_vecs; ++v) mx = hn::Max(mx, sv[v]);
        const float m_new = hn::GetLane(hn::MaxOfLanes(df, mx));
        const AV alpha = ExpSoftmax(hn::Set(df, m - m_new));
        float* o = st.o(i);
        for (size_t c = 0; c < hd_pad; c += N)
            hn::Store(hn::Mul(hn::Load(df, o + c), alpha), df, o + c);
        for (size_t v = 0; v < kStepKeys; v += N)
            hn::Store(hn::Mul(hn::Load(df, l + v), alpha), df, l + v);
        m = m_new;
    }
    const AV mu = hn::Set(df, m);
    for (size_t v = 0; v < n_vecs; ++v) {
        const AV pv = ExpSoftmax(hn::Sub(sv[v], mu));
        hn::Store(kRoundP ? RoundBf16(pv) : pv, df, p + v * N);
        hn::Store(hn::Add(hn::Load(df, l + v * N), pv), df, l + v * N);
    }
}

// o[i][(c0 + c) * N ..] += sum_{j < n} p[i][j] v_j for kQ query vectors (rows of o
// o_stride apart) and kCS chunks. A function of its own: inlined into the task's loop nest,
// GCC kept one of the 12 x 2 tile's two V vectors on the stack and read it back for every FMA
// (on Sapphire Rapids, moving it out took 8 sequences over a 1,008-token shared prefix from
// 114-119 to 97-99 us a layer and a 512-token prefill from 1.64-1.66 to 1.32-1.37 ms).
template <int kQ, size_t kCS, size_t kChunks, class T>
HWY_NOINLINE void ValuesTile(const float* HWY_RESTRICT p, const T* const* vrows, size_t hd, int n,
                             size_t c0, float* HWY_RESTRICT o, size_t o_stride,
                             LinePrefetcher& pf) {
    const AF df;
    const size_t N = hn::Lanes(df);
    AV acc[kQ][kCS];
    for (int i = 0; i < kQ; ++i)
        for (size_t c = 0; c < kCS; ++c)
            acc[i][c] = hn::Load(df, o + size_t(i) * o_stride + (c0 + c) * N);
    const auto key = [&](int j) {
        AV v[kCS];
        for (size_t c = 0; c < kCS; ++c) v[c] = LoadVChunk<T, kChunks>(vrows[j], c0 + c, hd);
        for (int i = 0; i < kQ; ++i) {
            const AV pb = hn::Set(df, p[size_t(i) * kStepKeys + size_t(j)]);
            for (size_t c = 0; c < kCS; ++c) acc[i][c] = hn::MulAdd(pb, v[c], acc[i][c]);
        }
    };
    if constexpr (kIsBf16<T>) {  // pairs of keys, the odd one first (ValuesStepDot's order)
        for (int j = 0; j < n; j += 2) {
            pf.tick();
            if (j + 1 < n) key(j + 1);
            key(j);
        }
    } else {
        for (int j = 0; j < n; ++j) {
            pf.tick();
            key(j);
        }
    }
    for (int i = 0; i < kQ; ++i)
        for (size_t c = 0; c < kCS; ++c)
            hn::Store(acc[i][c], df, o + size_t(i) * o_stride + (c0 + c) * N);
}

// Whether a BF16 cache's values go through ValuesStepDot: the Bf16Dot form with a head of an
// even number of whole vectors (64, 128 on AVX-512); other heads take ValuesTile's pairs.
template <class T, size_t kChunks>
constexpr bool kDotValues = std::is_same_v<T, Bf16Dot> && kChunks > 0 && kChunks % 2 == 0;

#ifdef TROUPE_ATTN_DPBF16
// ValuesTile's pair form by vdpbf16ps, for all kChunks chunks of the head: per pair of keys
// (j, j + 1) and 32 dimensions, one dot product instruction per query vector instead of four
// FMAs. The exponentials p[kQ][kStepKeys] (floats, unrounded) are rounded to BF16 here (RNE,
// as RoundBf16: vcvtneps2bf16) and packed as pairs; rows j and j + 1 of V are interleaved by
// 16-bit unpacks within 128-bit lanes, so the accumulators hold the head's dimensions
// permuted: in each group of 32 dimensions, vector A lanes 4b .. 4b + 3 hold dimensions
// 8b .. 8b + 3 and vector B dimensions 8b + 4 .. 8b + 7 (b = 0 .. 3). The states' o stay in
// that order during AttendTile, which restores it at the end (UnpermuteDotValues); the
// rescales of the softmax do not depend on the order.
template <int kQ, size_t kCS, size_t kChunks>
__attribute__((target("avx512bf16"))) HWY_NOINLINE void ValuesStepDot(
    const float* HWY_RESTRICT p, const Bf16Dot* const* vrows, int n, float* HWY_RESTRICT o,
    size_t o_stride, LinePrefetcher& pf) {
    static_assert(hn::MaxLanes(AF()) == 16 && kCS % 2 == 0 && kChunks % kCS == 0);
    alignas(64) uint32_t pb[kQ][kStepKeys / 2];
    const int n_vecs = (n + 15) / 16;
    for (int i = 0; i < kQ; ++i)
        for (int v = 0; v < n_vecs; ++v)
            _mm256_store_si256(reinterpret_cast<__m256i*>(&pb[i][v * 8]),
                               reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(
                                   _mm512_load_ps(p + size_t(i) * kStepKeys + size_t(v) * 16))));
    for (size_t c0 = 0; c0 < kChunks; c0 += kCS) {
        __m512 acc[kQ][kCS];
        for (int i = 0; i < kQ; ++i)
            for (size_t c = 0; c < kCS; ++c)
                acc[i][c] = _mm512_load_ps(o + size_t(i) * o_stride + (c0 + c) * 16);
        for (int j = 0; j < n; j += 2) {
            pf.tick();
            // Key j + 1 beyond the step: row j again, weighted by p = 0 (p[n] is 0: n is odd).
            const Bf16Dot* r0 = vrows[j];
            const Bf16Dot* r1 = j + 1 < n ? vrows[j + 1] : r0;
            __m512bh vk[kCS];
            for (size_t g = 0; g < kCS; g += 2) {
                const __m512i a = _mm512_loadu_si512(r0 + (c0 + g) * 16);
                const __m512i b = _mm512_loadu_si512(r1 + (c0 + g) * 16);
                vk[g] = reinterpret_cast<__m512bh>(_mm512_unpacklo_epi16(a, b));
                vk[g + 1] = reinterpret_cast<__m512bh>(_mm512_unpackhi_epi16(a, b));
            }
            for (int i = 0; i < kQ; ++i) {
                const __m512bh pp = reinterpret_cast<__m512bh>(_mm512_set1_epi32(int(pb[i][j / 2])));
                for (size_t c = 0; c < kCS; ++c) acc[i][c] = _mm512_dpbf16_ps(acc[i][c], vk[c], pp);
            }
        }
        for (int i = 0; i < kQ; ++i)
            for (size_t c = 0; c < kCS; ++c)
                _mm512_store_ps(o + size_t(i) * o_stride + (c0 + c) * 16, acc[i][c]);
    }
}

// o[hd_pad] from ValuesStepDot's order back to dimension order (hd_pad a multiple of 32).
HWY_INLINE void UnpermuteDotValues(float* HWY_RESTRICT o, size_t hd_pad) {
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
    const __m512i hi = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    for (size_t g = 0; g < hd_pad; g += 32) {
        const __m512d a = _mm512_castps_pd(_mm512_load_ps(o + g));
        const __m512d b = _mm512_castps_pd(_mm512_load_ps(o + g + 16));
        _mm512_store_ps(o + g, _mm512_castpd_ps(_mm512_permutex2var_pd(a, lo, b)));
        _mm512_store_ps(o + g + 16, _mm512_castpd_ps(_mm512_permutex2var_pd(a, hi, b)));
    }
}
#endif

// One tile of kQ query vectors over one step: K vectors kt (see Scores), V rows vrows.
template <int kQ, size_t kChunks, class TK, class TV>
HWY_INLINE void TileStep(const float* HWY_RESTRICT q, const int32_t* qpos, const TileState& st,
                         int i0, const TK* const* kt, size_t stride, const TV* const* vrows, int n,
                         int32_t pos0, size_t hd, size_t hd_pad, float* HWY_RESTRICT s,
                         float* HWY_RESTRICT p, LinePrefetcher& pf) {
    const size_t N = hn::Lanes(AF());
    int vis[kQ];
    int max_vis = 0;
    for (int i = 0; i < kQ; ++i) {
        vis[i] = std::min(n, int(qpos[i0 + i] - pos0 + 1));
        max_vis = std::max(max_vis, vis[i]);
    }
    if (max_vis <= 0) return;  // the whole step is in the tile's future
    const size_t n_vecs = (size_t(max_vis) + N - 1) / N;
    // With whole vectors of the head (kChunks > 0, head_dim == hd_pad) on a fixed-width target,
    // the query rows' stride as a constant (the calls below are inlined): the tile's broadcasts
    // then address all kQ rows from one register (with hd_pad a variable, GCC kept a pointer
    // per row and spilled some).
    constexpr size_t kPad = HWY_HAVE_SCALABLE ? 0 : kChunks * hn::MaxLanes(AF());
    const size_t q_stride = kPad ? kPad : hd_pad;
    Scores<kQ>(q + size_t(i0) * q_stride, q_stride, hd, kt, stride, n_vecs, s, pf);
    constexpr bool kDot = kDotValues<TV, kChunks>;
    for (int i = 0; i < kQ; ++i)
        SoftmaxRow<kIsBf16<TV> && !kDot>(st, i0 + i, s + size_t(i) * kStepKeys, n_vecs, vis[i],
                                         hd_pad, p + size_t(i) * kStepKeys);
    const size_t n_chunks = kChunks ? kChunks : hd_pad / N;
    float* o = st.o(i0);
    constexpr size_t kCS = TileChunks<kQ>();
#ifdef TROUPE_ATTN_DPBF16
    if constexpr (kDot) {
        ValuesStepDot<kQ, kCS, kChunks>(p, vrows, max_vis, o, st.stride, pf);
        return;
    }
#endif
    size_t c0 = 0;
    for (; c0 + kCS <= n_chunks; c0 += kCS)
        ValuesTile<kQ, kCS, kChunks>(p, vrows, hd, max_vis, c0, o, st.stride, pf);
    if constexpr (kCS > 2) {
        if (c0 + 2 <= n_chunks) {
            ValuesTile<kQ, 2, kChunks>(p, vrows, hd, max_vis, c0, o, st.stride, pf);
            c0 += 2;
        }
    }
    for (; c0 < n_chunks; ++c0)
        ValuesTile<kQ, 1, kChunks>(p, vrows, hd, max_vis, c0, o, st.stride, pf);
}

// Every tile of the task over one step; tiles as even as possible.
template <size_t kChunks, class TK, class TV>
HWY_INLINE void AllTilesStep(const float* q, const int32_t* qpos, int nq, const TileState& st,
                             const TK* const* kt, size_t stride, const TV* const* vrows, int n,
                             int32_t pos0, size_t hd, size_t hd_pad, float* s, float* p,
                             LinePrefetcher& pf) {
    int i0 = 0;
    if constexpr (kWideTileQ > 0) {
        for (; i0 + kWideTileQ <= nq; i0 += kWideTileQ)
            TileStep<kWideTileQ, kChunks>(q, qpos, st, i0, kt, stride, vrows, n, pos0, hd, hd_pad,
                                          s, p, pf);
    }
    const int n_tiles = (nq - i0 + kTileQ - 1) / kTileQ;
    for (int t = 0; t < n_tiles; ++t) {
        const int tile = (nq - i0) / (n_tiles - t);  // as even as possible
        const auto run = [&](auto k) {
            TileStep<decltype(k)::value, kChunks>(q, qpos, st, i0, kt, stride, vrows, n, pos0, hd,
                                                  hd_pad, s, p, pf);
        };
        if (tile == 1) {
            run(std::integral_constant<int, 1>());
        } else if (tile == 2) {
            run(std::integral_constant<int, 2>());
        } else if constexpr (kTileQ == 4) {
            if (tile == 3) {
                run(std::integral_constant<int, 3>());
            } else {
                run(std::integral_constant<int, 4>());
            }
        } else if constexpr (kTileQ == 6) {
            if (tile == 3) {
                run(std::integral_constant<int, 3>());
            } else if (tile == 4) {
                run(std::integral_constant<int, 4>());
            } else if (tile == 5) {
                run(std::integral_constant<int, 5>());
            } else {
                run(std::integral_constant<int, 6>());
            }
        }
        i0 += tile;
    }
}

// Scratch floats of AttendTile for nq query vectors (beyond the scaled queries).
HWY_INLINE size_t TileScratchFloats(int nq, size_t hd) {
    return size_t(nq) * kStepKeys               // l
           + 2 * size_t(kMaxTileQ) * kStepKeys  // s, p
           + hd * kStepKeys;                    // K of an unaligned step in float, transposed
}

// Query vectors qs[i] (scaled, [nq][hd_pad]) at positions qpos[i] over the keys [k0, end) of
// kv head `head` (one key chunk or less); the partial states states[i * stride] (64-byte
// aligned, the layout of ops::kAttnState*), which start empty (m = -inf, l = 0, o = 0), are
// updated in place. tail (may be null): the keys from tail->split on are read per member,
// through its block table, by its query vectors only (ops::AttentionTail). scratch: 64-byte
// aligned, TileScratchFloats floats. next (may be null): memory read after this call,
// prefetched a little per iteration of the inner loops. T: uint16_t (F16 cache), float (F32),
// Bf16 or Bf16Dot (BF16: qs rounded to BF16, and for Bf16Dot packed as pairs, AttendRange).
template <size_t kChunks, class T>
HWY_NOINLINE void AttendTile(const ops::KvLayerView& kv, int head, const int32_t* block_table,
                             int32_t k0, int32_t end, const float* qs, const int32_t* qpos, int nq,
                             float* states, size_t stride, const ops::AttentionTail* tail,
                             float* scratch, const PrefetchRuns* next) {
    const AF df;
    const size_t N = hn::Lanes(df);
    const size_t hd = size_t(kv.head_dim);
    const size_t hd_pad = PaddedHeadDim(kv.head_dim);
    float* lsum = scratch;
    float* s = lsum + size_t(nq) * kStepKeys;
    float* p = s + size_t(kMaxTileQ) * kStepKeys;
    float* kf = p + size_t(kMaxTileQ) * kStepKeys;  // [hd][kStepKeys], unaligned steps only
    std::fill(lsum, lsum + size_t(nq) * kStepKeys, 0.0f);
    LinePrefetcher pf(next);
    // Query vectors [q0, q0 + n) over the keys [a, b) read through `table`.
    const auto attend_keys = [&](const int32_t* table, int32_t a, int32_t b, int q0, int n) {
        const TileState st{states + size_t(q0) * stride, stride, lsum + size_t(q0) * kStepKeys};
        const float* q = qs + size_t(q0) * hd_pad;
        const int32_t* pos = qpos + q0;
        ForEachKeyStep<T>(kv, head, table, a, b, [&](const KeyStep<T>& ks) {
            if (ks.aligned) {  // key vectors straight from the cache
                const T* kt[kStepVecs];
                for (size_t v = 0; v * N < size_t(ks.n); ++v) kt[v] = ks.k[v * N];
                AllTilesStep<kChunks>(q, pos, n, st, kt, ks.k_stride, ks.v, ks.n, ks.pos0, hd,
                                      hd_pad, s, p, pf);
                return;
            }
            if constexpr (kIsBf16<T>) {
                // Runs of N keys cross blocks: gather the step's K pairs, element by element,
                // into a pair layout of kStepKeys keys (the same bits, the same arithmetic).
                T* kb = reinterpret_cast<T*>(kf);
                for (int j = 0; j < ks.n; ++j)
                    for (size_t d = 0; d < hd; ++d)
                        kb[(d / 2) * 2 * kStepKeys + 2 * size_t(j) + d % 2] = KeyElem(ks, j, d);
                const T* kt[kStepVecs];
                for (size_t v = 0; v * N < size_t(ks.n); ++v) kt[v] = kb + 2 * v * N;
                AllTilesStep<kChunks>(q, pos, n, st, kt, 2 * kStepKeys, ks.v, ks.n, ks.pos0, hd,
                                      hd_pad, s, p, pf);
                return;
            }
            // Runs of N keys cross blocks: gather the step's K in float, element by element.
            for (int j = 0; j < ks.n; ++j)
                for (size_t d = 0; d < hd; ++d)
                    kf[d * kStepKeys + size_t(j)] = KvToFloat(KeyElem(ks, j, d));
            const float* kt[kStepVecs];
            for (size_t v = 0; v * N < size_t(ks.n); ++v) kt[v] = kf + v * N;
            AllTilesStep<kChunks>(q, pos, n, st, kt, kStepKeys, ks.v, ks.n, ks.pos0, hd, hd_pad,
                                  s, p, pf);
        });
    };
    const int32_t split = tail ? std::clamp(tail->split, k0, end) : end;
    if (split > k0) attend_keys(block_table, k0, split, 0, nq);
    for (int m = 0; tail && m < tail->n_members; ++m) {
        const ops::AttentionTailMember& mb = tail->members[m];
        const int32_t b = std::min(end, mb.k1);
        if (b > split) attend_keys(mb.block_table, split, b, mb.q0, mb.nq);
    }
    for (int i = 0; i < nq; ++i)
        states[size_t(i) * stride + ops::kAttnStateL] = SumStepSums(lsum + size_t(i) * kStepKeys);
#ifdef TROUPE_ATTN_DPBF16
    if constexpr (kDotValues<T, kChunks>) {
        for (int i = 0; i < nq; ++i)
            UnpermuteDotValues(states + size_t(i) * stride + ops::kAttnStateO, hd_pad);
    }
#endif
}

#endif  // HWY_TARGET != HWY_SCALAR
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
