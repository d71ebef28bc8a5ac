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

StringIdMap::Key StringIdMap::make_key(std::string_view text) {
    if (text.size() > 8) return {text, XXH3_64bits(text.data(), text.size()), 0};
    uint64_t packed = 0;
    for (size_t i = 0; i < text.size(); ++i) packed |= uint64_t(uint8_t(text[i])) << (8 * i);
    // A multiply-xorshift of the packed bytes and the length (so "a" and "a\0" differ).
    uint64_t h = (packed ^ (uint64_t(text.size()) << 59)) * 0x9E3779B97F4A7C15ULL;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 32;
    return {text, h, packed};
}

bool StringIdMap::same(const Slot& s, const Key& k) {
    if (s.hash != k.hash || s.len != k.text.size()) return false;
    if (k.text.size() <= 8) return s.packed == k.packed;
    return std::memcmp(s.data, k.text.data(), k.text.size()) == 0;
}

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
    const Key k = make_key(key);
    const size_t mask = slots_.size() - 1;
    for (size_t i = size_t(k.hash) & mask;; i = (i + 1) & mask) {
        Slot& s = slots_[i];
        if (s.id < 0) {
            s = Slot{k.hash, key.data(), k.packed, uint32_t(key.size()), id};
            ++n_keys_;
            return;
        }
        if (same(s, k)) {
            s.id = id;
            return;
        }
    }
}

void StringIdMap::prefetch(const Key& k) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[size_t(k.hash) & (slots_.size() - 1)]);
}

int32_t StringIdMap::find(const Key& k) const {
    if (slots_.empty()) return -1;
    const size_t mask = slots_.size() - 1;
    for (size_t i = size_t(k.hash) & mask;; i = (i + 1) & mask) {
        const Slot& s = slots_[i];
        if (s.id < 0) return -1;
        if (same(s, k)) return s.id;
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
