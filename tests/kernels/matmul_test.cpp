// Matrix products of every weight type against the scalar reference (ops::ref::matmul) on
// every target, for 1 to many tokens, odd shapes and unaligned weight and activation rows.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/matmul_act.h"
#include "kernels/ops.h"
#include "kernels/ops_ref.h"
#include "kernels/region.h"
#include "kernels/thread_pool.h"
#include "kernels/weight_layout.h"
#include "tensor/quant_ref.h"
#include "util/error.h"

namespace troupe {
namespace {

using test::for_each_target;
using test::OffsetBuffer;
using test::random_floats;

// A weight matrix of `type` quantised from random floats, stored `offset` elements (2 bytes
// for the 16-bit and block types, whose fields are 16-bit; 4 for F32) past a 64-byte
// boundary: model files align tensors, but rows of odd-sized blocks are not vector-aligned.
struct TestWeight {
    std::vector<uint8_t> storage;
    ops::Weight w;
    std::vector<float> dequant;  // [n_out, n_in]
};

TestWeight make_weight(DType type, int64_t n_in, int64_t n_out, uint32_t seed, size_t offset) {
    TestWeight t;
    const size_t rb = row_bytes(type, n_in);
    t.storage.resize(rb * size_t(n_out) + 64 + 4 * offset);
    uint8_t* base = t.storage.data();
    base +=
        (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64 + offset * (type == DType::F32 ? 4 : 2);
    const auto f = random_floats(size_t(n_in * n_out), seed, -1.0f, 1.0f);
    for (int64_t o = 0; o < n_out; ++o)
        quantize_row(type, f.data() + o * n_in, base + size_t(o) * rb, n_in);
    t.w = ops::Weight{type, n_in, n_out, base, rb};
    t.dequant.resize(f.size());
    for (int64_t o = 0; o < n_out; ++o)
        dequantize_row(type, base + size_t(o) * rb, t.dequant.data() + o * n_in, n_in);
    return t;
}

// The kernels compute the same per-block integer (or 16-bit float) products as the
// reference and differ only in the order of float additions: bound the error by the float
// rounding of a sum of n_in terms of magnitude sum_i |w_i x_i|.
void expect_matmul_near(const TestWeight& tw, const std::vector<float>& x, const float* got,
                        const float* want, int64_t n_tokens) {
    const ops::Weight& w = tw.w;
    for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t o = 0; o < w.n_out; ++o) {
            double mag = 0;
            for (int64_t i = 0; i < w.n_in; ++i)
                mag += std::fabs(double(tw.dequant[size_t(o * w.n_in + i)]) *
                                 x[size_t(t * w.n_in + i)]);
            // Activation quantisation error is shared (same values); sums of up to n_in terms.
            const double tol = 1e-6 + mag * 4e-7 * (8 + std::sqrt(double(w.n_in)));
            const size_t at = size_t(t * w.n_out + o);
            if (!(std::fabs(double(got[at]) - want[at]) <= tol)) {
                ADD_FAILURE() << type_name(w.type) << " n_in " << w.n_in << " n_out " << w.n_out
                              << " tokens " << n_tokens << ": y[" << t << "," << o
                              << "] = " << got[at] << ", reference " << want[at] << ", tolerance "
                              << tol;
                return;
            }
        }
}

// One weight matrix and input, the reference output computed once, then every target.
void check_matmul(DType type, int64_t n_in, int64_t n_out, int64_t n_tokens, ThreadPool* pool,
                  size_t offset) {
    const TestWeight tw = make_weight(type, n_in, n_out, uint32_t(n_in * 7 + n_out), offset);
    const auto x = random_floats(size_t(n_in * n_tokens), uint32_t(n_tokens + n_in), -2.0f, 2.0f);
    std::vector<float> want(static_cast<size_t>(n_out * n_tokens));
    ops::ref::matmul(tw.w, x.data(), want.data(), n_tokens);
    OffsetBuffer<float> xb(x.size(), offset % 4), y(want.size(), 1);
    xb.assign(x);
    for_each_target([&] {
        ops::matmul(tw.w, xb.data(), y.data(), n_tokens, pool);
        expect_matmul_near(tw, x, y.data(), want.data(), n_tokens);
    });
}

const DType kTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                        DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                        DType::Q4_K, DType::Q5_K, DType::Q6_K};

TEST(Matmul, MatchesReferenceOnEveryTarget) {
    ThreadPool pool(2);
    for (DType type : kTypes) {
        const int64_t bs = traits(type).block_size == 1 ? 32 : traits(type).block_size;
        for (int64_t n_in : {bs, 2 * bs, 3 * bs, bs == QK_K ? int64_t(1536) : int64_t(576)})
            for (int64_t n_out : {1, 3, 4, 5, 17, 33, 64})
                for (int64_t n_tokens : {1, 2, 3, 5})
                    check_matmul(type, n_in, n_out, n_tokens, n_out % 2 ? &pool : nullptr,
                                 size_t(n_out % 3));
    }
}

TEST(Matmul, PlainTypesAnyLength) {
    // F32, F16 and BF16 rows may have any length (block size 1).
    ThreadPool pool(2);
    for (DType type : {DType::F32, DType::F16, DType::BF16})
        for (int64_t n_in : {1, 3, 7, 15, 16, 17, 31, 33, 47, 65, 100})
            for (int64_t n_tokens : {2, 5}) check_matmul(type, n_in, 9, n_tokens, &pool, 2);
}

TEST(Matmul, BatchedShapesOfTheModel) {
    ThreadPool pool(2);
    // Matrix-matrix kernels: whole and partial token vectors (16 tokens on AVX-512), tiles,
    // and enough tokens for the float types' packed path (4 vectors).
    for (DType type : kTypes)
        for (int64_t n_tokens : {4, 8, 16, 37, 70})
            check_matmul(type, 256 * 3, 81, n_tokens, &pool, 0);
}

// Several matrices on one input: Q, K and V shapes of one type (one fused dispatch), and a
// mix of types whose activation types differ (computed one after the other).
TEST(Matmul, ManyMatricesOnOneInput) {
    ThreadPool pool(2);
    const int64_t n_in = 512;
    const std::vector<std::vector<std::pair<DType, int64_t>>> sets = {
        {{DType::Q8_0, 64}, {DType::Q8_0, 21}, {DType::Q8_0, 21}},
        {{DType::Q4_K, 40}, {DType::Q6_K, 17}},                  // both Q8_K activations
        {{DType::Q4_0, 33}, {DType::Q4_K, 8}, {DType::F16, 5}},  // three activation types
    };
    for (const auto& set : sets)
        for (int64_t n_tokens : {1, 3, 9}) {
            std::vector<TestWeight> tws;
            std::vector<ops::Weight> ws;
            for (const auto& [type, n_out] : set)
                tws.push_back(make_weight(type, n_in, n_out, uint32_t(n_out), 1));
            for (const TestWeight& tw : tws) ws.push_back(tw.w);
            const auto x = random_floats(size_t(n_in * n_tokens), 5, -2.0f, 2.0f);
            std::vector<std::vector<float>> want(ws.size()), got(ws.size());
            std::vector<float*> ys;
            for (size_t i = 0; i < ws.size(); ++i) {
                want[i].resize(size_t(ws[i].n_out * n_tokens));
                got[i].assign(want[i].size(), -1.0f);
                ops::ref::matmul(ws[i], x.data(), want[i].data(), n_tokens);
                ys.push_back(got[i].data());
            }
            for_each_target([&] {
                ops::matmul_many(ws.data(), int(ws.size()), x.data(), ys.data(), n_tokens, &pool);
                for (size_t i = 0; i < ws.size(); ++i)
                    expect_matmul_near(tws[i], x, got[i].data(), want[i].data(), n_tokens);
            });
        }
}

// The quantised types sum in one canonical order on every path (matrix-vector for 1-3
// tokens, packed rows for batched decode, the matrix-matrix tiles of prefill): a token's
// outputs are bit-identical whether it is computed alone or as a row of any batch, with or
// without threads. (The K-quants' matrix-vector kernels once kept partial sums in vector
// lanes: a token in a batch of 16 or more got other bits than alone.)
TEST(Matmul, QuantisedTypesAreBatchInvariant) {
    ThreadPool pool(2);
    for (DType type : {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q4_1, DType::Q5_1, DType::Q4_K,
                       DType::Q5_K, DType::Q6_K})
        for (int64_t n_in : {32, 256, 288, 576, 1536}) {
            if (n_in % traits(type).block_size != 0) continue;
            const int64_t n_out = 83;
            const TestWeight tw = make_weight(type, n_in, n_out, uint32_t(n_in + 3), 1);
            const int64_t max_tokens = 40;
            const auto x = random_floats(size_t(n_in * max_tokens), 9, -2.0f, 2.0f);
            for_each_target([&] {
                std::vector<float> alone(size_t(n_out * max_tokens));
                for (int64_t t = 0; t < max_tokens; ++t)
                    ops::matmul(tw.w, x.data() + t * n_in, alone.data() + t * n_out, 1, nullptr);
                for (int64_t n_tokens : {2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 40}) {
                    std::vector<float> batch(size_t(n_out * n_tokens));
                    ops::matmul(tw.w, x.data(), batch.data(), n_tokens, &pool);
                    for (size_t i = 0; i < batch.size(); ++i)
                        if (batch[i] != alone[i]) {
                            ADD_FAILURE()
                                << type_name(type) << " n_in " << n_in << " tokens " << n_tokens
                                << ": y[" << i / size_t(n_out) << "," << i % size_t(n_out)
                                << "] = " << batch[i] << " in the batch, " << alone[i] << " alone";
                            return;
                        }
                }
            });
        }
}

// Inside a region, the input transforms (RMSNorm, SwiGLU) and the residual add give the
// values of the separate ops bit for bit, on the matrix-vector and matrix-matrix paths.
TEST(Matmul, FusedInputsAndResidualEqualSeparateOps) {
    ThreadPool pool(2);
    for (DType type : {DType::Q8_0, DType::Q4_K, DType::F16}) {
        const int64_t n_in = 512, n_out = 70;
        const TestWeight tw = make_weight(type, n_in, n_out, 11, 0);
        for (int64_t n_tokens : {1, 3, 8, 21}) {
            const auto x = random_floats(size_t(n_in * n_tokens), 1, -2.0f, 2.0f);
            const auto up = random_floats(x.size(), 2, -2.0f, 2.0f);
            const auto norm = random_floats(size_t(n_in), 3, 0.5f, 1.5f);
            const auto resid = random_floats(size_t(n_out * n_tokens), 4, -1.0f, 1.0f);
            for_each_target([&] {
                std::vector<float> tmp(x.size()), want(resid.size()), got(resid.size());
                // RMSNorm on the way in.
                ops::rms_norm(x.data(), norm.data(), tmp.data(), n_tokens, n_in, 1e-5f);
                ops::matmul(tw.w, tmp.data(), want.data(), n_tokens, &pool);
                run_region(&pool, [&](Region& r) {
                    ops::matmul(r, tw.w, {.x = x.data(), .norm = norm.data(), .eps = 1e-5f},
                                got.data(), n_tokens);
                });
                EXPECT_EQ(got, want) << type_name(type) << " norm, " << n_tokens << " tokens";
                // SwiGLU on the way in, and the residual add.
                ops::swiglu(x.data(), up.data(), tmp.data(), n_in * n_tokens);
                ops::matmul(tw.w, tmp.data(), want.data(), n_tokens, &pool);
                std::vector<float> want_sum = resid, got_sum = resid;
                ops::add_inplace(want_sum.data(), want.data(), n_out * n_tokens);
                run_region(&pool, [&](Region& r) {
                    ops::matmul(r, tw.w, {.x = x.data(), .up = up.data()}, got.data(), n_tokens,
                                got_sum.data());
                });
                EXPECT_EQ(got, want) << type_name(type) << " swiglu, " << n_tokens << " tokens";
                EXPECT_EQ(got_sum, want_sum) << type_name(type) << " residual";
            });
        }
    }
}

// The epilogue hook (ops::MatmulEpilogue): every row of every matrix in exactly one task
// range, ranges on multiples of row_multiple, the hook seeing the range's final outputs (the
// residual added); over the paths: matrix-vector, interleaved, packed, one matrix at a time
// (mixed types).
TEST(Matmul, EpilogueSeesEveryTaskRangeOnceWhenComputed) {
    ThreadPool pool(2);
    struct Log {
        std::mutex mu;
        std::vector<std::array<int64_t, 3>> calls;  // {m, o0, o1}
        const std::vector<float>* ys[2];
        const std::vector<float>* sums[2];
        int64_t n_tokens = 0, n_out[2] = {};
        bool values_ok = true;
    };
    const auto after = [](void* ctx, int m, int64_t o0, int64_t o1) {
        auto& log = *static_cast<Log*>(ctx);
        std::lock_guard<std::mutex> lock(log.mu);
        log.calls.push_back({m, o0, o1});
        // Final values: the residual sum is y + 1 wherever y was written (resid starts at 1).
        for (int64_t t = 0; t < log.n_tokens; ++t)
            for (int64_t o = o0; o < o1; ++o) {
                const size_t at = size_t(t * log.n_out[m] + o);
                if ((*log.sums[m])[at] != (*log.ys[m])[at] + 1.0f) log.values_ok = false;
            }
    };
    for (auto [t0, t1] : {std::pair{DType::Q8_0, DType::Q8_0},
                          {DType::Q4_K, DType::Q4_K},
                          {DType::Q8_0, DType::F16}}) {
        for (bool interleave : {false, true}) {
            if (interleave && t0 != t1) continue;
            const int64_t n_in = 256, n_out[2] = {192, 128};
            TestWeight w0 = make_weight(t0, n_in, n_out[0], 5, 0);
            TestWeight w1 = make_weight(t1, n_in, n_out[1], 6, 0);
            std::vector<uint8_t> il0(w0.w.row_stride * size_t(n_out[0]));
            std::vector<uint8_t> il1(w1.w.row_stride * size_t(n_out[1]));
            ops::Weight ws[2] = {w0.w, w1.w};
            if (interleave) {
                if (!ops::can_interleave(ws[0])) continue;
                ws[0] = ops::interleave(w0.w, il0.data());
                ws[1] = ops::interleave(w1.w, il1.data());
            }
            for (int64_t row_multiple : {int64_t(1), int64_t(2), int64_t(64)}) {
                for (int64_t n_tokens : {1, 3, 8, 21, 40}) {
                    const auto x = random_floats(size_t(n_in * n_tokens), 9, -2.0f, 2.0f);
                    // NaN until computed: a hook run before its rows were would see it.
                    const float nan = std::numeric_limits<float>::quiet_NaN();
                    std::vector<float> y0(size_t(n_out[0] * n_tokens), nan);
                    std::vector<float> y1(size_t(n_out[1] * n_tokens), nan);
                    std::vector<float> s0(y0.size(), 1.0f), s1(y1.size(), 1.0f);
                    Log log;
                    log.ys[0] = &y0, log.ys[1] = &y1, log.sums[0] = &s0, log.sums[1] = &s1;
                    log.n_tokens = n_tokens, log.n_out[0] = n_out[0], log.n_out[1] = n_out[1];
                    const ops::MatmulEpilogue epi{+after, &log, row_multiple};
                    float* const ys[2] = {y0.data(), y1.data()};
                    float* const sums[2] = {s0.data(), s1.data()};
                    run_region(&pool, [&](Region& r) {
                        ops::matmul_many(r, ws, 2, {.x = x.data()}, ys, n_tokens, sums, &epi);
                    });
                    SCOPED_TRACE(::testing::Message()
                                 << type_name(t0) << "/" << type_name(t1) << " interleaved "
                                 << interleave << " multiple " << row_multiple << " tokens "
                                 << n_tokens);
                    EXPECT_TRUE(log.values_ok);
                    for (int m = 0; m < 2; ++m) {
                        std::vector<int> covered(size_t(n_out[m]), 0);
                        for (const auto& c : log.calls) {
                            if (c[0] != m) continue;
                            EXPECT_EQ(c[1] % row_multiple, 0);
                            EXPECT_EQ(c[2] % row_multiple, 0);
                            for (int64_t o = c[1]; o < c[2]; ++o) covered[size_t(o)]++;
                        }
                        for (int64_t o = 0; o < n_out[m]; ++o)
                            ASSERT_EQ(covered[size_t(o)], 1) << "matrix " << m << " row " << o;
                    }
                }
            }
        }
    }
}

// The activation conversion is the reference's, byte for byte (same scales, same rounding
// of halves, same clamping), on inputs with ties, zeros, large and tiny values.
TEST(Matmul, ActivationConversionIsBitExact) {
    std::vector<float> x = random_floats(1024, 77, -3.0f, 3.0f);
    for (int i = 0; i < 32; ++i) x[size_t(i)] = 0.0f;                    // an all-zero block
    for (int i = 32; i < 64; ++i) x[size_t(i)] = float(i - 48) * 0.5f;   // exact halves
    for (int i = 64; i < 96; ++i) x[size_t(i)] = float(i % 7) * 1e-30f;  // tiny
    x[100] = -5e4f;
    x[300] = 3e4f;
    x[301] = -3e4f;  // a tie in magnitude: the first wins for Q8_K
    for (DType act : {DType::Q8_0, DType::Q8_1, DType::Q8_K, DType::F16, DType::BF16, DType::F32}) {
        const int64_t n = act == DType::Q8_K ? 1024 : 992;
        std::vector<uint8_t> want(row_bytes(act, n)), got(want.size());
        quantize_row(act, x.data(), want.data(), n);
        for_each_target([&] {
            std::fill(got.begin(), got.end(), 0xAB);
            ops::convert_activations_for_test(act, x.data(), n, got.data());
            EXPECT_EQ(got, want) << type_name(act);
        });
    }
}

TEST(Matmul, UnsupportedTypeIsAnError) {
    std::vector<uint8_t> data(256);
    const ops::Weight w{DType::IQ2_XXS, 256, 1, data.data(), 66};
    std::vector<float> x(256), y(1);
    EXPECT_THROW(ops::matmul(w, x.data(), y.data(), 1, nullptr), Error);
}

}  // namespace
}  // namespace troupe
