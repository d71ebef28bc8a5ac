// How the matmul kernels hold activations after converting them to act_type(weight type):
// one row per token, structure of arrays so that the integer values are contiguous and each
// block's scale is already a float. Internal to src/kernels.
//
// The values are those of tensor/quant_ref.h's quantize_row(act_type, ...) bit for bit (the
// scales here are the f16-rounded ones the reference dot products use), so the only numerical
// difference from the reference matmul is the order of the float sums.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/quant_blocks.h"
#include "tensor/types.h"

namespace troupe::ops {

struct ActLayout {
    DType type = DType::F32;  // the activation type: F32, F16, BF16, Q8_0, Q8_1 or Q8_K
    int64_t n_in = 0;
    int64_t n_blocks = 0;  // 32-value blocks (Q8_0, Q8_1) or 256-value blocks (Q8_K)
    // Within a row:
    //   values at 0: float [n_in] (F32; F16 and BF16: the floats of the rounded 16-bit
    //                values, so the kernels do not convert them per row), int8 [n_in] (Q8_*)
    //   scale_offset: float [n_blocks], the block scale d (Q8_0/Q8_1: f16-rounded)
    //   sum_offset: Q8_0: int32 [n_blocks] sum of the block's values;
    //               Q8_1: float [n_blocks] s (f16-rounded d * sum);
    //               Q8_K: int32 [n_in / 16] sums of 16 values (bsums)
    //   corr_offset: Q8_0: int32 [n_blocks] -128 * sum, where an unsigned-times-signed dot
    //               product with w + 128 starts (gemv_interleaved-inl.h); else 0
    size_t scale_offset = 0;
    size_t sum_offset = 0;
    size_t corr_offset = 0;
    size_t row_bytes = 0;  // a multiple of 64, so every row starts cache-line aligned
};

inline size_t round_up_64(size_t n) {
    return (n + 63) / 64 * 64;
}

inline ActLayout act_layout(DType act, int64_t n_in) {
    ActLayout l;
    l.type = act;
    l.n_in = n_in;
    switch (act) {
        case DType::F32:
        case DType::F16:
        case DType::BF16:
            l.row_bytes = round_up_64(size_t(n_in) * 4);
            break;
        case DType::Q8_0:
        case DType::Q8_1:
            l.n_blocks = n_in / QK8_0;
            l.scale_offset = round_up_64(size_t(n_in));
            l.sum_offset = l.scale_offset + round_up_64(size_t(l.n_blocks) * 4);
            l.row_bytes = l.sum_offset + round_up_64(size_t(l.n_blocks) * 4);
            if (act == DType::Q8_0) {
                l.corr_offset = l.row_bytes;
                l.row_bytes += round_up_64(size_t(l.n_blocks) * 4);
            }
            break;
        default:  // Q8_K
            l.n_blocks = n_in / QK_K;
            l.scale_offset = round_up_64(size_t(n_in));
            l.sum_offset = l.scale_offset + round_up_64(size_t(l.n_blocks) * 4);
            l.row_bytes = l.sum_offset + round_up_64(size_t(n_in / 16) * 4);
            break;
    }
    return l;
}

// The kernels' conversion of x[n] to `act` (on the dispatched target), written out in the
// reference block format of tensor/quant_ref.h so that tests can compare it byte for byte
// with quantize_row(act, x, out, n).
void convert_activations_for_test(DType act, const float* x, int64_t n, void* out);

}  // namespace troupe::ops
