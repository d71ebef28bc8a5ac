// BlockPool: reference counts and the order in which free blocks are handed out again.
#include <gtest/gtest.h>

#include <vector>

#include "kv/block_pool.h"

namespace troupe::kv {
namespace {

using V = std::vector<int>;

TEST(BlockPool, StartsFreeInIdOrder) {
    BlockPool pool(4);
    EXPECT_EQ(pool.n_free(), 4);
    EXPECT_EQ(pool.free_queue(), (V{0, 1, 2, 3}));
    EXPECT_EQ(pool.pop_free(), 0);
    EXPECT_EQ(pool.pop_free(), 1);
    EXPECT_EQ(pool.ref_count(0), 1);
    EXPECT_EQ(pool.n_used(), 2);
    EXPECT_EQ(pool.check_invariants(), "");
}

TEST(BlockPool, NoRoomIsAValue) {
    BlockPool pool(2);
    EXPECT_EQ(pool.pop_free(), 0);
    EXPECT_EQ(pool.pop_free(), 1);
    EXPECT_EQ(pool.pop_free(), -1);
    EXPECT_EQ(pool.n_free(), 0);
    EXPECT_EQ(pool.check_invariants(), "");
}

TEST(BlockPool, SharedBlockIsFreeOnlyAfterLastRelease) {
    BlockPool pool(3);
    const int b = pool.pop_free();
    pool.add_ref(b);
    pool.add_ref(b);
    EXPECT_EQ(pool.ref_count(b), 3);
    EXPECT_FALSE(pool.release(b));
    EXPECT_FALSE(pool.release(b));
    EXPECT_FALSE(pool.is_free(b));
    EXPECT_TRUE(pool.release(b));
    EXPECT_TRUE(pool.is_free(b));
    EXPECT_EQ(pool.check_invariants(), "");
}

TEST(BlockPool, LruThenDeepestFirst) {
    BlockPool pool(8);
    // Sequence A holds 0,1,2 (depths 0..2); sequence B holds 3,4.
    V a, b;
    for (int i = 0; i < 3; ++i) a.push_back(pool.pop_free());
    for (int i = 0; i < 2; ++i) b.push_back(pool.pop_free());
    // A is freed first (deepest first), then B.
    for (auto it = a.rbegin(); it != a.rend(); ++it) pool.release(*it);
    for (auto it = b.rbegin(); it != b.rend(); ++it) pool.release(*it);
    // Never-used blocks, then A deepest first (least recently freed), then B deepest first.
    EXPECT_EQ(pool.free_queue(), (V{5, 6, 7, 2, 1, 0, 4, 3}));
    V order;
    while (pool.n_free() > 0) order.push_back(pool.pop_free());
    EXPECT_EQ(order, (V{5, 6, 7, 2, 1, 0, 4, 3}));
    EXPECT_EQ(pool.check_invariants(), "");
}

TEST(BlockPool, ReuseFirstAndMoveToFront) {
    BlockPool pool(4);
    for (int i = 0; i < 4; ++i) pool.pop_free();
    pool.release(0);
    pool.release(1);
    pool.release(2, BlockPool::Reuse::First);  // nothing worth keeping: reused before 0 and 1
    EXPECT_EQ(pool.free_queue(), (V{2, 0, 1}));
    pool.move_to_front(1);
    EXPECT_EQ(pool.free_queue(), (V{1, 2, 0}));
    pool.release(3);
    EXPECT_EQ(pool.free_queue(), (V{1, 2, 0, 3}));
    EXPECT_EQ(pool.check_invariants(), "");
}

TEST(BlockPool, TakeFromTheMiddle) {
    BlockPool pool(5);
    pool.take(2);  // a cache hit on a free block
    EXPECT_EQ(pool.free_queue(), (V{0, 1, 3, 4}));
    pool.take(4);
    pool.take(0);
    EXPECT_EQ(pool.free_queue(), (V{1, 3}));
    EXPECT_EQ(pool.n_used(), 3);
    EXPECT_EQ(pool.peak_used(), 3);
    pool.release(2);
    pool.release(4);
    EXPECT_EQ(pool.free_queue(), (V{1, 3, 2, 4}));
    EXPECT_EQ(pool.peak_used(), 3);
    EXPECT_EQ(pool.check_invariants(), "");
}

}  // namespace
}  // namespace troupe::kv
