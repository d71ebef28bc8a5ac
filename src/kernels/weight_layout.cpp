#include "kernels/weight_layout.h"

#include <cstring>

#include "tensor/quant_blocks.h"
#include "tensor/quant_ref.h"
#include "util/error.h"

namespace troupe::ops {

static_assert(kInterleavedBlockBytes == size_t(kInterleaveRows) * sizeof(BlockQ8_0));

bool can_interleave(const Weight& w) {
    return w.type == DType::Q8_0 && w.layout == WeightLayout::Rows && w.n_in > 0 &&
           w.n_in % QK8_0 == 0 && w.n_out > 0 && w.n_out % kInterleaveRows == 0 &&
           w.row_stride == row_bytes(DType::Q8_0, w.n_in);
}

namespace {

// The bytes of block k of row group g, and where row r's scale and 4-value group j are in it.
uint8_t* group_block(uint8_t* data, int64_t n_blocks, int64_t g, int64_t k) {
    return data + size_t(g * n_blocks + k) * kInterleavedBlockBytes;
}
constexpr size_t scale_at(int64_t r) {
    return size_t(r) * 2;
}
constexpr size_t values_at(int64_t r, int j) {
    return 32 + size_t(j) * 64 + size_t(r) * 4;
}

}  // namespace

Weight interleave(const Weight& w, uint8_t* dst) {
    TROUPE_CHECK(can_interleave(w));
    const int64_t n_blocks = w.n_in / QK8_0;
    for (int64_t o = 0; o < w.n_out; ++o) {
        const auto* row = reinterpret_cast<const BlockQ8_0*>(w.data + size_t(o) * w.row_stride);
        const int64_t g = o / kInterleaveRows, r = o % kInterleaveRows;
        for (int64_t k = 0; k < n_blocks; ++k) {
            uint8_t* b = group_block(dst, n_blocks, g, k);
            std::memcpy(b + scale_at(r), &row[k].d, 2);
            for (int j = 0; j < QK8_0 / 4; ++j)
                std::memcpy(b + values_at(r, j), row[k].qs + 4 * j, 4);
        }
    }
    Weight out = w;
    out.data = dst;
    out.layout = WeightLayout::Interleaved16;
    return out;
}

const uint8_t* file_row(const Weight& w, int64_t o, uint8_t* tmp) {
    if (w.layout == WeightLayout::Rows) return w.data + size_t(o) * w.row_stride;
    const int64_t n_blocks = w.n_in / QK8_0;
    const int64_t g = o / kInterleaveRows, r = o % kInterleaveRows;
    auto* row = reinterpret_cast<BlockQ8_0*>(tmp);
    for (int64_t k = 0; k < n_blocks; ++k) {
        const uint8_t* b = group_block(const_cast<uint8_t*>(w.data), n_blocks, g, k);
        std::memcpy(&row[k].d, b + scale_at(r), 2);
        for (int j = 0; j < QK8_0 / 4; ++j) std::memcpy(row[k].qs + 4 * j, b + values_at(r, j), 4);
    }
    return tmp;
}

}  // namespace troupe::ops
