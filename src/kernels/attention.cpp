// Attention over the paged KV cache: the work is cut into tasks (kv head x a tile of query
// vectors x a range of key positions), each producing online-softmax partial states with the
// kernels of attention-inl.h; the states of a query vector are then merged by log-sum-exp.
//
// - Key ranges are cut at fixed positions (kAttentionKeyChunk): decode splits long contexts
//   over threads (flash-decoding), and a row's result does not depend on its batch.
// - Prefill: tiles of query rows; each row only reads keys up to its own position.
// - Shared prefixes: sequences whose block tables begin with the same physical blocks read
//   those blocks once for all their query vectors (one task set over the shared range), then
//   each adds its private remainder, and the two partial results merge. The chunk the common
//   blocks end in is a tail task: its steps of common keys for all the query vectors, then
//   each member's later keys through its own table, in the same states (a prompt's last
//   block is each agent's own, so the common keys rarely end on a chunk boundary). A long
//   prefill beside them (reads_alone) reads the prefix itself.
// - Each task prefetches the first blocks of the task after it (the same participant's next)
//   while it computes.
// Tasks run longest first, so that the pool's dynamic split ends with short ones.
#include "kernels/simd_targets.h"  // first: decides the targets

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/attention-inl.h"

HWY_BEFORE_NAMESPACE();
namespace troupe::HWY_NAMESPACE {

// Entry points with a scalar fallback for the one-lane target (which runs the reference).
size_t AttnStateSize(int head_dim) {
#if HWY_TARGET != HWY_SCALAR
    return AttnStateFloats(head_dim);
#else
    return size_t(ops::kAttnStateO + head_dim);
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
               int32_t k1, int32_t chunk, const float* const* q, const int32_t* qpos, int nq,
               float scale, float* states, size_t stride, const ops::AttentionTail* tail,
               float* scratch, const PrefetchRuns* next) {
#if HWY_TARGET != HWY_SCALAR
    AttendRange(kv, head, block_table, k0, k1, chunk, q, qpos, nq, scale, states, stride, tail,
                scratch, next);
#else
    (void)kv, (void)head, (void)block_table, (void)k0, (void)k1, (void)chunk, (void)q;
    (void)qpos, (void)nq, (void)scale, (void)states, (void)stride, (void)tail, (void)scratch;
    (void)next;
#endif
}

void AttnMerge(const float* base, const int* slots, size_t stride, int n, int hd, float* out) {
#if HWY_TARGET != HWY_SCALAR
    MergeStates(base, slots, stride, n, hd, out);
#else
    (void)base, (void)slots, (void)stride, (void)n, (void)hd, (void)out;
#endif
}

void KvStoreVector(DType type, const float* src, uint8_t* dst, int n, size_t stride) {
#if HWY_TARGET != HWY_SCALAR
    StoreKvVector(type, src, dst, n, stride);
#else
    (void)type, (void)src, (void)dst, (void)n, (void)stride;
#endif
}

}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/line_prefetch.h"
#include "kernels/ops.h"
#include "kernels/ops_ref.h"
#include "util/error.h"

namespace troupe {
HWY_EXPORT(AttnStateSize);
HWY_EXPORT(AttnScratchFloats);
HWY_EXPORT(AttnHasKernel);
HWY_EXPORT(AttnRange);
HWY_EXPORT(AttnMerge);
HWY_EXPORT(KvStoreVector);

namespace ops {

namespace {

// Query vectors per task: enough to reuse each K/V block (in L1) many times, few enough for
// the partial states to stay in cache; 60 is whole tiles of 6 (and 2) query vectors for
// GQA groups of 1 to 6 (a 64-vector task of 3-head groups had a last tile of 3 or 5).
constexpr int kMaxTaskQVecs = 60;

int n_blocks_of(const AttentionSeq& s, int block_size) {
    return (s.first_pos + s.n_q + block_size - 1) / block_size;
}

// Keys per chunk: kAttentionKeyChunk rounded to whole blocks.
int32_t key_chunk(int block_size) {
    return std::max(1, kAttentionKeyChunk / block_size) * block_size;
}

// One task for query vectors `qids` (at most kMaxTaskQVecs) of kv head h over all the key
// chunks of [k0, k1): its states are [chunk][query vector] in its slots, the chunks in key
// order (what the merge's CSR expects).
void add_multi_chunk_task(AttentionPlan& plan, const std::vector<int>& qids, int h,
                          const int32_t* block_table, int32_t k0, int32_t k1, int32_t chunk) {
    if (k1 <= k0 || qids.empty()) return;
    AttentionPlan::Task t;
    t.kv_head = h;
    t.block_table = block_table;
    t.k0 = k0;
    t.k1 = k1;
    t.slot0 = int(plan.task_qids.size());
    for (int32_t c0 = k0; c0 < k1; c0 = (c0 / chunk + 1) * chunk)
        plan.task_qids.insert(plan.task_qids.end(), qids.begin(), qids.end());
    t.slot1 = int(plan.task_qids.size());
    plan.tasks.push_back(t);
}

// Adds tasks for query vectors `qids` of kv head h over keys [k0, k1), split into tiles of
// kMaxTaskQVecs and at the fixed chunk boundaries.
void add_tasks(AttentionPlan& plan, const std::vector<int>& qids, int h, const int32_t* block_table,
               int32_t k0, int32_t k1, int32_t chunk) {
    if (k1 <= k0 || qids.empty()) return;
    for (size_t t0 = 0; t0 < qids.size(); t0 += kMaxTaskQVecs) {
        const size_t t1 = std::min(qids.size(), t0 + kMaxTaskQVecs);
        for (int32_t c0 = k0; c0 < k1; c0 = (c0 / chunk + 1) * chunk) {
            AttentionPlan::Task t;
            t.kv_head = h;
            t.block_table = block_table;
            t.k0 = c0;
            t.k1 = std::min(k1, (c0 / chunk + 1) * chunk);
            t.slot0 = int(plan.task_qids.size());
            plan.task_qids.insert(plan.task_qids.end(), qids.begin() + long(t0),
                                  qids.begin() + long(t1));
            t.slot1 = int(plan.task_qids.size());
            plan.tasks.push_back(t);
        }
    }
}

// Tail tasks of kv head h for the members of a shared prefix (batch indices, each with at most
// kMaxTaskQVecs query vectors of the head; qids: theirs, member after member): the key chunk
// from c0, in which the keys below `split` are common to all; members packed in order into
// tasks of at most kMaxTaskQVecs query vectors.
void add_tail_tasks(AttentionPlan& plan, const AttentionSeq* seqs, const std::vector<int>& members,
                    const std::vector<int>& qids, int group, int h, int32_t c0, int32_t split,
                    int32_t chunk) {
    size_t q = 0;  // the first qid of members[m]
    for (size_t m = 0; m < members.size();) {
        AttentionPlan::Task t;
        t.kv_head = h;
        t.k0 = c0;
        t.split = split;
        t.slot0 = int(plan.task_qids.size());
        t.member0 = int(plan.tail_members.size());
        int32_t k1 = 0;
        int nq = 0;
        for (; m < members.size() && nq + seqs[members[m]].n_q * group <= kMaxTaskQVecs; ++m) {
            const AttentionSeq& sq = seqs[members[m]];
            const AttentionTailMember mb{sq.block_table, nq, sq.n_q * group, sq.first_pos + sq.n_q};
            plan.task_qids.insert(plan.task_qids.end(), qids.begin() + long(q),
                                  qids.begin() + long(q) + mb.nq);
            plan.tail_members.push_back(mb);
            q += size_t(mb.nq);
            nq += mb.nq;
            if (mb.k1 > k1) {  // the task's table: the one reaching furthest (its prefetch)
                k1 = mb.k1;
                t.block_table = sq.block_table;
            }
        }
        // Every member has a key past c0: it uses all the common blocks, which end after c0.
        t.k1 = std::min(c0 + chunk, k1);
        t.member1 = int(plan.tail_members.size());
        t.slot1 = int(plan.task_qids.size());
        plan.tasks.push_back(t);
    }
}

// The slots of every query vector in key order (CSR): shared ranges come first in
// task_qids and ranges of one sequence are added in ascending order.
void index_merges(AttentionPlan& plan) {
    const size_t n = plan.qvecs.size();
    plan.merge_begin.assign(n + 1, 0);
    for (int qid : plan.task_qids) plan.merge_begin[size_t(qid) + 1]++;
    for (size_t i = 1; i <= n; ++i) plan.merge_begin[i] += plan.merge_begin[i - 1];
    plan.merge_slots.resize(plan.task_qids.size());
    std::vector<int> fill(plan.merge_begin.begin(), plan.merge_begin.end() - 1);
    for (size_t slot = 0; slot < plan.task_qids.size(); ++slot)
        plan.merge_slots[size_t(fill[size_t(plan.task_qids[slot])]++)] = int(slot);
}

// Long prefills run as whole tasks: enough rows for the threads to share, and few enough
// chunks for the states to stay in the thread's scratch.
constexpr int kWholeMinRows = 32;
constexpr int kWholeMaxChunks = 32;

int32_t n_chunks_to(int32_t k1, int32_t chunk) {
    return (k1 + chunk - 1) / chunk;
}

// Rows whose keys all lie in one chunk (a short context's decode) are whole tasks too: the
// task's one state per query vector is merged in place, and a batch of only such rows skips
// the merge step (one barrier per layer fewer).
bool whole_rows(const AttentionSeq& sq, int group, int32_t private_start, int32_t k1,
                int32_t chunk) {
    if (group > kMaxTaskQVecs || private_start != 0) return false;
    const int32_t n_chunks = n_chunks_to(k1, chunk);
    return n_chunks == 1 || (sq.n_q >= kWholeMinRows && n_chunks <= kWholeMaxChunks);
}

// A sequence that shares a prefix with others in the batch but reads all its keys itself, as
// whole tasks: a prefill whose own query vectors fill tasks of kMaxTaskQVecs (an agent's
// private suffix after a shared context), so reading the shared blocks together with the
// others would save no loads, while a state per chunk and query vector (megabytes for a few
// hundred rows) would go through memory and a merge step. Measured with 7 suffixes of 57 rows
// over a 1,104-token shared prefix: 3.4-3.6 -> 3.0-3.1 ms per layer.
bool reads_alone(const AttentionSeq& sq, int group, int32_t chunk) {
    return sq.n_q >= kWholeMinRows && sq.n_q * group >= kMaxTaskQVecs &&
           whole_rows(sq, group, 0, sq.first_pos + sq.n_q, chunk);
}

// Leading block-table entries a and b share, at most `limit`.
int common_blocks(const AttentionSeq& a, const AttentionSeq& b, int limit) {
    int n = 0;
    while (n < limit && a.block_table[n] == b.block_table[n]) ++n;
    return n;
}

void check_attention_args(const KvLayerView& kv, int n_head) {
    TROUPE_CHECK(kv_type_supported(kv.type, kv.head_dim));
    TROUPE_CHECK(kv.n_kv_head > 0 && n_head % kv.n_kv_head == 0);
    TROUPE_CHECK(kv.head_dim > 0 && kv.head_dim <= 512 && kv.block_size > 0);
}

// Floats of one partial state (ops::kAttnState* layout).
size_t state_floats(const KvLayerView& kv) {
    return HWY_DYNAMIC_DISPATCH(AttnStateSize)(kv.head_dim);
}

float* output_of(const AttentionPlan& plan, int qid, int hd) {
    const AttentionPlan::QVec& qv = plan.qvecs[size_t(qid)];
    return plan.seqs[qv.seq].out +
           (size_t(qv.row) * size_t(plan.n_head) + size_t(qv.head)) * size_t(hd);
}

// The K and V blocks of the first key chunk of task `t` (as many as PrefetchRuns holds).
void first_blocks_of(const KvLayerView& kv, const AttentionPlan::Task& t, PrefetchRuns& runs) {
    const size_t elem = kv_elem_bytes(kv.type);
    runs.bytes = size_t(kv.block_size) * size_t(kv.head_dim) * elem;
    runs.n = 0;
    const int32_t chunk = key_chunk(kv.block_size);
    const int32_t last = std::min(t.k1, (t.k0 / chunk + 1) * chunk) - 1;
    for (int32_t b = t.k0 / kv.block_size;
         b <= last / kv.block_size && runs.n + 2 <= PrefetchRuns::kMaxRuns; ++b) {
        const size_t at =
            kv_block_offset(kv, t.block_table[b]) + size_t(t.kv_head) * kv.head_stride;
        runs.run[runs.n++] = kv.k + at;
        runs.run[runs.n++] = kv.v + at;
    }
}

// Whether task ti + 1 is the one this participant runs after task ti: it is, unless ti + 1
// begins a participant's share (Region runs each share in order, from its start).
bool next_is_mine(const Region& r, size_t ti, size_t n_tasks) {
    if (ti + 1 >= n_tasks) return false;
    for (int p = 0; p < r.size(); ++p)
        if (r.share(int64_t(n_tasks), p).first == int64_t(ti + 1)) return false;
    return true;
}

// Task `ti`: its query vectors over its key range. A plain task writes one state per query
// vector to its slots; a whole task writes one per key chunk and query vector into its own
// scratch and merges them. Meanwhile the first blocks of this participant's next task are
// prefetched: decode attention over a cache in DRAM is as much transfer as arithmetic, and
// this overlaps them.
void run_task(Region& r, const KvLayerView& kv, const AttentionPlan& plan, size_t ti, float scale,
              float* states) {
    const AttentionPlan::Task& t = plan.tasks[ti];
    PrefetchRuns next;
    if (next_is_mine(r, ti, plan.tasks.size())) first_blocks_of(kv, plan.tasks[ti + 1], next);
    // Chunks of [k0, k1). A plain task has a slot per chunk and query vector (the query
    // vectors repeated per chunk), a whole task a slot per query vector.
    const int32_t chunk = key_chunk(kv.block_size);
    const int n_chunks = (t.k1 + chunk - 1) / chunk - t.k0 / chunk;
    TROUPE_CHECK(t.whole || (t.slot1 - t.slot0) % n_chunks == 0);
    const int nq = t.whole ? t.slot1 - t.slot0 : (t.slot1 - t.slot0) / n_chunks;
    TROUPE_CHECK(nq <= kMaxTaskQVecs);
    const int* qids = (t.whole ? plan.whole_qids.data() : plan.task_qids.data()) + t.slot0;
    const size_t scratch_floats = HWY_DYNAMIC_DISPATCH(AttnScratchFloats)(kv, kMaxTaskQVecs);
    const size_t sf = state_floats(kv);
    const float* q[kMaxTaskQVecs];
    int32_t qpos[kMaxTaskQVecs];
    for (int i = 0; i < nq; ++i) {
        const AttentionPlan::QVec& qv = plan.qvecs[size_t(qids[i])];
        const AttentionSeq& sq = plan.seqs[qv.seq];
        q[i] =
            sq.q + (size_t(qv.row) * size_t(plan.n_head) + size_t(qv.head)) * size_t(kv.head_dim);
        qpos[i] = sq.first_pos + qv.row;
    }
    // A whole task's states: [n_chunks][nq] after the kernel's scratch, 64-byte aligned.
    const size_t own_at = (scratch_floats + 15) / 16 * 16;
    auto* scratch = static_cast<float*>(
        r.thread_scratch((own_at + (t.whole ? size_t(n_chunks * nq) * sf : 0)) * sizeof(float)));
    float* dst = t.whole ? scratch + own_at : states + size_t(t.slot0) * sf;
    const ops::AttentionTail tail{t.split, plan.tail_members.data() + t.member0,
                                  t.member1 - t.member0};
    HWY_DYNAMIC_DISPATCH(AttnRange)
    (kv, t.kv_head, t.block_table, t.k0, t.k1, chunk, q, qpos, nq, scale, dst, sf,
     tail.n_members > 0 ? &tail : nullptr, scratch, &next);
    if (!t.whole) return;
    // A query vector sees no key of the chunks past its position: those states are empty
    // (l = 0), as the plain tasks of the same chunks would give.
    const auto merge_one = HWY_DYNAMIC_DISPATCH(AttnMerge);
    for (int i = 0; i < nq; ++i)
        merge_one(dst + size_t(i) * sf, nullptr, size_t(nq) * sf, n_chunks, kv.head_dim,
                  output_of(plan, qids[i], kv.head_dim));
}

// Merges the partial states of query vectors [q0, q1) in key order: out = o / l. Query
// vectors without slots belong to whole tasks, which wrote their outputs.
void merge(const KvLayerView& kv, const AttentionPlan& plan, const float* states, int64_t q0,
           int64_t q1) {
    const size_t sf = state_floats(kv);
    const auto merge_one = HWY_DYNAMIC_DISPATCH(AttnMerge);
    for (int64_t qid = q0; qid < q1; ++qid) {
        const int s0 = plan.merge_begin[size_t(qid)], s1 = plan.merge_begin[size_t(qid) + 1];
        if (s0 == s1) continue;
        merge_one(states, plan.merge_slots.data() + s0, sf, s1 - s0, kv.head_dim,
                  output_of(plan, int(qid), kv.head_dim));
    }
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
            const int n = common_blocks(
                seqs[a], seqs[b], std::min(common, n_blocks_of(seqs[b], block_size)));
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

void plan_attention(const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs, int n_head,
                    const std::vector<SharedPrefixGroup>& groups, AttentionPlan& plan) {
    check_attention_args(kv, n_head);
    plan.seqs = seqs;
    plan.n_seqs = n_seqs;
    plan.n_head = n_head;
    plan.qvecs.clear();
    plan.task_qids.clear();
    plan.whole_qids.clear();
    plan.tasks.clear();
    plan.tail_members.clear();
    const int group = n_head / kv.n_kv_head;
    const int32_t chunk = key_chunk(kv.block_size);
    std::vector<int> qbase(size_t(n_seqs) + 1, 0);
    for (int s = 0; s < n_seqs; ++s) qbase[size_t(s) + 1] = qbase[size_t(s)] + seqs[s].n_q * n_head;
    plan.qvecs.resize(size_t(qbase.back()));
    for (int s = 0; s < n_seqs; ++s)
        for (int r = 0; r < seqs[s].n_q; ++r)
            for (int h = 0; h < n_head; ++h)
                plan.qvecs[size_t(qbase[size_t(s)] + r * n_head + h)] = {s, r, h};

    // Shared prefixes, read together up to a chunk boundary; the rest of each sequence's keys
    // it reads itself.
    std::vector<int32_t> private_start(size_t(n_seqs), 0);
    std::vector<int> qids;
    std::vector<int> members;
    for (const SharedPrefixGroup& g : groups) {
        // The members that read the prefix together, and the blocks they all share (a long
        // prefill that leaves may have been the one that shortened the group's prefix).
        members.clear();
        for (int s : g.seqs)
            if (!reads_alone(seqs[s], group, chunk)) members.push_back(s);
        if (members.size() < 2) continue;
        const AttentionSeq& first = seqs[members.front()];
        int n_blocks = n_blocks_of(first, kv.block_size);
        for (size_t m = 1; m < members.size(); ++m) {
            const AttentionSeq& sq = seqs[members[m]];
            n_blocks = common_blocks(first, sq, std::min(n_blocks, n_blocks_of(sq, kv.block_size)));
        }
        // Whole chunks of common keys by plain tasks; the chunk the common blocks end in by
        // tail tasks when it holds whole steps of them and each member's query vectors fit a
        // task (ops.h).
        const int32_t common_end = n_blocks * kv.block_size;
        const int32_t shared_end = common_end / chunk * chunk;
        const int32_t split = common_end / kAttentionStepKeys * kAttentionStepKeys;
        bool tail = split > shared_end;
        for (int s : members) tail = tail && seqs[s].n_q * group <= kMaxTaskQVecs;
        const int32_t own_start = tail ? shared_end + chunk : shared_end;
        if (own_start == 0) continue;
        for (int s : members) private_start[size_t(s)] = own_start;
        for (int h = 0; h < kv.n_kv_head; ++h) {
            qids.clear();
            for (int s : members)
                for (int r = 0; r < seqs[s].n_q; ++r)
                    for (int j = 0; j < group; ++j)
                        qids.push_back(qbase[size_t(s)] + r * n_head + h * group + j);
            add_tasks(plan, qids, h, first.block_table, 0, shared_end, chunk);
            if (tail) add_tail_tasks(plan, seqs, members, qids, group, h, shared_end, split, chunk);
        }
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
                const int32_t k1 = sq.first_pos + r1;
                if (whole_rows(sq, group, private_start[size_t(s)], k1, chunk)) {
                    AttentionPlan::Task t;
                    t.kv_head = h;
                    t.block_table = sq.block_table;
                    t.k0 = 0;
                    t.k1 = k1;
                    t.slot0 = int(plan.whole_qids.size());
                    plan.whole_qids.insert(plan.whole_qids.end(), qids.begin(), qids.end());
                    t.slot1 = int(plan.whole_qids.size());
                    t.whole = true;
                    plan.tasks.push_back(t);
                } else if (private_start[size_t(s)] > 0 && int(qids.size()) <= kMaxTaskQVecs) {
                    // The private keys after a shared prefix: one task over all their chunks
                    // (the shared tasks keep the threads busy; a decode row's task costs
                    // ~0.35 us of set-up whatever its keys).
                    add_multi_chunk_task(plan, qids, h, sq.block_table, private_start[size_t(s)],
                                         k1, chunk);
                } else {
                    add_tasks(plan, qids, h, sq.block_table, private_start[size_t(s)], k1, chunk);
                }
            }
        }
    }
    // Longest first (estimated by query vectors x keys): the dynamic split of the region then
    // ends with short tasks, and the threads finish together. Slots are fixed above, so the
    // order of the merge (and the result) does not depend on this.
    const int32_t chunk_keys = chunk;
    const auto cost = [chunk_keys](const AttentionPlan::Task& t) {
        const int64_t slots = t.slot1 - t.slot0;
        const int64_t n_chunks =
            t.whole ? 1 : (t.k1 + chunk_keys - 1) / chunk_keys - t.k0 / chunk_keys;
        return slots / n_chunks * (t.k1 - t.k0);  // query vectors x keys
    };
    std::stable_sort(plan.tasks.begin(), plan.tasks.end(),
                     [&](const AttentionPlan::Task& a, const AttentionPlan::Task& b) {
                         return cost(a) > cost(b);
                     });
    index_merges(plan);
}

void plan_attention(const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs, int n_head,
                    bool share, AttentionPlan& plan) {
    plan_attention(kv, seqs, n_seqs, n_head,
                   share ? find_shared_prefixes(seqs, n_seqs, kv.block_size)
                         : std::vector<SharedPrefixGroup>{},
                   plan);
}

void attention(Region& r, const KvLayerView& kv, const AttentionPlan& plan, float scale) {
    check_attention_args(kv, plan.n_head);
    if (plan.n_seqs <= 0) return;
    if (!HWY_DYNAMIC_DISPATCH(AttnHasKernel)()) {
        r.serial([&] {
            for (int s = 0; s < plan.n_seqs; ++s)
                ref::attention(kv, plan.seqs + s, 1, plan.n_head, scale);
        });
        return;
    }
    auto* states = static_cast<float*>(
        r.shared_scratch(plan.task_qids.size() * state_floats(kv) * sizeof(float)));
    r.for_each(int64_t(plan.tasks.size()),
               [&](int64_t t) { run_task(r, kv, plan, size_t(t), scale, states); });
    // The merge: query vectors in equal tasks of at most kMaxQVecsPerTask, at least one per
    // participant (a decode batch has few: 8 sequences x 9 heads are 72). Whole tasks have
    // merged theirs.
    if (plan.task_qids.empty()) return;
    constexpr int64_t kMaxQVecsPerTask = 64;
    const int64_t n_qvecs = int64_t(plan.qvecs.size());
    const int64_t n_merge = std::min(
        n_qvecs, std::max<int64_t>(r.size(), (n_qvecs + kMaxQVecsPerTask - 1) / kMaxQVecsPerTask));
    r.set_phase("merge");
    r.for_each(n_merge, [&](int64_t t) {
        merge(kv, plan, states, n_qvecs * t / n_merge, n_qvecs * (t + 1) / n_merge);
    });
    r.set_phase(nullptr);
}

void attention_shared(const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs,
                      const std::vector<SharedPrefixGroup>& groups, int n_head, float scale,
                      ThreadPool* pool) {
    check_attention_args(kv, n_head);
    if (n_seqs <= 0) return;
    AttentionPlan plan;
    plan_attention(kv, seqs, n_seqs, n_head, groups, plan);
    run_region(pool, [&](Region& r) { attention(r, kv, plan, scale); });
}

void attention(const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs, int n_head, float scale,
               ThreadPool* pool) {
    if (n_seqs <= 0) return;
    attention_shared(kv, seqs, n_seqs, find_shared_prefixes(seqs, n_seqs, kv.block_size), n_head,
                     scale, pool);
}

// Runs fn(h, d0, d1) for the pieces of kv heads that columns [c0, c1) cover: dimensions
// [d0, d1) of head h.
template <class F>
void for_each_head_piece(const KvLayerView& kv, int c0, int c1, F&& fn) {
    for (int c = c0; c < c1;) {
        const int h = c / kv.head_dim, d0 = c % kv.head_dim;
        const int d1 = std::min(kv.head_dim, d0 + (c1 - c));
        fn(h, d0, d1);
        c += d1 - d0;
    }
}

void kv_store_cols(const KvLayerView& kv, bool values, int c0, int c1, const int32_t* block_table,
                   const int32_t* pos, const float* src, int64_t n) {
    TROUPE_CHECK(kv_type_supported(kv.type, kv.head_dim));
    const int row = kv.n_kv_head * kv.head_dim;
    TROUPE_CHECK(0 <= c0 && c0 <= c1 && c1 <= row);
    if (!HWY_DYNAMIC_DISPATCH(AttnHasKernel)())
        return ref::kv_store_cols(kv, values, c0, c1, block_table, pos, src, n);
    const auto store = HWY_DYNAMIC_DISPATCH(KvStoreVector);
    const size_t elem = kv_elem_bytes(kv.type);
    uint8_t* base = values ? kv.v : kv.k;
    for (int64_t r = 0; r < n; ++r) {
        const int32_t block = block_table[pos[r] / kv.block_size];
        const size_t slot = size_t(pos[r] % kv.block_size);
        for_each_head_piece(kv, c0, c1, [&](int h, int d0, int d1) {
            uint8_t* at = base + kv_block_offset(kv, block) + size_t(h) * kv.head_stride;
            const float* x = src + r * row + h * kv.head_dim + d0;
            if (values) {
                store(kv.type, x, at + (slot * size_t(kv.head_dim) + size_t(d0)) * elem, d1 - d0,
                      1);
            } else if (kv.type == DType::BF16) {  // dimension pairs (kv_key_elem)
                uint16_t tmp[512];                // head_dim <= 512 (check_attention_args)
                store(kv.type, x, reinterpret_cast<uint8_t*>(tmp), d1 - d0, 1);
                for (int d = d0; d < d1; ++d)
                    std::memcpy(at + kv_key_elem(kv, d, slot) * elem, tmp + (d - d0), 2);
            } else {  // transposed: dimension d of the slot, block_size elements apart
                store(kv.type, x, at + (size_t(d0) * size_t(kv.block_size) + slot) * elem,
                      d1 - d0, size_t(kv.block_size));
            }
        });
    }
}

void kv_store(const KvLayerView& kv, const int32_t* block_table, const int32_t* pos, const float* k,
              const float* v, int64_t n) {
    const int row = kv.n_kv_head * kv.head_dim;
    kv_store_cols(kv, false, 0, row, block_table, pos, k, n);
    kv_store_cols(kv, true, 0, row, block_table, pos, v, n);
}

void prefetch_kv_store_cols(const KvLayerView& kv, bool values, int c0, int c1,
                            const int32_t* block_table, const int32_t* pos, int64_t n) {
    const size_t elem = kv_elem_bytes(kv.type);
    for (int64_t r = 0; r < n; ++r) {
        const int32_t block = block_table[pos[r] / kv.block_size];
        const size_t slot = size_t(pos[r] % kv.block_size);
        for_each_head_piece(kv, c0, c1, [&](int h, int d0, int d1) {
            const uint8_t* at =
                (values ? kv.v : kv.k) + kv_block_offset(kv, block) + size_t(h) * kv.head_stride;
            if (values) {
                const uint8_t* v = at + (slot * size_t(kv.head_dim) + size_t(d0)) * elem;
                const size_t bytes = size_t(d1 - d0) * elem;
                for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(v + o, 1, 3);
                __builtin_prefetch(v + bytes - 1, 1, 3);
                return;
            }
            uintptr_t last = ~uintptr_t(0);
            for (int d = d0; d < d1; ++d) {
                const uint8_t* k = at + kv_key_elem(kv, d, slot) * elem;
                const uintptr_t line = reinterpret_cast<uintptr_t>(k) / 64;
                if (line != last) __builtin_prefetch(k, 1, 3);
                last = line;
            }
        });
    }
}

void kv_store(Region& r, const KvLayerView& kv, const AttentionSeq* seqs, int n_seqs,
              const float* k, const float* v) {
    // Tasks of up to kRowsPerTask rows within one sequence.
    constexpr int kRowsPerTask = 64;
    int64_t n_tasks = 0;
    for (int s = 0; s < n_seqs; ++s) n_tasks += (seqs[s].n_q + kRowsPerTask - 1) / kRowsPerTask;
    const int64_t row = int64_t(kv.n_kv_head) * kv.head_dim;
    r.for_each(n_tasks, [&](int64_t task) {
        int64_t first_row = 0;
        for (int s = 0; s < n_seqs; ++s) {
            const AttentionSeq& sq = seqs[s];
            const int64_t tasks = (sq.n_q + kRowsPerTask - 1) / kRowsPerTask;
            if (task >= tasks) {
                task -= tasks;
                first_row += sq.n_q;
                continue;
            }
            const int r0 = int(task) * kRowsPerTask, r1 = std::min(sq.n_q, r0 + kRowsPerTask);
            int32_t pos[kRowsPerTask];
            for (int i = r0; i < r1; ++i) pos[i - r0] = sq.first_pos + i;
            const int64_t at = (first_row + r0) * row;
            kv_store(kv, sq.block_table, pos, k + at, v + at, r1 - r0);
            return;
        }
    });
}

}  // namespace ops
}  // namespace troupe
#endif  // HWY_ONCE
