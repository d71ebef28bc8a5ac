// The workflow runtime: runs a validated workflow as a DAG on an InferenceBackend.
//
// Scheduling. Every task whose dependencies are done is submitted at once (the engine batches
// them), highest priority first (ties in file order); the priority travels with the request,
// so the engine admits and keeps high-priority work first. With batching off at most one
// request is in flight. Under memory pressure (the engine's KV use above memory_high_water of
// its capacity) new tasks are held back unless their priority beats every request in flight,
// so low-priority work waits first; with nothing in flight the best ready task always goes.
//
// Failure handling, per task: each attempt has the agent's timeout_s, measured from its
// submission; at the deadline the request is cancelled. A timeout or an engine error is
// retried up to `retries` times; then the agent's fallback applies (fallback text or skip:
// dependents run and see {{T.failed}} = true; none: the task Failed and its dependents are
// Blocked). A request the engine refuses at submit (it can never run) is not retried.
//
// Bounded waits. The runtime never blocks: it calls backend.step() (a bounded amount of work)
// and checks deadlines between steps. A cancelled request must be reported by the engine
// within cancel_grace_ms, else it is abandoned (its late report is ignored); a request the
// engine stops tracking without reporting it is an error. So a run ends after at most about
//   sum over a chain of (attempts * timeout_s + cancel grace)
// even against an engine that never finishes anything, and deadline_s bounds it outright.
//
// Cancellation: setting *cancel (from any thread, or a signal handler) cancels every request
// of the run at the next step; unfinished tasks end Cancelled. So does reaching deadline_s.
//
// Baseline (the seed's A/B switch): prefix_cache = false gives every request a cache
// namespace of its own, so nothing is reused between requests; batching = false runs one
// request at a time. Both off is the naive way: one task after another in dependency order.
// The same flags are meant for the backend factory too (an engine may implement them
// natively); the runtime's own measures make the modes correct on any backend.
//
// Thread-safety: run_workflow() is one synchronous call; it owns the backend while it runs.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "engine/backend.h"
#include "workflow/prompt_layout.h"
#include "workflow/run_result.h"
#include "workflow/workflow.h"

namespace troupe::workflow {

// Progress callbacks, all optional, all called from inside run_workflow() on its thread.
struct RunEvents {
    std::function<void(int task, int attempt)> on_submit;           // attempt: 0, 1, ...
    std::function<void(int task, std::string_view text)> on_text;   // streamed output text
    std::function<void(int task, const TaskResult&)> on_task_done;  // task became terminal
    std::function<void(const TraceRecord&)> on_trace;               // a request finished
};

struct RunOptions {
    InputValues inputs;   // overrides of the workflow's input defaults
    ChatRenderer render;  // messages -> prompt text (required)

    bool prefix_cache = true;  // false: no KV reuse between requests (own namespaces)
    bool batching = true;      // false: one request in flight at a time
    bool ignore_eos = false;   // generate exactly each agent's max_tokens (benchmarks)

    std::string run_id;              // "" -> "run-" + a random hex id
    double deadline_s = 0;           // whole-run limit; 0: only the per-task timeouts
    double cancel_grace_ms = 2000;   // how long a cancelled request may take to be reported
    double memory_high_water = 0.9;  // fraction of the engine's KV capacity
    const std::atomic<bool>* cancel = nullptr;  // set to true to cancel the run

    // Injectable clock (monotonic milliseconds) and memory probe (resident bytes); default to
    // the process's (util/timer.h, util/sysinfo.h). Tests drive time with a fake clock.
    std::function<double()> clock_ms;
    std::function<uint64_t()> memory_bytes;

    RunEvents events;

    // "optimised", "baseline", "no-prefix-cache" or "no-batching".
    std::string mode_name() const;
};

// Runs `wf` to completion on `backend`. Throws troupe::Error for bad inputs (unknown or
// missing input values) or a missing renderer; everything that goes wrong with agents is
// reported in the result, never thrown. An exception from backend.step() (a broken engine)
// propagates; token callbacks the backend still holds then return false.
RunResult run_workflow(const Workflow& wf, InferenceBackend& backend, const RunOptions& options);

}  // namespace troupe::workflow
