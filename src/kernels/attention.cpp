// Attention over the paged KV cache: the work is cut into tasks (kv head x a tile of query
// vectors x a range of key positions), each producing online-softmax partial states with the
// kernels of attention-inl.h; the states of a query vector are then merged by log-sum-exp.
//
// - Decode (one row per sequence): few query vectors, so long key ranges are split into
//   chunks that run on different threads (flash-decoding).
// - Prefill: tiles of query rows; each row only reads keys up to its own position.
// - Shared prefixes: sequences whose block tables begin with the same physical blocks read
//   those blocks once for all their query vectors (one task set over the shared range), then
//   each adds its private remainder, and the two partial results merge.
// Tasks run longest first, so that the pool's dynamic split ends with short ones.
#include "kernels/simd_targets.h"  // first: decides the targets

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/attention-inl.h"

HWY_BEFORE_NAMESPACE();
namespace troupe::HWY_NAMESPACE {

// Entry points with a scalar fallback for the one-lane target.
size_t AttnPaddedHeadDim(int head_dim) {
#if HWY_TARGET != HWY_SCALAR
    return PaddedHeadDim(head_dim);
#else
    return size_t(head_dim);
#endif
}

size_t AttnScratchFloats(const ops::KvLayerView& kv, int nq) {
#if HWY_TARGET != HWY_SCALAR
    return AttendScratchFloats(kv, nq);
#else
    (void)kv, (void)nq;
    return 0;
#endif
}

bool AttnHasKernel() {
    return HWY_TARGET != HWY_SCALAR;
}

void AttnRange(const ops::KvLayerView& kv, int head, const int32_t* block_table, int32_t k0,
               int32_t k1, const float* const* q, const int32_t* qpos, int nq, float scale,
               float* m, float* l, float* o, float* scratch) {
#if HWY_TARGET != HWY_SCALAR
    AttendRange(kv, head, block_table, k0, k1, q, qpos, nq, scale, m, l, o, scratch);
#else
    (void)kv, (void)head, (void)block_table, (void)k0, (void)k1, (void)q, (void)qpos, (void)nq;
    (void)scale, (void)m, (void)l, (void)o, (void)scratch;
#endif
}

void KvStoreVector(DType type, const float* src, uint8_t* dst, int n) {
#if HWY_TARGET != HWY_SCALAR
    StoreKvVector(type, src, dst, n);
#else
    (void)type, (void)src, (void)dst, (void)n;
#endif
}

}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/ops.h"
#include "kernels/ops_ref.h"
#include "util/error.h"

namespace troupe {
HWY_EXPORT(AttnPaddedHeadDim);
HWY_EXPORT(AttnScratchFloats);
HWY_EXPORT(AttnHasKernel);
HWY_EXPORT(AttnRange);
HWY_EXPORT(KvStoreVector);

namespace ops {

namespace {

// Query vectors per task: enough to reuse each converted K/V block many times, few enough
// for the partial states to stay in cache.
constexpr int kMaxTaskQVecs = 64;

// One unit of work: query vectors qids[q_begin, q_end) of one kv head over keys [k0, k1).
struct Task {
    int kv_head = 0;
    const int32_t* block_table = nullptr;
    int32_t k0 = 0, k1 = 0;
    int q_begin = 0, q_end = 0;  // range of Plan::task_qids; also the task's state slots
};

// A query vector: row `row` of sequence `seq`, head `head`.
struct QVec {
    int seq, row, head;
};

struct Plan {
    std::vector<QVec> qvecs;     // by qid
    std::vector<int> task_qids;  // state slot -> qid
    std::vector<Task> tasks;
};

int n_blocks_of(const AttentionSeq& s, int block_size) {
    return (s.first_pos + s.n_q + block_size - 1) / block_size;
}

// Adds tasks for query vectors `qids` of kv head h over keys [k0, k1), split into tiles of
// kMaxTaskQVecs and into n_chunks block-aligned key ranges.
void add_tasks(Plan& plan, const std::vector<int>& qids, int h, const int32_t* block_table,
               int32_t k0, int32_t k1, int n_chunks, int block_size) {
    if (k1 <= k0 || qids.empty()) return;
    const int32_t n_blocks = (k1 - k0 + block_size - 1) / block_size;
    n_chunks = std::max(1, std::min<int>(n_chunks, n_blocks));
    const int32_t blocks_per_chunk = (n_blocks + n_chunks - 1) / n_chunks;
    for (size_t t0 = 0; t0 < qids.size(); t0 += kMaxTaskQVecs) {
        const size_t t1 = std::min(qids.size(), t0 + kMaxTaskQVecs);
        for (int32_t c0 = k0; c0 < k1; c0 += blocks_per_chunk * block_size) {
            Task t;
            t.kv_head = h;
            t.block_table = block_table;
            t.k0 = c0;
            t.k1 = std::min(k1, c0 + blocks_per_chunk * block_size);
            t.q_begin = int(plan.task_qids.size());
            plan.task_qids.insert(plan.task_qids.end(), qids.begin() + long(t0),
                                  qids.begin() + long(t1));
            t.q_end = int(plan.task_qids.size());
            plan.tasks.push_back(t);
        }
    }
}

// Key-range chunks per unit of work so that n_work units give every thread several tasks of
// equal size (a multiple of n_threads when the count is small): at least 4 per thread, so
// that a worker that joins late (descheduled by other processes) still takes its share.
int chunks_for(int64_t n_work, int n_threads) {
    if (n_work <= 0 || n_work >= 4 * n_threads) return 1;
    int c = int((4 * n_threads + n_work - 1) / n_work);
    while ((n_work * c) % n_threads != 0 && c < 4 * n_threads) ++c;
    return c;
}

Plan make_plan(const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs,
               const std::vector<SharedPrefixGroup>& groups, int n_head, int n_threads) {
    Plan plan;
    const int group = n_head / kv.n_kv_head;
    const int bs = kv.block_size;
    std::vector<int> qbase(size_t(n_seqs) + 1, 0);
    for (int s = 0; s < n_seqs; ++s) qbase[size_t(s) + 1] = qbase[size_t(s)] + seqs[s].n_q * n_head;
    plan.qvecs.resize(size_t(qbase.back()));
    for (int s = 0; s < n_seqs; ++s)
        for (int r = 0; r < seqs[s].n_q; ++r)
            for (int h = 0; h < n_head; ++h)
                plan.qvecs[size_t(qbase[size_t(s)] + r * n_head + h)] = {s, r, h};

    // Keys each sequence reads itself (after its group's shared blocks).
    std::vector<int32_t> private_start(size_t(n_seqs), 0);
    for (const SharedPrefixGroup& g : groups)
        for (int s : g.seqs) private_start[size_t(s)] = g.n_blocks * bs;

    // Few query vectors per kv head (decode): split the keys so that every thread has work.
    int64_t n_work = 0;
    for (int s = 0; s < n_seqs; ++s)
        n_work += (seqs[s].n_q * group + kMaxTaskQVecs - 1) / kMaxTaskQVecs;
    n_work *= kv.n_kv_head;
    const int n_chunks = chunks_for(n_work, n_threads);

    // The shared ranges are long and few: split them for all threads too.
    const int n_shared_chunks = chunks_for(int64_t(groups.size()) * kv.n_kv_head, n_threads);

    std::vector<int> qids;
    for (const SharedPrefixGroup& g : groups)
        for (int h = 0; h < kv.n_kv_head; ++h) {
            qids.clear();
            for (int s : g.seqs)
                for (int r = 0; r < seqs[s].n_q; ++r)
                    for (int j = 0; j < group; ++j)
                        qids.push_back(qbase[size_t(s)] + r * n_head + h * group + j);
            add_tasks(plan, qids, h, seqs[g.seqs.front()].block_table, 0, g.n_blocks * bs,
                      n_shared_chunks, bs);
        }
    // Private keys: tiles of rows, each reading keys up to its last row's position.
    const int rows_per_tile = std::max(1, kMaxTaskQVecs / group);
    for (int s = 0; s < n_seqs; ++s) {
        const AttentionSeq& sq = seqs[s];
        for (int r0 = 0; r0 < sq.n_q; r0 += rows_per_tile) {
            const int r1 = std::min(sq.n_q, r0 + rows_per_tile);
            for (int h = 0; h < kv.n_kv_head; ++h) {
                qids.clear();
                for (int r = r0; r < r1; ++r)
                    for (int j = 0; j < group; ++j)
                        qids.push_back(qbase[size_t(s)] + r * n_head + h * group + j);
                add_tasks(plan, qids, h, sq.block_table, private_start[size_t(s)],
                          sq.first_pos + r1, n_chunks, bs);
            }
        }
    }
    // Longest first (estimated by query vectors x keys): the dynamic split of the pool then
    // ends with short tasks, and the threads finish together.
    std::stable_sort(plan.tasks.begin(), plan.tasks.end(), [](const Task& a, const Task& b) {
        return int64_t(a.q_end - a.q_begin) * (a.k1 - a.k0) >
               int64_t(b.q_end - b.q_begin) * (b.k1 - b.k0);
    });
    return plan;
}

// Merges the partial states (m, l, o[hd_pad]) of every query vector and writes out = o / l.
void merge_states(const KvLayerView& kv, const AttentionSeq* seqs, int n_head, const Plan& plan,
                  const float* states, size_t state_floats, ThreadPool* pool) {
    // slot lists per qid (CSR)
    std::vector<int> count(plan.qvecs.size() + 1, 0);
    for (int qid : plan.task_qids) count[size_t(qid) + 1]++;
    for (size_t i = 1; i < count.size(); ++i) count[i] += count[i - 1];
    std::vector<int> slots(plan.task_qids.size());
    std::vector<int> fill(count.begin(), count.end() - 1);
    for (size_t slot = 0; slot < plan.task_qids.size(); ++slot)
        slots[size_t(fill[size_t(plan.task_qids[slot])]++)] = int(slot);
    const int hd = kv.head_dim;
    const int64_t n_qvecs = int64_t(plan.qvecs.size());
    constexpr int64_t kPerTask = 64;
    auto task = [&](int64_t t, int) {
        for (int64_t qid = t * kPerTask; qid < std::min(n_qvecs, (t + 1) * kPerTask); ++qid) {
            const QVec& qv = plan.qvecs[size_t(qid)];
            float* out =
                seqs[qv.seq].out + (size_t(qv.row) * size_t(n_head) + size_t(qv.head)) * size_t(hd);
            float m = -std::numeric_limits<float>::infinity();
            for (int i = count[size_t(qid)]; i < count[size_t(qid) + 1]; ++i)
                m = std::max(m, states[size_t(slots[size_t(i)]) * state_floats]);
            float l = 0.0f;
            std::fill(out, out + hd, 0.0f);
            for (int i = count[size_t(qid)]; i < count[size_t(qid) + 1]; ++i) {
                const float* st = states + size_t(slots[size_t(i)]) * state_floats;
                if (st[1] == 0.0f) continue;  // no visible key in that range
                const float w = std::exp(st[0] - m);
                l += st[1] * w;
                for (int d = 0; d < hd; ++d) out[d] += st[2 + d] * w;
            }
            const float inv = l > 0.0f ? 1.0f / l : 0.0f;
            for (int d = 0; d < hd; ++d) out[d] *= inv;
        }
    };
    const int64_t n_tasks = (n_qvecs + kPerTask - 1) / kPerTask;
    if (pool) {
        pool->run(n_tasks, task);
    } else {
        for (int64_t t = 0; t < n_tasks; ++t) task(t, 0);
    }
}

void check_attention_args(const KvLayerView& kv, int n_head) {
    TROUPE_CHECK(kv.type == DType::F16 || kv.type == DType::F32);
    TROUPE_CHECK(kv.n_kv_head > 0 && n_head % kv.n_kv_head == 0);
    TROUPE_CHECK(kv.head_dim > 0 && kv.head_dim <= 512 && kv.block_size > 0);
}

}  // namespace

std::vector<SharedPrefixGroup> find_shared_prefixes(const AttentionSeq* seqs, int n_seqs,
                                                    int block_size, int min_blocks) {
    std::vector<SharedPrefixGroup> groups;
    std::vector<bool> used(size_t(n_seqs), false);
    for (int a = 0; a < n_seqs; ++a) {
        if (used[size_t(a)] || n_blocks_of(seqs[a], block_size) < min_blocks) continue;
        SharedPrefixGroup g;
        g.seqs.push_back(a);
        int common = n_blocks_of(seqs[a], block_size);
        for (int b = a + 1; b < n_seqs; ++b) {
            if (used[size_t(b)]) continue;
            const int limit = std::min(common, n_blocks_of(seqs[b], block_size));
            int n = 0;
            while (n < limit && seqs[a].block_table[n] == seqs[b].block_table[n]) ++n;
            if (n < min_blocks) continue;
            common = n;
            g.seqs.push_back(b);
        }
        if (g.seqs.size() < 2) continue;
        g.n_blocks = common;
        for (int s : g.seqs) used[size_t(s)] = true;
        groups.push_back(std::move(g));
    }
    return groups;
}

void attention_shared(const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs,
                      const std::vector<SharedPrefixGroup>& groups, int n_head, float scale,
                      ThreadPool* pool) {
    check_attention_args(kv, n_head);
    if (n_seqs <= 0) return;
    if (!HWY_DYNAMIC_DISPATCH(AttnHasKernel)()) {
        for (int s = 0; s < n_seqs; ++s) ref::attention(kv, seqs + s, 1, n_head, scale);
        return;
    }
    const int n_threads = pool ? pool->size() : 1;
    const Plan plan = make_plan(kv, seqs, n_seqs, groups, n_head, n_threads);
    const size_t hd_pad = HWY_DYNAMIC_DISPATCH(AttnPaddedHeadDim)(kv.head_dim);
    const size_t state_floats = (2 + hd_pad + 15) / 16 * 16;  // m, l, o; 64-byte multiple
    const size_t scratch_floats = HWY_DYNAMIC_DISPATCH(AttnScratchFloats)(kv, kMaxTaskQVecs);
    std::vector<float> local_states, local_scratch;
    float* states;
    const size_t states_bytes = plan.task_qids.size() * state_floats * sizeof(float);
    if (pool) {
        states = static_cast<float*>(pool->shared_scratch(states_bytes));
    } else {
        local_states.resize(plan.task_qids.size() * state_floats);
        local_scratch.resize(scratch_floats);
        states = local_states.data();
    }
    const auto range = HWY_DYNAMIC_DISPATCH(AttnRange);
    auto run_task = [&](int64_t ti, int thread) {
        const Task& t = plan.tasks[size_t(ti)];
        const int nq = t.q_end - t.q_begin;
        const float* q[kMaxTaskQVecs];
        int32_t qpos[kMaxTaskQVecs];
        float m[kMaxTaskQVecs], l[kMaxTaskQVecs];
        for (int i = 0; i < nq; ++i) {
            const QVec& qv = plan.qvecs[size_t(plan.task_qids[size_t(t.q_begin + i)])];
            const AttentionSeq& sq = seqs[qv.seq];
            q[i] = sq.q + (size_t(qv.row) * size_t(n_head) + size_t(qv.head)) * size_t(kv.head_dim);
            qpos[i] = sq.first_pos + qv.row;
            m[i] = -std::numeric_limits<float>::infinity();
            l[i] = 0.0f;
        }
        // The kernel keeps o contiguous per query vector; states interleave m, l, o.
        float* st = states + size_t(t.q_begin) * state_floats;
        std::vector<float> o_local;
        float* o = nullptr;
        float* scratch = pool ? static_cast<float*>(pool->thread_scratch(
                                    thread, (scratch_floats + size_t(nq) * hd_pad) * sizeof(float)))
                              : nullptr;
        if (!pool) {
            o_local.resize(size_t(nq) * hd_pad);
            scratch = local_scratch.data();
            o = o_local.data();
        } else {
            o = scratch + scratch_floats;
        }
        std::fill(o, o + size_t(nq) * hd_pad, 0.0f);
        range(kv, t.kv_head, t.block_table, t.k0, t.k1, q, qpos, nq, scale, m, l, o, scratch);
        for (int i = 0; i < nq; ++i) {
            float* s = st + size_t(i) * state_floats;
            s[0] = m[i];
            s[1] = l[i];
            std::copy(o + size_t(i) * hd_pad, o + size_t(i) * hd_pad + size_t(kv.head_dim), s + 2);
        }
    };
    if (pool) {
        pool->run(int64_t(plan.tasks.size()), run_task);
    } else {
        for (size_t t = 0; t < plan.tasks.size(); ++t) run_task(int64_t(t), 0);
    }
    merge_states(kv, seqs, n_head, plan, states, state_floats, pool);
}

void attention(const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs, int n_head, float scale,
               ThreadPool* pool) {
    if (n_seqs <= 0) return;
    attention_shared(kv, seqs, n_seqs, find_shared_prefixes(seqs, n_seqs, kv.block_size), n_head,
                     scale, pool);
}

void kv_store(const KvLayerView& kv, const int32_t* block_table, const int32_t* pos, const float* k,
              const float* v, int64_t n) {
    TROUPE_CHECK(kv.type == DType::F16 || kv.type == DType::F32);
    if (!HWY_DYNAMIC_DISPATCH(AttnHasKernel)()) return ref::kv_store(kv, block_table, pos, k, v, n);
    const auto store = HWY_DYNAMIC_DISPATCH(KvStoreVector);
    const size_t elem = kv.type == DType::F16 ? 2 : 4;
    const int row = kv.n_kv_head * kv.head_dim;
    for (int64_t r = 0; r < n; ++r) {
        const int32_t block = block_table[pos[r] / kv.block_size];
        const size_t slot = size_t(pos[r] % kv.block_size);
        for (int h = 0; h < kv.n_kv_head; ++h) {
            const size_t at = size_t(block) * kv.block_stride + size_t(h) * kv.head_stride +
                              slot * size_t(kv.head_dim) * elem;
            store(kv.type, k + r * row + h * kv.head_dim, kv.k + at, kv.head_dim);
            store(kv.type, v + r * row + h * kv.head_dim, kv.v + at, kv.head_dim);
        }
    }
}

}  // namespace ops
}  // namespace troupe
#endif  // HWY_ONCE
