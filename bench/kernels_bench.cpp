// troupe-bench-kernels: Google Benchmark micro-benchmarks of the kernels (fixed seeds).
//   build/bin/troupe-bench-kernels --benchmark_format=json
// Threads come from TROUPE_THREADS (default 2). Matrix and attention benchmarks cycle through
// copies of the weights / the KV cache larger than the last-level cache
// (TROUPE_WORKING_SET_MB, default 256), as decode reads the model and each layer's cache from
// DRAM; the copies are in huge pages where the OS has them (LargeBuffer, kv::KvStorage), as
// the engine's interleaved weights and KV cache are (the engine reads the file layouts of
// BM_Matmul from the model file's mapping). Counters: bytes_per_second (weights), FLOPS (2
// per multiply-add). `troupe bench kernels` prints the same figures against the machine
// limits.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "kernels/matmul_act.h"
#include "kernels/matmul_kernels.h"
#include "kernels/ops.h"
#include "kernels/probes.h"
#include "kernels/region.h"
#include "kernels/thread_pool.h"
#include "kernels/weight_layout.h"
#include "kv/kv_storage.h"
#include "tensor/quant_ref.h"
#include "util/large_buffer.h"

namespace troupe {
namespace {

int env_int(const char* name, int fallback) {
    const char* v = std::getenv(name);
    return v ? std::atoi(v) : fallback;
}

ThreadPool& pool() {
    static ThreadPool p(env_int("TROUPE_THREADS", 2));
    return p;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// n_out rows of n_in random values quantised to `type`, in the file layout.
std::vector<uint8_t> random_rows(DType type, int64_t n_out, int64_t n_in, uint32_t seed) {
    const size_t rb = row_bytes(type, n_in);
    const auto f = random_floats(size_t(n_in) * size_t(n_out), seed);
    std::vector<uint8_t> rows(rb * size_t(n_out));
    for (int64_t o = 0; o < n_out; ++o)
        quantize_row(type, f.data() + o * n_in, rows.data() + size_t(o) * rb, n_in);
    return rows;
}

// One quantised matrix copied past the working-set size; next() cycles through the copies.
class Weights {
  public:
    Weights(DType type, int64_t n_in, int64_t n_out) {
        const size_t rb = row_bytes(type, n_in);
        bytes_ = rb * size_t(n_out);
        n_ =
            std::max<size_t>(2, (size_t(env_int("TROUPE_WORKING_SET_MB", 256)) << 20) / bytes_ + 1);
        data_ = LargeBuffer(bytes_ * n_);
        const std::vector<uint8_t> rows = random_rows(type, n_out, n_in, 1);
        for (size_t c = 0; c < n_; ++c) std::memcpy(data_.data() + c * bytes_, rows.data(), bytes_);
        w_ = ops::Weight{type, n_in, n_out, data_.data(), rb};
    }
    ops::Weight next() {
        ops::Weight w = w_;
        w.data = data_.data() + (i_++ % n_) * bytes_;
        return w;
    }
    size_t bytes() const { return bytes_; }

  private:
    LargeBuffer data_;
    size_t bytes_ = 0, n_ = 0, i_ = 0;
    ops::Weight w_;
};

// args: type, n_out, n_in, tokens
void BM_Matmul(benchmark::State& state) {
    const auto type = DType(state.range(0));
    const int64_t n_out = state.range(1), n_in = state.range(2), n_tokens = state.range(3);
    Weights w(type, n_in, n_out);
    const auto x = random_floats(size_t(n_in * n_tokens), 2);
    std::vector<float> y(size_t(n_out * n_tokens));
    for (auto _ : state) ops::matmul(w.next(), x.data(), y.data(), n_tokens, &pool());
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(w.bytes()));
    state.counters["FLOPS"] =
        benchmark::Counter(2.0 * double(n_in * n_out * n_tokens) * double(state.iterations()),
                           benchmark::Counter::kIsRate);
    state.SetLabel(type_name(type));
}

void MatmulArgs(benchmark::internal::Benchmark* b) {
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::F16, DType::BF16, DType::F32}) {
        for (auto [o, i] : {std::pair{576, 576}, {576, 1536}, {1536, 576}, {32000, 576}})
            b->Args({int64_t(t), o, i, 1});
        for (int64_t n : {2, 4, 8, 16, 64, 512}) b->Args({int64_t(t), 1536, 576, n});
    }
    for (DType t : {DType::Q4_K, DType::Q6_K}) {
        b->Args({int64_t(t), 576, 1536, 1});
        for (int64_t n : {2, 4, 8, 16, 64, 512}) b->Args({int64_t(t), 576, 1536, n});
    }
}
BENCHMARK(BM_Matmul)
    ->Apply(MatmulArgs)
    ->ArgNames({"type", "n_out", "n_in", "tokens"})
    ->UseRealTime();

// QKV of one decode step: one fused call vs three.
void BM_MatmulQkv(benchmark::State& state) {
    const bool fused = state.range(0) != 0;
    Weights q(DType::Q8_0, 576, 576), k(DType::Q8_0, 576, 192), v(DType::Q8_0, 576, 192);
    const auto x = random_floats(576, 3);
    std::vector<float> yq(576), yk(192), yv(192);
    float* ys[3] = {yq.data(), yk.data(), yv.data()};
    for (auto _ : state) {
        const ops::Weight ws[3] = {q.next(), k.next(), v.next()};
        if (fused) {
            ops::matmul_many(ws, 3, x.data(), ys, 1, &pool());
        } else {
            for (int i = 0; i < 3; ++i) ops::matmul(ws[i], x.data(), ys[i], 1, &pool());
        }
    }
    state.SetBytesProcessed(int64_t(state.iterations()) *
                            int64_t(q.bytes() + k.bytes() + v.bytes()));
}
BENCHMARK(BM_MatmulQkv)->Arg(0)->Arg(1)->ArgName("fused")->UseRealTime();

// A forward pass's worth of products in one region: 134 interleaved Q8_0 matrices of one
// shape, gate/up's 1536x576 or down's 576x1536 (the 135M model's bytes), one after the other,
// each participant prefetching its share of the next one while it waits (as the forward pass
// does), for `tokens` tokens. resident = 1:
// the same matrix every time (in L2: the arithmetic alone); 0: 134 copies (streamed from the
// last-level cache or DRAM). Time per matrix; streamed against resident shows how far the
// weight stream and the arithmetic overlap (src/kernels/README.md).
void BM_MatmulSequence(benchmark::State& state) {
    const int64_t n_tokens = state.range(0);
    const bool resident = state.range(1) != 0;
    constexpr int kMats = 134;
    const int64_t n_out = state.range(2), n_in = state.range(3);
    const size_t rb = row_bytes(DType::Q8_0, n_in), bytes = rb * size_t(n_out);
    const std::vector<uint8_t> file = random_rows(DType::Q8_0, n_out, n_in, 5);
    const ops::Weight w{DType::Q8_0, n_in, n_out, file.data(), rb};
    const LargeBuffer copies(bytes * (resident ? 1 : kMats));
    std::vector<ops::Weight> ws;
    for (int c = 0; c < kMats; ++c)
        ws.push_back(ops::interleave(w, copies.data() + (resident ? 0 : size_t(c)) * bytes));
    const auto x = random_floats(size_t(n_in * n_tokens), 6);
    std::vector<float> y(size_t(n_out * n_tokens));
    for (auto _ : state)
        run_region(&pool(), [&](Region& r) {
            for (int m = 0; m < kMats; ++m) {
                if (m + 1 < kMats) ops::prefetch_next_matmul(r, &ws[size_t(m) + 1], 1, n_tokens);
                ops::matmul(r, ws[size_t(m)], {.x = x.data()}, y.data(), n_tokens);
            }
        });
    state.counters["per_matrix"] = benchmark::Counter(  // seconds, printed with SI prefixes
        double(state.iterations()) * kMats,
        benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    state.SetBytesProcessed(int64_t(state.iterations()) * kMats * int64_t(bytes));
}
BENCHMARK(BM_MatmulSequence)
    ->Args({1, 0, 1536, 576})
    ->Args({1, 1, 1536, 576})
    ->Args({8, 0, 1536, 576})
    ->Args({8, 1, 1536, 576})
    ->Args({1, 0, 576, 1536})
    ->Args({1, 1, 576, 1536})
    ->Args({8, 0, 576, 1536})
    ->Args({8, 1, 576, 1536})
    ->ArgNames({"tokens", "resident", "n_out", "n_in"})
    ->UseRealTime();

// The products of a forward pass of the 135M model's shape as the pass runs them: per layer
// Q/K/V in one call (576, 192, 192 rows of 576), wo (576 x 576), gate and up in one call (1536
// x 576 each) and down (576 x 1536), 30 layers of interleaved Q8_0 in one region (113 MB: the
// model's weights less the output matrix, from the last-level cache or DRAM), each participant
// prefetching its share of the next call while it waits. No attention, norms or residual:
// bytes_per_second against the read probe is how close the products alone stream to it
// (`troupe bench model` adds everything else).
void BM_LayerProducts(benchmark::State& state) {
    const int64_t n_tokens = state.range(0);
    constexpr int kLayers = 30, kMats = 7;
    constexpr int64_t kShape[kMats][2] = {{576, 576},  {192, 576},  {192, 576}, {576, 576},
                                          {1536, 576}, {1536, 576}, {576, 1536}};  // n_out, n_in
    size_t at[kMats + 1] = {};
    for (int m = 0; m < kMats; ++m)
        at[m + 1] = at[m] + row_bytes(DType::Q8_0, kShape[m][1]) * size_t(kShape[m][0]);
    const size_t layer_bytes = at[kMats];
    const LargeBuffer copies(layer_bytes * kLayers);
    std::vector<std::array<ops::Weight, kMats>> layers(kLayers);
    for (int m = 0; m < kMats; ++m) {
        const int64_t n_out = kShape[m][0], n_in = kShape[m][1];
        const std::vector<uint8_t> file = random_rows(DType::Q8_0, n_out, n_in, uint32_t(7 + m));
        const ops::Weight w{DType::Q8_0, n_in, n_out, file.data(), row_bytes(DType::Q8_0, n_in)};
        for (int l = 0; l < kLayers; ++l)
            layers[size_t(l)][size_t(m)] =
                ops::interleave(w, copies.data() + size_t(l) * layer_bytes + at[m]);
    }
    const auto x = random_floats(size_t(1536 * n_tokens), 6);
    std::vector<float> y[3];
    for (auto& v : y) v.resize(size_t(1536 * n_tokens));
    float* const ys[3] = {y[0].data(), y[1].data(), y[2].data()};
    for (auto _ : state)
        run_region(&pool(), [&](Region& r) {
            for (int l = 0; l < kLayers; ++l) {
                const auto& w = layers[size_t(l)];
                ops::prefetch_next_matmul(r, &w[3], 1, n_tokens);
                ops::matmul_many(r, &w[0], 3, {.x = x.data()}, ys, n_tokens);
                ops::prefetch_next_matmul(r, &w[4], 2, n_tokens);
                ops::matmul(r, w[3], {.x = x.data()}, ys[0], n_tokens);
                ops::prefetch_next_matmul(r, &w[6], 1, n_tokens);
                ops::matmul_many(r, &w[4], 2, {.x = x.data()}, ys, n_tokens);
                ops::prefetch_next_matmul(r, &layers[size_t((l + 1) % kLayers)][0], 3, n_tokens);
                ops::matmul(r, w[6], {.x = x.data()}, ys[0], n_tokens);
            }
        });
    state.SetBytesProcessed(int64_t(state.iterations()) * kLayers * int64_t(layer_bytes));
    // The same bytes read by the weights probe right after, as one free-running read and with
    // a barrier after each of the pass's steps (Q/K/V, wo, gate + up, down): the products'
    // rate as a fraction of the first (what `troupe bench model` divides by), and how much of
    // the gap the steps alone account for.
    std::vector<kernels::ByteRange> steps;
    for (int l = 0; l < kLayers; ++l) {
        const uint8_t* base = copies.data() + size_t(l) * layer_bytes;
        for (auto [m0, m1] : {std::pair{0, 3}, {3, 4}, {4, 6}, {6, 7}})
            steps.push_back({base + at[m0], at[m1] - at[m0]});
    }
    const double free_gbps = kernels::probe_read_ranges(&pool(), steps, 5).best;
    const double stepped_gbps = kernels::probe_read_ranges(&pool(), steps, 5, true).best;
    state.counters["probe_GBps"] = free_gbps;
    state.counters["stepped_probe_GBps"] = stepped_gbps;
    const double gb = double(state.iterations()) * kLayers * double(layer_bytes) * 1e-9;
    state.counters["products_GBps"] = benchmark::Counter(gb, benchmark::Counter::kIsRate);
    state.counters["of_probe"] = benchmark::Counter(gb / free_gbps, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_LayerProducts)->Arg(1)->Arg(8)->ArgName("tokens")->UseRealTime();

// The engine's paged cache (kv::KvStorage; F16 or BF16) with the 135M model's shape (30 layers, 3
// kv heads, head_dim 64, blocks of 16), copied past the working-set size like the weights: next()
// cycles through the copies' layer 0, as a forward pass finds each layer's cache evicted by the
// weights read since its last visit. Only layer 0 is written (the rest of each copy is never
// touched, so never resident).
class Kv {
  public:
    Kv(int n_blocks, DType type) {
        kv::KvGeometry g;
        g.n_layer = 30;
        g.n_kv_head = 3;
        g.head_dim = 64;
        g.block_size = 16;
        g.type = type;
        const size_t layer_bytes =  // K and V of layer 0
            g.bytes_per_block() / size_t(g.n_layer) * size_t(n_blocks);
        const size_t n = std::max<size_t>(
            2, (size_t(env_int("TROUPE_WORKING_SET_MB", 256)) << 20) / layer_bytes + 1);
        std::mt19937 rng(4);
        std::vector<uint16_t> values(g.head_bytes() / 2);
        for (uint16_t& h : values) h = uint16_t(0x3000 + rng() % 0x0c00);
        for (size_t c = 0; c < n; ++c) {
            copies_.emplace_back(g, n_blocks);
            for (int b = 0; b < n_blocks; ++b)
                for (int i = 0; i < 2 * g.n_kv_head; ++i)  // layer 0's pieces: K and V heads
                    std::memcpy(copies_.back().piece(b, i), values.data(), g.head_bytes());
        }
    }
    ops::KvLayerView next() { return copies_[i_++ % copies_.size()].layer_view(0); }

  private:
    std::vector<kv::KvStorage> copies_;
    size_t i_ = 0;
};

// args: sequences, context (tokens before the query), query rows per sequence, shared prefix
// tokens (0: every sequence has its own blocks), grouped (use the shared form), bf16 (a BF16
// cache instead of F16; the bits, 0x3000 + a few, are normal numbers in both)
void BM_Attention(benchmark::State& state) {
    const int n_seqs = int(state.range(0)), ctx = int(state.range(1)), n_q = int(state.range(2));
    const int prefix = int(state.range(3));
    const bool grouped = state.range(4) != 0;
    // Blocks: the shared prefix's, then each sequence's own.
    const int per_seq = (ctx + n_q + 15) / 16 - prefix / 16;
    Kv kv(prefix / 16 + n_seqs * per_seq, state.range(5) ? DType::BF16 : DType::F16);
    std::vector<std::vector<int32_t>> tables(static_cast<size_t>(n_seqs));
    std::vector<std::vector<float>> q(static_cast<size_t>(n_seqs)), o(static_cast<size_t>(n_seqs));
    std::vector<ops::AttentionSeq> seqs;
    int32_t next = 0;
    std::vector<int32_t> shared;
    for (int b = 0; b < prefix / 16; ++b) shared.push_back(next++);
    for (int s = 0; s < n_seqs; ++s) {
        tables[size_t(s)] = shared;
        while (int(tables[size_t(s)].size()) * 16 < ctx + n_q)
            tables[size_t(s)].push_back(next++);
        q[size_t(s)] = random_floats(size_t(n_q) * 9 * 64, uint32_t(s));
        o[size_t(s)].resize(q[size_t(s)].size());
        seqs.push_back(
            {tables[size_t(s)].data(), ctx, n_q, q[size_t(s)].data(), o[size_t(s)].data()});
    }
    const auto groups = grouped ? ops::find_shared_prefixes(seqs.data(), n_seqs, 16)
                                : std::vector<ops::SharedPrefixGroup>{};
    for (auto _ : state)
        ops::attention_shared(kv.next(), seqs.data(), n_seqs, groups, 9, 0.125f, &pool());
    // 2 x head_dim multiply-adds (scores and values) per query row, head and visible key.
    double pairs = 0;
    for (int r = 0; r < n_q; ++r) pairs += double(n_seqs) * 9 * (ctx + r + 1);
    state.counters["GFLOPs"] = benchmark::Counter(
        4.0 * 64 * pairs * double(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Attention)
    ->Args({1, 64, 1, 0, 0, 0})
    ->Args({1, 512, 1, 0, 0, 0})
    ->Args({1, 1024, 1, 0, 0, 0})
    ->Args({1, 4096, 1, 0, 0, 0})
    ->Args({8, 512, 1, 0, 0, 0})
    ->Args({8, 1008, 1, 1008, 0, 0})
    ->Args({8, 1008, 1, 1008, 1, 0})
    ->Args({8, 1200, 1, 1104, 1, 0})
    ->Args({7, 1104, 57, 1104, 1, 0})
    // troupe bench model's batched decode halfway: a 512-token prompt and 64 tokens each
    ->Args({1, 576, 1, 0, 0, 0})
    ->Args({8, 576, 1, 512, 1, 0})
    // ... as the engine shares it: the prompt's last block is each sequence's own
    ->Args({8, 576, 1, 496, 1, 0})
    ->Args({8, 520, 1, 512, 1, 0})
    ->Args({1, 0, 512, 0, 0, 0})
    ->Args({1, 0, 1400, 0, 0, 0})
    // the same with a BF16 cache (--kv-type bf16)
    ->Args({1, 576, 1, 0, 0, 1})
    ->Args({8, 576, 1, 496, 1, 1})
    ->Args({8, 1008, 1, 1008, 1, 1})
    ->Args({1, 0, 512, 0, 0, 1})
    ->ArgNames({"seqs", "ctx", "rows", "shared", "grouped", "bf16"})
    ->UseRealTime();

void BM_PoolRun(benchmark::State& state) {
    for (auto _ : state) pool().run(pool().size(), [](int64_t, int) {});
}
BENCHMARK(BM_PoolRun)->UseRealTime();

void BM_RmsNorm(benchmark::State& state) {
    const auto x = random_floats(576, 5), w = random_floats(576, 6);
    std::vector<float> y(576);
    for (auto _ : state) ops::rms_norm(x.data(), w.data(), y.data(), 1, 576, 1e-5f);
}
BENCHMARK(BM_RmsNorm);

// A token's conversion to 8-bit activations (Q8_0 blocks), as a product's convert step does
// it: args n values, swiglu first (down's input) or not.
void BM_ConvertQ8(benchmark::State& state) {
    const int64_t n = state.range(0);
    const auto x = random_floats(size_t(n), 5), up = random_floats(size_t(n), 6);
    std::vector<float> tmp(static_cast<size_t>(n));
    const ops::ActLayout l = ops::act_layout(DType::Q8_0, n);
    std::vector<uint8_t> act(l.row_bytes);
    for (auto _ : state) {
        const float* in = x.data();
        if (state.range(1)) {
            ops::swiglu(x.data(), up.data(), tmp.data(), n);
            in = tmp.data();
        }
        ops::kern::quantize_act_rows(in, 0, 1, act.data(), l);
        benchmark::DoNotOptimize(act.data());
    }
}
BENCHMARK(BM_ConvertQ8)
    ->Args({576, 0})
    ->Args({1536, 0})
    ->Args({1536, 1})
    ->ArgNames({"n", "swiglu"});

void BM_ReadBandwidth(benchmark::State& state) {
    for (auto _ : state) {
        const auto r = kernels::probe_read_bandwidth(&pool(), size_t(256) << 20, 3);
        state.counters["GBps"] = r.median;
    }
}
BENCHMARK(BM_ReadBandwidth)->Iterations(1)->UseRealTime();

}  // namespace
}  // namespace troupe

BENCHMARK_MAIN();
