// A parallel region: one dispatch to the thread pool for a whole sequence of ops (a forward
// pass), instead of one per op. Every participating thread runs the same code; each
// collective call (a "step": Region::for_each) splits its tasks over the participants and
// returns once all of them are done, so the next step may read what this one wrote.
//
// Why: a decode step of a small model is ~200 short ops. Dispatching each to the pool costs a
// wake-up, an imbalance at its end and a cold start of the next op; inside one region a step
// boundary costs one shared counter.
//
// How a step is shared: its tasks [0, n) are cut into one contiguous share per participant
// (share()), which each participant runs in order (so a participant streams consecutive
// weight rows, and knows in advance which rows it will read next); a participant that
// finishes early takes the not yet started tasks of the others. A participant that joins
// late (descheduled, or the pool busy) finds the steps before it done and skips them: no
// participant ever waits for one that has not started.
//
// Profiling (kernels/step_profile.h): a region given a StepProfile records every step's time
// per participant, keyed by the op and phase names set with set_op / set_phase.
//
// Rules for the code run in a region (SPMD): every participant makes the same sequence of
// collective calls (for_each, serial, shared_scratch) with the same arguments; code outside
// them must not write shared memory. Contract checked by TROUPE_CHECK where cheap.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/step_profile.h"
#include "kernels/thread_pool.h"

namespace troupe {

// The state the participants of one region share. Internal to Region / run_region.
struct RegionShared {
    explicit RegionShared(int n_participants, ThreadPool* pool);
    struct alignas(64) Counter {
        std::atomic<int64_t> value{0};
    };
    // claimed[p]: tasks taken so far from participant p's shares, over all steps (monotonic:
    // a step's share of p starts where p's share of the previous step ended).
    std::vector<Counter> claimed;
    Counter done;                      // tasks finished, over all steps
    ThreadPool* pool;                  // null: one participant, scratch from the buffers below
    StepProfile* profile = nullptr;    // null: steps are not timed
    size_t shared_bytes_at_start = 0;  // the shared scratch's size when the region began
    std::vector<uint8_t> local_shared, local_thread;  // without a pool
};

class Region {
  public:
    Region(RegionShared& shared, int index, int size, int thread);

    int index() const { return index_; }    // this participant, in [0, size())
    int size() const { return size_; }      // participants
    int thread() const { return thread_; }  // the pool thread running it (per-thread scratch)

    // Participant p's share of n items: [begin, end), whole multiples of `multiple` except
    // the last share's end.
    std::pair<int64_t, int64_t> share(int64_t n, int p, int64_t multiple = 1) const;
    std::pair<int64_t, int64_t> my_share(int64_t n, int64_t multiple = 1) const {
        return share(n, index_, multiple);
    }

    // A step: fn(task) for every task in [0, n_tasks), each exactly once, over the
    // participants (own share first, in order, then the others'). Returns when all are done.
    template <class F>
    void for_each(int64_t n_tasks, F&& fn) {
        if (n_tasks <= 0) return;
        const int64_t t0 = shared_.profile ? now_ns() : 0;
        step_begin(n_tasks);
        int64_t n_done = 0;
        for (int k = 0; k < size_; ++k) {
            const int p = (index_ + k) % size_;
            for (int64_t task; claim(p, task);) {
                fn(task);
                ++n_done;
            }
        }
        step_end(n_done, t0);
    }

    // A step of one task: fn() on one participant, the others wait for it.
    template <class F>
    void serial(F&& fn) {
        for_each(1, [&](int64_t) { fn(); });
    }

    // Shared scratch of at least `bytes`, 64-byte aligned, for the participants of the
    // current op (contents do not survive the op). Collective: grows the pool's shared
    // buffer in a serial step when needed.
    void* shared_scratch(size_t bytes);
    // This thread's scratch (ThreadPool::thread_scratch; the calling thread only).
    void* thread_scratch(size_t bytes);

    // Memory this participant reads next, [begin, end) (its share of the next matrix's
    // weights): prefetched a few cache lines at a time whenever it waits at the end of a step,
    // so that a participant that finished early keeps the memory bus busy instead of spinning.
    // Replaces the previous range; (nullptr, nullptr) clears it. Not collective.
    void prefetch_next(const void* begin, const void* end) {
        pf_next_ = static_cast<const uint8_t*>(begin);
        pf_end_ = static_cast<const uint8_t*>(end);
    }
    std::pair<const void*, const void*> pending_prefetch() const { return {pf_next_, pf_end_}; }

    // Names for the profile (StepProfile): the op the next steps belong to (set by the
    // caller: "qkv", "attention") and a phase within it (set by the op: "convert"; null:
    // none). String literals. Not collective; no effect without a profile.
    void set_op(const char* op) {
        op_ = op;
        phase_ = nullptr;
    }
    void set_phase(const char* phase) { phase_ = phase; }

  private:
    void step_begin(int64_t n_tasks);
    bool claim(int p, int64_t& task);
    void step_end(int64_t n_done, int64_t t0);
    static int64_t now_ns();

    RegionShared& shared_;
    int index_, size_;
    int thread_;
    // This participant's record of the step sequence (the same on every participant).
    std::vector<int64_t> share_base_;   // [size_] start of each participant's current share
    std::vector<int64_t> share_len_;    // [size_]
    int64_t done_base_ = 0;             // tasks of the steps before the current one
    int64_t n_tasks_ = 0;               // of the current step
    size_t shared_bytes_;               // the shared scratch as the step sequence knows it
    const uint8_t* pf_next_ = nullptr;  // prefetch_next: the next line to prefetch
    const uint8_t* pf_end_ = nullptr;
    const char* op_ = "";  // set_op / set_phase
    const char* phase_ = nullptr;
};

// Runs fn(Region&) on every thread of the pool (thread 0 is the caller) as one job; with a
// null pool or one thread, on the caller alone. Returns when every participant has returned.
// fn must not throw. profile: when set, every step is timed into it.
template <class F>
void run_region(ThreadPool* pool, StepProfile* profile, F&& fn) {
    const int n = pool ? pool->size() : 1;
    RegionShared shared(n, pool);
    if (profile) profile->prepare(n);
    shared.profile = profile;
    if (n == 1) {
        Region r(shared, 0, 1, 0);
        fn(r);
    } else {
        pool->run(n, [&](int64_t participant, int thread) {
            Region r(shared, int(participant), n, thread);
            fn(r);
        });
    }
    if (profile) profile->end_region();
}

template <class F>
void run_region(ThreadPool* pool, F&& fn) {
    run_region(pool, nullptr, std::forward<F>(fn));
}

}  // namespace troupe
