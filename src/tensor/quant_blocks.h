// Byte layouts of the quantized blocks, identical to ggml's (ggml-common.h), so GGUF files
// are used in place. Scales stored as IEEE half are uint16_t bit patterns (see util/fp16.h).
//
// Value of element i of a block, per type (d, m are the block's scale and minimum):
//   Q8_0: d * qs[i]                                    (qs int8)
//   Q4_0: d * ((nibble_i) - 8)      nibble i < 16 in qs[i] & 0xF, i >= 16 in qs[i-16] >> 4
//   Q4_1: d * nibble_i + m
//   Q5_0: d * ((nibble_i | bit_i << 4) - 16)           bit i of qh (little-endian uint32)
//   Q5_1: d * (nibble_i | bit_i << 4) + m
//   Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins packed in scales[12]:
//        d * sc_j * q - dmin * m_j
//   Q6_K: 16 sub-blocks of 16 with int8 scales: d * scales[j] * (q6 - 32)
//   Q8_K: d (float) * qs[i]; bsums[j] = sum of qs over sub-block j of 16 (for K-quant dots)
#pragma once

#include <cstdint>

namespace troupe {

constexpr int QK4_0 = 32;
constexpr int QK4_1 = 32;
constexpr int QK5_0 = 32;
constexpr int QK5_1 = 32;
constexpr int QK8_0 = 32;
constexpr int QK8_1 = 32;
constexpr int QK_K = 256;
constexpr int K_SCALE_SIZE = 12;

struct BlockQ4_0 {
    uint16_t d;              // scale (f16)
    uint8_t qs[QK4_0 / 2];   // nibbles: low = elements 0..15, high = 16..31
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ4_1 {
    uint16_t d;              // scale (f16)
    uint16_t m;              // minimum (f16)
    uint8_t qs[QK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

struct BlockQ5_0 {
    uint16_t d;              // scale (f16)
    uint8_t qh[4];           // 5th bit of each element
    uint8_t qs[QK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

struct BlockQ8_0 {
    uint16_t d;              // scale (f16)
    int8_t qs[QK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ8_1 {
    uint16_t d;              // scale (f16)
    uint16_t s;              // d * sum(qs) (f16)
    int8_t qs[QK8_1];
};
static_assert(sizeof(BlockQ8_1) == 36);

struct BlockQ4_K {
    uint16_t d;                     // super-block scale for the sub-block scales (f16)
    uint16_t dmin;                  // super-block scale for the sub-block mins (f16)
    uint8_t scales[K_SCALE_SIZE];   // 8 scales and 8 mins, 6 bits each
    uint8_t qs[QK_K / 2];           // 4-bit quants
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];           // high bits
    uint8_t qs[QK_K / 2];           // low 4 bits
};
static_assert(sizeof(BlockQ5_K) == 176);

struct BlockQ6_K {
    uint8_t ql[QK_K / 2];           // low 4 bits
    uint8_t qh[QK_K / 4];           // high 2 bits
    int8_t scales[QK_K / 16];       // 8-bit sub-block scales
    uint16_t d;                     // super-block scale (f16)
};
static_assert(sizeof(BlockQ6_K) == 210);

struct BlockQ8_K {
    float d;                        // scale (f32)
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];       // sums of qs in groups of 16
};
static_assert(sizeof(BlockQ8_K) == 292);

}  // namespace troupe
