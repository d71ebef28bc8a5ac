// The persistent thread pool: every task runs exactly once, uneven tasks, many runs in a row,
// 1..N threads, barriers, scratch memory, and destruction while idle or asleep.
#include "kernels/thread_pool.h"

#include "kernels/probes.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace troupe {
namespace {

TEST(ThreadPool, EveryTaskRunsOnceOnAValidThread) {
    for (int n_threads = 1; n_threads <= 6; ++n_threads) {
        ThreadPool pool(n_threads);
        EXPECT_EQ(pool.size(), n_threads);
        for (int64_t n_tasks : {0, 1, 2, 3, 7, 64, 1000}) {
            std::vector<std::atomic<int>> hits(static_cast<size_t>(n_tasks));
            std::atomic<bool> bad_thread{false};
            pool.run(n_tasks, [&](int64_t task, int thread) {
                if (thread < 0 || thread >= n_threads) bad_thread = true;
                hits[size_t(task)].fetch_add(1);
            });
            EXPECT_FALSE(bad_thread);
            for (int64_t t = 0; t < n_tasks; ++t) ASSERT_EQ(hits[size_t(t)].load(), 1) << t;
        }
    }
}

TEST(ThreadPool, ManyRunsWithUnevenTasks) {
    ThreadPool pool(4);
    std::vector<int64_t> out(97);
    for (int run = 0; run < 2000; ++run) {
        pool.run(int64_t(out.size()), [&](int64_t task, int) {
            // Uneven work: some tasks spin much longer than others.
            int64_t acc = task;
            for (int64_t i = 0; i < (task % 7) * 50; ++i) acc = acc * 31 + i;
            out[size_t(task)] = task + run + (acc & 0);
        });
        for (size_t t = 0; t < out.size(); ++t) ASSERT_EQ(out[t], int64_t(t) + run);
    }
}

TEST(ThreadPool, UnevenTasksAreSpreadOverThreads) {
    // With one slow task, the other threads take the rest: dynamic handout works.
    ThreadPool pool(3);
    std::vector<int> owner(30, -1);
    pool.run(30, [&](int64_t task, int thread) {
        if (task == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        owner[size_t(task)] = thread;
    });
    const int slow = owner[0];
    int others = 0;
    for (size_t t = 1; t < owner.size(); ++t) others += owner[t] != slow;
    EXPECT_GT(others, 20);
}

TEST(ThreadPool, AcceptsStdFunction) {
    ThreadPool pool(2);
    std::atomic<int64_t> sum{0};
    const std::function<void(int64_t, int)> fn = [&](int64_t task, int) { sum += task; };
    pool.run(100, fn);
    EXPECT_EQ(sum.load(), 4950);
}

TEST(ThreadPool, RunOnAllWithBarriers) {
    for (int n_threads = 1; n_threads <= 5; ++n_threads) {
        ThreadPool pool(n_threads);
        std::vector<int> stage(size_t(n_threads), 0);
        std::atomic<int> errors{0};
        for (int run = 0; run < 200; ++run) {
            std::vector<int> seen(size_t(n_threads), 0);
            pool.run_on_all([&](int thread) {
                for (int step = 1; step <= 5; ++step) {
                    stage[size_t(thread)] = step;
                    pool.barrier();
                    // After the barrier every thread has finished the step.
                    for (int t = 0; t < n_threads; ++t)
                        if (stage[size_t(t)] < step) errors.fetch_add(1);
                    pool.barrier();
                }
                seen[size_t(thread)] = 1;
            });
            for (int t = 0; t < n_threads; ++t) ASSERT_EQ(seen[size_t(t)], 1);
        }
        EXPECT_EQ(errors.load(), 0);
    }
}

TEST(ThreadPool, WakesUpAfterSleeping) {
    ThreadPool pool(3);
    std::atomic<int> count{0};
    pool.run(10, [&](int64_t, int) { count++; });
    // Long enough for the workers to stop spinning and sleep on the futex.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::set<int> threads;
    std::mutex mu;
    pool.run(300, [&](int64_t, int thread) {
        count++;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        std::lock_guard<std::mutex> lock(mu);
        threads.insert(thread);
    });
    EXPECT_EQ(count.load(), 310);
    EXPECT_EQ(threads.size(), 3u);
}

TEST(ThreadPool, DestroyedWhileIdleOrAsleep) {
    for (int i = 0; i < 50; ++i) {
        ThreadPool pool(1 + i % 4);  // never used
    }
    for (int i = 0; i < 20; ++i) {
        ThreadPool pool(3);
        pool.run(5, [](int64_t, int) {});
    }
    ThreadPool sleeper(3);
    sleeper.run(5, [](int64_t, int) {});
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

TEST(ThreadPool, ScratchIsAlignedAndKeptAcrossCalls) {
    ThreadPool pool(2);
    auto* a = static_cast<uint8_t*>(pool.thread_scratch(1, 100));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
    std::memset(a, 7, 100);
    EXPECT_EQ(pool.thread_scratch(1, 50), a);  // no shrink, no move
    auto* s = static_cast<uint8_t*>(pool.shared_scratch(1 << 20));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s) % 64, 0u);
    std::memset(s, 1, 1 << 20);
    EXPECT_NE(pool.thread_scratch(0, 10), static_cast<void*>(a));
}

// The core-to-core probe (kernels/probes.h) runs on the pool: 0 without a second thread, a
// positive round trip otherwise, and threads beyond the first two wait at its barrier too.
// (No upper bound: on a busy machine each trip may wait for the scheduler; the probe then
// stops after ~50 ms.)
TEST(ThreadPool, CoreToCoreProbe) {
    ThreadPool one(1);
    EXPECT_EQ(kernels::probe_core_to_core_ns(&one, 2).median, 0.0);
    EXPECT_EQ(kernels::probe_core_to_core_ns(nullptr, 2).median, 0.0);
    for (int n : {2, 3}) {
        ThreadPool pool(n);
        const kernels::ProbeResult r = kernels::probe_core_to_core_ns(&pool, 2);
        EXPECT_GT(r.best, 0.0) << n << " threads";
        EXPECT_LE(r.best, r.median);
    }
}

// The read probe over byte ranges (what `troupe bench model` divides decode by), free-running
// and stepped: positive rates on 1 to 3 threads, and the stepped form returns when some
// threads' slices of a range are empty (ranges shorter than a thread's whole 512-byte groups):
// every thread must still reach every range's barrier, or the probe hangs.
TEST(ThreadPool, ReadRangesProbeFreeAndStepped) {
    // Ranges at 64-byte aligned addresses: 1,050 bytes give 2 threads slices of 512 and 0
    // whole groups, 1,600 bytes give 3 threads 512, 0 and 512.
    std::vector<uint8_t> bytes(size_t(1) << 20, 1);
    const auto aligned = [&](size_t at) {
        const auto p = reinterpret_cast<uintptr_t>(bytes.data()) + at;
        return reinterpret_cast<const uint8_t*>((p + 63) / 64 * 64);
    };
    std::vector<kernels::ByteRange> ranges;
    size_t at = 0;
    for (size_t len : {1050, 1600, 64, 300000, 1050, 1600, 8192, 1600}) {
        ranges.push_back({aligned(at), len});
        at += len + 64;
    }
    for (int n : {1, 2, 3}) {
        ThreadPool pool(n);
        for (bool stepped : {false, true}) {
            const kernels::ProbeResult r = kernels::probe_read_ranges(&pool, ranges, 2, stepped);
            EXPECT_GT(r.best, 0.0) << n << " threads, stepped " << stepped;
            EXPECT_GE(r.best, r.median);
        }
    }
    EXPECT_GT(kernels::probe_read_ranges(nullptr, ranges, 1, true).best, 0.0);
}

}  // namespace
}  // namespace troupe
