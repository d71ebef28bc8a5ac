// Matrix products split over the participants of a region (kernels/region.h), and the
// ThreadPool forms of ops.h (one region per call).
//
// - Matrix-vector (decode): the rows of all matrices are cut into tasks; each participant
//   converts the activations itself (no step for it) and streams the rows of its share in
//   order, its weight prefetching running on from task to task.
// - Matrix-matrix (batched decode, prefill): one step converts and packs the tokens into
//   shared scratch (a batch of fewer than a vector of tokens per participant: one step
//   converts them a token per task, one packs), one step computes row ranges for all tokens.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "kernels/matmul_kernels.h"
#include "kernels/ops.h"
#include "kernels/ops_ref.h"
#include "kernels/region.h"
#include "kernels/weight_layout.h"
#include "tensor/quant_ref.h"
#include "util/error.h"
#include "util/fp16.h"

namespace troupe::ops {

namespace {

// From how many tokens on the packed (matrix-matrix) kernels beat matrix-vector passes of up
// to 3 tokens each (measured on 1536x576, 2 threads; every path gives the same bits):
// - the 32-value block types stream their rows once for up to a vector of tokens
//   (GemvPacked) and win from 4 (with their pair kernels too: 3 tokens q8_0 14.6 us as rows,
//   18.9 packed);
// - the K-quants with their pair kernels (`pairs`: VNNI) cost about one matrix-vector pass
//   for up to half a vector of tokens and win from 3 (q4_K / q6_K 3 tokens 28.7 / 30.7 ->
//   26.7 / 24.4 us, 4 tokens 47.2 / 46.7 -> 28.2 / 24.8; 2 tokens: rows 22.6 / 24.3 against
//   26.0 / 23.4); without them their matrix-matrix kernel costs the same for 1 or a full
//   vector of tokens, about two passes, and wins from 5 (4: a tie; q4_K 5 tokens 55 -> 50 us,
//   8 tokens 85 -> 52);
// - float rows need several vectors of tokens.
int64_t min_gemm_tokens(DType type, int64_t token_lanes, bool pairs) {
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
            if (pairs && kern::has_pair_kernel(type)) return 3;
            return std::max<int64_t>(4, std::min<int64_t>(5, token_lanes));
    }
}

// Rows per task: about `per_participant` tasks per participant, a multiple of `multiple`.
// Of the sizes from that one down to half of it, the one whose tasks load the busiest
// participant least (whole tasks: 960 rows in multiples of 16 for 16 tasks would be 15 tasks
// of 64, 8 against 7; tasks of 48 are 20, 10 each).
int64_t rows_per_task(int64_t n, int n_participants, int per_participant, int64_t multiple) {
    const int64_t n_units = (n + multiple - 1) / multiple;
    const int64_t n_tasks =
        std::max<int64_t>(1, std::min<int64_t>(n_units, int64_t(per_participant) * n_participants));
    const int64_t first = (n_units + n_tasks - 1) / n_tasks;  // units per task
    int64_t best = first, best_load = std::numeric_limits<int64_t>::max();
    for (int64_t u = first; u >= std::max<int64_t>(1, first / 2); --u) {
        const int64_t tasks = (n_units + u - 1) / u;
        const int64_t load = (tasks + n_participants - 1) / n_participants * u;
        if (load < best_load) best = u, best_load = load;
    }
    return best * multiple;
}

// Task t of a row split over several matrices: matrix `m`, rows [o0, o1).
struct RowTask {
    int m;
    int64_t o0, o1;
};

// The rows of n matrices cut into tasks of about `chunk` rows, each within one matrix, in
// matrix order.
class RowTasks {
  public:
    RowTasks(const Weight* ws, int n, int64_t chunk) : ws_(ws), n_(n), chunk_(chunk) {
        for (int m = 0; m < n; ++m) first_[m + 1] = first_[m] + (ws[m].n_out + chunk - 1) / chunk;
    }
    int64_t size() const { return first_[n_]; }
    int64_t first_of(int m) const { return first_[m]; }  // first task of matrix m (m <= n)
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

// Input rows [t0, t1) of `in` (n_in values each): in.x itself, or the transformed rows
// written to tmp: [t1 - t0, n_in].
const float* input_rows(const MatmulInput& in, int64_t n_in, int64_t t0, int64_t t1, float* tmp) {
    const float* x = in.x + t0 * n_in;
    if (in.norm) {
        rms_norm(x, in.norm, tmp, t1 - t0, n_in, in.eps);
        return tmp;
    }
    if (in.up) {
        swiglu(x, in.up + t0 * n_in, tmp, (t1 - t0) * n_in);
        return tmp;
    }
    return x;
}

bool transforms(const MatmulInput& in) {
    return in.norm || in.up;
}

// add_to[t, o] += y[t, o] for rows [o0, o1) of every token.
void add_rows(float* add_to, const float* y, int64_t n_out, int64_t n_tokens, int64_t o0,
              int64_t o1) {
    if (!add_to) return;
    for (int64_t t = 0; t < n_tokens; ++t)
        add_inplace(add_to + t * n_out + o0, y + t * n_out + o0, o1 - o0);
}

// The epilogue's hook after task rows [o0, o1) of matrix m (nothing without an epilogue).
void epilogue_after(const MatmulEpilogue* epi, int m, int64_t o0, int64_t o1) {
    if (epi && epi->after) epi->after(epi->ctx, m, o0, o1);
}

// The reference path for weight types without a SIMD kernel on this target: activations in
// the reference block format, one vec_dot_act per output value.
void matmul_fallback(Region& r, const Weight& w, const MatmulInput& in, float* y, int64_t n_tokens,
                     float* add_to, const MatmulEpilogue* epi, int m) {
    const DType at = act_type(w.type);
    const size_t xa_bytes = row_bytes(at, w.n_in);
    auto* xa = static_cast<uint8_t*>(r.shared_scratch(xa_bytes * size_t(n_tokens)));
    r.set_phase("convert");
    r.for_each(n_tokens, [&](int64_t t) {
        auto* tmp = static_cast<float*>(r.thread_scratch(size_t(w.n_in) * sizeof(float)));
        quantize_row(at, input_rows(in, w.n_in, t, t + 1, tmp), xa + size_t(t) * xa_bytes, w.n_in);
    });
    r.set_phase(nullptr);
    const int64_t rows_per_task = std::lcm(int64_t(16), epi ? epi->row_multiple : int64_t(1));
    r.for_each((w.n_out + rows_per_task - 1) / rows_per_task, [&](int64_t task) {
        const int64_t o0 = task * rows_per_task, o1 = std::min(w.n_out, o0 + rows_per_task);
        auto* tmp = static_cast<uint8_t*>(r.thread_scratch(row_bytes(w.type, w.n_in)));
        for (int64_t o = o0; o < o1; ++o) {
            const uint8_t* row = file_row(w, o, tmp);
            for (int64_t t = 0; t < n_tokens; ++t)
                y[t * w.n_out + o] = vec_dot_act(w.type, row, xa + size_t(t) * xa_bytes, w.n_in);
        }
        add_rows(add_to, y, w.n_out, n_tokens, o0, o1);
        epilogue_after(epi, m, o0, o1);
    });
}

// One step converting the input rows into act ([n_tokens, l.row_bytes]), a token per task.
void convert_tokens(Region& r, const MatmulInput& in, const ActLayout& l, int64_t n_tokens,
                    uint8_t* act) {
    r.for_each(n_tokens, [&](int64_t t) {
        float* tmp = transforms(in)
                         ? static_cast<float*>(r.thread_scratch(size_t(l.n_in) * sizeof(float)))
                         : nullptr;
        kern::quantize_act_rows(input_rows(in, l.n_in, t, t + 1, tmp), 0, 1,
                                act + size_t(t) * l.row_bytes, l);
    });
}

// How a matmul_many call runs: each matrix on its own (mixed types, or no SIMD kernel),
// matrix-matrix (packed activations) or streamed rows (matrix-vector, and interleaved weights
// up to kern::gemv_interleaved_max_tokens()), and the task split. Rows with shared_act: the
// tokens are converted in a step of their own, one per task, instead of by every participant.
enum class MatmulPath { Empty, Separate, Packed, Rows };
struct MatmulPlan {
    MatmulPath path = MatmulPath::Empty;
    bool shared_act = false;
    bool interleaved = false;      // every weight of the call is Interleaved16
    bool any_interleaved = false;  // some weight is: tasks take whole groups of 16 rows
    ActLayout l;
    size_t packed_bytes = 0;  // Packed: bytes of one packed vector
    int64_t total_rows = 0;
    int64_t task_rows = 0;     // rows per task, depends on the participants
    int64_t row_multiple = 1;  // of every task boundary (an epilogue's)
};

int64_t task_rows(const Region& r, const MatmulPlan& p, int64_t n_tokens);

// row_multiple: task boundaries fall on its multiples (MatmulEpilogue::row_multiple).
MatmulPlan plan_matmul(const Region& r, const Weight* ws, int n, int64_t n_tokens,
                       int64_t row_multiple = 1) {
    MatmulPlan p;
    p.row_multiple = row_multiple;
    const DType at = act_type(ws[0].type);  // throws troupe::Error for types without compute
    bool fused = kern::has_kernel(ws[0].type);
    for (int m = 0; m < n; ++m) {
        fused &=
            act_type(ws[m].type) == at && ws[m].n_in == ws[0].n_in && kern::has_kernel(ws[m].type);
        p.total_rows += ws[m].n_out;
    }
    if (!fused) {
        p.path = MatmulPath::Separate;
        return p;
    }
    if (p.total_rows == 0) return p;
    p.l = act_layout(at, ws[0].n_in);
    p.packed_bytes = kern::gemm_packed_bytes(ws[0], p.l);
    int64_t min_tokens = 0;
    const int64_t token_lanes = int64_t(kern::gemm_token_lanes());
    bool pairs = kern::gemm_has_pairs();
    p.interleaved = true;
    for (int m = 0; m < n; ++m) {
        pairs &= kern::has_pair_kernel(ws[m].type) && ws[m].layout == WeightLayout::Rows;
        p.interleaved &= ws[m].layout == WeightLayout::Interleaved16;
        p.any_interleaved |= ws[m].layout == WeightLayout::Interleaved16;
    }
    for (int m = 0; m < n; ++m) {
        if (kern::gemm_packed_bytes(ws[m], p.l) == 0) p.packed_bytes = 0;
        min_tokens = std::max(min_tokens, min_gemm_tokens(ws[m].type, token_lanes, pairs));
    }
    const bool packed = n_tokens >= min_tokens && p.packed_bytes > 0;
    // Interleaved weights (kernels/weight_layout.h) take their own kernel up to
    // gemv_interleaved_max_tokens() tokens; larger batches are packed for the matrix-matrix
    // kernel, which reads those weights as well.
    if (p.interleaved && n_tokens <= kern::gemv_interleaved_max_tokens()) {
        p.path = MatmulPath::Rows;
        p.shared_act = packed;
    } else {
        p.path = packed ? MatmulPath::Packed : MatmulPath::Rows;
    }
    p.task_rows = task_rows(r, p, n_tokens);
    return p;
}

// Rows per task of plan p on the participants of r.
int64_t task_rows(const Region& r, const MatmulPlan& p, int64_t n_tokens) {
    if (p.path == MatmulPath::Rows) {
        // Interleaved weights need whole groups of 16 rows, the others whole row groups of
        // the vector width, and a call may mix them (a Q4_K_M file has a few Q8_0 matrices
        // among its Q5_0 / Q4_K / Q6_K ones): the vector's group alone (8 rows on AVX2, 4 on
        // NEON) cut interleaved weights inside their groups (a failed check; AVX-512's 16
        // hid it).
        const int64_t row_group = kern::gemv_row_group();
        const int64_t group = p.any_interleaved ? std::lcm(kInterleaveRows, row_group) : row_group;
        return rows_per_task(p.total_rows, r.size(), 6, std::lcm(group, p.row_multiple));
    }
    // Up to a vector of tokens the kernels stream the weights (about the time of reading
    // them), and every task starts cold, its first rows waiting on DRAM: one task per
    // participant (measured at batch 8, 1536x576 q8_0: 4 per participant lost ~18%). Larger
    // batches are compute-bound and keep 4 for balance; interleaved weights, whose tasks
    // take whole groups of 16 rows, 8 (576 rows in tasks of 80 gave one participant 320).
    const bool small = n_tokens <= int64_t(kern::gemm_token_lanes());
    const int per_participant = small ? 1 : p.any_interleaved ? 8 : 4;
    return rows_per_task(
        p.total_rows, r.size(), per_participant,
        std::lcm(p.any_interleaved ? kInterleaveRows : int64_t(4), p.row_multiple));
}

// The weight bytes this participant reads first under plan p: its share of the tasks, up to
// the end of the matrix its share starts in.
std::pair<const void*, const void*> weight_share(const Region& r, const Weight* ws, int n,
                                                 const MatmulPlan& p) {
    if (p.path != MatmulPath::Rows && p.path != MatmulPath::Packed) return {nullptr, nullptr};
    const RowTasks tasks(ws, n, p.task_rows);
    const auto [b, e] = r.my_share(tasks.size());
    if (b >= e) return {nullptr, nullptr};
    const RowTask first = tasks[b];
    const Weight& w = ws[first.m];
    const RowTask last = tasks[std::min(e, tasks.first_of(first.m + 1)) - 1];
    return {w.data + size_t(first.o0) * w.row_stride, w.data + size_t(last.o1) * w.row_stride};
}

// Matrix-matrix: one step converts and packs the tokens (a packed vector per task; a batch
// smaller than that takes a step per token to convert, then one to pack), one step computes
// row ranges for all tokens.
void matmul_packed(Region& r, const Weight* ws, int n, const MatmulInput& in, float* const* ys,
                   int64_t n_tokens, float* const* add_to, const MatmulEpilogue* epi,
                   const MatmulPlan& plan) {
    const ActLayout& l = plan.l;
    const int64_t L = int64_t(kern::gemm_token_lanes());
    const int64_t n_vecs = (n_tokens + L - 1) / L;
    const size_t act_bytes = l.row_bytes * size_t(n_tokens);
    bool pair_types = true;
    size_t scratch_bytes = 0;
    for (int m = 0; m < n; ++m) {
        pair_types &= kern::has_pair_kernel(ws[m].type) && ws[m].layout == WeightLayout::Rows;
        scratch_bytes = std::max(scratch_bytes, kern::gemm_scratch_bytes(ws[m]));
    }
    const size_t n_packed = size_t(kern::gemm_packed_vectors(pair_types, n_tokens));
    auto* act = static_cast<uint8_t*>(r.shared_scratch(act_bytes + plan.packed_bytes * n_packed));
    uint8_t* packed = act + act_bytes;
    // While the tokens are packed, a participant that waits fetches its own weights; from the
    // product on, what its caller said comes next.
    const auto next = r.pending_prefetch();
    const auto mine = weight_share(r, ws, n, plan);
    r.prefetch_next(mine.first, mine.second);
    r.set_phase("convert");
    if (n_vecs < r.size() && n_tokens > 1) {
        // Fewer vectors of tokens than participants (batched decode): the tokens are converted
        // one per task, then packed; one step for both would leave all but one idle.
        convert_tokens(r, in, l, n_tokens, act);
        r.set_phase("pack");
        r.for_each(n_vecs, [&](int64_t tv) {
            kern::quantize_and_pack(pair_types, nullptr, l, tv, n_tokens, act, packed);
        });
    } else {
        r.for_each(n_vecs, [&](int64_t tv) {
            const int64_t t0 = tv * L, t1 = std::min(n_tokens, t0 + L);
            float* tmp = transforms(in) ? static_cast<float*>(r.thread_scratch(
                                              size_t(L) * size_t(l.n_in) * sizeof(float)))
                                        : nullptr;
            kern::quantize_and_pack(pair_types, input_rows(in, l.n_in, t0, t1, tmp), l, tv,
                                    n_tokens, act, packed);
        });
    }
    r.set_phase(nullptr);
    r.prefetch_next(next.first, next.second);
    const RowTasks tasks(ws, n, plan.task_rows);
    r.for_each(tasks.size(), [&](int64_t t) {
        const RowTask task = tasks[t];
        auto* scratch = static_cast<uint8_t*>(r.thread_scratch(scratch_bytes));
        const Weight& w = ws[task.m];
        kern::gemm_rows(w, l, packed, pair_types, n_tokens, task.o0, task.o1, ys[task.m], scratch);
        if (add_to) add_rows(add_to[task.m], ys[task.m], w.n_out, n_tokens, task.o0, task.o1);
        epilogue_after(epi, task.m, task.o0, task.o1);
    });
}

// Matrix-vector: every participant converts the activations into its own scratch (or, with
// plan.shared_act, a step converts them into shared scratch, a token per task), then streams
// the rows of its tasks; prefetching runs on to the end of its share of a matrix.
void matmul_rows(Region& r, const Weight* ws, int n, const MatmulInput& in, float* const* ys,
                 int64_t n_tokens, float* const* add_to, const MatmulEpilogue* epi,
                 const MatmulPlan& plan) {
    const ActLayout& l = plan.l;
    const size_t act_bytes = l.row_bytes * size_t(n_tokens);
    const size_t tmp_bytes = transforms(in) ? size_t(n_tokens * l.n_in) * sizeof(float) : 0;
    size_t tile_bytes = 0;
    for (int m = 0; m < n; ++m)
        tile_bytes = std::max(tile_bytes, kern::gemv_scratch_bytes(ws[m], n_tokens));
    tile_bytes = round_up_64(tile_bytes);
    const RowTasks tasks(ws, n, plan.task_rows);
    const auto [share_begin, share_end] = r.my_share(tasks.size());
    uint8_t* act = nullptr;
    uint8_t* tile_scratch = nullptr;
    if (plan.shared_act) {
        act = static_cast<uint8_t*>(r.shared_scratch(act_bytes));
        // While the tokens are converted, a participant that waits fetches its own weights.
        const auto next = r.pending_prefetch();
        const auto mine = weight_share(r, ws, n, plan);
        r.prefetch_next(mine.first, mine.second);
        r.set_phase("convert");
        convert_tokens(r, in, l, n_tokens, act);
        r.set_phase(nullptr);
        r.prefetch_next(next.first, next.second);
    }
    kern::WeightStream stream;
    r.for_each(tasks.size(), [&](int64_t t) {
        if (!tile_scratch && plan.shared_act) {
            tile_scratch = static_cast<uint8_t*>(r.thread_scratch(tile_bytes));
        } else if (!act) {
            act = static_cast<uint8_t*>(r.thread_scratch(act_bytes + tile_bytes + tmp_bytes));
            tile_scratch = act + act_bytes;
            auto* tmp = reinterpret_cast<float*>(tile_scratch + tile_bytes);
            kern::quantize_act_rows(input_rows(in, l.n_in, 0, n_tokens, tmp), 0, n_tokens, act, l);
        }
        const RowTask task = tasks[t];
        const Weight& w = ws[task.m];
        int64_t last = t;  // the last task of this share in the same matrix
        if (t >= share_begin && t < share_end)
            last = std::min(share_end, tasks.first_of(task.m + 1)) - 1;
        stream.end = w.data + size_t(tasks[last].o1) * w.row_stride;
        kern::gemv_rows(w, act, l, 0, n_tokens, task.o0, task.o1, stream, ys[task.m], tile_scratch);
        if (add_to) add_rows(add_to[task.m], ys[task.m], w.n_out, n_tokens, task.o0, task.o1);
        epilogue_after(epi, task.m, task.o0, task.o1);
    });
}

}  // namespace

// The hook of `epi` for matrix m of a call as the hook of a call on that matrix alone.
struct ShiftedEpilogue {
    const MatmulEpilogue* epi;
    int m;
    static void after(void* ctx, int, int64_t o0, int64_t o1) {
        const auto* s = static_cast<const ShiftedEpilogue*>(ctx);
        epilogue_after(s->epi, s->m, o0, o1);
    }
};

void matmul_many(Region& r, const Weight* ws, int n, const MatmulInput& in, float* const* ys,
                 int64_t n_tokens, float* const* add_to, const MatmulEpilogue* epi) {
    TROUPE_CHECK(n >= 0 && n <= kMaxMatmulMany);
    if (n_tokens <= 0 || n == 0) return;
    const int64_t row_multiple = epi ? epi->row_multiple : 1;
    TROUPE_CHECK(row_multiple >= 1);
    for (int m = 0; m < n; ++m) TROUPE_CHECK(ws[m].n_out % row_multiple == 0);
    // throws for types without compute
    const MatmulPlan p = plan_matmul(r, ws, n, n_tokens, row_multiple);
    switch (p.path) {
        case MatmulPath::Separate:
            for (int m = 0; m < n; ++m) {
                float* const* add = add_to ? add_to + m : nullptr;
                ShiftedEpilogue shifted{epi, m};
                const MatmulEpilogue one{&ShiftedEpilogue::after, &shifted, row_multiple};
                const MatmulEpilogue* e = epi ? &one : nullptr;
                if (kern::has_kernel(ws[m].type)) {
                    matmul_many(r, ws + m, 1, in, ys + m, n_tokens, add, e);
                } else {
                    matmul_fallback(r, ws[m], in, ys[m], n_tokens, add ? *add : nullptr, e, 0);
                }
            }
            return;
        case MatmulPath::Packed:
            return matmul_packed(r, ws, n, in, ys, n_tokens, add_to, epi, p);
        case MatmulPath::Rows:
            return matmul_rows(r, ws, n, in, ys, n_tokens, add_to, epi, p);
        case MatmulPath::Empty:
            return;
    }
}

void prefetch_next_matmul(Region& r, const Weight* ws, int n, int64_t n_tokens,
                          int64_t row_multiple) {
    if (n_tokens <= 0 || n <= 0 || n > kMaxMatmulMany) return r.prefetch_next(nullptr, nullptr);
    const MatmulPlan p = plan_matmul(r, ws, n, n_tokens, std::max<int64_t>(1, row_multiple));
    const auto [begin, end] = weight_share(r, ws, n, p);
    r.prefetch_next(begin, end);
}

void matmul_share_rows(const Region& r, const Weight* ws, int n, int64_t n_tokens,
                       int64_t row_multiple, std::pair<int64_t, int64_t>* rows) {
    TROUPE_CHECK(n >= 0 && n <= kMaxMatmulMany);
    std::fill(rows, rows + n, std::pair<int64_t, int64_t>{0, 0});
    if (n_tokens <= 0 || n == 0) return;
    const MatmulPlan p = plan_matmul(r, ws, n, n_tokens, std::max<int64_t>(1, row_multiple));
    if (p.path != MatmulPath::Rows && p.path != MatmulPath::Packed) return;
    const RowTasks tasks(ws, n, p.task_rows);
    const auto [b, e] = r.my_share(tasks.size());
    for (int m = 0; m < n; ++m) {
        const int64_t first = std::max(b, tasks.first_of(m));
        const int64_t last = std::min(e, tasks.first_of(m + 1));
        if (first < last) rows[m] = {tasks[first].o0, tasks[last - 1].o1};
    }
}

void matmul(Region& r, const Weight& w, const MatmulInput& in, float* y, int64_t n_tokens,
            float* add_to) {
    matmul_many(r, &w, 1, in, &y, n_tokens, add_to ? &add_to : nullptr);
}

void matmul_many(const Weight* ws, int n, const float* x, float* const* ys, int64_t n_tokens,
                 ThreadPool* pool) {
    if (n_tokens <= 0 || n <= 0) return;
    for (int m = 0; m < n; ++m) act_type(ws[m].type);  // throws before the region starts
    run_region(pool, [&](Region& r) { matmul_many(r, ws, n, MatmulInput{x}, ys, n_tokens); });
}

void matmul(const Weight& w, const float* x, float* y, int64_t n_tokens, ThreadPool* pool) {
    matmul_many(&w, 1, x, &y, n_tokens, pool);
}

void get_rows(const Weight& w, const int32_t* ids, int64_t n_ids, float* out) {
    ref::get_rows(w, ids, n_ids, out);
}

void get_rows(Region& r, const Weight& w, const int32_t* ids, int64_t n_ids, float* out) {
    const int64_t per_task = std::max<int64_t>(1, 16384 / std::max<int64_t>(w.n_in, 1));
    r.for_each((n_ids + per_task - 1) / per_task, [&](int64_t t) {
        const int64_t i0 = t * per_task, i1 = std::min(n_ids, i0 + per_task);
        ref::get_rows(w, ids + i0, i1 - i0, out + i0 * w.n_in);
    });
}

void convert_activations_for_test(DType act, const float* x, int64_t n, void* out) {
    const ActLayout l = act_layout(act, n);
    std::vector<uint8_t> row(l.row_bytes);
    kern::quantize_act_rows(x, 0, 1, row.data(), l);
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

}  // namespace troupe::ops
