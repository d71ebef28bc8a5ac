// Automatic prefix caching: which physical blocks hold the KV of which token prefix.
//
// A full block (block_size tokens) is registered under a chained hash
//     hash_i = H(hash_{i-1}, tokens of block i; seed = H(namespace))      (hash_{-1} = 0)
// so equal hashes mean "same namespace, same tokens in this block and in every block before
// it" - with overwhelming probability. The hash is only used to find candidates: a lookup
// accepts a block only when its stored token ids equal the query's, its namespace equals the
// query's, and its parent is exactly the block accepted for the previous position (block id
// and generation, so a parent evicted and reused for other content breaks the chain). A hash
// collision therefore costs a comparison, never wrong KV.
//
// Namespaces and prefix versions: a request's cache namespace is an opaque string; blocks are
// shared only between requests of the same namespace. The seed's scheme puts the prefix
// version in the string ("{taskId}:{agentId}:{prefixVersion}", or "{taskId}:{prefixVersion}"
// for agents that share a task's context), so a new version is a new namespace: it can never
// hit the old version's blocks, and those age out through LRU like any unused block. When the
// caller knows a version is dead and wants its memory back at once, erase_namespace() drops
// all of its entries (BlockManager::invalidate_namespace() also moves them to the front of the
// free queue). Both are needed: the first makes stale hits impossible without any call, the
// second is an optimisation of memory.
//
// The cache holds no references: a registered block may be in use (ref_count > 0) or free
// (ref_count == 0, "cached"). When the pool hands a free block out again, its owner calls
// erase() first (eviction).
//
// Thread-safety: none; one owner (the block manager).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace troupe::kv {

using BlockHash = uint64_t;
// A request's cache namespace, shared by the cache entries of its blocks.
using Namespace = std::shared_ptr<const std::string>;

class PrefixCache {
  public:
    // hash_mask: a test hook; the default keeps all 64 bits. A mask of 0 makes every block
    // hash collide, which exercises the token/parent/namespace verification.
    PrefixCache(int n_blocks, int block_size, uint64_t hash_mask = ~uint64_t(0));

    int block_size() const { return block_size_; }

    static uint64_t namespace_seed(std::string_view ns);
    // The chained hash of a full block. tokens: [block_size].
    BlockHash block_hash(BlockHash parent_hash, std::span<const int32_t> tokens,
                         uint64_t ns_seed) const;

    // The registered block holding `tokens` right after parent_block (-1: the first block of a
    // sequence) in namespace ns, or -1. tokens: [block_size].
    int find(BlockHash hash, std::span<const int32_t> tokens, int parent_block,
             std::string_view ns) const;

    // Registers `block` (not registered yet) as holding `tokens` after parent_block, which must
    // be registered (or -1). Returns false, registering nothing, when an equal block is already
    // registered (two sequences computed the same block at once; the first one stays).
    bool insert(int block, BlockHash hash, std::span<const int32_t> tokens, int parent_block,
                const Namespace& ns);

    // Unregisters a block (it is being reused, or its namespace was invalidated). Blocks that
    // chained from it can no longer be found (their parent's generation changed). Returns
    // whether it was registered.
    bool erase(int block);
    // Unregisters every block of namespace ns; returns them.
    std::vector<int> erase_namespace(std::string_view ns);

    bool is_registered(int block) const { return registered_[size_t(block)] != 0; }
    BlockHash hash_of(int block) const { return hash_[size_t(block)]; }
    int n_registered() const { return int(by_hash_.size()); }

    // Empty when the index and the per-block entries agree, else the first fault.
    std::string check_invariants() const;

  private:
    bool matches(int block, std::span<const int32_t> tokens, int parent_block,
                 std::string_view ns) const;

    int block_size_;
    uint64_t hash_mask_;
    std::unordered_multimap<BlockHash, int32_t> by_hash_;  // registered blocks by hash
    // Per physical block (index = block id):
    std::vector<char> registered_;
    std::vector<BlockHash> hash_;
    std::vector<int32_t> parent_;       // parent block when registered, -1 for a first block
    std::vector<uint32_t> parent_gen_;  // generation_ of the parent when registered
    std::vector<uint32_t> generation_;  // bumped by every erase()
    std::vector<Namespace> ns_;
    std::vector<int32_t> tokens_;  // [n_blocks, block_size]
};

}  // namespace troupe::kv
