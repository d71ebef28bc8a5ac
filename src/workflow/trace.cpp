#include "workflow/trace.h"

#include <cmath>

namespace troupe::workflow {

namespace {
// Milliseconds to 3 decimals keep lines short and diff-friendly.
double ms(double v) {
    return std::round(v * 1000.0) / 1000.0;
}
}  // namespace

nlohmann::ordered_json to_json(const TraceRecord& r) {
    nlohmann::ordered_json j;
    j["requestId"] = r.request_id;
    j["runId"] = r.run_id;
    j["taskId"] = r.task_id;
    j["agentId"] = r.agent_id;
    j["cacheKey"] = r.cache_key;
    j["cacheHit"] = r.cache_hit;
    j["prefixTokens"] = r.prefix_tokens;
    j["promptTokens"] = r.prompt_tokens;
    j["generatedTokens"] = r.generated_tokens;
    j["queueMs"] = ms(r.queue_ms);
    j["ttftMs"] = ms(r.ttft_ms);
    j["latencyMs"] = ms(r.latency_ms);
    j["startMs"] = ms(r.start_ms);
    j["endMs"] = ms(r.end_ms);
    j["memoryMB"] = std::round(r.memory_mb * 10.0) / 10.0;
    j["retries"] = r.retries;
    j["status"] = r.status;
    j["finish"] = r.finish;
    if (!r.error.empty()) j["error"] = r.error;
    return j;
}

std::string to_json_line(const TraceRecord& r) {
    return to_json(r).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace troupe::workflow
