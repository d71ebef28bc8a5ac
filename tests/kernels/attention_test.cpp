// Attention over the paged KV cache and kv_store against the scalar references on every
// target: decode rows, prefill and chunked prefill, several block sizes and head sizes,
// F16, BF16 and F32 caches, and shared prompt prefixes computed together and merged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/line_prefetch.h"
#include "kernels/ops.h"
#include "kernels/ops_ref.h"
#include "kernels/thread_pool.h"

namespace troupe {
namespace {

using test::expect_near_all;
using test::for_each_target;
using test::random_floats;

// A paged KV cache of one layer: n_blocks blocks, laid out [block][kv_head][...] with K
// transposed ([head_dim][slot], BF16: [head_dim / 2][slot][2]) and V by rows
// ([slot][head_dim]), as ops::KvLayerView says.
struct TestKv {
    std::vector<uint8_t> k, v;
    ops::KvLayerView view;

    TestKv(DType type, int n_blocks, int block_size, int n_kv_head, int head_dim) {
        const size_t elem = ops::kv_elem_bytes(type);
        view.type = type;
        view.block_size = block_size;
        view.head_dim = head_dim;
        view.n_kv_head = n_kv_head;
        view.head_stride = size_t(block_size) * size_t(head_dim) * elem;
        view.block_stride = view.head_stride * size_t(n_kv_head) + 24;  // padding between blocks
        k.assign(view.block_stride * size_t(n_blocks), 0);
        v.assign(k.size(), 0);
        view.k = k.data();
        view.v = v.data();
    }
};

// A sequence with its own storage: block table, queries, output.
struct TestSeq {
    std::vector<int32_t> block_table;
    std::vector<float> q, out;
    ops::AttentionSeq seq;
};

void fill_cache(TestKv& kv, const std::vector<int32_t>& table, int n_pos, uint32_t seed) {
    const int row = kv.view.n_kv_head * kv.view.head_dim;
    const auto k = random_floats(size_t(n_pos * row), seed, -1.0f, 1.0f);
    const auto v = random_floats(size_t(n_pos * row), seed + 1, -1.0f, 1.0f);
    std::vector<int32_t> pos(static_cast<size_t>(n_pos));
    std::iota(pos.begin(), pos.end(), 0);
    ops::ref::kv_store(kv.view, table.data(), pos.data(), k.data(), v.data(), n_pos);
}

TestSeq make_seq(std::vector<int32_t> table, int first_pos, int n_q, int n_head, int head_dim,
                 uint32_t seed) {
    TestSeq s;
    s.block_table = std::move(table);
    // Queries around 3 in magnitude so that the softmax is far from uniform.
    s.q = random_floats(size_t(n_q * n_head * head_dim), seed, -3.0f, 3.0f);
    s.out.assign(s.q.size(), -1.0f);
    s.seq = ops::AttentionSeq{s.block_table.data(), first_pos, n_q, s.q.data(), s.out.data()};
    return s;
}

// Float sums in another order than the reference: scores move by ~1e-6, outputs (weighted
// means of values in [-1, 1]) by a few 1e-6.
constexpr float kAbsTol = 2e-5f;
// A BF16 cache weights its values with the exponentials rounded to BF16, the kernels'
// exp(s - m) for their running maximum m and the reference's exp(s - max s): each weight may
// differ by two roundings, 2 x 2^-9 of itself, so an output by up to 2^-8 sum_p w_p |v_p|
// <= 2^-8 (values in [-1, 1]). Zero queries (all scores 0, every weight exactly 1) leave only
// kAbsTol: DecodeAndPrefillMatchReference checks those too.
constexpr float kBf16WeightTol = 1.0f / 256.0f;

void check_against_reference(const TestKv& kv, std::vector<TestSeq>& seqs, int n_head,
                             ThreadPool* pool, bool shared, bool exact_weights = false) {
    const float tol =
        kAbsTol + (kv.view.type == DType::BF16 && !exact_weights ? kBf16WeightTol : 0.0f);
    std::vector<ops::AttentionSeq> batch;
    for (TestSeq& s : seqs) batch.push_back(s.seq);
    std::vector<std::vector<float>> want;
    for (TestSeq& s : seqs) {
        ops::ref::attention(kv.view, &s.seq, 1, n_head, 0.125f);
        want.push_back(s.out);
    }
    for_each_target([&] {
        for (TestSeq& s : seqs) std::fill(s.out.begin(), s.out.end(), -7.0f);
        if (shared) {
            ops::attention(kv.view, batch.data(), int(batch.size()), n_head, 0.125f, pool);
        } else {
            ops::attention_shared(kv.view, batch.data(), int(batch.size()), {}, n_head, 0.125f,
                                  pool);
        }
        for (size_t i = 0; i < seqs.size(); ++i)
            expect_near_all(seqs[i].out.data(), want[i].data(), want[i].size(), tol, 0.0f,
                            "attention");
    });
}

TEST(Attention, DecodeAndPrefillMatchReference) {
    ThreadPool pool(2);
    for (DType type : {DType::F16, DType::BF16, DType::F32})
        for (int block_size : {16, 5, 32})
            for (int head_dim : {64, 48, 20, 128}) {
                SCOPED_TRACE(::testing::Message() << type_name(type) << " block " << block_size
                                                  << " head_dim " << head_dim);
                const int n_kv_head = 2, n_head = 6, n_blocks = 40;
                TestKv kv(type, n_blocks, block_size, n_kv_head, head_dim);
                // A shuffled block table, so logical and physical order differ.
                std::vector<int32_t> table(static_cast<size_t>(n_blocks));
                std::iota(table.begin(), table.end(), 0);
                std::shuffle(table.begin(), table.end(),
                             std::mt19937(uint32_t(block_size + head_dim)));
                const int n_pos = std::min(n_blocks * block_size, 200);
                fill_cache(kv, table, n_pos, uint32_t(head_dim));
                std::vector<TestSeq> seqs;
                seqs.push_back(make_seq(table, 0, 1, n_head, head_dim, 1));    // first token
                seqs.push_back(make_seq(table, 150, 1, n_head, head_dim, 2));  // decode
                seqs.push_back(make_seq(table, 0, 37, n_head, head_dim, 3));   // prefill
                seqs.push_back(make_seq(table, 17, 9, n_head, head_dim, 4));   // chunked prefill
                seqs.push_back(make_seq(table, 199, 1, n_head, head_dim, 5));  // last position
                check_against_reference(kv, seqs, n_head, &pool, false);
                check_against_reference(kv, seqs, n_head, nullptr, false);
                // The same table for all: attention() groups them by their shared blocks.
                check_against_reference(kv, seqs, n_head, &pool, true);
                if (type == DType::BF16) {  // every weight 1: the values' sums alone
                    for (TestSeq& s : seqs) std::fill(s.q.begin(), s.q.end(), 0.0f);
                    check_against_reference(kv, seqs, n_head, &pool, false, true);
                    check_against_reference(kv, seqs, n_head, &pool, true, true);
                }
            }
}

// Every GQA group size from 1 to 8, with query counts around the kernel's tile sizes (one
// tile, several, tiles of 12): decode rows (group query vectors), short and long prefills,
// chunked prefill that starts mid-block.
TEST(Attention, GroupSizesAndQueryCounts) {
    ThreadPool pool(2);
    for (int group : {1, 2, 3, 4, 5, 8})
        for (DType type : {DType::F16, DType::BF16, DType::F32}) {
            if (type == DType::F32 && group != 3 && group != 8) continue;
            SCOPED_TRACE(::testing::Message() << "group " << group << " " << type_name(type));
            const int n_kv_head = group == 8 ? 1 : 2, n_head = n_kv_head * group;
            const int block_size = 16, head_dim = 64, n_blocks = 24;
            TestKv kv(type, n_blocks, block_size, n_kv_head, head_dim);
            std::vector<int32_t> table(static_cast<size_t>(n_blocks));
            std::iota(table.begin(), table.end(), 0);
            std::reverse(table.begin(), table.end());
            fill_cache(kv, table, n_blocks * block_size, uint32_t(group));
            std::vector<TestSeq> seqs;
            uint32_t seed = 100;
            for (int n_q : {1, 2, 3, 5, 8, 15, 16, 17, 33})
                seqs.push_back(make_seq(table, 300 - n_q, n_q, n_head, head_dim, seed++));
            seqs.push_back(make_seq(table, 0, 70, n_head, head_dim, seed++));
            seqs.push_back(make_seq(table, 21, 43, n_head, head_dim, seed++));
            check_against_reference(kv, seqs, n_head, &pool, false);
            check_against_reference(kv, seqs, n_head, nullptr, false);
        }
}

// Long contexts (the key range split over tasks) with scores of a wide range that grow
// along the positions, so that the running maximum moves often and by large steps (the
// rescaling paths), and that fall (the first keys dominate).
TEST(Attention, LongContextsWithMovingMaximum) {
    ThreadPool pool(2);
    const int block_size = 16, head_dim = 64, n_kv_head = 2, n_head = 6, n_pos = 1500;
    const int n_blocks = n_pos / block_size + 1;
    for (DType type : {DType::F16, DType::BF16})
        for (bool rising : {true, false}) {
            SCOPED_TRACE(::testing::Message()
                         << (rising ? "rising scores " : "falling scores ") << type_name(type));
            TestKv kv(type, n_blocks, block_size, n_kv_head, head_dim);
            std::vector<int32_t> table(static_cast<size_t>(n_blocks));
            std::iota(table.begin(), table.end(), 0);
            std::shuffle(table.begin(), table.end(), std::mt19937(7));
            // K rows all point along (1, 1, ..) with a length that changes with the position:
            // scores from about -40 to +120 against a query along the same direction (beyond
            // the range of float exponentials: a kernel must move its running maximum).
            const int row = n_kv_head * head_dim;
            std::vector<float> k(size_t(n_pos * row)), v(k.size());
            auto noise = random_floats(k.size(), 5, -0.2f, 0.2f);
            auto values = random_floats(v.size(), 6, -1.0f, 1.0f);
            for (int p = 0; p < n_pos; ++p) {
                const float t = float(p) / float(n_pos);
                const float len = (rising ? t : 1.0f - t) * 10.0f - 2.5f;
                for (int i = 0; i < row; ++i) {
                    k[size_t(p * row + i)] = len + noise[size_t(p * row + i)];
                    v[size_t(p * row + i)] = values[size_t(p * row + i)];
                }
            }
            std::vector<int32_t> pos(static_cast<size_t>(n_pos));
            std::iota(pos.begin(), pos.end(), 0);
            ops::ref::kv_store(kv.view, table.data(), pos.data(), k.data(), v.data(), n_pos);
            std::vector<TestSeq> seqs;
            for (int first : {1499, 1023, 700})
                seqs.push_back(make_seq(table, first, 1, n_head, head_dim, 9));
            seqs.push_back(make_seq(table, 1400, 30, n_head, head_dim, 10));
            for (TestSeq& s : seqs)
                for (float& x : s.q) x = 2.0f + 0.2f * x;  // along (1, 1, ..)
            check_against_reference(kv, seqs, n_head, &pool, false);
        }
}

TEST(Attention, SharedPrefixEqualsPlainAttention) {
    ThreadPool pool(2);
    for (int n_seqs : {2, 3, 8}) {
        const int block_size = 16, n_kv_head = 3, n_head = 9, head_dim = 64;
        const int shared_blocks = 5;
        TestKv kv(DType::F16, 200, block_size, n_kv_head, head_dim);
        std::vector<int32_t> prefix(static_cast<size_t>(shared_blocks));
        std::iota(prefix.begin(), prefix.end(), 100);  // physical blocks 100..104
        fill_cache(kv, prefix, shared_blocks * block_size, 9);
        std::vector<TestSeq> seqs;
        for (int s = 0; s < n_seqs; ++s) {
            // Each sequence continues the prefix in private blocks with its own contents.
            std::vector<int32_t> table = prefix;
            for (int b = 0; b < 3; ++b) table.push_back(int32_t(10 * s + b));
            const int n_pos = shared_blocks * block_size + 20 + s;
            // Private positions start at shared_blocks * block_size: store them through the
            // full table so positions map to the private blocks.
            const int row = n_kv_head * head_dim;
            const int n_priv = n_pos - shared_blocks * block_size;
            const auto k = random_floats(size_t(n_priv * row), uint32_t(50 + s), -1, 1);
            const auto v = random_floats(size_t(n_priv * row), uint32_t(70 + s), -1, 1);
            std::vector<int32_t> pos(static_cast<size_t>(n_priv));
            std::iota(pos.begin(), pos.end(), shared_blocks * block_size);
            ops::ref::kv_store(kv.view, table.data(), pos.data(), k.data(), v.data(), n_priv);
            // Decode rows, except one sequence that prefills its last 4 positions.
            const int n_q = s == 1 ? 4 : 1;
            seqs.push_back(make_seq(table, n_pos - n_q, n_q, n_head, head_dim, uint32_t(s + 30)));
        }
        std::vector<ops::AttentionSeq> batch;
        for (TestSeq& s : seqs) batch.push_back(s.seq);
        const auto groups = ops::find_shared_prefixes(batch.data(), n_seqs, block_size);
        ASSERT_EQ(groups.size(), 1u);
        EXPECT_EQ(groups[0].n_blocks, shared_blocks);
        EXPECT_EQ(int(groups[0].seqs.size()), n_seqs);
        check_against_reference(kv, seqs, n_head, &pool, true);
        check_against_reference(kv, seqs, n_head, nullptr, true);
        check_against_reference(kv, seqs, n_head, &pool, false);
        // 80 common keys: no whole chunk, but a tail task reads the step [0, 64) together;
        // each row has the bits it has alone.
        for_each_target([&] {
            ops::attention(kv.view, batch.data(), n_seqs, n_head, 0.125f, &pool);
            for (TestSeq& s : seqs) {
                const std::vector<float> together = s.out;
                ops::attention(kv.view, &s.seq, 1, n_head, 0.125f, nullptr);
                EXPECT_EQ(s.out, together) << "first position " << s.seq.first_pos;
            }
        });
    }
}

// The engine's shape of agents after a shared prompt: 8 sequences share 31 blocks (496 keys;
// the prompt's last block is each one's own), then decode. Keys [0, 384) are read by plain
// tasks of all 24 query vectors of a kv head, [384, 448) by a tail task for all of them, and
// the tail task's members read [448, 512) through their own tables; each sequence's own
// tasks start at 512. Every row has its bits alone, and matches the reference.
TEST(Attention, SharedPrefixTailIsReadTogether) {
    ThreadPool pool(2);
    const int bs = 16, n_kv_head = 3, n_head = 9, hd = 64, n_seqs = 8, common = 31;
    TestKv kv(DType::F16, common + n_seqs * 5, bs, n_kv_head, hd);
    std::vector<int32_t> prefix(static_cast<size_t>(common));
    std::iota(prefix.begin(), prefix.end(), 0);
    fill_cache(kv, prefix, common * bs, 21);
    std::vector<TestSeq> seqs;
    for (int s = 0; s < n_seqs; ++s) {
        std::vector<int32_t> table = prefix;
        for (int b = 0; b < 5; ++b) table.push_back(int32_t(common + 5 * s + b));
        const int k1 = 512 + 7 * s + (s == 0 ? 0 : 1);  // one ends on the chunk boundary
        const int row = n_kv_head * hd, n_priv = k1 - common * bs;
        const auto k = random_floats(size_t(n_priv * row), uint32_t(80 + s), -1, 1);
        const auto v = random_floats(size_t(n_priv * row), uint32_t(90 + s), -1, 1);
        std::vector<int32_t> pos(static_cast<size_t>(n_priv));
        std::iota(pos.begin(), pos.end(), common * bs);
        ops::ref::kv_store(kv.view, table.data(), pos.data(), k.data(), v.data(), n_priv);
        const int n_q = s == 5 ? 3 : 1;  // a short prefill chunk among the decodes
        seqs.push_back(make_seq(table, k1 - n_q, n_q, n_head, hd, uint32_t(100 + s)));
    }
    std::vector<ops::AttentionSeq> batch;
    for (TestSeq& s : seqs) batch.push_back(s.seq);
    ops::AttentionPlan plan;
    ops::plan_attention(kv.view, batch.data(), n_seqs, n_head, true, plan);
    int tails = 0, plain_shared = 0, own = 0;
    for (const ops::AttentionPlan::Task& t : plan.tasks) {
        if (t.member1 > t.member0) {
            ++tails;
            EXPECT_EQ(t.k0, 384);
            EXPECT_EQ(t.k1, 512);
            EXPECT_EQ(t.split, 448);
            EXPECT_EQ(t.member1 - t.member0, n_seqs);
            EXPECT_EQ(t.slot1 - t.slot0, (n_seqs + 2) * 3);
        } else if (t.k0 < 384) {
            ++plain_shared;
            EXPECT_EQ(t.slot1 - t.slot0, (n_seqs + 2) * 3);
        } else {
            ++own;
            EXPECT_GE(t.k0, 512);  // a sequence's own keys
        }
    }
    EXPECT_EQ(tails, n_kv_head);
    EXPECT_EQ(plain_shared, 3 * n_kv_head);
    EXPECT_EQ(own, (n_seqs - 1) * n_kv_head);  // the first one's keys end at 512

    check_against_reference(kv, seqs, n_head, &pool, true);
    for_each_target([&] {
        ops::attention(kv.view, batch.data(), n_seqs, n_head, 0.125f, &pool);
        for (TestSeq& s : seqs) {
            const std::vector<float> together = s.out;
            ops::attention(kv.view, &s.seq, 1, n_head, 0.125f, &pool);
            EXPECT_EQ(s.out, together) << "first position " << s.seq.first_pos;
        }
    });
}

// A GQA group larger than a task's query vectors (multi-query attention with 64 heads): a
// 70-row prefill (long enough for the whole-task path, which must then not be taken) and a
// decode row.
TEST(Attention, GroupLargerThanATask) {
    ThreadPool pool(2);
    const int n_kv_head = 1, n_head = 64, block_size = 16, head_dim = 32, n_blocks = 8;
    TestKv kv(DType::F16, n_blocks, block_size, n_kv_head, head_dim);
    std::vector<int32_t> table(static_cast<size_t>(n_blocks));
    std::iota(table.begin(), table.end(), 0);
    fill_cache(kv, table, n_blocks * block_size, 64);
    std::vector<TestSeq> seqs;
    seqs.push_back(make_seq(table, 0, 70, n_head, head_dim, 1));
    seqs.push_back(make_seq(table, 100, 1, n_head, head_dim, 2));
    check_against_reference(kv, seqs, n_head, &pool, false);
}

// A query row's output is bit-identical however it is computed: decoded alone (one tile read
// from the cache), as a row of a prefill or of a prefill chunk of any size (tasks of 1 to 60
// query vectors, whole tasks that merge their own chunks, GQA groups split across tiles of 12
// and of up to 6, K gathered for block sizes the lanes do not divide), beside other
// sequences, through a shared prefix (rows of several sequences in one task, a tail task's
// common steps and its members' own), with or
// without threads; for F16 and F32 caches, head sizes of whole and partial vectors, and
// blocks that do and do not divide the key chunks.
struct InvarianceCase {
    DType type;
    int block_size, n_kv_head, group, head_dim;
};

void check_rows_batch_invariant(const InvarianceCase& c, ThreadPool& pool) {
    const int n_head = c.n_kv_head * c.group, n_pos = 300;
    const int n_blocks = (n_pos + c.block_size - 1) / c.block_size;
    TestKv kv(c.type, n_blocks + 4, c.block_size, c.n_kv_head, c.head_dim);
    std::vector<int32_t> table(static_cast<size_t>(n_blocks));
    std::iota(table.begin(), table.end(), 2);
    fill_cache(kv, table, n_pos, uint32_t(5 + c.head_dim));
    const size_t row = size_t(n_head * c.head_dim);
    const auto q = random_floats(row * n_pos, 8, -3.0f, 3.0f);
    for_each_target([&] {
        std::vector<float> full(row * n_pos);  // every row in one prefill
        ops::AttentionSeq all{table.data(), 0, n_pos, q.data(), full.data()};
        ops::attention(kv.view, &all, 1, n_head, 0.125f, &pool);
        auto expect_rows = [&](const std::vector<float>& got, int r0, int n, const char* how) {
            for (size_t i = 0; i < size_t(n) * row; ++i)
                if (got[i] != full[size_t(r0) * row + i]) {
                    ADD_FAILURE() << how << " " << n << ": row " << r0 + int(i / row)
                                  << " differs: " << got[i] << " vs " << full[size_t(r0) * row + i];
                    return;
                }
        };
        for (int pos : {0, 1, 127, 128, 129, 250, 299}) {  // decoded alone
            std::vector<float> out(row);
            ops::AttentionSeq s{table.data(), pos, 1, q.data() + size_t(pos) * row, out.data()};
            ops::attention(kv.view, &s, 1, n_head, 0.125f, pos % 2 ? &pool : nullptr);
            expect_rows(out, pos, 1, "decode");
        }
        for (int n : {2, 3, 5, 8, 13, 37, 64}) {  // prefill chunks of n rows
            for (int r0 : {0, 1, 120, 126, 200, n_pos - n}) {
                std::vector<float> out(row * size_t(n));
                ops::AttentionSeq s{table.data(), r0, n, q.data() + size_t(r0) * row, out.data()};
                ops::attention(kv.view, &s, 1, n_head, 0.125f, r0 % 2 ? nullptr : &pool);
                expect_rows(out, r0, n, "chunk");
            }
        }
        // Sequences sharing every block (grouped as a shared prefix): decodes; decodes beside
        // prefill chunks, of which the long one (32 rows or more) reads the prefix itself;
        // and a decode beside a long chunk, which leaves no group at all.
        struct Member {
            int first, n_q;
        };
        const std::vector<std::vector<Member>> batches = {
            {{140, 1}, {260, 1}, {299, 1}},
            {{200, 1}, {205, 3}, {260, 1}, {299, 1}},  // a tail task from key 192 on
            {{140, 1}, {260, 1}, {299, 1}, {180, 7}, {230, 20}, {250, 40}},
            {{299, 1}, {200, 64}},
        };
        for (const std::vector<Member>& members : batches) {
            const int n_seqs = int(members.size());
            std::vector<std::vector<float>> outs;
            std::vector<ops::AttentionSeq> batch;
            for (const Member& m : members) outs.emplace_back(row * size_t(m.n_q));
            for (int i = 0; i < n_seqs; ++i) {
                const Member& m = members[size_t(i)];
                batch.push_back({table.data(), m.first, m.n_q, q.data() + size_t(m.first) * row,
                                 outs[size_t(i)].data()});
            }
            ASSERT_EQ(ops::find_shared_prefixes(batch.data(), n_seqs, c.block_size).size(), 1u);
            ops::attention(kv.view, batch.data(), n_seqs, n_head, 0.125f, &pool);
            for (int i = 0; i < n_seqs; ++i)
                expect_rows(outs[size_t(i)], members[size_t(i)].first, members[size_t(i)].n_q,
                            "shared");
        }
    });
}

TEST(Attention, RowsAreBatchInvariant) {
    ThreadPool pool(2);
    const InvarianceCase cases[] = {
        {DType::F16, 16, 3, 3, 64},  {DType::F16, 5, 3, 3, 64},  {DType::F32, 16, 1, 8, 48},
        {DType::F16, 32, 2, 4, 20},  {DType::F32, 7, 2, 1, 128}, {DType::F16, 16, 1, 5, 64},
        {DType::BF16, 16, 3, 3, 64}, {DType::BF16, 5, 3, 3, 64}, {DType::BF16, 32, 2, 4, 20},
        {DType::BF16, 16, 1, 8, 128}, {DType::BF16, 7, 2, 3, 48},
    };
    for (const InvarianceCase& c : cases) {
        SCOPED_TRACE(::testing::Message()
                     << type_name(c.type) << " block " << c.block_size << " kv heads "
                     << c.n_kv_head << " group " << c.group << " head_dim " << c.head_dim);
        check_rows_batch_invariant(c, pool);
    }
}

// A BF16 cache's two forms of the same arithmetic give the same bits: on a CPU with
// AVX512_BF16 the AVX3_DL target's vdpbf16ps scores (and, for heads of an even number of
// vectors, values) against the AVX3 target's float multiply-adds of the pairs (the same
// vector width, so the same steps and sums). Decode rows, a prefill and a shared prefix.
TEST(Attention, Bf16FormsGiveTheSameBits) {
#if defined(__x86_64__)
    const bool has_bf16 = __builtin_cpu_supports("avx512bf16");
#else
    const bool has_bf16 = false;
#endif
    int64_t dl = 0, avx3 = 0;
    for (const kernels::SimdTarget& t : kernels::available_targets()) {
        if (t.name == "AVX3_DL") dl = t.id;
        if (t.name == "AVX3") avx3 = t.id;
    }
    if (!has_bf16 || dl == 0 || avx3 == 0)
        GTEST_SKIP() << "needs AVX512_BF16 and the AVX3 / AVX3_DL targets";
    ThreadPool pool(2);
    for (int head_dim : {64, 128, 48}) {
        SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim);
        const int n_kv_head = 2, n_head = 6, block_size = 16, n_blocks = 24;
        TestKv kv(DType::BF16, n_blocks, block_size, n_kv_head, head_dim);
        std::vector<int32_t> table(static_cast<size_t>(n_blocks));
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), std::mt19937(3));
        fill_cache(kv, table, n_blocks * block_size, uint32_t(head_dim));
        std::vector<TestSeq> seqs;
        seqs.push_back(make_seq(table, 300, 1, n_head, head_dim, 1));
        seqs.push_back(make_seq(table, 301, 1, n_head, head_dim, 2));
        seqs.push_back(make_seq(table, 0, 45, n_head, head_dim, 3));
        seqs.push_back(make_seq(table, 200, 17, n_head, head_dim, 4));
        std::vector<ops::AttentionSeq> batch;
        for (TestSeq& s : seqs) batch.push_back(s.seq);
        std::vector<std::vector<float>> outs[2];
        for (int f = 0; f < 2; ++f) {
            kernels::ScopedTarget forced(f == 0 ? dl : avx3);
            for (TestSeq& s : seqs) std::fill(s.out.begin(), s.out.end(), -7.0f);
            ops::attention(kv.view, batch.data(), int(batch.size()), n_head, 0.125f, &pool);
            for (TestSeq& s : seqs) outs[f].push_back(s.out);
        }
        for (size_t i = 0; i < seqs.size(); ++i)
            for (size_t j = 0; j < outs[0][i].size(); ++j)
                if (outs[0][i][j] != outs[1][i][j]) {
                    ADD_FAILURE() << "sequence " << i << " element " << j << ": AVX3_DL "
                                  << outs[0][i][j] << ", AVX3 " << outs[1][i][j];
                    break;
                }
    }
}

TEST(Attention, FindSharedPrefixes) {
    const int bs = 4;
    std::vector<int32_t> a = {1, 2, 3, 4}, b = {1, 2, 9, 8}, c = {1, 2, 3, 7}, d = {5, 6},
                         e = {5, 6, 0};
    std::vector<ops::AttentionSeq> seqs = {
        {a.data(), 0, 16, nullptr, nullptr}, {b.data(), 10, 5, nullptr, nullptr},
        {c.data(), 15, 1, nullptr, nullptr}, {d.data(), 7, 1, nullptr, nullptr},
        {e.data(), 9, 1, nullptr, nullptr},
    };
    const auto groups = ops::find_shared_prefixes(seqs.data(), int(seqs.size()), bs);
    ASSERT_EQ(groups.size(), 2u);
    EXPECT_EQ(groups[0].seqs, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(groups[0].n_blocks, 2);
    EXPECT_EQ(groups[1].seqs, (std::vector<int>{3, 4}));
    EXPECT_EQ(groups[1].n_blocks, 2);
    // A group needs min_blocks shared blocks: only a and c share 3.
    const auto g3 = ops::find_shared_prefixes(seqs.data(), int(seqs.size()), bs, 3);
    ASSERT_EQ(g3.size(), 1u);
    EXPECT_EQ(g3[0].seqs, (std::vector<int>{0, 2}));
    EXPECT_EQ(g3[0].n_blocks, 3);
    EXPECT_TRUE(ops::find_shared_prefixes(seqs.data(), int(seqs.size()), bs, 4).empty());
    // A sequence only counts the blocks it uses: d uses 2 (positions 0..7).
    std::vector<ops::AttentionSeq> short_seqs = {{d.data(), 3, 1, nullptr, nullptr},
                                                 {e.data(), 9, 1, nullptr, nullptr}};
    const auto g2 = ops::find_shared_prefixes(short_seqs.data(), 2, bs);
    ASSERT_EQ(g2.size(), 1u);
    EXPECT_EQ(g2[0].n_blocks, 1);
}

TEST(Attention, KvStoreMatchesReferenceBitForBit) {
    for (DType type : {DType::F16, DType::BF16, DType::F32}) {
        const int bs = 16, n_kv_head = 3, head_dim = 64;
        TestKv want(type, 8, bs, n_kv_head, head_dim), got(type, 8, bs, n_kv_head, head_dim);
        const std::vector<int32_t> table = {5, 2, 7, 0};
        const int n = 37;
        auto k = random_floats(size_t(n * n_kv_head * head_dim), 1, -70000.0f, 70000.0f);
        // F16 subnormals; for BF16, float subnormals (flushed to zero) and normals.
        auto v = random_floats(size_t(n * n_kv_head * head_dim), 2,
                               type == DType::BF16 ? -3e-38f : -1e-6f,
                               type == DType::BF16 ? 3e-38f : 1e-6f);
        std::vector<int32_t> pos(static_cast<size_t>(n));
        std::iota(pos.begin(), pos.end(), 3);
        ops::ref::kv_store(want.view, table.data(), pos.data(), k.data(), v.data(), n);
        for_each_target([&] {
            std::fill(got.k.begin(), got.k.end(), 0);
            std::fill(got.v.begin(), got.v.end(), 0);
            ops::kv_store(got.view, table.data(), pos.data(), k.data(), v.data(), n);
            EXPECT_EQ(got.k, want.k);
            EXPECT_EQ(got.v, want.v);
        });
    }
}

// kv_store_cols over the pieces of a split of the K and V rows (the Q/K/V product's tasks:
// any columns, across heads) writes what kv_store writes, and nothing else.
TEST(Attention, KvStoreColumnsWriteWhatKvStoreWrites) {
    for (DType type : {DType::F16, DType::BF16, DType::F32}) {
        const int bs = 16, n_kv_head = 3, head_dim = 64, row = n_kv_head * head_dim;
        TestKv want(type, 8, bs, n_kv_head, head_dim), got(type, 8, bs, n_kv_head, head_dim);
        const std::vector<int32_t> table = {5, 2, 7, 0};
        const int n = 21;
        auto k = random_floats(size_t(n * row), 3);
        auto v = random_floats(size_t(n * row), 4);
        std::vector<int32_t> pos(static_cast<size_t>(n));
        std::iota(pos.begin(), pos.end(), 30);
        ops::ref::kv_store(want.view, table.data(), pos.data(), k.data(), v.data(), n);
        const std::vector<int> cuts = {0, 2, 48, 64, 66, 130, 190, row};
        const auto store_pieces = [&](auto&& store) {
            std::fill(got.k.begin(), got.k.end(), 0);
            std::fill(got.v.begin(), got.v.end(), 0);
            for (size_t i = cuts.size() - 1; i-- > 0;) {
                store(false, cuts[i], cuts[i + 1], k.data());
                store(true, cuts[i], cuts[i + 1], v.data());
            }
            EXPECT_EQ(got.k, want.k);
            EXPECT_EQ(got.v, want.v);
        };
        store_pieces([&](bool values, int c0, int c1, const float* src) {
            ops::ref::kv_store_cols(got.view, values, c0, c1, table.data(), pos.data(), src, n);
        });
        for_each_target([&] {
            store_pieces([&](bool values, int c0, int c1, const float* src) {
                ops::prefetch_kv_store_cols(got.view, values, c0, c1, table.data(), pos.data(),
                                            n);
                ops::kv_store_cols(got.view, values, c0, c1, table.data(), pos.data(), src, n);
            });
        });
    }
}

// A long prefill beside decodes that share its first blocks reads the prefix itself (whole
// tasks), and the decodes share the longer prefix common to them alone; every row keeps the
// bits it has alone. Block tables end exactly at the last block used, so that a read past
// them (planning, prefetching the next task's blocks) shows under the sanitizers.
TEST(Attention, LongPrefillsReadSharedPrefixesThemselves) {
    ThreadPool pool(2);
    const int bs = 16, n_kv_head = 3, n_head = 9, hd = 64;
    TestKv kv(DType::F16, 64, bs, n_kv_head, hd);
    std::vector<int32_t> common(12);
    std::iota(common.begin(), common.end(), 0);
    fill_cache(kv, common, 12 * bs, 3);
    std::vector<int32_t> own = {common[0], common[1], common[2], 40, 41, 42, 43};
    fill_cache(kv, own, 7 * bs, 4);  // rewrites blocks 0-2 the same way for every reader
    std::vector<TestSeq> seqs;
    seqs.push_back(make_seq(common, 191, 1, n_head, hd, 11));  // keys end on a block boundary
    seqs.push_back(make_seq(common, 185, 1, n_head, hd, 12));
    seqs.push_back(make_seq(own, 60, 40, n_head, hd, 13));  // 40 rows: 120 query vectors/head
    std::vector<ops::AttentionSeq> batch;
    for (TestSeq& s : seqs) batch.push_back(s.seq);
    const auto groups = ops::find_shared_prefixes(batch.data(), 3, bs);
    ASSERT_EQ(groups.size(), 1u);
    EXPECT_EQ(groups[0].n_blocks, 3);  // the prefill shortens the group's prefix

    ops::AttentionPlan plan;
    ops::plan_attention(kv.view, batch.data(), 3, n_head, true, plan);
    for (int qid : plan.task_qids) EXPECT_NE(plan.qvecs[size_t(qid)].seq, 2);
    int prefill_whole = 0;
    for (int qid : plan.whole_qids) prefill_whole += plan.qvecs[size_t(qid)].seq == 2;
    EXPECT_EQ(prefill_whole, 40 * n_head);
    int shared_tasks = 0;  // the decodes read keys [0, 128) together: 8 blocks, not 3
    for (const ops::AttentionPlan::Task& t : plan.tasks) {
        if (t.whole || t.k0 != 0 || t.k1 != 128) continue;
        bool a = false, b = false;
        for (int i = t.slot0; i < t.slot1; ++i) {
            a |= plan.qvecs[size_t(plan.task_qids[size_t(i)])].seq == 0;
            b |= plan.qvecs[size_t(plan.task_qids[size_t(i)])].seq == 1;
        }
        shared_tasks += a && b;
    }
    EXPECT_EQ(shared_tasks, n_kv_head);

    check_against_reference(kv, seqs, n_head, &pool, true);
    for_each_target([&] {
        ops::attention(kv.view, batch.data(), 3, n_head, 0.125f, &pool);
        for (TestSeq& s : seqs) {
            const std::vector<float> together = s.out;
            ops::attention(kv.view, &s.seq, 1, n_head, 0.125f, &pool);
            EXPECT_EQ(s.out, together) << "first position " << s.seq.first_pos;
        }
    });
    // One sequence whose keys end on a block boundary, two chunks: the first chunk's task
    // prefetches the second's blocks up to the table's last entry.
    std::vector<int32_t> table16(16);
    std::iota(table16.begin(), table16.end(), 20);
    fill_cache(kv, table16, 16 * bs, 5);
    std::vector<TestSeq> alone;
    alone.push_back(make_seq(table16, 255, 1, n_head, hd, 14));
    check_against_reference(kv, alone, n_head, &pool, true);
}

// The prefetcher of the next task's blocks visits every run in order, two lines per tick.
TEST(LinePrefetcher, WalksEveryRunInOrder) {
    std::vector<uint8_t> mem(16384);
    PrefetchRuns runs;
    runs.bytes = 640;  // 10 lines: 5 ticks per run
    const size_t at[] = {4096, 0, 8192};
    for (size_t a : at) runs.run[runs.n++] = mem.data() + a;
    LinePrefetcher pf(&runs);
    for (size_t r = 0; r < 3; ++r) {
        for (size_t line = 0; line < 10; line += 2) {
            ASSERT_FALSE(pf.done());
            EXPECT_EQ(pf.next_line(), mem.data() + at[r] + line * 64) << "run " << r;
            pf.tick();
        }
    }
    EXPECT_TRUE(pf.done());
    pf.tick();  // past the end: nothing
    EXPECT_TRUE(pf.done());
    EXPECT_TRUE(LinePrefetcher(nullptr).done());
    PrefetchRuns none;
    EXPECT_TRUE(LinePrefetcher(&none).done());
}

}  // namespace
}  // namespace troupe
