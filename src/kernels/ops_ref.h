// Scalar reference implementations of every op in ops.h, same signatures and contracts.
// Written for clarity, not speed: they define what the fast kernels must compute.
#pragma once

#include "kernels/ops.h"

namespace troupe::ops::ref {

void matmul(const Weight& w, const float* x, float* y, int64_t n_tokens);
void get_rows(const Weight& w, const int32_t* ids, int64_t n_ids, float* out);
void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t dim,
              float eps);
void rope(float* x, const int32_t* pos, int64_t n_rows, int n_heads, int head_dim,
          const RopeParams& p);
void swiglu(const float* gate, const float* up, float* out, int64_t n);
void add_inplace(float* y, const float* x, int64_t n);
void softmax(float* x, int64_t n);
int64_t argmax(const float* x, int64_t n);
void kv_store(const KvLayerView& kv, const int32_t* block_table, const int32_t* pos, const float* k,
              const float* v, int64_t n);
void kv_store_cols(const KvLayerView& kv, bool values, int c0, int c1, const int32_t* block_table,
                   const int32_t* pos, const float* src, int64_t n);
void attention(const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs, int n_head,
               float scale);

// Rotation angles of llama.cpp's rope for one position: cos/sin of [n_rot / 2] pairs,
// including YaRN's mix and magnitude scale. Shared by the reference and the fast kernels.
void rope_cos_sin(int32_t pos, const RopeParams& p, float* cos_out, float* sin_out);

// Reads element i of a KV vector stored as F16 or F32.
float kv_load(DType type, const uint8_t* base, int64_t i);

}  // namespace troupe::ops::ref
