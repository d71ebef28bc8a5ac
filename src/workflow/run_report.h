// Presenting a run: the `troupe run --json` object and the summary tables.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "workflow/run_result.h"

namespace troupe::workflow {

// The `--json` object:
//   {"summary": {"wall_ms", "hit_rate", "prompt_tokens", "cached_tokens", "generated_tokens",
//                "peak_rss_bytes", "peak_kv_bytes", "cpu_seconds", and also "run_id", "mode",
//                "ok", "cancelled", "requests", "request_hit_rate", "latency_p50_ms",
//                "latency_p95_ms", "tokens_per_s", "critical_path_ms", "critical_path",
//                "tasks_ok", "tasks_failed"},
//    "tasks": {TASK_ID: {"output", "status", "agent", "latency_ms", "attempts", "error"?}}}
nlohmann::ordered_json run_to_json(const RunResult& run);

// The run summary as an aligned text table (one "name  value" line each, trailing newline).
std::string format_summary(const RunSummary& s);

// Optimised against baseline, side by side, ending with the speed-up line
// ("speed-up: 3.12x wall time (baseline 10.40 s -> 3.33 s)"), or, when either run has a task
// that did not finish ok, "speed-up: not measured, ..." with the counts.
std::string format_comparison(const RunSummary& optimised, const RunSummary& baseline);

// baseline wall / optimised wall; 0 when either is 0 or either run has a task that did not
// finish ok (fallback, skipped, failed: that run did less work).
double speedup(const RunSummary& optimised, const RunSummary& baseline);

}  // namespace troupe::workflow
