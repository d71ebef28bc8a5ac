#include "kernels/thread_pool.h"

#include "util/error.h"

namespace troupe {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
    for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_main(t); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_start_.notify_all();
    for (std::thread& w : workers_) w.join();
}

void ThreadPool::work(int thread) {
    for (;;) {
        const int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
        if (task >= n_tasks_) break;
        (*fn_)(task, thread);
    }
}

void ThreadPool::worker_main(int thread) {
    uint64_t seen = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
        }
        work(thread);
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (--n_busy_ == 0) cv_done_.notify_one();
        }
    }
}

void ThreadPool::run(int64_t n_tasks, const std::function<void(int64_t, int)>& fn) {
    if (n_tasks <= 0) return;
    if (n_threads_ == 1 || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        fn_ = &fn;
        n_tasks_ = n_tasks;
        next_task_.store(0, std::memory_order_relaxed);
        n_busy_ = int(workers_.size());
        ++generation_;
    }
    cv_start_.notify_all();
    work(0);
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, [&] { return n_busy_ == 0; });
    fn_ = nullptr;
}

}  // namespace troupe
