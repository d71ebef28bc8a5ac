// Scalar conversions between float and the 16-bit float formats stored in model files.
// IEEE half (F16) and bfloat16 (BF16) are kept as uint16_t bit patterns.
#pragma once

#include <cstdint>
#include <cstring>

namespace troupe {

inline float bits_to_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline uint32_t float_to_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// Exact for every half value, including subnormals, infinities and NaN.
inline float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (mant << 13));  // inf / nan
    if (exp == 0) {
        if (mant == 0) return bits_to_float(sign);
        // subnormal: value = mant * 2^-24
        float v = float(mant) * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return bits_to_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

// Round to nearest even, as the F16C instruction and ggml do.
inline uint16_t fp32_to_fp16(float f) {
    const uint32_t x = float_to_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // nan
    if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflow to inf
    if (abs < 0x38800000u) {                                  // subnormal or zero in half
        // Add 0.5 (in float) so the hardware rounds the mantissa for us.
        const float v = bits_to_float(abs) + 0.5f;
        return uint16_t(sign | (float_to_bits(v) - 0x3f000000u));
    }
    const uint32_t mant_odd = (abs >> 13) & 1u;
    const uint32_t rounded = abs + 0xc8000fffu + mant_odd;  // rebias exponent, round to even
    return uint16_t(sign | (rounded >> 13));
}

inline float bf16_to_fp32(uint16_t h) {
    return bits_to_float(uint32_t(h) << 16);
}

// Round to nearest even; NaN stays NaN (quiet).
inline uint16_t fp32_to_bf16(float f) {
    uint32_t u = float_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 64u);
    return uint16_t((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

// fp32_to_bf16 with subnormal results flushed to zero, sign kept: how the BF16 KV cache holds
// K and V and how the attention kernels round queries for it (the BF16 dot-product
// instructions read subnormal inputs as zero, so no path may see one).
inline uint16_t fp32_to_bf16_ftz(float f) {
    const uint16_t h = fp32_to_bf16(f);
    return (h & 0x7f80u) == 0 ? uint16_t(h & 0x8000u) : h;
}

}  // namespace troupe
