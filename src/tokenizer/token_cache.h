// A bounded cache of word -> tokens, shared by all tokenize() calls of one tokenizer.
//
// Merging is the expensive part of tokenization and words repeat (Zipf's law within a text,
// and agents send the same system prompt again and again), so the tokens of each word (BPE)
// or chunk (SPM) are kept. The cache holds at most `max_entries` words of at most
// `kMaxKeyBytes` bytes; when it is full it is emptied and refills with what is in use.
//
// Access goes through a Session, one per stretch of text: it holds the shared lock while the
// stretch is encoded (lookups of many threads proceed in parallel) and adds the new words
// under the exclusive lock in batches (every kPublishEvery new words, and when it ends), so a
// long text already benefits from its own repeated words.
//
// Thread-safety: internally synchronized.
#pragma once

#include <cstdint>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

class TokenCache {
  public:
    static constexpr size_t kMaxKeyBytes = 64;
    static constexpr size_t kPublishEvery = 64;

    explicit TokenCache(size_t max_entries = size_t(1) << 15);

    class Session {
      public:
        explicit Session(TokenCache& cache);
        ~Session();  // adds the words remembered during the session
        Session(const Session&) = delete;
        Session& operator=(const Session&) = delete;

        // Appends the tokens cached for `key` to `out` and returns true, or returns false.
        bool lookup(std::string_view key, std::vector<int32_t>& out) const;
        // Remembers `ids` as the tokens of `key` (ignored for keys longer than kMaxKeyBytes). It
        // may briefly release the shared lock to publish.
        void remember(std::string_view key, std::span<const int32_t> ids);

      private:
        void publish(bool relock);

        TokenCache& cache_;
        std::shared_lock<std::shared_mutex> lock_;
        std::string keys_;  // the new words, back to back
        std::vector<int32_t> ids_;
        struct New {
            uint32_t key_off, key_len, ids_off, n_ids;
        };
        std::vector<New> new_;
    };

    size_t size() const;
    void clear();

  private:
    struct Slot {
        uint64_t hash = 0;
        uint32_t key_off = 0, key_len = 0;  // into keys_
        uint32_t ids_off = 0, n_ids = 0;    // into ids_
        bool used = false;
    };
    const Slot* find(std::string_view key, uint64_t hash) const;
    void insert(std::string_view key, std::span<const int32_t> ids);  // exclusive lock held
    void clear_locked();

    size_t max_entries_;
    mutable std::shared_mutex mutex_;
    std::vector<Slot> slots_;  // open addressing, at most half full
    size_t n_entries_ = 0;
    std::string keys_;          // every key, back to back
    std::vector<int32_t> ids_;  // every entry's tokens, back to back
};

}  // namespace troupe
