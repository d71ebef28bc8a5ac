// Scalar reference for the K-quants (super-blocks of 256 values): Q4_K, Q5_K, Q6_K and the
// activation type Q8_K.
//
// Q4_K / Q5_K: 8 sub-blocks of 32, value = d * sc_j * q - dmin * m_j, with 6-bit sc_j and m_j.
//   For each sub-block the encoder searches a (scale, min) pair that minimises a weighted
//   squared error (weights |x| + rms(x), favouring large values), then quantizes the 8 scales
//   and 8 mins to 6 bits against the block's largest, and re-rounds every value with the
//   scales actually stored.
// Q6_K: 16 sub-blocks of 16, value = d * sc_j * (q - 32), 8-bit signed sc_j. Each sub-block
//   tries 19 candidate scales around amax / 32 and keeps the best (weights x^2).
#include <algorithm>
#include <cmath>

#include "tensor/quant_ref_impl.h"
#include "util/fp16.h"

namespace troupe::qref {

namespace {

constexpr int kSub = 32;                // Q4_K/Q5_K sub-block
constexpr int kNumSub = QK_K / kSub;    // 8
constexpr int kSub6 = 16;               // Q6_K sub-block
constexpr int kNumSub6 = QK_K / kSub6;  // 16
constexpr float kGroupMaxEps = 1e-15f;  // below this a group is treated as all zeros

int clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

// 6-bit scale and min of sub-block j from the 12 packed bytes: bytes 0-3 hold scales 0-3 (low
// 6 bits), bytes 4-7 mins 0-3; bytes 8-11 hold the low 4 bits of scales/mins 4-7, whose high
// 2 bits sit in the top bits of bytes 0-7.
void unpack_scale_min(int j, const uint8_t* q, int& sc, int& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Inverse of unpack_scale_min; call for j = 0..7 in order on a fresh array.
void pack_scale_min(int j, int sc, int m, uint8_t* q) {
    if (j < 4) {
        q[j] = uint8_t(sc);
        q[j + 4] = uint8_t(m);
    } else {
        q[j + 4] = uint8_t((sc & 0x0f) | ((m & 0x0f) << 4));
        q[j - 4] |= uint8_t((sc >> 4) << 6);
        q[j] |= uint8_t((m >> 4) << 6);
    }
}

// Weighted squared error of x ~ scale * L + min.
float fit_error(int n, const float* x, const float* w, const uint8_t* L, float scale, float min) {
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
        const float diff = scale * float(L[i]) + min - x[i];
        err += w[i] * (diff * diff);
    }
    return err;
}

// Levels of x for a given inverse scale and min, and the weighted sums of the least-squares
// fit of x ~ scale * l + min over them. Returns false when the fit is degenerate.
bool fit_scale_min_at(int n, int nmax, const float* x, const float* w, float sum_w, float sum_x,
                      float iscale, float min, uint8_t* L, float& scale_out, float& min_out) {
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
        L[i] = uint8_t(l);
        sum_l += w[i] * float(l);
        sum_l2 += w[i] * float(l) * float(l);
        sum_xl += w[i] * float(l) * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) return false;
    scale_out = (sum_w * sum_xl - sum_x * sum_l) / det;
    min_out = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (min_out > 0.0f) {  // the offset may only lower values: keep min <= 0
        min_out = 0.0f;
        scale_out = sum_xl / sum_l2;
    }
    return true;
}

// Searches scale > 0 and min <= 0 with x ~ scale * L + min, L in [0, nmax], minimising the
// weighted squared error: starts from the min/max range, then tries nstep + 1 inverse scales
// (nmax + rmin + rdelta * k) / range with a least-squares refit each. Returns the scale and
// stores -min (>= 0) in neg_min_out.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float rmin,
                    float rdelta, int nstep, float& neg_min_out) {
    float min = x[0], max = x[0], sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0.0f) min = 0.0f;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        neg_min_out = -min;
        return 0.0f;
    }
    float iscale = float(nmax) / (max - min);
    float scale = 1.0f / iscale;
    for (int i = 0; i < n; ++i)
        L[i] = uint8_t(clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax));
    float best = fit_error(n, x, w, L, scale, min);
    uint8_t trial[kSub];
    for (int k = 0; k <= nstep; ++k) {
        iscale = (rmin + rdelta * float(k) + float(nmax)) / (max - min);
        float s, m;
        if (!fit_scale_min_at(n, nmax, x, w, sum_w, sum_x, iscale, min, trial, s, m)) continue;
        const float err = fit_error(n, x, w, trial, s, m);
        if (err < best) {
            std::memcpy(L, trial, size_t(n));
            best = err;
            scale = s;
            min = m;
        }
    }
    neg_min_out = -min;
    return scale;
}

// Q4_K / Q5_K common part: fits the 8 sub-blocks, stores d, dmin and the packed 6-bit scales
// and mins, and returns the final levels L[256] (0..nmax) computed with the stored scales.
void quantize_scale_min_block(const float* x, int nmax, float rmin, int nstep, uint16_t& d_out,
                              uint16_t& dmin_out, uint8_t* packed, uint8_t* L) {
    float scales[kNumSub], mins[kNumSub], w[kSub];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < kNumSub; ++j) {
        const float* xs = x + kSub * j;
        float sum_x2 = 0.0f;
        for (int l = 0; l < kSub; ++l) sum_x2 += xs[l] * xs[l];
        const float av_x = std::sqrt(sum_x2 / float(kSub));
        for (int l = 0; l < kSub; ++l) w[l] = av_x + std::fabs(xs[l]);
        scales[j] = fit_scale_min(kSub, nmax, xs, w, L + kSub * j, rmin, 0.1f, nstep, mins[j]);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < kNumSub; ++j) {
        const int ls = std::min(63, int(uint8_t(nearest_int(inv_scale * scales[j]))));
        const int lm = std::min(63, int(uint8_t(nearest_int(inv_min * mins[j]))));
        pack_scale_min(j, ls, lm, packed);
    }
    d_out = fp32_to_fp16(max_scale / 63.0f);
    dmin_out = fp32_to_fp16(max_min / 63.0f);
    for (int j = 0; j < kNumSub; ++j) {
        int sc, m;
        unpack_scale_min(j, packed, sc, m);
        const float d = fp16_to_fp32(d_out) * float(sc);
        if (d == 0.0f) continue;
        const float dm = fp16_to_fp32(dmin_out) * float(m);
        for (int l = 0; l < kSub; ++l)
            L[kSub * j + l] = uint8_t(clamp_int(nearest_int((x[kSub * j + l] + dm) / d), 0, nmax));
    }
}

// Symmetric fit of 16 values to levels [-32, 31] (weights x^2): tries inverse scales
// -(32 + 0.1 k) / max for k = -9..9 with a least-squares scale each, keeps the best.
float fit_symmetric(const float* x, int8_t* L) {
    constexpr int nmax = 32;
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < kSub6; ++i) {
        if (std::fabs(x[i]) > amax) {
            amax = std::fabs(x[i]);
            max = x[i];
        }
    }
    if (amax < kGroupMaxEps) {
        for (int i = 0; i < kSub6; ++i) L[i] = 0;
        return 0.0f;
    }
    float scale = 0.0f, best = 0.0f;
    for (int k = 0; k <= 18; ++k) {  // k = 0 is the plain -nmax / max, then offsets -9..9
        const int off = k == 0 ? 0 : (k <= 9 ? k - 10 : k - 9);
        const float iscale = k == 0 ? float(-nmax) / max : -(float(nmax) + 0.1f * float(off)) / max;
        float sumlx = 0.0f, suml2 = 0.0f;
        int8_t trial[kSub6];
        for (int i = 0; i < kSub6; ++i) {
            const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            trial[i] = int8_t(l + nmax);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * float(l);
            suml2 += w * float(l) * float(l);
        }
        if (k == 0) {
            std::memcpy(L, trial, kSub6);
            scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
            best = scale * sumlx;
        } else if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            std::memcpy(L, trial, kSub6);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Accumulator of a K-quant dot in ggml's reference order: 8 float lanes (lane l takes the
// elements i = l mod 8) summed over the super-blocks, the mins term in a separate running sum,
// and the lanes added last. Following that order makes vec_dot_act equal to llama.cpp's
// reference dot bit for bit.
struct KDotAcc {
    float lane[8] = {};
    float rest = 0.0f;

    // Adds d * sum_i scale(i) * a_i * q8_i, the scale changing every `sub` values.
    void add_scaled(const int8_t* a, const int8_t* q8, const int* scales, int sub, float d) {
        int32_t aux[8] = {};
        for (int i = 0; i < QK_K; ++i) aux[i % 8] += scales[i / sub] * (int32_t(a[i]) * q8[i]);
        for (int l = 0; l < 8; ++l) lane[l] += d * float(aux[l]);
    }
    float total() const {
        float s = rest;
        for (int l = 0; l < 8; ++l) s += lane[l];
        return s;
    }
};

// Levels of a Q4_K / Q5_K block as int8 (q5 adds the high bit from qh), element order.
void unpack_q45(const uint8_t* qs, const uint8_t* qh, int8_t* a) {
    for (int j = 0; j < QK_K / 64; ++j) {
        for (int l = 0; l < 32; ++l) {
            a[64 * j + l] = int8_t(qs[32 * j + l] & 0x0f);
            a[64 * j + 32 + l] = int8_t(qs[32 * j + l] >> 4);
            if (qh) {
                a[64 * j + l] += int8_t(((qh[l] >> (2 * j)) & 1) << 4);
                a[64 * j + 32 + l] += int8_t(((qh[l] >> (2 * j + 1)) & 1) << 4);
            }
        }
    }
}

// Levels of a Q6_K block minus 32, element order.
void unpack_q6(const BlockQ6_K& b, int8_t* a) {
    for (int h = 0; h < QK_K / 128; ++h) {
        const uint8_t* ql = b.ql + 64 * h;
        const uint8_t* qh = b.qh + 32 * h;
        int8_t* o = a + 128 * h;
        for (int l = 0; l < 32; ++l) {
            o[l] = int8_t(((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32);
            o[l + 32] = int8_t(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
            o[l + 64] = int8_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            o[l + 96] = int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

// Levels 0..63 of a Q6_K block into ql (low 4 bits) and qh (high 2 bits): in each half of 128
// values, ql[l] holds elements l and l + 64, ql[l + 32] elements l + 32 and l + 96, and qh[l]
// the high bits of l, l + 32, l + 64, l + 96.
void pack_q6(const int8_t* L, BlockQ6_K& b) {
    for (int h = 0; h < QK_K / 128; ++h) {
        const int8_t* q = L + 128 * h;
        for (int l = 0; l < 32; ++l) {
            b.ql[64 * h + l] = uint8_t((q[l] & 0x0f) | ((q[l + 64] & 0x0f) << 4));
            b.ql[64 * h + l + 32] = uint8_t((q[l + 32] & 0x0f) | ((q[l + 96] & 0x0f) << 4));
            b.qh[32 * h + l] = uint8_t((q[l] >> 4) | ((q[l + 32] >> 4) << 2) |
                                       ((q[l + 64] >> 4) << 4) | ((q[l + 96] >> 4) << 6));
        }
    }
}

// Q4_K / Q5_K dot with Q8_K: the mins term uses the activations' per-16 sums (bsums).
void add_scale_min(KDotAcc& acc, const BlockQ8_K& y, const int8_t* a, const uint8_t* packed,
                   uint16_t d, uint16_t dmin) {
    int scales[kNumSub], mins[kNumSub];
    for (int j = 0; j < kNumSub; ++j) unpack_scale_min(j, packed, scales[j], mins[j]);
    int32_t msum = 0;
    for (int j = 0; j < QK_K / 16; ++j) msum += int32_t(y.bsums[j]) * mins[j / 2];
    acc.add_scaled(a, y.qs, scales, kSub, fp16_to_fp32(d) * y.d);
    acc.rest -= fp16_to_fp32(dmin) * y.d * float(msum);
}

}  // namespace

void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb) {
    int8_t a[QK_K];
    for (int64_t i = 0; i < nb; ++i, y += QK_K) {
        const float d = fp16_to_fp32(x[i].d), dmin = fp16_to_fp32(x[i].dmin);
        unpack_q45(x[i].qs, nullptr, a);
        for (int j = 0; j < kNumSub; ++j) {
            int sc, m;
            unpack_scale_min(j, x[i].scales, sc, m);
            const float d1 = d * float(sc), m1 = dmin * float(m);
            for (int l = 0; l < kSub; ++l) y[kSub * j + l] = d1 * float(a[kSub * j + l]) - m1;
        }
    }
}

void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb) {
    int8_t a[QK_K];
    for (int64_t i = 0; i < nb; ++i, y += QK_K) {
        const float d = fp16_to_fp32(x[i].d), dmin = fp16_to_fp32(x[i].dmin);
        unpack_q45(x[i].qs, x[i].qh, a);
        for (int j = 0; j < kNumSub; ++j) {
            int sc, m;
            unpack_scale_min(j, x[i].scales, sc, m);
            const float d1 = d * float(sc), m1 = dmin * float(m);
            for (int l = 0; l < kSub; ++l) y[kSub * j + l] = d1 * float(a[kSub * j + l]) - m1;
        }
    }
}

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
    int8_t a[QK_K];
    for (int64_t i = 0; i < nb; ++i, y += QK_K) {
        const float d = fp16_to_fp32(x[i].d);
        unpack_q6(x[i], a);
        for (int l = 0; l < QK_K; ++l) y[l] = d * float(x[i].scales[l / kSub6]) * float(a[l]);
    }
}

void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK_K)
        for (int l = 0; l < QK_K; ++l) y[l] = x[i].d * float(x[i].qs[l]);
}

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; ++i, x += QK_K) {
        std::memset(y[i].scales, 0, sizeof(y[i].scales));
        quantize_scale_min_block(x, 15, -1.0f, 20, y[i].d, y[i].dmin, y[i].scales, L);
        for (int j = 0; j < QK_K / 64; ++j)
            for (int l = 0; l < 32; ++l)
                y[i].qs[32 * j + l] = uint8_t(L[64 * j + l] | (L[64 * j + 32 + l] << 4));
    }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; ++i, x += QK_K) {
        std::memset(y[i].scales, 0, sizeof(y[i].scales));
        quantize_scale_min_block(x, 31, -0.5f, 15, y[i].d, y[i].dmin, y[i].scales, L);
        std::memset(y[i].qh, 0, sizeof(y[i].qh));
        for (int j = 0; j < QK_K / 64; ++j) {
            for (int l = 0; l < 32; ++l) {
                const int lo = L[64 * j + l], hi = L[64 * j + 32 + l];
                y[i].qs[32 * j + l] = uint8_t((lo & 0x0f) | ((hi & 0x0f) << 4));
                y[i].qh[l] |= uint8_t(((lo >> 4) << (2 * j)) | ((hi >> 4) << (2 * j + 1)));
            }
        }
    }
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
    int8_t L[QK_K];
    float scales[kNumSub6];
    for (int64_t i = 0; i < nb; ++i, x += QK_K) {
        float max_scale = 0.0f, max_abs_scale = 0.0f;
        for (int j = 0; j < kNumSub6; ++j) {
            scales[j] = fit_symmetric(x + kSub6 * j, L + kSub6 * j);
            if (std::fabs(scales[j]) > max_abs_scale) {
                max_abs_scale = std::fabs(scales[j]);
                max_scale = scales[j];
            }
        }
        std::memset(&y[i], 0, sizeof(BlockQ6_K));
        if (max_abs_scale < kGroupMaxEps) continue;  // all zeros (d = 0 encodes as 0)
        const float iscale = -128.0f / max_scale;
        y[i].d = fp32_to_fp16(1.0f / iscale);
        for (int j = 0; j < kNumSub6; ++j)
            y[i].scales[j] = int8_t(std::min(127, nearest_int(iscale * scales[j])));
        for (int j = 0; j < kNumSub6; ++j) {
            const float d = fp16_to_fp32(y[i].d) * float(y[i].scales[j]);
            if (d == 0.0f) continue;
            for (int l = 0; l < kSub6; ++l)
                L[kSub6 * j + l] =
                    int8_t(clamp_int(nearest_int(x[kSub6 * j + l] / d), -32, 31) + 32);
        }
        pack_q6(L, y[i]);
    }
}

// Q8_K: iscale = -127 / max with max the signed value of largest magnitude; d = 1 / iscale
// (f32); bsums[j] = sum of the 16 levels of group j.
void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int l = 0; l < QK_K; ++l) {
            if (std::fabs(x[l]) > amax) {
                amax = std::fabs(x[l]);
                max = x[l];
            }
        }
        std::memset(&y[i], 0, sizeof(BlockQ8_K));
        if (amax == 0.0f) continue;
        const float iscale = -127.0f / max;
        for (int l = 0; l < QK_K; ++l)
            y[i].qs[l] = int8_t(clamp_int(nearest_int(iscale * x[l]), -128, 127));
        for (int j = 0; j < QK_K / 16; ++j) {
            int sum = 0;
            for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * j + l];
            y[i].bsums[j] = int16_t(sum);
        }
        y[i].d = 1.0f / iscale;
    }
}

float dot_q4_k_q8_k(const BlockQ4_K* x, const BlockQ8_K* y, int64_t nb) {
    int8_t a[QK_K];
    KDotAcc acc;
    for (int64_t i = 0; i < nb; ++i) {
        unpack_q45(x[i].qs, nullptr, a);
        add_scale_min(acc, y[i], a, x[i].scales, x[i].d, x[i].dmin);
    }
    return acc.total();
}

float dot_q5_k_q8_k(const BlockQ5_K* x, const BlockQ8_K* y, int64_t nb) {
    int8_t a[QK_K];
    KDotAcc acc;
    for (int64_t i = 0; i < nb; ++i) {
        unpack_q45(x[i].qs, x[i].qh, a);
        add_scale_min(acc, y[i], a, x[i].scales, x[i].d, x[i].dmin);
    }
    return acc.total();
}

float dot_q6_k_q8_k(const BlockQ6_K* x, const BlockQ8_K* y, int64_t nb) {
    int8_t a[QK_K];
    KDotAcc acc;
    for (int64_t i = 0; i < nb; ++i) {
        unpack_q6(x[i], a);
        int scales[kNumSub6];
        for (int j = 0; j < kNumSub6; ++j) scales[j] = x[i].scales[j];
        acc.add_scaled(a, y[i].qs, scales, kSub6, fp16_to_fp32(x[i].d) * y[i].d);
    }
    return acc.total();
}

}  // namespace troupe::qref
