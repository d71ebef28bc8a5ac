// Scalar reference code for every tensor type Troupe computes with. These functions define
// correctness: the SIMD kernels (src/kernels) are tested against them on every target.
//
// Two kinds of dot product exist, as in llama.cpp:
// - vec_dot_f32: the weight row dequantized exactly, times float activations (float sum).
//   The numerical reference for "what the weights mean".
// - vec_dot_act: the form the fast kernels compute. Activations are first converted to the
//   weight type's activation type (act_type()): Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1,
//   Q8_K for the K-quants, F16 for F16, BF16 for BF16, F32 for F32; then an integer (or
//   16-bit float) dot product with one float scale per block. This matches llama.cpp's CPU
//   numerics, which the golden outputs come from.
//
// All functions take n = number of values; n must be a multiple of the type's block size
// (checked with TROUPE_CHECK, which aborts: row lengths come from tensors validated when the
// file was opened). A type without compute code throws troupe::Error naming the type.
// Buffers do not alias. Thread-safe (pure functions).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/quant_blocks.h"
#include "tensor/types.h"

namespace troupe {

// The type activations are converted to before a dot product with weights of `type`.
DType act_type(DType weight_type);

// dst[n] = values of the n encoded values in src (a row of `type`).
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Encodes src[n] as `type` into dst (row_bytes(type, n) bytes). Available for every type with
// has_compute plus Q8_1 and Q8_K. The K-quant encoders search per-sub-block scales and mins to
// minimise squared error. Every encoder follows ggml's reference numerics, so the output equals
// llama-quantize's (without an importance matrix) byte for byte; tests/tensor checks this on
// the shared model files.
void quantize_row(DType type, const float* src, void* dst, int64_t n);

// sum_i dequant(row)[i] * x[i], accumulated in float in index order.
float vec_dot_f32(DType type, const void* row, const float* x, int64_t n);

// sum_i dequant(row)[i] * dequant(xa)[i] computed the way the kernels do: per-block integer
// (or f16/bf16) products, scaled per block. `xa` holds n values encoded as act_type(type).
float vec_dot_act(DType type, const void* row, const void* xa, int64_t n);

}  // namespace troupe
