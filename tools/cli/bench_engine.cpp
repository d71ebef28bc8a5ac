#include "bench_engine.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/engine.h"
#include "engine/sequence_kv.h"
#include "kernels/probes.h"
#include "kernels/targets.h"
#include "options.h"
#include "util/error.h"
#include "util/sysinfo.h"
#include "util/timer.h"

namespace troupe::cli {

namespace {

using nlohmann::json;

struct BenchOptions {
    std::string model;
    int threads = 2;
    int repeat = 3;
    bool json_out = false;
    int n_agents = 8;
    int prefix_tokens = 1000;
    int suffix_tokens = 50;
    int gen_tokens = 128;
    int context_tokens = 512;
    bool profile = false;
    DType kv_type = EngineConfig{}.kv_type;  // --kv-type
    bool kv_prefault = true;  // --no-kv-prefault: KV pages first touched inside the runs
    uint64_t kv_budget_bytes = uint64_t(1) << 30;  // sized to the run by with_kv_budget
    ModelLoadOptions load;  // --no-interleave: the file's weight layout (A/B)
};

// The options with a KV budget that holds seqs sequences of tokens_per_seq tokens each
// without any sharing, plus a chunk of spare blocks. With kv_prefault every engine makes that
// budget resident at start (EngineConfig::kv_prefault), like llama.cpp, whose
// llama-batched-bench figures the targets quote, clears its KV buffer before any timing: the
// runs then measure the kernels and the scheduler, not the OS zeroing fresh pages (in a cloud
// VM 0.3-7.8 ms per 2 MiB page, measured, and a batch of 8 sequences first-touches 8 times
// the blocks one sequence does). The geometry is the engines': engine_config keeps the
// EngineConfig default block size, and the cache type of --kv-type.
BenchOptions with_kv_budget(BenchOptions o, const Model& m, int tokens_per_seq, int seqs) {
    const EngineConfig defaults;
    const kv::KvGeometry g = kv_geometry(m.hparams(), defaults.block_size, o.kv_type);
    const uint64_t blocks =
        uint64_t(seqs) * uint64_t((tokens_per_seq + g.block_size - 1) / g.block_size + 1) +
        uint64_t(kv::KvStorage::kChunkBlocks);
    o.kv_budget_bytes = blocks * g.bytes_per_block();
    return o;
}

// The seed's summary of repeated runs: drop the fastest and the slowest (when there are at
// least 3), median of the rest.
double robust_median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    if (v.size() >= 3) v = std::vector<double>(v.begin() + 1, v.end() - 1);
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A ratio of two figures measured back to back in each repetition: the robust median of the
// per-repetition ratios num[r] / den[r], so that a change of the machine's state between
// repetitions (a shared host's bandwidth moves) does not pair a fast run with a slow one.
double paired_ratio(const std::vector<double>& num, const std::vector<double>& den) {
    std::vector<double> r;
    for (size_t i = 0; i < num.size() && i < den.size(); ++i)
        if (den[i] > 0) r.push_back(num[i] / den[i]);
    return r.empty() ? 0.0 : robust_median(r);
}

// A deterministic stream of English tokens: the bundled public-domain text, repeated.
std::vector<int32_t> text_tokens(const Model& m, size_t n) {
    const std::string path = TROUPE_BENCH_TEXT;
    std::ifstream in(path);
    if (!in) throw Error(path + ": cannot open (the benchmark's text)");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::vector<int32_t> body = m.tokenizer().tokenize(ss.str(), false, false);
    std::vector<int32_t> out;
    while (out.size() < n) out.insert(out.end(), body.begin(), body.end());
    out.resize(n);
    return out;
}

const char* kv_note(const BenchOptions& o) {
    return o.kv_prefault ? "KV cache resident from each engine's start"
                         : "KV pages first touched inside the runs (--no-kv-prefault)";
}

EngineConfig engine_config(const BenchOptions& o, bool caching, bool batching, int parallel) {
    EngineConfig c;
    c.n_threads = o.threads;
    c.enable_prefix_caching = caching;
    c.enable_batching = batching;
    c.max_num_seqs = parallel;
    c.kv_budget_bytes = o.kv_budget_bytes;
    c.kv_prefault = o.kv_prefault;
    c.kv_type = o.kv_type;
    return c;
}

Request fixed_request(std::vector<int32_t> prompt, int gen) {
    Request r;
    r.prompt = std::move(prompt);
    r.sampling.temperature = 0.0f;
    r.max_tokens = gen;
    r.ignore_eos = true;
    r.cache_namespace = "bench";
    return r;
}

struct RunFigures {
    double wall_ms = 0;
    EngineStats stats;
};

// Submits every request, runs to completion; `sequential` waits for each before the next.
RunFigures run(Engine& e, const std::vector<Request>& reqs, bool sequential) {
    const double t0 = now_ms();
    if (sequential) {
        for (const Request& r : reqs) {
            e.submit(r);
            e.run_until_done();
        }
    } else {
        for (const Request& r : reqs) e.submit(r);
        e.run_until_done();
    }
    return {now_ms() - t0, e.stats()};
}

void print_or_collect(const BenchOptions& o, json& j, const std::string& key, double v,
                      const char* unit, const char* label) {
    j[key] = v;
    if (!o.json_out) std::printf("  %-58s %10.2f %s\n", label, v, unit);
}

// ---- troupe bench model -------------------------------------------------------------------

// Where a decode step's time goes, op by op (`bench model --profile`): n sequences over the
// shared prompt decode with every region step timed (kernels/step_profile.h). Per op: its
// time on tasks and waiting at step ends, per forward pass, averaged over the participants,
// and the time on tasks of the busiest one (how evenly the op splits).
void profile_decode(const BenchOptions& o, const Model& model, const std::vector<int32_t>& prompt,
                    int n, json& j) {
    EngineConfig c = engine_config(o, true, true, n);
    c.profile_steps = true;
    Engine e(model, c);
    run(e, std::vector<Request>(size_t(n), fixed_request(prompt, o.gen_tokens)), false);
    const StepProfile& p = e.step_profile(true);
    const double passes = double(std::max<int64_t>(1, p.regions()));
    const int np = p.participants();
    if (!o.json_out)
        std::printf(
            "\nprofile: %d sequence(s) decoding, %lld passes, us per pass (mean of %d "
            "participants; busiest: the most work of one)\n  %-28s %9s %9s %9s %7s\n",
            n, (long long)p.regions(), np, "op", "work", "wait", "busiest", "steps");
    json rows = json::array();
    double total_work = 0, total_wait = 0;
    for (const StepProfile::Op& op : p.ops()) {
        double work = 0, wait = 0, busiest = 0;
        for (int i = 0; i < np; ++i) {
            work += op.work_ns[size_t(i)] / np;
            wait += op.wait_ns[size_t(i)] / np;
            busiest = std::max(busiest, op.work_ns[size_t(i)]);
        }
        work *= 1e-3 / passes;
        wait *= 1e-3 / passes;
        busiest *= 1e-3 / passes;
        total_work += work;
        total_wait += wait;
        const double steps = double(op.steps) / passes;
        rows.push_back({{"op", op.name},
                        {"work_us", work},
                        {"wait_us", wait},
                        {"busiest_work_us", busiest},
                        {"steps", steps}});
        if (!o.json_out)
            std::printf("  %-28s %9.1f %9.1f %9.1f %7.1f\n", op.name.c_str(), work, wait, busiest,
                        steps);
    }
    if (!o.json_out) std::printf("  %-28s %9.1f %9.1f\n", "total", total_work, total_wait);
    j["profile_" + std::to_string(n)] = rows;
}

// Drops the file's pages from the page cache (as after a reboot or memory pressure), so the
// next load reads it from storage: a cold start.
void evict_from_page_cache(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
}

struct StartFigures {
    double load_ms = 0;    // Model::load (mmap, metadata, tokenizer)
    double engine_ms = 0;  // Engine construction, including the warm-up when on
    double ttft_ms = 0;    // time to first token of the first request
};

// A fresh process's first request: cold (file not cached, no warm-up) or warm (warm-up on).
StartFigures measure_start(const BenchOptions& o, bool cold) {
    if (cold) evict_from_page_cache(o.model);
    StartFigures f;
    double t = now_ms();
    const auto model = Model::load(o.model, o.load);
    f.load_ms = now_ms() - t;
    EngineConfig c = engine_config(o, false, true, 1);
    c.warmup = !cold;
    c.kv_prefault = false;  // what an app's engine does at start by default
    t = now_ms();
    Engine e(*model, c);
    f.engine_ms = now_ms() - t;
    const std::vector<int32_t> prompt = text_tokens(*model, 64);
    e.submit(fixed_request(prompt, 1));
    f.ttft_ms = e.run_until_done().at(0).stats.ttft_ms;
    return f;
}

void run_bench_model(const BenchOptions& opts) {
    const auto model = Model::load(opts.model, opts.load);
    const BenchOptions o =
        with_kv_budget(opts, *model, opts.context_tokens + opts.gen_tokens + 1, opts.n_agents);
    const HParams& hp = model->hparams();
    json j;
    j["model"] = o.model;
    j["threads"] = o.threads;
    j["target"] = kernels::active_units();
    j["kv_prefault"] = o.kv_prefault;
    if (!o.json_out)
        std::printf(
            "model %s: %s, %d layers, n_embd %d, %.1f MiB of weights read per token; "
            "%d threads, %d repetitions, kernels %s; %s\n",
            o.model.c_str(), hp.name.c_str(), hp.n_layer, hp.n_embd,
            double(model->weights().matrix_bytes) / 1048576.0, o.threads, o.repeat,
            kernels::active_units().c_str(), kv_note(o));
    // The bandwidth of a shared machine drifts from minute to minute: it is probed right before
    // every decode run, and the fraction of the roofline is taken per repetition. The roofline
    // streams the weight matrices decode reads per token, in their memory (part of them may
    // stay in the last-level caches from pass to pass, for the probe as for decode); DRAM
    // alone (512 MiB) is printed beside it.
    ThreadPool pool(o.threads);
    const double weight_bytes = double(model->weights().matrix_bytes);
    std::vector<kernels::ByteRange> weights;
    const ModelWeights& mw = model->weights();
    for (const LayerWeights& l : mw.layers)
        for (const ops::Weight* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
            weights.push_back({m->data, size_t(m->n_out) * m->row_stride});
    weights.push_back({mw.output.data, size_t(mw.output.n_out) * mw.output.row_stride});
    auto probe_bw = [&] { return kernels::probe_read_ranges(&pool, weights, 5).best; };
    const double fma = kernels::probe_fma(&pool, 5).best;
    print_or_collect(o, j, "fma_gflop_s", fma, "GFLOP/s", "FMA throughput (probe, best of 5)");
    // Whether the threads share a cache moves every batched figure (kernels/probes.h).
    const double c2c = kernels::probe_core_to_core_ns(&pool, 5).median;
    print_or_collect(o, j, "core_to_core_ns", c2c, "ns",
                     "core-to-core round trip, threads 0 and 1 (probe)");
    const std::vector<int32_t> text = text_tokens(*model, size_t(o.context_tokens) + 8);
    std::vector<double> decode1, prefill, agg8, single_ctx, bws, fractions;
    for (int rep = 0; rep < o.repeat; ++rep) {
        {  // single-sequence decode from a short prompt (llama-bench tg128)
            Engine e(*model, engine_config(o, false, true, 1));
            std::vector<int32_t> p = {model->tokenizer().bos()};
            bws.push_back(probe_bw());
            run(e, {fixed_request(p, o.gen_tokens)}, false);
            decode1.push_back(e.stats().decode_tokens_per_s());
            fractions.push_back(decode1.back() * weight_bytes / (bws.back() * 1e9));
        }
        {  // prefill of a context_tokens prompt in one forward pass (llama-bench pp512)
            EngineConfig c = engine_config(o, false, true, 1);
            c.max_num_batched_tokens = o.context_tokens;
            Engine e(*model, c);
            std::vector<int32_t> p(text.begin(), text.begin() + o.context_tokens);
            p[0] = model->tokenizer().bos();
            run(e, {fixed_request(p, 1)}, false);
            const EngineStats s = e.stats();
            prefill.push_back(double(s.prefill_step_tokens) * 1000.0 / s.prefill_step_ms);
        }
        // n_agents sequences sharing a context_tokens prompt, decoding together, against one
        // sequence with the same context (llama-batched-bench -npp 512 -ntg 128 -npl 1,8).
        std::vector<int32_t> p(text.begin(), text.begin() + o.context_tokens);
        p[0] = model->tokenizer().bos();
        for (int n : {1, o.n_agents}) {
            Engine e(*model, engine_config(o, true, true, n));
            run(e, std::vector<Request>(size_t(n), fixed_request(p, o.gen_tokens)), false);
            (n == 1 ? single_ctx : agg8).push_back(e.stats().decode_tokens_per_s());
        }
    }
    const double bw = robust_median(bws);
    print_or_collect(o, j, "read_bandwidth_dram_gb_s",
                     kernels::probe_read_bandwidth(&pool, size_t(512) << 20, 3).best, "GB/s",
                     "read bandwidth of 512 MiB (DRAM; probe)");
    print_or_collect(o, j, "read_bandwidth_gb_s", bw, "GB/s",
                     "read bandwidth of the weights (probe before each decode run)");
    print_or_collect(o, j, "decode_roofline_tokens_per_s", bw * 1e9 / weight_bytes, "tok/s",
                     "decode roofline (bandwidth / weight bytes per token)");
    print_or_collect(
        o, j, "decode_tokens_per_s", robust_median(decode1), "tok/s",
        ("single-sequence decode of " + std::to_string(o.gen_tokens) + " tokens").c_str());
    print_or_collect(o, j, "decode_fraction_of_roofline", robust_median(fractions), "",
                     "  as a fraction of the roofline (per run, median)");
    print_or_collect(
        o, j, "prefill_tokens_per_s", robust_median(prefill), "tok/s",
        ("prefill of a " + std::to_string(o.context_tokens) + "-token prompt").c_str());
    const double s1 = robust_median(single_ctx), s8 = robust_median(agg8);
    print_or_collect(
        o, j, "decode_1seq_ctx_tokens_per_s", s1, "tok/s",
        ("decode, 1 sequence, " + std::to_string(o.context_tokens) + "-token context").c_str());
    print_or_collect(
        o, j, "decode_nseq_ctx_tokens_per_s", s8, "tok/s",
        ("aggregate decode, " + std::to_string(o.n_agents) + " sequences sharing it").c_str());
    print_or_collect(o, j, "decode_nseq_over_1seq", paired_ratio(agg8, single_ctx), "x",
                     "  ratio (per repetition, median)");
    if (o.profile) {
        std::vector<int32_t> p(text.begin(), text.begin() + o.context_tokens);
        p[0] = model->tokenizer().bos();
        for (int n : {1, o.n_agents}) profile_decode(o, *model, p, n, j);
        if (!o.json_out) std::printf("\n");
    }
    // The seed's cold and warm start: the first request of a fresh engine, the model file
    // evicted from the page cache and no warm-up, against a warmed-up engine.
    std::vector<double> cold_ttft, cold_load, warm_ttft, warm_engine;
    for (int rep = 0; rep < o.repeat; ++rep) {
        const StartFigures c = measure_start(o, true), w = measure_start(o, false);
        cold_ttft.push_back(c.ttft_ms);
        cold_load.push_back(c.load_ms + c.engine_ms);
        warm_ttft.push_back(w.ttft_ms);
        warm_engine.push_back(w.load_ms + w.engine_ms);
    }
    print_or_collect(o, j, "cold_start_load_ms", robust_median(cold_load), "ms",
                     "cold start: load (file not in the page cache), no warm-up");
    print_or_collect(o, j, "cold_start_ttft_ms", robust_median(cold_ttft), "ms",
                     "  first request, 64-token prompt: time to first token");
    print_or_collect(o, j, "warm_start_load_ms", robust_median(warm_engine), "ms",
                     "warm start: load + warm-up (weights touched, one step run)");
    print_or_collect(o, j, "warm_start_ttft_ms", robust_median(warm_ttft), "ms",
                     "  first request, 64-token prompt: time to first token");
    if (o.json_out) std::printf("%s\n", j.dump(1).c_str());
}

// ---- troupe bench agents ------------------------------------------------------------------

void run_bench_agents(const BenchOptions& opts) {
    const auto model = Model::load(opts.model, opts.load);
    const BenchOptions o = with_kv_budget(
        opts, *model, opts.prefix_tokens + opts.suffix_tokens + opts.gen_tokens, opts.n_agents);
    const std::vector<int32_t> text =
        text_tokens(*model, size_t(o.prefix_tokens + o.n_agents * o.suffix_tokens) + 1);
    // Agent k: the shared prefix (BOS + prefix_tokens - 1 tokens), then its own suffix.
    std::vector<Request> reqs;
    for (int k = 0; k < o.n_agents; ++k) {
        std::vector<int32_t> p = {model->tokenizer().bos()};
        p.insert(p.end(), text.begin(), text.begin() + o.prefix_tokens - 1);
        const auto s = text.begin() + o.prefix_tokens + k * o.suffix_tokens;
        p.insert(p.end(), s, s + o.suffix_tokens);
        // Make every suffix distinct from the others at its first token.
        p[size_t(o.prefix_tokens)] = int32_t(100 + k);
        reqs.push_back(fixed_request(p, o.gen_tokens));
    }
    json j;
    j["model"] = o.model;
    j["agents"] = o.n_agents;
    j["prefix_tokens"] = o.prefix_tokens;
    j["suffix_tokens"] = o.suffix_tokens;
    j["generated_tokens"] = o.gen_tokens;
    j["kv_prefault"] = o.kv_prefault;
    if (!o.json_out)
        std::printf(
            "%d agents: %d shared prefix tokens + %d private each, %d generated each; "
            "%d threads, %d repetitions; %s\n",
            o.n_agents, o.prefix_tokens, o.suffix_tokens, o.gen_tokens, o.threads, o.repeat,
            kv_note(o));
    {  // whether the threads share a cache moves the batched figures (kernels/probes.h)
        ThreadPool pool(o.threads);
        print_or_collect(o, j, "core_to_core_ns", kernels::probe_core_to_core_ns(&pool, 5).median,
                         "ns", "core-to-core round trip, threads 0 and 1 (probe)");
    }
    std::vector<double> base_ms, opt_ms, hit;
    std::map<int, std::vector<double>> agg;  // concurrency -> decode tok/s
    std::vector<double> agg_no_shared;       // at n_agents, shared-prefix attention off
    for (int rep = 0; rep < o.repeat; ++rep) {
        {
            Engine e(*model, engine_config(o, false, false, 1));
            base_ms.push_back(run(e, reqs, true).wall_ms);
        }
        {
            Engine e(*model, engine_config(o, true, true, o.n_agents));
            const RunFigures f = run(e, reqs, false);
            opt_ms.push_back(f.wall_ms);
            hit.push_back(f.stats.hit_rate());
        }
        {
            EngineConfig c = engine_config(o, true, true, o.n_agents);
            c.shared_prefix_attention = false;
            Engine e(*model, c);
            agg_no_shared.push_back(run(e, reqs, false).stats.decode_tokens_per_s());
        }
        for (int c = 1; c <= o.n_agents;
             c = c * 2 > o.n_agents && c < o.n_agents ? o.n_agents : c * 2) {
            Engine e(*model, engine_config(o, true, true, c));
            std::vector<Request> sub(reqs.begin(), reqs.begin() + c);
            agg[c].push_back(run(e, sub, false).stats.decode_tokens_per_s());
        }
    }
    const double b = robust_median(base_ms), t = robust_median(opt_ms);
    print_or_collect(o, j, "baseline_wall_ms", b, "ms", "baseline: one at a time, no prefix cache");
    print_or_collect(o, j, "optimized_wall_ms", t, "ms", "prefix cache + continuous batching");
    print_or_collect(o, j, "speedup", paired_ratio(base_ms, opt_ms), "x",
                     "  speed-up (per repetition, median)");
    print_or_collect(o, j, "hit_rate", robust_median(hit), "", "  prefix-cache hit rate");
    for (auto& [c, v] : agg) {
        const double r = robust_median(v);
        print_or_collect(o, j, "decode_tokens_per_s_" + std::to_string(c), r, "tok/s",
                         ("aggregate decode, " + std::to_string(c) + " concurrent").c_str());
        if (c > 1)
            print_or_collect(o, j, "decode_ratio_" + std::to_string(c), paired_ratio(v, agg[1]),
                             "x", "  over 1 (per repetition, median)");
    }
    const double unshared = robust_median(agg_no_shared);
    print_or_collect(o, j, "decode_tokens_per_s_no_shared_attention", unshared, "tok/s",
                     ("aggregate decode, " + std::to_string(o.n_agents) +
                      " concurrent, shared-prefix attention off")
                         .c_str());
    print_or_collect(o, j, "shared_attention_gain",
                     paired_ratio(agg.at(o.n_agents), agg_no_shared), "x",
                     "  gain of shared-prefix attention (per repetition, median)");
    if (o.json_out) std::printf("%s\n", j.dump(1).c_str());
}

}  // namespace

void add_bench_engine_commands(CLI::App* bench) {
    auto o = std::make_shared<BenchOptions>();
    auto common = [o](CLI::App* cmd) {
        add_model_option(cmd, o->model);
        cmd->add_option("-t,--threads", o->threads, "Threads")->capture_default_str();
        cmd->add_option("--repeat", o->repeat,
                        "Runs per case (median after dropping the fastest and slowest)")
            ->capture_default_str();
        cmd->add_option("--gen", o->gen_tokens, "Tokens generated per sequence")
            ->capture_default_str();
        cmd->add_option("--agents", o->n_agents, "Concurrent sequences")->capture_default_str();
        cmd->add_flag("--json", o->json_out, "Print one JSON object");
        cmd->add_flag("--no-kv-prefault{false}", o->kv_prefault,
                      "Leave the KV cache's pages to be first touched inside the timed runs");
        cmd->add_flag("--no-interleave{false}", o->load.interleave_weights,
                      "Keep the Q8_0 matrices in the file's layout (no rows-in-lanes kernels)");
        add_kv_type_option(cmd, o->kv_type);
    };
    CLI::App* m = bench->add_subcommand(
        "model", "Decode against the bandwidth roofline, prefill, and batched decode");
    common(m);
    m->add_option("--ctx", o->context_tokens, "Prompt / context tokens")->capture_default_str();
    m->add_flag("--profile", o->profile,
                "Also time every step of the batched decode, op by op (1 and --agents sequences)");
    m->callback([o] { run_bench_model(*o); });

    CLI::App* a = bench->add_subcommand(
        "agents", "Agents sharing a long prefix: prefix cache + batching against one at a time");
    common(a);
    a->add_option("--prefix", o->prefix_tokens, "Shared prefix tokens")->capture_default_str();
    a->add_option("--suffix", o->suffix_tokens, "Private suffix tokens per agent")
        ->capture_default_str();
    a->callback([o] { run_bench_agents(*o); });
}

}  // namespace troupe::cli
