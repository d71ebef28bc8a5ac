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
// 1. the rows of a group are streamed four at a time (four sequential streams side by side,
//    prefetched a fixed distance ahead), one integer dot product per vector of blocks (two
//    blocks per 512-bit vector) and row; the four partial-sum vectors are reduced together
//    in registers (InterleaveLower/Upper) and stored, with the block scales;
// 2. the stored sums of the R rows are reduced further, which leaves lane r holding row r's
//    exact block sum: the block scales then apply in float lanes, one row per lane, in block
//    order.
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
    return Gemv32Vecs(n_blocks) * size_t(T) * (kG32Rows / 4) * sizeof(G32VI) +
           2 * size_t(n_blocks) * kG32Rows * sizeof(uint16_t);
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

// The levels of vector j of a row (blocks j B .. j B + B - 1, B = kG32BlocksPerVec): one
// int8 vector per kG32VecsPerBlock. kHalf: only block j B exists (an odd number of blocks,
// two per vector).
template <class Codec, bool kHalf>
HWY_INLINE void G32RowLevels(const uint8_t* row, size_t j, hn::Vec<G32D8>* w) {
    const G32D8 d8;
    const uint8_t* b = row + j * kG32BlocksPerVec * Codec::kBytes;
    if constexpr (kG32BlocksPerVec == 2) {
        const hn::Half<G32D8> dh;
        const auto lo = G32Levels<Codec>(b, 0);
        const auto hi = kHalf ? hn::Zero(dh) : G32Levels<Codec>(b + Codec::kBytes, 0);
        w[0] = hn::Combine(d8, hi, lo);
    } else {
        for (size_t v = 0; v < kG32VecsPerBlock; ++v)
            w[v] = G32Levels<Codec>(b, v * hn::MaxLanes(G32D8()));
    }
}

// Copies the f16 scales (and minimums, for the types with one) of the blocks of vector j of
// four rows (null: missing) into dw / mw: [n_blocks][R], columns 4q .. 4q + 3. With AVX-512,
// one masked load per row and three permutes gather them (the scalar form takes two
// instructions per value).
template <class Codec, bool kHalf>
HWY_INLINE void G32QuadScales(const uint8_t* const* rows, size_t j, size_t q, uint16_t* dw,
                              uint16_t* mw) {
    constexpr size_t R = kG32Rows;
    const size_t k0 = j * kG32BlocksPerVec;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    if constexpr (kG32BlocksPerVec == 2 && !kHalf && Codec::kBytes % 2 == 0) {
        if (rows[3]) {
            constexpr int S = int(Codec::kBytes / 2);  // word of the second block's scale
            constexpr __mmask32 kMask = Codec::kHasMin ? (3u | (3u << S)) : (1u | (1u << S));
            __m512i in[4];
            for (int i = 0; i < 4; ++i)
                in[i] = _mm512_maskz_loadu_epi16(kMask, rows[i] + k0 * Codec::kBytes);
            // [d_e(a), d_e(b), d_o(a), d_o(b), m_e(a), m_e(b), m_o(a), m_o(b)] of rows a, b.
            const __m512i pair =
                _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                 0, 0, 32 + S + 1, S + 1, 33, 1, 32 + S, S, 32, 0);
            const __m512i ab = _mm512_permutex2var_epi16(in[0], pair, in[1]);
            const __m512i cd = _mm512_permutex2var_epi16(in[2], pair, in[3]);
            // [d_e(0..3), d_o(0..3), m_e(0..3), m_o(0..3)]
            const __m512i quad =
                _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 39, 38, 7, 6, 37,
                                 36, 5, 4, 35, 34, 3, 2, 33, 32, 1, 0);
            const __m512i v = _mm512_permutex2var_epi16(ab, quad, cd);
            const __m128i lo = _mm512_castsi512_si128(v);
            _mm_storel_epi64(reinterpret_cast<__m128i*>(dw + k0 * R + 4 * q), lo);
            _mm_storeh_pd(reinterpret_cast<double*>(dw + (k0 + 1) * R + 4 * q),
                          _mm_castsi128_pd(lo));
            if constexpr (Codec::kHasMin) {
                const __m128i hi = _mm512_extracti32x4_epi32(v, 1);
                _mm_storel_epi64(reinterpret_cast<__m128i*>(mw + k0 * R + 4 * q), hi);
                _mm_storeh_pd(reinterpret_cast<double*>(mw + (k0 + 1) * R + 4 * q),
                              _mm_castsi128_pd(hi));
            }
            return;
        }
    }
#endif
    for (size_t i = 0; i < 4 && rows[i]; ++i)
        for (size_t b = 0; b < (kHalf ? 1 : kG32BlocksPerVec); ++b) {
            const uint8_t* blk = rows[i] + (k0 + b) * Codec::kBytes;
            std::memcpy(dw + (k0 + b) * R + 4 * q + i, blk, 2);
            if constexpr (Codec::kHasMin) std::memcpy(mw + (k0 + b) * R + 4 * q + i, blk + 2, 2);
        }
}

// Partial sums of vector j of four rows (null: a missing row, all of them present when
// kFull) with T activation rows x[t], reduced together two rounds: out[t * out_stride] holds
// in each 128-bit block one sum per row (rows 0-3 in order) of that 128-bit block's part of a
// 32-value block.
template <class Codec, int T, bool kHalf, bool kFull>
HWY_INLINE void G32Quad(const uint8_t* const* rows, size_t j, const int8_t* const* x, G32VI* out,
                        size_t out_stride) {
    const G32D8 d8;
    const G32DI di;
    hn::Vec<G32D8> w[4][kG32VecsPerBlock];
    for (int i = 0; i < 4; ++i) {
        if (kFull || rows[i]) {
            G32RowLevels<Codec, kHalf>(rows[i], j, w[i]);
        } else {
            for (size_t v = 0; v < kG32VecsPerBlock; ++v) w[i][v] = hn::Zero(d8);
        }
    }
    constexpr size_t N8 = hn::MaxLanes(G32D8());
    const size_t x_at = j * kG32BlocksPerVec * 32;
    for (int t = 0; t < T; ++t) {
        G32VI p[4];
        for (int i = 0; i < 4; ++i) p[i] = hn::Zero(di);
        for (size_t v = 0; v < kG32VecsPerBlock; ++v) {
            const auto xv = hn::LoadU(d8, x[t] + x_at + v * N8);
            for (int i = 0; i < 4; ++i) p[i] = G32Dot<Codec>(w[i][v], xv, p[i]);
        }
        out[size_t(t) * out_stride] = G32Round64(G32Round32(p[0], p[1]), G32Round32(p[2], p[3]));
    }
}

// quads[i] (i < R / 4): G32Quad's sums of rows 4i .. 4i + 3 for one block vector. Returns in
// out[b] (b < kG32BlocksPerVec) block j B + b's exact sums, lane r = row r: the 128-bit
// blocks of one 32-value block are added.
HWY_INLINE void G32FinishRows(const G32VI* HWY_RESTRICT quads, G32VI* out) {
    const G32DI di;
    constexpr size_t R = kG32Rows;
    if constexpr (R == 4) {
        out[0] = quads[0];
    } else if constexpr (R == 8) {  // 128-bit blocks [rows 0-3, rows 0-3], [rows 4-7, ...]
        out[0] = hn::Add(hn::ConcatLowerLower(di, quads[1], quads[0]),
                         hn::ConcatUpperUpper(di, quads[1], quads[0]));
    } else {  // R == 16, two blocks per vector: 128-bit blocks [e, e, o, o] of 4 rows
        G32VI z[2];
        for (size_t h = 0; h < 2; ++h) {
            const G32VI v0 = quads[2 * h], v1 = quads[2 * h + 1];
            const G32VI s0 = hn::Add(v0, hn::SwapAdjacentBlocks(v0));
            const G32VI s1 = hn::Add(v1, hn::SwapAdjacentBlocks(v1));
            z[h] = hn::OddEvenBlocks(s1, s0);  // [e rows 0-3, e 4-7, o 0-3, o 4-7] (+ 8h)
        }
        out[0] = hn::ConcatLowerLower(di, z[1], z[0]);
        out[1] = hn::ConcatUpperUpper(di, z[1], z[0]);
    }
}

// Rows [o, o + nr) (nr <= R) of one group: y[t * ldy + r] for row o + r. The rows are read in
// quads (four streams side by side: the reduction of their partial sums starts in registers);
// prefetching runs from pf on, a cache line per 64 bytes read, never past pf_end.
template <class Codec, int T>
HWY_INLINE void Gemv32Group(const uint8_t* w, size_t stride, int64_t o, size_t nr,
                            const GemvActs& a, const ops::ActLayout& l, float* y, int64_t ldy,
                            const uint8_t*& pf, const uint8_t* pf_end, uint8_t* scratch) {
    constexpr size_t R = kG32Rows, Q = R / 4;
    const int64_t n_blocks = l.n_blocks;
    const size_t n_vecs = Gemv32Vecs(n_blocks);
    const size_t n_full = size_t(n_blocks) / kG32BlocksPerVec;
    auto* quads = reinterpret_cast<G32VI*>(scratch);                         // [n_vecs][T][Q]
    auto* dw = reinterpret_cast<uint16_t*>(quads + n_vecs * size_t(T) * Q);  // [n_blocks][R]
    uint16_t* mw = dw + size_t(n_blocks) * R;                                // [n_blocks][R]
    const uint8_t* first = w + size_t(o) * stride;
    const uint8_t* pf_last = pf_end - 64;
    const int8_t* x[T];
    for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const int8_t*>(a.row[t]);
    for (size_t q = 0; q < Q; ++q) {
        const uint8_t* rows[4];
        for (size_t i = 0; i < 4; ++i)
            rows[i] = 4 * q + i < nr ? first + (4 * q + i) * stride : nullptr;
        if (!rows[0]) {  // a partial group: rows past its end are zero (lanes not stored)
            for (size_t j = 0; j < n_vecs * size_t(T); ++j) quads[j * Q + q] = hn::Zero(G32DI());
            continue;
        }
        // About four cache lines per vector of blocks of four rows.
        const bool prefetch_all = pf + 4 * 64 * n_full <= pf_last;
        G32VI* out = quads + q;
        if (rows[3]) {
            for (size_t j = 0; j < n_full; ++j, out += size_t(T) * Q) {
                if (prefetch_all)
                    for (size_t i = 0; i < 4; ++i) hwy::Prefetch(pf + 64 * (4 * j + i));
                G32Quad<Codec, T, false, true>(rows, j, x, out, Q);
                G32QuadScales<Codec, false>(rows, j, q, dw, mw);
            }
        } else {
            for (size_t j = 0; j < n_full; ++j, out += size_t(T) * Q) {
                G32Quad<Codec, T, false, false>(rows, j, x, out, Q);
                G32QuadScales<Codec, false>(rows, j, q, dw, mw);
            }
        }
        if (prefetch_all) pf += 4 * 64 * n_full;
        if (n_full < n_vecs) {
            G32Quad<Codec, T, true, false>(rows, n_full, x, out, Q);
            G32QuadScales<Codec, true>(rows, n_full, q, dw, mw);
        }
        const uint8_t* done = (rows[3] ? rows[3] : first + (nr - 1) * stride) + stride;
        for (; pf < done + kPrefetchBytes; pf += 64) hwy::Prefetch(pf < pf_last ? pf : pf_last);
    }
    const G32DI di;
    const G32DF df;
    hn::Vec<G32DF> acc[T];
    for (int t = 0; t < T; ++t) acc[t] = hn::Zero(df);
    for (size_t j = 0; j < n_vecs; ++j) {
        G32VI isum[T][kG32BlocksPerVec];
        for (int t = 0; t < T; ++t) G32FinishRows(quads + (j * size_t(T) + size_t(t)) * Q, isum[t]);
        for (size_t b = 0; b < kG32BlocksPerVec; ++b) {
            const int64_t k = int64_t(j * kG32BlocksPerVec + b);
            if (k >= n_blocks) break;
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
                    const auto mwv = F32FromF16Bits(df, hn::Load(G32DH(), mw + size_t(k) * R));
                    acc[t] = hn::MulAdd(hn::Set(df, sx), mwv, acc[t]);
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
