// Open-addressing hash tables for the tokenizers' hot lookups (text -> token id, and a pair of
// piece ids -> merge). Both are built once when a vocabulary loads and are read-only after
// that, so concurrent lookups are safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace troupe {

// Maps text to an id. Keys are views: the bytes they point to must outlive the map and stay
// where they are. Keys of up to 8 bytes (most SentencePiece bigrams) are also kept packed in
// the slot, so looking them up touches no other memory.
class StringIdMap {
  public:
    void reserve(size_t n_keys);
    // Sets key -> id; a key inserted again takes the newer id.
    void insert(std::string_view key, int32_t id);
    // The id of `key`, or -1.
    int32_t find(std::string_view key) const { return find(make_key(key)); }
    size_t size() const { return n_keys_; }

    // Batched lookups (loading a vocabulary looks up hundreds of thousands of keys): hash the
    // keys, prefetch their slots, then find them, so the cache misses overlap. A Key views
    // its text, which must outlive it.
    struct Key {
        std::string_view text;
        uint64_t hash;
        uint64_t packed;  // the bytes of keys of at most 8 bytes, else 0
    };
    static Key make_key(std::string_view text);
    void prefetch(const Key& k) const;
    int32_t find(const Key& k) const;

  private:
    struct Slot {
        uint64_t hash = 0;
        const char* data = nullptr;
        uint64_t packed = 0;  // the key's bytes when it has at most 8
        uint32_t len = 0;
        int32_t id = -1;  // -1: empty slot
    };
    static bool same(const Slot& s, const Key& k);
    void grow();

    std::vector<Slot> slots_;  // capacity is a power of two, at most half full
    size_t n_keys_ = 0;
};

// Maps an ordered pair of non-negative ids to a (rank, result) value.
class PairMap {
  public:
    struct Value {
        int32_t rank = -1;
        int32_t result = -1;
    };
    void reserve(size_t n_keys);
    // Adds (a, b) -> v unless the pair is already present (the first insertion wins).
    void insert_first(int32_t a, int32_t b, Value v);
    // The value of (a, b), or nullptr.
    const Value* find(int32_t a, int32_t b) const;
    size_t size() const { return n_keys_; }

  private:
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    struct Slot {
        uint64_t key = kEmpty;
        Value value;
    };
    static uint64_t key_of(int32_t a, int32_t b) {
        return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
    }
    static uint64_t mix(uint64_t k);
    void grow();

    std::vector<Slot> slots_;
    size_t n_keys_ = 0;
};

}  // namespace troupe
