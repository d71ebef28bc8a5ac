// A bounded cache of word -> tokens, shared by all tokenize() calls of one tokenizer.
//
// Merging is the expensive part of tokenization and words repeat (Zipf's law within a text,
// and agents send the same system prompt again and again), so the tokens of each word (BPE)
// or chunk (SPM) are kept. The cache holds at most `max_entries` words of at most
// `kMaxKeyBytes` bytes; when it is full it is emptied and refills with what is in use.
//
// Thread-safety: internally synchronized (a reader-writer lock); lookups from many threads
// proceed in parallel.
#pragma once

#include <cstdint>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace troupe {

class TokenCache {
  public:
    static constexpr size_t kMaxKeyBytes = 64;

    explicit TokenCache(size_t max_entries = size_t(1) << 15) : max_entries_(max_entries) {}

    // Appends the tokens cached for `key` to `out` and returns true, or returns false.
    bool lookup(std::string_view key, std::vector<int32_t>& out) const;

    // Remembers `ids` as the tokens of `key` (ignored for keys longer than kMaxKeyBytes).
    void insert(std::string_view key, std::span<const int32_t> ids);

    size_t size() const;
    void clear();

  private:
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    struct Entry {
        uint32_t offset;  // into ids_
        uint32_t n;
    };

    size_t max_entries_;
    mutable std::shared_mutex mutex_;
    std::unordered_map<std::string, Entry, Hash, std::equal_to<>> entries_;
    std::vector<int32_t> ids_;  // the tokens of every entry, back to back
};

}  // namespace troupe
