// Dispatch of the scalar reference by tensor type, and the plain float types (F32, F16, BF16).
// The per-type block code is in quant_ref_legacy.cpp (32-value blocks) and
// quant_ref_kquants.cpp (256-value K-quant super-blocks).
#include "tensor/quant_ref.h"

#include <cstring>
#include <string>

#include "tensor/quant_ref_impl.h"
#include "util/error.h"
#include "util/fp16.h"

namespace troupe {

namespace {

std::string type_label(DType type) {
    if (const auto t = type_traits(uint32_t(type))) return t->name;
    std::string label = "number ";
    label += std::to_string(uint32_t(type));
    return label;
}

[[noreturn]] void unsupported(DType type, const char* what) {
    throw Error(std::string(what) + ": tensor type " + type_label(type) +
                " is not supported by Troupe's compute code");
}

// Number of blocks in a row of n values; n must be a whole number of blocks (an invariant:
// row lengths come from validated tensors).
int64_t n_blocks(DType type, int64_t n) {
    const auto t = type_traits(uint32_t(type));
    if (!t) unsupported(type, "row");
    TROUPE_CHECK(n >= 0 && n % t->block_size == 0);
    return n / t->block_size;
}

template <typename Block>
const Block* as_blocks(const void* p) {
    return static_cast<const Block*>(p);
}

template <typename Block>
Block* as_blocks(void* p) {
    return static_cast<Block*>(p);
}

const uint16_t* as_u16(const void* p) {
    return static_cast<const uint16_t*>(p);
}

// sum_i f(a[i]) * g(b[i]) in float, index order.
template <typename A, typename B, typename FA, typename FB>
float dot_plain(const A* a, const B* b, int64_t n, FA fa, FB fb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += fa(a[i]) * fb(b[i]);
    return sum;
}

float identity(float v) {
    return v;
}

// Quantized weight row times float x: dequantize one block at a time, accumulate in order.
float dot_dequantized(DType type, const void* row, const float* x, int64_t n) {
    const TypeTraits& t = traits(type);
    float buf[QK_K];
    float sum = 0.0f;
    const auto* bytes = static_cast<const uint8_t*>(row);
    for (int64_t i = 0; i < n; i += t.block_size) {
        dequantize_row(type, bytes + size_t(i / t.block_size) * t.type_size, buf, t.block_size);
        for (int64_t j = 0; j < t.block_size; ++j) sum += buf[j] * x[i + j];
    }
    return sum;
}

}  // namespace

DType act_type(DType weight_type) {
    switch (weight_type) {
        case DType::F32:
            return DType::F32;
        case DType::F16:
            return DType::F16;
        case DType::BF16:
            return DType::BF16;
        case DType::Q4_0:
        case DType::Q5_0:
        case DType::Q8_0:
            return DType::Q8_0;
        case DType::Q4_1:
        case DType::Q5_1:
            return DType::Q8_1;
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K:
            return DType::Q8_K;
        default:
            unsupported(weight_type, "matrix product");
    }
}

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
    const int64_t nb = n_blocks(type, n);
    switch (type) {
        case DType::F32:
            std::memcpy(dst, src, size_t(n) * sizeof(float));
            return;
        case DType::F16:
            for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(as_u16(src)[i]);
            return;
        case DType::BF16:
            for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(as_u16(src)[i]);
            return;
        case DType::Q4_0:
            return qref::dequantize_q4_0(as_blocks<BlockQ4_0>(src), dst, nb);
        case DType::Q4_1:
            return qref::dequantize_q4_1(as_blocks<BlockQ4_1>(src), dst, nb);
        case DType::Q5_0:
            return qref::dequantize_q5_0(as_blocks<BlockQ5_0>(src), dst, nb);
        case DType::Q5_1:
            return qref::dequantize_q5_1(as_blocks<BlockQ5_1>(src), dst, nb);
        case DType::Q8_0:
            return qref::dequantize_q8_0(as_blocks<BlockQ8_0>(src), dst, nb);
        case DType::Q8_1:
            return qref::dequantize_q8_1(as_blocks<BlockQ8_1>(src), dst, nb);
        case DType::Q4_K:
            return qref::dequantize_q4_k(as_blocks<BlockQ4_K>(src), dst, nb);
        case DType::Q5_K:
            return qref::dequantize_q5_k(as_blocks<BlockQ5_K>(src), dst, nb);
        case DType::Q6_K:
            return qref::dequantize_q6_k(as_blocks<BlockQ6_K>(src), dst, nb);
        case DType::Q8_K:
            return qref::dequantize_q8_k(as_blocks<BlockQ8_K>(src), dst, nb);
        default:
            unsupported(type, "dequantize");
    }
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
    const int64_t nb = n_blocks(type, n);
    switch (type) {
        case DType::F32:
            std::memcpy(dst, src, size_t(n) * sizeof(float));
            return;
        case DType::F16:
            for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = fp32_to_fp16(src[i]);
            return;
        case DType::BF16:
            for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = fp32_to_bf16(src[i]);
            return;
        case DType::Q4_0:
            return qref::quantize_q4_0(src, as_blocks<BlockQ4_0>(dst), nb);
        case DType::Q4_1:
            return qref::quantize_q4_1(src, as_blocks<BlockQ4_1>(dst), nb);
        case DType::Q5_0:
            return qref::quantize_q5_0(src, as_blocks<BlockQ5_0>(dst), nb);
        case DType::Q5_1:
            return qref::quantize_q5_1(src, as_blocks<BlockQ5_1>(dst), nb);
        case DType::Q8_0:
            return qref::quantize_q8_0(src, as_blocks<BlockQ8_0>(dst), nb);
        case DType::Q8_1:
            return qref::quantize_q8_1(src, as_blocks<BlockQ8_1>(dst), nb);
        case DType::Q4_K:
            return qref::quantize_q4_k(src, as_blocks<BlockQ4_K>(dst), nb);
        case DType::Q5_K:
            return qref::quantize_q5_k(src, as_blocks<BlockQ5_K>(dst), nb);
        case DType::Q6_K:
            return qref::quantize_q6_k(src, as_blocks<BlockQ6_K>(dst), nb);
        case DType::Q8_K:
            return qref::quantize_q8_k(src, as_blocks<BlockQ8_K>(dst), nb);
        default:
            unsupported(type, "quantize");
    }
}

float vec_dot_f32(DType type, const void* row, const float* x, int64_t n) {
    n_blocks(type, n);
    switch (type) {
        case DType::F32:
            return dot_plain(static_cast<const float*>(row), x, n, identity, identity);
        case DType::F16:
            return dot_plain(as_u16(row), x, n, fp16_to_fp32, identity);
        case DType::BF16:
            return dot_plain(as_u16(row), x, n, bf16_to_fp32, identity);
        case DType::Q4_0:
        case DType::Q4_1:
        case DType::Q5_0:
        case DType::Q5_1:
        case DType::Q8_0:
        case DType::Q8_1:
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K:
        case DType::Q8_K:
            return dot_dequantized(type, row, x, n);
        default:
            unsupported(type, "dot product");
    }
}

float vec_dot_act(DType type, const void* row, const void* xa, int64_t n) {
    const int64_t nb = n_blocks(type, n);
    switch (type) {
        case DType::F32:
            return dot_plain(static_cast<const float*>(row), static_cast<const float*>(xa), n,
                             identity, identity);
        case DType::F16:
            return dot_plain(as_u16(row), as_u16(xa), n, fp16_to_fp32, fp16_to_fp32);
        case DType::BF16:
            return dot_plain(as_u16(row), as_u16(xa), n, bf16_to_fp32, bf16_to_fp32);
        case DType::Q4_0:
            return qref::dot_q4_0_q8_0(as_blocks<BlockQ4_0>(row), as_blocks<BlockQ8_0>(xa), nb);
        case DType::Q4_1:
            return qref::dot_q4_1_q8_1(as_blocks<BlockQ4_1>(row), as_blocks<BlockQ8_1>(xa), nb);
        case DType::Q5_0:
            return qref::dot_q5_0_q8_0(as_blocks<BlockQ5_0>(row), as_blocks<BlockQ8_0>(xa), nb);
        case DType::Q5_1:
            return qref::dot_q5_1_q8_1(as_blocks<BlockQ5_1>(row), as_blocks<BlockQ8_1>(xa), nb);
        case DType::Q8_0:
            return qref::dot_q8_0_q8_0(as_blocks<BlockQ8_0>(row), as_blocks<BlockQ8_0>(xa), nb);
        case DType::Q4_K:
            return qref::dot_q4_k_q8_k(as_blocks<BlockQ4_K>(row), as_blocks<BlockQ8_K>(xa), nb);
        case DType::Q5_K:
            return qref::dot_q5_k_q8_k(as_blocks<BlockQ5_K>(row), as_blocks<BlockQ8_K>(xa), nb);
        case DType::Q6_K:
            return qref::dot_q6_k_q8_k(as_blocks<BlockQ6_K>(row), as_blocks<BlockQ8_K>(xa), nb);
        default:
            unsupported(type, "matrix product");
    }
}

}  // namespace troupe
