// KvStorage: sizes, the layout the attention kernel addresses, copy-on-write copies.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/ops.h"
#include "kv/kv_storage.h"
#include "util/error.h"
#include "util/fp16.h"
#include "util/sysinfo.h"

namespace troupe::kv {
namespace {

KvGeometry small_geometry(DType type) {
    KvGeometry g;
    g.n_layer = 3;
    g.n_kv_head = 2;
    g.head_dim = 4;
    g.block_size = 4;
    g.type = type;
    return g;
}

TEST(KvStorage, Sizes) {
    const KvGeometry g = small_geometry(DType::F16);
    // 2 (K, V) * 3 layers * 2 heads * 4 slots * 4 dims * 2 bytes
    EXPECT_EQ(g.bytes_per_block(), 384u);
    EXPECT_EQ(small_geometry(DType::F32).bytes_per_block(), 768u);
    EXPECT_EQ(g.blocks_for_budget(0), 0);
    EXPECT_EQ(g.blocks_for_budget(383), 0);
    EXPECT_EQ(g.blocks_for_budget(384 * 10 + 100), 10);
    KvStorage kv(g, 10);
    EXPECT_EQ(kv.n_blocks(), 10);
    EXPECT_EQ(kv.size_bytes(), 3840u);
}

TEST(KvStorage, RejectsBadGeometry) {
    KvGeometry g = small_geometry(DType::F16);
    g.n_layer = 0;
    EXPECT_THROW(KvStorage(g, 4), Error);
    g = small_geometry(DType::Q8_0);
    EXPECT_THROW(KvStorage(g, 4), Error);
    g = small_geometry(DType::BF16);
    g.head_dim = 5;  // BF16 keys are stored as dimension pairs
    EXPECT_THROW(g.validate(), Error);
    g = small_geometry(DType::F16);
    g.block_size = -1;
    EXPECT_THROW(g.validate(), Error);
    EXPECT_THROW(KvStorage(small_geometry(DType::F16), 0), Error);
    try {
        g = small_geometry(DType::F32);
        g.head_dim = 0;
        g.validate();
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("head_dim"), std::string::npos);
    }
    g = small_geometry(DType::F16);  // sizes a hostile file could give: no overflow
    g.n_layer = 1 << 16;
    g.n_kv_head = 1 << 16;
    EXPECT_THROW(g.validate(), Error);
    g = small_geometry(DType::F16);
    g.head_dim = 1 << 16;
    g.block_size = 1 << 16;
    EXPECT_THROW(g.validate(), Error);
}

TEST(KvStorage, DefaultBudget) {
    constexpr uint64_t kMiB = uint64_t(1) << 20;
    EXPECT_EQ(default_kv_budget_bytes(8192 * kMiB), 1024 * kMiB);
    EXPECT_EQ(default_kv_budget_bytes(256 * kMiB), 64 * kMiB);             // at least 64 MiB
    EXPECT_EQ(default_kv_budget_bytes(1024 * 1024 * kMiB), 16384 * kMiB);  // at most 16 GiB
    EXPECT_EQ(default_kv_budget_bytes(0), 512 * kMiB);                     // unknown machine
    EXPECT_GE(default_kv_budget_bytes(), 64 * kMiB);
}

// Writes every value through the addressing the attention kernel uses (ops::KvLayerView's
// contract in kernels/ops.h) and finds it where the documented layout puts it:
// [chunk][layer][K|V][kv_head][block of the chunk][...], blocks of three chunks.
void check_layout(DType type) {
    const KvGeometry g = small_geometry(type);
    KvStorage kv(g, 2 * KvStorage::kChunkBlocks + 5);
    constexpr int C = KvStorage::kChunkBlocks;
    const std::vector<int32_t> block_table = {3, C + 1, 2 * C + 4};  // positions 0..11
    const size_t elem = ops::kv_elem_bytes(type);
    auto value = [&](int layer, int kv_index, int pos, int head, int d) {
        return float(layer * 600 + kv_index * 300 + pos * 20 + head * 8 + d);  // exact in f16
    };
    // BF16 holds the values as raw bits (they are not all exact in BF16): only where they
    // land is checked.
    auto write = [&](uint8_t* p, float f) {
        if (type == DType::F32) {
            std::memcpy(p, &f, 4);
        } else if (type == DType::BF16) {
            const uint16_t h = uint16_t(f);
            std::memcpy(p, &h, 2);
        } else {
            const uint16_t h = fp32_to_fp16(f);
            std::memcpy(p, &h, 2);
        }
    };
    auto read = [&](const uint8_t* p) {
        if (type == DType::F32) {
            float f;
            std::memcpy(&f, p, 4);
            return f;
        }
        uint16_t h;
        std::memcpy(&h, p, 2);
        return type == DType::BF16 ? float(h) : fp16_to_fp32(h);
    };
    for (int layer = 0; layer < g.n_layer; ++layer) {
        const ops::KvLayerView view = kv.layer_view(layer);
        ASSERT_EQ(view.type, type);
        ASSERT_EQ(view.block_size, g.block_size);
        ASSERT_EQ(view.head_dim, g.head_dim);
        ASSERT_EQ(view.n_kv_head, g.n_kv_head);
        for (int p = 0; p < 12; ++p) {
            const size_t block = size_t(block_table[size_t(p / view.block_size)]);
            const size_t slot = size_t(p % view.block_size);
            for (int h = 0; h < view.n_kv_head; ++h) {
                const size_t head =
                    ops::kv_block_offset(view, int32_t(block)) + size_t(h) * view.head_stride;
                for (int d = 0; d < view.head_dim; ++d) {
                    // K transposed within the block, V by rows (ops::KvLayerView).
                    write(view.k + head + ops::kv_key_elem(view, d, slot) * elem,
                          value(layer, 0, p, h, d));
                    write(view.v + head + (slot * size_t(view.head_dim) + size_t(d)) * elem,
                          value(layer, 1, p, h, d));
                }
            }
        }
    }
    // The header's addressing, from the buffer's base: piece (2 * layer + kv) * n_kv_head + h
    // is one run over the blocks of each chunk.
    const uint8_t* base = kv.piece(0, 0);
    const size_t hb = g.head_bytes();
    for (int p = 0; p < 12; ++p) {
        const size_t block = size_t(block_table[size_t(p / g.block_size)]);
        const size_t slot = size_t(p % g.block_size);
        for (int layer = 0; layer < g.n_layer; ++layer)
            for (int kvi = 0; kvi < 2; ++kvi)
                for (int h = 0; h < g.n_kv_head; ++h) {
                    const size_t piece =
                        (size_t(layer) * 2 + size_t(kvi)) * size_t(g.n_kv_head) + size_t(h);
                    const uint8_t* run =
                        base + block / C * C * kv.bytes_per_block() + (piece * C + block % C) * hb;
                    ASSERT_EQ(run, kv.piece(int(block), int(piece)));
                    for (int d = 0; d < g.head_dim; ++d) {
                        // BF16's K: dimension pairs of each slot side by side.
                        const size_t bs = size_t(g.block_size);
                        const size_t key = type == DType::BF16
                                               ? (size_t(d / 2) * bs + slot) * 2 + size_t(d % 2)
                                               : size_t(d) * bs + slot;
                        const size_t index = kvi == 0 ? key : slot * size_t(g.head_dim) + size_t(d);
                        ASSERT_EQ(read(run + index * elem), value(layer, kvi, p, h, d))
                            << "pos " << p << " layer " << layer << " kv " << kvi;
                    }
                }
    }
    // Blocks 0 and 2 were never written: their pieces are all of a block's bytes.
    size_t piece_bytes = 0;
    for (int b : {0, 2})
        for (int i = 0; i < g.pieces_per_block(); ++i, piece_bytes += hb)
            for (size_t j = 0; j < hb; ++j) ASSERT_EQ(kv.piece(b, i)[j], 0);
    EXPECT_EQ(piece_bytes, 2 * kv.bytes_per_block());
}

TEST(KvStorage, LayoutMatchesKernelViewF16) {
    check_layout(DType::F16);
}
TEST(KvStorage, LayoutMatchesKernelViewF32) {
    check_layout(DType::F32);
}
TEST(KvStorage, LayoutMatchesKernelViewBF16) {
    check_layout(DType::BF16);
}

TEST(KvStorage, CopyBlockCopiesOneBlock) {
    const KvGeometry g = small_geometry(DType::F16);
    KvStorage kv(g, 4);
    EXPECT_EQ(g.pieces_per_block(), 12);
    EXPECT_EQ(size_t(g.pieces_per_block()) * g.head_bytes(), g.bytes_per_block());
    for (int b = 0; b < 4; ++b)
        for (int i = 0; i < g.pieces_per_block(); ++i)
            std::memset(kv.piece(b, i), 0x10 + 16 * b + i, g.head_bytes());
    kv.copy_block(1, 3);
    for (int b = 0; b < 4; ++b)
        for (int i = 0; i < g.pieces_per_block(); ++i) {
            const int expect = 0x10 + 16 * (b == 3 ? 1 : b) + i;
            for (size_t j = 0; j < g.head_bytes(); ++j)
                ASSERT_EQ(kv.piece(b, i)[j], expect) << "block " << b << " piece " << i;
        }
}

TEST(KvStorage, Move) {
    KvStorage a(small_geometry(DType::F16), 4);
    a.piece(2, 7)[5] = 42;
    KvStorage b(std::move(a));
    EXPECT_EQ(b.n_blocks(), 4);
    EXPECT_EQ(b.piece(2, 7)[5], 42);
    EXPECT_EQ(a.n_blocks(), 0);  // NOLINT(bugprone-use-after-move): moved-from is empty
    KvStorage c(small_geometry(DType::F32), 1);
    c = std::move(b);
    EXPECT_EQ(c.n_blocks(), 4);
    EXPECT_EQ(c.piece(2, 7)[5], 42);
}

// prefault() makes every block's pages resident (the cache is otherwise first-touched block
// by block inside the engine's steps) and leaves them zero and writable.
TEST(KvStorage, PrefaultMakesEveryBlockResident) {
    KvGeometry g;  // the 135M model's shape: 368 KiB a block
    g.n_layer = 30;
    g.n_kv_head = 3;
    g.head_dim = 64;
    g.block_size = 16;
    const int n_blocks = 70;  // 25 MiB, four chunks and a part of one
    const uint64_t before = current_rss_bytes();
    if (before == 0) GTEST_SKIP() << "no resident-memory figure on this system";
    KvStorage kv(g, n_blocks);
    kv.prefault();
    const uint64_t after = current_rss_bytes();
    EXPECT_GE(after, before + kv.size_bytes() * 9 / 10)
        << "resident " << (before >> 20) << " -> " << (after >> 20) << " MiB for a "
        << (kv.size_bytes() >> 20) << " MiB cache";
    for (int b = 0; b < n_blocks; ++b)
        for (int i = 0; i < g.pieces_per_block(); ++i) {
            const uint8_t* p = kv.piece(b, i);
            ASSERT_EQ(p[0], 0);
            ASSERT_EQ(p[g.head_bytes() - 1], 0);
        }
    kv.piece(69, 179)[g.head_bytes() - 1] = 7;
    EXPECT_EQ(kv.piece(69, 179)[g.head_bytes() - 1], 7);
}

}  // namespace
}  // namespace troupe::kv
