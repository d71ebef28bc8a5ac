// BlockManager: admission with prefix hits, growth, commit, free, fork with copy-on-write,
// namespaces, eviction order, "no room" as a value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "kv/block_manager.h"

namespace troupe::kv {
namespace {

using Tokens = std::vector<int32_t>;

Tokens range(int first, int n) {
    Tokens t(static_cast<size_t>(n));
    std::iota(t.begin(), t.end(), first);
    return t;
}

Tokens concat(Tokens a, const Tokens& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

BlockManagerConfig config(int n_blocks, int block_size = 4) {
    BlockManagerConfig c;
    c.n_blocks = n_blocks;
    c.block_size = block_size;
    return c;
}

// Admits a whole prompt in one step and commits it, as the scheduler does after its forward.
// Returns the number of tokens served from the cache.
int prefill(BlockManager& bm, SeqKv& seq, const Tokens& tokens, const std::string& ns) {
    const PrefixMatch match = bm.match_prefix(tokens, ns);
    EXPECT_TRUE(bm.admit(seq, tokens, ns, match, int(tokens.size())));
    bm.commit(seq, tokens, int(tokens.size()));
    return match.n_tokens(bm.block_size());
}

std::string check(const BlockManager& bm, std::vector<const SeqKv*> live) {
    return bm.check_invariants(live);
}

TEST(BlockManager, AdmitWithoutHits) {
    BlockManager bm(config(8));
    SeqKv seq;
    const Tokens t = range(100, 10);
    EXPECT_EQ(bm.n_blocks_to_admit(bm.match_prefix(t, ""), 10), 3);
    EXPECT_EQ(prefill(bm, seq, t, ""), 0);
    EXPECT_EQ(seq.blocks.size(), 3u);
    EXPECT_EQ(seq.n_committed_blocks, 2);  // the third block is partial
    EXPECT_EQ(bm.n_free_blocks(), 5);
    EXPECT_EQ(check(bm, {&seq}), "");
}

TEST(BlockManager, SharesFullBlocksOfTheSamePrefix) {
    BlockManager bm(config(16));
    SeqKv a, b;
    const Tokens shared = range(1, 8);
    const Tokens ta = concat(shared, range(50, 3)), tb = concat(shared, range(70, 6));
    EXPECT_EQ(prefill(bm, a, ta, "task"), 0);
    EXPECT_EQ(prefill(bm, b, tb, "task"), 8);
    EXPECT_EQ(a.blocks[0], b.blocks[0]);
    EXPECT_EQ(a.blocks[1], b.blocks[1]);
    EXPECT_NE(a.blocks[2], b.blocks[2]);
    EXPECT_EQ(bm.pool().ref_count(a.blocks[0]), 2);
    EXPECT_EQ(bm.stats().n_used, 3 + 2);
    EXPECT_EQ(check(bm, {&a, &b}), "");
}

// A prompt found whole shares every block, the last one too (the scheduler computes its last
// token again for the logits, reading that token's K/V from the shared block): admitting it
// takes no block, not even a copy. Its first generated token goes to a new block of its own.
TEST(BlockManager, WholePromptHits) {
    BlockManager bm(config(16));
    SeqKv a, b;
    const Tokens t = range(1, 8);  // exactly two blocks
    prefill(bm, a, t, "");
    const PrefixMatch m = bm.match_prefix(t, "");
    EXPECT_EQ(m.blocks.size(), 2u);
    EXPECT_EQ(bm.n_blocks_to_admit(m, 8), 0);
    const int n_free = bm.n_free_blocks();
    EXPECT_EQ(prefill(bm, b, t, ""), 8);
    EXPECT_EQ(bm.n_free_blocks(), n_free);
    EXPECT_EQ(b.blocks, a.blocks);
    EXPECT_EQ(bm.pool().ref_count(a.blocks[1]), 2);
    const Tokens next = concat(t, {42});
    EXPECT_EQ(bm.n_blocks_to_allocate(b, 8, 9), 1);
    ASSERT_TRUE(bm.allocate_slots(b, next, 8, 9));
    EXPECT_EQ(bm.pool().ref_count(b.blocks[2]), 1);
    EXPECT_EQ(bm.stats().n_cow_copies, 0u);
    EXPECT_EQ(bm.match_prefix(range(1, 9), "").blocks.size(), 2u);
    EXPECT_EQ(bm.match_prefix(range(1, 3), "").blocks.size(), 0u);
    EXPECT_EQ(check(bm, {&a, &b}), "");
}

TEST(BlockManager, NamespacesNeverShare) {
    BlockManager bm(config(32));
    const Tokens t = range(1, 13);
    SeqKv a, b, c, d;
    EXPECT_EQ(prefill(bm, a, t, "task1:planner:v1"), 0);
    EXPECT_EQ(prefill(bm, b, t, "task2:planner:v1"), 0);   // other task
    EXPECT_EQ(prefill(bm, c, t, "task1:planner:v2"), 0);   // new prefix version
    EXPECT_EQ(prefill(bm, d, t, "task1:planner:v1"), 12);  // same namespace shares
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_NE(a.blocks[i], b.blocks[i]);
        EXPECT_NE(a.blocks[i], c.blocks[i]);
        EXPECT_NE(b.blocks[i], c.blocks[i]);
    }
    EXPECT_EQ(check(bm, {&a, &b, &c, &d}), "");
}

TEST(BlockManager, FreedBlocksHitUntilReused) {
    BlockManager bm(config(6));
    const Tokens t = range(1, 13);  // 3 full blocks + 1 slot
    SeqKv a;
    prefill(bm, a, t, "");
    bm.free(a);
    EXPECT_TRUE(a.empty());
    KvStats s = bm.stats();
    EXPECT_EQ(s.n_used, 0);
    EXPECT_EQ(s.n_cached, 3);
    EXPECT_EQ(s.n_free, 3);
    EXPECT_EQ(bm.match_prefix(t, "").blocks.size(), 3u);
    // The 2 never-used blocks and the partial one go first: the cache survives 3 new blocks.
    SeqKv b;
    const Tokens tb = range(500, 9);
    prefill(bm, b, tb, "");
    EXPECT_EQ(bm.match_prefix(t, "").blocks.size(), 3u);
    bm.free(b);  // b's partial block goes first, then a's blocks deepest first, then b's
    SeqKv c;
    prefill(bm, c, range(900, 8), "");  // 2 blocks: b's partial one, a's deepest
    EXPECT_EQ(bm.match_prefix(t, "").blocks.size(), 2u);
    EXPECT_EQ(bm.match_prefix(tb, "").blocks.size(), 2u);
    EXPECT_EQ(check(bm, {&c}), "");
}

TEST(BlockManager, EvictionOrderLruDeepestFirst) {
    BlockManager bm(config(8));
    SeqKv a, b;
    const Tokens ta = range(100, 12), tb = range(200, 12);  // 3 blocks each, all full
    prefill(bm, a, concat(ta, {1}), "");
    prefill(bm, b, concat(tb, {2}), "");
    const std::vector<int32_t> a_blocks = a.blocks, b_blocks = b.blocks;
    bm.free(a);  // a first: least recently used
    bm.free(b);
    // Unregistered partial blocks are reused first, then a deepest first, then b.
    const std::vector<int> q = bm.pool().free_queue();
    const std::vector<int> expect = {b_blocks[3], a_blocks[3], a_blocks[2], a_blocks[1],
                                     a_blocks[0], b_blocks[2], b_blocks[1], b_blocks[0]};
    EXPECT_EQ(q, expect);
    // Taking one new block (after the two partial ones) evicts a's deepest: a now hits 2.
    SeqKv c;
    prefill(bm, c, range(300, 9), "");  // 3 blocks
    EXPECT_EQ(bm.match_prefix(concat(ta, {1}), "").blocks.size(), 2u);
    EXPECT_EQ(bm.match_prefix(concat(tb, {2}), "").blocks.size(), 3u);
    EXPECT_EQ(check(bm, {&c}), "");
}

TEST(BlockManager, HitRefreshesRecency) {
    BlockManager bm(config(8));
    SeqKv a, b, a2;
    const Tokens ta = range(100, 9), tb = range(200, 9);
    prefill(bm, a, ta, "");
    prefill(bm, b, tb, "");
    bm.free(a);
    bm.free(b);
    EXPECT_EQ(prefill(bm, a2, ta, ""), 8);  // a is used again: b is now older
    bm.free(a2);
    SeqKv c;
    prefill(bm, c, range(300, 24), "");  // 6 blocks: 2 partials, 2 never used, then b's two
    EXPECT_EQ(bm.match_prefix(tb, "").blocks.size(), 0u);
    EXPECT_EQ(bm.match_prefix(ta, "").blocks.size(), 2u);
}

TEST(BlockManager, AppendAcrossBlockBoundary) {
    BlockManager bm(config(8));
    SeqKv seq;
    Tokens t = range(1, 3);
    prefill(bm, seq, t, "");
    EXPECT_EQ(seq.blocks.size(), 1u);
    for (int next = 4; next <= 9; ++next) {  // decode: one token per step
        t.push_back(next);
        const int n_computed = int(t.size()) - 1;
        EXPECT_EQ(bm.n_blocks_to_allocate(seq, n_computed, n_computed + 1),
                  n_computed % 4 == 0 ? 1 : 0);
        ASSERT_TRUE(bm.allocate_slots(seq, t, n_computed, n_computed + 1));
        bm.commit(seq, t, n_computed + 1);
        EXPECT_EQ(int(seq.blocks.size()), (n_computed + 1 + 3) / 4);
        EXPECT_EQ(check(bm, {&seq}), "");
    }
    EXPECT_EQ(seq.n_committed_blocks, 2);
    // The blocks filled by generated tokens are findable too.
    EXPECT_EQ(bm.match_prefix(t, "").blocks.size(), 2u);
}

TEST(BlockManager, NoRoomChangesNothing) {
    BlockManager bm(config(3));
    SeqKv a, b;
    const Tokens ta = range(1, 8);
    prefill(bm, a, ta, "");  // 2 blocks
    const Tokens tb = range(100, 8);
    const PrefixMatch m = bm.match_prefix(tb, "");
    EXPECT_FALSE(bm.can_admit(m, 8));
    EXPECT_FALSE(bm.admit(b, tb, "", m, 8));
    EXPECT_TRUE(b.empty());
    EXPECT_EQ(bm.n_free_blocks(), 1);
    Tokens grown = concat(ta, range(50, 5));
    EXPECT_FALSE(bm.can_allocate_slots(a, 8, 13));
    EXPECT_FALSE(bm.allocate_slots(a, grown, 8, 13));
    EXPECT_EQ(a.blocks.size(), 2u);
    EXPECT_TRUE(bm.allocate_slots(a, grown, 8, 12));
    EXPECT_EQ(bm.n_free_blocks(), 0);
    EXPECT_EQ(check(bm, {&a, &b}), "");
}

TEST(BlockManager, UnreferencedHitsCountAgainstFreeBlocks) {
    BlockManager bm(config(4));
    SeqKv a, b;
    const Tokens t = range(1, 9);
    prefill(bm, a, t, "");  // 3 blocks, 2 cached when freed
    bm.free(a);
    const PrefixMatch m = bm.match_prefix(t, "");
    ASSERT_EQ(m.blocks.size(), 2u);
    EXPECT_EQ(bm.n_blocks_to_admit(m, 9), 3);  // 2 hits leave the free queue + 1 new
    EXPECT_TRUE(bm.admit(b, t, "", m, 9));
    EXPECT_EQ(bm.n_free_blocks(), 1);
    EXPECT_EQ(check(bm, {&b}), "");
}

TEST(BlockManager, ForkSharesAndCopiesOnWrite) {
    KvGeometry g;
    g.n_layer = 1;
    g.n_kv_head = 1;
    g.head_dim = 2;
    g.block_size = 4;
    g.type = DType::F32;
    KvStorage storage(g, 8);
    BlockManagerConfig c = config(8);
    c.bytes_per_block = storage.bytes_per_block();
    BlockManager bm(c, &storage);
    SeqKv parent, child;
    Tokens tp = range(1, 6);  // one full block + 2 slots of a partial one
    prefill(bm, parent, tp, "");
    const size_t hb = g.head_bytes();
    for (int32_t b : parent.blocks)
        for (int i = 0; i < g.pieces_per_block(); ++i)
            std::memset(storage.piece(b, i), 0x40 + b + i, hb);
    bm.fork(parent, 6, child);
    EXPECT_EQ(child.blocks, parent.blocks);
    EXPECT_EQ(bm.pool().ref_count(parent.blocks[1]), 2);
    EXPECT_EQ(check(bm, {&parent, &child}), "");

    // The child writes position 6 into the shared partial block: it gets a private copy.
    Tokens tc = concat(tp, {77});
    EXPECT_EQ(bm.n_blocks_to_allocate(child, 6, 7), 1);
    ASSERT_TRUE(bm.allocate_slots(child, tc, 6, 7));
    EXPECT_EQ(child.blocks[0], parent.blocks[0]);  // full blocks stay shared
    EXPECT_NE(child.blocks[1], parent.blocks[1]);
    for (int i = 0; i < g.pieces_per_block(); ++i)
        EXPECT_EQ(
            std::memcmp(storage.piece(child.blocks[1], i), storage.piece(parent.blocks[1], i), hb),
            0)
            << "piece " << i;
    EXPECT_EQ(bm.pool().ref_count(parent.blocks[1]), 1);
    EXPECT_EQ(bm.stats().n_cow_copies, 1u);
    // The parent now owns its partial block alone: no copy.
    tp.push_back(88);
    EXPECT_EQ(bm.n_blocks_to_allocate(parent, 6, 7), 0);
    ASSERT_TRUE(bm.allocate_slots(parent, tp, 6, 7));
    EXPECT_EQ(bm.stats().n_cow_copies, 1u);
    bm.commit(child, tc, 7);
    bm.commit(parent, tp, 7);
    EXPECT_EQ(check(bm, {&parent, &child}), "");
    bm.free(parent);
    bm.free(child);
    EXPECT_EQ(bm.stats().n_used, 0);
    EXPECT_EQ(check(bm, {}), "");
}

TEST(BlockManager, ForkAtBlockBoundaryNeedsNoCopy) {
    BlockManager bm(config(8));
    SeqKv parent, child;
    const Tokens t = range(1, 8);
    prefill(bm, parent, t, "");
    bm.fork(parent, 8, child);
    const Tokens tc = concat(t, {9});
    EXPECT_EQ(bm.n_blocks_to_allocate(child, 8, 9), 1);  // a new block, not a copy
    ASSERT_TRUE(bm.allocate_slots(child, tc, 8, 9));
    EXPECT_EQ(bm.stats().n_cow_copies, 0u);
    EXPECT_EQ(check(bm, {&parent, &child}), "");
}

TEST(BlockManager, FreeReturnsEverything) {
    BlockManager bm(config(16));
    std::vector<SeqKv> seqs(4);
    for (size_t i = 0; i < seqs.size(); ++i)
        prefill(bm, seqs[i], concat(range(1, 8), range(int(i) * 100, 7)), "ns");
    EXPECT_GT(bm.stats().n_used, 0);
    for (SeqKv& s : seqs) bm.free(s);
    const KvStats s = bm.stats();
    EXPECT_EQ(s.n_used, 0);
    EXPECT_EQ(s.n_cached + s.n_free, 16);
    EXPECT_EQ(bm.n_free_blocks(), 16);
    EXPECT_EQ(s.peak_used, 2 + 4 * 2);
    EXPECT_EQ(check(bm, {}), "");
}

TEST(BlockManager, InvalidateNamespace) {
    BlockManager bm(config(16));
    const Tokens t = range(1, 9), td = range(40, 9);
    SeqKv a, b, d;
    prefill(bm, a, t, "t:a:v1");
    prefill(bm, b, t, "t:b:v1");
    prefill(bm, d, td, "t:a:v1");  // still running when its namespace is invalidated
    const std::vector<int32_t> a_blocks = a.blocks;
    bm.free(a);
    EXPECT_EQ(bm.stats().n_cached, 2);
    bm.invalidate_namespace("t:a:v1");
    EXPECT_EQ(bm.stats().n_cached, 0);
    EXPECT_EQ(bm.match_prefix(t, "t:a:v1").blocks.size(), 0u);
    EXPECT_EQ(bm.match_prefix(td, "t:a:v1").blocks.size(), 0u);
    EXPECT_EQ(bm.match_prefix(t, "t:b:v1").blocks.size(), 2u);  // other namespaces keep theirs
    EXPECT_EQ(bm.pool().ref_count(d.blocks[0]), 1);             // d keeps its blocks
    // a's blocks, with nothing cached any more, are reused first.
    std::vector<int> front = bm.pool().free_queue();
    front.resize(3);
    std::sort(front.begin(), front.end());
    std::vector<int> expect(a_blocks.begin(), a_blocks.end());
    std::sort(expect.begin(), expect.end());
    EXPECT_EQ(front, expect);
    EXPECT_EQ(check(bm, {&b, &d}), "");
    bm.free(d);
    EXPECT_EQ(bm.stats().n_cached, 0);
    EXPECT_EQ(check(bm, {&b}), "");
}

TEST(BlockManager, InFlightBlocksAreVisible) {
    BlockManager bm(config(16));
    const Tokens t = range(1, 12), longer = concat(t, {5});
    SeqKv a;
    const PrefixMatch m = bm.match_prefix(t, "x");
    EXPECT_FALSE(m.next_in_flight);
    ASSERT_TRUE(bm.admit(a, t, "x", m, 8));  // first chunk: 2 full blocks in flight
    EXPECT_TRUE(bm.match_prefix(t, "x").next_in_flight);
    EXPECT_FALSE(bm.match_prefix(t, "y").next_in_flight);  // other namespace
    EXPECT_EQ(check(bm, {&a}), "");
    bm.commit(a, t, 8);
    const PrefixMatch m2 = bm.match_prefix(longer, "x");
    EXPECT_EQ(m2.blocks.size(), 2u);
    EXPECT_FALSE(m2.next_in_flight);  // the third block is not allocated yet
    ASSERT_TRUE(bm.allocate_slots(a, t, 8, 12));
    EXPECT_TRUE(bm.match_prefix(longer, "x").next_in_flight);
    EXPECT_TRUE(bm.match_prefix(t, "x").next_in_flight);  // its third block, though its last
    bm.free(a);  // freed before its step was committed: nothing stays in flight
    EXPECT_FALSE(bm.match_prefix(longer, "x").next_in_flight);
    EXPECT_EQ(check(bm, {}), "");
}

TEST(BlockManager, CollisionsNeverGiveWrongBlocks) {
    BlockManagerConfig c = config(64, 2);
    c.hash_mask = 0;  // every block hash collides
    BlockManager bm(c);
    std::vector<SeqKv> seqs(6);
    std::vector<Tokens> prompts = {{1, 2, 3, 4, 5}, {1, 2, 3, 5, 5}, {1, 3, 3, 4, 5},
                                   {2, 1, 3, 4, 5}, {1, 2, 3, 4, 6}, {3, 4, 1, 2, 5}};
    for (size_t i = 0; i < prompts.size(); ++i) prefill(bm, seqs[i], prompts[i], "");
    // Only the true shared prefixes were hit.
    EXPECT_EQ(seqs[1].blocks[0], seqs[0].blocks[0]);
    EXPECT_NE(seqs[1].blocks[1], seqs[0].blocks[1]);
    EXPECT_NE(seqs[2].blocks[0], seqs[0].blocks[0]);
    EXPECT_NE(seqs[3].blocks[0], seqs[0].blocks[0]);
    EXPECT_EQ(seqs[4].blocks[0], seqs[0].blocks[0]);
    EXPECT_EQ(seqs[4].blocks[1], seqs[0].blocks[1]);
    EXPECT_NE(seqs[5].blocks[0], seqs[0].blocks[1]);  // {3,4} but as a first block
    EXPECT_NE(seqs[5].blocks[1], seqs[0].blocks[0]);  // {1,2} but after {3,4}
    std::vector<const SeqKv*> live;
    for (const SeqKv& s : seqs) live.push_back(&s);
    EXPECT_EQ(check(bm, live), "");
}

TEST(BlockManager, CachingDisabled) {
    BlockManagerConfig c = config(16);
    c.enable_prefix_caching = false;
    BlockManager bm(c);
    SeqKv a, b;
    const Tokens t = range(1, 13);
    prefill(bm, a, t, "");
    EXPECT_EQ(prefill(bm, b, t, ""), 0);
    bm.free(a);
    bm.free(b);
    EXPECT_EQ(bm.stats().n_cached, 0);
    EXPECT_EQ(check(bm, {}), "");
}

}  // namespace
}  // namespace troupe::kv
