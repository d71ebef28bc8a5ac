// Matrix products: activation conversion, then matrix-vector kernels (gemv-inl.h) split
// over the thread pool by rows.
#include "kernels/simd_targets.h"  // first: decides the targets

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/gemv-inl.h"
#include "kernels/ops.h"
#include "kernels/quantize_act-inl.h"
#include "tensor/quant_ref.h"

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

// y[t, o] for t in [t0, t1), o in [o0, o1).   y: [*, w.n_out]
void MatmulTile(const ops::Weight& w, const uint8_t* act, const ops::ActLayout& l, int64_t t0,
                int64_t t1, int64_t o0, int64_t o1, float* y) {
#if HWY_TARGET != HWY_SCALAR
    for (int64_t t = t0; t < t1; ++t)
        GemvAnyType(w, o0, o1, act + size_t(t) * l.row_bytes, l, y + t * w.n_out + o0);
#else
    (void)w, (void)act, (void)l, (void)t0, (void)t1, (void)o0, (void)o1, (void)y;
#endif
}

}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <vector>

#include "kernels/ops_ref.h"
#include "util/error.h"

namespace troupe {
HWY_EXPORT(QuantizeActRows);
HWY_EXPORT(HasKernel);
HWY_EXPORT(MatmulTile);

namespace ops {

namespace {

// Runs fn(task, thread) for n_tasks tasks on the pool, or inline without one.
template <class F>
void parallel_for(ThreadPool* pool, int64_t n_tasks, F&& fn) {
    if (pool) {
        pool->run(n_tasks, fn);
    } else {
        for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    }
}

// The reference path for weight types without a SIMD kernel on this target: activations in
// the reference block format, one vec_dot_act per output value.
void matmul_fallback(const Weight& w, const float* x, float* y, int64_t n_tokens,
                     ThreadPool* pool) {
    const DType at = act_type(w.type);
    const size_t xa_bytes = row_bytes(at, w.n_in);
    std::vector<uint8_t> xa(xa_bytes * size_t(n_tokens));
    for (int64_t t = 0; t < n_tokens; ++t)
        quantize_row(at, x + t * w.n_in, xa.data() + size_t(t) * xa_bytes, w.n_in);
    constexpr int64_t kRowsPerTask = 16;
    const int64_t n_tasks = (w.n_out + kRowsPerTask - 1) / kRowsPerTask;
    parallel_for(pool, n_tasks, [&](int64_t task, int) {
        const int64_t o0 = task * kRowsPerTask, o1 = std::min(w.n_out, o0 + kRowsPerTask);
        for (int64_t t = 0; t < n_tokens; ++t)
            for (int64_t o = o0; o < o1; ++o)
                y[t * w.n_out + o] = vec_dot_act(w.type, w.data + size_t(o) * w.row_stride,
                                                 xa.data() + size_t(t) * xa_bytes, w.n_in);
    });
}

}  // namespace

void matmul(const Weight& w, const float* x, float* y, int64_t n_tokens, ThreadPool* pool) {
    if (n_tokens <= 0 || w.n_out <= 0) return;
    const DType at = act_type(w.type);  // throws troupe::Error for types without compute
    if (!HWY_DYNAMIC_DISPATCH(HasKernel)(w.type)) return matmul_fallback(w, x, y, n_tokens, pool);

    const ActLayout l = act_layout(at, w.n_in);
    const size_t act_bytes = l.row_bytes * size_t(n_tokens);
    std::vector<uint8_t> local;
    uint8_t* act;
    if (pool) {
        act = static_cast<uint8_t*>(pool->shared_scratch(act_bytes));
    } else {
        local.resize(act_bytes + 64);
        act = reinterpret_cast<uint8_t*>(round_up_64(reinterpret_cast<uintptr_t>(local.data())));
    }
    HWY_DYNAMIC_DISPATCH(QuantizeActRows)(x, 0, n_tokens, act, l);

    // Equal row chunks, a few per thread so that a slow thread is compensated.
    const int n_threads = pool ? pool->size() : 1;
    const int64_t n_tasks = std::min<int64_t>((w.n_out + 3) / 4, 4 * n_threads);
    const int64_t rows_per_task = ((w.n_out + n_tasks - 1) / n_tasks + 3) / 4 * 4;
    const auto tile = HWY_DYNAMIC_DISPATCH(MatmulTile);
    parallel_for(pool, (w.n_out + rows_per_task - 1) / rows_per_task, [&](int64_t task, int) {
        const int64_t o0 = task * rows_per_task, o1 = std::min(w.n_out, o0 + rows_per_task);
        tile(w, act, l, 0, n_tokens, o0, o1, y);
    });
}

void get_rows(const Weight& w, const int32_t* ids, int64_t n_ids, float* out) {
    ref::get_rows(w, ids, n_ids, out);
}

}  // namespace ops
}  // namespace troupe
#endif  // HWY_ONCE
