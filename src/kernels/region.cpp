#include "kernels/region.h"

#include <chrono>

#include "kernels/line_prefetch.h"
#include "kernels/matmul_act.h"
#include "kernels/spin.h"
#include "util/error.h"

namespace troupe {

namespace {

// 64-byte aligned view of at least `bytes` in a grow-only vector.
void* aligned_in(std::vector<uint8_t>& v, size_t bytes) {
    if (v.size() < bytes + 64) v.resize(bytes + 64);
    return reinterpret_cast<void*>(ops::round_up_64(reinterpret_cast<uintptr_t>(v.data())));
}

}  // namespace

RegionShared::RegionShared(int n_participants, ThreadPool* p)
    : claimed(size_t(n_participants)), pool(p) {
    if (pool) shared_bytes_at_start = pool->shared_scratch_bytes();
}

Region::Region(RegionShared& shared, int index, int size, int thread)
    : shared_(shared),
      index_(index),
      size_(size),
      thread_(thread),
      share_base_(size_t(size), 0),
      share_len_(size_t(size), 0),
      shared_bytes_(shared.shared_bytes_at_start) {}

std::pair<int64_t, int64_t> Region::share(int64_t n, int p, int64_t multiple) const {
    const int64_t units = (n + multiple - 1) / multiple;
    const int64_t b = units * p / size_, e = units * (p + 1) / size_;
    return {std::min(n, b * multiple), std::min(n, e * multiple)};
}

void Region::step_begin(int64_t n_tasks) {
    for (int p = 0; p < size_; ++p) {
        share_base_[size_t(p)] += share_len_[size_t(p)];
        const auto [b, e] = share(n_tasks, p);
        share_len_[size_t(p)] = e - b;
    }
    n_tasks_ = n_tasks;
}

bool Region::claim(int p, int64_t& task) {
    std::atomic<int64_t>& c = shared_.claimed[size_t(p)].value;
    const int64_t base = share_base_[size_t(p)], end = base + share_len_[size_t(p)];
    int64_t v = c.load(std::memory_order_relaxed);
    while (v < end) {
        if (c.compare_exchange_weak(v, v + 1, std::memory_order_relaxed)) {
            task = share(n_tasks_, p).first + (v - base);
            return true;
        }
    }
    return false;
}

int64_t Region::now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void Region::step_end(int64_t n_done, int64_t t0) {
    const int64_t t_work = shared_.profile ? now_ns() : 0;
    std::atomic<int64_t>& done = shared_.done.value;
    if (n_done > 0) done.fetch_add(n_done, std::memory_order_acq_rel);
    const int64_t target = done_base_ + n_tasks_;
    // While waiting: the prefetch range first, a few lines between checks, then spinning.
    constexpr int kLinesPerCheck = 8;
    while (pf_next_ < pf_end_ && done.load(std::memory_order_acquire) < target) {
        for (int i = 0; i < kLinesPerCheck && pf_next_ < pf_end_; ++i, pf_next_ += 64)
            prefetch_stream(pf_next_);
    }
    spin_until([&] { return done.load(std::memory_order_acquire) >= target; });
    done_base_ = target;
    if (shared_.profile)
        shared_.profile->record(index_, op_, phase_, t_work - t0, now_ns() - t_work);
}

void* Region::shared_scratch(size_t bytes) {
    if (bytes == 0) return nullptr;
    if (bytes > shared_bytes_) {
        const char* phase = phase_;
        phase_ = "grow scratch";
        serial([&] {
            if (shared_.pool) {
                shared_.pool->shared_scratch(bytes);
            } else {
                aligned_in(shared_.local_shared, bytes);
            }
        });
        shared_bytes_ = bytes;
        phase_ = phase;
    }
    // The buffer holds at least shared_bytes_ now: these calls only read.
    return shared_.pool ? shared_.pool->shared_scratch(bytes)
                        : aligned_in(shared_.local_shared, bytes);
}

void* Region::thread_scratch(size_t bytes) {
    return shared_.pool ? shared_.pool->thread_scratch(thread_, bytes)
                        : aligned_in(shared_.local_thread, bytes);
}

}  // namespace troupe
