// Traces: one record per request the runtime made (every attempt of every task), written as
// one JSON object per line, so hit rate, latencies and peak memory can be computed from the
// file alone (the seed's structured logs).
//
// Field names are fixed (tools read them):
//   requestId runId taskId agentId cacheKey cacheHit prefixTokens promptTokens
//   generatedTokens queueMs ttftMs latencyMs startMs endMs memoryMB retries status finish error
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/request.h"

namespace troupe::workflow {

struct TraceRecord {
    RequestId request_id = 0;  // the engine's id (0: the engine rejected the request)
    std::string run_id;
    std::string task_id;
    std::string agent_id;
    std::string cache_key;   // "{task}:{agent}:{prefix_version}"
    bool cache_hit = false;  // prefix_tokens > 0
    int prefix_tokens = 0;   // prompt tokens whose KV was reused from the prefix cache
    int prompt_tokens = 0;
    int generated_tokens = 0;
    double queue_ms = -1;   // submit -> first scheduled (-1: unknown, request abandoned)
    double ttft_ms = -1;    // submit -> first token (-1: no token, or unknown)
    double latency_ms = 0;  // submit -> finished, as the runtime saw it
    double start_ms = 0;    // submit time, from the start of the run
    double end_ms = 0;      // finish time, from the start of the run
    double memory_mb = 0;   // process resident memory when the request finished (MiB)
    int retries = 0;        // attempts of this task before this one
    // "ok" (finished: eos, stop or length), "timeout" (cancelled at its deadline), "error"
    // (the engine reported an error or lost the request), "rejected" (submit refused it),
    // "cancelled" (the run was cancelled).
    std::string status;
    std::string finish;  // the engine's finish reason ("eos", "stop", "length", ...)
    std::string error;   // what went wrong, for timeout / error / rejected
};

nlohmann::ordered_json to_json(const TraceRecord& r);
std::string to_json_line(const TraceRecord& r);  // compact, no trailing newline


}  // namespace troupe::workflow
