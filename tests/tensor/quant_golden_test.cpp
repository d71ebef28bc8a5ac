// Golden values from llama.cpp's reference C code: ggml-quants.c (quantize_row_*_ref) and
// ggml-cpu/quants.c (ggml_vec_dot_*_generic), llama.cpp 80fb11ac (the tree node-llama-cpp
// 3.21.1 carries), built with gcc -O2 and run on the data below. Troupe's reference must give
// the same bytes (quantizers) and the same float bits (integer dots), which is what lets its
// outputs be compared with llama.cpp's and its quantizer reproduce llama-quantize's files.
// The data is exactly representable and generated with integer arithmetic only, so it is the
// same on every platform.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tensor/quant_ref.h"
#include "util/fp16.h"

namespace troupe {
namespace {

uint32_t xorshift32(uint32_t& s) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
}

// Four rows of n values: uniform in [-1, 1), a heavy tail (4 v^3), positive (v + 1), and
// uniform scaled by 2^-7 .. 2^0 in runs of 16 (sub-blocks of very different ranges).
std::vector<float> golden_rows(uint32_t seed, int64_t n) {
    std::vector<float> x(size_t(4 * n));
    uint32_t s = seed;
    for (int r = 0; r < 4; ++r) {
        for (int64_t i = 0; i < n; ++i) {
            const float v = float(int32_t(xorshift32(s) >> 8) - (1 << 23)) * 0x1p-23f;
            float& o = x[size_t(r * n + i)];
            switch (r) {
                case 0:
                    o = v;
                    break;
                case 1:
                    o = 4.0f * v * v * v;
                    break;
                case 2:
                    o = v + 1.0f;
                    break;
                default:
                    o = v * float(1 << (i / 16 % 8)) * 0x1p-7f;
                    break;
            }
        }
    }
    return x;
}

uint64_t fnv1a(const std::vector<uint8_t>& b) {
    uint64_t h = 1469598103934665603ull;
    for (uint8_t c : b) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

struct Golden {
    DType type;
    uint64_t weight_hash;  // the 4 weight rows quantized
    uint64_t act_hash;     // row 0 of the activations quantized to act_type
    uint32_t dot_bits[4];  // vec_dot_act of each weight row with the activations
};

constexpr int64_t kN = 1024;

const Golden kGolden[] = {
    {DType::Q4_0,
     0xa12dc8d5a44033f8ull,
     0x02f04775b693ea04ull,
     {0x3ef98d60, 0x41a02572, 0x40f44958, 0x3f958a2b}},
    {DType::Q4_1,
     0xf22dff59ac5724e8ull,
     0x01c4fb753f84f00eull,
     {0xbd5ab380, 0x41d07338, 0x40b5b264, 0x3fac7820}},
    {DType::Q5_0,
     0xcb5da0902539f658ull,
     0x02f04775b693ea04ull,
     {0xbef6eb10, 0x41be403b, 0x40d3fe0a, 0x3fd870ba}},
    {DType::Q5_1,
     0x7751f575f590db73ull,
     0x01c4fb753f84f00eull,
     {0xbc881500, 0x41bb6b78, 0x40cd4f92, 0x3fae56e6}},
    {DType::Q8_0,
     0xea6c43ebd64e6c63ull,
     0x02f04775b693ea04ull,
     {0xbf016764, 0x41bee64d, 0x40cd2502, 0x3fd5d909}},
    {DType::Q4_K,
     0x8c8805edc3b71efdull,
     0x1c783d4d75c47874ull,
     {0xbf84e8f4, 0x41ba9947, 0x40c66512, 0x3fd3e3c8}},
    {DType::Q5_K,
     0x086ecde4922b96e0ull,
     0x1c783d4d75c47874ull,
     {0xbe6ebee0, 0x41cbf2fd, 0x40d2db80, 0x3fc2f7c0}},
    {DType::Q6_K,
     0xed591e0c5f4a943eull,
     0x1c783d4d75c47874ull,
     {0xbd9f6c80, 0x41c3b6c9, 0x40cc81c4, 0x3fd5d10a}},
};

TEST(QuantGolden, WeightQuantizersAndDotsMatchLlamaCpp) {
    const std::vector<float> w = golden_rows(12345u, kN);
    const std::vector<float> x = golden_rows(777u, kN);
    for (const Golden& g : kGolden) {
        SCOPED_TRACE(type_name(g.type));
        const size_t rb = row_bytes(g.type, kN);
        std::vector<uint8_t> q(4 * rb);
        for (int r = 0; r < 4; ++r) quantize_row(g.type, w.data() + r * kN, q.data() + r * rb, kN);
        EXPECT_EQ(fnv1a(q), g.weight_hash);
        const DType at = act_type(g.type);
        std::vector<uint8_t> xa(row_bytes(at, kN));
        quantize_row(at, x.data(), xa.data(), kN);
        EXPECT_EQ(fnv1a(xa), g.act_hash);
        for (int r = 0; r < 4; ++r)
            EXPECT_EQ(float_to_bits(vec_dot_act(g.type, q.data() + r * rb, xa.data(), kN)),
                      g.dot_bits[r])
                << "row " << r;
    }
}

TEST(QuantGolden, ActivationQuantizersMatchLlamaCpp) {
    const std::vector<float> x = golden_rows(777u, kN);
    const std::pair<DType, uint64_t> expected[] = {{DType::Q8_0, 0xf609490c732c2afbull},
                                                   {DType::Q8_1, 0xc0134606cf442387ull},
                                                   {DType::Q8_K, 0x17ba49fc025a9e67ull}};
    for (const auto& [type, hash] : expected) {
        std::vector<uint8_t> q(row_bytes(type, 4 * kN));
        quantize_row(type, x.data(), q.data(), 4 * kN);
        EXPECT_EQ(fnv1a(q), hash) << type_name(type);
    }
}

}  // namespace
}  // namespace troupe
