// The KV cache of a model for one sequence on its own (perplexity, model tests): the engine's
// storage (kv::KvStorage, so the engine's layout) with its blocks used in order (block table
// 0, 1, 2, ...), enough for n_ctx tokens; and the geometry the engine gives a model's cache.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "kv/kv_storage.h"
#include "model/hparams.h"

namespace troupe {

kv::KvGeometry kv_geometry(const HParams& hp, int block_size, DType type);

struct SequenceKv {
    SequenceKv(const HParams& hp, int n_ctx, int block_size = 16, DType type = DType::F16);
    kv::KvStorage storage;
    std::vector<int32_t> block_table;     // [storage.n_blocks()]: 0, 1, 2, ...
    std::vector<ops::KvLayerView> views;  // [n_layer]
};

}  // namespace troupe
