// The Interleaved16 layout of Q8_0 and Q4_0 weights (kernels/weight_layout.h): it holds the file's
// rows exactly, and every product over it gives the bits of the same product over the file layout
// (one canonical order of the float steps), for any number of tokens, on every target, with
// or without threads, alone or fused with other matrices, and through the region forms. Q5_0
// weights widened to Q8_0 in it give the bits of the Q5_0 file layout.
#include "kernels/weight_layout.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernel_test_util.h"
#include "kernels/amx.h"
#include "kernels/ops.h"
#include "kernels/ops_ref.h"
#include "kernels/thread_pool.h"
#include "tensor/quant_ref.h"

namespace troupe {
namespace {

using test::for_each_target;
using test::random_floats;

const DType kTypes[] = {DType::Q8_0, DType::Q4_0};

// A matrix of `type` from random floats in the file layout, and its interleaved copy.
struct Pair {
    std::vector<uint8_t> file_bytes, interleaved_bytes;
    ops::Weight file, interleaved;
};

Pair make_pair(DType type, int64_t n_in, int64_t n_out, uint32_t seed) {
    Pair p;
    const size_t rb = row_bytes(type, n_in);
    p.file_bytes.resize(rb * size_t(n_out));
    const auto f = random_floats(size_t(n_in * n_out), seed, -1.0f, 1.0f);
    for (int64_t o = 0; o < n_out; ++o)
        quantize_row(type, f.data() + o * n_in, p.file_bytes.data() + size_t(o) * rb, n_in);
    p.file = ops::Weight{type, n_in, n_out, p.file_bytes.data(), rb};
    EXPECT_TRUE(ops::can_interleave(p.file));
    p.interleaved_bytes.resize(p.file_bytes.size());
    p.interleaved = ops::interleave(p.file, p.interleaved_bytes.data());
    return p;
}

// The first element where got and want differ, reported, or nothing.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, int64_t n_out,
                      const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
        if (std::memcmp(&got[i], &want[i], 4) != 0) {
            ADD_FAILURE() << what << ": y[" << i / size_t(n_out) << "," << i % size_t(n_out)
                          << "] = " << got[i] << " interleaved, " << want[i] << " file layout";
            return;
        }
}

TEST(WeightLayout, OnlyWholeGroupsOfQ8_0AndQ4_0RowsInterleave) {
    std::vector<uint8_t> bytes(row_bytes(DType::Q8_0, 64) * 48);
    const ops::Weight w{DType::Q8_0, 64, 48, bytes.data(), row_bytes(DType::Q8_0, 64)};
    EXPECT_TRUE(ops::can_interleave(w));
    ops::Weight odd = w;
    odd.n_out = 40;  // not a multiple of 16
    EXPECT_FALSE(ops::can_interleave(odd));
    ops::Weight q4 = w;
    q4.type = DType::Q4_0;
    q4.row_stride = row_bytes(DType::Q4_0, 64);
    EXPECT_TRUE(ops::can_interleave(q4));
    ops::Weight k4 = w;
    k4.type = DType::Q4_K;
    k4.n_in = 256;
    k4.row_stride = row_bytes(DType::Q4_K, 256);
    EXPECT_FALSE(ops::can_interleave(k4));
    ops::Weight strided = w;
    strided.row_stride += 2;
    EXPECT_FALSE(ops::can_interleave(strided));
    std::vector<uint8_t> dst(bytes.size());
    const ops::Weight twice = ops::interleave(w, dst.data());
    EXPECT_EQ(twice.layout, ops::WeightLayout::Interleaved16);
    EXPECT_FALSE(ops::can_interleave(twice));  // already interleaved
}

TEST(WeightLayout, InterleavedRowsAreTheFileRows) {
    for (DType type : kTypes)
        for (int64_t n_in : {32, 96, 576}) {
            SCOPED_TRACE(type_name(type));
            const Pair p = make_pair(type, n_in, 48, uint32_t(n_in));
            std::vector<uint8_t> tmp(p.file.row_stride);
            for (int64_t o = 0; o < p.file.n_out; ++o) {
                const uint8_t* row = ops::file_row(p.interleaved, o, tmp.data());
                ASSERT_EQ(std::memcmp(row, p.file.data + size_t(o) * p.file.row_stride,
                                      p.file.row_stride),
                          0)
                    << "n_in " << n_in << " row " << o;
            }
            EXPECT_EQ(ops::file_row(p.file, 5, tmp.data()), p.file.data + 5 * p.file.row_stride);
            // The embedding lookup reads the same values from both layouts.
            const std::vector<int32_t> ids = {0, 47, 16, 15, 3};
            std::vector<float> a(ids.size() * size_t(n_in)), b(a.size());
            ops::get_rows(p.file, ids.data(), int64_t(ids.size()), a.data());
            ops::get_rows(p.interleaved, ids.data(), int64_t(ids.size()), b.data());
            EXPECT_EQ(a, b);
        }
}

// With AMX (kernels/amx.h, where the CPU has it) on and off: on, the AVX3_DL target's batched
// Q8_0 passes run on tiles (n_in 32 and 288: an odd number of blocks, the lone last block).
TEST(WeightLayout, ProductsHaveTheBitsOfTheFileLayout) {
    ThreadPool pool(2);
    for (bool amx : {false, true})
    for (DType type : kTypes)
        for (int64_t n_in : {32, 64, 288, 576, 1536})
            for (int64_t n_out : {16, 48, 192}) {
                SCOPED_TRACE(type_name(type));
                const Pair p = make_pair(type, n_in, n_out, uint32_t(n_in * 3 + n_out));
                const int64_t max_tokens = 40;
                const auto x =
                    random_floats(size_t(n_in * max_tokens), uint32_t(n_out), -2.0f, 2.0f);
                kernels::amx::ScopedAmx amx_on(amx);
                for_each_target([&] {
                    for (int64_t n_tokens : {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 33, 40})
                        for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
                            std::vector<float> want(size_t(n_out * n_tokens)), got(want.size());
                            ops::matmul(p.file, x.data(), want.data(), n_tokens, tp);
                            ops::matmul(p.interleaved, x.data(), got.data(), n_tokens, tp);
                            expect_same_bits(got, want, n_out,
                                             std::string(amx ? "AMX " : "") + "n_in " +
                                                 std::to_string(n_in) + " n_out " +
                                                 std::to_string(n_out) + " tokens " +
                                                 std::to_string(n_tokens));
                        }
                });
            }
}

// Q5_0 widened to Interleaved16 Q8_0 (where interleave_matrices does it: AVX2, SSE4): the same
// values for the embedding lookup and the bits of the file layout's Q5_0 kernels for every
// product, on every target.
TEST(WeightLayout, WidenedQ5_0HasTheBitsOfTheFileLayout) {
    ThreadPool pool(2);
    for (int64_t n_in : {32, 288, 576})
        for (int64_t n_out : {16, 48}) {
            const size_t rb = row_bytes(DType::Q5_0, n_in);
            std::vector<uint8_t> bytes(rb * size_t(n_out));
            const auto f = random_floats(size_t(n_in * n_out), uint32_t(n_in + n_out), -1.0f, 1.0f);
            for (int64_t o = 0; o < n_out; ++o)
                quantize_row(DType::Q5_0, f.data() + o * n_in, bytes.data() + size_t(o) * rb, n_in);
            const ops::Weight file{DType::Q5_0, n_in, n_out, bytes.data(), rb};
            EXPECT_FALSE(ops::can_interleave(file));
            ASSERT_TRUE(ops::can_interleave(file, true));
            EXPECT_EQ(ops::interleaved_bytes(file), row_bytes(DType::Q8_0, n_in) * size_t(n_out));
            std::vector<uint8_t> dst(ops::interleaved_bytes(file));
            const ops::Weight wide = ops::interleave(file, dst.data());
            EXPECT_EQ(wide.type, DType::Q8_0);
            EXPECT_EQ(wide.layout, ops::WeightLayout::Interleaved16);
            const std::vector<int32_t> ids = {0, int32_t(n_out - 1), 16 % int32_t(n_out), 7};
            std::vector<float> a(ids.size() * size_t(n_in)), b(a.size());
            ops::get_rows(file, ids.data(), int64_t(ids.size()), a.data());
            ops::get_rows(wide, ids.data(), int64_t(ids.size()), b.data());
            EXPECT_EQ(a, b) << "n_in " << n_in;
            const int64_t max_tokens = 40;
            const auto x = random_floats(size_t(n_in * max_tokens), uint32_t(n_out), -2.0f, 2.0f);
            for_each_target([&] {
                for (int64_t n_tokens : {1, 2, 3, 5, 8, 9, 17, 40})
                    for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
                        std::vector<float> want(size_t(n_out * n_tokens)), got(want.size());
                        ops::matmul(file, x.data(), want.data(), n_tokens, tp);
                        ops::matmul(wide, x.data(), got.data(), n_tokens, tp);
                        expect_same_bits(got, want, n_out,
                                         "Q5_0 n_in " + std::to_string(n_in) + " n_out " +
                                             std::to_string(n_out) + " tokens " +
                                             std::to_string(n_tokens));
                    }
            });
        }
}

// The AMX kernel, where the CPU has it: every token count it takes (1 to 8 a pass) and odd block
// counts, with the bits of the vector kernel on the same weights (and, through the test above,
// of the file layout). Skipped, saying so, on CPUs without AMX.
TEST(WeightLayout, AmxKernelHasTheBitsOfTheVectorKernel) {
    if (!kernels::amx::supported()) GTEST_SKIP() << "no AMX on this CPU (or not granted by the OS)";
    ThreadPool pool(2);
    for (int64_t n_in : {32, 96, 576, 1568})
        for (int64_t n_out : {16, 80, 1536}) {
            const Pair p = make_pair(DType::Q8_0, n_in, n_out, uint32_t(n_in + n_out));
            const auto x = random_floats(size_t(n_in * 16), uint32_t(n_in), -3.0f, 3.0f);
            for (int64_t n_tokens = 1; n_tokens <= 16; ++n_tokens) {
                std::vector<float> want(size_t(n_out * n_tokens)), got(want.size());
                {
                    kernels::amx::ScopedAmx off(false);
                    ops::matmul(p.interleaved, x.data(), want.data(), n_tokens, &pool);
                }
                kernels::amx::ScopedAmx on(true);
                ASSERT_TRUE(kernels::amx::usable());
                ops::matmul(p.interleaved, x.data(), got.data(), n_tokens, &pool);
                expect_same_bits(got, want, n_out,
                                 "AMX n_in " + std::to_string(n_in) + " n_out " +
                                     std::to_string(n_out) + " tokens " + std::to_string(n_tokens));
            }
        }
}

// The AMX kernel packs a call's activations once per thread and reuses them for its later
// tasks; a call that mixes in a weight of another kernel (which writes the same scratch) must
// make it pack again: Q8_0 interleaved, Q4_0 in the file layout, Q8_0 interleaved in one call,
// each with the bits of its product alone. 2 and 3 tokens: a call mixing layouts takes the
// row kernels only below a vector of tokens (4 or more go to the packed matrix-matrix path).
TEST(WeightLayout, AmxPacksAgainAfterAnotherKernelUsedTheScratch) {
    if (!kernels::amx::supported()) GTEST_SKIP() << "no AMX on this CPU (or not granted by the OS)";
    ThreadPool pool(2);
    const int64_t n_in = 576, n_out = 192;
    const Pair a = make_pair(DType::Q8_0, n_in, n_out, 11),
               c = make_pair(DType::Q8_0, n_in, n_out, 13);
    const Pair b = make_pair(DType::Q4_0, n_in, n_out, 12);
    const ops::Weight ws[3] = {a.interleaved, b.file, c.interleaved};
    kernels::amx::ScopedAmx on(true);
    ASSERT_TRUE(kernels::amx::usable());
    for (int64_t n_tokens : {2, 3})
        for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
            const auto x = random_floats(size_t(n_in * n_tokens), uint32_t(n_tokens), -2.0f, 2.0f);
            std::vector<std::vector<float>> got(3, std::vector<float>(size_t(n_out * n_tokens)));
            float* ys[3] = {got[0].data(), got[1].data(), got[2].data()};
            ops::matmul_many(ws, 3, x.data(), ys, n_tokens, tp);
            for (int m = 0; m < 3; ++m) {
                std::vector<float> want(got[size_t(m)].size());
                ops::matmul(ws[m], x.data(), want.data(), n_tokens, tp);
                expect_same_bits(
                    got[size_t(m)], want, n_out,
                    "matrix " + std::to_string(m) + " tokens " + std::to_string(n_tokens));
            }
        }
}

TEST(WeightLayout, MatchesTheReference) {
    for (DType type : kTypes)
        for (int64_t n_tokens : {1, 8, 20}) {
            SCOPED_TRACE(type_name(type));
            const Pair p = make_pair(type, 576, 64, 5);
            const auto x = random_floats(size_t(576 * n_tokens), 6, -2.0f, 2.0f);
            std::vector<float> want(size_t(64 * n_tokens)), ref_il(want.size()), got(want.size());
            ops::ref::matmul(p.file, x.data(), want.data(), n_tokens);
            ops::ref::matmul(p.interleaved, x.data(), ref_il.data(), n_tokens);
            EXPECT_EQ(ref_il, want);  // the reference reads either layout
            for_each_target([&] {
                ops::matmul(p.interleaved, x.data(), got.data(), n_tokens, nullptr);
                test::expect_near_all(got.data(), want.data(), got.size(), 1e-4f, 1e-5f,
                                      "interleaved");
            });
        }
}

// Q, K and V in one call: all interleaved (their own kernel), or mixed with a file-layout
// matrix (packed for the matrix-matrix kernel); fused RMSNorm and residual in a region.
TEST(WeightLayout, ManyMatricesAndFusedInputs) {
    ThreadPool pool(2);
    const int64_t n_in = 576;
    // Q/K/V of 96 + 32 + 32 rows, and of the tiny model's 288 + 96 + 96, whose tasks do not
    // fall on multiples of 16 by themselves (a mixed call once cut an interleaved matrix
    // inside a group on targets with 8 or 4 float lanes).
    for (const int64_t n_q : {96, 288})
        for (DType type : kTypes) {
            SCOPED_TRACE(type_name(type) + std::string(" q rows ") + std::to_string(n_q));
            const int64_t n_kv = n_q / 3;
            const Pair q = make_pair(type, n_in, n_q, 1), k = make_pair(type, n_in, n_kv, 2),
                       v = make_pair(type, n_in, n_kv, 3);
            const auto norm = random_floats(size_t(n_in), 4, 0.5f, 1.5f);
            for (int64_t n_tokens : {1, 3, 8, 16, 24}) {
                const auto x =
                    random_floats(size_t(n_in * n_tokens), uint32_t(n_tokens), -2.0f, 2.0f);
                const auto resid = random_floats(size_t(n_q * n_tokens), 7, -1.0f, 1.0f);
                for (bool mixed : {false, true}) {
                    const ops::Weight file[] = {q.file, k.file, v.file};
                    const ops::Weight il[] = {q.interleaved, mixed ? k.file : k.interleaved,
                                              v.interleaved};
                    for_each_target([&] {
                        std::vector<std::vector<float>> want(3), got(3);
                        float* yw[3];
                        float* yg[3];
                        for (int i = 0; i < 3; ++i) {
                            want[size_t(i)].assign(size_t(file[i].n_out * n_tokens), 0.0f);
                            got[size_t(i)].assign(want[size_t(i)].size(), 0.0f);
                            yw[i] = want[size_t(i)].data();
                            yg[i] = got[size_t(i)].data();
                        }
                        std::vector<float> sum_w = resid, sum_g = resid;
                        float* add_w[3] = {sum_w.data(), nullptr, nullptr};
                        float* add_g[3] = {sum_g.data(), nullptr, nullptr};
                        const ops::MatmulInput in{.x = x.data(), .norm = norm.data(), .eps = 1e-5f};
                        run_region(&pool, [&](Region& r) {
                            ops::matmul_many(r, file, 3, in, yw, n_tokens, add_w);
                            ops::matmul_many(r, il, 3, in, yg, n_tokens, add_g);
                        });
                        for (int i = 0; i < 3; ++i)
                            expect_same_bits(got[size_t(i)], want[size_t(i)], file[i].n_out,
                                             std::string(mixed ? "mixed" : "all interleaved") +
                                                 ", matrix " + std::to_string(i) + ", tokens " +
                                                 std::to_string(n_tokens));
                        expect_same_bits(sum_g, sum_w, n_q, "residual");
                    });
                }
            }
        }
}

}  // namespace
}  // namespace troupe
