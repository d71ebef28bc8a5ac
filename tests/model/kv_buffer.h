// A single-sequence KV cache for model tests: the engine's storage (kv::KvStorage, so the
// engine's layout) with n_blocks physical blocks used in order (block table 0, 1, 2, ...).
#pragma once

#include <numeric>
#include <vector>

#include "kernels/ops.h"
#include "kv/kv_storage.h"
#include "model/hparams.h"

namespace troupe::test {

inline kv::KvGeometry kv_geometry(const HParams& hp, int block_size, DType type) {
    kv::KvGeometry g;
    g.n_layer = hp.n_layer;
    g.n_kv_head = hp.n_head_kv;
    g.head_dim = hp.head_dim;
    g.block_size = block_size;
    g.type = type;
    return g;
}

struct KvBuffer {
    KvBuffer(const HParams& hp, int n_ctx, int block_size = 16, DType type = DType::F16)
        : storage(kv_geometry(hp, block_size, type), (n_ctx + block_size - 1) / block_size) {
        block_table.resize(size_t(storage.n_blocks()));
        std::iota(block_table.begin(), block_table.end(), 0);
        for (int il = 0; il < hp.n_layer; ++il) views.push_back(storage.layer_view(il));
    }
    kv::KvStorage storage;
    std::vector<int32_t> block_table;
    std::vector<ops::KvLayerView> views;
};

}  // namespace troupe::test
