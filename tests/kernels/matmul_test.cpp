// Matrix products of every weight type against the scalar reference (ops::ref::matmul) on
// every target, for 1 to many tokens, odd shapes and unaligned weight and activation rows.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/ops.h"
#include "kernels/ops_ref.h"
#include "kernels/thread_pool.h"
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
    // Matrix-matrix kernels: whole and partial token vectors (16 tokens on AVX-512) and tiles.
    for (DType type : kTypes)
        for (int64_t n_tokens : {4, 8, 16, 37}) check_matmul(type, 256 * 3, 81, n_tokens, &pool, 0);
}

TEST(Matmul, UnsupportedTypeIsAnError) {
    std::vector<uint8_t> data(256);
    const ops::Weight w{DType::IQ2_XXS, 256, 1, data.data(), 66};
    std::vector<float> x(256), y(1);
    EXPECT_THROW(ops::matmul(w, x.data(), y.data(), 1, nullptr), Error);
}

}  // namespace
}  // namespace troupe
