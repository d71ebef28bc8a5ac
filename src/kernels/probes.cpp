// The machine-limit probes (probes.h). The loops are Highway code so that they use the
// widest vectors of the target the kernels run on.
#include "kernels/simd_targets.h"  // first: decides the targets

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/probes.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/dot-inl.h"
#include "kernels/line_prefetch.h"
#include "kernels/simd-inl.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_GCC_ACTUAL
#pragma GCC target("avx512vnni")
#endif
namespace troupe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sum of n floats (n a multiple of 8 vectors), eight independent accumulators, prefetching
// as far ahead as the streaming kernels, and the same way (kStreamPrefetchBytes,
// prefetch_stream): with the hardware prefetcher alone the probe read ~10% less than those
// kernels stream on the development machine, which put decode above "100% of the roofline".
float ReadSum(const float* HWY_RESTRICT p, size_t n) {
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    const size_t ahead = kStreamPrefetchBytes / sizeof(float);
    auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (size_t i = 0; i + 8 * N <= n; i += 8 * N) {
        if (i + ahead + 8 * N <= n)
            for (size_t f = 0; f < 8 * N; f += 64 / sizeof(float))
                prefetch_stream(p + i + ahead + f);
        a0 = hn::Add(a0, hn::Load(d, p + i));
        a1 = hn::Add(a1, hn::Load(d, p + i + N));
        a2 = hn::Add(a2, hn::Load(d, p + i + 2 * N));
        a3 = hn::Add(a3, hn::Load(d, p + i + 3 * N));
        a4 = hn::Add(a4, hn::Load(d, p + i + 4 * N));
        a5 = hn::Add(a5, hn::Load(d, p + i + 5 * N));
        a6 = hn::Add(a6, hn::Load(d, p + i + 6 * N));
        a7 = hn::Add(a7, hn::Load(d, p + i + 7 * N));
    }
    const auto s = hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)),
                           hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)));
    return hn::GetLane(hn::SumOfLanes(d, s));
}

// 12 independent FMA chains (enough to cover latency 4 x 2 pipes with room), `iters` steps.
// Returns the float operations done and a value that depends on all of them.
double FmaChains(int64_t iters, float* sink) {
    const hn::ScalableTag<float> d;
    const auto m = hn::Set(d, 0.999999f), c = hn::Set(d, 1e-7f);
    auto a0 = hn::Set(d, 0.1f), a1 = hn::Set(d, 0.2f), a2 = hn::Set(d, 0.3f), a3 = hn::Set(d, 0.4f);
    auto a4 = hn::Set(d, 0.5f), a5 = hn::Set(d, 0.6f), a6 = hn::Set(d, 0.7f), a7 = hn::Set(d, 0.8f);
    auto a8 = hn::Set(d, 0.9f), a9 = hn::Set(d, 1.0f), a10 = hn::Set(d, 1.1f),
         a11 = hn::Set(d, 1.2f);
    for (int64_t i = 0; i < iters; ++i) {
        a0 = hn::MulAdd(a0, m, c);
        a1 = hn::MulAdd(a1, m, c);
        a2 = hn::MulAdd(a2, m, c);
        a3 = hn::MulAdd(a3, m, c);
        a4 = hn::MulAdd(a4, m, c);
        a5 = hn::MulAdd(a5, m, c);
        a6 = hn::MulAdd(a6, m, c);
        a7 = hn::MulAdd(a7, m, c);
        a8 = hn::MulAdd(a8, m, c);
        a9 = hn::MulAdd(a9, m, c);
        a10 = hn::MulAdd(a10, m, c);
        a11 = hn::MulAdd(a11, m, c);
    }
    const auto s = hn::Add(hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)),
                                   hn::Add(hn::Add(a4, a5), hn::Add(a6, a7))),
                           hn::Add(hn::Add(a8, a9), hn::Add(a10, a11)));
    *sink = hn::GetLane(hn::SumOfLanes(d, s));
    return double(iters) * 12.0 * 2.0 * double(hn::Lanes(d));
}

// The same with the kernels' 8-bit dot product (unsigned x signed bytes, 4 per 32-bit lane).
// Returns the operations done (2 per byte product).
double Int8DotChains(int64_t iters, float* sink) {
#if HWY_TARGET == HWY_SCALAR
    (void)iters;
    *sink = 0.0f;
    return 0.0;
#else
    const hn::ScalableTag<int8_t> d8;
    const hn::Repartition<int32_t, decltype(d8)> d32;
    const auto a = hn::Set(d8, 3);
    auto b = hn::Set(d8, -2);
    // Distinct starting values: chains that start equal compute the same thing, and the
    // compiler merged them into one (the probe then timed one dependent chain, the latency).
    auto s0 = hn::Set(d32, 1), s1 = hn::Set(d32, 2), s2 = hn::Set(d32, 3), s3 = hn::Set(d32, 4);
    auto s4 = hn::Set(d32, 5), s5 = hn::Set(d32, 6), s6 = hn::Set(d32, 7), s7 = hn::Set(d32, 8);
    auto s8 = hn::Set(d32, 9), s9 = hn::Set(d32, 10), s10 = hn::Set(d32, 11),
         s11 = hn::Set(d32, 12);
    // b passes a register barrier before every dot product: with constant operands, targets
    // whose dot product is several instructions (vpmaddubsw + vpmaddwd, the portable form)
    // had the products hoisted out of the loop, and the probe timed the additions alone
    // (AVX2 on Zen 3: 514 GOP/s, twice what its multipliers can do).
    const auto dot = [&](decltype(s0) s) {
        KeepInRegister(b);
        return DotU8I8(d32, a, b, s);
    };
    for (int64_t i = 0; i < iters; ++i) {
        s0 = dot(s0);
        s1 = dot(s1);
        s2 = dot(s2);
        s3 = dot(s3);
        s4 = dot(s4);
        s5 = dot(s5);
        s6 = dot(s6);
        s7 = dot(s7);
        s8 = dot(s8);
        s9 = dot(s9);
        s10 = dot(s10);
        s11 = dot(s11);
    }
    const auto s = hn::Add(hn::Add(hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)),
                                   hn::Add(hn::Add(s4, s5), hn::Add(s6, s7))),
                           hn::Add(hn::Add(s8, s9), hn::Add(s10, s11)));
    *sink = float(hn::GetLane(hn::SumOfLanes(d32, s)));
    return double(iters) * 12.0 * 2.0 * double(hn::Lanes(d8));
#endif
}

}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/probes.h"
#include "util/error.h"
#include "util/large_buffer.h"

namespace troupe {
HWY_EXPORT(ReadSum);
HWY_EXPORT(FmaChains);
HWY_EXPORT(Int8DotChains);

namespace kernels {

namespace {

double seconds_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

ProbeResult summarize(std::vector<double> rates) {
    std::sort(rates.begin(), rates.end());
    return {rates.back(), rates[rates.size() / 2]};
}

void on_all_threads(ThreadPool* pool, const std::function<void(int)>& fn) {
    if (pool) {
        pool->run_on_all(fn);
    } else {
        fn(0);
    }
}

// Runs `work(thread) -> operations` on every thread `reps` times; returns operations per
// nanosecond (G per second) of each repetition.
template <class Work>
ProbeResult rate_per_rep(ThreadPool* pool, int reps, Work&& work) {
    const int n_threads = pool ? pool->size() : 1;
    std::vector<double> rates;
    std::vector<double> ops(static_cast<size_t>(n_threads));
    for (int r = 0; r < std::max(reps, 1); ++r) {
        const double t0 = seconds_now();
        on_all_threads(pool, [&](int thread) { ops[size_t(thread)] = work(thread); });
        const double dt = seconds_now() - t0;
        double total = 0;
        for (double o : ops) total += o;
        rates.push_back(total / dt * 1e-9);
    }
    return summarize(std::move(rates));
}

}  // namespace

ProbeResult probe_read_bandwidth(ThreadPool* pool, size_t bytes, int reps) {
    const int n_threads = pool ? pool->size() : 1;
    constexpr size_t kChunk = 4096;  // every slice a whole number of pages, all vectors whole
    const size_t per_thread = bytes / size_t(n_threads) / kChunk * kChunk;
    TROUPE_CHECK(per_thread > 0);
    const size_t total = per_thread * size_t(n_threads);
    const LargeBuffer buf(total);
    // Each thread touches its own slice first (first-touch placement on NUMA machines).
    on_all_threads(pool, [&](int thread) {
        std::memset(buf.data() + per_thread * size_t(thread), 0, per_thread);
    });
    const auto sum = HWY_DYNAMIC_DISPATCH(ReadSum);
    std::vector<float> sink(static_cast<size_t>(n_threads));
    auto read = [&](int thread) {
        const auto* p = reinterpret_cast<const float*>(buf.data() + per_thread * size_t(thread));
        sink[size_t(thread)] += sum(p, per_thread / sizeof(float));
        return double(per_thread);
    };
    rate_per_rep(pool, 3, read);  // not counted: caches reach their steady state
    return rate_per_rep(pool, reps, read);
}

ProbeResult probe_read_ranges(ThreadPool* pool, const std::vector<ByteRange>& ranges, int reps,
                              bool stepped) {
    const int n_threads = pool ? pool->size() : 1;
    const auto sum = HWY_DYNAMIC_DISPATCH(ReadSum);
    constexpr size_t kVecBytes = 64 * 8;  // ReadSum reads whole groups of 8 vectors
    std::vector<float> sink(static_cast<size_t>(n_threads));
    auto read = [&](int thread) {
        double bytes = 0;
        for (const ByteRange& r : ranges) {
            // This thread's slice, aligned to 64 bytes (a few bytes at the seams are not read).
            const auto begin = reinterpret_cast<uintptr_t>(r.data);
            const uintptr_t lo =
                (begin + r.bytes * size_t(thread) / size_t(n_threads) + 63) / 64 * 64;
            const uintptr_t hi =
                (begin + r.bytes * size_t(thread + 1) / size_t(n_threads)) / 64 * 64;
            const size_t n = hi > lo ? (hi - lo) / kVecBytes * kVecBytes : 0;
            if (n > 0) {
                sink[size_t(thread)] += sum(reinterpret_cast<const float*>(lo), n / sizeof(float));
                bytes += double(n);
            }
            if (stepped && pool) pool->barrier();
        }
        return bytes;
    };
    rate_per_rep(pool, 3, read);  // not counted: caches reach their steady state
    return rate_per_rep(pool, reps, read);
}

ProbeResult probe_fma(ThreadPool* pool, int reps) {
    const auto chains = HWY_DYNAMIC_DISPATCH(FmaChains);
    const int n_threads = pool ? pool->size() : 1;
    std::vector<float> sink(static_cast<size_t>(n_threads));
    return rate_per_rep(pool, reps,
                        [&](int thread) { return chains(4'000'000, &sink[size_t(thread)]); });
}

ProbeResult probe_int8_dot(ThreadPool* pool, int reps) {
    const auto chains = HWY_DYNAMIC_DISPATCH(Int8DotChains);
    const int n_threads = pool ? pool->size() : 1;
    std::vector<float> sink(static_cast<size_t>(n_threads));
    return rate_per_rep(pool, reps,
                        [&](int thread) { return chains(2'000'000, &sink[size_t(thread)]); });
}

ProbeResult probe_core_to_core_ns(ThreadPool* pool, int reps) {
    if (!pool || pool->size() < 2) return {};
    // Up to kTrips round trips or about kSeconds, whichever ends first: on a machine with
    // more threads than free cores, each trip may wait for the scheduler.
    constexpr int kTrips = 20000;
    constexpr double kSeconds = 0.05;
    constexpr int kStop = -1;
    struct alignas(64) Line {
        std::atomic<int> value{0};
    };
    std::vector<double> ns;
    for (int r = 0; r < std::max(reps, 1); ++r) {
        Line line;
        double dt = 0;
        int trips = 0;
        pool->run_on_all([&](int thread) {
            pool->barrier();  // both are running before the clock starts
            if (thread == 0) {
                const double t0 = seconds_now();
                for (; trips < kTrips; ++trips) {
                    if (trips % 16 == 0 && trips > 0 && seconds_now() - t0 > kSeconds) break;
                    line.value.store(2 * trips + 1, std::memory_order_release);
                    while (line.value.load(std::memory_order_acquire) != 2 * trips + 2) {
                    }
                }
                dt = seconds_now() - t0;
                line.value.store(kStop, std::memory_order_release);
            } else if (thread == 1) {
                for (int i = 0;; ++i) {
                    int v;
                    while ((v = line.value.load(std::memory_order_acquire)) != 2 * i + 1 &&
                           v != kStop) {
                    }
                    if (v == kStop) break;
                    line.value.store(2 * i + 2, std::memory_order_release);
                }
            }
        });
        ns.push_back(dt / std::max(trips, 1) * 1e9);
    }
    std::sort(ns.begin(), ns.end());
    return {ns.front(), ns[ns.size() / 2]};
}

}  // namespace kernels
}  // namespace troupe
#endif  // HWY_ONCE
