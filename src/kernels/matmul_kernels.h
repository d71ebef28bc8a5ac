// The per-target matrix kernels of matmul.cpp, dispatched to the best target of this CPU:
// the building blocks that matmul_ops.cpp splits over threads. Internal to src/kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/matmul_act.h"
#include "kernels/ops.h"

namespace troupe::ops::kern {

// Whether this target has a SIMD kernel for the weight type (else: the reference dot).
bool has_kernel(DType type);

// Rows [t0, t1) of x: [*, l.n_in] converted into act: [*, l.row_bytes] (matmul_act.h).
void quantize_act_rows(const float* x, int64_t t0, int64_t t1, uint8_t* act, const ActLayout& l);

// ---- Matrix-vector (1 to kGemvMaxTokens tokens at a time) ---------------------------------

constexpr int64_t kGemvMaxTokens = 3;

// Where a thread's weight prefetching stands: the kernels prefetch from `next` on (a fixed
// distance ahead of the rows they read), never at or past `end`. A thread that computes
// consecutive rows keeps one cursor, so prefetching runs on across its row ranges.
// amx_packed: the first activation row of the amx_packed_tokens tokens whose AMX operands
// (kernels/amx.h) scratch amx_scratch holds, packed by an earlier task of the same call, or
// null. A stream lives for one call: the activations must not change while it does (a caller
// that keeps it longer clears amx_packed whenever they do).
struct WeightStream {
    const uint8_t* next = nullptr;
    const uint8_t* end = nullptr;
    const uint8_t* amx_packed = nullptr;
    const uint8_t* amx_scratch = nullptr;
    int amx_packed_tokens = 0;
};

// Per-thread scratch of gemv_rows for n_tokens tokens, and the rows its kernels compute
// together (row ranges that are multiples of it use every lane).
size_t gemv_scratch_bytes(const Weight& w, int64_t n_tokens);
int64_t gemv_row_group();

// Up to how many tokens gemv_rows is the faster kernel for interleaved weights (beyond it,
// gemm_rows): 16 on most targets; on those that take a group one vector of rows at a time
// (AVX2, SSE4: gemv_interleaved-inl.h), every batch (prefill of 512 tokens, 1536x576 Q8_0 on
// Zen 3: 137-181 GFLOP/s against 121-143 for the packed matrix-matrix kernel).
int64_t gemv_interleaved_max_tokens();

// Whether Q5_0 matrices are widened to Interleaved16 Q8_0 at load (weight_layout.h): on the
// targets that take interleaved groups one vector of rows at a time (AVX2, SSE4), whose
// file-layout Q5_0 kernels are compute-bound (Zen 3, 2 threads: 12-14 GB/s against 31-47 for
// interleaved Q8_0).
bool interleave_widens_q5_0();

// y[t, o] for t in [t0, t1), o in [o0, o1): y: [*, w.n_out], act: converted rows.
// scratch: gemv_scratch_bytes(w, t1 - t0), 64-byte aligned. Interleaved weights take any
// number of tokens (their kernel, gemv_interleaved-inl.h) and whole groups of 16 rows
// (checked), as gemm_rows does.
void gemv_rows(const Weight& w, const uint8_t* act, const ActLayout& l, int64_t t0, int64_t t1,
               int64_t o0, int64_t o1, WeightStream& stream, float* y, uint8_t* scratch);

// ---- Matrix-matrix (packed activations) ---------------------------------------------------

// Whether weights of this type have a pair-layout kernel for batched decode (Q8_0, Q4_0,
// Q5_0 and the K-quants): a call whose weights all have one packs its activations for it
// (with VNNI, up to a vector of tokens). The pair_types arguments below carry that.
inline bool has_pair_kernel(DType type) {
    return type == DType::Q8_0 || type == DType::Q4_0 || type == DType::Q5_0 ||
           type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K;
}

// Tokens per packed vector, and the bytes of one packed vector (0: no kernel for w).
size_t gemm_token_lanes();
size_t gemm_packed_bytes(const Weight& w, const ActLayout& l);
// Converts the tokens of packed vector tv (rows: [its tokens, l.n_in]) into act (all tokens'
// rows) and packs them into `packed`. rows null: act holds the converted tokens already.
void quantize_and_pack(bool pair_types, const float* rows, const ActLayout& l, int64_t tv,
                       int64_t n_tokens, uint8_t* act, uint8_t* packed);
// Packed vectors (of gemm_packed_bytes each) that quantize_and_pack fills for n_tokens.
int64_t gemm_packed_vectors(bool pair_types, int64_t n_tokens);
// Whether the dispatched target has the pair-layout kernels (VNNI).
bool gemm_has_pairs();
// Per-thread scratch of gemm_rows.
size_t gemm_scratch_bytes(const Weight& w);
// Rows [o0, o1) for all n_tokens tokens from the packed activations.
void gemm_rows(const Weight& w, const ActLayout& l, const uint8_t* packed, bool pair_types,
               int64_t n_tokens, int64_t o0, int64_t o1, float* y, uint8_t* scratch);

}  // namespace troupe::ops::kern
