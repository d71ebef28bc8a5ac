#include "kernels/ops_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/weight_layout.h"
#include "tensor/quant_ref.h"
#include "util/error.h"
#include "util/fp16.h"

namespace troupe::ops::ref {

void matmul(const Weight& w, const float* x, float* y, int64_t n_tokens) {
    const DType at = act_type(w.type);
    const size_t xa_bytes = row_bytes(at, w.n_in);
    std::vector<uint8_t> xa(xa_bytes * size_t(n_tokens));
    for (int64_t t = 0; t < n_tokens; ++t)
        quantize_row(at, x + t * w.n_in, xa.data() + size_t(t) * xa_bytes, w.n_in);
    std::vector<uint8_t> tmp(row_bytes(w.type, w.n_in));
    for (int64_t o = 0; o < w.n_out; ++o) {
        const uint8_t* row = file_row(w, o, tmp.data());
        for (int64_t t = 0; t < n_tokens; ++t)
            y[t * w.n_out + o] = vec_dot_act(w.type, row, xa.data() + size_t(t) * xa_bytes, w.n_in);
    }
}

void get_rows(const Weight& w, const int32_t* ids, int64_t n_ids, float* out) {
    std::vector<uint8_t> tmp(w.layout == WeightLayout::Rows ? 0 : row_bytes(w.type, w.n_in));
    for (int64_t r = 0; r < n_ids; ++r) {
        TROUPE_CHECK(ids[r] >= 0 && ids[r] < w.n_out);
        dequantize_row(w.type, file_row(w, ids[r], tmp.data()), out + r * w.n_in, w.n_in);
    }
}

void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t dim,
              float eps) {
    for (int64_t r = 0; r < n_rows; ++r) {
        const float* xr = x + r * dim;
        float* yr = y + r * dim;
        double sum = 0.0;  // llama.cpp accumulates the sum of squares in double
        for (int64_t i = 0; i < dim; ++i) sum += double(xr[i]) * double(xr[i]);
        const float scale = 1.0f / std::sqrt(float(sum / double(dim)) + eps);
        for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * scale * weight[i];
    }
}

namespace {
float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return float(n_dims) * std::log(float(n_ctx_orig) / (n_rot * 2.0f * float(M_PI))) /
           (2.0f * std::log(base));
}
}  // namespace

void rope_cos_sin(int32_t pos, const RopeParams& p, float* cos_out, float* sin_out) {
    const int n_dims = p.n_rot;
    float corr0 = 0.0f, corr1 = 0.0f;
    if (p.ext_factor != 0.0f) {
        const float start =
            std::floor(yarn_corr_dim(n_dims, p.n_ctx_orig, p.beta_fast, p.freq_base));
        const float end = std::ceil(yarn_corr_dim(n_dims, p.n_ctx_orig, p.beta_slow, p.freq_base));
        corr0 = std::max(0.0f, start);
        corr1 = std::min(float(n_dims - 1), end);
    }
    const float theta_scale = std::pow(p.freq_base, -2.0f / float(n_dims));
    float theta_base = float(pos);
    for (int i0 = 0; i0 < n_dims; i0 += 2) {
        const float ff = p.freq_factors ? p.freq_factors[i0 / 2] : 1.0f;
        const float theta_extrap = theta_base / ff;
        const float theta_interp = p.freq_scale * theta_extrap;
        float theta = theta_interp;
        float mscale = p.attn_factor;
        if (p.ext_factor != 0.0f) {
            const float y = (float(i0 / 2) - corr0) / std::max(0.001f, corr1 - corr0);
            const float ramp = 1.0f - std::min(1.0f, std::max(0.0f, y));
            const float mix = ramp * p.ext_factor;
            theta = theta_interp * (1.0f - mix) + theta_extrap * mix;
            mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
        }
        cos_out[i0 / 2] = std::cos(theta) * mscale;
        sin_out[i0 / 2] = std::sin(theta) * mscale;
        theta_base *= theta_scale;  // iterative, as llama.cpp computes it
    }
}

void rope(float* x, const int32_t* pos, int64_t n_rows, int n_heads, int head_dim,
          const RopeParams& p) {
    TROUPE_CHECK(p.n_rot > 0 && p.n_rot <= head_dim && p.n_rot % 2 == 0);
    std::vector<float> cs(size_t(p.n_rot / 2)), sn(size_t(p.n_rot / 2));
    for (int64_t r = 0; r < n_rows; ++r) {
        rope_cos_sin(pos[r], p, cs.data(), sn.data());
        for (int h = 0; h < n_heads; ++h) {
            float* v = x + (r * n_heads + h) * head_dim;
            for (int i = 0; i < p.n_rot / 2; ++i) {
                const int a = p.mode == RopeMode::Norm ? 2 * i : i;
                const int b = p.mode == RopeMode::Norm ? 2 * i + 1 : i + p.n_rot / 2;
                const float x0 = v[a], x1 = v[b];
                v[a] = x0 * cs[i] - x1 * sn[i];
                v[b] = x0 * sn[i] + x1 * cs[i];
            }
        }
    }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
}

void add_inplace(float* y, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

int64_t argmax(const float* x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;
    return best;
}

void softmax(float* x, int64_t n) {
    if (n <= 0) return;
    float mx = x[0];
    for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - mx);
        sum += x[i];
    }
    const float inv = float(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

float kv_load(DType type, const uint8_t* base, int64_t i) {
    if (type == DType::F16 || type == DType::BF16) {
        uint16_t h;
        std::memcpy(&h, base + 2 * i, 2);
        return type == DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
    }
    float f;
    std::memcpy(&f, base + 4 * i, 4);
    return f;
}

namespace {
// Element 0 of position pos of kv head `head` in base (kv.k or kv.v), whose slots are
// slot_elems elements apart within a block.
uint8_t* kv_slot(const KvLayerView& kv, uint8_t* base, const int32_t* block_table, int32_t pos,
                 int head, size_t slot_elems) {
    const size_t elem = kv_elem_bytes(kv.type);
    const int32_t block = block_table[pos / kv.block_size];
    const size_t slot = size_t(pos % kv.block_size);
    return base + kv_block_offset(kv, block) + size_t(head) * kv.head_stride +
           slot * slot_elems * elem;
}

// The V row of position pos of kv head `head`.
uint8_t* kv_vec(const KvLayerView& kv, const int32_t* block_table, int32_t pos, int head) {
    return kv_slot(kv, kv.v, block_table, pos, head, size_t(kv.head_dim));
}

// Element d of the K vector of position pos of kv head `head` (stored transposed within the
// block: kv_key_elem).
uint8_t* kv_key(const KvLayerView& kv, const int32_t* block_table, int32_t pos, int head, int d) {
    uint8_t* piece = kv_slot(kv, kv.k, block_table, pos - pos % kv.block_size, head, 1);
    return piece + kv_key_elem(kv, d, size_t(pos % kv.block_size)) * kv_elem_bytes(kv.type);
}

// dst = src (one element) in `type`.
void store_elem(DType type, uint8_t* dst, float src) {
    if (type == DType::F16 || type == DType::BF16) {
        const uint16_t h = type == DType::F16 ? fp32_to_fp16(src) : fp32_to_bf16_ftz(src);
        std::memcpy(dst, &h, 2);
    } else {
        std::memcpy(dst, &src, 4);
    }
}
}  // namespace

void kv_store_cols(const KvLayerView& kv, bool values, int c0, int c1, const int32_t* block_table,
                   const int32_t* pos, const float* src, int64_t n) {
    TROUPE_CHECK(kv_type_supported(kv.type, kv.head_dim));
    const int row = kv.n_kv_head * kv.head_dim;
    TROUPE_CHECK(0 <= c0 && c0 <= c1 && c1 <= row);
    const size_t elem = kv_elem_bytes(kv.type);
    for (int64_t r = 0; r < n; ++r)
        for (int c = c0; c < c1; ++c) {
            const int h = c / kv.head_dim, d = c % kv.head_dim;
            uint8_t* dst = values ? kv_vec(kv, block_table, pos[r], h) + size_t(d) * elem
                                  : kv_key(kv, block_table, pos[r], h, d);
            store_elem(kv.type, dst, src[r * row + c]);
        }
}

void kv_store(const KvLayerView& kv, const int32_t* block_table, const int32_t* pos, const float* k,
              const float* v, int64_t n) {
    const int row = kv.n_kv_head * kv.head_dim;
    ref::kv_store_cols(kv, false, 0, row, block_table, pos, k, n);
    ref::kv_store_cols(kv, true, 0, row, block_table, pos, v, n);
}

void attention(const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs, int n_head,
               float scale) {
    TROUPE_CHECK(n_head % kv.n_kv_head == 0);
    const int group = n_head / kv.n_kv_head;
    const int d = kv.head_dim;
    std::vector<float> scores, qb(static_cast<size_t>(d));
    for (int s = 0; s < n_seqs; ++s) {
        const AttentionSeq& sq = seqs[s];
        for (int r = 0; r < sq.n_q; ++r) {
            const int n_ctx = sq.first_pos + r + 1;
            scores.resize(size_t(n_ctx));
            for (int h = 0; h < n_head; ++h) {
                const int kvh = h / group;
                const float* q = sq.q + (size_t(r) * n_head + h) * d;
                // A BF16 cache: the scaled query rounded as the kernels round it.
                const bool bf16 = kv.type == DType::BF16;
                for (int i = 0; bf16 && i < d; ++i)
                    qb[size_t(i)] = bf16_to_fp32(fp32_to_bf16_ftz(q[i] * scale));
                for (int p = 0; p < n_ctx; ++p) {
                    float dot = 0.0f;
                    for (int i = 0; i < d; ++i) {
                        const float k = kv_load(kv.type, kv_key(kv, sq.block_table, p, kvh, i), 0);
                        dot += (bf16 ? qb[size_t(i)] : q[i]) * k;
                    }
                    scores[p] = bf16 ? dot : dot * scale;
                }
                // The exponentials e_p = exp(s_p - max s); out = sum_p w_p v_p / sum_p e_p,
                // w_p = e_p, or for a BF16 cache e_p rounded to BF16 (as the kernels weight
                // its values; they round exp(s_p - m) for their running maximum m, so the two
                // roundings differ by up to 2^-9 of each weight).
                float mx = scores[0];
                for (int p = 1; p < n_ctx; ++p) mx = std::max(mx, scores[p]);
                double sum = 0.0;
                for (int p = 0; p < n_ctx; ++p) {
                    scores[p] = std::exp(scores[p] - mx);
                    sum += scores[p];
                }
                const float inv = float(1.0 / sum);
                float* o = sq.out + (size_t(r) * n_head + h) * d;
                std::fill(o, o + d, 0.0f);
                for (int p = 0; p < n_ctx; ++p) {
                    const uint8_t* vp = kv_vec(kv, sq.block_table, p, kvh);
                    const float w =
                        (bf16 ? bf16_to_fp32(fp32_to_bf16_ftz(scores[p])) : scores[p]) * inv;
                    for (int i = 0; i < d; ++i) o[i] += w * kv_load(kv.type, vp, i);
                }
            }
        }
    }
}

}  // namespace troupe::ops::ref
