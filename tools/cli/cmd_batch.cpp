// troupe batch: the requests of a JSONL file run concurrently through one engine.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "engine/engine.h"
#include "options.h"
#include "util/error.h"
#include "util/timer.h"

namespace troupe::cli {

namespace {

struct BatchOptions {
    std::string model;
    std::string prompts_file;
    int parallel = 0;  // 0: all at once
    bool json = false;
    int default_max_tokens = 128;
    SamplingParams sampling;
    bool seed_given = false;
    EngineConfig engine;
};

// One line of the file: {"prompt": "..."} or {"messages": [{"role", "content"}, ...]} with
// optional namespace, priority, max_tokens, temperature, ignore_eos, stop, seed.
Request parse_request(const nlohmann::json& j, const Model& model, const BatchOptions& o) {
    if (!j.is_object()) throw Error("expected a JSON object");
    static const char* known[] = {"prompt",     "messages",    "namespace",  "priority",
                                  "max_tokens", "temperature", "ignore_eos", "stop",
                                  "seed",       "id"};
    for (const auto& [key, _] : j.items())
        if (std::find_if(std::begin(known), std::end(known),
                         [&](const char* k) { return key == k; }) == std::end(known))
            throw Error("unknown field '" + key + "'");
    Request r;
    r.sampling = o.sampling;
    r.max_tokens = o.default_max_tokens;
    if (j.contains("prompt") == j.contains("messages"))
        throw Error("give exactly one of 'prompt' and 'messages'");
    if (j.contains("prompt")) {
        if (!j["prompt"].is_string()) throw Error("'prompt' must be a string");
        r.prompt_text = j["prompt"].get<std::string>();
    } else {
        if (!j["messages"].is_array() || j["messages"].empty())
            throw Error("'messages' must be a non-empty array");
        std::vector<ChatMessage> msgs;
        for (const auto& m : j["messages"]) {
            if (!m.is_object() || !m.contains("role") || !m.contains("content") ||
                !m["role"].is_string() || !m["content"].is_string())
                throw Error("each message needs string 'role' and 'content'");
            msgs.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
        }
        r.prompt_text = model.apply_chat_template(msgs, true);
    }
    auto get = [&](const char* key, auto& out, const char* type, bool ok) {
        if (!j.contains(key)) return;
        if (!ok) throw Error(std::string("'") + key + "' must be " + type);
        out = j[key].get<std::decay_t<decltype(out)>>();
    };
    get("namespace", r.cache_namespace, "a string",
        j.contains("namespace") && j["namespace"].is_string());
    get("priority", r.priority, "an integer",
        j.contains("priority") && j["priority"].is_number_integer());
    get("max_tokens", r.max_tokens, "an integer",
        j.contains("max_tokens") && j["max_tokens"].is_number_integer());
    get("temperature", r.sampling.temperature, "a number",
        j.contains("temperature") && j["temperature"].is_number());
    get("ignore_eos", r.ignore_eos, "a boolean",
        j.contains("ignore_eos") && j["ignore_eos"].is_boolean());
    get("seed", r.sampling.seed, "an integer",
        j.contains("seed") && j["seed"].is_number_unsigned());
    if (j.contains("stop")) {
        if (j["stop"].is_string())
            r.stop = {j["stop"].get<std::string>()};
        else if (j["stop"].is_array() && std::all_of(j["stop"].begin(), j["stop"].end(),
                                                     [](const auto& s) { return s.is_string(); }))
            r.stop = j["stop"].get<std::vector<std::string>>();
        else
            throw Error("'stop' must be a string or an array of strings");
    }
    if (j.contains("id")) r.tag = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
    return r;
}

std::vector<Request> read_requests(const std::string& path, const Model& model,
                                   const BatchOptions& o) {
    std::ifstream in(path);
    if (!in) throw Error(path + ": cannot open");
    std::vector<Request> reqs;
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        try {
            reqs.push_back(parse_request(nlohmann::json::parse(line), model, o));
        } catch (const nlohmann::json::exception& e) {
            throw Error(path + ":" + std::to_string(n) + ": invalid JSON: " + e.what());
        } catch (const Error& e) {
            throw Error(path + ":" + std::to_string(n) + ": " + e.what());
        }
    }
    if (reqs.empty()) throw Error(path + ": no requests");
    return reqs;
}

void run_batch(BatchOptions& o) {
    const auto model = Model::load(o.model);
    if (!o.seed_given) o.sampling.seed = random_seed();
    std::vector<Request> reqs = read_requests(o.prompts_file, *model, o);
    o.engine.max_num_seqs = o.parallel > 0 ? o.parallel : int(reqs.size());
    Engine engine(*model, o.engine);

    const double t0 = now_ms();
    std::vector<RequestId> ids;
    for (size_t i = 0; i < reqs.size(); ++i) {
        if (!o.seed_given && !reqs[i].sampling.is_greedy()) reqs[i].sampling.seed += i;
        ids.push_back(engine.submit(std::move(reqs[i])));
    }
    std::map<RequestId, RequestOutput> outs;
    for (auto& out : engine.run_until_done()) outs[out.id] = std::move(out);
    const double wall_ms = now_ms() - t0;
    const EngineStats st = engine.stats();

    uint64_t generated = 0;
    for (auto& [id, out] : outs) generated += uint64_t(out.stats.generated_tokens);
    const double throughput = wall_ms > 0 ? double(generated) * 1000.0 / wall_ms : 0.0;
    if (o.json) {
        nlohmann::json rj = nlohmann::json::array();
        for (RequestId id : ids) {
            const RequestOutput& out = outs.at(id);
            const RequestStats& s = out.stats;
            rj.push_back({{"text", out.text},
                          {"tokens", out.tokens},
                          {"finish_reason", finish_reason_name(out.finish)},
                          {"prompt_tokens", s.prompt_tokens},
                          {"cached_tokens", s.cached_tokens},
                          {"generated_tokens", s.generated_tokens},
                          {"queue_ms", s.queue_ms},
                          {"ttft_ms", s.ttft_ms},
                          {"latency_ms", s.latency_ms},
                          {"preemptions", s.preemptions}});
            if (!out.error.empty()) rj.back()["error"] = out.error;
        }
        nlohmann::json totals = {{"wall_ms", wall_ms},
                                 {"requests", ids.size()},
                                 {"prompt_tokens", st.prompt_tokens},
                                 {"cached_tokens", st.cached_tokens},
                                 {"generated_tokens", generated},
                                 {"hit_rate", st.hit_rate()},
                                 {"throughput_tokens_per_s", throughput},
                                 {"decode_tokens_per_s", st.decode_tokens_per_s()},
                                 {"preemptions", st.preemptions},
                                 {"peak_kv_bytes", st.peak_kv_bytes},
                                 {"peak_rss_bytes", st.peak_rss_bytes}};
        nlohmann::json j = {{"requests", rj}, {"totals", totals}};
        std::printf("%s\n",
                    j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        return;
    }
    std::printf("%4s %7s %7s %6s %9s %10s %4s  %s\n", "#", "prompt", "cached", "gen", "ttft_ms",
                "latency_ms", "pre", "text");
    for (size_t i = 0; i < ids.size(); ++i) {
        const RequestOutput& out = outs.at(ids[i]);
        const RequestStats& s = out.stats;
        std::string text = out.text.substr(0, 60);
        for (char& c : text)
            if (c == '\n') c = ' ';
        std::printf("%4zu %7d %7d %6d %9.1f %10.1f %4d  %s%s\n", i, s.prompt_tokens,
                    s.cached_tokens, s.generated_tokens, s.ttft_ms, s.latency_ms, s.preemptions,
                    text.c_str(), out.text.size() > 60 ? "..." : "");
    }
    std::printf(
        "\n%zu requests in %.1f ms: hit rate %.1f%% (%llu of %llu prompt tokens cached), "
        "%llu generated, %.1f tokens/s overall, %.1f tokens/s in decode steps, "
        "%llu pre-emptions, peak KV %.1f MiB, peak RSS %.1f MiB\n",
        ids.size(), wall_ms, 100.0 * st.hit_rate(), (unsigned long long)st.cached_tokens,
        (unsigned long long)st.prompt_tokens, (unsigned long long)generated, throughput,
        st.decode_tokens_per_s(), (unsigned long long)st.preemptions,
        double(st.peak_kv_bytes) / 1048576.0, double(st.peak_rss_bytes) / 1048576.0);
}

}  // namespace

void add_batch_command(CLI::App& app) {
    auto o = std::make_shared<BatchOptions>();
    CLI::App* cmd = app.add_subcommand("batch", "Run the requests of a JSONL file concurrently");
    add_model_option(cmd, o->model);
    cmd->add_option(
           "--prompts", o->prompts_file,
           "JSONL file: {\"prompt\": ...} or {\"messages\": [...]} per line, with optional "
           "namespace, priority, max_tokens, temperature, ignore_eos, stop, seed")
        ->required();
    cmd->add_option("--parallel", o->parallel, "Requests running at once (default: all)");
    cmd->add_option("-n,--max-tokens", o->default_max_tokens, "Default max_tokens per request")
        ->capture_default_str();
    cmd->add_flag("--json", o->json, "Print one JSON object");
    add_sampling_options(cmd, o->sampling, o->seed_given);
    add_engine_options(cmd, o->engine);
    cmd->callback([o] { run_batch(*o); });
}

}  // namespace troupe::cli
