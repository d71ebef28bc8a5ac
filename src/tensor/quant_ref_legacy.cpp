// Scalar reference for the 32-value block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1.
// Element j of a block sits in the low nibble of qs[j] for j < 16 and in the high nibble of
// qs[j - 16] otherwise; the fifth bit of a Q5 element j is bit j of the little-endian qh.
#include <cfloat>
#include <cmath>

#include "tensor/quant_ref_impl.h"
#include "util/fp16.h"

namespace troupe::qref {

namespace {

constexpr int kHalf = 16;  // a 32-value block is stored as two halves of 16

uint32_t load_qh(const uint8_t qh[4]) {
    uint32_t v;
    std::memcpy(&v, qh, 4);
    return v;
}

// The high (fifth) bit of elements j and j + 16, shifted to bit 4.
int high_bit(uint32_t qh, int j) {
    return int((qh >> j) & 1u) << 4;
}

// The value of largest magnitude (the first one on ties), with its sign.
float signed_absmax(const float* x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; ++j) {
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

void min_max(const float* x, int n, float& min, float& max) {
    min = FLT_MAX;
    max = -FLT_MAX;
    for (int j = 0; j < n; ++j) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
}

// Symmetric 8-bit block: d = amax / 127, q = round(x / d) (llama.cpp's reference quantizer,
// rounding halves away from zero). Returns d before its rounding to f16, and sum(q).
struct Q8Block {
    float d;
    int sum;
};

Q8Block quantize_block_q8(const float* x, uint16_t& d_out, int8_t* qs) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    d_out = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < QK8_0; ++j) {
        const float r = std::round(x[j] * id);
        qs[j] = int8_t(r >= -127.0f && r <= 127.0f ? int(r) : (r > 0 ? 127 : -127));
        sum += qs[j];
    }
    return {d, sum};
}

}  // namespace

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK4_0) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kHalf; ++j) {
            y[j] = float((x[i].qs[j] & 0x0f) - 8) * d;
            y[j + kHalf] = float((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK4_1) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        for (int j = 0; j < kHalf; ++j) {
            y[j] = float(x[i].qs[j] & 0x0f) * d + m;
            y[j + kHalf] = float(x[i].qs[j] >> 4) * d + m;
        }
    }
}

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK5_0) {
        const float d = fp16_to_fp32(x[i].d);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < kHalf; ++j) {
            y[j] = float(((x[i].qs[j] & 0x0f) | high_bit(qh, j)) - 16) * d;
            y[j + kHalf] = float(((x[i].qs[j] >> 4) | high_bit(qh, j + kHalf)) - 16) * d;
        }
    }
}

void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK5_1) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < kHalf; ++j) {
            y[j] = float((x[i].qs[j] & 0x0f) | high_bit(qh, j)) * d + m;
            y[j + kHalf] = float((x[i].qs[j] >> 4) | high_bit(qh, j + kHalf)) * d + m;
        }
    }
}

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK8_0) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_0; ++j) y[j] = float(x[i].qs[j]) * d;
    }
}

void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK8_1) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_1; ++j) y[j] = float(x[i].qs[j]) * d;
    }
}

// Q4_0: d = -max / 8 where max is the signed value of largest magnitude, so that value maps
// exactly to level 0 (-8 d) and the other end of the range keeps 7 levels.
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += QK4_0) {
        const float d = signed_absmax(x, QK4_0) / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < kHalf; ++j) {
            const int q0 = trunc_clamp(x[j] * id + 8.5f, 0, 15);
            const int q1 = trunc_clamp(x[j + kHalf] * id + 8.5f, 0, 15);
            y[i].qs[j] = uint8_t(q0 | (q1 << 4));
        }
    }
}

// Q4_1: the block's range [min, max] split into 15 steps.
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += QK4_1) {
        float min, max;
        min_max(x, QK4_1, min, max);
        const float d = (max - min) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        for (int j = 0; j < kHalf; ++j) {
            const int q0 = trunc_clamp((x[j] - min) * id + 0.5f, 0, 15);
            const int q1 = trunc_clamp((x[j + kHalf] - min) * id + 0.5f, 0, 15);
            y[i].qs[j] = uint8_t(q0 | (q1 << 4));
        }
    }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += QK5_0) {
        const float d = signed_absmax(x, QK5_0) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < kHalf; ++j) {
            const int q0 = trunc_clamp(x[j] * id + 16.5f, 0, 31);
            const int q1 = trunc_clamp(x[j + kHalf] * id + 16.5f, 0, 31);
            y[i].qs[j] = uint8_t((q0 & 0x0f) | ((q1 & 0x0f) << 4));
            qh |= uint32_t(q0 >> 4) << j;
            qh |= uint32_t(q1 >> 4) << (j + kHalf);
        }
        std::memcpy(y[i].qh, &qh, 4);
    }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += QK5_1) {
        float min, max;
        min_max(x, QK5_1, min, max);
        const float d = (max - min) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < kHalf; ++j) {
            const int q0 = trunc_clamp((x[j] - min) * id + 0.5f, 0, 31);
            const int q1 = trunc_clamp((x[j + kHalf] - min) * id + 0.5f, 0, 31);
            y[i].qs[j] = uint8_t((q0 & 0x0f) | ((q1 & 0x0f) << 4));
            qh |= uint32_t(q0 >> 4) << j;
            qh |= uint32_t(q1 >> 4) << (j + kHalf);
        }
        std::memcpy(y[i].qh, &qh, 4);
    }
}

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += QK8_0) quantize_block_q8(x, y[i].d, y[i].qs);
}

// Q8_1 also stores s = d * sum(q), so a Q4_1/Q5_1 dot can add the weights' minimum in one step.
void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += QK8_1) {
        const Q8Block b = quantize_block_q8(x, y[i].d, y[i].qs);
        y[i].s = fp32_to_fp16(float(b.sum) * b.d);
    }
}

float dot_q4_0_q8_0(const BlockQ4_0* x, const BlockQ8_0* y, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
        int sumi = 0;
        for (int j = 0; j < kHalf; ++j) {
            sumi += ((x[i].qs[j] & 0x0f) - 8) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + kHalf];
        }
        sum += float(sumi) * fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d);
    }
    return sum;
}

float dot_q4_1_q8_1(const BlockQ4_1* x, const BlockQ8_1* y, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
        int sumi = 0;
        for (int j = 0; j < kHalf; ++j) {
            sumi += (x[i].qs[j] & 0x0f) * y[i].qs[j];
            sumi += (x[i].qs[j] >> 4) * y[i].qs[j + kHalf];
        }
        sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * float(sumi) +
               fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
    }
    return sum;
}

float dot_q5_0_q8_0(const BlockQ5_0* x, const BlockQ8_0* y, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
        const uint32_t qh = load_qh(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < kHalf; ++j) {
            sumi += (((x[i].qs[j] & 0x0f) | high_bit(qh, j)) - 16) * y[i].qs[j];
            sumi += (((x[i].qs[j] >> 4) | high_bit(qh, j + kHalf)) - 16) * y[i].qs[j + kHalf];
        }
        sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * float(sumi);
    }
    return sum;
}

float dot_q5_1_q8_1(const BlockQ5_1* x, const BlockQ8_1* y, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
        const uint32_t qh = load_qh(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < kHalf; ++j) {
            sumi += ((x[i].qs[j] & 0x0f) | high_bit(qh, j)) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) | high_bit(qh, j + kHalf)) * y[i].qs[j + kHalf];
        }
        sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * float(sumi) +
               fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
    }
    return sum;
}

float dot_q8_0_q8_0(const BlockQ8_0* x, const BlockQ8_0* y, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; ++j) sumi += x[i].qs[j] * y[i].qs[j];
        sum += float(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    return sum;
}

}  // namespace troupe::qref
