// Row-wise and element-wise kernels: RMSNorm, RoPE, SwiGLU, add, softmax, argmax, f32 -> f16.
// Contracts are those of ops.h; the scalar references are in ops_ref.cpp.
#if defined(TROUPE_KERNELS_ELEMENTWISE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TROUPE_KERNELS_ELEMENTWISE_INL_H_
#undef TROUPE_KERNELS_ELEMENTWISE_INL_H_
#else
#define TROUPE_KERNELS_ELEMENTWISE_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/ops_ref.h"
#include "kernels/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// sum(x[i]^2), accumulated in float lanes.
HWY_INLINE float SumOfSquares(const float* HWY_RESTRICT x, size_t n) {
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    auto s0 = hn::Zero(d), s1 = hn::Zero(d);
    size_t i = 0;
    for (; i + 2 * N <= n; i += 2 * N) {
        const auto a = hn::LoadU(d, x + i), b = hn::LoadU(d, x + i + N);
        s0 = hn::MulAdd(a, a, s0);
        s1 = hn::MulAdd(b, b, s1);
    }
    for (; i + N <= n; i += N) {
        const auto a = hn::LoadU(d, x + i);
        s0 = hn::MulAdd(a, a, s0);
    }
    if (i < n) {
        const auto a = LoadTail(d, x + i, n - i);
        s1 = hn::MulAdd(a, a, s1);
    }
    return ReduceSum(d, hn::Add(s0, s1));
}

// y[i] = x[i] * scale * w[i]   (y may be x)
HWY_INLINE void ScaleMul(const float* x, float scale, const float* HWY_RESTRICT w, float* y,
                         size_t n) {
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    const auto vs = hn::Set(d, scale);
    size_t i = 0;
    for (; i + N <= n; i += N)
        hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, x + i), vs), hn::LoadU(d, w + i)), d, y + i);
    if (i < n) {
        const auto v = hn::Mul(hn::Mul(LoadTail(d, x + i, n - i), vs), LoadTail(d, w + i, n - i));
        StoreTail(d, v, y + i, n - i);
    }
}

void RmsNorm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t dim,
             float eps) {
    for (int64_t r = 0; r < n_rows; ++r) {
        const float ss = SumOfSquares(x + r * dim, size_t(dim));
        const float scale = 1.0f / std::sqrt(float(double(ss) / double(dim)) + eps);
        ScaleMul(x + r * dim, scale, weight, y + r * dim, size_t(dim));
    }
}

// Rotates the pairs (2i, 2i+1) of v[n_rot] by the angles of cs/sn[n_rot / 2]. Every
// vector holds whole pairs: Reverse2 swaps each pair's two values, so lane 2i computes
// x0 c - x1 s and lane 2i+1 x1 c + x0 s with the duplicated cosines and signed sines.
HWY_INLINE void RopeNormHead(float* v, const float* HWY_RESTRICT cdup,
                             const float* HWY_RESTRICT sdup, size_t n_rot) {
#if HWY_TARGET == HWY_SCALAR  // one lane: a pair spans two vectors
    for (size_t i = 0; i < n_rot; i += 2) {
        const float x0 = v[i], x1 = v[i + 1];
        v[i] = x0 * cdup[i] + x1 * sdup[i];
        v[i + 1] = x1 * cdup[i + 1] + x0 * sdup[i + 1];
    }
#else
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    size_t i = 0;
    for (; i + N <= n_rot; i += N) {
        const auto x = hn::LoadU(d, v + i);
        const auto xs = hn::Reverse2(d, x);
        const auto r = hn::MulAdd(x, hn::LoadU(d, cdup + i), hn::Mul(xs, hn::LoadU(d, sdup + i)));
        hn::StoreU(r, d, v + i);
    }
    if (i < n_rot) {
        const size_t m = n_rot - i;
        const auto x = LoadTail(d, v + i, m);
        const auto xs = hn::Reverse2(d, x);
        const auto r =
            hn::MulAdd(x, LoadTail(d, cdup + i, m), hn::Mul(xs, LoadTail(d, sdup + i, m)));
        StoreTail(d, r, v + i, m);
    }
#endif
}

// Rotates the pairs (i, i + n_rot/2) of v.
HWY_INLINE void RopeNeoxHead(float* v, const float* HWY_RESTRICT cs, const float* HWY_RESTRICT sn,
                             size_t half) {
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    float* lo = v;
    float* hi = v + half;
    size_t i = 0;
    for (; i + N <= half; i += N) {
        const auto a = hn::LoadU(d, lo + i), b = hn::LoadU(d, hi + i);
        const auto c = hn::LoadU(d, cs + i), s = hn::LoadU(d, sn + i);
        hn::StoreU(hn::MulSub(a, c, hn::Mul(b, s)), d, lo + i);
        hn::StoreU(hn::MulAdd(a, s, hn::Mul(b, c)), d, hi + i);
    }
    if (i < half) {
        const size_t m = half - i;
        const auto a = LoadTail(d, lo + i, m), b = LoadTail(d, hi + i, m);
        const auto c = LoadTail(d, cs + i, m), s = LoadTail(d, sn + i, m);
        StoreTail(d, hn::MulSub(a, c, hn::Mul(b, s)), lo + i, m);
        StoreTail(d, hn::MulAdd(a, s, hn::Mul(b, c)), hi + i, m);
    }
}

// Applies one row's rotation to its n_heads heads. cs/sn: [n_rot / 2] angles of the row.
// neox: pairs (i, i + n_rot/2), else (2i, 2i+1). scratch: [2 * n_rot] floats.
void RopeRow(float* x, int n_heads, int head_dim, int n_rot, bool neox, const float* cs,
             const float* sn, float* scratch) {
    if (neox) {
        for (int h = 0; h < n_heads; ++h)
            RopeNeoxHead(x + size_t(h) * head_dim, cs, sn, size_t(n_rot / 2));
        return;
    }
    float* cdup = scratch;
    float* sdup = scratch + n_rot;
    for (int i = 0; i < n_rot / 2; ++i) {
        cdup[2 * i] = cdup[2 * i + 1] = cs[i];
        sdup[2 * i] = -sn[i];
        sdup[2 * i + 1] = sn[i];
    }
    for (int h = 0; h < n_heads; ++h)
        RopeNormHead(x + size_t(h) * head_dim, cdup, sdup, size_t(n_rot));
}

// Columns [c0, c1) of one row of heads: RopeRow's arithmetic on those columns only (Norm: c0
// and c1 even; Neox: whole heads). pairs: the row's [cdup (n_rot), sdup (n_rot)], what
// RopeRow builds in its scratch.
void RopeCols(float* x, int64_t c0, int64_t c1, int head_dim, int n_rot, bool neox,
              const float* cs, const float* sn, const float* pairs) {
    for (int64_t c = c0; c < c1;) {
        const int64_t h = c / head_dim, d0 = c % head_dim;
        const int64_t d1 = std::min<int64_t>(head_dim, d0 + (c1 - c));
        float* v = x + h * head_dim;
        if (neox) {
            RopeNeoxHead(v, cs, sn, size_t(n_rot / 2));
        } else if (d0 < n_rot) {
            const int64_t e = std::min<int64_t>(d1, n_rot);
            RopeNormHead(v + d0, pairs + d0, pairs + n_rot + d0, size_t(e - d0));
        }
        c += d1 - d0;
    }
}

// out[i] = gate[i] / (1 + exp(-gate[i])) * up[i].   out may alias gate. exp by ExpInRange
// (2 ulp), infinity above 88 and 0 below -87: on Sapphire Rapids 1,536 values took ~480 ns
// against ~610 with hwy's Exp (BM_ConvertQ8 with swiglu, minus without).
void Swiglu(const float* gate, const float* HWY_RESTRICT up, float* out, int64_t n) {
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    const auto one = hn::Set(d, 1.0f);
    const auto lo = hn::Set(d, -87.0f), hi = hn::Set(d, 88.0f);
    const auto inf = hn::Set(d, std::numeric_limits<float>::infinity());
    auto silu_mul = [&](auto g, auto u) {
        const auto x = hn::Neg(g);
        auto e = hn::IfThenElse(hn::Gt(x, hi), inf, ExpInRange(d, hn::Min(x, hi)));
        e = hn::IfThenElseZero(hn::Gt(x, lo), e);
        return hn::Mul(hn::Div(g, hn::Add(one, e)), u);
    };
    size_t i = 0;
    for (; i + N <= size_t(n); i += N)
        hn::StoreU(silu_mul(hn::LoadU(d, gate + i), hn::LoadU(d, up + i)), d, out + i);
    if (i < size_t(n)) {
        const size_t m = size_t(n) - i;
        StoreTail(d, silu_mul(LoadTail(d, gate + i, m), LoadTail(d, up + i, m)), out + i, m);
    }
}

void AddInplace(float* HWY_RESTRICT y, const float* HWY_RESTRICT x, int64_t n) {
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    size_t i = 0;
    for (; i + N <= size_t(n); i += N)
        hn::StoreU(hn::Add(hn::LoadU(d, y + i), hn::LoadU(d, x + i)), d, y + i);
    for (; i < size_t(n); ++i) y[i] += x[i];
}

HWY_INLINE float MaxOf(const float* HWY_RESTRICT x, size_t n) {
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    float mx = x[0];
    size_t i = 0;
    if (n >= N) {
        auto m = hn::LoadU(d, x);
        for (i = N; i + N <= n; i += N) m = hn::Max(m, hn::LoadU(d, x + i));
        mx = ReduceMax(d, m);
    }
    for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
    return mx;
}

// x[i] = exp(x[i] - mx); returns the sum.
HWY_INLINE float ExpSubInplace(float* HWY_RESTRICT x, size_t n, float mx) {
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    const auto vm = hn::Set(d, mx);
    auto sum = hn::Zero(d);
    size_t i = 0;
    for (; i + N <= n; i += N) {
        const auto e = hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), vm));
        hn::StoreU(e, d, x + i);
        sum = hn::Add(sum, e);
    }
    if (i < n) {
        const size_t m = n - i;
        // Lanes past the tail hold exp(0 - mx); mask them out of the sum.
        const auto e = hn::Exp(d, hn::Sub(LoadTail(d, x + i, m), vm));
        const auto e_valid = hn::IfThenElseZero(hn::FirstN(d, m), e);
        StoreTail(d, e_valid, x + i, m);
        sum = hn::Add(sum, e_valid);
    }
    return ReduceSum(d, sum);
}

HWY_INLINE void ScaleInplace(float* HWY_RESTRICT x, size_t n, float s) {
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    const auto vs = hn::Set(d, s);
    size_t i = 0;
    for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vs), d, x + i);
    for (; i < n; ++i) x[i] *= s;
}

void Softmax(float* x, int64_t n) {
    if (n <= 0) return;
    const float mx = MaxOf(x, size_t(n));
    const float sum = ExpSubInplace(x, size_t(n), mx);
    ScaleInplace(x, size_t(n), 1.0f / sum);
}

// The first index of the maximum of x[0, n) (n >= 1), as ops::ref::argmax: the maximum in
// vectors (four independent chains), then the first lane equal to it. Short rows and rows
// with a NaN take the reference, whose comparisons skip NaNs.
int64_t ArgMax(const float* x, int64_t n) {
    const hn::ScalableTag<float> d;
    const int64_t N = int64_t(hn::Lanes(d));
    if (n < 4 * N) return ops::ref::argmax(x, n);
    auto m0 = hn::LoadU(d, x), m1 = hn::LoadU(d, x + N), m2 = hn::LoadU(d, x + 2 * N),
         m3 = hn::LoadU(d, x + 3 * N);
    auto nan = hn::Or(hn::Or(hn::IsNaN(m0), hn::IsNaN(m1)), hn::Or(hn::IsNaN(m2), hn::IsNaN(m3)));
    int64_t i = 4 * N;
    for (; i + 4 * N <= n; i += 4 * N) {
        const auto a = hn::LoadU(d, x + i), b = hn::LoadU(d, x + i + N),
                   c = hn::LoadU(d, x + i + 2 * N), e = hn::LoadU(d, x + i + 3 * N);
        m0 = hn::Max(m0, a);
        m1 = hn::Max(m1, b);
        m2 = hn::Max(m2, c);
        m3 = hn::Max(m3, e);
        nan = hn::Or(
            nan, hn::Or(hn::Or(hn::IsNaN(a), hn::IsNaN(b)), hn::Or(hn::IsNaN(c), hn::IsNaN(e))));
    }
    for (; i < n; i += N) {  // the rest, the last vector overlapping the one before
        const auto a = hn::LoadU(d, x + (i + N <= n ? i : n - N));
        m0 = hn::Max(m0, a);
        nan = hn::Or(nan, hn::IsNaN(a));
    }
    if (!hn::AllFalse(d, nan)) return ops::ref::argmax(x, n);
    const auto mv = hn::MaxOfLanes(d, hn::Max(hn::Max(m0, m1), hn::Max(m2, m3)));
    for (int64_t j = 0;; j += N) {  // without NaNs the maximum is one of the values
        const int64_t at = j + N <= n ? j : n - N;
        const intptr_t k = hn::FindFirstTrue(d, hn::Eq(hn::LoadU(d, x + at), mv));
        if (k >= 0) return at + k;
    }
}

// dst[i] = f16(src[i]) (round to nearest even), as uint16_t bit patterns.
HWY_INLINE void F32ToF16(const float* HWY_RESTRICT src, uint16_t* HWY_RESTRICT dst, size_t n) {
    const hn::ScalableTag<float> df;
    const hn::Rebind<uint16_t, decltype(df)> du16;
    const size_t N = hn::Lanes(df);
    size_t i = 0;
    for (; i + N <= n; i += N)
        hn::StoreU(F16BitsFromF32(df, hn::LoadU(df, src + i)), du16, dst + i);
    if (i < n) StoreTail(du16, F16BitsFromF32(df, LoadTail(df, src + i, n - i)), dst + i, n - i);
}

}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard (per target)
