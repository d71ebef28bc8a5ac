// Block tables of sequences over the block pool, with automatic prefix caching and
// copy-on-write. The KV bookkeeping the scheduler drives; it never touches the model.
//
// Every operation that needs blocks comes as an "ask, then do" pair, and running out of blocks
// is a return value (false / a count), never an exception:
//   match_prefix -> can_admit -> admit          first allocation of a (waiting) sequence
//   can_allocate_slots -> allocate_slots         room for the tokens computed in the next step
//   commit                                       after the step: full computed blocks become
//                                                findable by later requests
//   free                                         finished, cancelled or pre-empted
//   fork                                         share a sequence's blocks with a new one
//
// A step of a sequence, in tokens: its tokens [0, n_computed) have KV in its blocks; the next
// step computes [n_computed, n_total) and needs blocks for n_total positions:
//     if (!bm.can_allocate_slots(seq.kv, n_computed, n_total)) ... pre-empt someone ...
//     bm.allocate_slots(seq.kv, tokens, n_computed, n_total);
//     ... forward pass writes K/V at positions [n_computed, n_total) via seq.kv.blocks ...
//     bm.commit(seq.kv, tokens, n_total);
//
// Sharing rules: only full blocks whose KV is computed are registered in the prefix cache and
// shared between sequences; a block being written always has ref_count 1. A partially filled
// block is shared only by fork(), and the first sequence to write into it gets a private copy
// (copy-on-write; the bytes are copied through the KvStorage given at construction).
//
// Eviction order (block_pool.h): blocks freed with content worth keeping (registered) are
// reused least recently freed first and, among blocks freed together, deepest first; blocks
// with nothing to keep are reused before any cached block.
//
// In flight: full blocks allocated for the current step but not yet committed are remembered
// by hash, so the scheduler can hold back a request whose next block another sequence is
// computing right now (agents submitted together with one shared prompt: the first computes
// it, the others then hit it instead of computing it again in parallel).
//
// Thread-safety: none; one owner (the scheduler).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_storage.h"
#include "kv/prefix_cache.h"

namespace troupe::kv {

struct BlockManagerConfig {
    int n_blocks = 0;     // physical blocks in the pool (>= 1)
    int block_size = 16;  // tokens per block
    bool enable_prefix_caching = true;
    size_t bytes_per_block = 0;         // for byte figures in stats (0: unknown)
    uint64_t hash_mask = ~uint64_t(0);  // test hook, see PrefixCache
};

// The KV state of one sequence; owned by the sequence, changed only by the BlockManager.
struct SeqKv {
    std::vector<int32_t> blocks;    // block table: position p is in blocks[p / block_size]
    std::vector<BlockHash> hashes;  // chained hashes of the first full blocks
    int n_committed_blocks = 0;     // leading full blocks computed and offered to the cache
    int n_in_flight_end = 0;        // blocks [n_committed_blocks, this) are in flight
    Namespace ns;                   // set by admit()
    uint64_t ns_seed = 0;

    bool empty() const { return blocks.empty(); }
};

// Cached blocks found for the start of a sequence's tokens.
struct PrefixMatch {
    std::vector<int32_t> blocks;    // hold tokens [0, blocks.size() * block_size)
    std::vector<BlockHash> hashes;  // [blocks.size()]
    bool next_in_flight = false;    // the next full block is being computed by another
                                    // sequence in this step
    int n_tokens(int block_size) const { return int(blocks.size()) * block_size; }
};

struct KvStats {
    int n_blocks = 0;
    int n_used = 0;    // ref_count > 0
    int n_cached = 0;  // ref_count == 0, registered: still findable by the prefix cache
    int n_free = 0;    // ref_count == 0, nothing cached
    int peak_used = 0;
    uint64_t bytes_per_block = 0;
    uint64_t n_cow_copies = 0;
    uint64_t used_bytes() const { return uint64_t(n_used) * bytes_per_block; }
    uint64_t peak_bytes() const { return uint64_t(peak_used) * bytes_per_block; }
};

class BlockManager {
  public:
    // storage: where copy-on-write copies bytes (its block count must equal config.n_blocks);
    // may be null when nothing holds real KV (tests of the bookkeeping alone).
    explicit BlockManager(const BlockManagerConfig& config, KvStorage* storage = nullptr);
    BlockManager(const BlockManager&) = delete;
    BlockManager& operator=(const BlockManager&) = delete;

    int block_size() const { return block_size_; }
    int n_blocks() const { return pool_.n_blocks(); }
    int n_free_blocks() const { return pool_.n_free(); }  // free or cached: all allocatable
    int n_blocks_for(int n_tokens) const { return (n_tokens + block_size_ - 1) / block_size_; }
    const BlockPool& pool() const { return pool_; }

    // The longest run of cached blocks equal to the start of `tokens` in namespace ns: at most
    // tokens.size() / block_size blocks, so it may hold every token (the scheduler then
    // computes the last one again for its logits, reading its K/V from the last block instead
    // of storing them). Takes no references; valid until the next call that changes the
    // manager.
    PrefixMatch match_prefix(std::span<const int32_t> tokens, std::string_view ns) const;

    // Blocks admit() would take from the free queue to give an empty sequence with this match
    // room for n_total tokens: unreferenced cached hits plus new blocks.
    int n_blocks_to_admit(const PrefixMatch& match, int n_total) const;
    bool can_admit(const PrefixMatch& match, int n_total) const {
        return n_blocks_to_admit(match, n_total) <= pool_.n_free();
    }
    // Gives the empty `seq` the matched blocks (their KV is reused: the sequence's first
    // match.n_tokens() tokens count as computed) and new blocks up to n_total tokens.
    // Returns false, changing nothing, when there is no room.
    bool admit(SeqKv& seq, std::span<const int32_t> tokens, std::string_view ns,
               const PrefixMatch& match, int n_total);

    // Blocks allocate_slots() would take: new blocks beyond the table, plus one when the block
    // at n_computed is partially filled and shared (copy-on-write).
    int n_blocks_to_allocate(const SeqKv& seq, int n_computed, int n_total) const;
    bool can_allocate_slots(const SeqKv& seq, int n_computed, int n_total) const {
        return n_blocks_to_allocate(seq, n_computed, n_total) <= pool_.n_free();
    }
    // Makes positions [n_computed, n_total) writable by `seq`. tokens: all its known tokens,
    // [>= n_total]. Returns false, changing nothing, when there is no room.
    bool allocate_slots(SeqKv& seq, std::span<const int32_t> tokens, int n_computed, int n_total);

    // Records that tokens [0, n_computed) of `seq` have KV now: its full blocks are registered
    // in the prefix cache (unless an equal block already is).
    void commit(SeqKv& seq, std::span<const int32_t> tokens, int n_computed);

    // Releases every block of `seq`, deepest first, and leaves it empty.
    void free(SeqKv& seq);

    // Makes `child` (empty) share all blocks of `parent`, whose first n_computed tokens are
    // computed and which has no slots allocated beyond them. The partially filled last block
    // is copied by whichever of the two writes into it first.
    void fork(const SeqKv& parent, int n_computed, SeqKv& child);

    // Forgets every cached block of namespace ns (e.g. a dead prefix version): later requests
    // cannot hit them and unreferenced ones are reused first. Sequences using them keep them.
    void invalidate_namespace(std::string_view ns);

    KvStats stats() const;

    // Empty when the pool, the cache and the block tables of the live sequences (everything
    // holding references) agree: every block's ref count equals its occurrences in the
    // tables, free blocks are exactly those at zero, the in-flight index matches. Otherwise
    // the first fault found.
    std::string check_invariants(std::span<const SeqKv* const> live) const;

  private:
    int take_new_block();  // pops a free block, evicting its cached content; -1: none
    void extend_hashes(SeqKv& seq, std::span<const int32_t> tokens, int n_full) const;
    void add_in_flight(SeqKv& seq, std::span<const int32_t> tokens, int new_end);
    void drop_in_flight(BlockHash hash);

    int block_size_;
    bool enable_caching_;
    size_t bytes_per_block_;
    KvStorage* storage_;
    BlockPool pool_;
    PrefixCache cache_;
    std::unordered_map<BlockHash, int> in_flight_;  // hash -> number of blocks in flight
    uint64_t n_cow_copies_ = 0;
};

}  // namespace troupe::kv
