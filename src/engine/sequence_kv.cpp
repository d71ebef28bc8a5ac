#include "engine/sequence_kv.h"

#include <numeric>

namespace troupe {

kv::KvGeometry kv_geometry(const HParams& hp, int block_size, DType type) {
    kv::KvGeometry g;
    g.n_layer = hp.n_layer;
    g.n_kv_head = hp.n_head_kv;
    g.head_dim = hp.head_dim;
    g.block_size = block_size;
    g.type = type;
    return g;
}

SequenceKv::SequenceKv(const HParams& hp, int n_ctx, int block_size, DType type)
    : storage(kv_geometry(hp, block_size, type), (n_ctx + block_size - 1) / block_size) {
    block_table.resize(size_t(storage.n_blocks()));
    std::iota(block_table.begin(), block_table.end(), 0);
    for (int il = 0; il < hp.n_layer; ++il) views.push_back(storage.layer_view(il));
}

}  // namespace troupe
