#include "tokenizer/token_cache.h"

#include <xxhash.h>

#include <cstring>
#include <mutex>

namespace troupe {

namespace {

uint64_t hash_of(std::string_view key) {
    return XXH3_64bits(key.data(), key.size());
}

}  // namespace

TokenCache::TokenCache(size_t max_entries) : max_entries_(max_entries) {
    size_t cap = 16;
    while (cap < 2 * max_entries) cap *= 2;
    slots_.resize(cap);
}

const TokenCache::Slot* TokenCache::find(std::string_view key, uint64_t hash) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = size_t(hash) & mask;; i = (i + 1) & mask) {
        const Slot& s = slots_[i];
        if (!s.used) return nullptr;
        if (s.hash == hash && s.key_len == key.size() &&
            std::memcmp(keys_.data() + s.key_off, key.data(), key.size()) == 0)
            return &s;
    }
}

void TokenCache::insert(std::string_view key, std::span<const int32_t> ids) {
    if (max_entries_ == 0) return;
    const uint64_t hash = hash_of(key);
    if (find(key, hash)) return;  // another session was first
    if (n_entries_ >= max_entries_) clear_locked();
    const size_t mask = slots_.size() - 1;
    size_t i = size_t(hash) & mask;
    while (slots_[i].used) i = (i + 1) & mask;
    slots_[i] = Slot{hash,
                     uint32_t(keys_.size()),
                     uint32_t(key.size()),
                     uint32_t(ids_.size()),
                     uint32_t(ids.size()),
                     true};
    keys_.append(key);
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    ++n_entries_;
}

void TokenCache::clear_locked() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    n_entries_ = 0;
    keys_.clear();
    ids_.clear();
}

void TokenCache::clear() {
    std::unique_lock lock(mutex_);
    clear_locked();
}

size_t TokenCache::size() const {
    std::shared_lock lock(mutex_);
    return n_entries_;
}

// ---- Session

TokenCache::Session::Session(TokenCache& cache) : cache_(cache), lock_(cache.mutex_) {}

TokenCache::Session::~Session() {
    publish(false);
}

void TokenCache::Session::publish(bool relock) {
    lock_.unlock();
    if (!new_.empty()) {
        std::unique_lock lock(cache_.mutex_);
        for (const New& n : new_)
            cache_.insert(std::string_view(keys_).substr(n.key_off, n.key_len),
                          std::span(ids_).subspan(n.ids_off, n.n_ids));
    }
    new_.clear();
    keys_.clear();
    ids_.clear();
    if (relock) lock_.lock();
}

bool TokenCache::Session::lookup(std::string_view key, std::vector<int32_t>& out) const {
    if (key.size() > kMaxKeyBytes) return false;
    const Slot* s = cache_.find(key, hash_of(key));
    if (!s) return false;
    const auto first = cache_.ids_.begin() + s->ids_off;
    out.insert(out.end(), first, first + s->n_ids);
    return true;
}

void TokenCache::Session::remember(std::string_view key, std::span<const int32_t> ids) {
    if (key.size() > kMaxKeyBytes) return;
    new_.push_back({uint32_t(keys_.size()), uint32_t(key.size()), uint32_t(ids_.size()),
                    uint32_t(ids.size())});
    keys_.append(key);
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    if (new_.size() >= kPublishEvery) publish(true);
}

}  // namespace troupe
