#include "tensor/types.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "util/error.h"

namespace troupe {

namespace {

struct Entry {
    uint32_t id;
    TypeTraits traits;
};

// Sizes follow ggml's block structs (ggml-common.h); has_compute marks what Troupe runs.
constexpr Entry kTypes[] = {
    {0, {"f32", 1, 4, false, true}},
    {1, {"f16", 1, 2, false, true}},
    {2, {"q4_0", 32, 18, true, true}},
    {3, {"q4_1", 32, 20, true, true}},
    {6, {"q5_0", 32, 22, true, true}},
    {7, {"q5_1", 32, 24, true, true}},
    {8, {"q8_0", 32, 34, true, true}},
    {9, {"q8_1", 32, 36, true, false}},
    {10, {"q2_K", 256, 84, true, false}},
    {11, {"q3_K", 256, 110, true, false}},
    {12, {"q4_K", 256, 144, true, true}},
    {13, {"q5_K", 256, 176, true, true}},
    {14, {"q6_K", 256, 210, true, true}},
    {15, {"q8_K", 256, 292, true, false}},
    {16, {"iq2_xxs", 256, 66, true, false}},
    {17, {"iq2_xs", 256, 74, true, false}},
    {18, {"iq3_xxs", 256, 98, true, false}},
    {19, {"iq1_s", 256, 50, true, false}},
    {20, {"iq4_nl", 32, 18, true, false}},
    {21, {"iq3_s", 256, 110, true, false}},
    {22, {"iq2_s", 256, 82, true, false}},
    {23, {"iq4_xs", 256, 136, true, false}},
    {24, {"i8", 1, 1, false, false}},
    {25, {"i16", 1, 2, false, false}},
    {26, {"i32", 1, 4, false, false}},
    {27, {"i64", 1, 8, false, false}},
    {28, {"f64", 1, 8, false, false}},
    {29, {"iq1_m", 256, 56, true, false}},
    {30, {"bf16", 1, 2, false, true}},
    {34, {"tq1_0", 256, 54, true, false}},
    {35, {"tq2_0", 256, 66, true, false}},
    {39, {"mxfp4", 32, 17, true, false}},
};

}  // namespace

std::optional<TypeTraits> type_traits(uint32_t type) {
    for (const Entry& e : kTypes)
        if (e.id == type) return e.traits;
    return std::nullopt;
}

const TypeTraits& traits(DType type) {
    for (const Entry& e : kTypes)
        if (e.id == uint32_t(type)) return e.traits;
    check_failed("known DType", __FILE__, __LINE__);
}

const char* type_name(DType type) { return traits(type).name; }

std::optional<DType> type_from_name(const std::string& name) {
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    for (const Entry& e : kTypes) {
        std::string n = e.traits.name;
        std::transform(n.begin(), n.end(), n.begin(),
                       [](unsigned char c) { return char(std::tolower(c)); });
        if (n == lower) return DType(e.id);
    }
    return std::nullopt;
}

size_t row_bytes(DType type, int64_t n) {
    const TypeTraits& t = traits(type);
    TROUPE_CHECK(n % t.block_size == 0);
    return size_t(n / t.block_size) * t.type_size;
}

}  // namespace troupe
