// Matrix-matrix kernels for float weights (F32, F16, BF16), in the form of gemm-inl.h:
// activations packed as floats with token t in lane t, each weight value broadcast and
// multiplied into an R rows x V token-vectors tile of accumulators. F16 / BF16 rows are
// converted to float once per call.
#if defined(TROUPE_KERNELS_GEMM_FLOAT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TROUPE_KERNELS_GEMM_FLOAT_INL_H_
#undef TROUPE_KERNELS_GEMM_FLOAT_INL_H_
#else
#define TROUPE_KERNELS_GEMM_FLOAT_INL_H_
#endif

#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "kernels/gemm-inl.h"
#include "kernels/gemv-inl.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_GCC_ACTUAL
#pragma GCC target("avx512vnni")  // like the other matmul files (inlining needs the same ISA)
#endif
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#if HWY_TARGET != HWY_SCALAR

HWY_INLINE size_t FloatRowPrepBytes(int64_t n_in) {
    return size_t(n_in) * sizeof(float) + 64;
}

// The float values of one row (converted into tmp unless the row is F32).
template <DType kType>
HWY_INLINE const float* PrepareFloatRow(const uint8_t* row, int64_t n_in, float* tmp) {
    if constexpr (kType == DType::F32) {
        if (reinterpret_cast<uintptr_t>(row) % alignof(float) == 0)
            return reinterpret_cast<const float*>(row);
        std::memcpy(tmp, row, size_t(n_in) * sizeof(float));
        return tmp;
    } else {
        const GF df;
        const size_t N = hn::Lanes(df);
        int64_t i = 0;
        for (; i + int64_t(N) <= n_in; i += int64_t(N))
            hn::StoreU(LoadWeights<kType>(row, size_t(i), N), df, tmp + i);
        if (i < n_in)
            StoreTail(df, LoadWeights<kType>(row, size_t(i), size_t(n_in - i)), tmp + i,
                      size_t(n_in - i));
        return tmp;
    }
}

template <int R, int V>
HWY_INLINE void MicroFloat(const ops::Weight& w, int64_t o0, const float* const* rows,
                           const PackedActs& p, int64_t tv0, int64_t n_tokens, float* y) {
    const GF df;
    const size_t L = hn::Lanes(df);
    GVF acc[R][V];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) acc[r][v] = hn::Zero(df);
    const float* tvp[V];
    for (int v = 0; v < V; ++v)
        tvp[v] = reinterpret_cast<const float*>(p.base + size_t(tv0 + v) * p.stride);
    for (int64_t i = 0; i < w.n_in; ++i) {
        GVF xv[V];
        for (int v = 0; v < V; ++v) xv[v] = hn::LoadU(df, tvp[v] + size_t(i) * L);
        for (int r = 0; r < R; ++r) {
            const GVF wv = hn::Set(df, rows[r][i]);
            for (int v = 0; v < V; ++v) acc[r][v] = hn::MulAdd(wv, xv[v], acc[r][v]);
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

template <int R>
HWY_INLINE void GemmFloatRows(const ops::Weight& w, int64_t o, const float* const* rows,
                              const PackedActs& p, int64_t n_tokens, float* y) {
    constexpr int V = kTileVecs;
    const int64_t n_vecs = (n_tokens + int64_t(TokenLanes()) - 1) / int64_t(TokenLanes());
    int64_t tv = 0;
    for (; tv + V <= n_vecs; tv += V) MicroFloat<R, V>(w, o, rows, p, tv, n_tokens, y);
    for (; tv < n_vecs; ++tv) MicroFloat<R, 1>(w, o, rows, p, tv, n_tokens, y);
}

// Rows [o0, o1) x all tokens of a float type. scratch: FloatRowPrepBytes(n_in) * kTileRows.
template <DType kType>
HWY_INLINE void GemmFloat(const ops::Weight& w, const PackedActs& p, int64_t n_tokens, int64_t o0,
                          int64_t o1, float* y, uint8_t* scratch) {
    constexpr int R = kTileRows;
    const float* rows[R];
    auto prepare = [&](int64_t o, int n) {
        for (int r = 0; r < n; ++r) {
            float* tmp = reinterpret_cast<float*>(scratch + size_t(r) * FloatRowPrepBytes(w.n_in));
            rows[r] = PrepareFloatRow<kType>(w.data + size_t(o + r) * w.row_stride, w.n_in, tmp);
        }
    };
    int64_t o = o0;
    for (; o + R <= o1; o += R) {
        prepare(o, R);
        PrefetchNextRows(w, o + R, o1, R);
        GemmFloatRows<R>(w, o, rows, p, n_tokens, y);
    }
    for (; o < o1; ++o) {
        prepare(o, 1);
        GemmFloatRows<1>(w, o, rows, p, n_tokens, y);
    }
}

#endif  // HWY_TARGET != HWY_SCALAR
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
