// A persistent pool of worker threads for data-parallel kernels (no OpenMP: iOS toolchains
// lack it). Threads are created once; each run() publishes a job, the workers (spinning for a
// short while after their last job, then sleeping on a futex) join it and take tasks from an
// atomic counter, and the caller takes part as thread 0. A worker that has not joined by the
// time the caller has taken every task is not waited for: on a machine busy with other
// processes, a descheduled worker costs nothing (the caller just does more of the tasks).
// A run() costs well under a microsecond when the workers are awake.
//
// Thread-safety: run(), run_on_all() and the scratch accessors must be called from one
// thread at a time (the owner, typically the engine's step loop); barrier() only from inside
// run_on_all(). Jobs must not throw (kernels never do); a throwing job terminates.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace troupe {

class ThreadPool {
  public:
    // n_threads counts the calling thread: n_threads - 1 workers are started. Clamped to
    // [1, kMaxThreads].
    static constexpr int kMaxThreads = 1024;
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Calls fn(task, thread) for every task in [0, n_tasks) and returns when all are done.
    // Tasks are handed out dynamically (an atomic counter), so uneven tasks balance; keep
    // each task at least a few microseconds. `thread` is in [0, size()) and identifies
    // per-thread scratch. fn: void(int64_t task, int thread).
    template <class F>
    void run(int64_t n_tasks, F&& fn) {
        dispatch(Job{Job::Kind::Tasks, n_tasks, &call_task<std::remove_reference_t<F>>,
                     const_cast<void*>(static_cast<const void*>(&fn))});
    }

    // Calls fn(thread) once on every thread (thread 0 is the caller) and returns when all
    // have returned. Inside, barrier() synchronises all size() threads. fn: void(int thread).
    // Unlike run(), this waits for every worker (use it for work that needs all threads, such
    // as the machine probes).
    template <class F>
    void run_on_all(F&& fn) {
        dispatch(Job{Job::Kind::AllThreads, n_threads_, &call_thread<std::remove_reference_t<F>>,
                     const_cast<void*>(static_cast<const void*>(&fn))});
    }

    // Waits until every thread of the current run_on_all() job has reached the barrier. Its
    // writes before the barrier are visible to all threads after it.
    void barrier();

    // Grow-only, 64-byte aligned scratch memory for kernels, reused across calls so that hot
    // paths never allocate. thread_scratch(t, n) belongs to thread t of the current job;
    // shared_scratch(n) is written by the owner before a job and read by all threads during
    // it. Contents are undefined on return; a pointer stays valid until the next call that
    // asks the same slot for more bytes.
    void* thread_scratch(int thread, size_t bytes);
    void* shared_scratch(size_t bytes);
    // Bytes shared_scratch() returns without growing (0 before the first call).
    size_t shared_scratch_bytes() const { return shared_buffer_.data ? shared_buffer_.bytes : 0; }

  private:
    struct Job {
        enum class Kind { Tasks, AllThreads };
        Kind kind = Kind::Tasks;
        int64_t n_tasks = 0;
        void (*call)(void* fn, int64_t task, int thread) = nullptr;
        void* fn = nullptr;
    };
    template <class F>
    static void call_task(void* fn, int64_t task, int thread) {
        (*static_cast<F*>(fn))(task, thread);
    }
    template <class F>
    static void call_thread(void* fn, int64_t /*task*/, int thread) {
        (*static_cast<F*>(fn))(thread);
    }

    struct Buffer {
        struct Free {
            void operator()(void* p) const;
        };
        std::unique_ptr<uint8_t, Free> data;
        size_t bytes = 0;
    };
    static void* grow(Buffer& b, size_t bytes);

    void dispatch(const Job& job);
    void execute(int thread);
    void worker_main(int thread);
    void wait_for_generation(uint32_t seen);
    bool join(uint32_t generation);

    int n_threads_;
    std::vector<std::thread> workers_;
    Job job_;  // written by the owner before generation_ is bumped

    // Each hot atomic on its own cache line: workers poll generation_ while the owner and
    // workers hammer next_task_ and state_.
    alignas(64) std::atomic<uint32_t> generation_{0};
    alignas(64) std::atomic<int64_t> next_task_{0};
    // The current job: bits 0-15 workers inside it, bits 16-31 workers that ever joined it,
    // bit 32 set while it accepts workers, bits 33-63 its generation (low bits).
    alignas(64) std::atomic<uint64_t> state_{0};
    alignas(64) std::atomic<int> n_sleeping_{0};  // workers blocked in a futex wait
    alignas(64) std::atomic<int> barrier_count_{0};
    alignas(64) std::atomic<uint32_t> barrier_gen_{0};
    std::atomic<bool> stop_{false};

    std::vector<Buffer> thread_buffers_;
    Buffer shared_buffer_;
};

}  // namespace troupe
