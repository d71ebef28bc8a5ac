// Reference counts of the physical KV blocks and the free queue that orders them for reuse.
//
// A block is either referenced (ref_count > 0: held by one or more sequences) or free
// (ref_count == 0: in the free queue). A free block may still hold a cached prefix (see
// prefix_cache.h); the pool does not know, it only keeps the order in which free blocks are
// handed out again:
//   - pop_free() takes the head of the queue: the block released longest ago (LRU).
//   - release() of a block whose content is worth keeping appends it at the tail, so it is
//     reused last. A sequence releases its blocks deepest first (reverse block-table order),
//     so among blocks released at the same time the deepest is reused first: a shared prefix
//     outlives the private suffixes that hang off it (vLLM v1's free-queue order).
//   - release(..., Reuse::First) puts a block with nothing worth keeping (partially filled,
//     never registered, invalidated) at the head, so it goes before any cached block.
//
// All operations are O(1) (an intrusive doubly-linked list over block ids).
// Thread-safety: none; one owner (the block manager).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::kv {

class BlockPool {
  public:
    explicit BlockPool(int n_blocks);  // n_blocks >= 1; all blocks start free, in id order

    int n_blocks() const { return int(ref_count_.size()); }
    int n_free() const { return n_free_; }
    int n_used() const { return n_blocks() - n_free_; }
    int peak_used() const { return peak_used_; }  // highest n_used() so far

    int ref_count(int block) const { return ref_count_[size_t(block)]; }
    bool is_free(int block) const { return ref_count(block) == 0; }

    // Takes the block at the head of the free queue and gives it ref_count 1.
    // Returns -1 when no block is free ("no room" is a value).
    int pop_free();
    // Takes a specific free block (a prefix-cache hit on an unreferenced block): it leaves the
    // free queue wherever it is and gets ref_count 1.
    void take(int block);
    // Adds a reference to a referenced block (sharing).
    void add_ref(int block);

    enum class Reuse { Last, First };
    // Drops one reference. At zero the block joins the free queue: at the tail (Reuse::Last,
    // reused last) or at the head (Reuse::First). Returns true when the block became free.
    bool release(int block, Reuse reuse = Reuse::Last);
    // Moves a free block to the head of the queue (its cached content was invalidated).
    void move_to_front(int block);

    // The free queue from head (next reused) to tail, for tests and invariant checks.
    std::vector<int> free_queue() const;
    // Empty when the internal structure is consistent, else a description of the first fault.
    std::string check_invariants() const;

  private:
    void unlink(int block);
    void push_back(int block);
    void push_front(int block);

    std::vector<int32_t> ref_count_;  // [n_blocks]
    std::vector<int32_t> prev_;       // [n_blocks] free-queue links, -1 at the ends / when used
    std::vector<int32_t> next_;       // [n_blocks]
    int head_ = -1;
    int tail_ = -1;
    int n_free_ = 0;
    int peak_used_ = 0;
};

}  // namespace troupe::kv
