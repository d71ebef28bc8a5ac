// troupe perplexity: llama.cpp-comparable perplexity of a model on a text file.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "engine/perplexity.h"
#include "options.h"
#include "util/error.h"
#include "util/sysinfo.h"
#include "util/timer.h"

namespace troupe::cli {

namespace {

struct PerplexityOptions {
    std::string model;
    std::string file;
    int n_ctx = 512;
    int n_batch = 512;
    int n_threads = 0;
    bool json = false;
    DType kv_type = DType::F16;
};

void run_perplexity(const PerplexityOptions& o) {
    std::ifstream in(o.file, std::ios::binary);
    if (!in) throw Error(o.file + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    const auto model = Model::load(o.model);
    const double t0 = now_ms();
    const std::vector<int32_t> tokens = model->tokenizer().tokenize(ss.str(), true, false);
    ThreadPool pool(o.n_threads > 0 ? o.n_threads : hardware_threads());
    auto progress = [&](int64_t done, int64_t total, double ppl) {
        if (!o.json)
            std::fprintf(stderr, "\r[%lld/%lld] %.4f", (long long)done, (long long)total, ppl);
    };
    const PerplexityResult r =
        compute_perplexity(*model, tokens, o.n_ctx, o.n_batch, &pool, progress, o.kv_type);
    const double secs = (now_ms() - t0) / 1000.0;
    if (o.json) {
        nlohmann::json j = {{"perplexity", r.perplexity},
                            {"error", r.error},
                            {"tokens", r.n_tokens},
                            {"scored_tokens", r.n_scored},
                            {"windows", r.n_windows},
                            {"ctx", o.n_ctx},
                            {"seconds", secs}};
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::fprintf(stderr, "\n");
        std::printf("perplexity: %.4f +/- %.5f  (%lld windows of %d tokens, %lld scored, %.1f s)\n",
                    r.perplexity, r.error, (long long)r.n_windows, o.n_ctx, (long long)r.n_scored,
                    secs);
    }
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
    auto o = std::make_shared<PerplexityOptions>();
    CLI::App* cmd = app.add_subcommand("perplexity",
                                       "Perplexity of a model on a text (llama.cpp's definition)");
    add_model_option(cmd, o->model);
    cmd->add_option("-f,--file", o->file, "Text file")->required();
    cmd->add_option("-c,--ctx", o->n_ctx, "Window size in tokens")->capture_default_str();
    cmd->add_option("-b,--batch", o->n_batch, "Tokens per forward pass")->capture_default_str();
    cmd->add_option("-t,--threads", o->n_threads, "Threads; 0 = all")->capture_default_str();
    add_kv_type_option(cmd, o->kv_type);
    cmd->add_flag("--json", o->json, "Print {\"perplexity\": ..., \"tokens\": ...}");
    cmd->callback([o] { run_perplexity(*o); });
}

}  // namespace troupe::cli
