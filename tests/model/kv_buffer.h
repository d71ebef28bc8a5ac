// A single-sequence KV buffer for model tests: n_blocks physical blocks used in order
// (block table 0, 1, 2, ...), block-major like the engine's KV storage.
#pragma once

#include <numeric>
#include <vector>

#include "kernels/ops.h"
#include "model/hparams.h"

namespace troupe::test {

struct KvBuffer {
    KvBuffer(const HParams& hp, int n_ctx, int block_size = 16, DType type = DType::F16) {
        const size_t elem = type == DType::F16 ? 2 : 4;
        const int n_blocks = (n_ctx + block_size - 1) / block_size;
        const size_t head_bytes = size_t(block_size) * size_t(hp.head_dim) * elem;
        const size_t layer_bytes = 2 * size_t(hp.n_head_kv) * head_bytes;  // K then V
        const size_t block_bytes = layer_bytes * size_t(hp.n_layer);
        data.resize(block_bytes * size_t(n_blocks));
        block_table.resize(size_t(n_blocks));
        std::iota(block_table.begin(), block_table.end(), 0);
        for (int il = 0; il < hp.n_layer; ++il) {
            ops::KvLayerView v;
            v.type = type;
            v.k = data.data() + size_t(il) * layer_bytes;
            v.v = v.k + size_t(hp.n_head_kv) * head_bytes;
            v.block_stride = block_bytes;
            v.head_stride = head_bytes;
            v.block_size = block_size;
            v.head_dim = hp.head_dim;
            v.n_kv_head = hp.n_head_kv;
            views.push_back(v);
        }
    }
    std::vector<uint8_t> data;
    std::vector<int32_t> block_table;
    std::vector<ops::KvLayerView> views;
};

}  // namespace troupe::test
