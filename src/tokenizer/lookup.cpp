#include "tokenizer/lookup.h"

#include <xxhash.h>

#include <cstring>

#include "util/error.h"

namespace troupe {

namespace {

size_t capacity_for(size_t n_keys) {
    size_t cap = 16;
    while (cap < 2 * n_keys) cap *= 2;
    return cap;
}

}  // namespace

// ---- StringIdMap

void StringIdMap::reserve(size_t n_keys) {
    if (capacity_for(n_keys) <= slots_.size()) return;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity_for(n_keys), Slot{});
    n_keys_ = 0;
    for (const Slot& s : old)
        if (s.id >= 0) insert(std::string_view(s.data, s.len), s.id);
}

void StringIdMap::grow() {
    reserve(slots_.empty() ? 8 : slots_.size());
}

void StringIdMap::insert(std::string_view key, int32_t id) {
    TROUPE_CHECK(id >= 0);
    if (2 * (n_keys_ + 1) > slots_.size()) grow();
    const uint64_t h = XXH3_64bits(key.data(), key.size());
    const size_t mask = slots_.size() - 1;
    for (size_t i = size_t(h) & mask;; i = (i + 1) & mask) {
        Slot& s = slots_[i];
        if (s.id < 0) {
            s = Slot{h, key.data(), uint32_t(key.size()), id};
            ++n_keys_;
            return;
        }
        if (s.hash == h && s.len == key.size() &&
            std::memcmp(s.data, key.data(), key.size()) == 0) {
            s.id = id;
            return;
        }
    }
}

int32_t StringIdMap::find(std::string_view key) const {
    if (slots_.empty()) return -1;
    const uint64_t h = XXH3_64bits(key.data(), key.size());
    const size_t mask = slots_.size() - 1;
    for (size_t i = size_t(h) & mask;; i = (i + 1) & mask) {
        const Slot& s = slots_[i];
        if (s.id < 0) return -1;
        if (s.hash == h && s.len == key.size() && std::memcmp(s.data, key.data(), key.size()) == 0)
            return s.id;
    }
}

// ---- PairMap

uint64_t PairMap::mix(uint64_t k) {
    // Murmur3's 64-bit finaliser: every input bit affects the low bits used as the index.
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

void PairMap::reserve(size_t n_keys) {
    if (capacity_for(n_keys) <= slots_.size()) return;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity_for(n_keys), Slot{});
    n_keys_ = 0;
    for (const Slot& s : old)
        if (s.key != kEmpty)
            insert_first(int32_t(s.key >> 32), int32_t(s.key & 0xFFFFFFFF), s.value);
}

void PairMap::grow() {
    reserve(slots_.empty() ? 8 : slots_.size());
}

void PairMap::insert_first(int32_t a, int32_t b, Value v) {
    TROUPE_CHECK(a >= 0 && b >= 0);
    if (2 * (n_keys_ + 1) > slots_.size()) grow();
    const uint64_t key = key_of(a, b);
    const size_t mask = slots_.size() - 1;
    for (size_t i = size_t(mix(key)) & mask;; i = (i + 1) & mask) {
        Slot& s = slots_[i];
        if (s.key == key) return;
        if (s.key == kEmpty) {
            s = Slot{key, v};
            ++n_keys_;
            return;
        }
    }
}

const PairMap::Value* PairMap::find(int32_t a, int32_t b) const {
    if (slots_.empty() || a < 0 || b < 0) return nullptr;
    const uint64_t key = key_of(a, b);
    const size_t mask = slots_.size() - 1;
    for (size_t i = size_t(mix(key)) & mask;; i = (i + 1) & mask) {
        const Slot& s = slots_[i];
        if (s.key == key) return &s.value;
        if (s.key == kEmpty) return nullptr;
    }
}

}  // namespace troupe
