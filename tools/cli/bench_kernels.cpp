#include "bench_kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>

#include "kernels/ops.h"
#include "kernels/probes.h"
#include "kernels/targets.h"
#include "kernels/thread_pool.h"
#include "tensor/quant_ref.h"
#include "util/error.h"

namespace troupe::cli {

namespace {

using json = nlohmann::json;

struct Timing {
    double median = 0;  // seconds per call
    double best = 0;
};

double seconds_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Calls fn until min_seconds have passed (and at least min_reps times); per-call times.
// Calls shorter than 20 us are timed in groups so that clock reads do not dominate.
Timing measure(const std::function<void()>& fn, double min_seconds, int min_reps = 5) {
    fn();  // warm-up: page faults, scratch growth
    const double t_first = seconds_now();
    fn();
    const int group = std::max(1, int(20e-6 / std::max(seconds_now() - t_first, 1e-9)));
    std::vector<double> t;
    const double end = seconds_now() + min_seconds;
    while (seconds_now() < end || int(t.size()) < min_reps) {
        const double t0 = seconds_now();
        for (int i = 0; i < group; ++i) fn();
        t.push_back((seconds_now() - t0) / group);
    }
    std::sort(t.begin(), t.end());
    return {t[t.size() / 2], t.front()};
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// A weight matrix quantised once and copied until the copies exceed `working_set` bytes, so
// that cycling through them reads from DRAM as decode does (the model is larger than the
// last-level cache).
class WeightCopies {
  public:
    WeightCopies(DType type, int64_t n_in, int64_t n_out, size_t working_set) {
        const size_t rb = row_bytes(type, n_in);
        bytes_ = rb * size_t(n_out);
        const auto f = random_floats(size_t(n_in), 7);
        std::vector<uint8_t> row(rb);
        n_copies_ = std::max<size_t>(2, working_set / bytes_ + 1);
        data_.reset(
            static_cast<uint8_t*>(std::aligned_alloc(64, (bytes_ * n_copies_ + 63) / 64 * 64)));
        TROUPE_CHECK(data_ != nullptr);
        // Rows differ (a rotating input) so that no two rows are the same bytes.
        std::vector<float> rot(f.size());
        for (int64_t o = 0; o < n_out; ++o) {
            for (size_t i = 0; i < f.size(); ++i) rot[i] = f[(i + size_t(o)) % f.size()];
            quantize_row(type, rot.data(), data_.get() + size_t(o) * rb, n_in);
        }
        for (size_t c = 1; c < n_copies_; ++c)
            std::memcpy(data_.get() + c * bytes_, data_.get(), bytes_);
        w_ = ops::Weight{type, n_in, n_out, data_.get(), rb};
    }
    // The next copy.
    ops::Weight next() {
        ops::Weight w = w_;
        w.data = data_.get() + (next_++ % n_copies_) * bytes_;
        return w;
    }
    size_t bytes() const { return bytes_; }

  private:
    struct Free {
        void operator()(uint8_t* p) const { std::free(p); }
    };
    std::unique_ptr<uint8_t, Free> data_;
    size_t bytes_ = 0, n_copies_ = 0, next_ = 0;
    ops::Weight w_;
};

struct Shape {
    const char* name;  // rows x columns = n_out x n_in, as the model's matrices
    int64_t n_out, n_in;
};

// The 135M model's matrices (n_embd 576, n_ff 1536, vocab 32000): attention projections,
// ffn_down, ffn_gate/up, the tied output.
constexpr Shape kShapes[] = {{"576x576", 576, 576},
                             {"576x1536", 576, 1536},
                             {"1536x576", 1536, 576},
                             {"32000x576", 32000, 576}};

const char* kDefaultTypes[] = {"q8_0", "q4_0", "q4_k", "q6_k", "f16", "bf16",
                               "f32",  "q5_0", "q4_1", "q5_1", "q5_k"};

bool fits(DType type, int64_t n_in) {
    return n_in % traits(type).block_size == 0;
}

struct Context {
    const KernelBenchOptions& o;
    ThreadPool& pool;
    double seconds;      // minimum time per measurement
    size_t working_set;  // bytes cycled through by matrix measurements
    json out;
    double bw_all = 0, fma_all = 0, int8_all = 0;
};

void say(const Context& c, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void say(const Context& c, const char* fmt, ...) {
    if (c.o.json) return;
    va_list args;
    va_start(args, fmt);
    std::vprintf(fmt, args);
    va_end(args);
    std::fflush(stdout);
}

void bench_probes(Context& c) {
    const int reps = c.o.quick ? 3 : 7;
    const size_t bytes = c.working_set;
    ThreadPool one(1);
    const auto bw1 = kernels::probe_read_bandwidth(&one, bytes, reps);
    const auto bwn = kernels::probe_read_bandwidth(&c.pool, bytes, reps);
    const auto fma1 = kernels::probe_fma(&one, reps);
    const auto reps_ops = kernels::probe_fma(&c.pool, reps);
    const auto i8 = kernels::probe_int8_dot(&c.pool, reps);
    // Fractions are taken of the best repetition: the least disturbed estimate of what the
    // machine can do, so that other processes cannot inflate them.
    c.bw_all = bwn.best;
    c.fma_all = reps_ops.best;
    c.int8_all = i8.best;
    say(c, "machine limits (median of %d, best in brackets)\n", reps);
    say(c, "  read bandwidth   1 thread %7.1f GB/s [%.1f]   %d threads %7.1f GB/s [%.1f]\n",
        bw1.median, bw1.best, c.pool.size(), bwn.median, bwn.best);
    say(c, "  FMA f32          1 thread %7.1f GFLOP/s [%.1f]  %d threads %7.1f GFLOP/s [%.1f]\n",
        fma1.median, fma1.best, c.pool.size(), reps_ops.median, reps_ops.best);
    say(c, "  int8 dot         %d threads %7.1f GOP/s [%.1f]\n\n", c.pool.size(), i8.median,
        i8.best);
    c.out["probes"] = {{"read_gbs_1", bw1.median},           {"read_gbs_1_best", bw1.best},
                       {"read_gbs_n", bwn.median},           {"read_gbs_n_best", bwn.best},
                       {"fma_gflops_1", fma1.median},        {"fma_gflops_n", reps_ops.median},
                       {"fma_gflops_n_best", reps_ops.best}, {"int8_gops_n", i8.median},
                       {"working_set_bytes", bytes}};
}

void bench_pool(Context& c) {
    const auto t =
        measure([&] { c.pool.run(c.pool.size(), [](int64_t, int) {}); }, c.seconds / 2, 100);
    say(c, "thread pool: run() of %d empty tasks %.2f us (median) [%.2f]\n\n", c.pool.size(),
        t.median * 1e6, t.best * 1e6);
    c.out["pool_run_us"] = t.median * 1e6;
}

void bench_gemv(Context& c, const std::vector<DType>& types) {
    say(c,
        "matrix-vector (decode, 1 token, weights from DRAM), %d threads: GB/s of weights and "
        "fraction "
        "of the best read bandwidth\n",
        c.pool.size());
    say(c, "  %-6s", "type");
    for (const Shape& s : kShapes) say(c, " %18s", s.name);
    say(c, "\n");
    json rows = json::array();
    for (DType type : types) {
        say(c, "  %-6s", type_name(type));
        json row = {{"type", type_name(type)}};
        for (const Shape& s : kShapes) {
            if (!fits(type, s.n_in)) {
                say(c, " %18s", "-");
                continue;
            }
            WeightCopies w(type, s.n_in, s.n_out, c.working_set);
            const auto x = random_floats(size_t(s.n_in), 3);
            std::vector<float> y(size_t(s.n_out));
            const auto t =
                measure([&] { ops::matmul(w.next(), x.data(), y.data(), 1, &c.pool); }, c.seconds);
            const double gbs = double(w.bytes()) / t.median * 1e-9;
            say(c, " %8.1f (%5.1f%%)", gbs, 100.0 * gbs / c.bw_all);
            row[s.name] = {{"gbs", gbs},
                           {"gbs_best", double(w.bytes()) / t.best * 1e-9},
                           {"us", t.median * 1e6},
                           {"fraction_of_bandwidth", gbs / c.bw_all}};
        }
        say(c, "\n");
        rows.push_back(row);
    }
    say(c, "\n");
    c.out["matvec"] = rows;
}

void bench_gemm(Context& c, const std::vector<DType>& types) {
    const std::vector<int64_t> batches = {1, 2, 4, 8, 16, 64, 512};
    say(c,
        "matrix-matrix, %d threads: GFLOP/s (2 per multiply-add) and fraction of the best FMA "
        "probe\n",
        c.pool.size());
    say(c, "  %-6s %-9s", "type", "shape");
    for (int64_t b : batches) say(c, " %14s", ("batch " + std::to_string(b)).c_str());
    say(c, "\n");
    json rows = json::array();
    for (DType type : types) {
        const Shape s = fits(type, 576) ? kShapes[2] : kShapes[1];  // 1536x576, else 576x1536
        WeightCopies w(type, s.n_in, s.n_out, c.working_set);
        say(c, "  %-6s %-9s", type_name(type), s.name);
        json row = {{"type", type_name(type)}, {"shape", s.name}};
        for (int64_t b : batches) {
            const auto x = random_floats(size_t(s.n_in * b), 5);
            std::vector<float> y(size_t(s.n_out * b));
            const auto t =
                measure([&] { ops::matmul(w.next(), x.data(), y.data(), b, &c.pool); }, c.seconds);
            const double flops = 2.0 * double(s.n_in) * double(s.n_out) * double(b);
            const double gf = flops / t.median * 1e-9;
            say(c, " %6.0f (%4.0f%%)", gf, 100.0 * gf / c.fma_all);
            row["batch_" + std::to_string(b)] = {{"gflops", gf},
                                                 {"gflops_best", flops / t.best * 1e-9},
                                                 {"us", t.median * 1e6},
                                                 {"fraction_of_fma", gf / c.fma_all}};
        }
        say(c, "\n");
        rows.push_back(row);
    }
    say(c, "\n");
    c.out["matmul"] = rows;
}

// A KV cache of one layer with the model's attention shape, filled with random values.
struct BenchKv {
    std::vector<uint8_t> k, v;
    ops::KvLayerView view;
    BenchKv(int n_blocks, int block_size, int n_kv_head, int head_dim) {
        view.type = DType::F16;
        view.block_size = block_size;
        view.head_dim = head_dim;
        view.n_kv_head = n_kv_head;
        view.head_stride = size_t(block_size) * size_t(head_dim) * 2;
        view.block_stride = view.head_stride * size_t(n_kv_head);
        const auto f = random_floats(view.block_stride * size_t(n_blocks) / 2, 11);
        k.resize(view.block_stride * size_t(n_blocks));
        v.resize(k.size());
        for (size_t i = 0; i < f.size(); ++i) {
            const uint16_t h =
                uint16_t(0x3000 + (i * 2654435761u) % 0x0c00);  // values in [0.125, 1)
            std::memcpy(&k[2 * i], &h, 2);
            std::memcpy(&v[2 * i], &h, 2);
        }
        view.k = k.data();
        view.v = v.data();
    }
};

void bench_attention(Context& c) {
    const int n_head = 9, n_kv_head = 3, head_dim = 64, bs = 16;
    BenchKv kv(1024, bs, n_kv_head, head_dim);
    const float scale = 0.125f;
    auto make_seqs = [&](int n_seqs, int prefix_tokens, int own_tokens, bool share, int n_q,
                         std::vector<std::vector<int32_t>>& tables,
                         std::vector<std::vector<float>>& qo) {
        std::vector<ops::AttentionSeq> seqs;
        tables.assign(size_t(n_seqs), {});
        qo.assign(size_t(n_seqs) * 2, {});
        int32_t next = 0;
        const int prefix_blocks = prefix_tokens / bs;
        std::vector<int32_t> prefix;
        for (int b = 0; b < prefix_blocks; ++b) prefix.push_back(next++);
        for (int s = 0; s < n_seqs; ++s) {
            auto& t = tables[size_t(s)];
            if (share) {
                t = prefix;
            } else {
                for (int b = 0; b < prefix_blocks; ++b) t.push_back(next++ % 1024);
            }
            const int total = prefix_blocks * bs + own_tokens;
            while (int(t.size()) * bs < total) t.push_back(next++ % 1024);
            qo[size_t(2 * s)] = random_floats(size_t(n_q * n_head * head_dim), uint32_t(s));
            qo[size_t(2 * s + 1)].resize(size_t(n_q * n_head * head_dim));
            seqs.push_back({t.data(), total - n_q, n_q, qo[size_t(2 * s)].data(),
                            qo[size_t(2 * s + 1)].data()});
        }
        return seqs;
    };
    json out;
    say(c, "attention per layer (9 heads, 3 kv heads, head_dim 64, F16 cache, %d threads)\n",
        c.pool.size());
    std::vector<std::vector<int32_t>> tables;
    std::vector<std::vector<float>> qo;
    auto run = [&](const char* label, const char* key, std::vector<ops::AttentionSeq> seqs,
                   bool grouped) {
        const auto groups = grouped ? ops::find_shared_prefixes(seqs.data(), int(seqs.size()), bs)
                                    : std::vector<ops::SharedPrefixGroup>{};
        const auto t = measure(
            [&] {
                ops::attention_shared(kv.view, seqs.data(), int(seqs.size()), groups, n_head, scale,
                                      &c.pool);
            },
            c.seconds);
        say(c, "  %-58s %9.1f us [%.1f]\n", label, t.median * 1e6, t.best * 1e6);
        out[key] = {{"us", t.median * 1e6}, {"us_best", t.best * 1e6}};
        return t.median;
    };
    run("decode, 1 sequence, context 512", "decode_1x512",
        make_seqs(1, 496, 16, false, 1, tables, qo), false);
    run("decode, 8 sequences, context 512 each (no sharing)", "decode_8x512",
        make_seqs(8, 496, 16, false, 1, tables, qo), false);
    const double plain =
        run("decode, 8 sequences, 1,008-token shared prefix, read separately",
            "shared_8x1000_plain", make_seqs(8, 1008, 8, true, 1, tables, qo), false);
    const double shared =
        run("decode, 8 sequences, 1,008-token shared prefix, shared form", "shared_8x1000_shared",
            make_seqs(8, 1008, 8, true, 1, tables, qo), true);
    say(c, "  shared-prefix gain: %.2fx\n", plain / shared);
    out["shared_prefix_speedup"] = plain / shared;
    run("prefill, 512 tokens", "prefill_512", make_seqs(1, 0, 512, false, 512, tables, qo), false);
    say(c, "\n");
    c.out["attention"] = out;
}

}  // namespace

void run_kernel_bench(const KernelBenchOptions& o) {
    std::optional<kernels::ScopedTarget> forced;
    if (!o.target.empty()) {
        int64_t id = 0;
        for (const auto& t : kernels::available_targets())
            if (t.name == o.target) id = t.id;
        if (id == 0) throw Error("unknown or unsupported SIMD target: " + o.target);
        forced.emplace(id);
    }
    std::vector<DType> types;
    for (const std::string& name :
         o.types.empty()
             ? std::vector<std::string>(std::begin(kDefaultTypes), std::end(kDefaultTypes))
             : o.types) {
        const auto t = type_from_name(name);
        if (!t) throw Error("unknown weight type: " + name);
        act_type(*t);  // throws for types without compute
        types.push_back(*t);
    }
    if (o.threads < 1) throw Error("--threads must be at least 1");
    ThreadPool pool(o.threads);
    Context c{o, pool, o.quick ? 0.05 : 0.3, size_t(o.quick ? 64 : 256) << 20, json::object()};
    c.out["target"] = kernels::active_target().name;
    c.out["threads"] = o.threads;
    say(c, "troupe bench kernels: SIMD target %s, %d threads%s\n",
        kernels::active_target().name.c_str(), o.threads, o.quick ? " (quick)" : "");
    say(c, "the machine may be shared: figures are medians of repeated runs, best in brackets\n\n");
    bench_probes(c);
    bench_pool(c);
    bench_gemv(c, types);
    bench_gemm(c, types);
    bench_attention(c);
    if (o.json) std::printf("%s\n", c.out.dump(2).c_str());
}

}  // namespace troupe::cli
