// The matrix kernels compiled once per SIMD target (activation conversion, matrix-vector,
// matrix-matrix) and their run-time dispatch (matmul_kernels.h). matmul_ops.cpp splits them
// over threads.
#include "kernels/simd_targets.h"  // first: decides the targets

#include <algorithm>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/gemm-inl.h"
#include "kernels/gemm_float-inl.h"
#include "kernels/gemm_kquant-inl.h"
#include "kernels/gemv-inl.h"
#include "kernels/gemv32-inl.h"
#include "kernels/gemv_interleaved-inl.h"
#include "kernels/matmul_kernels.h"
#include "kernels/ops.h"
#include "kernels/quantize_act-inl.h"
#include "tensor/quant_ref.h"
#include "util/error.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_GCC_ACTUAL
#pragma GCC target("avx512vnni")
#endif
namespace troupe::HWY_NAMESPACE {

void QuantizeActRows(const float* x, int64_t t0, int64_t t1, uint8_t* act,
                     const ops::ActLayout& l) {
    for (int64_t t = t0; t < t1; ++t)
        QuantizeActRow(x + t * l.n_in, act + size_t(t) * l.row_bytes, l);
}

// Whether this target has a SIMD kernel for the weight type (else the caller uses the
// reference dot product).
bool HasKernel(DType type) {
#if HWY_TARGET == HWY_SCALAR
    (void)type;
    return false;
#else
    switch (type) {
        case DType::F32:
        case DType::F16:
        case DType::BF16:
        case DType::Q8_0:
        case DType::Q4_0:
        case DType::Q5_0:
        case DType::Q4_1:
        case DType::Q5_1:
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K:
            return true;
        default:
            return false;
    }
#endif
}

#if HWY_TARGET != HWY_SCALAR
// Rows [o0, o1) of any supported weight type times tokens [t0, t1) (at most
// kMaxGemvTokens at a time): y[t * w.n_out + o]. stream: see Gemv32Rows.
HWY_INLINE void GemvAnyType(const ops::Weight& wt, int64_t o0, int64_t o1,
                            ops::kern::WeightStream& stream, const uint8_t* act, int64_t t0,
                            int64_t t1, const ops::ActLayout& l, float* y, uint8_t* scratch) {
    if (wt.layout == ops::WeightLayout::Interleaved16)  // all the tokens in one pass
        return GemvInterleaved(wt, o0, o1, stream, act, l, t0, t1, y, scratch);
    stream.amx_packed = nullptr;  // the kernels below may write the scratch
    for (int64_t tb = t0; tb < t1; tb += kMaxGemvTokens) {
        const int n = int(t1 - tb < kMaxGemvTokens ? t1 - tb : kMaxGemvTokens);
        GemvActs a;
        for (int t = 0; t < n; ++t) a.row[t] = act + size_t(tb + t) * l.row_bytes;
        float* yt = y + tb * wt.n_out + o0;
        const uint8_t* w = wt.data;
        const size_t s = wt.row_stride;
        const int64_t ld = wt.n_out;
        ops::kern::WeightStream& pe = stream;
        switch (wt.type) {
            case DType::Q8_0:
                Gemv32<CodecQ8_0>(w, s, o0, o1, pe, a, n, l, yt, ld, scratch);
                break;
            case DType::Q4_0:
                Gemv32<CodecQ4_0>(w, s, o0, o1, pe, a, n, l, yt, ld, scratch);
                break;
            case DType::Q5_0:
                Gemv32<CodecQ5_0>(w, s, o0, o1, pe, a, n, l, yt, ld, scratch);
                break;
            case DType::Q4_1:
                Gemv32<CodecQ4_1>(w, s, o0, o1, pe, a, n, l, yt, ld, scratch);
                break;
            case DType::Q5_1:
                Gemv32<CodecQ5_1>(w, s, o0, o1, pe, a, n, l, yt, ld, scratch);
                break;
            case DType::Q4_K:
                GemvRows<Q45KKernel<false>>(w, s, o0, o1, a, n, l, yt, ld);
                break;
            case DType::Q5_K:
                GemvRows<Q45KKernel<true>>(w, s, o0, o1, a, n, l, yt, ld);
                break;
            case DType::Q6_K:
                GemvRows<Q6KKernel>(w, s, o0, o1, a, n, l, yt, ld);
                break;
            case DType::F32:
                GemvRows<FloatKernel<DType::F32>>(w, s, o0, o1, a, n, l, yt, ld);
                break;
            case DType::F16:
                GemvRows<FloatKernel<DType::F16>>(w, s, o0, o1, a, n, l, yt, ld);
                break;
            case DType::BF16:
                GemvRows<FloatKernel<DType::BF16>>(w, s, o0, o1, a, n, l, yt, ld);
                break;
            default:
                return;
        }
    }
}
#endif

// Per-thread scratch of MatmulTile for n_tokens tokens, and the rows its kernels group.
size_t GemvScratch(const ops::Weight& w, int64_t n_tokens) {
#if HWY_TARGET != HWY_SCALAR
    const int t = int(n_tokens < kMaxGemvTokens ? n_tokens : kMaxGemvTokens);
#if HWY_TARGET == HWY_AVX3_DL
    if (w.layout == ops::WeightLayout::Interleaved16 && w.type == DType::Q8_0) {
        // The AMX kernel's packed activations, a region per pass of kMaxTokens tokens.
        const int64_t passes = (n_tokens + kernels::amx::kMaxTokens - 1) / kernels::amx::kMaxTokens;
        return std::max(
            Gemv32ScratchBytes(w.n_in / 32, t),
            size_t(std::max<int64_t>(passes, 1)) * kernels::amx::scratch_bytes(w.n_in / 32));
    }
#endif
    return Gemv32ScratchBytes(w.n_in / 32, t);
#else
    (void)w, (void)n_tokens;
    return 0;
#endif
}

int64_t GemvRowGroup() {
#if HWY_TARGET != HWY_SCALAR
    return int64_t(kG32Rows);
#else
    return 1;
#endif
}

bool InterleaveWidensQ5_0() {
#if HWY_TARGET != HWY_SCALAR
    return kI16BySlice;
#else
    return false;
#endif
}

int64_t GemvInterleavedMaxTokens() {
#if HWY_TARGET != HWY_SCALAR
    if constexpr (kI16BySlice) return std::numeric_limits<int64_t>::max();
#endif
    return 16;
}

// y[t, o] for t in [t0, t1), o in [o0, o1).   y: [*, w.n_out]. scratch: GemvScratch(w,
// t1 - t0) bytes, 64-byte aligned.
void MatmulTile(const ops::Weight& w, const uint8_t* act, const ops::ActLayout& l, int64_t t0,
                int64_t t1, int64_t o0, int64_t o1, ops::kern::WeightStream* stream, float* y,
                uint8_t* scratch) {
#if HWY_TARGET != HWY_SCALAR
    GemvAnyType(w, o0, o1, *stream, act, t0, t1, l, y, scratch);
#else
    (void)w, (void)act, (void)l, (void)t0, (void)t1, (void)o0, (void)o1, (void)stream;
    (void)y, (void)scratch;
#endif
}

#if HWY_TARGET != HWY_SCALAR
// The matrix-matrix kernels by weight type: per-thread scratch (0: no kernel) and the run.
HWY_INLINE size_t GemmScratchBytes(const ops::Weight& w) {
    switch (w.type) {
        case DType::Q8_0:
        case DType::Q4_0:
        case DType::Q5_0:
        case DType::Q4_1:
        case DType::Q5_1:
            return LegacyScratchBytes(w);
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K:
            return KRowPrepBytes(w.n_in / QK_K) * size_t(kTileRows) + 64;
        case DType::F32:
        case DType::F16:
        case DType::BF16:
            return FloatRowPrepBytes(w.n_in) * size_t(kTileRows) + 64;
        default:
            return 0;
    }
}

// Batches smaller than a token vector, and the pair layout (up to a full vector), stream the
// rows (GemvPacked); larger ones use the prepared-rows micro-kernel (GemmLegacy), which also
// takes interleaved weights (their small batches go to GemvInterleaved, unpacked).
template <class Codec>
HWY_INLINE void GemmOrGemvPacked(const ops::Weight& w, const PackedActs& p, int64_t n_tokens,
                                 int64_t o0, int64_t o1, float* y, uint8_t* scratch) {
    if constexpr (std::is_same_v<Codec, CodecQ8_0> || std::is_same_v<Codec, CodecQ4_0>) {
        if (w.layout == ops::WeightLayout::Interleaved16)
            return GemmInterleaved(w, p, n_tokens, o0, o1, y, scratch);
    }
    if (p.pairs || n_tokens < int64_t(TokenLanes()))
        return GemvPacked<Codec>(w, p, n_tokens, o0, o1, y);
    GemmLegacy<Codec>(w, p, n_tokens, o0, o1, y, scratch);
}

HWY_INLINE void GemmAnyType(const ops::Weight& w, const PackedActs& p, int64_t n_tokens, int64_t o0,
                            int64_t o1, float* y, uint8_t* scratch) {
    switch (w.type) {
        case DType::Q8_0:
            return GemmOrGemvPacked<CodecQ8_0>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::Q4_0:
            return GemmOrGemvPacked<CodecQ4_0>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::Q5_0:
            return GemmOrGemvPacked<CodecQ5_0>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::Q4_1:
            return GemmOrGemvPacked<CodecQ4_1>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::Q5_1:
            return GemmOrGemvPacked<CodecQ5_1>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::Q4_K:
            return GemmKQuant<DType::Q4_K>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::Q5_K:
            return GemmKQuant<DType::Q5_K>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::Q6_K:
            return GemmKQuant<DType::Q6_K>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::F32:
            return GemmFloat<DType::F32>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::F16:
            return GemmFloat<DType::F16>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::BF16:
            return GemmFloat<DType::BF16>(w, p, n_tokens, o0, o1, y, scratch);
        default:
            return;
    }
}
#endif

// The matrix-matrix path. Tokens are handled in packed vectors of GemmTokenLanes() tokens;
// GemmPackedBytes() is the size of one packed vector (0: no matrix-matrix kernel here).
size_t GemmTokenLanes() {
#if HWY_TARGET != HWY_SCALAR
    return TokenLanes();
#else
    return 1;
#endif
}

size_t GemmPackedBytes(const ops::Weight& w, const ops::ActLayout& l) {
#if HWY_TARGET != HWY_SCALAR
    return GemmScratchBytes(w) > 0 ? PackLayout(l).stride : 0;
#else
    (void)w, (void)l;
    return 0;
#endif
}

// Converts the tokens of packed vector tv (rows: [its tokens, l.n_in]; null: act holds them
// already) into act and packs them into `packed`.
void QuantizeAndPack(bool pair_types, const float* rows, const ops::ActLayout& l, int64_t tv,
                     int64_t n_tokens, uint8_t* act, uint8_t* packed) {
#if HWY_TARGET != HWY_SCALAR
    const int64_t L = int64_t(TokenLanes());
    const int64_t t0 = tv * L, t1 = t0 + L < n_tokens ? t0 + L : n_tokens;
    if (rows) QuantizeActRows(rows, 0, t1 - t0, act + size_t(t0) * l.row_bytes, l);
    const PackedActs p = PackLayout(l);
    if (UsePairs(pair_types, n_tokens)) {
        const int64_t per_vec = L / 2;
        for (int64_t v = 0; v < PackedVectors(pair_types, n_tokens); ++v)
            PackPairs(act, l, v * per_vec, std::min(per_vec, n_tokens - v * per_vec), p,
                      packed + size_t(v) * p.stride);
    } else {
        PackTokens(act, l, t0, t1 - t0, p, packed + size_t(tv) * p.stride);
    }
#else
    (void)pair_types, (void)rows, (void)l, (void)tv, (void)n_tokens, (void)act, (void)packed;
#endif
}

// Whether this target has the pair-layout kernels (VNNI).
bool GemmHasPairs() {
#if HWY_TARGET != HWY_SCALAR
    return kHasVnni;
#else
    return false;
#endif
}

// Packed vectors that n_tokens tokens take (each of GemmPackedBytes).
int64_t GemmPackedVectors(bool pair_types, int64_t n_tokens) {
#if HWY_TARGET != HWY_SCALAR
    return PackedVectors(pair_types, n_tokens);
#else
    (void)pair_types;
    return n_tokens;
#endif
}

// Per-thread scratch of GemmTile.
size_t GemmScratch(const ops::Weight& w) {
#if HWY_TARGET != HWY_SCALAR
    return GemmScratchBytes(w);
#else
    (void)w;
    return 0;
#endif
}

// Rows [o0, o1) for all n_tokens tokens from the packed activations.
void GemmTile(const ops::Weight& w, const ops::ActLayout& l, const uint8_t* packed, bool pair_types,
              int64_t n_tokens, int64_t o0, int64_t o1, float* y, uint8_t* scratch) {
#if HWY_TARGET != HWY_SCALAR
    PackedActs p = PackLayout(l);
    p.base = packed;
    p.pairs = UsePairs(pair_types, n_tokens);
    GemmAnyType(w, p, n_tokens, o0, o1, y, scratch);
#else
    (void)w, (void)l, (void)packed, (void)pair_types, (void)n_tokens, (void)o0, (void)o1, (void)y;
    (void)scratch;
#endif
}

}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace troupe {
HWY_EXPORT(QuantizeActRows);
HWY_EXPORT(HasKernel);
HWY_EXPORT(MatmulTile);
HWY_EXPORT(GemvScratch);
HWY_EXPORT(GemvRowGroup);
HWY_EXPORT(GemvInterleavedMaxTokens);
HWY_EXPORT(InterleaveWidensQ5_0);
HWY_EXPORT(GemmTokenLanes);
HWY_EXPORT(GemmPackedBytes);
HWY_EXPORT(GemmHasPairs);
HWY_EXPORT(QuantizeAndPack);
HWY_EXPORT(GemmPackedVectors);
HWY_EXPORT(GemmScratch);
HWY_EXPORT(GemmTile);

namespace ops::kern {

bool has_kernel(DType type) {
    return HWY_DYNAMIC_DISPATCH(HasKernel)(type);
}

void quantize_act_rows(const float* x, int64_t t0, int64_t t1, uint8_t* act, const ActLayout& l) {
    HWY_DYNAMIC_DISPATCH(QuantizeActRows)(x, t0, t1, act, l);
}

size_t gemv_scratch_bytes(const Weight& w, int64_t n_tokens) {
    return HWY_DYNAMIC_DISPATCH(GemvScratch)(w, n_tokens);
}

int64_t gemv_row_group() {
    return HWY_DYNAMIC_DISPATCH(GemvRowGroup)();
}

int64_t gemv_interleaved_max_tokens() {
    return HWY_DYNAMIC_DISPATCH(GemvInterleavedMaxTokens)();
}

bool interleave_widens_q5_0() {
    return HWY_DYNAMIC_DISPATCH(InterleaveWidensQ5_0)();
}

// Interleaved weights are computed in whole groups of rows.
static bool whole_groups(const Weight& w, int64_t o0, int64_t o1) {
    return w.layout != WeightLayout::Interleaved16 ||
           (o0 % kInterleaveRows == 0 && o1 % kInterleaveRows == 0);
}

void gemv_rows(const Weight& w, const uint8_t* act, const ActLayout& l, int64_t t0, int64_t t1,
               int64_t o0, int64_t o1, WeightStream& stream, float* y, uint8_t* scratch) {
    TROUPE_CHECK(whole_groups(w, o0, o1));
    HWY_DYNAMIC_DISPATCH(MatmulTile)(w, act, l, t0, t1, o0, o1, &stream, y, scratch);
}

size_t gemm_token_lanes() {
    return HWY_DYNAMIC_DISPATCH(GemmTokenLanes)();
}

size_t gemm_packed_bytes(const Weight& w, const ActLayout& l) {
    return HWY_DYNAMIC_DISPATCH(GemmPackedBytes)(w, l);
}

void quantize_and_pack(bool pair_types, const float* rows, const ActLayout& l, int64_t tv,
                       int64_t n_tokens, uint8_t* act, uint8_t* packed) {
    HWY_DYNAMIC_DISPATCH(QuantizeAndPack)(pair_types, rows, l, tv, n_tokens, act, packed);
}

bool gemm_has_pairs() {
    return HWY_DYNAMIC_DISPATCH(GemmHasPairs)();
}

int64_t gemm_packed_vectors(bool pair_types, int64_t n_tokens) {
    return HWY_DYNAMIC_DISPATCH(GemmPackedVectors)(pair_types, n_tokens);
}

size_t gemm_scratch_bytes(const Weight& w) {
    return HWY_DYNAMIC_DISPATCH(GemmScratch)(w);
}

void gemm_rows(const Weight& w, const ActLayout& l, const uint8_t* packed, bool pair_types,
               int64_t n_tokens, int64_t o0, int64_t o1, float* y, uint8_t* scratch) {
    TROUPE_CHECK(whole_groups(w, o0, o1));
    HWY_DYNAMIC_DISPATCH(GemmTile)(w, l, packed, pair_types, n_tokens, o0, o1, y, scratch);
}

}  // namespace ops::kern
}  // namespace troupe
#endif  // HWY_ONCE
