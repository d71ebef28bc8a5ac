// PrefixCache: chained hashes, verified lookups (hash collisions forced), namespaces.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kv/prefix_cache.h"

namespace troupe::kv {
namespace {

using Tokens = std::vector<int32_t>;

Namespace ns(const std::string& s) {
    return std::make_shared<const std::string>(s);
}

TEST(PrefixCache, ChainedHash) {
    PrefixCache cache(8, 4);
    const uint64_t seed = PrefixCache::namespace_seed("task:agent:v1");
    const Tokens t1 = {1, 2, 3, 4}, t2 = {1, 2, 3, 5};
    const BlockHash h1 = cache.block_hash(0, t1, seed);
    EXPECT_EQ(h1, cache.block_hash(0, t1, seed));                              // deterministic
    EXPECT_NE(h1, cache.block_hash(0, t2, seed));                              // tokens
    EXPECT_NE(cache.block_hash(h1, t2, seed), cache.block_hash(0, t2, seed));  // parent
    EXPECT_NE(h1, cache.block_hash(0, t1, PrefixCache::namespace_seed("task:agent:v2")));
    EXPECT_NE(PrefixCache::namespace_seed(""), PrefixCache::namespace_seed("a"));
}

TEST(PrefixCache, FindVerifiesTokensParentAndNamespace) {
    PrefixCache cache(8, 4);
    const Namespace a = ns("a");
    const uint64_t seed = PrefixCache::namespace_seed("a");
    const Tokens t0 = {1, 2, 3, 4}, t1 = {5, 6, 7, 8};
    const BlockHash h0 = cache.block_hash(0, t0, seed), h1 = cache.block_hash(h0, t1, seed);
    EXPECT_TRUE(cache.insert(3, h0, t0, -1, a));
    EXPECT_TRUE(cache.insert(6, h1, t1, 3, a));
    EXPECT_EQ(cache.find(h0, t0, -1, "a"), 3);
    EXPECT_EQ(cache.find(h1, t1, 3, "a"), 6);
    EXPECT_EQ(cache.find(h1, t1, 5, "a"), -1);   // other parent
    EXPECT_EQ(cache.find(h1, t1, -1, "a"), -1);  // not a first block
    EXPECT_EQ(cache.find(h0, t0, -1, "b"), -1);  // other namespace, even with the same hash
    EXPECT_EQ(cache.find(h0, t1, -1, "a"), -1);  // other tokens, same hash
    EXPECT_EQ(cache.n_registered(), 2);
    EXPECT_EQ(cache.check_invariants(), "");
}

TEST(PrefixCache, AllHashesCollide) {
    PrefixCache cache(8, 2, /*hash_mask=*/0);
    const Namespace a = ns("a"), b = ns("b");
    const uint64_t sa = PrefixCache::namespace_seed("a"), sb = PrefixCache::namespace_seed("b");
    const Tokens x = {1, 2}, y = {3, 4};
    EXPECT_EQ(cache.block_hash(0, x, sa), 0u);
    EXPECT_EQ(cache.block_hash(0, y, sb), 0u);
    EXPECT_TRUE(cache.insert(0, 0, x, -1, a));
    EXPECT_TRUE(cache.insert(1, 0, y, -1, a));
    EXPECT_TRUE(cache.insert(2, 0, x, -1, b));
    EXPECT_TRUE(cache.insert(3, 0, y, 0, a));  // y after x
    EXPECT_EQ(cache.find(0, x, -1, "a"), 0);
    EXPECT_EQ(cache.find(0, y, -1, "a"), 1);
    EXPECT_EQ(cache.find(0, x, -1, "b"), 2);
    EXPECT_EQ(cache.find(0, y, -1, "b"), -1);
    EXPECT_EQ(cache.find(0, y, 0, "a"), 3);
    EXPECT_EQ(cache.find(0, x, 0, "a"), -1);
    EXPECT_EQ(cache.find(0, Tokens{9, 9}, -1, "a"), -1);
    EXPECT_TRUE(cache.erase(1));
    EXPECT_EQ(cache.find(0, y, -1, "a"), -1);
    EXPECT_EQ(cache.find(0, x, -1, "a"), 0);
    EXPECT_EQ(cache.check_invariants(), "");
}

TEST(PrefixCache, DuplicateInsertKeepsTheFirst) {
    PrefixCache cache(8, 2);
    const Namespace a = ns("a");
    const Tokens x = {1, 2};
    const BlockHash h = cache.block_hash(0, x, PrefixCache::namespace_seed("a"));
    EXPECT_TRUE(cache.insert(4, h, x, -1, a));
    EXPECT_FALSE(cache.insert(5, h, x, -1, a));
    EXPECT_FALSE(cache.is_registered(5));
    EXPECT_EQ(cache.find(h, x, -1, "a"), 4);
}

TEST(PrefixCache, ReusedParentBreaksTheChain) {
    PrefixCache cache(8, 2);
    const Namespace a = ns("a");
    const uint64_t seed = PrefixCache::namespace_seed("a");
    const Tokens x = {1, 2}, y = {3, 4}, z = {5, 6};
    const BlockHash hx = cache.block_hash(0, x, seed), hy = cache.block_hash(hx, y, seed);
    cache.insert(0, hx, x, -1, a);
    cache.insert(1, hy, y, 0, a);
    // Block 0 is evicted and reused for other content, registered again.
    EXPECT_TRUE(cache.erase(0));
    EXPECT_FALSE(cache.erase(0));
    const BlockHash hz = cache.block_hash(0, z, seed);
    cache.insert(0, hz, z, -1, a);
    EXPECT_EQ(cache.find(hz, z, -1, "a"), 0);
    // Block 1 still claims parent 0, but not this generation of it.
    EXPECT_EQ(cache.find(hy, y, 0, "a"), -1);
    EXPECT_EQ(cache.check_invariants(), "");
}

TEST(PrefixCache, EraseNamespace) {
    PrefixCache cache(8, 2);
    const Namespace v1 = ns("t:a:v1"), v2 = ns("t:a:v2");
    const Tokens x = {1, 2}, y = {3, 4};
    const uint64_t s1 = PrefixCache::namespace_seed(*v1), s2 = PrefixCache::namespace_seed(*v2);
    cache.insert(0, cache.block_hash(0, x, s1), x, -1, v1);
    cache.insert(1, cache.block_hash(cache.block_hash(0, x, s1), y, s1), y, 0, v1);
    cache.insert(2, cache.block_hash(0, x, s2), x, -1, v2);
    EXPECT_EQ(cache.erase_namespace("t:a:v1"), (std::vector<int>{0, 1}));
    EXPECT_EQ(cache.n_registered(), 1);
    EXPECT_TRUE(cache.is_registered(2));
    EXPECT_EQ(cache.find(cache.block_hash(0, x, s1), x, -1, "t:a:v1"), -1);
    EXPECT_EQ(cache.check_invariants(), "");
}

}  // namespace
}  // namespace troupe::kv
