// Tensor element types as numbered in GGUF files (ggml's enum), with their block geometry.
// A row of n values of a quantized type is n / block_size blocks of type_size bytes each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace troupe {

enum class DType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
};

struct TypeTraits {
    const char* name;    // ggml's name, e.g. "q4_K"
    int64_t block_size;  // values per block (1 for plain types)
    size_t type_size;    // bytes per block
    bool is_quantized;
    bool has_compute;    // dequantize and dot product are implemented for this type
};

// Traits of a known type; nullopt for a number ggml never assigned (or retired).
std::optional<TypeTraits> type_traits(uint32_t type);
const TypeTraits& traits(DType type);  // for a DType value known to be valid

const char* type_name(DType type);
std::optional<DType> type_from_name(const std::string& name);  // case-insensitive

// Bytes of a row of n values. n must be a multiple of the block size.
size_t row_bytes(DType type, int64_t n);

}  // namespace troupe
