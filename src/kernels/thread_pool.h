// A persistent pool of worker threads for data-parallel kernels (no OpenMP: iOS toolchains
// lack it). Threads are created once; each run() wakes them, splits the tasks, and waits.
//
// Thread-safety: run() must be called from one thread at a time (the owner, typically the
// engine's step loop). The calling thread takes part as thread 0.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace troupe {

class ThreadPool {
public:
    // n_threads >= 1 counts the calling thread: n_threads - 1 workers are started.
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Calls fn(task, thread) for every task in [0, n_tasks) and returns when all are done.
    // Tasks are handed out dynamically (an atomic counter), so uneven tasks balance.
    // `thread` is in [0, size()) and identifies per-thread scratch.
    void run(int64_t n_tasks, const std::function<void(int64_t task, int thread)>& fn);

private:
    void worker_main(int thread);
    void work(int thread);

    int n_threads_;
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable cv_start_;
    std::condition_variable cv_done_;
    uint64_t generation_ = 0;  // incremented per run(); guarded by mu_
    int n_busy_ = 0;           // workers still in the current run; guarded by mu_
    bool stop_ = false;
    const std::function<void(int64_t, int)>* fn_ = nullptr;
    int64_t n_tasks_ = 0;
    std::atomic<int64_t> next_task_{0};
};

}  // namespace troupe
