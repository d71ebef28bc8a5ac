#include "kv/kv_storage.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "util/error.h"
#include "util/sysinfo.h"

namespace troupe::kv {

namespace {

size_t elem_size(DType type) {
    return type == DType::F16 ? 2 : 4;
}

// Bytes of one of K or V of one layer of one block: [n_kv_head, block_size, head_dim].
size_t half_bytes(const KvGeometry& g) {
    return size_t(g.n_kv_head) * size_t(g.block_size) * size_t(g.head_dim) * elem_size(g.type);
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
    if (type != DType::F16 && type != DType::F32)
        throw Error(std::string("kv cache: type must be f16 or f32, got ") + type_name(type));
}

size_t KvGeometry::bytes_per_block() const {
    return 2 * size_t(n_layer) * half_bytes(*this);
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
    data_ = static_cast<uint8_t*>(std::calloc(size_t(n_blocks), bytes_per_block_));
    if (!data_)
        throw Error("kv cache: cannot allocate " + std::to_string(size_bytes() >> 20) +
                    " MiB for " + std::to_string(n_blocks) + " blocks");
}

KvStorage::~KvStorage() {
    std::free(data_);
}

KvStorage::KvStorage(KvStorage&& other) noexcept
    : geometry_(other.geometry_),
      n_blocks_(std::exchange(other.n_blocks_, 0)),
      bytes_per_block_(other.bytes_per_block_),
      data_(std::exchange(other.data_, nullptr)) {}

KvStorage& KvStorage::operator=(KvStorage&& other) noexcept {
    if (this != &other) {
        std::free(data_);
        geometry_ = other.geometry_;
        n_blocks_ = std::exchange(other.n_blocks_, 0);
        bytes_per_block_ = other.bytes_per_block_;
        data_ = std::exchange(other.data_, nullptr);
    }
    return *this;
}

ops::KvLayerView KvStorage::layer_view(int layer) const {
    TROUPE_CHECK(data_ && layer >= 0 && layer < geometry_.n_layer);
    const size_t half = half_bytes(geometry_);
    ops::KvLayerView view;
    view.type = geometry_.type;
    view.k = data_ + size_t(2 * layer) * half;
    view.v = view.k + half;
    view.block_stride = bytes_per_block_;
    view.head_stride =
        size_t(geometry_.block_size) * size_t(geometry_.head_dim) * elem_size(geometry_.type);
    view.block_size = geometry_.block_size;
    view.head_dim = geometry_.head_dim;
    view.n_kv_head = geometry_.n_kv_head;
    return view;
}

void KvStorage::copy_block(int src, int dst) {
    TROUPE_CHECK(src != dst);
    std::memcpy(block_data(dst), block_data(src), bytes_per_block_);
}

uint8_t* KvStorage::block_data(int block) {
    TROUPE_CHECK(data_ && block >= 0 && block < n_blocks_);
    return data_ + size_t(block) * bytes_per_block_;
}

const uint8_t* KvStorage::block_data(int block) const {
    TROUPE_CHECK(data_ && block >= 0 && block < n_blocks_);
    return data_ + size_t(block) * bytes_per_block_;
}

}  // namespace troupe::kv
