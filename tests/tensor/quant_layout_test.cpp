// Byte layouts (hand-made blocks decoded to hand-computed values), the exact numerics of the
// activation quantizers (which must equal llama.cpp's), and the error contract.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "quant_test_util.h"
#include "util/error.h"
#include "util/fp16.h"

namespace troupe {
namespace {

template <typename Block>
std::vector<float> decode(DType t, const Block& b) {
    std::vector<float> y(size_t(traits(t).block_size));
    dequantize_row(t, &b, y.data(), int64_t(y.size()));
    return y;
}

TEST(QuantLayout, Floats) {
    const uint16_t h[4] = {0x3c00, 0xc000, 0x7bff, 0x0001};
    float y[4];
    dequantize_row(DType::F16, h, y, 4);
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], -2.0f);
    EXPECT_EQ(y[2], 65504.0f);
    EXPECT_EQ(y[3], 0x1p-24f);
    const uint16_t b[3] = {0x3f80, 0xc040, 0x0000};
    dequantize_row(DType::BF16, b, y, 3);
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], -3.0f);
    EXPECT_EQ(y[2], 0.0f);
}

TEST(QuantLayout, Q8_0AndQ8_1) {
    BlockQ8_0 b{};
    b.d = 0x3800;  // 0.5
    b.qs[0] = 1;
    b.qs[1] = -2;
    b.qs[5] = -128;
    b.qs[31] = 127;
    const auto y = decode(DType::Q8_0, b);
    EXPECT_EQ(y[0], 0.5f);
    EXPECT_EQ(y[1], -1.0f);
    EXPECT_EQ(y[2], 0.0f);
    EXPECT_EQ(y[5], -64.0f);
    EXPECT_EQ(y[31], 63.5f);
    BlockQ8_1 c{};
    c.d = 0x3400;  // 0.25
    c.s = 0x7bff;  // not part of the values
    c.qs[2] = 4;
    const auto z = decode(DType::Q8_1, c);
    EXPECT_EQ(z[2], 1.0f);
    EXPECT_EQ(z[3], 0.0f);
}

TEST(QuantLayout, Q4_0AndQ4_1) {
    BlockQ4_0 b;
    b.d = 0x4000;  // 2
    std::memset(b.qs, 0x88, sizeof(b.qs));
    b.qs[0] = 0xf0;   // element 0: 0 -> -16; element 16: 15 -> 14
    b.qs[15] = 0x98;  // element 15: 8 -> 0; element 31: 9 -> 2
    const auto y = decode(DType::Q4_0, b);
    EXPECT_EQ(y[0], -16.0f);
    EXPECT_EQ(y[16], 14.0f);
    EXPECT_EQ(y[15], 0.0f);
    EXPECT_EQ(y[31], 2.0f);
    EXPECT_EQ(y[1], 0.0f);
    BlockQ4_1 c{};
    c.d = 0x3800;  // 0.5
    c.m = 0xbc00;  // -1
    c.qs[0] = 0x2f;
    const auto z = decode(DType::Q4_1, c);
    EXPECT_EQ(z[0], 6.5f);   // 15 * 0.5 - 1
    EXPECT_EQ(z[16], 0.0f);  // 2 * 0.5 - 1
    EXPECT_EQ(z[1], -1.0f);
}

TEST(QuantLayout, Q5_0AndQ5_1) {
    BlockQ5_0 b{};
    b.d = 0x3c00;                                    // 1
    const uint8_t qh[4] = {0x01, 0x00, 0x02, 0x00};  // bits 0 and 17
    std::memcpy(b.qh, qh, 4);
    b.qs[0] = 0x3a;
    b.qs[1] = 0x51;
    const auto y = decode(DType::Q5_0, b);
    EXPECT_EQ(y[0], 10.0f);    // 0xa | 16 = 26, minus 16
    EXPECT_EQ(y[16], -13.0f);  // 3 - 16
    EXPECT_EQ(y[1], -15.0f);   // 1 - 16
    EXPECT_EQ(y[17], 5.0f);    // 5 | 16 = 21, minus 16
    EXPECT_EQ(y[2], -16.0f);
    BlockQ5_1 c{};
    c.d = 0x3800;                            // 0.5
    c.m = 0x4000;                            // 2
    const uint8_t qh1[4] = {0, 0, 0, 0x80};  // bit 31
    std::memcpy(c.qh, qh1, 4);
    c.qs[15] = 0xf0;
    const auto z = decode(DType::Q5_1, c);
    EXPECT_EQ(z[15], 2.0f);   // 0 * 0.5 + 2
    EXPECT_EQ(z[31], 17.5f);  // 31 * 0.5 + 2
    EXPECT_EQ(z[30], 2.0f);
}

// Q4_K / Q5_K scales: sub-block 0 (sc 1, m 2), 1 (sc 3, m 4), 5 (sc 33, m 17: the high two
// bits of sub-blocks 4..7 live in the top bits of bytes 0..7).
void set_k_scales(uint8_t* s) {
    std::memset(s, 0, K_SCALE_SIZE);
    s[0] = 1;                   // sc0
    s[4] = 2;                   // m0
    s[1] = 3 | (2 << 6);        // sc1, and the high bits of sc5 (33 >> 4 = 2)
    s[5] = 4 | (1 << 6);        // m1, and the high bits of m5 (17 >> 4 = 1)
    s[9] = 0x01 | (0x01 << 4);  // low 4 bits of sc5 (1) and m5 (1)
}

TEST(QuantLayout, Q4_K) {
    BlockQ4_K b{};
    b.d = 0x3c00;     // 1
    b.dmin = 0x3800;  // 0.5
    set_k_scales(b.scales);
    b.qs[0] = 0x73;   // element 0 (sub-block 0): 3; element 32 (sub-block 1): 7
    b.qs[64] = 0xa0;  // element 128 (sub-block 4): 0; element 160 (sub-block 5): 10
    const auto y = decode(DType::Q4_K, b);
    EXPECT_EQ(y[0], 2.0f);    // 1*1*3 - 0.5*2
    EXPECT_EQ(y[1], -1.0f);   // q = 0 in sub-block 0
    EXPECT_EQ(y[32], 19.0f);  // 1*3*7 - 0.5*4
    EXPECT_EQ(y[33], -2.0f);
    EXPECT_EQ(y[128], 0.0f);    // sub-block 4: sc 0, m 0
    EXPECT_EQ(y[160], 321.5f);  // 33*10 - 0.5*17
    EXPECT_EQ(y[161], -8.5f);
    EXPECT_EQ(y[255], 0.0f);
}

TEST(QuantLayout, Q5_K) {
    BlockQ5_K b{};
    b.d = 0x3c00;
    b.dmin = 0x3800;
    set_k_scales(b.scales);
    b.qs[0] = 0x73;
    b.qs[64] = 0xa0;
    b.qh[0] = 0x21;  // high bit of element 0 (bit 0) and element 160 (bit 5)
    const auto y = decode(DType::Q5_K, b);
    EXPECT_EQ(y[0], 18.0f);     // 19 - 1
    EXPECT_EQ(y[32], 19.0f);    // bit 1 not set
    EXPECT_EQ(y[160], 849.5f);  // 33*26 - 8.5
    EXPECT_EQ(y[161], -8.5f);
}

TEST(QuantLayout, Q6_K) {
    BlockQ6_K b{};
    b.d = 0x3400;  // 0.25
    b.scales[0] = 2;
    b.scales[4] = 1;
    b.scales[15] = -3;
    b.ql[0] = 0x05;    // element 0 low bits 5; element 64 low bits 0
    b.qh[0] = 0x02;    // element 0 high bits 2 -> 37; element 64 high bits 0
    b.ql[127] = 0xa0;  // element 255 low bits 10
    b.qh[63] = 0x40;   // element 255 high bits 1 -> 26
    const auto y = decode(DType::Q6_K, b);
    EXPECT_EQ(y[0], 2.5f);    // 0.25 * 2 * (37 - 32)
    EXPECT_EQ(y[1], -16.0f);  // 0.25 * 2 * (0 - 32)
    EXPECT_EQ(y[64], -8.0f);  // 0.25 * 1 * (0 - 32)
    EXPECT_EQ(y[255], 4.5f);  // 0.25 * -3 * (26 - 32)
    EXPECT_EQ(y[16], 0.0f);   // scale 0
}

TEST(QuantLayout, Q8_K) {
    BlockQ8_K b{};
    b.d = 0.125f;
    b.qs[3] = -8;
    b.qs[255] = 127;
    const auto y = decode(DType::Q8_K, b);
    EXPECT_EQ(y[3], -1.0f);
    EXPECT_EQ(y[255], 15.875f);
    EXPECT_EQ(y[0], 0.0f);
}

// llama.cpp's reference Q8_0 / Q8_1: d = amax / 127, q = round(x * (1 / d)) with halves
// rounded away from zero; Q8_1's s = d * sum(q) from d before its f16 rounding.
TEST(ActQuant, Q8_0AndQ8_1RoundHalvesAwayFromZero) {
    std::vector<float> x(32, 0.0f);
    const float vals[] = {127.0f, 0.5f, -0.5f, 2.5f, -2.5f, 1.49f, 63.5f};
    std::copy(std::begin(vals), std::end(vals), x.begin());
    const auto q = test::quantize(DType::Q8_0, x);
    const auto& b = *reinterpret_cast<const BlockQ8_0*>(q.data());
    EXPECT_EQ(b.d, 0x3c00);  // 127 / 127
    const int expect[] = {127, 1, -1, 3, -3, 1, 64};
    for (int i = 0; i < 7; ++i) EXPECT_EQ(b.qs[i], expect[i]) << i;
    const auto q1 = test::quantize(DType::Q8_1, x);
    const auto& c = *reinterpret_cast<const BlockQ8_1*>(q1.data());
    EXPECT_EQ(0, std::memcmp(c.qs, b.qs, 32));
    EXPECT_EQ(c.s, fp32_to_fp16(192.0f));  // 127 + 1 - 1 + 3 - 3 + 1 + 64
}

TEST(ActQuant, Q8_0GeneralScale) {
    const std::vector<float> x = test::make_data(test::Dist::Normal, 64, 3);
    const auto q = test::quantize(DType::Q8_0, x);
    for (int blk = 0; blk < 2; ++blk) {
        const auto& b = reinterpret_cast<const BlockQ8_0*>(q.data())[blk];
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * blk + i]));
        const float d = amax / 127.0f;
        EXPECT_EQ(b.d, fp32_to_fp16(d));
        for (int i = 0; i < 32; ++i)
            EXPECT_EQ(b.qs[i], int(std::round(x[32 * blk + i] * (1.0f / d))));
    }
}

// llama.cpp's Q8_K: iscale = -127 / max (max = the signed value of largest magnitude), q =
// nearest_int (halves to even), d = 1 / iscale in f32 (negative when max > 0), bsums per 16.
TEST(ActQuant, Q8_KRoundsHalvesToEvenAndKeepsTheSign) {
    std::vector<float> x(256, 0.0f);
    const float vals[] = {-127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 3.49f};
    std::copy(std::begin(vals), std::end(vals), x.begin());
    x[200] = 5.0f;
    auto q = test::quantize(DType::Q8_K, x);
    auto* b = reinterpret_cast<const BlockQ8_K*>(q.data());
    EXPECT_EQ(b->d, 1.0f);
    const int expect[] = {-127, 0, 2, 2, 0, -2, 3};
    for (int i = 0; i < 7; ++i) EXPECT_EQ(b->qs[i], expect[i]) << i;
    EXPECT_EQ(b->bsums[0], -127 + 2 + 2 - 2 + 3);
    EXPECT_EQ(b->bsums[200 / 16], 5);
    for (float& v : x) v = -v;  // max now +127: iscale = -1, d = -1, levels negated
    q = test::quantize(DType::Q8_K, x);
    b = reinterpret_cast<const BlockQ8_K*>(q.data());
    EXPECT_EQ(b->d, -1.0f);
    EXPECT_EQ(b->qs[0], -127);
    EXPECT_EQ(b->qs[2], 2);
    EXPECT_EQ(test::dequantize(DType::Q8_K, q, 256)[0], 127.0f);
    EXPECT_EQ(test::dequantize(DType::Q8_K, q, 256)[200], -5.0f);
}

TEST(QuantContract, ActivationTypes) {
    EXPECT_EQ(act_type(DType::F32), DType::F32);
    EXPECT_EQ(act_type(DType::F16), DType::F16);
    EXPECT_EQ(act_type(DType::BF16), DType::BF16);
    for (DType t : {DType::Q4_0, DType::Q5_0, DType::Q8_0}) EXPECT_EQ(act_type(t), DType::Q8_0);
    for (DType t : {DType::Q4_1, DType::Q5_1}) EXPECT_EQ(act_type(t), DType::Q8_1);
    for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) EXPECT_EQ(act_type(t), DType::Q8_K);
}

template <typename F>
void expect_error(F f, const std::string& needle) {
    try {
        f();
        ADD_FAILURE() << "no troupe::Error (expected one naming " << needle << ")";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

TEST(QuantContract, TypesWithoutComputeAreErrorsNamingTheType) {
    uint8_t buf[512] = {};
    float out[256];
    expect_error([] { act_type(DType::Q2_K); }, "q2_K");
    expect_error([] { act_type(DType::Q8_K); }, "q8_K");  // an activation type, not a weight
    expect_error([&] { dequantize_row(DType::IQ2_XXS, buf, out, 256); }, "iq2_xxs");
    expect_error([&] { quantize_row(DType::Q3_K, out, buf, 256); }, "q3_K");
    expect_error([&] { vec_dot_f32(DType::I32, buf, out, 4); }, "i32");
    expect_error([&] { vec_dot_act(DType::Q8_1, buf, buf, 32); }, "q8_1");
    expect_error([&] { dequantize_row(DType(4), buf, out, 32); }, "number 4");
}

// A row length that is not a whole number of blocks is a caller bug (tensors are validated
// when a file is opened): TROUPE_CHECK aborts.
TEST(QuantContractDeathTest, RowNotAMultipleOfTheBlockSizeAborts) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    std::vector<uint8_t> buf(4096);
    std::vector<float> out(512);
    EXPECT_DEATH(dequantize_row(DType::Q4_0, buf.data(), out.data(), 33), "internal invariant");
    EXPECT_DEATH(quantize_row(DType::Q8_0, out.data(), buf.data(), 40), "internal invariant");
    EXPECT_DEATH(vec_dot_f32(DType::Q4_K, buf.data(), out.data(), 288), "internal invariant");
    EXPECT_DEATH(vec_dot_act(DType::Q6_K, buf.data(), buf.data(), 300), "internal invariant");
}

}  // namespace
}  // namespace troupe
