#include "kernels/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "kernels/spin.h"
#include "util/error.h"

namespace troupe {

namespace {

// Spinning keeps a worker's wake-up latency at a few hundred nanoseconds while the forward
// pass dispatches op after op; after spinning this long without work it sleeps instead, so
// an idle engine costs no CPU (and other processes get the core).
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(100);

}  // namespace

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(std::clamp(n_threads, 1, kMaxThreads)), thread_buffers_(size_t(n_threads_)) {
    workers_.reserve(size_t(n_threads_ - 1));
    for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_main(t); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);  // wakes the workers, who see stop_
    generation_.notify_all();
    for (std::thread& w : workers_) w.join();
}

void ThreadPool::Buffer::Free::operator()(void* p) const {
    std::free(p);
}

void* ThreadPool::grow(Buffer& b, size_t bytes) {
    if (bytes > b.bytes || !b.data) {
        const size_t rounded = (bytes + 63) / 64 * 64 + 64;
        void* p = std::aligned_alloc(64, rounded);
        TROUPE_CHECK(p != nullptr);
        b.data.reset(static_cast<uint8_t*>(p));
        b.bytes = rounded;
    }
    return b.data.get();
}

void* ThreadPool::thread_scratch(int thread, size_t bytes) {
    TROUPE_CHECK(thread >= 0 && thread < n_threads_);
    return grow(thread_buffers_[size_t(thread)], bytes);
}

void* ThreadPool::shared_scratch(size_t bytes) {
    return grow(shared_buffer_, bytes);
}

void ThreadPool::execute(int thread) {
    const Job& job = job_;
    if (job.kind == Job::Kind::AllThreads) {
        job.call(job.fn, thread, thread);
        return;
    }
    for (;;) {
        const int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
        if (task >= job.n_tasks) break;
        job.call(job.fn, task, thread);
    }
}

void ThreadPool::wait_for_generation(uint32_t seen) {
    const auto deadline = std::chrono::steady_clock::now() + kSpinBeforeSleep;
    for (int i = 1;; ++i) {
        if (generation_.load(std::memory_order_acquire) != seen) return;
        cpu_relax();
        if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) break;
    }
    // Announce the sleep before re-checking (seq_cst on both sides): either the owner sees
    // n_sleeping_ > 0 and notifies, or the futex wait sees the new generation.
    n_sleeping_.fetch_add(1, std::memory_order_seq_cst);
    while (generation_.load(std::memory_order_seq_cst) == seen) generation_.wait(seen);
    n_sleeping_.fetch_sub(1, std::memory_order_relaxed);
}

namespace {
constexpr uint64_t kActiveOne = 1;
constexpr uint64_t kJoinedOne = uint64_t(1) << 16;
constexpr uint64_t kOpen = uint64_t(1) << 32;
constexpr int kGenShift = 33;
uint64_t active(uint64_t state) {
    return state & 0xFFFF;
}
uint64_t joined(uint64_t state) {
    return (state >> 16) & 0xFFFF;
}
uint64_t gen_bits(uint32_t generation) {
    return uint64_t(generation) & ((uint64_t(1) << 31) - 1);
}
}  // namespace

// Enters the job of `generation` if it still accepts workers.
bool ThreadPool::join(uint32_t generation) {
    uint64_t s = state_.load(std::memory_order_acquire);
    for (;;) {
        if ((s >> kGenShift) != gen_bits(generation) || !(s & kOpen)) return false;
        if (state_.compare_exchange_weak(s, s + kActiveOne + kJoinedOne, std::memory_order_acq_rel))
            return true;
    }
}

void ThreadPool::worker_main(int thread) {
    uint32_t seen = 0;
    for (;;) {
        wait_for_generation(seen);
        seen = generation_.load(std::memory_order_acquire);
        if (stop_.load(std::memory_order_relaxed)) return;
        if (!join(seen)) continue;  // the owner finished without us
        execute(thread);
        state_.fetch_sub(kActiveOne, std::memory_order_release);
    }
}

void ThreadPool::dispatch(const Job& job) {
    if (job.n_tasks <= 0) return;
    if (n_threads_ == 1 || (job.kind == Job::Kind::Tasks && job.n_tasks == 1)) {
        for (int64_t t = 0; t < job.n_tasks; ++t) job.call(job.fn, t, 0);
        return;
    }
    job_ = job;
    next_task_.store(0, std::memory_order_relaxed);
    barrier_count_.store(0, std::memory_order_relaxed);
    const uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
    state_.store((gen_bits(generation) << kGenShift) | kOpen, std::memory_order_release);
    generation_.store(generation, std::memory_order_seq_cst);  // publishes the job
    if (n_sleeping_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
    execute(0);
    if (job.kind == Job::Kind::AllThreads) {
        // Every worker must run fn once: wait until all have joined and left.
        spin_until([&] {
            const uint64_t s = state_.load(std::memory_order_acquire);
            return joined(s) == uint64_t(n_threads_ - 1) && active(s) == 0;
        });
    } else {
        // Every task is taken: close the job to late workers, wait for those inside.
        state_.fetch_and(~kOpen, std::memory_order_acq_rel);
        spin_until([&] { return active(state_.load(std::memory_order_acquire)) == 0; });
    }
}

void ThreadPool::barrier() {
    if (n_threads_ == 1) return;
    const uint32_t gen = barrier_gen_.load(std::memory_order_acquire);
    if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n_threads_ - 1) {
        barrier_count_.store(0, std::memory_order_relaxed);
        barrier_gen_.fetch_add(1, std::memory_order_release);
        return;
    }
    spin_until([&] { return barrier_gen_.load(std::memory_order_acquire) != gen; });
}

}  // namespace troupe
