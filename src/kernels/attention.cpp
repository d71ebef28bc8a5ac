// Attention over the paged KV cache (SIMD kernels pending): the scalar reference per sequence.
#include "kernels/ops.h"

#include "kernels/ops_ref.h"

namespace troupe::ops {

void kv_store(const KvLayerView& kv, const int32_t* block_table, const int32_t* pos, const float* k,
              const float* v, int64_t n) {
    ref::kv_store(kv, block_table, pos, k, v, n);
}

void attention(const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs, int n_head, float scale,
               ThreadPool* pool) {
    auto task = [&](int64_t s, int) { ref::attention(kv, seqs + s, 1, n_head, scale); };
    if (pool)
        pool->run(n_seqs, task);
    else
        for (int s = 0; s < n_seqs; ++s) task(s, 0);
}

}  // namespace troupe::ops
