// RMSNorm, RoPE, SwiGLU, add, softmax and argmax against their scalar references on every target.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/ops.h"
#include "kernels/ops_ref.h"

namespace troupe {
namespace {

using test::expect_near_all;
using test::for_each_target;
using test::OffsetBuffer;
using test::random_floats;
using test::test_sizes;

// Float sums in a different order than the reference (which sums squares in double): the
// error of a length-n float sum is about n * 2^-24 relative.
constexpr float kRelTol = 2e-6f;

TEST(Elementwise, RmsNormMatchesReference) {
    for_each_target([] {
        for (int64_t dim : test_sizes()) {
            if (dim == 0) continue;
            for (size_t offset : {0, 1, 3}) {
                const int64_t rows = 3;
                const auto x = random_floats(size_t(rows * dim), uint32_t(dim), -3.0f, 3.0f);
                const auto w = random_floats(size_t(dim), uint32_t(dim) + 7);
                std::vector<float> want(x.size());
                ops::ref::rms_norm(x.data(), w.data(), want.data(), rows, dim, 1e-5f);
                OffsetBuffer<float> xb(x.size(), offset), yb(x.size(), offset + 1);
                xb.assign(x);
                ops::rms_norm(xb.data(), w.data(), yb.data(), rows, dim, 1e-5f);
                const float tol = kRelTol * float(1 + dim / 64);
                expect_near_all(yb.data(), want.data(), want.size(), 1e-7f, tol, "rms_norm");
                // In place (y == x).
                ops::rms_norm(xb.data(), w.data(), xb.data(), rows, dim, 1e-5f);
                expect_near_all(xb.data(), want.data(), want.size(), 1e-7f, tol,
                                "rms_norm inplace");
            }
        }
    });
}

void check_rope(ops::RopeMode mode, int head_dim, int n_rot, float ext_factor) {
    const int n_heads = 3;
    const int64_t rows = 4;
    ops::RopeParams p;
    p.n_rot = n_rot;
    p.mode = mode;
    p.freq_base = 10000.0f;
    p.ext_factor = ext_factor;
    p.freq_scale = ext_factor != 0.0f ? 0.25f : 1.0f;
    p.n_ctx_orig = 2048;
    const std::vector<int32_t> pos = {0, 1, 17, 3000};
    const auto x =
        random_floats(size_t(rows * n_heads * head_dim), uint32_t(head_dim * 31 + n_rot));
    std::vector<float> want = x;
    ops::ref::rope(want.data(), pos.data(), rows, n_heads, head_dim, p);
    for (size_t offset : {0, 1}) {
        OffsetBuffer<float> got(x.size(), offset);
        got.assign(x);
        ops::rope(got.data(), pos.data(), rows, n_heads, head_dim, p);
        // One rounding of x0 c - x1 s (fused or not) on values of magnitude <= 1.
        expect_near_all(got.data(), want.data(), want.size(), 4e-7f, 1e-6f, "rope");

        // The two-step form uses bit-identical angles.
        got.assign(x);
        std::vector<float> table(size_t(rows * n_rot));
        ops::rope_angles(pos.data(), rows, p, table.data());
        ops::rope_apply(got.data(), table.data(), rows, n_heads, head_dim, p);
        expect_near_all(got.data(), want.data(), want.size(), 4e-7f, 1e-6f, "rope_apply");
    }
}

// fn(mode, head_dim, n_rot) for both pairings, head sizes from 2 to 128 and full, half and
// minimal rotations, on every target.
template <class Fn>
void for_each_rope_shape(Fn&& fn) {
    for_each_target([&] {
        for (ops::RopeMode mode : {ops::RopeMode::Norm, ops::RopeMode::Neox})
            for (int head_dim : {2, 6, 32, 48, 64, 80, 128})
                for (int n_rot : {2, head_dim / 2 + (head_dim / 2) % 2, head_dim}) {
                    if (n_rot <= 0 || n_rot > head_dim || n_rot % 2) continue;
                    SCOPED_TRACE(::testing::Message()
                                 << "head_dim " << head_dim << " n_rot " << n_rot << " neox "
                                 << (mode == ops::RopeMode::Neox));
                    fn(mode, head_dim, n_rot);
                }
    });
}

TEST(Elementwise, RopeMatchesReference) {
    for_each_rope_shape([](ops::RopeMode mode, int head_dim, int n_rot) {
        check_rope(mode, head_dim, n_rot, 0.0f);
        check_rope(mode, head_dim, n_rot, 1.0f);
    });
}

// rope_apply_cols over the pieces of a split of a row (as the Q/K/V product's tasks apply it)
// gives rope_apply's bits: every split at even columns (Neox: whole heads), pieces in any order.
void check_rope_cols(ops::RopeMode mode, int head_dim, int n_rot) {
    const int n_heads = 3;
    const int64_t rows = 3, row = int64_t(n_heads) * head_dim;
    ops::RopeParams p;
    p.n_rot = n_rot;
    p.mode = mode;
    const std::vector<int32_t> pos = {0, 5, 1234};
    std::vector<float> table(size_t(rows * n_rot)), pairs(size_t(rows * 2 * n_rot));
    ops::rope_angles(pos.data(), rows, p, table.data());
    ops::rope_pair_table(table.data(), rows, p, pairs.data());
    const auto x = random_floats(size_t(rows * row), uint32_t(head_dim * 7 + n_rot));
    std::vector<float> want = x;
    ops::rope_apply(want.data(), table.data(), rows, n_heads, head_dim, p);
    const int64_t step = mode == ops::RopeMode::Neox ? head_dim : 2;
    std::mt19937 rng(uint32_t(head_dim + n_rot));
    for (int trial = 0; trial < 8; ++trial) {
        std::vector<int64_t> cuts = {0};  // random cuts at multiples of step
        for (int64_t c = step; c < row; c += step)
            if (rng() % 3 == 0) cuts.push_back(c);
        cuts.push_back(row);
        std::vector<float> got = x;
        for (size_t i = cuts.size() - 1; i-- > 0;)  // last piece first
            for (int64_t r = 0; r < rows; ++r)
                ops::rope_apply_cols(got.data() + r * row, cuts[i], cuts[i + 1],
                                     table.data() + r * n_rot, pairs.data() + r * 2 * n_rot,
                                     head_dim, p);
        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
            << "trial " << trial;
    }
}

TEST(Elementwise, RopeColumnsAreBitIdenticalToRows) {
    for_each_rope_shape(check_rope_cols);
}

TEST(Elementwise, RopeColumnsRejectSplitPairs) {
    ops::RopeParams p;
    p.n_rot = 64;
    std::vector<float> x(128), table(64), pairs(128);
    EXPECT_DEATH(ops::rope_apply_cols(x.data(), 1, 64, table.data(), pairs.data(), 64, p),
                 "internal invariant");
    p.mode = ops::RopeMode::Neox;
    EXPECT_DEATH(ops::rope_apply_cols(x.data(), 32, 64, table.data(), pairs.data(), 64, p),
                 "internal invariant");
}

TEST(Elementwise, SwigluMatchesReference) {
    for_each_target([] {
        for (int64_t n : test_sizes()) {
            const auto g = random_floats(size_t(n), uint32_t(n) + 1, -20.0f, 20.0f);
            const auto u = random_floats(size_t(n), uint32_t(n) + 2, -2.0f, 2.0f);
            std::vector<float> want(static_cast<size_t>(n));
            ops::ref::swiglu(g.data(), u.data(), want.data(), n);
            OffsetBuffer<float> gb(size_t(n), 1), ub(size_t(n), 2), out(size_t(n), 3);
            gb.assign(g);
            ub.assign(u);
            ops::swiglu(gb.data(), ub.data(), out.data(), n);
            // The exponential is within 2 ulp; one division and one product follow.
            expect_near_all(out.data(), want.data(), size_t(n), 1e-30f, 4e-6f, "swiglu");
            ops::swiglu(gb.data(), ub.data(), gb.data(), n);  // out aliases gate
            expect_near_all(gb.data(), want.data(), size_t(n), 1e-30f, 4e-6f, "swiglu alias");
        }
    });
}

// Gates where the exponential's argument leaves its polynomial's range (-gate beyond 88 gives
// infinity, below -87 zero) and around the edges: the reference's quotient everywhere, to
// 1e-30 absolute where it underflows, and NaN and infinity through.
TEST(Elementwise, SwigluHandlesLargeGates) {
    for_each_target([] {
        std::vector<float> g = {-1e30f, -1000.0f, -100.0f, -88.5f, -88.0f, -87.5f, -87.0f,
                                -86.5f, -20.0f,   -1e-3f,   0.0f,   1e-3f,  20.0f,  86.5f,
                                87.0f,  87.5f,    88.0f,    88.5f,  100.0f, 1000.0f};
        for (float a = -95.0f; a <= 95.0f; a += 0.37f) g.push_back(a);
        const size_t n = g.size();
        const std::vector<float> u(n, 1.5f);
        std::vector<float> want(n), out(n);
        ops::ref::swiglu(g.data(), u.data(), want.data(), int64_t(n));
        ops::swiglu(g.data(), u.data(), out.data(), int64_t(n));
        expect_near_all(out.data(), want.data(), n, 1e-30f, 4e-6f, "swiglu large");
        const float special[3] = {std::nanf(""), std::numeric_limits<float>::infinity(), 50.0f};
        const float one[3] = {1.0f, 1.0f, 1.0f};
        float y[3];
        ops::swiglu(special, one, y, 3);
        EXPECT_TRUE(std::isnan(y[0]));
        EXPECT_EQ(y[1], std::numeric_limits<float>::infinity());
        EXPECT_NEAR(y[2], 50.0f, 50.0f * 4e-6f);
    });
}

TEST(Elementwise, AddInplaceIsExact) {
    for_each_target([] {
        for (int64_t n : test_sizes()) {
            const auto a = random_floats(size_t(n), uint32_t(n) + 3);
            const auto b = random_floats(size_t(n), uint32_t(n) + 4);
            std::vector<float> want = a;
            ops::ref::add_inplace(want.data(), b.data(), n);
            OffsetBuffer<float> y(size_t(n), 1);
            y.assign(a);
            ops::add_inplace(y.data(), b.data(), n);
            expect_near_all(y.data(), want.data(), size_t(n), 0.0f, 0.0f, "add_inplace");
        }
    });
}

TEST(Elementwise, SoftmaxMatchesReference) {
    for_each_target([] {
        for (int64_t n : test_sizes()) {
            auto x = random_floats(size_t(n), uint32_t(n) + 5, -30.0f, 30.0f);
            std::vector<float> want = x;
            ops::ref::softmax(want.data(), n);
            OffsetBuffer<float> got(size_t(n), 3);
            got.assign(x);
            ops::softmax(got.data(), n);
            expect_near_all(got.data(), want.data(), size_t(n), 1e-9f, 1e-5f, "softmax");
            double sum = 0;
            for (int64_t i = 0; i < n; ++i) sum += got.data()[i];
            if (n > 0) {
                EXPECT_NEAR(sum, 1.0, 1e-5);
            }
        }
        // Large values and a -inf (a masked score) stay finite and exact at the masked entry.
        std::vector<float> x = {1000.0f, 999.0f, -INFINITY, 998.0f};
        ops::softmax(x.data(), 4);
        EXPECT_EQ(x[2], 0.0f);
        EXPECT_NEAR(x[0], 0.6652409f, 1e-6f);
    });
}

TEST(Elementwise, ArgmaxMatchesReference) {
    for_each_target([] {
        for (int64_t n : test_sizes()) {
            if (n == 0) continue;
            const auto x = random_floats(size_t(n), uint32_t(n) + 11, -8.0f, 8.0f);
            OffsetBuffer<float> b(size_t(n), 1);
            b.assign(x);
            float* v = b.data();
            EXPECT_EQ(ops::argmax(v, n), ops::ref::argmax(v, n)) << "n " << n;
            // The maximum at every position in turn, also tied with an earlier or later copy.
            for (int64_t at : {int64_t(0), n / 3, n / 2, n - 1}) {
                const float keep = v[at];
                v[at] = 100.0f;
                EXPECT_EQ(ops::argmax(v, n), at) << "n " << n;
                if (at + 1 < n) {
                    const float next = v[n - 1];
                    v[n - 1] = 100.0f;  // a later tie: the first wins
                    EXPECT_EQ(ops::argmax(v, n), at);
                    v[n - 1] = next;
                }
                v[at] = keep;
            }
            // NaNs are skipped as the scalar loop skips them; -0.0 and 0.0 tie.
            if (n >= 3) {
                std::vector<float> y(size_t(n), -1.0f);
                y[1] = NAN;
                y[size_t(n) - 1] = 0.0f;
                y[size_t(n) / 2] = -0.0f;
                EXPECT_EQ(ops::argmax(y.data(), n), ops::ref::argmax(y.data(), n)) << "n " << n;
                y[0] = NAN;
                EXPECT_EQ(ops::argmax(y.data(), n), 0);
            }
            // All equal, all -inf.
            std::vector<float> z(size_t(n), -INFINITY);
            EXPECT_EQ(ops::argmax(z.data(), n), 0);
        }
    });
}

}  // namespace
}  // namespace troupe
