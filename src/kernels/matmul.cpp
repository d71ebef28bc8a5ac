// Matrix products (SIMD kernels pending): the scalar reference split over the pool.
#include "kernels/ops.h"

#include <algorithm>
#include <vector>

#include "kernels/ops_ref.h"
#include "tensor/quant_ref.h"

namespace troupe::ops {

void matmul(const Weight& w, const float* x, float* y, int64_t n_tokens, ThreadPool* pool) {
    const DType at = act_type(w.type);
    const size_t xa_bytes = row_bytes(at, w.n_in);
    std::vector<uint8_t> xa(xa_bytes * size_t(n_tokens));
    for (int64_t t = 0; t < n_tokens; ++t)
        quantize_row(at, x + t * w.n_in, xa.data() + size_t(t) * xa_bytes, w.n_in);
    constexpr int64_t kRowsPerTask = 16;
    const int64_t n_tasks = (w.n_out + kRowsPerTask - 1) / kRowsPerTask;
    auto task = [&](int64_t task_id, int) {
        const int64_t o0 = task_id * kRowsPerTask, o1 = std::min(w.n_out, o0 + kRowsPerTask);
        for (int64_t t = 0; t < n_tokens; ++t)
            for (int64_t o = o0; o < o1; ++o)
                y[t * w.n_out + o] = vec_dot_act(w.type, w.data + size_t(o) * w.row_stride,
                                                 xa.data() + size_t(t) * xa_bytes, w.n_in);
    };
    if (pool)
        pool->run(n_tasks, task);
    else
        for (int64_t t = 0; t < n_tasks; ++t) task(t, 0);
}

void get_rows(const Weight& w, const int32_t* ids, int64_t n_ids, float* out) {
    ref::get_rows(w, ids, n_ids, out);
}

}  // namespace troupe::ops
