// Q8_0 and Q4_0 weights in the Interleaved16 layout (kernels/weight_layout.h) times a few
// converted activation rows (Q8_0, matmul_act.h): decode and batched decode, rows in lanes
// (on targets with 16 vector registers, every batch size, slice by slice: GemvI16SlicePass).
//
// A vector holds the same 4 inputs of 16 / NV rows (NV = vectors per 16 rows: 1 on AVX-512,
// 2 on AVX2, 4 on SSE4 / NEON). For every block and 4-input group j, one load takes the
// weights, and each token's 4 activation bytes broadcast to all lanes take one 8-bit dot
// product: the lanes end holding the exact integer sums of the 16 rows, so the scales apply
// in float lanes with no horizontal sum, and the activations need no packing. Tokens share
// every weight load: up to kI16Tile tokens per pass (their accumulators in registers), the
// rest in further passes over the group, whose bytes (16 rows) are then in L1.
//
// Arithmetic, per (row, token), the canonical order of the 32-value block types (gemv32-inl.h,
// gemm-inl.h): acc = fma(float(isum_k), dw_k * dx_k, acc) over the blocks k in order, isum_k
// the exact integer dot product of block k; so a token's outputs are bit-identical to those
// of the file layout's kernels, alone or in any batch.
//
// Integer sums (the activations stay signed): Q8_0 with VNNI makes the weights unsigned
// (w + 128, an XOR per weight vector, shared by the tokens), so each token's block starts at
// -128 sum(x) (stored with the activation row), elsewhere |w| times sign(x, w) (DotI8I8);
// Q4_0's levels q = w + 8 are unsigned as stored, and its blocks start at -8 sum(x).
#if defined(TROUPE_KERNELS_GEMV_INTERLEAVED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TROUPE_KERNELS_GEMV_INTERLEAVED_INL_H_
#undef TROUPE_KERNELS_GEMV_INTERLEAVED_INL_H_
#else
#define TROUPE_KERNELS_GEMV_INTERLEAVED_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/amx.h"
#include "kernels/dot-inl.h"
#include "kernels/line_prefetch.h"
#include "kernels/matmul_act.h"
#include "kernels/matmul_kernels.h"
#include "kernels/simd-inl.h"
#include "kernels/weight_layout.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_GCC_ACTUAL
#pragma GCC target("avx512vnni")
#endif
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#if HWY_TARGET != HWY_SCALAR

using I16DF = hn::ScalableTag<float>;
using I16DI = hn::RebindToSigned<I16DF>;
using I16D8 = hn::Repartition<int8_t, I16DF>;
using I16DH = hn::Rebind<uint16_t, I16DF>;  // one f16 scale per float lane

// Vectors per 16 rows (a 64-byte line of one 4-input group).
constexpr size_t kI16Vecs = size_t(ops::kInterleaveRows) / hn::MaxLanes(I16DF());
static_assert(kI16Vecs >= 1 && kI16Vecs * hn::MaxLanes(I16DF()) == size_t(ops::kInterleaveRows),
              "16 rows are a whole number of vectors");

// Tokens per pass: their accumulators (kI16Vecs each) and dot-product sums stay in registers
// (32 vector registers on AVX-512 and NEON, 16 on AVX2 and SSE4).
constexpr int kI16Regs = HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 ? 16 : 32;
constexpr int kI16Tile =
    (kI16Regs - 4) / int(kI16Vecs + 1) < 8 ? (kI16Regs - 4) / int(kI16Vecs + 1) : 8;
static_assert(kI16Tile >= 1);

// The 4 bytes at p in every 32-bit lane.
HWY_INLINE hn::Vec<I16D8> I16Bcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return hn::BitCast(I16D8(), hn::Set(I16DI(), v));
}

// The dot products of one 4-byte group of the weights (vector w: 16 / kI16Vecs rows) with
// token t's 4 activation bytes at xq, into is: Q8_0 signed levels (w + 128 with VNNI), Q4_0
// unsigned levels q = w + 8 (Dot of unsigned x signed on every target).
template <DType kType>
HWY_INLINE hn::Vec<I16DI> I16Dot(hn::Vec<I16D8> w, const uint8_t* xq, hn::Vec<I16DI> is) {
    const I16DI di;
    const auto xv = I16Bcast4(reinterpret_cast<const int8_t*>(xq));
    if constexpr (kType == DType::Q4_0 || kHasVnni) {
        return DotU8I8(di, w, xv, is);
    } else {
        return DotI8I8(di, w, xv, is);
    }
}

// One step of a chain: acc += the dot products of w with the 4 values at xq. A function,
// not a lambda: GCC left the sums of a lambda capturing them on the stack (8 tokens: 12%
// slower).
template <DType kType, bool kKeepChains>
HWY_INLINE void I16ChainAdd(hn::Vec<I16D8> w, const uint8_t* xq, hn::Vec<I16DI>& acc) {
    acc = I16Dot<kType>(w, xq, acc);
    if constexpr (kKeepChains) KeepInRegister(acc);
}

// The exact integer sums of one block of one vector of rows (16 / kI16Vecs rows: q, its
// values, 64 bytes per 4-input group) for T tokens (token t's values at x[t] + at_q): is[t]
// starts where the token's block starts (x[t] + at_c holds -128 times its sum: Q4_0 and
// VNNI's Q8_0 start from it, the signed form from 0) and takes its dot products in the
// order of the groups. kKeepChains: each chain passes a register barrier after every
// addition (the slice pass, below).
template <DType kType, int T, bool kKeepChains>
HWY_INLINE void I16BlockSums(const uint8_t* HWY_RESTRICT q, const uint8_t* const* x, size_t at_q,
                             size_t at_c, hn::Vec<I16DI>* is) {
    const I16DI di;
    const I16D8 d8;
    const hn::Repartition<uint16_t, I16D8> d16;
    for (int t = 0; t < T; ++t) {
        int32_t corr;
        std::memcpy(&corr, x[t] + at_c, 4);
        if constexpr (kType == DType::Q4_0) {
            is[t] = hn::Set(di, corr >> 4);
        } else if constexpr (kHasVnni) {
            is[t] = hn::Set(di, corr);
        } else {
            is[t] = hn::Zero(di);
        }
    }
    if constexpr (kType == DType::Q4_0) {
        for (size_t p = 0; p < 4; ++p) {
            const auto v = hn::LoadU(d8, reinterpret_cast<const int8_t*>(q + 64 * p));
            const auto lo = hn::And(v, hn::Set(d8, int8_t(0x0F)));
            const auto hi = hn::And(hn::BitCast(d8, hn::ShiftRight<4>(hn::BitCast(d16, v))),
                                    hn::Set(d8, int8_t(0x0F)));
            for (int t = 0; t < T; ++t) {
                I16ChainAdd<kType, kKeepChains>(lo, x[t] + at_q + 4 * p, is[t]);
                I16ChainAdd<kType, kKeepChains>(hi, x[t] + at_q + 16 + 4 * p, is[t]);
            }
        }
    } else {
        for (size_t j = 0; j < 8; ++j) {
            auto w = hn::LoadU(d8, reinterpret_cast<const int8_t*>(q + 64 * j));
            if constexpr (kHasVnni) w = hn::Xor(w, hn::Set(d8, int8_t(-128)));
            for (int t = 0; t < T; ++t)
                I16ChainAdd<kType, kKeepChains>(w, x[t] + at_q + 4 * j, is[t]);
        }
    }
}

// One pass over a row group of a Q8_0 or Q4_0 weight: T tokens (rows a[0 .. T)), y[t * ldy +
// r] for its 16 rows. Prefetches the lines from pf on up to kStreamPrefetchBytes past each
// block read, never at or past pf_end (the stream then stops), into L2 (prefetch_stream).
//   Q8_0: 8 groups of 4 values per block; with VNNI the token's block starts at -128 sum(x).
//   Q4_0: 4 vectors of nibbles per block, vector p holding group p (values 4p ..) in its low
//         nibbles and group p + 4 (values 16 + 4p ..) in its high ones; the block starts at
//         -8 sum(x) ((-128 sum(x)) >> 4, exact) on every target.
template <DType kType, int T>
HWY_NOINLINE void GemvI16Pass(const uint8_t* HWY_RESTRICT group, int64_t n_blocks,
                              const uint8_t* const* a, const ops::ActLayout& l, float* y,
                              int64_t ldy, const uint8_t*& pf_io, const uint8_t* pf_end) {
    const I16DF df;
    constexpr size_t L = hn::MaxLanes(I16DF());
    constexpr size_t kValues = ops::interleaved_value_bytes(kType);
    // One base pointer per token and byte offsets shared by all of them (block k's values
    // at 32 k, its scale at scale_offset + 4 k, -128 times its sum at corr_offset + 4 k): few
    // registers for addresses, so the tokens' accumulators keep theirs.
    const uint8_t* x[T];
    for (int t = 0; t < T; ++t) x[t] = a[t];
    const uint8_t* pf = pf_io;
    hn::Vec<I16DF> acc[kI16Vecs][T];
    for (size_t h = 0; h < kI16Vecs; ++h)
        for (int t = 0; t < T; ++t) acc[h][t] = hn::Zero(df);
    for (int64_t k = 0; k < n_blocks; ++k) {
        const uint8_t* b = group + ops::interleaved_scales_at(k);  // 16 f16 scales
        const uint8_t* qk = group + ops::interleaved_values_at(kType, n_blocks, k);
        const uint8_t* want = qk + kValues + kStreamPrefetchBytes;
        for (; pf < want && pf < pf_end; pf += 64) prefetch_stream(pf);
        const size_t at_q = size_t(k) * 32;
        const size_t at_d = l.scale_offset + size_t(k) * 4, at_c = l.corr_offset + size_t(k) * 4;
        for (size_t h = 0; h < kI16Vecs; ++h) {
            const auto dw = F32FromF16Bits(
                df, hn::LoadU(I16DH(), reinterpret_cast<const uint16_t*>(b) + h * L));
            hn::Vec<I16DI> is[T];
            I16BlockSums<kType, T, false>(qk + h * L * 4, x, at_q, at_c, is);
            for (int t = 0; t < T; ++t) {
                float dx;
                std::memcpy(&dx, x[t] + at_d, 4);
                acc[h][t] =
                    hn::MulAdd(hn::ConvertTo(df, is[t]), hn::Mul(dw, hn::Set(df, dx)), acc[h][t]);
            }
        }
    }
    for (size_t h = 0; h < kI16Vecs; ++h)
        for (int t = 0; t < T; ++t) hn::StoreU(acc[h][t], df, y + t * ldy + h * L);
    pf_io = pf;
}

// Targets with 16 vector registers whose 16 rows take several vectors (AVX2: 2, SSE4: 4)
// cannot keep a whole group's accumulators for many tokens in registers (GemvI16Pass holds 4
// tokens there, and GCC spilled its sums). They take the group one vector of rows (a slice)
// at a time instead, for up to kI16SliceTile tokens a pass: per 4-input group j, one weight
// load and |w| for all the tokens, then each token's sign(x, w), multiply-adds and the
// int32 chain in registers; the float accumulators live in y (one load, FMA and store per
// block and token, the same operations in the same order as GemvI16Pass's). The other
// slices of the group find its lines in L1.
constexpr bool kI16BySlice = kI16Regs == 16 && kI16Vecs > 1;
constexpr int kI16SliceTile = 8;
static_assert(!(kI16BySlice && kHasVnni), "the slice pass takes Q8_0 weights signed");

// One pass over slice h (rows h L .. h L + L - 1) of a row group of a Q8_0 or Q4_0 weight:
// T tokens, y[t * ldy + h L + i]. Prefetches as GemvI16Pass does (callers give the first
// slice of a group the stream, the others an exhausted one).
template <DType kType, int T>
HWY_NOINLINE void GemvI16SlicePass(const uint8_t* HWY_RESTRICT group, int64_t n_blocks, size_t h,
                                   const uint8_t* const* a, const ops::ActLayout& l, float* y,
                                   int64_t ldy, const uint8_t*& pf_io, const uint8_t* pf_end) {
    const I16DF df;
    constexpr size_t L = hn::MaxLanes(I16DF());
    constexpr size_t kValues = ops::interleaved_value_bytes(kType);
    const uint8_t* x[T];
    for (int t = 0; t < T; ++t) x[t] = a[t];
    const uint8_t* pf = pf_io;
    for (int64_t k = 0; k < n_blocks; ++k) {
        const uint8_t* b = group + ops::interleaved_scales_at(k);
        const uint8_t* qk = group + ops::interleaved_values_at(kType, n_blocks, k);
        const uint8_t* want = qk + kValues + kStreamPrefetchBytes;
        for (; pf < want && pf < pf_end; pf += 64) prefetch_stream(pf);
        const size_t at_q = size_t(k) * 32;
        const size_t at_d = l.scale_offset + size_t(k) * 4, at_c = l.corr_offset + size_t(k) * 4;
        hn::Vec<I16DI> is[T];
        I16BlockSums<kType, T, true>(qk + h * L * 4, x, at_q, at_c, is);
        const auto dw =
            F32FromF16Bits(df, hn::LoadU(I16DH(), reinterpret_cast<const uint16_t*>(b) + h * L));
        for (int t = 0; t < T; ++t) {
            float dx;
            std::memcpy(&dx, x[t] + at_d, 4);
            float* yt = y + t * ldy + h * L;
            const auto acc = k == 0 ? hn::Zero(df) : hn::LoadU(df, yt);
            hn::StoreU(hn::MulAdd(hn::ConvertTo(df, is[t]), hn::Mul(dw, hn::Set(df, dx)), acc), df,
                       yt);
        }
    }
    pf_io = pf;
}

// f(std::integral_constant<int, T>()) for a pass of T tokens, 1 <= T <= 8.
template <class F>
HWY_INLINE void WithTokenCount(int T, const F& f) {
    switch (T) {
#define TROUPE_I16_CASE(n) \
    case n:                \
        return f(std::integral_constant<int, n>());
        TROUPE_I16_CASE(1)
        TROUPE_I16_CASE(2)
        TROUPE_I16_CASE(3)
        TROUPE_I16_CASE(4)
        TROUPE_I16_CASE(5)
        TROUPE_I16_CASE(6)
        TROUPE_I16_CASE(7)
        TROUPE_I16_CASE(8)
#undef TROUPE_I16_CASE
        default:
            break;
    }
}

// T tokens (T <= kI16SliceTile) over slice h of the row group at `group`.
template <DType kType>
HWY_INLINE void GemvI16SliceTokens(int T, const uint8_t* group, int64_t n_blocks, size_t h,
                                   const uint8_t* const* a, const ops::ActLayout& l, float* y,
                                   int64_t ldy, const uint8_t*& pf, const uint8_t* pf_end) {
    WithTokenCount(T, [&](auto n) {
        GemvI16SlicePass<kType, decltype(n)::value>(group, n_blocks, h, a, l, y, ldy, pf, pf_end);
    });
}

// T tokens (T <= kI16Tile) over the row group at `group`.
template <DType kType>
HWY_INLINE void GemvI16Tokens(int T, const uint8_t* group, int64_t n_blocks,
                              const uint8_t* const* a, const ops::ActLayout& l, float* y,
                              int64_t ldy, const uint8_t*& pf, const uint8_t* pf_end) {
    WithTokenCount(T, [&](auto n) {
        constexpr int kT = decltype(n)::value;
        if constexpr (kT <= kI16Tile)
            GemvI16Pass<kType, kT>(group, n_blocks, a, l, y, ldy, pf, pf_end);
    });
}

// Fewest tokens for which the AVX3_DL target hands Q8_0 to the AMX kernel when it is usable
// (one token stays on the vector kernel: it is bound by the weight stream).
constexpr int64_t kAmxMinTokens = 2;

// Rows [o0, o1) (multiples of 16) of an Interleaved16 Q8_0 or Q4_0 weight times tokens
// [t0, t1) of the converted rows `act`: y[t * w.n_out + o]. Prefetching runs ahead of the
// groups read, from stream.next on (restarted at row o0 when stream.next is not within
// [row o0, stream.end)), never at or past stream.end (at least row o1), as Gemv32Rows does.
// scratch: GemvScratch's bytes (the AMX kernel packs the activations there).
HWY_INLINE void GemvInterleaved(const ops::Weight& w, int64_t o0, int64_t o1,
                                ops::kern::WeightStream& stream, const uint8_t* act,
                                const ops::ActLayout& l, int64_t t0, int64_t t1, float* y,
                                uint8_t* scratch) {
    const size_t group_bytes = size_t(ops::kInterleaveRows) * w.row_stride;
    const uint8_t* begin = w.data + size_t(o0) * w.row_stride;
    const uint8_t* end = w.data + size_t(o1) * w.row_stride;
    if (stream.end < end) stream.end = end;
    if (stream.next < begin || stream.next > stream.end) stream.next = begin;
#if HWY_TARGET == HWY_AVX3_DL
    // Q8_0 batches on CPUs with AMX: tile dot products, 8 tokens a pass (amx.h), the
    // activations packed once per thread and call, a scratch region per pass
    // (stream.amx_packed says what the scratch holds).
    if (w.type == DType::Q8_0 && t1 - t0 >= kAmxMinTokens && kernels::amx::usable()) {
        const size_t pass_bytes = kernels::amx::scratch_bytes(l.n_blocks);
        const uint8_t* first = act + size_t(t0) * l.row_bytes;
        const bool packed = stream.amx_packed == first && stream.amx_scratch == scratch &&
                            stream.amx_packed_tokens == t1 - t0;
        for (int64_t t = t0; t < t1; t += kernels::amx::kMaxTokens) {
            const int n = int(std::min<int64_t>(t1 - t, kernels::amx::kMaxTokens));
            const uint8_t* rows = act + size_t(t) * l.row_bytes;
            uint8_t* pass_scratch =
                scratch + size_t((t - t0) / kernels::amx::kMaxTokens) * pass_bytes;
            if (!packed) kernels::amx::pack(rows, l, n, pass_scratch);
            const uint8_t* pf_end = t == t0 ? stream.end : stream.next;
            kernels::amx::gemv_q8_0_groups(
                w.data, group_bytes, o0 / ops::kInterleaveRows, o1 / ops::kInterleaveRows, rows, l,
                n, y + t * w.n_out + o0, w.n_out, pass_scratch, stream.next, pf_end);
        }
        stream.amx_packed = first;
        stream.amx_scratch = scratch;
        stream.amx_packed_tokens = int(t1 - t0);
        return;
    }
#else
    (void)scratch;
#endif
    // kI16BySlice targets take batches slice by slice (one token is bound by the weight
    // stream, and GemvI16Pass reads each line once).
    const bool by_slice = kI16BySlice && t1 - t0 > 1;
    const int64_t tile = by_slice ? kI16SliceTile : kI16Tile;
    const size_t n_slices = by_slice ? kI16Vecs : 1;
    const uint8_t* rows[kI16SliceTile > kI16Tile ? kI16SliceTile : kI16Tile];
    for (int64_t o = o0; o < o1; o += ops::kInterleaveRows) {
        const uint8_t* group = w.data + size_t(o / ops::kInterleaveRows) * group_bytes;
        for (int64_t t = t0; t < t1; t += tile) {
            const int n = int(t1 - t < tile ? t1 - t : tile);
            for (int i = 0; i < n; ++i) rows[i] = act + size_t(t + i) * l.row_bytes;
            float* yo = y + t * w.n_out + o;
            for (size_t h = 0; h < n_slices; ++h) {
                // Only the first pass streams new weights; later ones find the group in L1.
                const uint8_t* pf_end = t == t0 && h == 0 ? stream.end : stream.next;
                const auto pass = [&](auto type) {
                    constexpr DType kType = decltype(type)::value;
                    if constexpr (kI16BySlice) {
                        if (by_slice)
                            return GemvI16SliceTokens<kType>(n, group, l.n_blocks, h, rows, l, yo,
                                                             w.n_out, stream.next, pf_end);
                    }
                    GemvI16Tokens<kType>(n, group, l.n_blocks, rows, l, yo, w.n_out, stream.next,
                                         pf_end);
                };
                if (w.type == DType::Q4_0) {
                    pass(std::integral_constant<DType, DType::Q4_0>());
                } else {
                    pass(std::integral_constant<DType, DType::Q8_0>());
                }
            }
        }
    }
}

#endif  // HWY_TARGET != HWY_SCALAR
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
