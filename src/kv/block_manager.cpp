#include "kv/block_manager.h"

#include <algorithm>
#include <memory>

#include "util/error.h"

namespace troupe::kv {

BlockManager::BlockManager(const BlockManagerConfig& config, KvStorage* storage)
    : block_size_(config.block_size),
      enable_caching_(config.enable_prefix_caching),
      bytes_per_block_(config.bytes_per_block),
      storage_(storage),
      pool_(config.n_blocks),
      cache_(config.n_blocks, config.block_size, config.hash_mask) {
    TROUPE_CHECK(!storage || storage->n_blocks() == config.n_blocks);
}

PrefixMatch BlockManager::match_prefix(std::span<const int32_t> tokens, std::string_view ns) const {
    PrefixMatch match;
    if (!enable_caching_ || tokens.empty()) return match;
    const uint64_t seed = PrefixCache::namespace_seed(ns);
    const size_t max_blocks = tokens.size() / size_t(block_size_);
    BlockHash parent_hash = 0;
    int parent = -1;
    for (size_t i = 0; i < max_blocks; ++i) {
        const auto block_tokens = tokens.subspan(i * size_t(block_size_), size_t(block_size_));
        const BlockHash hash = cache_.block_hash(parent_hash, block_tokens, seed);
        const int block = cache_.find(hash, block_tokens, parent, ns);
        if (block < 0) {
            match.next_in_flight = in_flight_.count(hash) > 0;
            break;
        }
        match.blocks.push_back(block);
        match.hashes.push_back(hash);
        parent = block;
        parent_hash = hash;
    }
    return match;
}

int BlockManager::n_blocks_to_admit(const PrefixMatch& match, int n_total) const {
    const int n_hits = int(match.blocks.size());
    const int n_unreferenced = int(std::count_if(match.blocks.begin(), match.blocks.end(),
                                                 [&](int32_t b) { return pool_.is_free(b); }));
    return n_unreferenced + std::max(0, n_blocks_for(n_total) - n_hits);
}

bool BlockManager::admit(SeqKv& seq, std::span<const int32_t> tokens, std::string_view ns,
                         const PrefixMatch& match, int n_total) {
    const int n_cached = match.n_tokens(block_size_);
    TROUPE_CHECK(seq.empty() && n_cached <= n_total && n_total <= int(tokens.size()));
    if (!can_admit(match, n_total)) return false;
    seq.ns = std::make_shared<const std::string>(ns);
    seq.ns_seed = PrefixCache::namespace_seed(ns);
    // Hits first: an unreferenced hit must leave the free queue before new blocks are popped
    // from it, or it could be evicted and handed out as a "new" block.
    for (int32_t b : match.blocks) {
        if (pool_.is_free(b))
            pool_.take(b);
        else
            pool_.add_ref(b);
        seq.blocks.push_back(b);
    }
    seq.hashes = match.hashes;
    seq.n_committed_blocks = seq.n_in_flight_end = int(match.blocks.size());
    const bool ok = allocate_slots(seq, tokens, n_cached, n_total);
    TROUPE_CHECK(ok);
    return true;
}

int BlockManager::n_blocks_to_allocate(const SeqKv& seq, int n_computed, int n_total) const {
    int n = std::max(0, n_blocks_for(n_total) - int(seq.blocks.size()));
    if (n_computed < n_total && n_computed % block_size_ != 0) {
        const size_t partial = size_t(n_computed / block_size_);
        TROUPE_CHECK(partial < seq.blocks.size());
        if (pool_.ref_count(seq.blocks[partial]) > 1) ++n;  // copy-on-write
    }
    return n;
}

bool BlockManager::allocate_slots(SeqKv& seq, std::span<const int32_t> tokens, int n_computed,
                                  int n_total) {
    TROUPE_CHECK(0 <= n_computed && n_computed <= n_total && n_total <= int(tokens.size()));
    TROUPE_CHECK(int(seq.blocks.size()) >= n_blocks_for(n_computed));
    if (!can_allocate_slots(seq, n_computed, n_total)) return false;
    if (n_computed < n_total && n_computed % block_size_ != 0) {
        int32_t& partial = seq.blocks[size_t(n_computed / block_size_)];
        if (pool_.ref_count(partial) > 1) {
            const int copy = take_new_block();
            if (storage_) storage_->copy_block(partial, copy);
            pool_.release(partial);  // still referenced by the other sequence(s)
            partial = copy;
            ++n_cow_copies_;
        }
    }
    while (int(seq.blocks.size()) < n_blocks_for(n_total)) seq.blocks.push_back(take_new_block());
    if (enable_caching_) add_in_flight(seq, tokens, n_total / block_size_);
    return true;
}

void BlockManager::commit(SeqKv& seq, std::span<const int32_t> tokens, int n_computed) {
    if (!enable_caching_) return;
    const int n_full = n_computed / block_size_;
    TROUPE_CHECK(n_full <= seq.n_in_flight_end && n_full <= int(seq.blocks.size()));
    for (int i = seq.n_committed_blocks; i < n_full; ++i) {
        drop_in_flight(seq.hashes[size_t(i)]);
        const int block = seq.blocks[size_t(i)];
        const int parent = i > 0 ? seq.blocks[size_t(i - 1)] : -1;
        TROUPE_CHECK(!cache_.is_registered(block));
        // A block whose parent is not registered (a duplicate of another sequence's block, or
        // invalidated) could never be reached by a lookup: leave it out.
        if (parent >= 0 && !cache_.is_registered(parent)) continue;
        const auto block_tokens =
            tokens.subspan(size_t(i) * size_t(block_size_), size_t(block_size_));
        cache_.insert(block, seq.hashes[size_t(i)], block_tokens, parent, seq.ns);
    }
    seq.n_committed_blocks = std::max(seq.n_committed_blocks, n_full);
}

void BlockManager::free(SeqKv& seq) {
    for (auto it = seq.blocks.rbegin(); it != seq.blocks.rend(); ++it)
        pool_.release(*it,
                      cache_.is_registered(*it) ? BlockPool::Reuse::Last : BlockPool::Reuse::First);
    for (int i = seq.n_committed_blocks; i < seq.n_in_flight_end; ++i)
        drop_in_flight(seq.hashes[size_t(i)]);
    seq = SeqKv{};
}

void BlockManager::fork(const SeqKv& parent, int n_computed, SeqKv& child) {
    TROUPE_CHECK(child.empty());
    TROUPE_CHECK(int(parent.blocks.size()) == n_blocks_for(n_computed));
    TROUPE_CHECK(parent.n_in_flight_end == parent.n_committed_blocks);
    for (int32_t b : parent.blocks) pool_.add_ref(b);
    child = parent;
}

void BlockManager::invalidate_namespace(std::string_view ns) {
    for (int b : cache_.erase_namespace(ns))
        if (pool_.is_free(b)) pool_.move_to_front(b);
}

int BlockManager::take_new_block() {
    const int b = pool_.pop_free();
    if (b >= 0) cache_.erase(b);  // eviction: its cached prefix is gone
    return b;
}

void BlockManager::extend_hashes(SeqKv& seq, std::span<const int32_t> tokens, int n_full) const {
    while (int(seq.hashes.size()) < n_full) {
        const size_t i = seq.hashes.size();
        const BlockHash parent_hash = i > 0 ? seq.hashes.back() : 0;
        const auto block_tokens = tokens.subspan(i * size_t(block_size_), size_t(block_size_));
        seq.hashes.push_back(cache_.block_hash(parent_hash, block_tokens, seq.ns_seed));
    }
}

void BlockManager::add_in_flight(SeqKv& seq, std::span<const int32_t> tokens, int new_end) {
    if (new_end <= seq.n_in_flight_end) return;
    extend_hashes(seq, tokens, new_end);
    for (int i = std::max(seq.n_in_flight_end, seq.n_committed_blocks); i < new_end; ++i)
        ++in_flight_[seq.hashes[size_t(i)]];
    seq.n_in_flight_end = new_end;
}

void BlockManager::drop_in_flight(BlockHash hash) {
    auto it = in_flight_.find(hash);
    TROUPE_CHECK(it != in_flight_.end() && it->second > 0);
    if (--it->second == 0) in_flight_.erase(it);
}

KvStats BlockManager::stats() const {
    KvStats s;
    s.n_blocks = pool_.n_blocks();
    for (int b = 0; b < s.n_blocks; ++b) {
        if (!pool_.is_free(b))
            ++s.n_used;
        else if (cache_.is_registered(b))
            ++s.n_cached;
        else
            ++s.n_free;
    }
    s.peak_used = pool_.peak_used();
    s.bytes_per_block = bytes_per_block_;
    s.n_cow_copies = n_cow_copies_;
    return s;
}

std::string BlockManager::check_invariants(std::span<const SeqKv* const> live) const {
    if (std::string e = pool_.check_invariants(); !e.empty()) return "pool: " + e;
    if (std::string e = cache_.check_invariants(); !e.empty()) return "prefix cache: " + e;
    std::vector<int> refs(size_t(pool_.n_blocks()), 0);
    std::unordered_map<BlockHash, int> in_flight;
    for (const SeqKv* seq : live) {
        for (int32_t b : seq->blocks) {
            if (b < 0 || b >= pool_.n_blocks()) return "bad block id " + std::to_string(b);
            ++refs[size_t(b)];
        }
        if (seq->n_committed_blocks > seq->n_in_flight_end ||
            seq->n_in_flight_end > int(seq->hashes.size()) ||
            seq->n_committed_blocks > int(seq->blocks.size()))
            return "sequence block counters out of order";
        for (int i = seq->n_committed_blocks; i < seq->n_in_flight_end; ++i)
            ++in_flight[seq->hashes[size_t(i)]];
    }
    for (int b = 0; b < pool_.n_blocks(); ++b)
        if (refs[size_t(b)] != pool_.ref_count(b))
            return "block " + std::to_string(b) + " has ref count " +
                   std::to_string(pool_.ref_count(b)) + " but " + std::to_string(refs[size_t(b)]) +
                   " block-table entries";
    if (in_flight != in_flight_) return "in-flight index does not match the sequences";
    return {};
}

}  // namespace troupe::kv
