#include "kernels/weight_layout.h"

#include <cstring>
#include <vector>

#include "kernels/matmul_kernels.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_ref.h"
#include "util/error.h"

namespace troupe::ops {

static_assert(interleaved_block_bytes(DType::Q8_0) == size_t(kInterleaveRows) * sizeof(BlockQ8_0));
static_assert(interleaved_block_bytes(DType::Q4_0) == size_t(kInterleaveRows) * sizeof(BlockQ4_0));

bool can_interleave(const Weight& w, bool widen_q5_0) {
    const bool type_ok =
        w.type == DType::Q8_0 || w.type == DType::Q4_0 || (widen_q5_0 && w.type == DType::Q5_0);
    return type_ok && w.layout == WeightLayout::Rows && w.n_in > 0 && w.n_in % 32 == 0 &&
           w.n_out > 0 && w.n_out % kInterleaveRows == 0 &&
           w.row_stride == row_bytes(w.type, w.n_in);
}

DType interleaved_type(DType type) {
    return type == DType::Q5_0 ? DType::Q8_0 : type;
}

size_t interleaved_bytes(const Weight& w) {
    return size_t(w.n_out) * row_bytes(interleaved_type(w.type), w.n_in);
}

bool widen_q5_0_here() {
    return kern::interleave_widens_q5_0();
}

namespace {

// Row group g's bytes, and where row r's scale of block k and its 4-byte group j are in them.
uint8_t* group_at(uint8_t* data, DType type, int64_t n_blocks, int64_t g) {
    return data + size_t(g * n_blocks) * interleaved_block_bytes(type);
}
constexpr size_t scale_at(int64_t k, int64_t r) {
    return interleaved_scales_at(k) + size_t(r) * 2;
}
size_t values_at(DType type, int64_t n_blocks, int64_t k, int64_t r, int j) {
    return interleaved_values_at(type, n_blocks, k) + size_t(j) * 64 + size_t(r) * 4;
}

// A file block: its f16 scale (2 bytes) then its q_bytes quantised bytes.
size_t block_bytes(DType type) {
    return type == DType::Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
}

// A Q5_0 block as the Q8_0 block of the same values: its scale, then its levels q - 16.
void widen_q5_0_block(const uint8_t* src, uint8_t* dst) {
    BlockQ5_0 b;
    std::memcpy(&b, src, sizeof(b));
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    std::memcpy(dst, &b.d, 2);
    for (int i = 0; i < 32; ++i) {
        const int nibble = i < 16 ? b.qs[i] & 15 : b.qs[i - 16] >> 4;
        const int level = (nibble | int((qh >> i) & 1) << 4) - 16;
        dst[2 + i] = uint8_t(int8_t(level));
    }
}

}  // namespace

Weight interleave(const Weight& w, uint8_t* dst) {
    TROUPE_CHECK(can_interleave(w, w.type == DType::Q5_0));
    const DType type = interleaved_type(w.type);
    const int64_t n_blocks = w.n_in / 32;
    const size_t fb = block_bytes(type);
    const int n_groups = int(fb - 2) / 4;  // 4-byte groups of quantised bytes per block
    std::vector<uint8_t> widened(type != w.type ? row_bytes(type, w.n_in) : 0);
    for (int64_t o = 0; o < w.n_out; ++o) {
        const uint8_t* row = w.data + size_t(o) * w.row_stride;
        if (type != w.type) {
            for (int64_t k = 0; k < n_blocks; ++k)
                widen_q5_0_block(row + size_t(k) * sizeof(BlockQ5_0),
                                 widened.data() + size_t(k) * fb);
            row = widened.data();
        }
        const int64_t g = o / kInterleaveRows, r = o % kInterleaveRows;
        for (int64_t k = 0; k < n_blocks; ++k) {
            const uint8_t* blk = row + size_t(k) * fb;
            uint8_t* grp = group_at(dst, type, n_blocks, g);
            std::memcpy(grp + scale_at(k, r), blk, 2);
            for (int j = 0; j < n_groups; ++j)
                std::memcpy(grp + values_at(type, n_blocks, k, r, j), blk + 2 + 4 * j, 4);
        }
    }
    Weight out = w;
    out.type = type;
    out.data = dst;
    out.row_stride = row_bytes(type, w.n_in);
    out.layout = WeightLayout::Interleaved16;
    return out;
}

const uint8_t* file_row(const Weight& w, int64_t o, uint8_t* tmp) {
    if (w.layout == WeightLayout::Rows) return w.data + size_t(o) * w.row_stride;
    const int64_t n_blocks = w.n_in / 32;
    const size_t fb = block_bytes(w.type);
    const int n_groups = int(fb - 2) / 4;
    const int64_t g = o / kInterleaveRows, r = o % kInterleaveRows;
    for (int64_t k = 0; k < n_blocks; ++k) {
        const uint8_t* grp = group_at(const_cast<uint8_t*>(w.data), w.type, n_blocks, g);
        uint8_t* blk = tmp + size_t(k) * fb;
        std::memcpy(blk, grp + scale_at(k, r), 2);
        for (int j = 0; j < n_groups; ++j)
            std::memcpy(blk + 2 + 4 * j, grp + values_at(w.type, n_blocks, k, r, j), 4);
    }
    return tmp;
}

}  // namespace troupe::ops
