#include "kv/kv_storage.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "util/error.h"
#include "util/sysinfo.h"

// An anonymous mapping where there is one, but not under AddressSanitizer: it puts no
// redzones around mapped memory, and calloc's catch a read past the cache in the sanitizer
// build (scripts/test.sh).
#if defined(__SANITIZE_ADDRESS__)  // GCC
#define TROUPE_KV_ASAN 1
#elif defined(__has_feature)  // Clang
#if __has_feature(address_sanitizer)
#define TROUPE_KV_ASAN 1
#endif
#endif
#if (defined(__unix__) || defined(__APPLE__)) && !defined(TROUPE_KV_ASAN)
#include <sys/mman.h>
#define TROUPE_KV_MMAP 1
#endif

namespace troupe::kv {

namespace {

// Bytes of one of K or V of one layer of one block: [n_kv_head, block_size, head_dim].
size_t half_bytes(const KvGeometry& g) {
    return size_t(g.n_kv_head) * size_t(g.block_size) * size_t(g.head_dim) *
           ops::kv_elem_bytes(g.type);
}

}  // namespace

void KvGeometry::validate() const {
    auto positive = [](int v, const char* name) {
        if (v <= 0)
            throw Error(std::string("kv cache: ") + name + " must be positive, got " +
                        std::to_string(v));
    };
    positive(n_layer, "n_layer");
    positive(n_kv_head, "n_kv_head");
    positive(head_dim, "head_dim");
    positive(block_size, "block_size");
    // Every size below fits: pieces_per_block() in int, bytes_per_block() in size_t.
    if (int64_t(n_layer) * int64_t(n_kv_head) > (int64_t(1) << 20) ||
        int64_t(head_dim) * int64_t(block_size) > (int64_t(1) << 24))
        throw Error("kv cache: geometry too large (" + std::to_string(n_layer) + " layers x " +
                    std::to_string(n_kv_head) + " kv heads, head_dim " + std::to_string(head_dim) +
                    " x block_size " + std::to_string(block_size) + ")");
    if (type != DType::F16 && type != DType::BF16 && type != DType::F32)
        throw Error(std::string("kv cache: type must be f16, bf16 or f32, got ") + type_name(type));
    if (!ops::kv_type_supported(type, head_dim))
        throw Error("kv cache: bf16 needs an even head_dim (K is stored as dimension pairs), got " +
                    std::to_string(head_dim));
}

size_t KvGeometry::bytes_per_block() const {
    return 2 * size_t(n_layer) * half_bytes(*this);
}

size_t KvGeometry::head_bytes() const {
    return size_t(block_size) * size_t(head_dim) * ops::kv_elem_bytes(type);
}

int KvGeometry::pieces_per_block() const {
    return 2 * n_layer * n_kv_head;
}

int64_t KvGeometry::blocks_for_budget(uint64_t bytes) const {
    const size_t per_block = bytes_per_block();
    if (per_block == 0) return 0;
    const uint64_t n = bytes / per_block;
    return int64_t(std::min<uint64_t>(n, uint64_t(std::numeric_limits<int32_t>::max())));
}

uint64_t default_kv_budget_bytes(uint64_t total_memory_bytes) {
    constexpr uint64_t kMiB = uint64_t(1) << 20;
    constexpr uint64_t kMin = 64 * kMiB, kMax = 16384 * kMiB, kUnknown = 512 * kMiB;
    if (total_memory_bytes == 0) return kUnknown;
    return std::clamp(total_memory_bytes / 8, kMin, kMax);
}

uint64_t default_kv_budget_bytes() {
    return default_kv_budget_bytes(total_memory_bytes());
}

KvStorage::KvStorage(const KvGeometry& geometry, int n_blocks) : geometry_(geometry) {
    geometry_.validate();
    if (n_blocks < 1)
        throw Error("kv cache: needs at least one block, got " + std::to_string(n_blocks));
    n_blocks_ = n_blocks;
    bytes_per_block_ = geometry_.bytes_per_block();
    if (bytes_per_block_ > std::numeric_limits<size_t>::max() / size_t(n_blocks))
        throw Error("kv cache: size overflows");
    // Whole chunks (the last one's spare blocks are never written, so never resident).
    const size_t n_chunks = (size_t(n_blocks) + kChunkBlocks - 1) / kChunkBlocks;
    const size_t bytes = n_chunks * kChunkBlocks * bytes_per_block_;
    const std::string failed = "kv cache: cannot allocate " + std::to_string(bytes >> 20) +
                               " MiB for " + std::to_string(n_blocks) + " blocks";
#ifdef TROUPE_KV_MMAP
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw Error(failed);
#if defined(MADV_HUGEPAGE)
    madvise(p, bytes, MADV_HUGEPAGE);  // a hint: see the header
#endif
    data_ = static_cast<uint8_t*>(p);
    mapped_bytes_ = bytes;
#else
    data_ = static_cast<uint8_t*>(std::calloc(n_chunks * kChunkBlocks, bytes_per_block_));
    if (!data_) throw Error(failed);
#endif
}

void KvStorage::release() {
    if (!data_) return;
#ifdef TROUPE_KV_MMAP
    munmap(data_, mapped_bytes_);
#else
    std::free(data_);
#endif
    data_ = nullptr;
    mapped_bytes_ = 0;
}

KvStorage::~KvStorage() {
    release();
}

KvStorage::KvStorage(KvStorage&& other) noexcept
    : geometry_(other.geometry_),
      n_blocks_(std::exchange(other.n_blocks_, 0)),
      bytes_per_block_(other.bytes_per_block_),
      data_(std::exchange(other.data_, nullptr)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)) {}

KvStorage& KvStorage::operator=(KvStorage&& other) noexcept {
    if (this != &other) {
        release();
        geometry_ = other.geometry_;
        n_blocks_ = std::exchange(other.n_blocks_, 0);
        bytes_per_block_ = other.bytes_per_block_;
        data_ = std::exchange(other.data_, nullptr);
        mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
    }
    return *this;
}

ops::KvLayerView KvStorage::layer_view(int layer) const {
    TROUPE_CHECK(data_ && layer >= 0 && layer < geometry_.n_layer);
    const size_t hb = geometry_.head_bytes();
    const size_t run = size_t(kChunkBlocks) * hb;  // one piece of every block of a chunk
    ops::KvLayerView view;
    view.type = geometry_.type;
    view.k = data_ + size_t(2 * layer) * size_t(geometry_.n_kv_head) * run;
    view.v = view.k + size_t(geometry_.n_kv_head) * run;
    view.block_stride = hb;
    view.head_stride = run;
    view.chunk_shift = kChunkShift;
    view.chunk_stride = size_t(kChunkBlocks) * bytes_per_block_;
    view.block_size = geometry_.block_size;
    view.head_dim = geometry_.head_dim;
    view.n_kv_head = geometry_.n_kv_head;
    return view;
}

void KvStorage::copy_block(int src, int dst) {
    TROUPE_CHECK(src != dst);
    const size_t hb = geometry_.head_bytes();
    for (int i = 0; i < geometry_.pieces_per_block(); ++i)
        std::memcpy(piece(dst, i), piece(src, i), hb);
}

uint8_t* KvStorage::piece(int block, int i) {
    TROUPE_CHECK(data_ && block >= 0 && block < n_blocks_ && i >= 0 &&
                 i < geometry_.pieces_per_block());
    const size_t chunk = size_t(block) >> kChunkShift,
                 in_chunk = size_t(block) & (kChunkBlocks - 1);
    return data_ + chunk * size_t(kChunkBlocks) * bytes_per_block_ +
           (size_t(i) * kChunkBlocks + in_chunk) * geometry_.head_bytes();
}

void KvStorage::prefault() {
    constexpr size_t kPage = 4096;  // the smallest page: a huge page takes its first write
    const size_t hb = geometry_.head_bytes();
    for (int b = 0; b < n_blocks_; ++b)
        for (int i = 0; i < geometry_.pieces_per_block(); ++i) {
            volatile uint8_t* p = piece(b, i);
            for (size_t o = 0; o < hb; o += kPage) p[o] = 0;
            p[hb - 1] = 0;  // a piece may end on the next page
        }
}

const uint8_t* KvStorage::piece(int block, int i) const {
    return const_cast<KvStorage*>(this)->piece(block, i);
}

}  // namespace troupe::kv
