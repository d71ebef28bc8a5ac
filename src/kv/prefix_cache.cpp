#include "kv/prefix_cache.h"

#include <xxhash.h>
#include <algorithm>

#include "util/error.h"

namespace troupe::kv {

PrefixCache::PrefixCache(int n_blocks, int block_size, uint64_t hash_mask)
    : block_size_(block_size),
      hash_mask_(hash_mask),
      registered_(size_t(n_blocks), 0),
      hash_(size_t(n_blocks), 0),
      parent_(size_t(n_blocks), -1),
      parent_gen_(size_t(n_blocks), 0),
      generation_(size_t(n_blocks), 0),
      ns_(size_t(n_blocks)),
      tokens_(size_t(n_blocks) * size_t(block_size), 0) {
    TROUPE_CHECK(n_blocks >= 1 && block_size >= 1);
}

uint64_t PrefixCache::namespace_seed(std::string_view ns) {
    return XXH3_64bits(ns.data(), ns.size());
}

BlockHash PrefixCache::block_hash(BlockHash parent_hash, std::span<const int32_t> tokens,
                                  uint64_t ns_seed) const {
    TROUPE_CHECK(int(tokens.size()) == block_size_);
    const uint64_t pair[2] = {parent_hash,
                              XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), ns_seed)};
    return XXH3_64bits_withSeed(pair, sizeof pair, ns_seed) & hash_mask_;
}

bool PrefixCache::matches(int block, std::span<const int32_t> tokens, int parent_block,
                          std::string_view ns) const {
    const size_t b = size_t(block);
    if (parent_[b] != parent_block) return false;
    if (parent_block >= 0 && parent_gen_[b] != generation_[size_t(parent_block)]) return false;
    if (*ns_[b] != ns) return false;
    return std::equal(tokens.begin(), tokens.end(), tokens_.begin() + b * size_t(block_size_));
}

int PrefixCache::find(BlockHash hash, std::span<const int32_t> tokens, int parent_block,
                      std::string_view ns) const {
    TROUPE_CHECK(int(tokens.size()) == block_size_);
    if (parent_block >= 0 && !is_registered(parent_block)) return -1;
    const auto [first, last] = by_hash_.equal_range(hash);
    for (auto it = first; it != last; ++it)
        if (matches(it->second, tokens, parent_block, ns)) return it->second;
    return -1;
}

bool PrefixCache::insert(int block, BlockHash hash, std::span<const int32_t> tokens,
                         int parent_block, const Namespace& ns) {
    TROUPE_CHECK(!is_registered(block) && ns);
    TROUPE_CHECK(parent_block < 0 || is_registered(parent_block));
    if (find(hash, tokens, parent_block, *ns) >= 0) return false;
    const size_t b = size_t(block);
    registered_[b] = 1;
    hash_[b] = hash;
    parent_[b] = parent_block;
    parent_gen_[b] = parent_block >= 0 ? generation_[size_t(parent_block)] : 0;
    ns_[b] = ns;
    std::copy(tokens.begin(), tokens.end(), tokens_.begin() + b * size_t(block_size_));
    by_hash_.emplace(hash, block);
    return true;
}

bool PrefixCache::erase(int block) {
    const size_t b = size_t(block);
    if (!registered_[b]) return false;
    const auto [first, last] = by_hash_.equal_range(hash_[b]);
    auto it = std::find_if(first, last, [&](const auto& e) { return e.second == block; });
    TROUPE_CHECK(it != last);
    by_hash_.erase(it);
    registered_[b] = 0;
    ++generation_[b];
    ns_[b].reset();
    return true;
}

std::vector<int> PrefixCache::erase_namespace(std::string_view ns) {
    std::vector<int> erased;
    for (size_t b = 0; b < registered_.size(); ++b)
        if (registered_[b] && *ns_[b] == ns) erased.push_back(int(b));
    for (int b : erased) erase(b);
    return erased;
}

std::string PrefixCache::check_invariants() const {
    size_t n = 0;
    for (size_t b = 0; b < registered_.size(); ++b) {
        if (!registered_[b]) continue;
        ++n;
        const auto [first, last] = by_hash_.equal_range(hash_[b]);
        if (std::count_if(first, last, [&](const auto& e) { return e.second == int(b); }) != 1)
            return "registered block " + std::to_string(b) + " is not indexed once by its hash";
        if (!ns_[b]) return "registered block " + std::to_string(b) + " has no namespace";
    }
    if (n != by_hash_.size())
        return "hash index holds " + std::to_string(by_hash_.size()) + " entries for " +
               std::to_string(n) + " registered blocks";
    return {};
}

}  // namespace troupe::kv
