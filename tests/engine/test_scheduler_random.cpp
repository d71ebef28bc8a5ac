// Accounting under load: thousands of random requests (shared prefixes across namespaces,
// random lengths and priorities, cancellations at random moments, a pool small enough to force
// pre-emptions, power-profile switches, namespace invalidations) driven through schedule() /
// postprocess() with the fake model. Every step: all invariants hold and every KV read is
// right. At the end: every reference count is zero and every block is free or cached.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "fake_model.h"

namespace troupe {
namespace {

struct Scenario {
    uint32_t seed = 1;
    int n_requests = 2000;
    int n_blocks = 48;
    int block_size = 4;
    uint64_t hash_mask = ~uint64_t(0);
    bool caching = true;
};

struct Tally {
    std::map<FinishReason, int> finish;
    uint64_t preemptions = 0;
    uint64_t cached_tokens = 0;
    int cancelled_running = 0;
    int cancelled_waiting = 0;
    int cancelled_in_flight = 0;
};

Tally run(const Scenario& sc) {
    SchedulerConfig config;
    config.max_num_seqs = 6;
    config.max_num_batched_tokens = 40;
    config.max_model_len = 96;
    config.eos_tokens = {2};
    kv::BlockManagerConfig kv_config;
    kv_config.n_blocks = sc.n_blocks;
    kv_config.block_size = sc.block_size;
    kv_config.enable_prefix_caching = sc.caching;
    kv_config.hash_mask = sc.hash_mask;
    test::Harness h(config, kv_config);

    std::mt19937 rng(sc.seed);
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const std::vector<std::string> namespaces = {"", "t1:a:v1", "t1:a:v2", "t2:b:v1"};
    // A few shared prefixes, used under every namespace: equal tokens, separate caches.
    std::vector<std::vector<int32_t>> prefixes;
    for (int i = 0; i < 4; ++i) {
        std::vector<int32_t> p;
        const int n = uniform(0, 40);
        for (int j = 0; j < n; ++j) p.push_back(uniform(3, 12));  // small vocabulary
        prefixes.push_back(p);
    }
    // Position-and-content dependent fake sampling; EOS now and then.
    auto sample = [&](const Sequence& s) -> int32_t {
        const uint32_t x = uint32_t(s.tokens.size()) * 2654435761u ^ uint32_t(s.tokens.back());
        return x % 23 == 0 ? 2 : int32_t(3 + x % 10);
    };

    Tally tally;
    std::vector<RequestId> ids, last_ids;
    int submitted = 0;
    int steps = 0;
    while (submitted < sc.n_requests || h.scheduler.has_work()) {
        // Bursts, like the agents of one task submitted together; about the rate the
        // scheduler drains, so the queue stays short and the pool stays under pressure.
        const int burst = uniform(0, 99) < 10 ? uniform(1, 6) : 0;
        for (int k = burst; k > 0 && submitted < sc.n_requests; --k, ++submitted) {
            std::vector<int32_t> prompt = prefixes[size_t(uniform(0, 3))];
            for (int j = uniform(1, 20); j > 0; --j) prompt.push_back(uniform(3, 12));
            const int max_tokens =
                uniform(1, std::min(40, config.max_model_len - int(prompt.size())));
            ids.push_back(
                h.submit(prompt, max_tokens, uniform(0, 3), namespaces[size_t(uniform(0, 3))]));
        }
        if (uniform(0, 99) < 4) {  // cancel one of the latest requests (mostly waiting)
            const int n = int(ids.size());
            const RequestId id = ids[size_t(uniform(std::max(0, n - 12), n - 1))];
            if (h.scheduler.find(id)) {
                ++tally.cancelled_waiting;
                EXPECT_TRUE(h.scheduler.cancel(id, h.now));
            }
        }
        if (!last_ids.empty() && uniform(0, 99) < 3) {  // cancel one of the last step's batch
            const RequestId id = last_ids[size_t(uniform(0, int(last_ids.size()) - 1))];
            if (const Sequence* s = h.scheduler.find(id)) {
                EXPECT_EQ(s->status, SeqStatus::Running);
                ++tally.cancelled_running;
                EXPECT_TRUE(h.scheduler.cancel(id, h.now));
            }
        }
        if (uniform(0, 199) == 0)
            h.scheduler.set_power_profile(power_profile(PowerMode(uniform(0, 2)), 4));
        if (uniform(0, 299) == 0)
            h.scheduler.invalidate_namespace(namespaces[size_t(uniform(0, 3))]);

        h.now += 1;
        const ScheduledBatch batch = h.scheduler.schedule(h.now);
        const std::string fault = h.model.forward(batch, h.scheduler.block_manager());
        EXPECT_EQ(fault, "") << "step " << steps;
        if (!fault.empty()) break;
        if (!batch.seqs.empty() && uniform(0, 99) < 3) {  // cancelled mid-step
            EXPECT_TRUE(h.scheduler.cancel(
                batch.seqs[size_t(uniform(0, int(batch.seqs.size()) - 1))].id, h.now));
            ++tally.cancelled_in_flight;
        }
        last_ids.clear();
        for (const ScheduledSeq& s : batch.seqs) last_ids.push_back(s.id);
        std::vector<int32_t> sampled;
        for (const ScheduledSeq& s : batch.seqs)
            sampled.push_back(s.needs_sample ? sample(*s.seq) : -1);
        h.scheduler.postprocess(batch, sampled, h.now + 0.5);
        const std::string invariants = h.scheduler.check_invariants();
        EXPECT_EQ(invariants, "") << "step " << steps;
        if (!invariants.empty()) break;
        for (auto& seq : h.scheduler.take_finished()) {
            EXPECT_LE(seq->stats.generated_tokens, seq->request.max_tokens);
            if (seq->finish == FinishReason::Length) {
                EXPECT_EQ(seq->stats.generated_tokens, seq->request.max_tokens);
            }
            tally.finish[seq->finish]++;
            h.finished.push_back(std::move(seq));
        }
        ++steps;
        if (steps > 200000) {
            ADD_FAILURE() << "no progress";
            break;
        }
    }

    // Every request finished exactly once; no block is lost; nothing is referenced.
    EXPECT_EQ(h.finished.size(), size_t(sc.n_requests));
    EXPECT_EQ(h.scheduler.check_invariants(), "");
    const kv::KvStats kv = h.scheduler.block_manager().stats();
    EXPECT_EQ(kv.n_used, 0);
    EXPECT_EQ(kv.n_cached + kv.n_free, sc.n_blocks);
    EXPECT_EQ(h.scheduler.block_manager().n_free_blocks(), sc.n_blocks);
    for (int b = 0; b < sc.n_blocks; ++b)
        EXPECT_EQ(h.scheduler.block_manager().pool().ref_count(b), 0);
    const EngineStats stats = h.scheduler.stats();
    EXPECT_EQ(stats.requests_finished, uint64_t(sc.n_requests));
    tally.preemptions = stats.preemptions;
    tally.cached_tokens = stats.cached_tokens;
    return tally;
}

void expect_exercised(const Tally& t, bool caching) {
    EXPECT_GT(t.preemptions, 20u);
    EXPECT_GT(t.cancelled_running, 0);
    EXPECT_GT(t.cancelled_waiting, 0);
    EXPECT_GT(t.cancelled_in_flight, 0);
    EXPECT_GT(t.finish.at(FinishReason::Eos), 0);
    EXPECT_GT(t.finish.at(FinishReason::Length), 0);
    if (caching) {
        EXPECT_GT(t.cached_tokens, 1000u);
    } else {
        EXPECT_EQ(t.cached_tokens, 0u);
    }
    std::printf(
        "preemptions %llu, cached prompt tokens %llu, cancelled running %d waiting %d "
        "mid-step %d, finished eos %d length %d cancelled %d\n",
        (unsigned long long)t.preemptions, (unsigned long long)t.cached_tokens, t.cancelled_running,
        t.cancelled_waiting, t.cancelled_in_flight,
        t.finish.count(FinishReason::Eos) ? t.finish.at(FinishReason::Eos) : 0,
        t.finish.count(FinishReason::Length) ? t.finish.at(FinishReason::Length) : 0,
        t.finish.count(FinishReason::Cancelled) ? t.finish.at(FinishReason::Cancelled) : 0);
}

TEST(SchedulerRandom, AccountingHolds) {
    for (uint32_t seed : {1u, 2u, 3u}) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        Scenario sc;
        sc.seed = seed;
        expect_exercised(run(sc), true);
    }
}

TEST(SchedulerRandom, AllHashesCollide) {
    Scenario sc;
    sc.seed = 7;
    sc.hash_mask = 0;  // lookups rely on verification alone
    expect_exercised(run(sc), true);
}

TEST(SchedulerRandom, BlockSizeOneAndNoCaching) {
    Scenario sc;
    sc.seed = 11;
    sc.block_size = 1;
    sc.n_blocks = 160;
    expect_exercised(run(sc), true);
    sc.caching = false;
    sc.block_size = 4;
    sc.n_blocks = 48;
    expect_exercised(run(sc), false);
}

}  // namespace
}  // namespace troupe
