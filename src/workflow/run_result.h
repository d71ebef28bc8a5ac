// What a workflow run produces: each task's final result, the trace of every request, and the
// run summary computed from them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workflow/trace.h"
#include "workflow/workflow.h"

namespace troupe::workflow {

enum class TaskStatus {
    Waiting,    // dependencies not done yet, or a retry is due
    Running,    // a request is in flight
    Ok,         // the agent answered
    Fallback,   // failed after its retries; output is the fallback text
    Skipped,    // failed after its retries; fallback skip: empty output
    Failed,     // failed after its retries, no fallback: dependents are blocked
    Blocked,    // not run: a dependency Failed (or was Blocked)
    Cancelled,  // the run was cancelled (or hit its deadline) before the task finished
};
const char* task_status_name(TaskStatus s);  // "ok", "fallback", ...
bool is_terminal(TaskStatus s);
bool is_success(TaskStatus s);  // Ok, Fallback or Skipped: dependents may run

struct TaskResult {
    std::string id;
    std::string agent;
    TaskStatus status = TaskStatus::Waiting;
    std::string output;     // the agent's text, the fallback text, or ""
    bool failed = false;    // anything but Ok
    int attempts = 0;       // requests submitted
    double start_ms = -1;   // first submission, from the start of the run (-1: never)
    double end_ms = -1;     // when it became terminal, from the start of the run
    double latency_ms = 0;  // end_ms - start_ms (0 when never submitted)
    std::string error;      // why it failed (last attempt), or why it was blocked
};

// A chain of tasks through the dependency graph and its summed task latencies.
struct CriticalPath {
    double ms = 0;
    std::vector<int> tasks;  // task indices, upstream first
};

// The longest chain by summed task latency (task_ms indexed by task). Among chains of equal
// length, the one ending at the lowest task index.
CriticalPath critical_path(const Workflow& wf, const std::vector<double>& task_ms);

// The p-th percentile (p in [0, 100]) with linear interpolation between closest ranks
// (numpy's default); 0 for no values.
double percentile(std::vector<double> values, double p);

struct RunSummary {
    std::string run_id;
    std::string mode;  // "optimised", "baseline", "no-prefix-cache", "no-batching"
    double wall_ms = 0;
    double critical_path_ms = 0;
    std::vector<std::string> critical_path;  // task ids, upstream first
    int n_tasks = 0;
    int n_tasks_ok = 0;
    int n_tasks_failed = 0;  // fallback, skipped, failed, blocked or cancelled
    int n_requests = 0;
    int n_cache_hits = 0;
    uint64_t prompt_tokens = 0;  // all sums are over the trace records
    uint64_t cached_tokens = 0;
    uint64_t generated_tokens = 0;
    double hit_rate = 0;          // cached / prompt tokens
    double request_hit_rate = 0;  // requests with a cache hit / requests
    double latency_p50_ms = 0;    // over requests
    double latency_p95_ms = 0;
    uint64_t peak_rss_bytes = 0;  // process high-water mark during the run
    uint64_t peak_kv_bytes = 0;   // the engine's KV high-water mark
    double tokens_per_s = 0;      // generated tokens / wall time
    double cpu_seconds = 0;       // process CPU time (user + system) during the run
};

struct RunResult {
    std::vector<TaskResult> tasks;   // in the workflow's task order
    std::vector<TraceRecord> trace;  // in finishing order
    RunSummary summary;
    bool cancelled = false;  // cancel requested or deadline reached
    bool ok() const;         // no task Failed, Blocked or Cancelled
};

// Fills the summary's task, token, latency, critical-path and tokens/s fields from tasks and
// trace. The caller sets wall_ms first (tokens/s uses it), and run_id, mode, the peaks and
// cpu_seconds.
void summarize(const Workflow& wf, const std::vector<TaskResult>& tasks,
               const std::vector<TraceRecord>& trace, RunSummary& summary);

}  // namespace troupe::workflow
