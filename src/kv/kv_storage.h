// The bytes of the paged KV cache: n_blocks blocks of block_size token slots, each with K and
// V for every layer.
//
// Layout: blocks in chunks of kChunkBlocks; per chunk, per layer and kv head:
// [chunk][layer][K | V][kv_head][block of the chunk][...] of `type` (F16, BF16 or F32), where one
// block's K of one kv head is [head_dim][slot] (transposed: the attention kernel reads
// dimension d of consecutive keys as one vector; BF16: [head_dim / 2][slot][2], dimension
// pairs, ops::kv_key_elem) and its V is [slot][head_dim]. So the K (and
// the V) of one layer and kv head is one run of kChunkBlocks blocks: a sequence whose blocks
// were allocated together reads 16 blocks (256 tokens) as one run, which the hardware
// prefetcher follows. Against the block-major layout before these runs ([block][layer][K |
// V][kv_head][...]: one kv head's 2 KiB runs 360 KiB apart for the 135M model) cold decode
// attention is 15-25% faster and decode after a 1,478-token prompt 20-30%
// (src/kernels/README.md, Attention, Layout). layer_view() hands the attention kernel
// (kernels/ops.h) exactly this addressing, with piece = (2 * l + kv) * n_kv_head + h (kv: 0
// for K, 1 for V), head_bytes = block_size * head_dim * elem and C = kChunkBlocks:
//   element d of K of (block b, kv head h, slot s) of layer l =
//     base + (b / C) * C * block_bytes + (piece * C + b % C) * head_bytes
//          + (d * block_size + s) * elem
//   of V: the same with (s * head_dim + d) * elem.
// A block is therefore 2 * n_layer * n_kv_head pieces of head_bytes (copy_block copies each).
//
// The buffer is an anonymous mapping zero-filled lazily by the OS: pages are only resident
// once written, so resident memory grows with the blocks written so far (a chunk at a time
// at most), not with the budget. It asks for transparent huge pages (2 MiB): a decode step
// reads every layer's K/V of every sequence, thousands of 4 KiB pages, and their TLB misses
// cost single-sequence attention 10-16%. The chunks keep that from making every piece's
// array resident: a 2 MiB page holds one chunk's runs of many arrays, so its first write
// makes resident what the next blocks of the chunk will use anyway. (With the arrays over all
// blocks, each of the 180 arrays of the 135M model would have kept 2 MiB resident.)
//
// Thread-safety: none of the methods mutate shared state except copy_block(); distinct blocks
// may be written concurrently through views (that is how the forward pass uses it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/ops.h"
#include "tensor/types.h"

namespace troupe::kv {

// Shape of one block. Defaults: 16-token blocks, F16 K/V (half the memory of F32, and what
// llama.cpp stores by default).
struct KvGeometry {
    int n_layer = 0;
    int n_kv_head = 0;
    int head_dim = 0;
    int block_size = 16;      // token slots per block
    DType type = DType::F16;  // F16, BF16 (even head_dim) or F32

    // Throws troupe::Error naming the bad field (non-positive sizes, type not F16/BF16/F32,
    // BF16 with an odd head_dim).
    void validate() const;
    size_t bytes_per_block() const;  // K and V of every layer for block_size tokens
    size_t head_bytes() const;       // one piece: K or V of one layer and kv head of a block
    int pieces_per_block() const;    // 2 * n_layer * n_kv_head
    // Whole blocks that fit in `bytes` (0 when not even one fits).
    int64_t blocks_for_budget(uint64_t bytes) const;
};

// The default KV budget: one eighth of the machine's physical memory, at least 64 MiB and at
// most 16 GiB (512 MiB when the size of memory is unknown). Why one eighth: on a phone or a
// laptop the weights take the largest share (a 4-bit 3B model is ~2 GB, an 8-bit 8B ~8 GB),
// the OS and the app's other memory need most of the rest, and mobile OSes kill apps well
// before all memory is used; an eighth of 8 GB (1 GiB of F16 KV) holds ~8k tokens of an 8B
// GQA model, or ~30k of a 1B one, which covers several agents sharing a long prefix.
uint64_t default_kv_budget_bytes(uint64_t total_memory_bytes);
uint64_t default_kv_budget_bytes();  // for this machine (util/sysinfo.h)

class KvStorage {
  public:
    // Blocks per chunk of the layout (a power of two).
    static constexpr int kChunkShift = 4;
    static constexpr int kChunkBlocks = 1 << kChunkShift;

    // Allocates n_blocks blocks. Throws troupe::Error on a bad geometry, n_blocks < 1, or when
    // the allocation fails.
    KvStorage(const KvGeometry& geometry, int n_blocks);
    ~KvStorage();
    KvStorage(const KvStorage&) = delete;  // expensive: no implicit copies
    KvStorage& operator=(const KvStorage&) = delete;
    KvStorage(KvStorage&& other) noexcept;
    KvStorage& operator=(KvStorage&& other) noexcept;

    const KvGeometry& geometry() const { return geometry_; }
    int n_blocks() const { return n_blocks_; }
    size_t bytes_per_block() const { return bytes_per_block_; }
    size_t size_bytes() const { return bytes_per_block_ * size_t(n_blocks_); }

    // How the attention kernel addresses layer `layer` (0 <= layer < n_layer).
    ops::KvLayerView layer_view(int layer) const;

    // Makes every page that holds a block resident now (one write per page of each piece),
    // so that no later write of a block page-faults: the first write of a fresh page costs
    // the OS zeroing it (a 2 MiB page: 0.3-7.8 ms measured in a cloud VM, the most for memory
    // new to the guest), inside whichever step first uses the block. llama.cpp clears its KV
    // buffer at start and vLLM preallocates its blocks, so neither pays this while serving.
    // Call before any block is written: it writes zeros. Resident memory becomes the whole
    // cache (EngineConfig::kv_prefault).
    void prefault();

    // Copies every byte of block src into block dst (copy-on-write). src != dst.
    void copy_block(int src, int dst);

    // Piece i (0 <= i < pieces_per_block(), i = (2 * layer + kv) * n_kv_head + kv_head) of a
    // block: geometry().head_bytes() bytes. The pieces are all of the block's bytes.
    uint8_t* piece(int block, int i);
    const uint8_t* piece(int block, int i) const;

  private:
    void release();

    KvGeometry geometry_;
    int n_blocks_ = 0;
    size_t bytes_per_block_ = 0;
    uint8_t* data_ = nullptr;  // [pieces_per_block][n_blocks][head_bytes], mapped
    size_t mapped_bytes_ = 0;
};

}  // namespace troupe::kv
