// Matrix-matrix kernels for several tokens at once (batched decode, prefill). Each weight
// value is used for every token while it sits in a register, so the work becomes arithmetic
// instead of memory traffic, and the weights are read in their file layout (no repacking).
//
// The activations of L tokens (L = 32-bit lanes of a full vector: 16 on AVX-512, 8 on AVX2,
// 4 on SSE4/NEON) are packed once per call so that lane t of a vector holds token t: for
// every 4 consecutive inputs, one vector holds those 4 bytes of all L tokens. Four weight
// bytes broadcast to every lane then take one 8-bit dot product to advance L tokens. The
// micro-kernel holds an R rows x V token-vectors tile of accumulators in registers.
//
// Integer sums are exactly the reference's:
// - with VNNI (unsigned x signed bytes) the packed activations are x + 128 and each weight
//   block's sum times 128 is subtracted (the weights are the signed operand);
// - without it, unsigned levels (Q4_0/Q5_0 as q, K-quants) multiply signed activations
//   (vpmaddubsw cannot overflow with levels <= 63) and bias * sum(x) is subtracted; Q8_0
//   uses the sign trick (|w| times sign(x, w)).
#if defined(TROUPE_KERNELS_GEMM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TROUPE_KERNELS_GEMM_INL_H_
#undef TROUPE_KERNELS_GEMM_INL_H_
#else
#define TROUPE_KERNELS_GEMM_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/dot-inl.h"
#include "kernels/gemv-inl.h"
#include "kernels/matmul_act.h"
#include "kernels/ops.h"
#include "kernels/simd-inl.h"
#include "kernels/weight_layout.h"
#include "tensor/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_GCC_ACTUAL
#pragma GCC target("avx512vnni")
#endif
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#if HWY_TARGET != HWY_SCALAR

using GF = hn::ScalableTag<float>;
using GI = hn::RebindToSigned<GF>;
using G8 = hn::Repartition<int8_t, GF>;
using GVF = hn::Vec<GF>;
using GVI = hn::Vec<GI>;
using GV8 = hn::Vec<G8>;

// Tokens per packed vector.
HWY_INLINE size_t TokenLanes() {
    return hn::Lanes(GF());
}

// Rows and token vectors of the register tile (accumulators: 2 R V vectors).
constexpr int kTileRows = HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 ? 2 : 4;
constexpr int kTileVecs = 2;

// ---- Packed activations ----------------------------------------------------------------
//
// For each group of L tokens ("token vector"), in its own region of `PackedActs::stride`
// bytes:
//   q:   [n_in / 4][L] groups of 4 bytes (x + 128 with VNNI, else x), float rows: [n_in][L]
//   d:   [n_scales][L] float  the activation scale of each block (Q8_0/Q8_1/Q8_K)
//   sum: [n_sums][L]   Q8_0: int32 sum of the block's values; Q8_1: float s;
//                      Q8_K: int32 sums of 16 values (bsums)
struct PackedActs {
    const uint8_t* base = nullptr;
    size_t stride = 0;  // bytes per token vector
    size_t d_offset = 0, sum_offset = 0;
    bool pairs = false;  // the pair layout (UsePairs)
};

HWY_INLINE PackedActs PackLayout(const ops::ActLayout& l) {
    const size_t L = TokenLanes();
    PackedActs p;
    const bool is_float = l.type == DType::F32 || l.type == DType::F16 || l.type == DType::BF16;
    const size_t q_bytes = size_t(l.n_in) * L * (is_float ? 4 : 1);
    const int64_t n_sums = l.type == DType::Q8_K ? l.n_in / 16 : l.n_blocks;
    p.d_offset = ops::round_up_64(q_bytes);
    p.sum_offset = p.d_offset + ops::round_up_64(size_t(l.n_blocks) * L * 4);
    p.stride = p.sum_offset + ops::round_up_64(size_t(n_sums) * L * 4);
    return p;
}

// Batches of at most L tokens with VNNI use the pair layout instead: lane 2t holds token
// t's group 2j and lane 2t+1 its group 2j+1, so one 8-byte broadcast of weights and one dot
// product advance two groups of every token (half the dot products of the plain layout).
// A pair vector holds L/2 tokens; up to L tokens take two, which share each broadcast.
// Here the weights are the unsigned operand (w + 128 for Q8_0, the level for Q4_0 and Q5_0:
// PairWeights) and the activations stay signed; the correction -128 * sum(x) of each token's
// block is packed in its even lane (the odd lane holds 0, so it is counted once when the pair
// is added). Block scales are duplicated per lane pair. pair_types: every weight of the call
// has a pair-layout kernel (ops::kern::has_pair_kernel).
HWY_INLINE bool UsePairs(bool pair_types, int64_t n_tokens) {
    return kHasVnni && pair_types && n_tokens <= int64_t(TokenLanes());
}

// Packed vectors (of PackLayout's stride) that n_tokens tokens take.
HWY_INLINE int64_t PackedVectors(bool pair_types, int64_t n_tokens) {
    const int64_t per_vec = int64_t(TokenLanes()) / (UsePairs(pair_types, n_tokens) ? 2 : 1);
    return (n_tokens + per_vec - 1) / per_vec;
}

// Packs tokens [t0, t0 + n) (n <= L/2) into the pair vector at `out`. Q8_K (for Q4_K and
// Q6_K): d per 256 values duplicated per lane pair, and each 16 values' sum in the even lane
// (the kernels make their corrections from it).
HWY_INLINE void PackPairs(const uint8_t* act, const ops::ActLayout& l, int64_t t0, int64_t n,
                          const PackedActs& p, uint8_t* out) {
    const size_t L = TokenLanes();
    std::memset(out, 0, p.stride);
    auto* q = reinterpret_cast<uint32_t*>(out);
    auto* pd = reinterpret_cast<float*>(out + p.d_offset);
    auto* pc = reinterpret_cast<int32_t*>(out + p.sum_offset);
    for (int64_t t = 0; t < n; ++t) {
        const uint8_t* row = act + size_t(t0 + t) * l.row_bytes;
        for (int64_t g = 0; g < l.n_in / 4; ++g)
            std::memcpy(&q[size_t(g / 2) * L + size_t(2 * t) + size_t(g % 2)], row + 4 * g, 4);
        const auto* d = reinterpret_cast<const float*>(row + l.scale_offset);
        const auto* sums = reinterpret_cast<const int32_t*>(row + l.sum_offset);
        for (int64_t k = 0; k < l.n_blocks; ++k) {
            float* dk = pd + size_t(k) * L + size_t(2 * t);
            dk[0] = dk[1] = d[k];
        }
        if (l.type == DType::Q8_K) {
            for (int64_t j = 0; j < l.n_in / 16; ++j) pc[size_t(j) * L + size_t(2 * t)] = sums[j];
        } else {
            for (int64_t k = 0; k < l.n_blocks; ++k)
                pc[size_t(k) * L + size_t(2 * t)] = -128 * sums[k];
        }
    }
}

// Packs tokens [t0, t0 + n) (n <= L; missing tokens are zero) of the converted rows `act`
// into the token vector at `out`.
HWY_INLINE void PackTokens(const uint8_t* act, const ops::ActLayout& l, int64_t t0, int64_t n,
                           const PackedActs& p, uint8_t* out) {
    const size_t L = TokenLanes();
    const bool is_float = l.type == DType::F32 || l.type == DType::F16 || l.type == DType::BF16;
    std::memset(out, 0, p.stride);
    const int64_t n_sums = l.type == DType::Q8_K ? l.n_in / 16 : l.n_blocks;
    for (int64_t t = 0; t < n; ++t) {
        const uint8_t* row = act + size_t(t0 + t) * l.row_bytes;
        if (is_float) {
            const auto* x = reinterpret_cast<const float*>(row);
            auto* q = reinterpret_cast<float*>(out);
            for (int64_t i = 0; i < l.n_in; ++i) q[size_t(i) * L + size_t(t)] = x[i];
            continue;
        }
        auto* q = reinterpret_cast<uint32_t*>(out);
        for (int64_t g = 0; g < l.n_in / 4; ++g) {
            uint32_t v;
            std::memcpy(&v, row + 4 * g, 4);
            if constexpr (kHasVnni) v ^= 0x80808080u;  // x + 128 as unsigned bytes
            q[size_t(g) * L + size_t(t)] = v;
        }
        const auto* d = reinterpret_cast<const float*>(row + l.scale_offset);
        auto* pd = reinterpret_cast<float*>(out + p.d_offset);
        for (int64_t k = 0; k < l.n_blocks; ++k) pd[size_t(k) * L + size_t(t)] = d[k];
        const auto* s = reinterpret_cast<const uint32_t*>(row + l.sum_offset);
        auto* ps = reinterpret_cast<uint32_t*>(out + p.sum_offset);
        for (int64_t k = 0; k < n_sums; ++k) ps[size_t(k) * L + size_t(t)] = s[k];
    }
    // With VNNI, a spare last lane of ones makes the dot product also sum the weights (the
    // correction of the x + 128 offset, see GemvPacked).
    if (kHasVnni && !is_float && n < int64_t(L)) {
        auto* q = reinterpret_cast<uint32_t*>(out);
        for (int64_t g = 0; g < l.n_in / 4; ++g) q[size_t(g) * L + L - 1] = 0x01010101u;
    }
}

// ---- Weight rows: the 32 bytes to broadcast for a 32-value block, and its correction -------

// The 4 bytes at p in every 32-bit lane.
HWY_INLINE GV8 Bcast4(const uint8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return hn::BitCast(G8(), hn::Set(GI(), v));
}

// Sum of 32 signed bytes.
HWY_INLINE int32_t SumBytes32(const int8_t* p) {
    const hn::CappedTag<uint8_t, 32> du8;
    const hn::Repartition<uint64_t, decltype(du8)> du64;
    int32_t total = 0;
    for (size_t i = 0; i < 32; i += hn::Lanes(du8)) {
        const auto u =
            hn::Xor(hn::LoadU(du8, reinterpret_cast<const uint8_t*>(p + i)), hn::Set(du8, 0x80));
        total += int32_t(hn::GetLane(hn::SumOfLanes(du64, hn::SumsOf8(u))));
    }
    return total - 128 * 32;
}

// One 32-value block of one row as the micro-kernel uses it, prepared once per call.
struct RowBlock {
    const uint8_t* bytes;  // 32 bytes to broadcast 4 at a time (in the weights or in tmp)
    int32_t init;          // integer correction common to all tokens
    float scale;           // d of the weight block
    float min;             // m (types with a minimum)
};

// Prefetches rows [o, o + n) of w (those below o1): called by the matrix-matrix kernels once
// they have prepared a group of rows, so the next group's weights arrive while this one
// takes all its tokens (its preparation pass otherwise waits on DRAM or L3: batch 64 of
// 1536x576 q8_0 on one thread 370 -> 500 GFLOP/s, batch 512 550 -> 590).
HWY_INLINE void PrefetchNextRows(const ops::Weight& w, int64_t o, int64_t o1, int64_t n) {
    if (o >= o1) return;
    const uint8_t* begin = w.data + size_t(o) * w.row_stride;
    const size_t bytes = size_t(std::min(n, o1 - o)) * w.row_stride;
    for (size_t b = 0; b < bytes; b += 64) hwy::Prefetch(begin + b);
}

// Scratch per row for RowBlocks and decoded levels.
HWY_INLINE size_t RowPrepBytes(int64_t n_blocks) {
    return size_t(n_blocks) * (sizeof(RowBlock) + 32);
}

// Signed levels (VNNI, and Q8_0 everywhere) or unsigned levels q = L + bias.
template <class Codec>
struct LegacyRows {
    static constexpr bool kUnsigned = !kHasVnni && !std::is_same_v<Codec, CodecQ8_0>;
    // Added to the levels when kUnsigned (the codecs give signed levels for Q4_0 / Q5_0).
    static constexpr int kBias = std::is_same_v<Codec, CodecQ4_0>   ? 8
                                 : std::is_same_v<Codec, CodecQ5_0> ? 16
                                                                    : 0;

    // tmp: 32 bytes of scratch for decoded levels.
    static HWY_INLINE RowBlock Get(const uint8_t* blk, uint8_t* tmp) {
        RowBlock rb;
        rb.scale = LoadF16(blk);
        rb.min = Codec::kHasMin ? LoadF16(blk + 2) : 0.0f;
        if constexpr (std::is_same_v<Codec, CodecQ8_0>) {
            rb.bytes = blk + 2;
        } else {
            const D8 d8;
            for (size_t i = 0; i < 32; i += hn::Lanes(d8)) {
                V8 v = Codec::Levels(blk, i);
                if constexpr (kUnsigned && kBias != 0) v = hn::Add(v, hn::Set(d8, int8_t(kBias)));
                hn::StoreU(v, d8, reinterpret_cast<int8_t*>(tmp + i));
            }
            rb.bytes = tmp;
        }
        rb.init = kHasVnni ? -128 * SumBytes32(reinterpret_cast<const int8_t*>(rb.bytes)) : 0;
        return rb;
    }
};

// The dot product of 4 broadcast weight bytes with a packed activation vector.
template <bool kUnsignedLevels, bool kSignedX>
HWY_INLINE GVI DotW(GV8 w, GV8 x, GVI acc) {
    if constexpr (kHasVnni) {
        return DotU8I8(GI(), x, w, acc);  // x + 128 unsigned, w signed
    } else if constexpr (kUnsignedLevels) {
        return DotU8I8(GI(), w, x, acc);
    } else {
        return DotI8I8(GI(), w, x, acc);
    }
}

// Prepares the n_blocks blocks of one row: rb[k], decoded levels in tmp[k * 32].
template <class Codec>
HWY_INLINE void PrepareRow(const uint8_t* row, int64_t n_blocks, RowBlock* rb, uint8_t* tmp) {
    for (int64_t k = 0; k < n_blocks; ++k)
        rb[k] = LegacyRows<Codec>::Get(row + size_t(k) * Codec::kBytes, tmp + size_t(k) * 32);
}

// The 16 rows of group g of an Interleaved16 weight (kernels/weight_layout.h), block by
// block: rb[r * n_blocks + k] for row 16 g + r, whose 4 signed levels of group j are at
// rb.bytes + 64 j (the micro-kernel reads them with that stride). Q8_0: the values where they
// are (64 j + 4 r from the block's values). Q4_0: the nibbles unpacked to w = q - 8 into levels
// ([n_blocks][8][16][4] bytes, the same arrangement). With VNNI each block's 16 weight sums
// come from one dot product per group against ones (lane r: row r), in registers.
HWY_INLINE void PrepareInterleavedGroup(const ops::Weight& w, int64_t g, RowBlock* rb,
                                        uint8_t* levels) {
    const GI di;
    const hn::Repartition<uint16_t, GF> d16;
    const size_t L = hn::Lanes(di);
    const int64_t n_blocks = w.n_in / 32;
    const bool q4 = w.type == DType::Q4_0;
    const uint8_t* group = w.data + size_t(g) * size_t(ops::kInterleaveRows) * w.row_stride;
    HWY_ALIGN int32_t sums[ops::kInterleaveRows];
    for (int64_t k = 0; k < n_blocks; ++k) {
        const uint8_t* b = group + ops::interleaved_scales_at(k);  // 16 scales
        const uint8_t* q = group + ops::interleaved_values_at(w.type, n_blocks, k);  // [8][16][4]
        if (q4) {
            uint8_t* out = levels + size_t(k) * 512;
            for (size_t i = 0; i < 256; i += 4 * L) {  // nibble vectors: groups p and p + 4
                const GV8 v = hn::LoadU(G8(), reinterpret_cast<const int8_t*>(q + i));
                const GV8 lo = hn::And(v, hn::Set(G8(), int8_t(0x0F)));
                const GV8 hi = hn::And(hn::BitCast(G8(), hn::ShiftRight<4>(hn::BitCast(d16, v))),
                                       hn::Set(G8(), int8_t(0x0F)));
                hn::StoreU(hn::Sub(lo, hn::Set(G8(), int8_t(8))), G8(),
                           reinterpret_cast<int8_t*>(out + i));
                hn::StoreU(hn::Sub(hi, hn::Set(G8(), int8_t(8))), G8(),
                           reinterpret_cast<int8_t*>(out + 256 + i));
            }
            q = out;
        }
        if constexpr (kHasVnni) {
            for (size_t h = 0; h < size_t(ops::kInterleaveRows); h += L) {
                GVI s = hn::Zero(di);
                for (size_t j = 0; j < 8; ++j)
                    s = DotU8I8(
                        di, hn::Set(G8(), int8_t(1)),
                        hn::LoadU(G8(), reinterpret_cast<const int8_t*>(q + 64 * j) + 4 * h), s);
                hn::Store(s, di, sums + h);
            }
        }
        for (int64_t r = 0; r < ops::kInterleaveRows; ++r) {
            RowBlock& x = rb[r * n_blocks + k];
            x.bytes = q + 4 * r;
            x.scale = LoadF16(b + 2 * r);
            x.min = 0.0f;
            x.init = kHasVnni ? -128 * sums[r] : 0;
        }
    }
}

// y[t][o] for rows o0 .. o0 + R (prepared blocks rb[r * n_blocks + k]) and the tokens of V
// packed token vectors starting at tv0.
template <class Codec, int R, int V, size_t kGroupStride = 4>
HWY_INLINE void MicroLegacy(const ops::Weight& w, int64_t o0, const RowBlock* HWY_RESTRICT rbs,
                            const PackedActs& p, int64_t tv0, int64_t n_tokens, float* y) {
    using Rows = LegacyRows<Codec>;
    const GF df;
    const GI di;
    const size_t L = hn::Lanes(df);
    const int64_t n_blocks = w.n_in / 32;
    GVF acc[R][V];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) acc[r][v] = hn::Zero(df);
    const uint8_t* tvp[V];
    for (int v = 0; v < V; ++v) tvp[v] = p.base + size_t(tv0 + v) * p.stride;
    for (int64_t k = 0; k < n_blocks; ++k) {
        const RowBlock* rb[R];
        for (int r = 0; r < R; ++r) rb[r] = rbs + r * n_blocks + k;
        GVI isum[R][V];
        for (int v = 0; v < V; ++v) {
            GVI bias_term = hn::Zero(di);
            if constexpr (Rows::kUnsigned && Rows::kBias != 0) {
                const auto* sums = reinterpret_cast<const int32_t*>(tvp[v] + p.sum_offset);
                bias_term = hn::Mul(hn::LoadU(di, sums + size_t(k) * L), hn::Set(di, -Rows::kBias));
            }
            for (int r = 0; r < R; ++r) isum[r][v] = hn::Add(bias_term, hn::Set(di, rb[r]->init));
        }
        for (size_t g = 0; g < 8; ++g) {
            GV8 xv[V];
            for (int v = 0; v < V; ++v)
                xv[v] = hn::LoadU(
                    G8(), reinterpret_cast<const int8_t*>(tvp[v]) + (size_t(k) * 8 + g) * L * 4);
            for (int r = 0; r < R; ++r) {
                const GV8 wv = Bcast4(rb[r]->bytes + kGroupStride * g);
                for (int v = 0; v < V; ++v)
                    isum[r][v] = DotW<Rows::kUnsigned, true>(wv, xv[v], isum[r][v]);
            }
        }
        for (int v = 0; v < V; ++v) {
            const GVF dx =
                hn::LoadU(df, reinterpret_cast<const float*>(tvp[v] + p.d_offset) + size_t(k) * L);
            for (int r = 0; r < R; ++r)
                acc[r][v] = hn::MulAdd(hn::ConvertTo(df, isum[r][v]),
                                       hn::Mul(dx, hn::Set(df, rb[r]->scale)), acc[r][v]);
            if constexpr (Codec::kHasMin) {
                const GVF sx = hn::LoadU(
                    df, reinterpret_cast<const float*>(tvp[v] + p.sum_offset) + size_t(k) * L);
                for (int r = 0; r < R; ++r)
                    acc[r][v] = hn::MulAdd(sx, hn::Set(df, rb[r]->min), acc[r][v]);
            }
        }
    }
    // Lane t of acc[r][v] is y[(tv0 + v) L + t][o0 + r].
    for (int v = 0; v < V; ++v) {
        HWY_ALIGN float lanes[R][hn::MaxLanes(GF())];
        for (int r = 0; r < R; ++r) hn::Store(acc[r][v], df, lanes[r]);
        const int64_t t_begin = (tv0 + v) * int64_t(L);
        for (size_t t = 0; t < L && t_begin + int64_t(t) < n_tokens; ++t)
            for (int r = 0; r < R; ++r) y[(t_begin + int64_t(t)) * w.n_out + o0 + r] = lanes[r][t];
    }
}

// All token vectors for R prepared rows starting at o (their 4-input groups kGroupStride
// bytes apart: 4 in rows, 64 in interleaved groups).
template <class Codec, int R, size_t kGroupStride = 4>
HWY_INLINE void GemmRows(const ops::Weight& w, int64_t o, const RowBlock* rbs, const PackedActs& p,
                         int64_t n_tokens, float* y) {
    constexpr int V = kTileVecs;
    const int64_t n_vecs = (n_tokens + int64_t(TokenLanes()) - 1) / int64_t(TokenLanes());
    int64_t tv = 0;
    for (; tv + V <= n_vecs; tv += V)
        MicroLegacy<Codec, R, V, kGroupStride>(w, o, rbs, p, tv, n_tokens, y);
    for (; tv < n_vecs; ++tv) MicroLegacy<Codec, R, 1, kGroupStride>(w, o, rbs, p, tv, n_tokens, y);
}

// Rows [o0, o1) (whole groups) x all tokens of an Interleaved16 Q8_0 or Q4_0 weight: each
// group prepared once (its levels signed, as the Q8_0 micro-kernel takes them), then its rows
// kTileRows at a time. scratch: LegacyScratchBytes(w).
HWY_INLINE void GemmInterleaved(const ops::Weight& w, const PackedActs& p, int64_t n_tokens,
                                int64_t o0, int64_t o1, float* y, uint8_t* scratch) {
    constexpr int R = kTileRows;
    static_assert(ops::kInterleaveRows % R == 0, "tiles within a group");
    const int64_t n_blocks = w.n_in / 32;
    auto* rbs = reinterpret_cast<RowBlock*>(scratch);
    // Q4_0's unpacked levels after the row blocks, 64-byte aligned.
    uint8_t* levels = scratch + ops::round_up_64(size_t(ops::kInterleaveRows) * size_t(n_blocks) *
                                                 sizeof(RowBlock));
    for (int64_t o = o0; o < o1; o += ops::kInterleaveRows) {
        PrepareInterleavedGroup(w, o / ops::kInterleaveRows, rbs, levels);
        PrefetchNextRows(w, o + ops::kInterleaveRows, o1, ops::kInterleaveRows);
        for (int64_t r = 0; r < ops::kInterleaveRows; r += R)
            GemmRows<CodecQ8_0, R, 64>(w, o + r, rbs + r * n_blocks, p, n_tokens, y);
    }
}

// Rows [o0, o1) x all tokens of a legacy type. scratch: RowPrepBytes(n_blocks) * kTileRows.
template <class Codec>
HWY_INLINE void GemmLegacy(const ops::Weight& w, const PackedActs& p, int64_t n_tokens, int64_t o0,
                           int64_t o1, float* y, uint8_t* scratch) {
    constexpr int R = kTileRows;
    const int64_t n_blocks = w.n_in / 32;
    auto* rbs = reinterpret_cast<RowBlock*>(scratch);
    uint8_t* tmp = scratch + size_t(R) * size_t(n_blocks) * sizeof(RowBlock);
    auto prepare = [&](int64_t o, int n) {
        for (int r = 0; r < n; ++r)
            PrepareRow<Codec>(w.data + size_t(o + r) * w.row_stride, n_blocks, rbs + r * n_blocks,
                              tmp + size_t(r) * size_t(n_blocks) * 32);
    };
    int64_t o = o0;
    for (; o + R <= o1; o += R) {
        prepare(o, R);
        PrefetchNextRows(w, o + R, o1, R);
        GemmRows<Codec, R>(w, o, rbs, p, n_tokens, y);
    }
    for (; o < o1; ++o) {
        prepare(o, 1);
        GemmRows<Codec, 1>(w, o, rbs, p, n_tokens, y);
    }
}

// Fewer tokens than lanes (batched decode): one packed token vector, the weights streamed
// row by row (prefetched like the matrix-vector kernels) without a separate preparation
// pass, kRows rows per pass so that each activation load serves several rows.
// With VNNI the spare last lane holds the sum of each block's weights (PackTokens' lane of ones),
// which gives the x + 128 correction in-register.
template <class Codec, int kRows>
HWY_NOINLINE void GemvPackedRows(const uint8_t* row0, size_t stride, const uint8_t* pf,
                                 const PackedActs& p, int64_t n_blocks, int64_t n_tokens, float* y,
                                 int64_t ldy) {
    using Rows = LegacyRows<Codec>;
    const GF df;
    const GI di;
    const size_t L = hn::Lanes(df);
    const auto* xq = reinterpret_cast<const int8_t*>(p.base);
    const auto* dx = reinterpret_cast<const float*>(p.base + p.d_offset);
    const auto* sums = reinterpret_cast<const int32_t*>(p.base + p.sum_offset);
    const auto* sx = reinterpret_cast<const float*>(p.base + p.sum_offset);
    HWY_ALIGN int32_t last_idx[hn::MaxLanes(GI())];
    for (size_t i = 0; i < L; ++i) last_idx[i] = int32_t(L - 1);
    const auto last = hn::SetTableIndices(di, last_idx);
    HWY_ALIGN uint8_t tmp[kRows][32];
    GVF acc[kRows];
    for (int r = 0; r < kRows; ++r) acc[r] = hn::Zero(df);
    for (int64_t k = 0; k < n_blocks; ++k) {
        const uint8_t* blk[kRows];
        const uint8_t* bytes[kRows];
        for (int r = 0; r < kRows; ++r) {
            blk[r] = row0 + size_t(r) * stride + size_t(k) * Codec::kBytes;
            hwy::Prefetch(pf + size_t(r) * stride + size_t(k) * Codec::kBytes);
            bytes[r] = blk[r] + 2;
            if constexpr (!std::is_same_v<Codec, CodecQ8_0>) {
                const D8 d8;
                for (size_t i = 0; i < 32; i += hn::Lanes(d8)) {
                    V8 v = Codec::Levels(blk[r], i);
                    if constexpr (Rows::kUnsigned && Rows::kBias != 0)
                        v = hn::Add(v, hn::Set(d8, int8_t(Rows::kBias)));
                    hn::Store(v, d8, reinterpret_cast<int8_t*>(tmp[r] + i));
                }
                bytes[r] = tmp[r];
            }
        }
        GVI init = hn::Zero(di);
        if constexpr (Rows::kUnsigned && Rows::kBias != 0)
            init = hn::Mul(hn::LoadU(di, sums + size_t(k) * L), hn::Set(di, -Rows::kBias));
        GVI isum[kRows], isum2[kRows];  // two chains of 4 dot products per row
        for (int r = 0; r < kRows; ++r) {
            isum[r] = init;
            isum2[r] = hn::Zero(di);
        }
        for (size_t g = 0; g < 8; g += 2) {
            const int8_t* xg = xq + (size_t(k) * 8 + g) * L * 4;
            const GV8 x0 = hn::LoadU(G8(), xg), x1 = hn::LoadU(G8(), xg + L * 4);
            for (int r = 0; r < kRows; ++r) {
                isum[r] = DotW<Rows::kUnsigned, true>(Bcast4(bytes[r] + 4 * g), x0, isum[r]);
                isum2[r] = DotW<Rows::kUnsigned, true>(Bcast4(bytes[r] + 4 * g + 4), x1, isum2[r]);
            }
        }
        const GVF dxv = hn::LoadU(df, dx + size_t(k) * L);
        for (int r = 0; r < kRows; ++r) {
            GVI is = hn::Add(isum[r], isum2[r]);
            if constexpr (kHasVnni)
                is = hn::Sub(is, hn::ShiftLeft<7>(hn::TableLookupLanes(is, last)));
            acc[r] =
                hn::MulAdd(hn::ConvertTo(df, is), hn::Mul(dxv, BroadcastF16To(df, blk[r])), acc[r]);
            if constexpr (Codec::kHasMin)
                acc[r] = hn::MulAdd(hn::LoadU(df, sx + size_t(k) * L),
                                    BroadcastF16To(df, blk[r] + 2), acc[r]);
        }
    }
    for (int r = 0; r < kRows; ++r) {
        HWY_ALIGN float lanes[hn::MaxLanes(GF())];
        hn::Store(acc[r], df, lanes);
        for (int64_t t = 0; t < n_tokens; ++t) y[t * ldy + r] = lanes[t];
    }
}

// Rows per GemvPairsRows pass (even: rows go in twos through the float steps).
constexpr int kPairRows = 4;

// The unsigned operand of the pair layout's dot products for 32-value block types: group j
// (values 8j .. 8j + 7) of the block at blk, its 8 bytes in every 64-bit lane, and the shift
// that turns the activation-side correction packed for Q8_0 (-128 * sum(x), PackPairs) into
// this type's.
//   Q8_0: w + 128 (sum (w + 128) x = sum w x + 128 sum x): a broadcast and an XOR (an XOR
//         in a general register before the broadcast was 14% slower at batch 8);
//   Q4_0: the 4-bit level q = w + 8 as stored (sum q x = sum w x + 8 sum x, and 8 sum x =
//         (128 sum x) >> 4 exactly); low nibbles of bytes 0-15 are values 0-15, high nibbles
//         values 16-31.
//   Q5_0: the 5-bit level q = w + 16: Q4_0's nibbles (at byte 6) with bit 4 from the block's
//         32 high bits (byte 2: bit e for value e; byte j of them for group j, spread to one
//         bit per byte by a table), and 16 sum x = (128 sum x) >> 3.
template <class Codec>
struct PairWeights;
template <>
struct PairWeights<CodecQ8_0> {
    static constexpr int kCorrectionShift = 0;
    static HWY_INLINE GV8 Group(const uint8_t* blk, size_t j) {
        const hn::Repartition<uint64_t, GF> du64;
        uint64_t w;
        std::memcpy(&w, blk + 2 + 8 * j, 8);
        return hn::BitCast(G8(), hn::Xor(hn::Set(du64, w), hn::Set(du64, 0x8080808080808080ull)));
    }
};

// The 8 nibbles of group j (values 8j .. 8j + 7) of 16 bytes of 4-bit levels (low nibbles:
// values 0-15, high: 16-31), one per byte.
HWY_INLINE uint64_t NibbleGroup(const uint8_t* qs, size_t j) {
    uint64_t q;
    std::memcpy(&q, qs + 8 * (j % 2), 8);
    return (j < 2 ? q : q >> 4) & 0x0F0F0F0F0F0F0F0Full;
}
template <>
struct PairWeights<CodecQ4_0> {
    static constexpr int kCorrectionShift = 4;
    static HWY_INLINE GV8 Group(const uint8_t* blk, size_t j) {
        return hn::BitCast(G8(), hn::Set(hn::Repartition<uint64_t, GF>(), NibbleGroup(blk + 2, j)));
    }
};

// kSpreadBits[b]: bit i of b as 0x10 in byte i (Q5_0's fifth bits of 8 values).
struct SpreadBitsTable {
    uint64_t v[256];
    constexpr SpreadBitsTable() : v() {
        for (int b = 0; b < 256; ++b)
            for (int i = 0; i < 8; ++i)
                if (b >> i & 1) v[b] |= uint64_t(0x10) << (8 * i);
    }
};
inline constexpr SpreadBitsTable kSpreadBits{};
template <>
struct PairWeights<CodecQ5_0> {
    static constexpr int kCorrectionShift = 3;
    static HWY_INLINE GV8 Group(const uint8_t* blk, size_t j) {
        const uint64_t q = NibbleGroup(blk + 6, j) | kSpreadBits.v[blk[2 + j]];
        return hn::BitCast(G8(), hn::Set(hn::Repartition<uint64_t, GF>(), q));
    }
};

// Whether weights of Codec's type have a pair-layout kernel (PairWeights).
template <class Codec>
constexpr bool HasPairKernel() {
    return std::is_same_v<Codec, CodecQ8_0> || std::is_same_v<Codec, CodecQ4_0> ||
           std::is_same_v<Codec, CodecQ5_0>;
}

// The integer sums of rows a and b (two halves of token t's sum in lanes 2t and 2t + 1 of
// each) joined for the float steps: row a's in the even lanes, row b's in the odd lanes,
// (a0 + a1, b0 + b1) = (a0, b1) + (a1, b0) in every lane pair.
HWY_INLINE GVI JoinRowPair(GVI a, GVI b) {
    return hn::Add(hn::OddEven(b, a), hn::Shuffle2301(hn::OddEven(a, b)));
}

// The f16 scales at a and b (one per row) in the even and odd lanes.
HWY_INLINE GVF RowPairScales(const uint8_t* a, const uint8_t* b) {
    const hn::Rebind<uint16_t, GF> d16;
    const hn::Repartition<uint32_t, decltype(d16)> d16x2;
    uint16_t ha, hb;
    std::memcpy(&ha, a, 2);
    std::memcpy(&hb, b, 2);
    return F32FromF16Bits(GF(),
                          hn::BitCast(d16, hn::Set(d16x2, uint32_t(ha) | uint32_t(hb) << 16)));
}

// The results of a pair kernel's kRows rows for the tokens of kVecs pair vectors: acc[r / 2]
// holds row r in its even lanes and row r + 1 in its odd lanes (one row: the even lanes),
// lane 2t of vector v for token v L / 2 + t. y[t * ldy + r].
template <int kRows, int kVecs>
HWY_INLINE void StorePairRows(const GVF (&acc)[kRows == 1 ? 1 : kRows / 2][kVecs], int64_t n_tokens,
                              float* y, int64_t ldy) {
    constexpr int kAcc = kRows == 1 ? 1 : kRows / 2;
    const GF df;
    const int64_t per_vec = int64_t(hn::Lanes(df) / 2);
    for (int r = 0; r < kAcc; ++r) {
        for (int v = 0; v < kVecs; ++v) {
            HWY_ALIGN float lanes[hn::MaxLanes(GF())];
            hn::Store(acc[r][v], df, lanes);
            const int64_t t0 = v * per_vec;
            const int64_t n = n_tokens - t0 < per_vec ? n_tokens - t0 : per_vec;
            for (int64_t t = 0; t < n; ++t) {
                float* yt = y + (t0 + t) * ldy;
                if constexpr (kRows == 1) {
                    yt[0] = lanes[2 * t];
                } else {
                    yt[2 * r] = lanes[2 * t];
                    yt[2 * r + 1] = lanes[2 * t + 1];
                }
            }
        }
    }
}

// kRows consecutive rows of Q8_0, Q4_0 or Q5_0 (row r at row + r * stride) for the tokens of
// kVecs pair-layout token vectors (UsePairs). Every (row, token) does exactly
// acc = fma(float(isum_k), dx_k * dw_k, acc) over the blocks in order, so the result depends
// neither on kRows nor on kVecs. The rows share the activation loads and run independent FMA
// chains (with one row the loop waited on the latency of acc's FMA every block), the token
// vectors share the weight broadcasts, and two rows share the float steps: the pair halves
// of row a and row b are added into even (a) and odd (b) lanes, against scales dw_a / dw_b in
// the same lanes (JoinRowPair, RowPairScales). Not inlined: in the large dispatching
// function the loop lost its registers (counters spilled to the stack).
template <class Codec, int kRows, int kVecs>
HWY_NOINLINE void GemvPairsRows(const uint8_t* row, size_t stride, const uint8_t* pf,
                                const PackedActs& p, int64_t n_blocks, int64_t n_tokens, float* y,
                                int64_t ldy) {
    static_assert(kRows == 1 || kRows % 2 == 0, "rows go in twos");
    using W = PairWeights<Codec>;
    constexpr int kAcc = kRows == 1 ? 1 : kRows / 2;
    const GF df;
    const GI di;
    const size_t L = hn::Lanes(df);
    GVF acc[kAcc][kVecs];
    for (int r = 0; r < kAcc; ++r)
        for (int v = 0; v < kVecs; ++v) acc[r][v] = hn::Zero(df);
    for (int64_t k = 0; k < n_blocks; ++k) {
        const uint8_t* blk[kRows];
        for (int r = 0; r < kRows; ++r) {
            blk[r] = row + size_t(r) * stride + size_t(k) * Codec::kBytes;
            hwy::Prefetch(pf + size_t(r) * stride + size_t(k) * Codec::kBytes);
        }
        GV8 x[kVecs][4];
        GVI c[kVecs];
        GVF dxv[kVecs];
        for (int v = 0; v < kVecs; ++v) {
            const uint8_t* base = p.base + size_t(v) * p.stride;
            const int8_t* xg = reinterpret_cast<const int8_t*>(base) + size_t(k) * 4 * L * 4;
            for (size_t j = 0; j < 4; ++j) x[v][j] = hn::LoadU(G8(), xg + j * L * 4);
            c[v] = hn::LoadU(di,
                             reinterpret_cast<const int32_t*>(base + p.sum_offset) + size_t(k) * L);
            if constexpr (W::kCorrectionShift != 0)
                c[v] = hn::ShiftRight<W::kCorrectionShift>(c[v]);
            dxv[v] =
                hn::LoadU(df, reinterpret_cast<const float*>(base + p.d_offset) + size_t(k) * L);
        }
        // sums[i][v]: lanes 2t and 2t + 1 hold two halves of token t's integer sum for row
        // r + i (two rows at a time: the float steps take them together).
        constexpr int kStep = kRows == 1 ? 1 : 2;
        for (int r = 0; r < kRows; r += kStep) {
            GVI sums[kStep][kVecs];
            for (int i = 0; i < kStep; ++i) {
                for (int v = 0; v < kVecs; ++v) sums[i][v] = c[v];
                // One chain of 4 dot products per row and token vector: a second chain per
                // row (to hide the dot product's latency) only added instructions (batch 8
                // on one thread 300-320 -> 335-350 GFLOP/s without it).
                for (size_t j = 0; j < 4; ++j) {
                    const GV8 a = W::Group(blk[r + i], j);
                    for (int v = 0; v < kVecs; ++v)
                        sums[i][v] = DotU8I8(di, a, x[v][j], sums[i][v]);
                }
            }
            if constexpr (kRows == 1) {
                const GVF dw = BroadcastF16To(df, blk[0]);
                for (int v = 0; v < kVecs; ++v) {
                    const GVI is = hn::Add(sums[0][v], hn::Shuffle2301(sums[0][v]));
                    acc[0][v] = hn::MulAdd(hn::ConvertTo(df, is), hn::Mul(dxv[v], dw), acc[0][v]);
                }
            } else {
                const GVF dw = RowPairScales(blk[r], blk[r + 1]);
                for (int v = 0; v < kVecs; ++v) {
                    const GVI is = JoinRowPair(sums[0][v], sums[1][v]);
                    acc[r / 2][v] =
                        hn::MulAdd(hn::ConvertTo(df, is), hn::Mul(dxv[v], dw), acc[r / 2][v]);
                }
            }
        }
    }
    StorePairRows<kRows, kVecs>(acc, n_tokens, y, ldy);
}

// kRows rows for all pair vectors of the batch.
template <class Codec, int kRows>
HWY_INLINE void GemvPairsPass(const uint8_t* row, size_t stride, const uint8_t* pf,
                              const PackedActs& p, int64_t n_blocks, int64_t n_tokens, float* y,
                              int64_t ldy) {
    if (n_tokens > int64_t(TokenLanes() / 2))
        return GemvPairsRows<Codec, kRows, 2>(row, stride, pf, p, n_blocks, n_tokens, y, ldy);
    GemvPairsRows<Codec, kRows, 1>(row, stride, pf, p, n_blocks, n_tokens, y, ldy);
}

template <class Codec>
HWY_INLINE void GemvPacked(const ops::Weight& w, const PackedActs& p, int64_t n_tokens, int64_t o0,
                           int64_t o1, float* y) {
    constexpr int kRows = 1;  // measured: interleaving two rows' streams costs more than it saves
    const size_t stride = w.row_stride;
    const int64_t n_blocks = w.n_in / 32;
    const int64_t ahead = int64_t((kPrefetchBytes + stride - 1) / stride);
    for (const uint8_t* q = w.data + size_t(o0) * stride;
         q < w.data + size_t(o0 + (o1 - o0 < ahead ? o1 - o0 : ahead)) * stride; q += 64)
        hwy::Prefetch(q);
    // Where rows [o, o + n) prefetch from: `ahead` rows further, within the task.
    auto pf_row = [&](int64_t o, int64_t n = 1) {
        return w.data + size_t(o + ahead + n <= o1 ? o + ahead : o) * stride;
    };
    if constexpr (kHasVnni && HasPairKernel<Codec>()) {
        if (p.pairs) {
            int64_t o = o0;
            for (; o + kPairRows <= o1; o += kPairRows)
                GemvPairsPass<Codec, kPairRows>(w.data + size_t(o) * stride, stride,
                                                pf_row(o, kPairRows), p, n_blocks, n_tokens, y + o,
                                                w.n_out);
            for (; o < o1; ++o)
                GemvPairsPass<Codec, 1>(w.data + size_t(o) * stride, stride, pf_row(o), p, n_blocks,
                                        n_tokens, y + o, w.n_out);
            return;
        }
    }
    int64_t o = o0;
    for (; o + kRows <= o1; o += kRows)
        GemvPackedRows<Codec, kRows>(w.data + size_t(o) * stride, stride, pf_row(o), p, n_blocks,
                                     n_tokens, y + o, w.n_out);
    for (; o < o1; ++o)
        GemvPackedRows<Codec, 1>(w.data + size_t(o) * stride, stride, pf_row(o), p, n_blocks,
                                 n_tokens, y + o, w.n_out);
}

// Per-thread scratch bytes of GemmLegacy for a weight.
HWY_INLINE size_t LegacyScratchBytes(const ops::Weight& w) {
    if (w.layout == ops::WeightLayout::Interleaved16)  // row blocks, Q4_0's levels
        return ops::round_up_64(size_t(ops::kInterleaveRows) * size_t(w.n_in / 32) *
                                sizeof(RowBlock)) +
               size_t(w.n_in / 32) * 512 + 64;
    return RowPrepBytes(w.n_in / 32) * size_t(kTileRows) + 64;
}

#endif  // HWY_TARGET != HWY_SCALAR
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
