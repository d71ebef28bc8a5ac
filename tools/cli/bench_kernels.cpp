#include "bench_kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <string>

#include "kernels/ops.h"
#include "kernels/probes.h"
#include "kernels/targets.h"
#include "kernels/thread_pool.h"
#include "kernels/weight_layout.h"
#include "kv/kv_storage.h"
#include "tensor/quant_ref.h"
#include "util/error.h"
#include "util/large_buffer.h"

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

// A weight type as the benchmark measures it: the file's layout, or Q8_0 / Q4_0 interleaved
// (kernels/weight_layout.h, named "q8_0i" / "q4_0i" here) as Model::load makes them; "q5_0i":
// Q5_0 widened to interleaved Q8_0, as Model::load makes it where ops::widen_q5_0_here() (its
// GB/s count the widened bytes read; compare the time, "us", with q5_0's).
struct BenchType {
    DType type;
    bool interleaved;
    std::string name;
};

// A weight matrix quantised once and copied until the copies exceed `working_set` bytes, so
// that cycling through them reads from DRAM as decode does (the model is larger than the
// last-level cache).
class WeightCopies {
  public:
    WeightCopies(const BenchType& bt, int64_t n_in, int64_t n_out, size_t working_set) {
        const DType type = bt.type;
        const size_t rb = row_bytes(type, n_in);
        const size_t file_bytes = rb * size_t(n_out);
        bytes_ = bt.interleaved
                     ? ops::interleaved_bytes(ops::Weight{type, n_in, n_out, nullptr, rb})
                     : file_bytes;
        const auto f = random_floats(size_t(n_in), 7);
        n_copies_ = std::max<size_t>(2, working_set / bytes_ + 1);
        // In huge pages where the OS has them, as the engine's interleaved weights
        // (ModelWeights::interleaved_storage) and the read probe's buffer are (the engine
        // reads the other layouts from the file's mapping): 4 KiB pages understated the
        // streamed products (src/kernels/README.md, "The next session").
        data_ = LargeBuffer(bytes_ * n_copies_);
        // Rows differ (a rotating input) so that no two rows are the same bytes.
        std::vector<uint8_t> file(file_bytes);
        std::vector<float> rot(f.size());
        for (int64_t o = 0; o < n_out; ++o) {
            for (size_t i = 0; i < f.size(); ++i) rot[i] = f[(i + size_t(o)) % f.size()];
            quantize_row(type, rot.data(), file.data() + size_t(o) * rb, n_in);
        }
        w_ = ops::Weight{type, n_in, n_out, file.data(), rb};
        if (bt.interleaved) {
            w_ = ops::interleave(w_, data_.data());
        } else {
            std::memcpy(data_.data(), file.data(), bytes_);
            w_.data = data_.data();
        }
        for (size_t c = 1; c < n_copies_; ++c)
            std::memcpy(data_.data() + c * bytes_, data_.data(), bytes_);
    }
    // The next copy.
    ops::Weight next() {
        ops::Weight w = w_;
        w.data = data_.data() + (next_++ % n_copies_) * bytes_;
        return w;
    }
    size_t bytes() const { return bytes_; }

  private:
    LargeBuffer data_;
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

const char* kDefaultTypes[] = {"q8_0", "q8_0i", "q4_0", "q4_0i", "q4_k", "q6_k", "f16",
                               "bf16", "f32",   "q5_0", "q5_0i", "q4_1", "q5_1", "q5_k"};

bool fits(const BenchType& t, int64_t n_in, int64_t n_out) {
    return n_in % traits(t.type).block_size == 0 &&
           (!t.interleaved || n_out % ops::kInterleaveRows == 0);
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
    const auto c2c = kernels::probe_core_to_core_ns(&c.pool, reps);
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
    say(c, "  int8 dot         %d threads %7.1f GOP/s [%.1f]\n", c.pool.size(), i8.median,
        i8.best);
    if (c.pool.size() > 1)
        say(c, "  core to core     threads 0 and 1: round trip %.0f ns [%.0f] (a barrier's cost)\n",
            c2c.median, c2c.best);
    // Read bandwidth against the bytes read over and over: where it falls is how much the
    // last-level cache keeps (on a shared cloud host, this VM's share of it). A model's weights
    // below that stream at the cache's rate, and the KV cache read in the same pass can push
    // them past it (src/kernels/README.md).
    json by_size = json::array();
    say(c, "  read bandwidth by working set, %d threads (best of %d):", c.pool.size(), reps);
    for (const size_t mib : c.o.quick ? std::vector<size_t>{32, 256}
                                      : std::vector<size_t>{16, 64, 128, 160, 192, 256, 512}) {
        const double gbs = kernels::probe_read_bandwidth(&c.pool, mib << 20, reps).best;
        say(c, "  %zu MiB %.1f", mib, gbs);
        by_size.push_back({{"mib", mib}, {"gbs", gbs}});
    }
    say(c, " GB/s\n\n");
    c.out["probes"] = {{"read_gbs_1", bw1.median},
                       {"read_gbs_1_best", bw1.best},
                       {"read_gbs_n", bwn.median},
                       {"read_gbs_n_best", bwn.best},
                       {"fma_gflops_1", fma1.median},
                       {"fma_gflops_n", reps_ops.median},
                       {"fma_gflops_n_best", reps_ops.best},
                       {"int8_gops_n", i8.median},
                       {"core_to_core_ns", c2c.median},
                       {"working_set_bytes", bytes},
                       {"read_gbs_n_by_working_set", by_size}};
}

void bench_pool(Context& c) {
    const auto t =
        measure([&] { c.pool.run(c.pool.size(), [](int64_t, int) {}); }, c.seconds / 2, 100);
    say(c, "thread pool: run() of %d empty tasks %.2f us (median) [%.2f]\n\n", c.pool.size(),
        t.median * 1e6, t.best * 1e6);
    c.out["pool_run_us"] = t.median * 1e6;
}

void bench_gemv(Context& c, const std::vector<BenchType>& types) {
    say(c,
        "matrix-vector (decode, 1 token, weights from DRAM), %d threads: GB/s of weights and "
        "fraction "
        "of the best read bandwidth\n",
        c.pool.size());
    say(c, "  %-6s", "type");
    for (const Shape& s : kShapes) say(c, " %18s", s.name);
    say(c, "\n");
    json rows = json::array();
    for (const BenchType& type : types) {
        say(c, "  %-6s", type.name.c_str());
        json row = {{"type", type.name}};
        for (const Shape& s : kShapes) {
            if (!fits(type, s.n_in, s.n_out)) {
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

void bench_gemm(Context& c, const std::vector<BenchType>& types) {
    const std::vector<int64_t> batches = {1, 2, 4, 8, 16, 64, 512};
    say(c,
        "matrix-matrix, %d threads: GFLOP/s (2 per multiply-add) and fraction of the best "
        "probe of the type's arithmetic (int8 dot for quantised types, FMA for float ones)\n",
        c.pool.size());
    say(c, "  %-6s %-9s", "type", "shape");
    for (int64_t b : batches) say(c, " %14s", ("batch " + std::to_string(b)).c_str());
    say(c, "\n");
    json rows = json::array();
    for (const BenchType& type : types) {
        // 1536x576, else 576x1536
        const Shape s = fits(type, 576, 1536) ? kShapes[2] : kShapes[1];
        WeightCopies w(type, s.n_in, s.n_out, c.working_set);
        say(c, "  %-6s %-9s", type.name.c_str(), s.name);
        // Quantised activations (Q8_0 / Q8_1 / Q8_K) run on 8-bit dot products.
        const bool int8 = traits(act_type(type.type)).is_quantized;
        const double peak = int8 ? c.int8_all : c.fma_all;
        json row = {{"type", type.name}, {"shape", s.name}, {"probe", int8 ? "int8" : "fma"}};
        for (int64_t b : batches) {
            const auto x = random_floats(size_t(s.n_in * b), 5);
            std::vector<float> y(size_t(s.n_out * b));
            const auto t =
                measure([&] { ops::matmul(w.next(), x.data(), y.data(), b, &c.pool); }, c.seconds);
            const double flops = 2.0 * double(s.n_in) * double(s.n_out) * double(b);
            const double gf = flops / t.median * 1e-9;
            say(c, " %6.0f (%4.0f%%)", gf, 100.0 * gf / peak);
            row["batch_" + std::to_string(b)] = {{"gflops", gf},
                                                 {"gflops_best", flops / t.best * 1e-9},
                                                 {"us", t.median * 1e6},
                                                 {"fraction_of_fma", gf / c.fma_all},
                                                 {"fraction_of_probe", gf / peak}};
        }
        say(c, "\n");
        rows.push_back(row);
    }
    say(c, "\n");
    c.out["matmul"] = rows;
}

// KV caches of the model's attention shape (F16), filled with values in [0.125, 1) that
// differ between K and V: the engine's storage (kv::KvStorage, so its layout) with n_copies
// layers of n_blocks blocks, one view per layer.
struct BenchKv {
    kv::KvStorage storage;
    std::vector<ops::KvLayerView> layers;
    BenchKv(int n_blocks, int block_size, int n_kv_head, int head_dim, int n_copies = 1)
        : storage(geometry(block_size, n_kv_head, head_dim, n_copies), n_blocks) {
        const kv::KvGeometry& g = storage.geometry();
        const size_t n_elem = g.head_bytes() / 2;
        size_t i = 0;
        for (int b = 0; b < n_blocks; ++b)
            for (int p = 0; p < g.pieces_per_block(); ++p) {
                const bool is_v = (p / n_kv_head) % 2 == 1;  // piece = (2 layer + kv) heads + h
                uint8_t* dst = storage.piece(b, p);
                for (size_t e = 0; e < n_elem; ++e, ++i) {
                    const uint16_t h = is_v ? uint16_t(0x3000 + (i * 40503u + 7) % 0x0c00)
                                            : uint16_t(0x3000 + (i * 2654435761u) % 0x0c00);
                    std::memcpy(dst + 2 * e, &h, 2);
                }
            }
        for (int c = 0; c < n_copies; ++c) layers.push_back(storage.layer_view(c));
    }
    static kv::KvGeometry geometry(int block_size, int n_kv_head, int head_dim, int n_layer) {
        kv::KvGeometry g;
        g.n_layer = n_layer;
        g.n_kv_head = n_kv_head;
        g.head_dim = head_dim;
        g.block_size = block_size;
        g.type = DType::F16;
        return g;
    }
};

// Sequences of one attention batch with their block tables and buffers.
struct BenchBatch {
    std::vector<std::vector<int32_t>> tables;
    std::vector<std::vector<float>> q, out;
    std::vector<ops::AttentionSeq> seqs;
    int64_t n_pairs = 0;  // (query row, head, visible key) triples: the work of one call
};

// n_seqs sequences, each with `context` tokens before its n_q query rows; the first
// `shared` tokens (whole blocks) are the same physical blocks for all of them.
BenchBatch make_batch(int n_seqs, int context, int n_q, int shared, int n_head, int head_dim,
                      int block_size, int n_blocks) {
    BenchBatch b;
    std::vector<int32_t> prefix;
    int32_t next = 0;
    for (int i = 0; i < shared / block_size; ++i) prefix.push_back(next++);
    for (int s = 0; s < n_seqs; ++s) {
        std::vector<int32_t> t = prefix;
        while (int(t.size()) * block_size < context + n_q) t.push_back(next++ % n_blocks);
        b.tables.push_back(std::move(t));
        b.q.push_back(random_floats(size_t(n_q * n_head * head_dim), uint32_t(s + 1)));
        b.out.emplace_back(b.q.back().size());
        for (int r = 0; r < n_q; ++r) b.n_pairs += int64_t(n_head) * (context + r + 1);
    }
    for (int s = 0; s < n_seqs; ++s)
        b.seqs.push_back({b.tables[size_t(s)].data(), context, n_q, b.q[size_t(s)].data(),
                          b.out[size_t(s)].data()});
    return b;
}

// Attention per layer of the 135M model (9 heads, 3 kv heads, head_dim 64): decode at several
// contexts, 8 sequences with and without a shared prefix, prefill; us per call and the
// multiply-add rate (2 x head_dim per query row, head and visible key: scores and values)
// against the FMA probe. Decode from DRAM cycles through the caches of many layers.
void bench_attention(Context& c) {
    const int n_head = 9, n_kv_head = 3, head_dim = 64, bs = 16, n_blocks = 1024;
    const float scale = 0.125f;
    BenchKv kv(n_blocks, bs, n_kv_head, head_dim);
    json out = json::object();
    say(c, "attention per layer (9 heads, 3 kv heads, head_dim 64, F16 cache, %d threads)\n",
        c.pool.size());
    say(c, "  %-58s %9s %9s %8s\n", "", "us", "[best]", "GFLOP/s");
    auto run = [&](const std::string& label, const std::string& key, BenchBatch b, bool grouped,
                   const BenchKv& cache) {
        const auto groups = grouped
                                ? ops::find_shared_prefixes(b.seqs.data(), int(b.seqs.size()), bs)
                                : std::vector<ops::SharedPrefixGroup>{};
        size_t layer = 0;
        const auto t = measure(
            [&] {
                const ops::KvLayerView& view = cache.layers[layer++ % cache.layers.size()];
                ops::attention_shared(view, b.seqs.data(), int(b.seqs.size()), groups, n_head,
                                      scale, &c.pool);
            },
            c.seconds);
        const double gflops = 4.0 * head_dim * double(b.n_pairs) / t.median * 1e-9;
        say(c, "  %-58s %9.1f %9.1f %8.1f (%4.1f%% of FMA)\n", label.c_str(), t.median * 1e6,
            t.best * 1e6, gflops, 100.0 * gflops / c.fma_all);
        out[key] = {{"us", t.median * 1e6},
                    {"us_best", t.best * 1e6},
                    {"gflops", gflops},
                    {"fraction_of_fma", gflops / c.fma_all}};
        return t.median;
    };
    for (int ctx : {256, 512, 1024, 2048, 4096})
        run("decode, 1 sequence, context " + std::to_string(ctx), "decode_1x" + std::to_string(ctx),
            make_batch(1, ctx, 1, 0, n_head, head_dim, bs, n_blocks), false, kv);
    {
        // 64 layers of 1,400 tokens: 69 MB of K/V, beyond the caches as in a model (whose
        // weights pass through the cache between two layers).
        BenchKv layers(90, bs, n_kv_head, head_dim, 64);
        run("decode, 1 sequence, context 1400, K/V from DRAM", "decode_1x1400_dram",
            make_batch(1, 1400, 1, 0, n_head, head_dim, bs, 90), false, layers);
    }
    run("decode, 8 sequences, context 1,024 each (no sharing)", "decode_8x1024",
        make_batch(8, 1024, 1, 0, n_head, head_dim, bs, n_blocks), false, kv);
    const double plain = run(
        "decode, 8 sequences, 1,008-token shared prefix, read separately", "shared_8x1000_plain",
        make_batch(8, 1016, 1, 1008, n_head, head_dim, bs, n_blocks), false, kv);
    const double shared =
        run("decode, 8 sequences, 1,008-token shared prefix, shared form", "shared_8x1000_shared",
            make_batch(8, 1016, 1, 1008, n_head, head_dim, bs, n_blocks), true, kv);
    say(c, "  shared-prefix gain: %.2fx\n", plain / shared);
    out["shared_prefix_speedup"] = plain / shared;
    for (int n : {512, 1400})
        run("prefill, " + std::to_string(n) + " tokens", "prefill_" + std::to_string(n),
            make_batch(1, 0, n, 0, n_head, head_dim, bs, n_blocks), false, kv);
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
    std::vector<BenchType> types;
    for (const std::string& name :
         o.types.empty()
             ? std::vector<std::string>(std::begin(kDefaultTypes), std::end(kDefaultTypes))
             : o.types) {
        const bool interleaved = name == "q8_0i" || name == "q4_0i" || name == "q5_0i";
        const auto t = type_from_name(interleaved ? name.substr(0, name.size() - 1) : name);
        if (!t)
            throw Error("unknown weight type: " + name +
                        " (q8_0i, q4_0i: interleaved; q5_0i: widened to interleaved Q8_0)");
        act_type(*t);  // throws for types without compute
        types.push_back({*t, interleaved, name});
    }
    if (o.threads < 1) throw Error("--threads must be at least 1");
    ThreadPool pool(o.threads);
    Context c{o, pool, o.quick ? 0.05 : 0.3, size_t(o.quick ? 64 : 256) << 20, json::object()};
    c.out["target"] = kernels::active_target().name;
    c.out["amx"] = kernels::amx_in_use();
    c.out["threads"] = o.threads;
    say(c, "troupe bench kernels: SIMD target %s, %d threads%s\n",
        kernels::active_units().c_str(), o.threads, o.quick ? " (quick)" : "");
    say(c, "the machine may be shared: figures are medians of repeated runs, best in brackets\n\n");
    bench_probes(c);
    bench_pool(c);
    bench_gemv(c, types);
    bench_gemm(c, types);
    bench_attention(c);
    if (o.json) std::printf("%s\n", c.out.dump(2).c_str());
}

}  // namespace troupe::cli
