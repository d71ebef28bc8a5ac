// Dispatch of the row-wise ops (RMSNorm, RoPE, SwiGLU, add, softmax, argmax) to their per-target
// kernels in elementwise-inl.h.
#include "kernels/simd_targets.h"  // first: decides the targets

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/elementwise.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/elementwise-inl.h"

#if HWY_ONCE
#include <algorithm>
#include <vector>

#include "kernels/ops.h"
#include "kernels/ops_ref.h"
#include "util/error.h"

namespace troupe {
HWY_EXPORT(RmsNorm);
HWY_EXPORT(RopeRow);
HWY_EXPORT(RopeCols);
HWY_EXPORT(Swiglu);
HWY_EXPORT(AddInplace);
HWY_EXPORT(Softmax);
HWY_EXPORT(ArgMax);

namespace ops {

void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t dim,
              float eps) {
    HWY_DYNAMIC_DISPATCH(RmsNorm)(x, weight, y, n_rows, dim, eps);
}

void rope_angles(const int32_t* pos, int64_t n_rows, const RopeParams& p, float* table) {
    TROUPE_CHECK(p.n_rot > 0 && p.n_rot % 2 == 0);
    const int half = p.n_rot / 2;
    for (int64_t r = 0; r < n_rows; ++r)
        ref::rope_cos_sin(pos[r], p, table + r * p.n_rot, table + r * p.n_rot + half);
}

void rope_apply(float* x, const float* table, int64_t n_rows, int n_heads, int head_dim,
                const RopeParams& p) {
    TROUPE_CHECK(p.n_rot > 0 && p.n_rot <= head_dim && p.n_rot % 2 == 0);
    const int half = p.n_rot / 2;
    constexpr int kMaxRot = 1024;
    TROUPE_CHECK(p.n_rot <= kMaxRot);
    float scratch[2 * kMaxRot];
    const auto kernel = HWY_DYNAMIC_DISPATCH(RopeRow);
    for (int64_t r = 0; r < n_rows; ++r) {
        const float* cs = table + r * p.n_rot;
        kernel(x + r * n_heads * head_dim, n_heads, head_dim, p.n_rot, p.mode == RopeMode::Neox, cs,
               cs + half, scratch);
    }
}

void rope_pair_table(const float* table, int64_t n_rows, const RopeParams& p, float* pairs) {
    TROUPE_CHECK(p.n_rot > 0 && p.n_rot % 2 == 0);
    if (p.mode == RopeMode::Neox) return;
    const int half = p.n_rot / 2;
    for (int64_t r = 0; r < n_rows; ++r) {
        const float* cs = table + r * p.n_rot;
        const float* sn = cs + half;
        float* cdup = pairs + r * 2 * p.n_rot;
        float* sdup = cdup + p.n_rot;
        for (int i = 0; i < half; ++i) {  // as RopeRow's scratch
            cdup[2 * i] = cdup[2 * i + 1] = cs[i];
            sdup[2 * i] = -sn[i];
            sdup[2 * i + 1] = sn[i];
        }
    }
}

void rope_apply_cols(float* x, int64_t c0, int64_t c1, const float* table, const float* pairs,
                     int head_dim, const RopeParams& p) {
    TROUPE_CHECK(p.n_rot > 0 && p.n_rot <= head_dim && p.n_rot % 2 == 0);
    TROUPE_CHECK(0 <= c0 && c0 <= c1);
    const bool neox = p.mode == RopeMode::Neox;
    TROUPE_CHECK(neox ? c0 % head_dim == 0 && c1 % head_dim == 0 : c0 % 2 == 0 && c1 % 2 == 0);
    TROUPE_CHECK(neox || pairs);
    HWY_DYNAMIC_DISPATCH(RopeCols)
    (x, c0, c1, head_dim, p.n_rot, neox, table, table + p.n_rot / 2, pairs);
}

void rope(float* x, const int32_t* pos, int64_t n_rows, int n_heads, int head_dim,
          const RopeParams& p) {
    TROUPE_CHECK(p.n_rot > 0 && p.n_rot <= head_dim && p.n_rot % 2 == 0);
    std::vector<float> table(size_t(p.n_rot));
    for (int64_t r = 0; r < n_rows; ++r) {
        rope_angles(pos + r, 1, p, table.data());
        rope_apply(x + r * n_heads * head_dim, table.data(), 1, n_heads, head_dim, p);
    }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
    HWY_DYNAMIC_DISPATCH(Swiglu)(gate, up, out, n);
}

void add_inplace(float* y, const float* x, int64_t n) {
    HWY_DYNAMIC_DISPATCH(AddInplace)(y, x, n);
}

void softmax(float* x, int64_t n) {
    HWY_DYNAMIC_DISPATCH(Softmax)(x, n);
}

int64_t argmax(const float* x, int64_t n) {
    TROUPE_CHECK(n >= 1);
    return HWY_DYNAMIC_DISPATCH(ArgMax)(x, n);
}

// ---- Region steps: rows (or runs of values) split into tasks of about kTaskValues ----------

namespace {
constexpr int64_t kTaskValues = 16384;

// Calls fn(i0, i1) over [0, n) in tasks of `per_task` items.
template <class F>
void split(Region& r, int64_t n, int64_t per_task, F&& fn) {
    per_task = std::max<int64_t>(1, per_task);
    r.for_each((n + per_task - 1) / per_task,
               [&](int64_t t) { fn(t * per_task, std::min(n, (t + 1) * per_task)); });
}
}  // namespace

void rms_norm(Region& r, const float* x, const float* weight, float* y, int64_t n_rows, int64_t dim,
              float eps) {
    split(r, n_rows, kTaskValues / std::max<int64_t>(dim, 1), [&](int64_t r0, int64_t r1) {
        rms_norm(x + r0 * dim, weight, y + r0 * dim, r1 - r0, dim, eps);
    });
}

void rope_apply(Region& r, float* x, const float* table, int64_t n_rows, int n_heads, int head_dim,
                const RopeParams& p) {
    const int64_t row = int64_t(n_heads) * head_dim;
    split(r, n_rows, kTaskValues / std::max<int64_t>(row, 1), [&](int64_t r0, int64_t r1) {
        rope_apply(x + r0 * row, table + r0 * p.n_rot, r1 - r0, n_heads, head_dim, p);
    });
}

void swiglu(Region& r, const float* gate, const float* up, float* out, int64_t n) {
    split(r, n, kTaskValues,
          [&](int64_t i0, int64_t i1) { swiglu(gate + i0, up + i0, out + i0, i1 - i0); });
}

void add_inplace(Region& r, float* y, const float* x, int64_t n) {
    split(r, n, kTaskValues, [&](int64_t i0, int64_t i1) { add_inplace(y + i0, x + i0, i1 - i0); });
}

}  // namespace ops
}  // namespace troupe
#endif  // HWY_ONCE
