// Matrix-vector kernel for the 32-value block types (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1) times up
// to kMaxGemvTokens converted activation rows, in the canonical order of the matrix-matrix
// kernels: for every (row, token), acc = fma(float(isum_k), dw_k * dx_k, acc) over the blocks
// k in order, where isum_k is the exact integer dot product of block k (types with a minimum
// then add acc = fma(sx_k, m_k, acc)). A row's result is therefore bit-identical whether its
// token is computed alone, in a batch of decodes or in a prefill chunk (gemm-inl.h follows the
// same order), and does not depend on how rows are split over threads.
//
// Decode reads every weight once per token, so the kernel must keep up with memory bandwidth
// with few instructions per 34-byte block. It works on groups of R rows (R = float lanes):
// 1. every row of the group is streamed once, front to back (one sequential stream per
//    thread: interleaving rows defeats the hardware prefetcher), one integer dot product per
//    vector of blocks (two blocks per 512-bit vector) into a vector of partial sums, stored;
// 2. the partial sums of the R rows are reduced together (pairwise ConcatEven/ConcatOdd),
//    which leaves lane r holding row r's exact block sum: the block scales then apply in
//    float lanes, one row per lane, in block order.
#if defined(TROUPE_KERNELS_GEMV32_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TROUPE_KERNELS_GEMV32_INL_H_
#undef TROUPE_KERNELS_GEMV32_INL_H_
#else
#define TROUPE_KERNELS_GEMV32_INL_H_
#endif

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/dot-inl.h"
#include "kernels/gemv-inl.h"
#include "kernels/matmul_act.h"
#include "kernels/matmul_kernels.h"
#include "kernels/simd-inl.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_GCC_ACTUAL
#pragma GCC target("avx512vnni")
#endif
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#if HWY_TARGET != HWY_SCALAR

// Full vectors: int8 values, their int32 partial sums, float results.
using G32D8 = hn::ScalableTag<int8_t>;
using G32DI = hn::Repartition<int32_t, G32D8>;
using G32DF = hn::Repartition<float, G32D8>;
using G32DH = hn::Rebind<uint16_t, G32DF>;  // one f16 per float lane
using G32VI = hn::Vec<G32DI>;

// Geometry: rows per group (float lanes), 32-value blocks per int8 vector (2 with 512-bit
// vectors) and int8 vectors per block (2 with 128-bit vectors).
constexpr size_t kG32Rows = hn::MaxLanes(G32DF());
constexpr size_t kG32BlocksPerVec = hn::MaxLanes(G32D8()) >= 64 ? 2 : 1;
constexpr size_t kG32VecsPerBlock = hn::MaxLanes(G32D8()) < 32 ? 32 / hn::MaxLanes(G32D8()) : 1;
static_assert(hn::MaxLanes(G32D8()) <= 64, "at most two blocks per vector");

HWY_INLINE size_t Gemv32Vecs(int64_t n_blocks) {
    return (size_t(n_blocks) + kG32BlocksPerVec - 1) / kG32BlocksPerVec;
}

// Per-thread scratch of Gemv32Rows for rows of n_blocks blocks and T tokens.
HWY_INLINE size_t Gemv32ScratchBytes(int64_t n_blocks, int T) {
    return Gemv32Vecs(n_blocks) * size_t(T) * kG32Rows * sizeof(G32VI) +
           size_t(n_blocks) * kG32Rows * sizeof(uint16_t);
}

// Q8_0 without VNNI multiplies signed levels (|w| times sign(x, w)); every other case takes
// unsigned levels (L + kOffset) times the signed activations and subtracts kOffset sum(x).
template <class Codec>
constexpr bool kG32SignedDot = !kHasVnni && std::is_same_v<Codec, CodecQ8_0>;
template <class Codec>
constexpr int kG32Offset = kG32SignedDot<Codec> ? 0 : Codec::kOffset;

template <class Codec>
HWY_INLINE V8 G32Levels(const uint8_t* b, size_t i) {
    if constexpr (kG32SignedDot<Codec>) {
        return Codec::Levels(b, i);
    } else {
        return Codec::Unsigned(b, i);
    }
}

template <class Codec, class V>
HWY_INLINE G32VI G32Dot(V w, V x, G32VI acc) {
    if constexpr (kG32SignedDot<Codec>) {
        return DotI8I8(G32DI(), w, x, acc);
    } else {
        return DotU8I8(G32DI(), w, x, acc);
    }
}

// Partial sums of vector j of a row (blocks j B .. j B + B - 1, B = kG32BlocksPerVec) with
// T activation rows x[t]: part[t * part_stride]. Lanes hold sums of 4 products; the lanes of
// one block are contiguous (8 of them, 4 with 128-bit vectors). kHalf: only block j B exists
// (an odd number of blocks, two per vector).
template <class Codec, int T, bool kHalf = false>
HWY_INLINE void G32Partials(const uint8_t* row, size_t j, const int8_t* const* x, G32VI* part,
                            size_t part_stride) {
    const G32D8 d8;
    const G32DI di;
    const uint8_t* b = row + j * kG32BlocksPerVec * Codec::kBytes;
    if constexpr (kG32BlocksPerVec == 2) {
        const hn::Half<G32D8> dh;
        const auto lo = G32Levels<Codec>(b, 0);
        const auto hi = kHalf ? hn::Zero(dh) : G32Levels<Codec>(b + Codec::kBytes, 0);
        const auto w = hn::Combine(d8, hi, lo);
        for (int t = 0; t < T; ++t)
            part[size_t(t) * part_stride] =
                G32Dot<Codec>(w, hn::LoadU(d8, x[t] + 64 * j), hn::Zero(di));
    } else {
        constexpr size_t N8 = hn::MaxLanes(G32D8());
        hn::Vec<G32D8> w[kG32VecsPerBlock];
        for (size_t v = 0; v < kG32VecsPerBlock; ++v) w[v] = G32Levels<Codec>(b, v * N8);
        for (int t = 0; t < T; ++t) {
            G32VI acc = hn::Zero(di);
            for (size_t v = 0; v < kG32VecsPerBlock; ++v)
                acc = G32Dot<Codec>(w[v], hn::LoadU(d8, x[t] + 32 * j + v * N8), acc);
            part[size_t(t) * part_stride] = acc;
        }
    }
}

// One reduction round: a and b hold partial sums of rows in each 128-bit block; the result
// holds those of both with half as many partial sums per row (adjacent 32-bit lanes, then
// adjacent 64-bit halves, of each 128-bit block are added).
HWY_INLINE G32VI G32Round32(G32VI a, G32VI b) {
    const G32DI di;
    return hn::Add(hn::InterleaveLower(di, a, b), hn::InterleaveUpper(di, a, b));
}
HWY_INLINE G32VI G32Round64(G32VI a, G32VI b) {
    const G32DI di;
    const hn::Repartition<int64_t, G32DI> d64;
    const auto a64 = hn::BitCast(d64, a), b64 = hn::BitCast(d64, b);
    return hn::Add(hn::BitCast(di, hn::InterleaveLower(d64, a64, b64)),
                   hn::BitCast(di, hn::InterleaveUpper(d64, a64, b64)));
}

// part[r] (r < R): the partial-sum vectors of one block vector of R rows. Returns in out[b]
// (b < kG32BlocksPerVec) block j B + b's exact sums, lane r = row r. Each 128-bit block of a
// partial-sum vector holds 4 partial sums of one block; two rounds leave, per 128-bit block,
// one sum for each of 4 rows, and the 128-bit blocks of one 32-value block are then added.
HWY_INLINE void G32ReduceRows(const G32VI* HWY_RESTRICT part, G32VI* out) {
    const G32DI di;
    constexpr size_t R = kG32Rows;
    G32VI v[R / 4];
    for (size_t i = 0; i < R / 4; ++i)
        v[i] = G32Round64(G32Round32(part[4 * i], part[4 * i + 1]),
                          G32Round32(part[4 * i + 2], part[4 * i + 3]));
    // v[i]: rows 4i .. 4i + 3 in each 128-bit block.
    if constexpr (R == 4) {
        out[0] = v[0];
    } else if constexpr (R == 8) {  // 128-bit blocks [rows 0-3, rows 0-3], [rows 4-7, ...]
        out[0] =
            hn::Add(hn::ConcatLowerLower(di, v[1], v[0]), hn::ConcatUpperUpper(di, v[1], v[0]));
    } else {  // R == 16, two blocks per vector: 128-bit blocks [e, e, o, o] of 4 rows
        G32VI z[2];
        for (size_t h = 0; h < 2; ++h) {
            const G32VI s0 = hn::Add(v[2 * h], hn::SwapAdjacentBlocks(v[2 * h]));
            const G32VI s1 = hn::Add(v[2 * h + 1], hn::SwapAdjacentBlocks(v[2 * h + 1]));
            z[h] = hn::OddEvenBlocks(s1, s0);  // [e rows 0-3, e 4-7, o 0-3, o 4-7] (+ 8h)
        }
        out[0] = hn::ConcatLowerLower(di, z[1], z[0]);
        out[1] = hn::ConcatUpperUpper(di, z[1], z[0]);
    }
}

// The f16 values at byte `at` of the rows of a group (byte offsets row_offsets from `rows`),
// as floats, lane r = row r.
HWY_INLINE hn::Vec<G32DF> G32Scales(const uint8_t* rows, hn::Vec<G32DI> row_offsets, size_t at) {
    const G32DI di;
    const G32DF df;
    const hn::RebindToUnsigned<G32DI> du;
    const auto bits =
        hn::GatherOffset(di, reinterpret_cast<const int32_t*>(rows + at), row_offsets);
    return F32FromF16Bits(df, hn::TruncateTo(G32DH(), hn::BitCast(du, bits)));
}

// Rows [o, o + nr) (nr <= R) of one group: y[t * ldy + r] for row o + r. Prefetches from pf
// on, about one cache line per 64 bytes read, never past pf_end.
template <class Codec, int T>
HWY_INLINE void Gemv32Group(const uint8_t* w, size_t stride, int64_t o, size_t nr,
                            const GemvActs& a, const ops::ActLayout& l, float* y, int64_t ldy,
                            const uint8_t*& pf, const uint8_t* pf_end, uint8_t* scratch) {
    constexpr size_t R = kG32Rows;
    const int64_t n_blocks = l.n_blocks;
    const size_t n_vecs = Gemv32Vecs(n_blocks);
    auto* part = reinterpret_cast<G32VI*>(scratch);  // [n_vecs][T][R]
    const uint8_t* rows = w + size_t(o) * stride;
    const uint8_t* pf_last = pf_end - 64;
    const int8_t* x[T];
    for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const int8_t*>(a.row[t]);
    const size_t n_full = size_t(n_blocks) / kG32BlocksPerVec;
    uint16_t* dw = reinterpret_cast<uint16_t*>(part + n_vecs * size_t(T) * R);  // [n_blocks][R]
    for (size_t r = 0; r < nr; ++r) {
        const uint8_t* row = rows + r * stride;
        G32VI* p = part + r;
        uint16_t* dwr = dw + r;
        // One cache line per vector of blocks, then catch up with the row's length.
        const bool prefetch_all = pf + 64 * n_full <= pf_last;
        for (size_t j = 0; j < n_full; ++j, p += size_t(T) * R) {
            if (prefetch_all) hwy::Prefetch(pf + 64 * j);
            G32Partials<Codec, T>(row, j, x, p, R);
            for (size_t b = 0; b < kG32BlocksPerVec; ++b)
                std::memcpy(dwr + (j * kG32BlocksPerVec + b) * R,
                            row + (j * kG32BlocksPerVec + b) * Codec::kBytes, 2);
        }
        if (prefetch_all) pf += 64 * n_full;
        if (n_full < n_vecs) {
            G32Partials<Codec, T, true>(row, n_full, x, p, R);
            std::memcpy(dwr + size_t(n_blocks - 1) * R, row + size_t(n_blocks - 1) * Codec::kBytes,
                        2);
        }
        for (; pf < row + stride + kPrefetchBytes; pf += 64)
            hwy::Prefetch(pf < pf_last ? pf : pf_last);
    }
    const G32DI di;
    const G32DF df;
    for (size_t r = nr; r < R; ++r)  // a partial group: zero rows (lanes not stored)
        for (size_t j = 0; j < n_vecs * size_t(T); ++j) part[j * R + r] = hn::Zero(di);
    const auto row_offsets = hn::Mul(hn::Min(hn::Iota(di, 0), hn::Set(di, int32_t(nr) - 1)),
                                     hn::Set(di, int32_t(stride)));
    hn::Vec<G32DF> acc[T];
    for (int t = 0; t < T; ++t) acc[t] = hn::Zero(df);
    for (size_t j = 0; j < n_vecs; ++j) {
        G32VI isum[T][kG32BlocksPerVec];
        for (int t = 0; t < T; ++t) G32ReduceRows(part + (j * size_t(T) + size_t(t)) * R, isum[t]);
        for (size_t b = 0; b < kG32BlocksPerVec; ++b) {
            const int64_t k = int64_t(j * kG32BlocksPerVec + b);
            if (k >= n_blocks) break;
            const size_t at = size_t(k) * Codec::kBytes;
            const auto dwv = F32FromF16Bits(df, hn::Load(G32DH(), dw + size_t(k) * R));
            for (int t = 0; t < T; ++t) {
                G32VI is = isum[t][b];
                if constexpr (kG32Offset<Codec> != 0) {
                    const auto* sums = reinterpret_cast<const int32_t*>(a.row[t] + l.sum_offset);
                    is = hn::Sub(is, hn::Set(di, kG32Offset<Codec> * sums[k]));
                }
                const float dx = reinterpret_cast<const float*>(a.row[t] + l.scale_offset)[k];
                acc[t] = hn::MulAdd(hn::ConvertTo(df, is), hn::Mul(dwv, hn::Set(df, dx)), acc[t]);
                if constexpr (Codec::kHasMin) {
                    const float sx = reinterpret_cast<const float*>(a.row[t] + l.sum_offset)[k];
                    const auto mw = G32Scales(rows, row_offsets, at + 2);
                    acc[t] = hn::MulAdd(hn::Set(df, sx), mw, acc[t]);
                }
            }
        }
    }
    for (int t = 0; t < T; ++t) {
        if (nr == R) {
            hn::StoreU(acc[t], df, y + t * ldy);
        } else {
            StoreTail(df, acc[t], y + t * ldy, nr);
        }
    }
}

// Rows [o0, o1) of w times T tokens: y[t * ldy + (o - o0)]. Prefetching runs kPrefetchBytes
// ahead of the rows read, from stream.next on (restarted at row o0 when stream.next is not
// within [row o0, stream.end)) and not past stream.end (at least row o1: a caller that goes on
// with the following rows lets the stream run on). scratch: Gemv32ScratchBytes(l.n_blocks,
// T), 64-byte aligned.
template <class Codec, int T>
HWY_NOINLINE void Gemv32Rows(const uint8_t* w, size_t stride, int64_t o0, int64_t o1,
                             ops::kern::WeightStream& stream, const GemvActs& a,
                             const ops::ActLayout& l, float* y, int64_t ldy, uint8_t* scratch) {
    const uint8_t* begin = w + size_t(o0) * stride;
    const uint8_t* end = w + size_t(o1) * stride;
    if (stream.end < end) stream.end = end;
    if (stream.next < begin || stream.next > stream.end) stream.next = begin;
    for (int64_t o = o0; o < o1; o += int64_t(kG32Rows)) {
        const size_t nr = size_t(o1 - o < int64_t(kG32Rows) ? o1 - o : int64_t(kG32Rows));
        Gemv32Group<Codec, T>(w, stride, o, nr, a, l, y + (o - o0), ldy, stream.next, stream.end,
                              scratch);
    }
    if (stream.next > stream.end) stream.next = stream.end;
}

template <class Codec>
HWY_INLINE void Gemv32(const uint8_t* w, size_t stride, int64_t o0, int64_t o1,
                       ops::kern::WeightStream& stream, const GemvActs& a, int n_tokens,
                       const ops::ActLayout& l, float* y, int64_t ldy, uint8_t* scratch) {
    switch (n_tokens) {
        case 1:
            return Gemv32Rows<Codec, 1>(w, stride, o0, o1, stream, a, l, y, ldy, scratch);
        case 2:
            return Gemv32Rows<Codec, 2>(w, stride, o0, o1, stream, a, l, y, ldy, scratch);
        default:
            return Gemv32Rows<Codec, 3>(w, stride, o0, o1, stream, a, l, y, ldy, scratch);
    }
}

#endif  // HWY_TARGET != HWY_SCALAR
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
