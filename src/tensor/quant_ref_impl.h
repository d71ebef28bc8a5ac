// Per-type scalar kernels behind quant_ref.h (internal to src/tensor; use quant_ref.h).
//
// Every function works on nb whole blocks. The numerics follow ggml's reference C code
// operation by operation (same rounding, same order of float operations), so that:
// - the activation quantizers (Q8_0, Q8_1, Q8_K) give llama.cpp's bytes;
// - the weight quantizers reproduce llama-quantize's output (made without an importance
//   matrix) byte for byte, which the tests check on the shared model files;
// - dequantized values are bit-identical to ggml's dequantize_row_*;
// - the dots return the same float as ggml's scalar ggml_vec_dot_*_generic (tests/tensor/
//   quant_golden_test.cpp holds values computed with llama.cpp's own code).
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor/quant_blocks.h"

namespace troupe::qref {

// Round to nearest, ties to even, for |v| < 2^22 (the FPU does the rounding when the value is
// added to 1.5 * 2^23). Never undefined behaviour: garbage in (NaN, huge), garbage out.
inline int nearest_int(float v) {
    const float biased = v + 12582912.0f;
    int32_t bits;
    std::memcpy(&bits, &biased, sizeof(bits));
    return (bits & 0x007fffff) - 0x00400000;
}

// int(v) truncated toward zero and clamped to [lo, hi]; NaN gives lo. Used where ggml casts a
// float to an integer type, without the undefined behaviour of an out-of-range cast.
inline int trunc_clamp(float v, int lo, int hi) {
    if (!(v >= float(lo))) return lo;
    if (v >= float(hi)) return hi;
    return int(v);
}

// Blocks of 32 values.
void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb);
void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb);
void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb);
void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb);
void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb);
void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t nb);

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb);
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb);
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb);
void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t nb);

float dot_q4_0_q8_0(const BlockQ4_0* x, const BlockQ8_0* y, int64_t nb);
float dot_q4_1_q8_1(const BlockQ4_1* x, const BlockQ8_1* y, int64_t nb);
float dot_q5_0_q8_0(const BlockQ5_0* x, const BlockQ8_0* y, int64_t nb);
float dot_q5_1_q8_1(const BlockQ5_1* x, const BlockQ8_1* y, int64_t nb);
float dot_q8_0_q8_0(const BlockQ8_0* x, const BlockQ8_0* y, int64_t nb);

// Super-blocks of 256 values (K-quants).
void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb);
void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb);
void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb);
void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb);

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb);
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb);
void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t nb);

float dot_q4_k_q8_k(const BlockQ4_K* x, const BlockQ8_K* y, int64_t nb);
float dot_q5_k_q8_k(const BlockQ5_K* x, const BlockQ8_K* y, int64_t nb);
float dot_q6_k_q8_k(const BlockQ6_K* x, const BlockQ8_K* y, int64_t nb);

}  // namespace troupe::qref
