// The numerical operations of a transformer forward pass, agnostic of any model.
//
// Each op here dispatches to the best kernel compiled for this CPU (Highway targets, chosen
// at run time) and has a scalar reference in ops_ref.h with the same signature; tests compare
// them on every target. Buffers are row-major and shapes are given per argument as
// [rows, columns]. Unless stated, outputs must not alias inputs.
//
// Where the time goes: matmul (the weights are read once per call, so decode is bound by
// memory bandwidth and batched decode / prefill by arithmetic), then attention.
//
// Threads: ops that take a ThreadPool split their work over it (null: the calling thread
// alone) and must be called from the pool's owner thread, never from inside a pool task.
// They use the pool's scratch memory (ThreadPool::shared_scratch / thread_scratch), whose
// contents do not survive an op. The other ops run on the calling thread. Ops that take a
// Region are collective steps of a parallel region (kernels/region.h): every participant
// calls them with the same arguments, and they return once the result is complete, so a
// whole forward pass can run as one dispatch; the ThreadPool forms run one region per call.
// Errors: a weight type without compute code throws troupe::Error (from act_type); shapes
// and pointers are the caller's invariants (TROUPE_CHECK where cheap).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/region.h"
#include "kernels/thread_pool.h"
#include "tensor/types.h"

namespace troupe::ops {

// How a weight matrix's rows are stored. Rows: as in the model file, row o at
// data + o * row_stride. Interleaved16 (Q8_0, Q4_0): groups of 16 rows whose blocks are
// interleaved so that one vector holds the same 4 inputs of 16 rows (kernels/weight_layout.h,
// made at load by Model::load); a group still takes 16 * row_stride bytes.
enum class WeightLayout { Rows, Interleaved16 };

// A weight matrix: n_out rows of n_in values each, in `type`.
struct Weight {
    DType type = DType::F32;
    int64_t n_in = 0;   // values per row (the reduction dimension)
    int64_t n_out = 0;  // rows
    const uint8_t* data = nullptr;
    size_t row_stride = 0;  // bytes between rows (row_bytes(type, n_in) for file tensors)
    WeightLayout layout = WeightLayout::Rows;
};

// y[t, o] = sum_i w[o, i] * x[t, i].   x: [n_tokens, w.n_in], y: [n_tokens, w.n_out].
// Activations are converted to act_type(w.type) first (see tensor/quant_ref.h).
// pool may be null (runs on the calling thread).
void matmul(const Weight& w, const float* x, float* y, int64_t n_tokens, ThreadPool* pool);

// Several weights applied to the same input, in one call: ys[i] = ws[i] x, ys[i]:
// [n_tokens, ws[i].n_out], for i < n <= kMaxMatmulMany. The input is converted once and all
// rows of all matrices are split over the threads in one dispatch (Q, K and V; gate and
// up): decode pays the dispatch and the imbalance at its end once instead of n times.
// Weights of different activation types or input sizes are computed one after the other.
constexpr int kMaxMatmulMany = 8;
void matmul_many(const Weight* ws, int n, const float* x, float* const* ys, int64_t n_tokens,
                 ThreadPool* pool);

// The same as collective steps of a region, with the neighbouring element-wise work folded
// in: the input rows may be transformed on the way in (each row is converted to the
// activation type on its own, so this takes no pass or step of its own), and the outputs
// may be added to a residual stream as their rows are computed. Either gives the values of
// the separate ops (rms_norm / swiglu before, add_inplace after) bit for bit.
// Matrix-vector products (decode) take one step: each participant converts the activations
// itself. The 32-value block types (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1) sum every output in one
// order whatever the number of tokens, the path or the threads: a token's outputs are
// bit-identical alone or in any batch.
struct MatmulInput {
    const float* x = nullptr;     // [n_tokens, n_in]
    const float* norm = nullptr;  // when set, the rows are rms_norm(x, norm, eps): [n_in]
    float eps = 0.0f;
    const float* up = nullptr;  // when set, the rows are swiglu(x, up): [n_tokens, n_in]
};
// Work on the rows one task of the product computes, run by the participant that ran the
// task: after(ctx, m, o0, o1) once rows [o0, o1) of matrix m are in ys[m] for every token
// (and added to add_to[m]). Tasks start and end on multiples of row_multiple within each
// matrix (whose n_out must be one), so that, say, RoPE's pairs are never split. Each row range
// of each matrix is given to exactly one call; what the calls write must not overlap between
// ranges. (Q/K/V: the bias, RoPE and the KV-cache store of a task's rows, with no step of
// their own.)
struct MatmulEpilogue {
    void (*after)(void* ctx, int m, int64_t o0, int64_t o1) = nullptr;
    void* ctx = nullptr;
    int64_t row_multiple = 1;
};

// add_to: null, or add_to[i] (null or [n_tokens, ws[i].n_out]) += ys[i]. epi: null, or the
// hooks above.
void matmul_many(Region& r, const Weight* ws, int n, const MatmulInput& in, float* const* ys,
                 int64_t n_tokens, float* const* add_to = nullptr,
                 const MatmulEpilogue* epi = nullptr);
void matmul(Region& r, const Weight& w, const MatmulInput& in, float* y, int64_t n_tokens,
            float* add_to = nullptr);

// The rows of each matrix that this participant's own share of the tasks of
// matmul_many(r, ws, n, ..., n_tokens) with that row_multiple covers: rows[m] = [first, end),
// empty when none (or when the call runs each matrix on its own). Others may take some of
// them once they are done with theirs: a hint for prefetching what the tasks' epilogue writes.
void matmul_share_rows(const Region& r, const Weight* ws, int n, int64_t n_tokens,
                       int64_t row_multiple, std::pair<int64_t, int64_t>* rows);

// Tells this participant of r which matmul_many(r, ws, n, ..., n_tokens) comes next: its share
// of those weights is then prefetched whenever it waits at the end of a step until that call
// (Region::prefetch_next). Decode reads every matrix from DRAM, and a participant that
// finished a step early, or waits through an op that reads no weights, would otherwise leave
// the memory bus idle. Not collective; a hint only (results do not depend on it).
// row_multiple: the call's MatmulEpilogue::row_multiple (1 without one).
void prefetch_next_matmul(Region& r, const Weight* ws, int n, int64_t n_tokens,
                          int64_t row_multiple = 1);

// out[r, :] = dequantized row ids[r] of w.   out: [n_ids, w.n_in]. Embedding lookup.
void get_rows(const Weight& w, const int32_t* ids, int64_t n_ids, float* out);
void get_rows(Region& r, const Weight& w, const int32_t* ids, int64_t n_ids, float* out);

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight[:].   x, y: [n_rows, dim]; y may be x.
void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t dim,
              float eps);
void rms_norm(Region& r, const float* x, const float* weight, float* y, int64_t n_rows, int64_t dim,
              float eps);

// Rotary position embedding in place. x: [n_rows, n_heads, head_dim]; pos: [n_rows].
// Only the first n_rot values of each head rotate. NORM pairs (2i, 2i+1) (llama); NEOX pairs
// (i, i + n_rot/2) (qwen2, gpt-neox). Frequencies follow llama.cpp's rope with YaRN:
// theta_i = pos * base^(-2i/n_rot) / freq_factors[i] (if given), scaled by freq_scale, with
// YaRN's ramp between extrapolation and interpolation when ext_factor != 0.
enum class RopeMode { Norm, Neox };
struct RopeParams {
    int n_rot = 0;
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;   // 1 / linear scaling factor
    float ext_factor = 0.0f;   // YaRN extrapolation mix (0 = off)
    float attn_factor = 1.0f;  // YaRN magnitude scaling
    float beta_fast = 32.0f;
    float beta_slow = 1.0f;
    int n_ctx_orig = 0;                   // training context (YaRN)
    const float* freq_factors = nullptr;  // [n_rot / 2] or null (Llama 3.1 rope_freqs)
    RopeMode mode = RopeMode::Norm;
};
void rope(float* x, const int32_t* pos, int64_t n_rows, int n_heads, int head_dim,
          const RopeParams& p);

// The same rotation in two steps, so that a forward pass computes the angles once per
// position and reuses them for Q and K of every layer (rope() evaluates n_rot / 2 sines and
// cosines per row and call).
// rope_angles: table[r, 0 .. n_rot/2) = cos, table[r, n_rot/2 .. n_rot) = sin of row r's
// angles (bit-identical to rope()'s).   pos: [n_rows], table: [n_rows, p.n_rot].
void rope_angles(const int32_t* pos, int64_t n_rows, const RopeParams& p, float* table);
// rope_apply: rotates x: [n_rows, n_heads, head_dim] in place by table: [n_rows, p.n_rot].
void rope_apply(float* x, const float* table, int64_t n_rows, int n_heads, int head_dim,
                const RopeParams& p);
void rope_apply(Region& r, float* x, const float* table, int64_t n_rows, int n_heads, int head_dim,
                const RopeParams& p);
// rope_pair_table: what rope_apply_cols reads besides the angles, per row: [2 * p.n_rot]
// floats (Norm: each pair's cos twice, then -sin, sin; Neox: unused, may be null).
//   table: [n_rows, p.n_rot] (rope_angles), pairs: [n_rows, 2 * p.n_rot].
void rope_pair_table(const float* table, int64_t n_rows, const RopeParams& p, float* pairs);
// rope_apply on columns [c0, c1) of one row of heads (x: [n_heads * head_dim]) only, the
// rest untouched: bit-identical to rope_apply on those columns. Norm: c0 and c1 even; Neox:
// multiples of head_dim (its pairs are half a head apart). table: the row's angles ([p.n_rot]),
// pairs: its rope_pair_table row.
void rope_apply_cols(float* x, int64_t c0, int64_t c1, const float* table, const float* pairs,
                     int head_dim, const RopeParams& p);

// out[i] = silu(gate[i]) * up[i].   All [n].  out may alias gate.
void swiglu(const float* gate, const float* up, float* out, int64_t n);
void swiglu(Region& r, const float* gate, const float* up, float* out, int64_t n);

// y[i] += x[i].   [n]
void add_inplace(float* y, const float* x, int64_t n);
void add_inplace(Region& r, float* y, const float* x, int64_t n);

// In-place softmax of x[n]; returns nothing. Stable (subtracts the max).
void softmax(float* x, int64_t n);

// The index of the largest of x[0, n) (n >= 1), the first one on ties; NaNs are skipped
// unless x[0] is one (then 0), as a scalar loop of `x[i] > x[best]` does.
int64_t argmax(const float* x, int64_t n);

// ---- Attention over the paged KV cache --------------------------------------------------

// One layer of the paged KV cache as the attention kernel sees it. Within a block a kv head's
// K is stored transposed, V by rows: for (physical block b, kv head h, slot s), element d of
//   K is at k + kv_block_offset(b) + h * head_stride + kv_key_elem(kv, d, s) * elem_size,
//        kv_key_elem = d * block_size + s (F16, F32), or for BF16 the dimension pairs of each
//        key side by side, ((d / 2) * block_size + s) * 2 + d % 2 (so that one 32-bit lane
//        holds dimensions 2i, 2i + 1 of one key: the operand of a BF16 pair dot product),
//   V is at v + kv_block_offset(b) + h * head_stride + (s * head_dim + d) * elem_size,
// where blocks come in chunks of 2^chunk_shift: kv_block_offset(b) = (b >> chunk_shift) *
// chunk_stride + (b & (2^chunk_shift - 1)) * block_stride (chunk_shift 31: one chunk).
// (Dimension d of consecutive keys is contiguous: the kernel multiplies a query element into
// a vector of keys, one FMA chain per key and no horizontal sums.)
struct KvLayerView {
    DType type = DType::F16;  // F16, BF16 (even head_dim) or F32 (kv_type_supported)
    uint8_t* k = nullptr;
    uint8_t* v = nullptr;
    size_t block_stride = 0;  // bytes
    size_t head_stride = 0;   // bytes
    int chunk_shift = 31;     // blocks per chunk: 2^chunk_shift
    size_t chunk_stride = 0;  // bytes between chunks
    int block_size = 16;      // tokens per block
    int head_dim = 0;
    int n_kv_head = 0;
};

// The element types a KV cache may have, and their sizes. BF16 needs an even head_dim (K is
// stored as dimension pairs).
inline bool kv_type_supported(DType t, int head_dim) {
    return t == DType::F16 || t == DType::F32 || (t == DType::BF16 && head_dim % 2 == 0);
}
inline size_t kv_elem_bytes(DType t) {
    return t == DType::F32 ? 4 : 2;
}

// Elements from a kv head's K piece of a block to dimension d of slot s (layout above).
inline size_t kv_key_elem(const KvLayerView& kv, int d, size_t s) {
    const size_t bs = size_t(kv.block_size);
    if (kv.type == DType::BF16) return (size_t(d / 2) * bs + s) * 2 + size_t(d % 2);
    return size_t(d) * bs + s;
}

// Bytes from the view's k (or v) to physical block b's pieces (of kv head 0).
inline size_t kv_block_offset(const KvLayerView& kv, int32_t b) {
    const uint32_t u = uint32_t(b);
    return size_t(u >> kv.chunk_shift) * kv.chunk_stride +
           size_t(u & ((uint32_t(1) << kv.chunk_shift) - 1)) * kv.block_stride;
}

// Writes K and V of n rows at positions pos[r] of one sequence, through its block table
// (position p lives in block block_table[p / block_size], slot p % block_size).
// k, v: [n, n_kv_head * head_dim] f32; converted to kv.type.
void kv_store(const KvLayerView& kv, const int32_t* block_table, const int32_t* pos, const float* k,
              const float* v, int64_t n);

// kv_store of one of K (values false) or V (true), columns [c0, c1) of its rows only
// (column c: dimension c % head_dim of kv head c / head_dim): src rows as k or v above
// (n_kv_head * head_dim floats each, of which [c0, c1) are read).
void kv_store_cols(const KvLayerView& kv, bool values, int c0, int c1, const int32_t* block_table,
                   const int32_t* pos, const float* src, int64_t n);
// Requests, for writing, the cache lines kv_store_cols(kv, values, c0, c1, block_table, pos,
// ..., n) will write (K is stored transposed, so one row touches a line per two dimensions of
// every kv head): called a little before the store, so that the lines, evicted since the
// previous token wrote next to them, arrive meanwhile. A hint; results do not depend on it.
void prefetch_kv_store_cols(const KvLayerView& kv, bool values, int c0, int c1,
                            const int32_t* block_table, const int32_t* pos, int64_t n);

// The queries of one sequence in a batch: n_q rows at consecutive positions first_pos,
// first_pos + 1, ...; row r attends causally to positions [0, first_pos + r], whose K/V must
// already be in the cache.
struct AttentionSeq {
    const int32_t* block_table = nullptr;  // [>= (first_pos + n_q + block_size - 1) / block_size]
    int first_pos = 0;
    int n_q = 0;
    const float* q = nullptr;  // [n_q, n_head, head_dim]
    float* out = nullptr;      // [n_q, n_head, head_dim]
};

// kv_store for the new rows of every sequence of a batch, as a region step: sequence s's
// n_q rows at positions first_pos, first_pos + 1, ... through its block table; k, v:
// [sum of n_q, n_kv_head * head_dim], sequence after sequence.
void kv_store(Region& r, const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs,
              const float* k, const float* v);

// Scaled dot-product attention with grouped KV heads (query head h reads kv head
// h / (n_head / n_kv_head)), softmax in float, for every sequence of a batch (with a BF16
// cache the scaled queries and the exponentials that weight the values are rounded to BF16,
// attention_common-inl.h). Sequences whose block tables begin with the same physical blocks
// (a prompt prefix shared through the prefix cache) are found (find_shared_prefixes) and
// computed as attention_shared() does.
void attention(const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs, int n_head, float scale,
               ThreadPool* pool);

// Sequences of a batch whose block tables begin with the same n_blocks physical blocks.
struct SharedPrefixGroup {
    std::vector<int> seqs;  // indices into the batch's AttentionSeq array, >= 2 of them
    int n_blocks = 0;       // leading block-table entries all of them share
};

// Groups of at least two sequences sharing at least min_blocks leading blocks (each sequence
// in at most one group; a group shares the longest prefix common to all its members). Only
// blocks a sequence uses (up to position first_pos + n_q - 1) count.
std::vector<SharedPrefixGroup> find_shared_prefixes(const AttentionSeq* seqs, int n_seqs,
                                                    int block_size, int min_blocks = 1);

// attention() with explicit groups (none: every sequence reads all its keys itself). The
// query rows of the sequences of a group attend to the shared blocks together (but for
// sequences with many rows, a prefill, which read all their keys themselves), as
// matrix-matrix work that reads each shared K/V block once for all of them, giving partial
// results (running max, sum of exponentials, unnormalised output); each sequence then adds
// its private blocks and the partial results merge by log-sum-exp. The same bits as
// attention() (see attention_common-inl.h).
void attention_shared(const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs,
                      const std::vector<SharedPrefixGroup>& groups, int n_head, float scale,
                      ThreadPool* pool);

// The work of attention for one batch, planned once and run for every layer of a forward pass
// (it depends on the sequences and the cache geometry, not on the cache contents): tasks of
// (kv head, query vectors, key range) and how their partial results merge.
//
// Keys are cut at fixed positions (multiples of kAttentionKeyChunk, rounded to whole blocks)
// and the partial results of a query row merge in key order, so a row's output does not
// depend on the other rows computed with it, on the threads, or on whether it is decoded or
// prefilled (bit-identical). Within a chunk the softmax takes its maximum per step of
// kAttentionStepKeys keys (also at fixed positions). A shared prefix is read together for all
// its sequences' query vectors in whole steps: up to its last chunk boundary by plain tasks;
// the chunk it ends in by a tail task, whose steps below the last step boundary of the common
// blocks are read together and whose later steps each sequence reads through its own block
// table (the task holds every member's states); the keys after that chunk by each sequence.
constexpr int kAttentionKeyChunk = 128;
constexpr int kAttentionStepKeys = 64;

// A member of a tail task (AttentionPlan::Task): one sequence's query vectors, the task's
// [q0, q0 + nq), which read keys from the split on through the sequence's own block table.
struct AttentionTailMember {
    const int32_t* block_table = nullptr;
    int q0 = 0, nq = 0;
    int32_t k1 = 0;  // the sequence's first_pos + n_q
};

// What the kernel gets for a tail task: keys below `split` (a multiple of kAttentionStepKeys)
// through the task's block table for all its query vectors, the others per member.
struct AttentionTail {
    int32_t split = 0;
    const AttentionTailMember* members = nullptr;
    int n_members = 0;
};

// A partial attention state of one query vector over a key range, as the kernel writes it
// and the merge reads it: floats [kAttnStateM] running maximum m, [kAttnStateL] sum of
// exponentials l, from [kAttnStateO] the unnormalised output o (head_dim rounded up to whole
// vectors; 64-byte aligned when the state is).
constexpr int kAttnStateM = 0;
constexpr int kAttnStateL = 1;
constexpr int kAttnStateO = 16;

struct AttentionPlan {
    struct Task {
        int kv_head = 0;
        const int32_t* block_table = nullptr;
        int32_t k0 = 0, k1 = 0;    // key positions
        // State slots [slot0, slot1): task_qids, one per key chunk of [k0, k1) and query
        // vector, chunk-major (decode rows after a shared prefix take all their chunks in one
        // task; the other plain tasks have one chunk).
        int slot0 = 0, slot1 = 0;
        // A whole task reads every key chunk of [k0, k1) itself, merges its query vectors'
        // chunk states in its own scratch and writes their outputs: [slot0, slot1) index
        // whole_qids, and the merge step skips them (a long prefill's states never leave the
        // thread's cache).
        bool whole = false;
        // A tail task (one key chunk, members tail_members[member0, member1) in the order of
        // its query vectors): keys from `split` on are read per member (AttentionTail).
        int32_t split = 0;
        int member0 = 0, member1 = 0;
    };
    struct QVec {  // a query vector: row `row` of sequence `seq`, head `head`
        int seq, row, head;
    };
    const AttentionSeq* seqs = nullptr;  // the caller's, [n_seqs]; must outlive the plan's use
    int n_seqs = 0;
    int n_head = 0;
    std::vector<QVec> qvecs;      // by qid
    std::vector<int> task_qids;   // state slot -> qid
    std::vector<int> whole_qids;  // the qids of whole tasks
    std::vector<Task> tasks;
    std::vector<AttentionTailMember> tail_members;
    std::vector<int> merge_begin;  // [qvecs + 1]: the slots of qid q, in key order, are
    std::vector<int> merge_slots;  // merge_slots[merge_begin[q] .. merge_begin[q + 1])
};

// Plans attention for seqs[0 .. n_seqs) (find_shared_prefixes groups them when `share`).
void plan_attention(const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs, int n_head,
                    bool share, AttentionPlan& plan);
void plan_attention(const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs, int n_head,
                    const std::vector<SharedPrefixGroup>& groups, AttentionPlan& plan);

// Runs a plan on one layer's cache (same geometry as planned) as steps of a region.
void attention(Region& r, const KvLayerView& kv, const AttentionPlan& plan, float scale);

}  // namespace troupe::ops
