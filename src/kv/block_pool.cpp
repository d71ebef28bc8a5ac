#include "kv/block_pool.h"

#include <algorithm>

#include "util/error.h"

namespace troupe::kv {

BlockPool::BlockPool(int n_blocks)
    : ref_count_(size_t(std::max(n_blocks, 0)), 0),
      prev_(ref_count_.size(), -1),
      next_(ref_count_.size(), -1) {
    TROUPE_CHECK(n_blocks >= 1);
    for (int b = 0; b < n_blocks; ++b) push_back(b);
}

int BlockPool::pop_free() {
    if (head_ < 0) return -1;
    const int block = head_;
    take(block);
    return block;
}

void BlockPool::take(int block) {
    TROUPE_CHECK(block >= 0 && block < n_blocks() && ref_count_[size_t(block)] == 0);
    unlink(block);
    ref_count_[size_t(block)] = 1;
    peak_used_ = std::max(peak_used_, n_used());
}

void BlockPool::add_ref(int block) {
    TROUPE_CHECK(block >= 0 && block < n_blocks() && ref_count_[size_t(block)] > 0);
    ++ref_count_[size_t(block)];
}

bool BlockPool::release(int block, Reuse reuse) {
    TROUPE_CHECK(block >= 0 && block < n_blocks() && ref_count_[size_t(block)] > 0);
    if (--ref_count_[size_t(block)] > 0) return false;
    if (reuse == Reuse::Last)
        push_back(block);
    else
        push_front(block);
    return true;
}

void BlockPool::move_to_front(int block) {
    TROUPE_CHECK(block >= 0 && block < n_blocks() && ref_count_[size_t(block)] == 0);
    unlink(block);
    push_front(block);
}

void BlockPool::unlink(int block) {
    const int p = prev_[size_t(block)], n = next_[size_t(block)];
    (p >= 0 ? next_[size_t(p)] : head_) = n;
    (n >= 0 ? prev_[size_t(n)] : tail_) = p;
    prev_[size_t(block)] = next_[size_t(block)] = -1;
    --n_free_;
}

void BlockPool::push_back(int block) {
    prev_[size_t(block)] = tail_;
    next_[size_t(block)] = -1;
    (tail_ >= 0 ? next_[size_t(tail_)] : head_) = block;
    tail_ = block;
    ++n_free_;
}

void BlockPool::push_front(int block) {
    prev_[size_t(block)] = -1;
    next_[size_t(block)] = head_;
    (head_ >= 0 ? prev_[size_t(head_)] : tail_) = block;
    head_ = block;
    ++n_free_;
}

std::vector<int> BlockPool::free_queue() const {
    std::vector<int> order;
    order.reserve(size_t(n_free_));
    for (int b = head_; b >= 0 && order.size() <= ref_count_.size(); b = next_[size_t(b)])
        order.push_back(b);
    return order;
}

std::string BlockPool::check_invariants() const {
    const std::vector<int> order = free_queue();
    if (int(order.size()) != n_free_)
        return "free queue holds " + std::to_string(order.size()) + " blocks, counter says " +
               std::to_string(n_free_);
    std::vector<char> in_queue(ref_count_.size(), 0);
    int prev = -1;
    for (int b : order) {
        if (in_queue[size_t(b)]) return "block " + std::to_string(b) + " twice in free queue";
        in_queue[size_t(b)] = 1;
        if (prev_[size_t(b)] != prev) return "bad back link at block " + std::to_string(b);
        prev = b;
    }
    if (tail_ != prev) return "tail is not the last block of the free queue";
    for (int b = 0; b < n_blocks(); ++b) {
        if (ref_count_[size_t(b)] < 0) return "negative ref count at block " + std::to_string(b);
        if ((ref_count_[size_t(b)] == 0) != bool(in_queue[size_t(b)]))
            return "block " + std::to_string(b) + " has ref count " +
                   std::to_string(ref_count_[size_t(b)]) +
                   (in_queue[size_t(b)] ? " but is in the free queue" : " but is not free");
    }
    return {};
}

}  // namespace troupe::kv
