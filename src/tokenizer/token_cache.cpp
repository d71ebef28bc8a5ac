#include "tokenizer/token_cache.h"

#include <mutex>

namespace troupe {

bool TokenCache::lookup(std::string_view key, std::vector<int32_t>& out) const {
    if (key.size() > kMaxKeyBytes) return false;
    std::shared_lock lock(mutex_);
    const auto it = entries_.find(key);
    if (it == entries_.end()) return false;
    const auto first = ids_.begin() + it->second.offset;
    out.insert(out.end(), first, first + it->second.n);
    return true;
}

void TokenCache::insert(std::string_view key, std::span<const int32_t> ids) {
    if (key.size() > kMaxKeyBytes || max_entries_ == 0) return;
    std::unique_lock lock(mutex_);
    if (entries_.find(key) != entries_.end()) return;  // another thread was first
    if (entries_.size() >= max_entries_) {
        entries_.clear();
        ids_.clear();
    }
    entries_.emplace(std::string(key), Entry{uint32_t(ids_.size()), uint32_t(ids.size())});
    ids_.insert(ids_.end(), ids.begin(), ids.end());
}

void TokenCache::clear() {
    std::unique_lock lock(mutex_);
    entries_.clear();
    ids_.clear();
}

size_t TokenCache::size() const {
    std::shared_lock lock(mutex_);
    return entries_.size();
}

}  // namespace troupe
