// Dispatch of the ops to their kernels. Until the SIMD kernels land, the scalar references
// run here, split across the thread pool where the work is large.
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

void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t dim,
              float eps) {
    ref::rms_norm(x, weight, y, n_rows, dim, eps);
}

void rope(float* x, const int32_t* pos, int64_t n_rows, int n_heads, int head_dim,
          const RopeParams& p) {
    ref::rope(x, pos, n_rows, n_heads, head_dim, p);
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
    ref::swiglu(gate, up, out, n);
}

void add_inplace(float* y, const float* x, int64_t n) { ref::add_inplace(y, x, n); }

void softmax(float* x, int64_t n) { ref::softmax(x, n); }

void kv_store(const KvLayerView& kv, const int32_t* block_table, const int32_t* pos,
              const float* k, const float* v, int64_t n) {
    ref::kv_store(kv, block_table, pos, k, v, n);
}

void attention(const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs, int n_head,
               float scale, ThreadPool* pool) {
    auto task = [&](int64_t s, int) { ref::attention(kv, seqs + s, 1, n_head, scale); };
    if (pool)
        pool->run(n_seqs, task);
    else
        for (int s = 0; s < n_seqs; ++s) task(s, 0);
}

}  // namespace troupe::ops
