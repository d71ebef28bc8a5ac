#include "workflow/run_result.h"

#include <algorithm>
#include <cmath>

namespace troupe::workflow {

const char* task_status_name(TaskStatus s) {
    switch (s) {
        case TaskStatus::Waiting:
            return "waiting";
        case TaskStatus::Running:
            return "running";
        case TaskStatus::Ok:
            return "ok";
        case TaskStatus::Fallback:
            return "fallback";
        case TaskStatus::Skipped:
            return "skipped";
        case TaskStatus::Failed:
            return "failed";
        case TaskStatus::Blocked:
            return "blocked";
        case TaskStatus::Cancelled:
            return "cancelled";
    }
    return "?";
}

bool is_terminal(TaskStatus s) {
    return s != TaskStatus::Waiting && s != TaskStatus::Running;
}

bool is_success(TaskStatus s) {
    return s == TaskStatus::Ok || s == TaskStatus::Fallback || s == TaskStatus::Skipped;
}

bool RunResult::ok() const {
    for (const TaskResult& t : tasks)
        if (!is_success(t.status)) return false;
    return true;
}

CriticalPath critical_path(const Workflow& wf, const std::vector<double>& task_ms) {
    const size_t n = wf.tasks.size();
    std::vector<double> best(n, 0.0);  // longest chain ending at the task, inclusive
    std::vector<int> prev(n, -1);
    for (int t : wf.topo_order) {
        double up = 0;
        for (int d : wf.tasks[size_t(t)].deps) {
            if (prev[size_t(t)] < 0 || best[size_t(d)] > up) {
                up = best[size_t(d)];
                prev[size_t(t)] = d;
            }
        }
        best[size_t(t)] = up + task_ms[size_t(t)];
    }
    CriticalPath cp;
    int end = -1;
    for (size_t t = 0; t < n; ++t)
        if (end < 0 || best[t] > best[size_t(end)]) end = int(t);
    if (end < 0) return cp;
    cp.ms = best[size_t(end)];
    for (int t = end; t >= 0; t = prev[size_t(t)]) cp.tasks.push_back(t);
    std::reverse(cp.tasks.begin(), cp.tasks.end());
    return cp;
}

double percentile(std::vector<double> values, double p) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * double(values.size() - 1);
    const size_t lo = size_t(std::floor(rank));
    const size_t hi = std::min(lo + 1, values.size() - 1);
    return values[lo] + (values[hi] - values[lo]) * (rank - double(lo));
}

void summarize(const Workflow& wf, const std::vector<TaskResult>& tasks,
               const std::vector<TraceRecord>& trace, RunSummary& s) {
    s.n_tasks = int(tasks.size());
    s.n_tasks_ok = s.n_tasks_failed = 0;
    std::vector<double> task_ms;
    for (const TaskResult& t : tasks) {
        (t.status == TaskStatus::Ok ? s.n_tasks_ok : s.n_tasks_failed)++;
        task_ms.push_back(t.latency_ms);
    }
    const CriticalPath cp = critical_path(wf, task_ms);
    s.critical_path_ms = cp.ms;
    s.critical_path.clear();
    for (int t : cp.tasks) s.critical_path.push_back(wf.tasks[size_t(t)].id);

    s.n_requests = s.n_cache_hits = 0;
    s.prompt_tokens = s.cached_tokens = s.generated_tokens = 0;
    std::vector<double> latencies;
    for (const TraceRecord& r : trace) {
        if (r.request_id == 0) continue;  // rejected at submit: never ran
        ++s.n_requests;
        s.n_cache_hits += r.cache_hit ? 1 : 0;
        s.prompt_tokens += uint64_t(r.prompt_tokens);
        s.cached_tokens += uint64_t(r.prefix_tokens);
        s.generated_tokens += uint64_t(r.generated_tokens);
        latencies.push_back(r.latency_ms);
    }
    s.hit_rate = s.prompt_tokens ? double(s.cached_tokens) / double(s.prompt_tokens) : 0.0;
    s.request_hit_rate = s.n_requests ? double(s.n_cache_hits) / double(s.n_requests) : 0.0;
    s.latency_p50_ms = percentile(latencies, 50);
    s.latency_p95_ms = percentile(latencies, 95);
    s.tokens_per_s = s.wall_ms > 0 ? double(s.generated_tokens) * 1000.0 / s.wall_ms : 0.0;
}

}  // namespace troupe::workflow
