// The bytes of the paged KV cache: one buffer holding n_blocks blocks of block_size token
// slots, each with K and V for every layer.
//
// Layout, block-major: [block][layer][K | V][kv_head][...] of `type` (F16 or F32), where a
// kv head's K is [head_dim][slot] (transposed: the attention kernel reads dimension d of
// consecutive keys as one vector) and its V is [slot][head_dim].
// One physical block is one contiguous range of bytes_per_block() bytes, so copy-on-write of a
// block is one memcpy and a block's bytes stay together in memory for the attention kernel.
// layer_view() hands the attention kernel (kernels/ops.h) exactly this addressing:
//   element d of K of (block b, kv head h, slot s) of layer l =
//     base + b * bytes_per_block + (2 * l) * half + h * head_stride + (d * block_size + s) * elem
//   of V: base + b * bytes_per_block + (2 * l + 1) * half + h * head_stride
//     + (s * head_dim + d) * elem, where half = n_kv_head * head_stride and
//   head_stride = block_size * head_dim * elem.
//
// The buffer is zero-initialised lazily by the OS (calloc): pages are only resident once a
// block is written, so resident memory grows with the blocks actually used, not the budget.
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
    DType type = DType::F16;  // F16 or F32

    // Throws troupe::Error naming the bad field (non-positive sizes, type not F16/F32).
    void validate() const;
    size_t bytes_per_block() const;  // K and V of every layer for block_size tokens
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

    // Copies every byte of block src into block dst (copy-on-write). src != dst.
    void copy_block(int src, int dst);

    // The bytes_per_block() bytes of one block (for tests and debugging).
    uint8_t* block_data(int block);
    const uint8_t* block_data(int block) const;

  private:
    KvGeometry geometry_;
    int n_blocks_ = 0;
    size_t bytes_per_block_ = 0;
    uint8_t* data_ = nullptr;  // [n_blocks, bytes_per_block], calloc'd
};

}  // namespace troupe::kv
