// Parallel regions: every task of every step runs exactly once, a step sees everything the
// steps before it wrote, late participants skip what is done, shares tile their range, and
// shared scratch grows collectively.
#include "kernels/region.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

namespace troupe {
namespace {

TEST(Region, EveryTaskOfEveryStepRunsOnce) {
    for (int n_threads = 1; n_threads <= 5; ++n_threads) {
        ThreadPool pool(n_threads);
        const std::vector<int64_t> sizes = {0, 1, 2, 3, 7, 100, 1, 64};
        std::vector<std::vector<std::atomic<int>>> hits;
        for (int64_t n : sizes) hits.emplace_back(size_t(n));
        std::atomic<int> participants{0};
        for (int run = 0; run < 20; ++run) {
            for (auto& h : hits)
                for (auto& c : h) c = 0;
            participants = 0;
            run_region(&pool, [&](Region& r) {
                participants.fetch_add(1);
                EXPECT_EQ(r.size(), n_threads);
                for (size_t s = 0; s < sizes.size(); ++s)
                    r.for_each(sizes[s], [&](int64_t t) { hits[s][size_t(t)].fetch_add(1); });
            });
            EXPECT_EQ(participants.load(), n_threads);
            for (size_t s = 0; s < sizes.size(); ++s)
                for (int64_t t = 0; t < sizes[s]; ++t)
                    ASSERT_EQ(hits[s][size_t(t)].load(), 1) << "step " << s << " task " << t;
        }
    }
}

TEST(Region, StepsSeeTheWritesOfEarlierSteps) {
    for (int n_threads : {1, 2, 3, 4}) {
        ThreadPool pool(n_threads);
        const int64_t n = 257;
        std::vector<int64_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
        std::iota(a.begin(), a.end(), 0);
        std::vector<int64_t> want = a;
        const int steps = 300;
        for (int s = 0; s < steps; ++s) {  // want[i] = want[i] + want[(i + 1) % n], twice per s
            std::vector<int64_t> next(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i)
                next[size_t(i)] = (want[size_t(i)] + want[size_t((i + 1) % n)]) % 1000003;
            want = next;
        }
        run_region(&pool, [&](Region& r) {
            for (int s = 0; s < steps; ++s) {
                std::vector<int64_t>& from = s % 2 ? b : a;
                std::vector<int64_t>& to = s % 2 ? a : b;
                r.for_each(n, [&](int64_t i) {
                    to[size_t(i)] = (from[size_t(i)] + from[size_t((i + 1) % n)]) % 1000003;
                });
            }
        });
        EXPECT_EQ(steps % 2 ? b : a, want) << n_threads << " threads";
    }
}

TEST(Region, ALateParticipantSkipsWhatIsDone) {
    ThreadPool pool(3);
    std::vector<int> done_by(600, -1);
    std::atomic<int> late_tasks{0};
    run_region(&pool, [&](Region& r) {
        const bool late = r.index() == 2;
        if (late) std::this_thread::sleep_for(std::chrono::milliseconds(30));
        for (int s = 0; s < 6; ++s)
            r.for_each(100, [&](int64_t t) {
                done_by[size_t(s * 100 + t)] = r.index();
                if (late) late_tasks.fetch_add(1);
            });
    });
    for (int v : done_by) EXPECT_GE(v, 0);
    // The others took the late participant's shares instead of waiting for it.
    EXPECT_LT(late_tasks.load(), 100);
}

TEST(Region, SharesTileTheRange) {
    ThreadPool pool(1);
    RegionShared shared(4, nullptr);
    for (int64_t n : {0, 1, 5, 16, 17, 100, 1000})
        for (int64_t multiple : {1, 4, 16}) {
            Region r(shared, 0, 4, 0);
            int64_t expect = 0;
            for (int p = 0; p < 4; ++p) {
                const auto [b, e] = r.share(n, p, multiple);
                EXPECT_EQ(b, expect);
                EXPECT_LE(b, e);
                if (e < n) {
                    EXPECT_EQ(e % multiple, 0);
                }
                expect = e;
            }
            EXPECT_EQ(expect, n);
        }
}

TEST(Region, SharedScratchGrowsCollectively) {
    for (int n_threads : {1, 2, 4}) {
        ThreadPool pool(n_threads);
        std::atomic<int> errors{0};
        run_region(n_threads == 1 ? nullptr : &pool, [&](Region& r) {
            for (size_t bytes : {size_t(64), size_t(1000), size_t(100), size_t(1) << 20}) {
                auto* p = static_cast<uint8_t*>(r.shared_scratch(bytes));
                if (reinterpret_cast<uintptr_t>(p) % 64 != 0) errors.fetch_add(1);
                r.for_each(int64_t(bytes), [&](int64_t i) { p[i] = uint8_t(i * 7); });
                r.for_each(int64_t(bytes), [&](int64_t i) {
                    if (p[i] != uint8_t(i * 7)) errors.fetch_add(1);
                });
            }
        });
        EXPECT_EQ(errors.load(), 0) << n_threads << " threads";
    }
}

TEST(Region, ProfileRecordsEveryLabelledStepOfEveryParticipant) {
    for (int n_threads : {1, 3}) {
        ThreadPool pool(n_threads);
        StepProfile profile;
        for (int pass = 0; pass < 4; ++pass) {
            run_region(n_threads == 1 ? nullptr : &pool, &profile, [&](Region& r) {
                for (int layer = 0; layer < 5; ++layer) {
                    r.set_op("matmul");
                    r.set_phase("convert");
                    r.for_each(3, [](int64_t) {});
                    r.set_phase(nullptr);
                    r.for_each(8, [](int64_t) {
                        std::this_thread::sleep_for(std::chrono::microseconds(50));
                    });
                    r.set_op("attention");
                    r.for_each(2, [](int64_t) {});
                }
            });
        }
        EXPECT_EQ(profile.regions(), 4);
        ASSERT_EQ(profile.participants(), n_threads);
        const std::vector<StepProfile::Op> ops = profile.ops();
        ASSERT_EQ(ops.size(), 3u);
        EXPECT_EQ(ops[0].name, "matmul/convert");
        EXPECT_EQ(ops[1].name, "matmul");
        EXPECT_EQ(ops[2].name, "attention");
        double sleep_work = 0;
        for (const StepProfile::Op& op : ops) {
            EXPECT_EQ(op.steps, 20) << op.name;  // 5 layers x 4 passes, per participant
            ASSERT_EQ(op.work_ns.size(), size_t(n_threads));
            for (int p = 0; p < n_threads; ++p) EXPECT_GE(op.wait_ns[size_t(p)], 0.0);
        }
        for (double w : ops[1].work_ns) sleep_work += w;
        // 8 sleeps of 50 us per step, 20 steps: at least 8 ms of work over the participants.
        EXPECT_GE(sleep_work, 8e6);
        profile.clear();
        EXPECT_EQ(profile.regions(), 0);
        EXPECT_TRUE(profile.ops().empty());
    }
}

}  // namespace
}  // namespace troupe
