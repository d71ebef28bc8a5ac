// Matrix-matrix kernels for the K-quants (Q4_K, Q5_K, Q6_K; 256-value super-blocks, Q8_K
// activations), in the form of gemm-inl.h: packed activations, weights broadcast 4 bytes at
// a time. Each row's super-blocks are decoded once per call (levels in element order, the
// sub-block scales as integers), then used for every token.
//
// Per super-block and token the integer sums are the reference's: sum_j sc_j * isum_j (and
// sum_j m_j * (bsum_2j + bsum_2j+1) for the mins of Q4_K / Q5_K), then one float scale.
#if defined(TROUPE_KERNELS_GEMM_KQUANT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TROUPE_KERNELS_GEMM_KQUANT_INL_H_
#undef TROUPE_KERNELS_GEMM_KQUANT_INL_H_
#else
#define TROUPE_KERNELS_GEMM_KQUANT_INL_H_
#endif

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hwy/highway.h"
#include "kernels/gemm-inl.h"
#include "kernels/gemv-inl.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_GCC_ACTUAL
#pragma GCC target("avx512vnni")
#endif
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#if HWY_TARGET != HWY_SCALAR

// One decoded super-block of one row.
struct KRow {
    const uint8_t* levels;  // 256 bytes in element order (tmp)
    float d, dmin;
    int32_t sc[16];    // sub-block scales (8 of 32 values for Q4_K/Q5_K, 16 of 16 for Q6_K)
    int32_t m[8];      // Q4_K / Q5_K sub-block mins
    int32_t init[16];  // VNNI: -128 * the sum of the sub-block's levels
};

HWY_INLINE size_t KRowPrepBytes(int64_t n_super) {
    return size_t(n_super) * (sizeof(KRow) + QK_K);
}

// Sums of the levels of each run of `run` bytes (16 or 32) of a decoded super-block.
HWY_INLINE void LevelSums(const uint8_t* levels, bool is_signed, int run, int32_t* out) {
    const hn::CappedTag<uint8_t, 32> du8;
    const hn::Repartition<uint64_t, decltype(du8)> du64;
    const size_t N = hn::Lanes(du8);
    HWY_ALIGN uint64_t groups[QK_K / 8];
    for (size_t i = 0; i < QK_K; i += N) {
        auto u = hn::LoadU(du8, levels + i);
        if (is_signed) u = hn::Xor(u, hn::Set(du8, 0x80));  // + 128: unsigned
        hn::StoreU(hn::SumsOf8(u), du64, groups + i / 8);
    }
    for (int j = 0; j < QK_K / run; ++j) {
        int64_t s = 0;
        for (int g = 0; g < run / 8; ++g) s += int64_t(groups[j * run / 8 + g]);
        if (is_signed) s -= 128 * run;
        out[j] = -128 * int32_t(s);
    }
}

// The 256 levels of Q4_K (kHasHigh false: q in 0..15) or Q5_K (0..31) super-block b in
// element order.
template <bool kHasHigh>
HWY_INLINE void UnpackQ45K(const uint8_t* b, uint8_t* levels) {
    constexpr size_t kQs = kHasHigh ? 48 : 16;
    const DU8 du8;
    const size_t N8 = hn::Lanes(du8);
    for (int j = 0; j < 4; ++j) {
        for (size_t i = 0; i < 32; i += N8) {
            const auto raw = hn::LoadU(du8, b + kQs + 32 * j + i);
            auto lo = hn::And(raw, hn::Set(du8, 15));
            auto hi = hn::ShiftRight<4>(raw);
            if constexpr (kHasHigh) {
                const auto qh = hn::LoadU(du8, b + 16 + i);
                const auto sixteen = hn::Set(du8, 16);
                lo = hn::Or(lo, hn::IfThenElseZero(
                                    hn::TestBit(qh, hn::Set(du8, uint8_t(1 << (2 * j)))), sixteen));
                hi = hn::Or(hi, hn::IfThenElseZero(
                                    hn::TestBit(qh, hn::Set(du8, uint8_t(2 << (2 * j)))), sixteen));
            }
            hn::StoreU(lo, du8, levels + 64 * j + i);
            hn::StoreU(hi, du8, levels + 64 * j + 32 + i);
        }
    }
}

// Decodes super-block b of a Q4_K (kHasHigh false) or Q5_K row.
template <bool kHasHigh>
HWY_INLINE void PrepareQ45K(const uint8_t* b, uint8_t* levels, KRow& kr) {
    UnpackQ45K<kHasHigh>(b, levels);
    kr.levels = levels;
    kr.d = LoadF16(b);
    kr.dmin = LoadF16(b + 2);
    UnpackScaleMin(b + 4, kr.sc, kr.m);
    if constexpr (kHasVnni) LevelSums(levels, false, 32, kr.init);
}

// The 256 levels q - bias of Q6_K super-block b in element order (q in 0..63).
HWY_INLINE void UnpackQ6K(const uint8_t* b, uint8_t bias_value, uint8_t* levels) {
    const DU8 du8;
    const size_t N8 = hn::Lanes(du8);
    const auto bias = hn::Set(du8, bias_value);
    for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = b + 64 * h;
        const uint8_t* qh = b + 128 + 32 * h;
        uint8_t* o = levels + 128 * h;
        for (size_t i = 0; i < 32; i += N8) {
            const auto a = hn::LoadU(du8, ql + i), c = hn::LoadU(du8, ql + 32 + i);
            const auto q = hn::LoadU(du8, qh + i);
            const auto low = hn::Set(du8, 15);
            hn::StoreU(
                hn::Sub(hn::Or(hn::And(a, low), hn::ShiftLeft<4>(hn::And(q, hn::Set(du8, 3)))),
                        bias),
                du8, o + i);
            hn::StoreU(
                hn::Sub(hn::Or(hn::And(c, low), hn::ShiftLeft<2>(hn::And(q, hn::Set(du8, 12)))),
                        bias),
                du8, o + 32 + i);
            hn::StoreU(hn::Sub(hn::Or(hn::ShiftRight<4>(a), hn::And(q, hn::Set(du8, 48))), bias),
                       du8, o + 64 + i);
            hn::StoreU(hn::Sub(hn::Or(hn::ShiftRight<4>(c),
                                      hn::ShiftRight<2>(hn::And(q, hn::Set(du8, 192)))),
                               bias),
                       du8, o + 96 + i);
        }
    }
}

// Decodes super-block b of a Q6_K row: levels q - 32 (signed) with VNNI, else q.
HWY_INLINE void PrepareQ6K(const uint8_t* b, uint8_t* levels, KRow& kr) {
    UnpackQ6K(b, uint8_t(kHasVnni ? 32 : 0), levels);
    kr.levels = levels;
    kr.d = LoadF16(b + 208);
    kr.dmin = 0.0f;
    const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
    for (int j = 0; j < 16; ++j) kr.sc[j] = sc[j];
    if constexpr (kHasVnni) LevelSums(levels, true, 16, kr.init);
}

// y for rows o0 .. o0 + R (decoded super-blocks krs[r * n_super + k]) and V token vectors.
template <bool kQ6, int R, int V>
HWY_INLINE void MicroKQuant(const ops::Weight& w, int64_t o0, const KRow* HWY_RESTRICT krs,
                            const PackedActs& p, int64_t tv0, int64_t n_tokens, float* y) {
    constexpr int kSub = kQ6 ? 16 : 8;    // sub-blocks per super-block
    constexpr int kGroups = kQ6 ? 4 : 8;  // 4-byte groups per sub-block
    const GF df;
    const GI di;
    const size_t L = hn::Lanes(df);
    const int64_t n_super = w.n_in / QK_K;
    GVF acc[R][V];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) acc[r][v] = hn::Zero(df);
    const uint8_t* tvp[V];
    for (int v = 0; v < V; ++v) tvp[v] = p.base + size_t(tv0 + v) * p.stride;
    for (int64_t k = 0; k < n_super; ++k) {
        const KRow* kr[R];
        for (int r = 0; r < R; ++r) kr[r] = krs + r * n_super + k;
        GVI sumi[R][V];
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < V; ++v) sumi[r][v] = hn::Zero(di);
        for (int j = 0; j < kSub; ++j) {
            GVI isum[R][V];
            for (int v = 0; v < V; ++v) {
                GVI base = hn::Zero(di);
                if constexpr (kQ6 && !kHasVnni) {  // unsigned q: subtract 32 * bsum
                    const auto* bs = reinterpret_cast<const int32_t*>(tvp[v] + p.sum_offset);
                    base = hn::Mul(hn::LoadU(di, bs + (size_t(k) * 16 + size_t(j)) * L),
                                   hn::Set(di, -32));
                }
                for (int r = 0; r < R; ++r)
                    isum[r][v] = kHasVnni ? hn::Set(di, kr[r]->init[j]) : base;
            }
            for (int g = 0; g < kGroups; ++g) {
                const size_t group =
                    size_t(k) * 64 + size_t(j * kGroups + g);  // 4-byte group index
                GV8 xv[V];
                for (int v = 0; v < V; ++v)
                    xv[v] =
                        hn::LoadU(G8(), reinterpret_cast<const int8_t*>(tvp[v]) + group * L * 4);
                for (int r = 0; r < R; ++r) {
                    const GV8 wv = Bcast4(kr[r]->levels + 4 * (j * kGroups + g));
                    for (int v = 0; v < V; ++v)
                        isum[r][v] = DotW<true, true>(wv, xv[v], isum[r][v]);
                }
            }
            for (int r = 0; r < R; ++r)
                for (int v = 0; v < V; ++v)
                    sumi[r][v] =
                        hn::Add(sumi[r][v], hn::Mul(isum[r][v], hn::Set(di, kr[r]->sc[j])));
        }
        for (int v = 0; v < V; ++v) {
            const GVF dx =
                hn::LoadU(df, reinterpret_cast<const float*>(tvp[v] + p.d_offset) + size_t(k) * L);
            GVI bsum2[8];
            if constexpr (!kQ6) {
                const auto* bs =
                    reinterpret_cast<const int32_t*>(tvp[v] + p.sum_offset) + size_t(k) * 16 * L;
                for (int j = 0; j < 8; ++j)
                    bsum2[j] = hn::Add(hn::LoadU(di, bs + size_t(2 * j) * L),
                                       hn::LoadU(di, bs + size_t(2 * j + 1) * L));
            }
            for (int r = 0; r < R; ++r) {
                acc[r][v] = KQuantStep(df, acc[r][v], hn::ConvertTo(df, sumi[r][v]), dx, kr[r]->d);
                if constexpr (!kQ6) {
                    GVI msum = hn::Zero(di);
                    for (int j = 0; j < 8; ++j)
                        msum = hn::Add(msum, hn::Mul(bsum2[j], hn::Set(di, kr[r]->m[j])));
                    acc[r][v] =
                        KQuantMinStep(df, acc[r][v], hn::ConvertTo(df, msum), dx, kr[r]->dmin);
                }
            }
        }
    }
    for (int v = 0; v < V; ++v) {
        HWY_ALIGN float lanes[R][hn::MaxLanes(GF())];
        for (int r = 0; r < R; ++r) hn::Store(acc[r][v], df, lanes[r]);
        const int64_t t_begin = (tv0 + v) * int64_t(L);
        for (size_t t = 0; t < L && t_begin + int64_t(t) < n_tokens; ++t)
            for (int r = 0; r < R; ++r) y[(t_begin + int64_t(t)) * w.n_out + o0 + r] = lanes[r][t];
    }
}

template <bool kQ6, int R>
HWY_INLINE void GemmKRows(const ops::Weight& w, int64_t o, const KRow* krs, const PackedActs& p,
                          int64_t n_tokens, float* y) {
    constexpr int V = kTileVecs;
    const int64_t n_vecs = (n_tokens + int64_t(TokenLanes()) - 1) / int64_t(TokenLanes());
    int64_t tv = 0;
    for (; tv + V <= n_vecs; tv += V) MicroKQuant<kQ6, R, V>(w, o, krs, p, tv, n_tokens, y);
    for (; tv < n_vecs; ++tv) MicroKQuant<kQ6, R, 1>(w, o, krs, p, tv, n_tokens, y);
}

// kRows consecutive rows of Q4_K (kHasHigh false) or Q5_K (row r at row + r * stride) for
// the tokens of kVecs pair-layout token vectors (PackPairs; VNNI only). The 4-bit (5-bit)
// levels are the unsigned operand. Each super-block's are first unpacked in element order
// into a 256-byte buffer (vector masks and shifts; L1), then every group of 8 is one 8-byte
// broadcast from it per dot product: measured at batch 8, 1.33x faster than extracting each
// group's nibbles in a general register before its broadcast (as the Q4_0 kernel does for
// its 32-value blocks).
// Per super-block and (row, token) the integers of GemvRowQ45K, S = sum_j sc_j isum_j and
// M = sum_j m_j (bsum_2j + bsum_2j+1), then its float steps (KQuantStep, KQuantMinStep) with
// d and dmin per lane: the same bits as every other path. Two rows share the float steps
// (even lanes row a, odd lanes row b), as in GemvPairsRows.
template <bool kHasHigh, int kRows, int kVecs>
HWY_NOINLINE void GemvPairsRowsQ45K(const uint8_t* row, size_t stride, const uint8_t* pf,
                                    const PackedActs& p, int64_t n_super, int64_t n_tokens,
                                    float* y, int64_t ldy) {
    static_assert(kRows == 1 || kRows % 2 == 0, "rows go in twos");
    constexpr int kAcc = kRows == 1 ? 1 : kRows / 2;
    const GF df;
    const GI di;
    const hn::Repartition<uint64_t, GF> du64;
    constexpr size_t kBytes = kHasHigh ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
    const size_t L = hn::Lanes(df);
    GVF acc[kAcc][kVecs];
    for (int r = 0; r < kAcc; ++r)
        for (int v = 0; v < kVecs; ++v) acc[r][v] = hn::Zero(df);
    for (int64_t k = 0; k < n_super; ++k) {
        const uint8_t* blk[kRows];
        int32_t sc[kRows][8], mn[kRows][8];
        HWY_ALIGN uint8_t levels[kRows][QK_K];
        for (int r = 0; r < kRows; ++r) {
            blk[r] = row + size_t(r) * stride + size_t(k) * kBytes;
            for (size_t at = 0; at < kBytes; at += 64)
                hwy::Prefetch(pf + size_t(r) * stride + size_t(k) * kBytes + at);
            UnpackScaleMin(blk[r] + 4, sc[r], mn[r]);
            // The levels in element order (sub-block j at 32 j), for 8-byte broadcasts.
            UnpackQ45K<kHasHigh>(blk[r], levels[r]);
        }
        GVI S[kRows][kVecs], M[kRows][kVecs];
        for (int r = 0; r < kRows; ++r)
            for (int v = 0; v < kVecs; ++v) S[r][v] = M[r][v] = hn::Zero(di);
        for (int j = 0; j < 8; ++j) {
            GV8 x[kVecs][4];
            GVI bs2[kVecs];
            for (int v = 0; v < kVecs; ++v) {
                const uint8_t* base = p.base + size_t(v) * p.stride;
                const int8_t* xg = reinterpret_cast<const int8_t*>(base) +
                                   (size_t(k) * 32 + size_t(j) * 4) * L * 4;
                for (size_t g = 0; g < 4; ++g) x[v][g] = hn::LoadU(G8(), xg + g * L * 4);
                const int32_t* bs = reinterpret_cast<const int32_t*>(base + p.sum_offset) +
                                    (size_t(k) * 16 + size_t(2 * j)) * L;
                bs2[v] = hn::Add(hn::LoadU(di, bs), hn::LoadU(di, bs + L));
            }
            for (int r = 0; r < kRows; ++r) {
                GVI isum[kVecs];
                for (int v = 0; v < kVecs; ++v) isum[v] = hn::Zero(di);
                for (size_t g = 0; g < 4; ++g) {
                    uint64_t q;
                    std::memcpy(&q, levels[r] + 32 * j + 8 * g, 8);
                    const GV8 a = hn::BitCast(G8(), hn::Set(du64, q));
                    for (int v = 0; v < kVecs; ++v) isum[v] = DotU8I8(di, a, x[v][g], isum[v]);
                }
                for (int v = 0; v < kVecs; ++v) {
                    S[r][v] = hn::Add(S[r][v], hn::Mul(isum[v], hn::Set(di, sc[r][j])));
                    M[r][v] = hn::Add(M[r][v], hn::Mul(bs2[v], hn::Set(di, mn[r][j])));
                }
            }
        }
        // S: lanes 2t and 2t + 1 hold two halves of token t's sum; M: token t's in lane 2t,
        // 0 in lane 2t + 1.
        for (int v = 0; v < kVecs; ++v) {
            const GVF dxv = hn::LoadU(
                df, reinterpret_cast<const float*>(p.base + size_t(v) * p.stride + p.d_offset) +
                        size_t(k) * L);
            if constexpr (kRows == 1) {
                const GVI is = hn::Add(S[0][v], hn::Shuffle2301(S[0][v]));
                acc[0][v] = KQuantStep(df, acc[0][v], hn::ConvertTo(df, is), dxv, LoadF16(blk[0]));
                acc[0][v] = KQuantMinStep(df, acc[0][v], hn::ConvertTo(df, M[0][v]), dxv,
                                          LoadF16(blk[0] + 2));
            } else {
                for (int r = 0; r < kRows; r += 2) {
                    const GVI is = JoinRowPair(S[r][v], S[r + 1][v]);
                    const GVI ms = hn::Add(M[r][v], hn::Shuffle2301(M[r + 1][v]));
                    acc[r / 2][v] = KQuantStep(df, acc[r / 2][v], hn::ConvertTo(df, is), dxv,
                                               RowPairScales(blk[r], blk[r + 1]));
                    acc[r / 2][v] = KQuantMinStep(df, acc[r / 2][v], hn::ConvertTo(df, ms), dxv,
                                                  RowPairScales(blk[r] + 2, blk[r + 1] + 2));
                }
            }
        }
    }
    StorePairRows<kRows, kVecs>(acc, n_tokens, y, ldy);
}

// The same for Q6_K: levels q in 0..63 unsigned (UnpackQ6K), per super-block and (row,
// token) S = sum_j sc_j (isum_j - 32 bsum_j) over its 16 sub-blocks of 16 values, the
// integers of GemvRowQ6K, then KQuantStep with d per lane.
template <int kRows, int kVecs>
HWY_NOINLINE void GemvPairsRowsQ6K(const uint8_t* row, size_t stride, const uint8_t* pf,
                                   const PackedActs& p, int64_t n_super, int64_t n_tokens, float* y,
                                   int64_t ldy) {
    static_assert(kRows == 1 || kRows % 2 == 0, "rows go in twos");
    constexpr int kAcc = kRows == 1 ? 1 : kRows / 2;
    const GF df;
    const GI di;
    const hn::Repartition<uint64_t, GF> du64;
    const size_t L = hn::Lanes(df);
    GVF acc[kAcc][kVecs];
    for (int r = 0; r < kAcc; ++r)
        for (int v = 0; v < kVecs; ++v) acc[r][v] = hn::Zero(df);
    for (int64_t k = 0; k < n_super; ++k) {
        const uint8_t* blk[kRows];
        HWY_ALIGN uint8_t levels[kRows][QK_K];
        for (int r = 0; r < kRows; ++r) {
            blk[r] = row + size_t(r) * stride + size_t(k) * sizeof(BlockQ6_K);
            for (size_t at = 0; at < sizeof(BlockQ6_K); at += 64)
                hwy::Prefetch(pf + size_t(r) * stride + size_t(k) * sizeof(BlockQ6_K) + at);
            UnpackQ6K(blk[r], 0, levels[r]);
        }
        GVI S[kRows][kVecs];
        for (int r = 0; r < kRows; ++r)
            for (int v = 0; v < kVecs; ++v) S[r][v] = hn::Zero(di);
        for (int j = 0; j < 16; ++j) {
            GV8 x[kVecs][2];
            GVI c[kVecs];  // -32 bsum_j in the even lanes
            for (int v = 0; v < kVecs; ++v) {
                const uint8_t* base = p.base + size_t(v) * p.stride;
                const int8_t* xg = reinterpret_cast<const int8_t*>(base) +
                                   (size_t(k) * 32 + size_t(j) * 2) * L * 4;
                for (size_t g = 0; g < 2; ++g) x[v][g] = hn::LoadU(G8(), xg + g * L * 4);
                c[v] = hn::Mul(hn::LoadU(di, reinterpret_cast<const int32_t*>(base + p.sum_offset) +
                                                 (size_t(k) * 16 + size_t(j)) * L),
                               hn::Set(di, -32));
            }
            for (int r = 0; r < kRows; ++r) {
                const int32_t sc = reinterpret_cast<const int8_t*>(blk[r] + 192)[j];
                for (int v = 0; v < kVecs; ++v) {
                    GVI isum = c[v];
                    for (size_t g = 0; g < 2; ++g) {
                        uint64_t q;
                        std::memcpy(&q, levels[r] + 16 * j + 8 * g, 8);
                        isum = DotU8I8(di, hn::BitCast(G8(), hn::Set(du64, q)), x[v][g], isum);
                    }
                    S[r][v] = hn::Add(S[r][v], hn::Mul(isum, hn::Set(di, sc)));
                }
            }
        }
        // S: lanes 2t and 2t + 1 hold two halves of token t's sum (the correction in 2t).
        for (int v = 0; v < kVecs; ++v) {
            const GVF dxv = hn::LoadU(
                df, reinterpret_cast<const float*>(p.base + size_t(v) * p.stride + p.d_offset) +
                        size_t(k) * L);
            if constexpr (kRows == 1) {
                const GVI is = hn::Add(S[0][v], hn::Shuffle2301(S[0][v]));
                acc[0][v] =
                    KQuantStep(df, acc[0][v], hn::ConvertTo(df, is), dxv, LoadF16(blk[0] + 208));
            } else {
                for (int r = 0; r < kRows; r += 2)
                    acc[r / 2][v] = KQuantStep(df, acc[r / 2][v],
                                               hn::ConvertTo(df, JoinRowPair(S[r][v], S[r + 1][v])),
                                               dxv, RowPairScales(blk[r] + 208, blk[r + 1] + 208));
            }
        }
    }
    StorePairRows<kRows, kVecs>(acc, n_tokens, y, ldy);
}

// Rows [o0, o1) of a K-quant for the pair-layout tokens, kPairRows at a time, prefetching
// the rows kPrefetchBytes ahead (as GemvPacked).
template <DType kType>
HWY_INLINE void GemvPairsKQuant(const ops::Weight& w, const PackedActs& p, int64_t n_tokens,
                                int64_t o0, int64_t o1, float* y) {
    const size_t stride = w.row_stride;
    const int64_t n_super = w.n_in / QK_K;
    const int64_t ahead = int64_t((kPrefetchBytes + stride - 1) / stride);
    for (const uint8_t* q = w.data + size_t(o0) * stride;
         q < w.data + size_t(o0 + (o1 - o0 < ahead ? o1 - o0 : ahead)) * stride; q += 64)
        hwy::Prefetch(q);
    auto pf_row = [&](int64_t o, int64_t n) {
        return w.data + size_t(o + ahead + n <= o1 ? o + ahead : o) * stride;
    };
    // kRows rows at `o` for one or two pair vectors.
    const auto pass = [&](auto rows, int64_t o) {
        constexpr int kRows = decltype(rows)::value;
        const uint8_t* at = w.data + size_t(o) * stride;
        const uint8_t* pf = pf_row(o, kRows);
        const bool two = n_tokens > int64_t(TokenLanes() / 2);
        constexpr bool kHigh = kType == DType::Q5_K;
        if constexpr (kType == DType::Q6_K) {
            if (two)
                return GemvPairsRowsQ6K<kRows, 2>(at, stride, pf, p, n_super, n_tokens, y + o,
                                                  w.n_out);
            GemvPairsRowsQ6K<kRows, 1>(at, stride, pf, p, n_super, n_tokens, y + o, w.n_out);
        } else {
            if (two)
                return GemvPairsRowsQ45K<kHigh, kRows, 2>(at, stride, pf, p, n_super, n_tokens,
                                                          y + o, w.n_out);
            GemvPairsRowsQ45K<kHigh, kRows, 1>(at, stride, pf, p, n_super, n_tokens, y + o,
                                               w.n_out);
        }
    };
    int64_t o = o0;
    for (; o + kPairRows <= o1; o += kPairRows) pass(std::integral_constant<int, kPairRows>(), o);
    for (; o < o1; ++o) pass(std::integral_constant<int, 1>(), o);
}

// Rows [o0, o1) x all tokens of a K-quant. scratch: KRowPrepBytes(n_super) * kTileRows.
template <DType kType>
HWY_INLINE void GemmKQuant(const ops::Weight& w, const PackedActs& p, int64_t n_tokens, int64_t o0,
                           int64_t o1, float* y, uint8_t* scratch) {
    if constexpr (kHasVnni) {
        if (p.pairs) return GemvPairsKQuant<kType>(w, p, n_tokens, o0, o1, y);
    }
    constexpr bool kQ6 = kType == DType::Q6_K;
    constexpr size_t kBytes = kType == DType::Q4_K   ? sizeof(BlockQ4_K)
                              : kType == DType::Q5_K ? sizeof(BlockQ5_K)
                                                     : sizeof(BlockQ6_K);
    constexpr int R = kTileRows;
    const int64_t n_super = w.n_in / QK_K;
    auto* krs = reinterpret_cast<KRow*>(scratch);
    uint8_t* levels = scratch + size_t(R) * size_t(n_super) * sizeof(KRow);
    auto prepare = [&](int64_t o, int n) {
        for (int r = 0; r < n; ++r)
            for (int64_t k = 0; k < n_super; ++k) {
                const uint8_t* b = w.data + size_t(o + r) * w.row_stride + size_t(k) * kBytes;
                uint8_t* lv = levels + (size_t(r) * size_t(n_super) + size_t(k)) * QK_K;
                KRow& kr = krs[r * n_super + k];
                if constexpr (kType == DType::Q4_K) {
                    PrepareQ45K<false>(b, lv, kr);
                } else if constexpr (kType == DType::Q5_K) {
                    PrepareQ45K<true>(b, lv, kr);
                } else {
                    PrepareQ6K(b, lv, kr);
                }
            }
    };
    int64_t o = o0;
    for (; o + R <= o1; o += R) {
        prepare(o, R);
        PrefetchNextRows(w, o + R, o1, R);
        GemmKRows<kQ6, R>(w, o, krs, p, n_tokens, y);
    }
    for (; o < o1; ++o) {
        prepare(o, 1);
        GemmKRows<kQ6, 1>(w, o, krs, p, n_tokens, y);
    }
}

#endif  // HWY_TARGET != HWY_SCALAR
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
