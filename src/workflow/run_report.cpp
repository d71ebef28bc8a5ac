#include "workflow/run_report.h"

#include <cmath>
#include <cstdio>
#include <vector>

namespace troupe::workflow {

namespace {

double round_to(double v, double unit) {
    return std::round(v / unit) * unit;
}

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

std::string mib(uint64_t bytes) {
    return fmt("%.1f MiB", double(bytes) / (1024.0 * 1024.0));
}

std::string join(const std::vector<std::string>& v, const char* sep) {
    std::string out;
    for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
    return out;
}

// The rows both tables show: label and value.
std::vector<std::pair<std::string, std::string>> rows(const RunSummary& s) {
    return {
        {"mode", s.mode},
        {"wall time", fmt("%.1f ms", s.wall_ms)},
        {"critical path",
         fmt("%.1f ms", s.critical_path_ms) + " (" + join(s.critical_path, " -> ") + ")"},
        {"tasks ok / failed",
         std::to_string(s.n_tasks_ok) + " / " + std::to_string(s.n_tasks_failed)},
        {"requests", std::to_string(s.n_requests)},
        {"prefix-cache hit rate", fmt("%.1f%% of tokens", 100.0 * s.hit_rate) + ", " +
                                      std::to_string(s.n_cache_hits) + "/" +
                                      std::to_string(s.n_requests) + " requests"},
        {"prompt tokens",
         std::to_string(s.prompt_tokens) + " (" + std::to_string(s.cached_tokens) + " from cache)"},
        {"generated tokens", std::to_string(s.generated_tokens)},
        {"latency p50 / p95",
         fmt("%.1f", s.latency_p50_ms) + " / " + fmt("%.1f ms", s.latency_p95_ms)},
        {"tokens/s (generated)", fmt("%.1f", s.tokens_per_s)},
        {"peak memory (RSS)", mib(s.peak_rss_bytes)},
        {"peak KV cache", mib(s.peak_kv_bytes)},
        {"CPU time", fmt("%.2f s", s.cpu_seconds)},
    };
}

}  // namespace

nlohmann::ordered_json run_to_json(const RunResult& run) {
    const RunSummary& s = run.summary;
    nlohmann::ordered_json sum;
    sum["wall_ms"] = round_to(s.wall_ms, 0.001);
    sum["hit_rate"] = s.hit_rate;
    sum["prompt_tokens"] = s.prompt_tokens;
    sum["cached_tokens"] = s.cached_tokens;
    sum["generated_tokens"] = s.generated_tokens;
    sum["peak_rss_bytes"] = s.peak_rss_bytes;
    sum["peak_kv_bytes"] = s.peak_kv_bytes;
    sum["cpu_seconds"] = round_to(s.cpu_seconds, 0.001);
    sum["run_id"] = s.run_id;
    sum["mode"] = s.mode;
    sum["ok"] = run.ok();
    sum["cancelled"] = run.cancelled;
    sum["requests"] = s.n_requests;
    sum["request_hit_rate"] = s.request_hit_rate;
    sum["latency_p50_ms"] = round_to(s.latency_p50_ms, 0.001);
    sum["latency_p95_ms"] = round_to(s.latency_p95_ms, 0.001);
    sum["tokens_per_s"] = round_to(s.tokens_per_s, 0.001);
    sum["critical_path_ms"] = round_to(s.critical_path_ms, 0.001);
    sum["critical_path"] = s.critical_path;
    sum["tasks_ok"] = s.n_tasks_ok;
    sum["tasks_failed"] = s.n_tasks_failed;

    nlohmann::ordered_json tasks = nlohmann::ordered_json::object();
    for (const TaskResult& t : run.tasks) {
        nlohmann::ordered_json j;
        j["output"] = t.output;
        j["status"] = task_status_name(t.status);
        j["agent"] = t.agent;
        j["latency_ms"] = round_to(t.latency_ms, 0.001);
        j["attempts"] = t.attempts;
        if (!t.error.empty()) j["error"] = t.error;
        tasks[t.id] = std::move(j);
    }
    nlohmann::ordered_json out;
    out["summary"] = std::move(sum);
    out["tasks"] = std::move(tasks);
    return out;
}

std::string format_summary(const RunSummary& s) {
    std::string out;
    for (const auto& [label, value] : rows(s)) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "  %-24s", label.c_str());
        out += buf + value + "\n";
    }
    return out;
}

double speedup(const RunSummary& optimised, const RunSummary& baseline) {
    const bool comparable = optimised.n_tasks_failed == 0 && baseline.n_tasks_failed == 0 &&
                            optimised.wall_ms > 0 && baseline.wall_ms > 0;
    return comparable ? baseline.wall_ms / optimised.wall_ms : 0.0;
}

std::string format_comparison(const RunSummary& optimised, const RunSummary& baseline) {
    const auto a = rows(optimised), b = rows(baseline);
    std::string out;
    char buf[512];
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].first == "critical path") continue;  // too wide for two columns
        std::snprintf(buf, sizeof buf, "  %-24s %-36s %s\n", a[i].first.c_str(),
                      a[i].second.c_str(), b[i].second.c_str());
        out += buf;
    }
    const double x = speedup(optimised, baseline);
    if (x > 0) {
        std::snprintf(buf, sizeof buf, "speed-up: %.2fx wall time (baseline %.2f s -> %.2f s)\n", x,
                      baseline.wall_ms / 1000.0, optimised.wall_ms / 1000.0);
    } else if (optimised.n_tasks_failed > 0 || baseline.n_tasks_failed > 0) {
        // a run that skipped or failed tasks did less work: its time proves nothing
        std::snprintf(buf, sizeof buf,
                      "speed-up: not measured, tasks did not finish ok (optimised %d of %d, "
                      "baseline %d of %d)\n",
                      optimised.n_tasks_failed, optimised.n_tasks, baseline.n_tasks_failed,
                      baseline.n_tasks);
    } else {
        std::snprintf(buf, sizeof buf, "speed-up: not measured, a run took no time\n");
    }
    return out + buf;
}

}  // namespace troupe::workflow
