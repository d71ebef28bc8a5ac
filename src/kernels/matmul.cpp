// Matrix products: activation conversion, then matrix-vector kernels (gemv-inl.h) split
// over the thread pool by rows.
#include "kernels/simd_targets.h"  // first: decides the targets

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/gemm-inl.h"
#include "kernels/gemm_float-inl.h"
#include "kernels/gemm_kquant-inl.h"
#include "kernels/gemv-inl.h"
#include "kernels/ops.h"
#include "kernels/quantize_act-inl.h"
#include "tensor/quant_ref.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL && HWY_COMPILER_GCC_ACTUAL
#pragma GCC target("avx512vnni")
#endif
namespace troupe::HWY_NAMESPACE {

void QuantizeActRows(const float* x, int64_t t0, int64_t t1, uint8_t* act,
                     const ops::ActLayout& l) {
    for (int64_t t = t0; t < t1; ++t)
        QuantizeActRow(x + t * l.n_in, act + size_t(t) * l.row_bytes, l);
}

// Whether this target has a SIMD kernel for the weight type (else the caller uses the
// reference dot product).
bool HasKernel(DType type) {
#if HWY_TARGET == HWY_SCALAR
    (void)type;
    return false;
#else
    switch (type) {
        case DType::F32:
        case DType::F16:
        case DType::BF16:
        case DType::Q8_0:
        case DType::Q4_0:
        case DType::Q5_0:
        case DType::Q4_1:
        case DType::Q5_1:
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K:
            return true;
        default:
            return false;
    }
#endif
}

// y[t, o] for t in [t0, t1), o in [o0, o1).   y: [*, w.n_out]
void MatmulTile(const ops::Weight& w, const uint8_t* act, const ops::ActLayout& l, int64_t t0,
                int64_t t1, int64_t o0, int64_t o1, float* y) {
#if HWY_TARGET != HWY_SCALAR
    GemvAnyType(w, o0, o1, act, t0, t1, l, y);
#else
    (void)w, (void)act, (void)l, (void)t0, (void)t1, (void)o0, (void)o1, (void)y;
#endif
}

#if HWY_TARGET != HWY_SCALAR
// The matrix-matrix kernels by weight type: per-thread scratch (0: no kernel) and the run.
HWY_INLINE size_t GemmScratchBytes(const ops::Weight& w) {
    switch (w.type) {
        case DType::Q8_0:
        case DType::Q4_0:
        case DType::Q5_0:
        case DType::Q4_1:
        case DType::Q5_1:
            return LegacyScratchBytes(w);
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K:
            return KRowPrepBytes(w.n_in / QK_K) * size_t(kTileRows) + 64;
        case DType::F32:
        case DType::F16:
        case DType::BF16:
            return FloatRowPrepBytes(w.n_in) * size_t(kTileRows) + 64;
        default:
            return 0;
    }
}

// Batches smaller than a token vector stream the rows (GemvPacked); larger ones use the
// prepared-rows micro-kernel (GemmLegacy).
template <class Codec>
HWY_INLINE void GemmOrGemvPacked(const ops::Weight& w, const PackedActs& p, int64_t n_tokens,
                                 int64_t o0, int64_t o1, float* y, uint8_t* scratch) {
    if (n_tokens < int64_t(TokenLanes())) return GemvPacked<Codec>(w, p, n_tokens, o0, o1, y);
    GemmLegacy<Codec>(w, p, n_tokens, o0, o1, y, scratch);
}

HWY_INLINE void GemmAnyType(const ops::Weight& w, const PackedActs& p, int64_t n_tokens, int64_t o0,
                            int64_t o1, float* y, uint8_t* scratch) {
    switch (w.type) {
        case DType::Q8_0:
            return GemmOrGemvPacked<CodecQ8_0>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::Q4_0:
            return GemmOrGemvPacked<CodecQ4_0>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::Q5_0:
            return GemmOrGemvPacked<CodecQ5_0>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::Q4_1:
            return GemmOrGemvPacked<CodecQ4_1>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::Q5_1:
            return GemmOrGemvPacked<CodecQ5_1>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::Q4_K:
            return GemmKQuant<DType::Q4_K>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::Q5_K:
            return GemmKQuant<DType::Q5_K>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::Q6_K:
            return GemmKQuant<DType::Q6_K>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::F32:
            return GemmFloat<DType::F32>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::F16:
            return GemmFloat<DType::F16>(w, p, n_tokens, o0, o1, y, scratch);
        case DType::BF16:
            return GemmFloat<DType::BF16>(w, p, n_tokens, o0, o1, y, scratch);
        default:
            return;
    }
}
#endif

// The matrix-matrix path. Tokens are handled in packed vectors of GemmTokenLanes() tokens;
// GemmPackedBytes() is the size of one packed vector (0: no matrix-matrix kernel here).
size_t GemmTokenLanes() {
#if HWY_TARGET != HWY_SCALAR
    return TokenLanes();
#else
    return 1;
#endif
}

size_t GemmPackedBytes(const ops::Weight& w, const ops::ActLayout& l) {
#if HWY_TARGET != HWY_SCALAR
    return GemmScratchBytes(w) > 0 ? PackLayout(l).stride : 0;
#else
    (void)w, (void)l;
    return 0;
#endif
}

// Converts tokens of packed vector tv (rows of x) into act and packs them into `packed`.
void QuantizeAndPack(bool all_q8_0, const float* x, const ops::ActLayout& l, int64_t tv,
                     int64_t n_tokens, uint8_t* act, uint8_t* packed) {
#if HWY_TARGET != HWY_SCALAR
    const int64_t L = int64_t(TokenLanes());
    const int64_t t0 = tv * L, t1 = t0 + L < n_tokens ? t0 + L : n_tokens;
    QuantizeActRows(x, t0, t1, act, l);
    const PackedActs p = PackLayout(l);
    if (UsePairs(all_q8_0, n_tokens)) {
        PackPairs(act, l, n_tokens, p, packed);
    } else {
        PackTokens(act, l, t0, t1 - t0, p, packed + size_t(tv) * p.stride);
    }
#else
    (void)all_q8_0, (void)x, (void)l, (void)tv, (void)n_tokens, (void)act, (void)packed;
#endif
}

// Per-thread scratch of GemmTile.
size_t GemmScratch(const ops::Weight& w) {
#if HWY_TARGET != HWY_SCALAR
    return GemmScratchBytes(w);
#else
    (void)w;
    return 0;
#endif
}

// Rows [o0, o1) for all n_tokens tokens from the packed activations.
void GemmTile(const ops::Weight& w, const ops::ActLayout& l, const uint8_t* packed, bool all_q8_0,
              int64_t n_tokens, int64_t o0, int64_t o1, float* y, uint8_t* scratch) {
#if HWY_TARGET != HWY_SCALAR
    PackedActs p = PackLayout(l);
    p.base = packed;
    p.pairs = UsePairs(all_q8_0, n_tokens);
    GemmAnyType(w, p, n_tokens, o0, o1, y, scratch);
#else
    (void)w, (void)l, (void)packed, (void)all_q8_0, (void)n_tokens, (void)o0, (void)o1, (void)y;
    (void)scratch;
#endif
}

}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/ops_ref.h"
#include "util/error.h"
#include "util/fp16.h"

namespace troupe {
HWY_EXPORT(QuantizeActRows);
HWY_EXPORT(HasKernel);
HWY_EXPORT(MatmulTile);
HWY_EXPORT(GemmTokenLanes);
HWY_EXPORT(GemmPackedBytes);
HWY_EXPORT(QuantizeAndPack);
HWY_EXPORT(GemmScratch);
HWY_EXPORT(GemmTile);

namespace ops {

namespace {

// From how many tokens on the packed (matrix-matrix) kernels beat matrix-vector passes of up
// to 3 tokens each (measured): the 32-value block types stream their rows once for up to a
// vector of tokens (GemvPacked) and win from 4; a K-quant row costs the same for 1 or a full
// vector of tokens, so they wait for one; float rows need several vectors of tokens.
int64_t min_gemm_tokens(DType type, int64_t token_lanes) {
    switch (type) {
        case DType::Q8_0:
        case DType::Q4_0:
        case DType::Q5_0:
        case DType::Q4_1:
        case DType::Q5_1:
            return 4;
        case DType::F32:
        case DType::F16:
        case DType::BF16:
            return std::max<int64_t>(4, 4 * token_lanes);
        default:
            return std::max<int64_t>(4, token_lanes);
    }
}

// Runs fn(task, thread) for n_tasks tasks on the pool, or inline without one.
template <class F>
void parallel_for(ThreadPool* pool, int64_t n_tasks, F&& fn) {
    if (pool) {
        pool->run(n_tasks, fn);
    } else {
        for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    }
}

// The reference path for weight types without a SIMD kernel on this target: activations in
// the reference block format, one vec_dot_act per output value.
void matmul_fallback(const Weight& w, const float* x, float* y, int64_t n_tokens,
                     ThreadPool* pool) {
    const DType at = act_type(w.type);
    const size_t xa_bytes = row_bytes(at, w.n_in);
    std::vector<uint8_t> xa(xa_bytes * size_t(n_tokens));
    for (int64_t t = 0; t < n_tokens; ++t)
        quantize_row(at, x + t * w.n_in, xa.data() + size_t(t) * xa_bytes, w.n_in);
    constexpr int64_t kRowsPerTask = 16;
    const int64_t n_tasks = (w.n_out + kRowsPerTask - 1) / kRowsPerTask;
    parallel_for(pool, n_tasks, [&](int64_t task, int) {
        const int64_t o0 = task * kRowsPerTask, o1 = std::min(w.n_out, o0 + kRowsPerTask);
        for (int64_t t = 0; t < n_tokens; ++t)
            for (int64_t o = o0; o < o1; ++o)
                y[t * w.n_out + o] = vec_dot_act(w.type, w.data + size_t(o) * w.row_stride,
                                                 xa.data() + size_t(t) * xa_bytes, w.n_in);
    });
}

// 64-byte aligned scratch: the pool's shared buffer, or `local` without a pool.
uint8_t* scratch_bytes(ThreadPool* pool, size_t bytes, std::vector<uint8_t>& local) {
    if (pool) return static_cast<uint8_t*>(pool->shared_scratch(bytes));
    local.resize(bytes + 64);
    return reinterpret_cast<uint8_t*>(round_up_64(reinterpret_cast<uintptr_t>(local.data())));
}

// Splits n rows into tasks_per_thread tasks per thread, sizes a multiple of `multiple`.
int64_t rows_per_task(int64_t n, int n_threads, int tasks_per_thread, int64_t multiple) {
    const int64_t n_tasks = std::max<int64_t>(
        1, std::min<int64_t>((n + multiple - 1) / multiple, int64_t(tasks_per_thread) * n_threads));
    return ((n + n_tasks - 1) / n_tasks + multiple - 1) / multiple * multiple;
}

// Matrix-vector tasks per thread: each task is one sequential stream that starts cold (its
// first rows wait for DRAM), so small matrices get one task per thread; larger ones a few,
// which lets a thread that runs ahead take over work from a slower one.
int gemv_tasks_per_thread(size_t bytes) {
    constexpr size_t kMiB = size_t(1) << 20;
    return bytes < kMiB ? 1 : bytes < 8 * kMiB ? 2 : 4;
}

// Task t of a row split over several matrices: matrix `m`, rows [o0, o1).
struct RowTask {
    int m;
    int64_t o0, o1;
};

// Splits the rows of n matrices into chunks of about `chunk` rows, each within one matrix.
class RowTasks {
  public:
    RowTasks(const Weight* ws, int n, int64_t chunk) : ws_(ws), n_(n), chunk_(chunk) {
        for (int m = 0; m < n; ++m) first_[m + 1] = first_[m] + (ws[m].n_out + chunk - 1) / chunk;
    }
    int64_t size() const { return first_[n_]; }
    RowTask operator[](int64_t t) const {
        int m = 0;
        while (t >= first_[m + 1]) ++m;
        const int64_t o0 = (t - first_[m]) * chunk_;
        return {m, o0, std::min(ws_[m].n_out, o0 + chunk_)};
    }

  private:
    const Weight* ws_;
    int n_;
    int64_t chunk_;
    int64_t first_[kMaxMatmulMany + 1] = {};
};

}  // namespace

void matmul_many(const Weight* ws, int n, const float* x, float* const* ys, int64_t n_tokens,
                 ThreadPool* pool) {
    TROUPE_CHECK(n >= 0 && n <= kMaxMatmulMany);
    if (n_tokens <= 0 || n == 0) return;
    const DType at = act_type(ws[0].type);  // throws troupe::Error for types without compute
    bool fused = HWY_DYNAMIC_DISPATCH(HasKernel)(ws[0].type);
    int64_t total_rows = 0;
    for (int m = 0; m < n; ++m) {
        fused &= act_type(ws[m].type) == at && ws[m].n_in == ws[0].n_in &&
                 HWY_DYNAMIC_DISPATCH(HasKernel)(ws[m].type);
        total_rows += ws[m].n_out;
    }
    if (!fused) {
        for (int m = 0; m < n; ++m) {
            if (HWY_DYNAMIC_DISPATCH(HasKernel)(ws[m].type)) {
                matmul_many(ws + m, 1, x, ys + m, n_tokens, pool);
            } else {
                matmul_fallback(ws[m], x, ys[m], n_tokens, pool);
            }
        }
        return;
    }
    if (total_rows == 0) return;

    const ActLayout l = act_layout(at, ws[0].n_in);
    const int n_threads = pool ? pool->size() : 1;
    const size_t act_bytes = l.row_bytes * size_t(n_tokens);
    std::vector<uint8_t> local;
    size_t total_bytes = 0;
    for (int m = 0; m < n; ++m) total_bytes += ws[m].row_stride * size_t(ws[m].n_out);
    size_t packed_bytes = HWY_DYNAMIC_DISPATCH(GemmPackedBytes)(ws[0], l);
    size_t scratch_size = 0;
    for (int m = 0; m < n; ++m) {
        if (HWY_DYNAMIC_DISPATCH(GemmPackedBytes)(ws[m], l) == 0) packed_bytes = 0;
        scratch_size = std::max(scratch_size, HWY_DYNAMIC_DISPATCH(GemmScratch)(ws[m]));
    }
    const int64_t token_lanes = int64_t(HWY_DYNAMIC_DISPATCH(GemmTokenLanes)());
    int64_t min_tokens = 0;
    for (int m = 0; m < n; ++m)
        min_tokens = std::max(min_tokens, min_gemm_tokens(ws[m].type, token_lanes));
    if (n_tokens >= min_tokens && packed_bytes > 0) {
        // Matrix-matrix: convert and pack the tokens (in parallel, one packed vector per
        // task), then every task takes a range of rows for all tokens.
        const int64_t L = token_lanes;
        const int64_t n_vecs = (n_tokens + L - 1) / L;
        uint8_t* act = scratch_bytes(pool, act_bytes + packed_bytes * size_t(n_vecs), local);
        uint8_t* packed = act + act_bytes;
        bool all_q8_0 = true;
        for (int m = 0; m < n; ++m) all_q8_0 &= ws[m].type == DType::Q8_0;
        const auto pack = HWY_DYNAMIC_DISPATCH(QuantizeAndPack);
        parallel_for(pool, n_vecs,
                     [&](int64_t tv, int) { pack(all_q8_0, x, l, tv, n_tokens, act, packed); });
        const auto gemm = HWY_DYNAMIC_DISPATCH(GemmTile);
        std::vector<uint8_t> local_scratch(pool ? 0 : scratch_size);
        const RowTasks tasks(ws, n, rows_per_task(total_rows, n_threads, 4, 4));
        parallel_for(pool, tasks.size(), [&](int64_t t, int thread) {
            const RowTask task = tasks[t];
            auto* scratch = pool ? static_cast<uint8_t*>(pool->thread_scratch(thread, scratch_size))
                                 : local_scratch.data();
            gemm(ws[task.m], l, packed, all_q8_0, n_tokens, task.o0, task.o1, ys[task.m], scratch);
        });
        return;
    }

    // Matrix-vector per token: equal row chunks, a few per thread so that a slow thread is
    // compensated.
    uint8_t* act = scratch_bytes(pool, act_bytes, local);
    HWY_DYNAMIC_DISPATCH(QuantizeActRows)(x, 0, n_tokens, act, l);
    const auto tile = HWY_DYNAMIC_DISPATCH(MatmulTile);
    const RowTasks tasks(
        ws, n, rows_per_task(total_rows, n_threads, gemv_tasks_per_thread(total_bytes), 4));
    parallel_for(pool, tasks.size(), [&](int64_t t, int) {
        const RowTask task = tasks[t];
        tile(ws[task.m], act, l, 0, n_tokens, task.o0, task.o1, ys[task.m]);
    });
}

void matmul(const Weight& w, const float* x, float* y, int64_t n_tokens, ThreadPool* pool) {
    matmul_many(&w, 1, x, &y, n_tokens, pool);
}

void convert_activations_for_test(DType act, const float* x, int64_t n, void* out) {
    const ActLayout l = act_layout(act, n);
    std::vector<uint8_t> row(l.row_bytes);
    HWY_DYNAMIC_DISPATCH(QuantizeActRows)(x, 0, 1, row.data(), l);
    const auto* vals = row.data();
    const auto* scale = reinterpret_cast<const float*>(row.data() + l.scale_offset);
    auto* dst = static_cast<uint8_t*>(out);
    switch (act) {
        case DType::F32:
            std::memcpy(dst, vals, size_t(n) * 4);
            return;
        case DType::F16:
        case DType::BF16:
            for (int64_t i = 0; i < n; ++i) {
                const float f = reinterpret_cast<const float*>(vals)[i];
                const uint16_t h = act == DType::F16 ? fp32_to_fp16(f) : fp32_to_bf16(f);
                std::memcpy(dst + 2 * i, &h, 2);
            }
            return;
        case DType::Q8_0:
        case DType::Q8_1:
            for (int64_t b = 0; b < l.n_blocks; ++b) {
                uint8_t* blk =
                    dst + size_t(b) * (act == DType::Q8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ8_1));
                const uint16_t d = fp32_to_fp16(scale[b]);
                std::memcpy(blk, &d, 2);
                if (act == DType::Q8_1) {
                    const uint16_t s =
                        fp32_to_fp16(reinterpret_cast<const float*>(row.data() + l.sum_offset)[b]);
                    std::memcpy(blk + 2, &s, 2);
                }
                std::memcpy(blk + (act == DType::Q8_0 ? 2 : 4), vals + b * QK8_0, QK8_0);
            }
            return;
        default: {  // Q8_K
            const auto* bsums = reinterpret_cast<const int32_t*>(row.data() + l.sum_offset);
            for (int64_t b = 0; b < l.n_blocks; ++b) {
                BlockQ8_K blk;
                blk.d = scale[b];
                std::memcpy(blk.qs, vals + b * QK_K, QK_K);
                for (int j = 0; j < QK_K / 16; ++j)
                    blk.bsums[j] = int16_t(bsums[b * (QK_K / 16) + j]);
                std::memcpy(dst + size_t(b) * sizeof(BlockQ8_K), &blk, sizeof(blk));
            }
            return;
        }
    }
}

void prefetch_weights(const Weight* ws, int n, size_t bytes) {
    for (int m = 0; m < n; ++m) {
        const size_t size = std::min(bytes, ws[m].row_stride * size_t(ws[m].n_out));
        for (size_t o = 0; o < size; o += 64) hwy::Prefetch(ws[m].data + o);
    }
}

void get_rows(const Weight& w, const int32_t* ids, int64_t n_ids, float* out) {
    ref::get_rows(w, ids, n_ids, out);
}

}  // namespace ops
}  // namespace troupe
#endif  // HWY_ONCE
