// Weight layouts the kernels read besides the file's, and the conversions to and from them.
//
// Interleaved16 (Q8_0, Q4_0; Q5_0 widened to Q8_0 where that is faster): the rows in groups of 16,
// and within a group each 32-value block of the 16 rows stored together, its 16 scales first, then
// its quantised bytes in 4-byte groups of all 16 rows. One 64-byte line then holds the same 4 bytes
// of 16 rows: with rows in the lanes of a vector, a batch of decoded tokens takes one 8-bit dot
// product per 16 rows and 4 inputs per token (its 4 activation bytes broadcast), with no packing of
// the activations, no horizontal sums, and each weight vector loaded once for every token of the
// batch (gemv_interleaved-inl.h). The file layout needs per-token packing and lane shuffles
// for the same work (gemm-inl.h's pair kernels).
//
// For row group G (rows 16 G .. 16 G + 15), n_blocks = n_in / 32, B the bytes of one row's
// block in the file (34 for Q8_0, 18 for Q4_0) and Q = B - 2 its quantised bytes (32: the
// values; 16: Q4_0's nibbles, byte i holding value i in its low nibble and value i + 16 in its
// high one), the group's 16 B n_blocks bytes at data + G * 16 B n_blocks are:
//   bytes [32 k, 32 k + 32):          uint16 d[16]         f16 scale of block k of row 16 G + r
//   bytes [32 n_blocks + 16 Q k, ...):  uint8 q[Q / 4][16][4] q[j][r][b] = byte 4 j + b of it
// The scales come first, so a pass over the group meets them before the values it scales;
// the blocks' values follow back to back, so blocks k and k + 1 of Q8_0 are one 16 x 64-byte
// tile with a 64-byte stride (the AMX kernel, kernels/amx.h). The matrix takes the file's
// bytes, and row o's group begins at data + (o / 16) * 16 * row_stride, as row 16 (o / 16)
// would in the file.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/ops.h"

namespace troupe::ops {

constexpr int64_t kInterleaveRows = 16;

// Bytes of one block of 16 rows: 16 times the file's block (Q8_0: 544, Q4_0: 288), of which
// 32 are scales and the rest values (Q8_0: 512, Q4_0: 256).
constexpr size_t interleaved_block_bytes(DType type) {
    return type == DType::Q4_0 ? 288 : 544;
}
constexpr size_t interleaved_value_bytes(DType type) {
    return interleaved_block_bytes(type) - 32;
}

// Within a row group of n_blocks blocks: where block k's 16 scales and its values begin.
constexpr size_t interleaved_scales_at(int64_t k) {
    return 32 * size_t(k);
}
constexpr size_t interleaved_values_at(DType type, int64_t n_blocks, int64_t k) {
    return 32 * size_t(n_blocks) + interleaved_value_bytes(type) * size_t(k);
}

// Whether w (in the file layout) can be interleaved: Q8_0 or Q4_0 (with widen_q5_0, Q5_0 too),
// rows packed back to back, and n_out a multiple of 16.
bool can_interleave(const Weight& w, bool widen_q5_0 = false);

// The type of w's interleaved copy: Q5_0 is widened to Q8_0 (its levels q - 16 and its scale
// as they are: the same values, the same integer sums, so every product has the same bits),
// the others keep theirs. And the bytes of that copy.
DType interleaved_type(DType type);
size_t interleaved_bytes(const Weight& w);

// Whether interleave_matrices widens Q5_0 matrices on this CPU (the kernels' target): where the
// Interleaved16 Q8_0 kernels outrun the file-layout Q5_0 ones per Q5_0 byte although they read
// 34 bytes a block instead of 22 (the 16-register targets, AVX2 and SSE4: kern::).
bool widen_q5_0_here();

// Writes w's rows into dst (interleaved_bytes(w), not overlapping w.data) in the Interleaved16
// layout of interleaved_type(w.type) and returns the view of them. Requires
// can_interleave(w, w.type == Q5_0).
Weight interleave(const Weight& w, uint8_t* dst);

// Row o of w (either layout) in the file's format: a pointer into w for Rows, else the row
// gathered into tmp (row_bytes(w.type, w.n_in) bytes), which is returned.
const uint8_t* file_row(const Weight& w, int64_t o, uint8_t* tmp);

}  // namespace troupe::ops
