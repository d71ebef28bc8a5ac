// The forward pass of the Llama family (llama: Llama 2/3, TinyLlama, SmolLM; qwen2: the same
// graph plus q/k/v biases and NEOX rotary pairing), one named step per line.
//
// The whole pass runs as one parallel region (kernels/region.h): every pool thread walks the
// layers together, each op splitting its work over them, instead of one dispatch per op.
//
// Where the time goes: the seven matmuls per layer and the output projection (weights read
// once per batch), then attention over the KV cache.
#include <array>
#include <cmath>

#include "model/model.h"
#include "util/error.h"

namespace troupe {

namespace {

void grow(std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
}

// Buffers, positions, rotation angles, and the attention plan (the same for every layer).
void prepare(const HParams& hp, const Batch& batch, const std::vector<float>& rope_freqs,
             std::span<const ops::KvLayerView> kv, ForwardWorkspace& ws) {
    const size_t n = size_t(batch.n_tokens());
    grow(ws.x, n * hp.n_embd);
    grow(ws.q, n * hp.n_embd_q());
    grow(ws.k, n * hp.n_embd_kv());
    grow(ws.v, n * hp.n_embd_kv());
    grow(ws.attn, n * hp.n_embd_q());
    grow(ws.proj, n * hp.n_embd);
    grow(ws.gate, n * hp.n_ff);
    grow(ws.up, n * hp.n_ff);
    const size_t n_out = size_t(batch.n_logit_rows());
    grow(ws.out, n_out * hp.n_embd);
    ws.pos.resize(n);
    ws.attn_seqs.resize(batch.seqs.size());
    size_t t = 0;
    for (size_t s = 0; s < batch.seqs.size(); ++s) {
        const BatchSeq& bs = batch.seqs[s];
        TROUPE_CHECK(bs.n_tokens >= 0 && bs.n_logits >= 0 && bs.n_logits <= bs.n_tokens);
        ws.attn_seqs[s] = {bs.block_table.data(), bs.first_pos, bs.n_tokens,
                           ws.q.data() + t * hp.n_embd_q(), ws.attn.data() + t * hp.n_embd_q()};
        for (int32_t i = 0; i < bs.n_tokens; ++i) ws.pos[t++] = bs.first_pos + i;
    }
    TROUPE_CHECK(t == n);
    ops::RopeParams rope = hp.rope;
    if (!rope_freqs.empty()) rope.freq_factors = rope_freqs.data();
    grow(ws.rope, n * size_t(rope.n_rot));
    ops::rope_angles(ws.pos.data(), int64_t(n), rope, ws.rope.data());
    ops::plan_attention(kv[0], ws.attn_seqs.data(), int(ws.attn_seqs.size()), hp.n_head,
                        batch.shared_prefix_attention, ws.attn_plan);
    // The last layer's attention for the rows that want logits only (when that is not all):
    // their queries gathered into q_out, their outputs into the first rows of attn.
    ws.out_seqs.clear();
    if (n_out == 0 || n_out == n) return;
    grow(ws.q_out, n_out * hp.n_embd_q());
    size_t row = 0;
    for (const BatchSeq& bs : batch.seqs) {
        if (bs.n_logits == 0) continue;
        ws.out_seqs.push_back({bs.block_table.data(), bs.first_pos + bs.n_tokens - bs.n_logits,
                               bs.n_logits, ws.q_out.data() + row * hp.n_embd_q(),
                               ws.attn.data() + row * hp.n_embd_q()});
        row += size_t(bs.n_logits);
    }
    ops::plan_attention(kv[0], ws.out_seqs.data(), int(ws.out_seqs.size()), hp.n_head,
                        batch.shared_prefix_attention, ws.out_plan);
}

// y[r, :] += b for every row (qwen2's q/k/v biases); nothing without a bias.
void add_bias(Region& r, float* y, const std::vector<float>& b, int64_t n_rows) {
    if (b.empty()) return;
    const int64_t n = int64_t(b.size());
    r.for_each(n_rows, [&](int64_t row) { ops::add_inplace(y + row * n, b.data(), n); });
}

// The rows of task `task` of rotate_and_store (up to kRopeRows consecutive rows of one
// sequence): the sequence, and the rows [r0, r1) of the batch.
constexpr int kRopeRows = 32;
int64_t n_rope_tasks(const std::vector<ops::AttentionSeq>& seqs) {
    int64_t n = 0;
    for (const ops::AttentionSeq& s : seqs) n += (s.n_q + kRopeRows - 1) / kRopeRows;
    return n;
}
struct RopeTask {
    const ops::AttentionSeq* seq;
    int64_t r0, r1;
};
RopeTask rope_task(const std::vector<ops::AttentionSeq>& seqs, int64_t task) {
    int64_t t = 0;  // the sequence's first row in the batch
    for (const ops::AttentionSeq& s : seqs) {
        const int64_t tasks = (s.n_q + kRopeRows - 1) / kRopeRows;
        if (task < tasks)
            return {&s, t + task * kRopeRows, t + std::min<int64_t>(s.n_q, (task + 1) * kRopeRows)};
        task -= tasks;
        t += s.n_q;
    }
    return {nullptr, 0, 0};
}

// Requests the cache lines task `task` of rotate_and_store will write (ops::prefetch_kv_store).
void prefetch_rope_task(const ForwardWorkspace& ws, const ops::KvLayerView& kv, int64_t task) {
    const RopeTask rt = rope_task(ws.attn_seqs, task);
    if (rt.seq)
        ops::prefetch_kv_store(kv, rt.seq->block_table, ws.pos.data() + rt.r0, rt.r1 - rt.r0);
}

// Rotates the new Q and K rows and stores K and V into the cache, one step: each task takes
// up to kRopeRows consecutive rows of one sequence. The cache lines of a participant's first
// task were requested before the Q/K/V product (qkv_step); each task requests its
// successor's (decode writes a line per two dimensions of K, all of them evicted since the
// previous token's write: 8 sequences stored at 1.5 us per token, mostly waiting for them).
void rotate_and_store(Region& r, const HParams& hp, const ops::RopeParams& rope,
                      const ops::KvLayerView& kv, ForwardWorkspace& ws) {
    const int64_t n_tasks = n_rope_tasks(ws.attn_seqs);
    const auto [share_begin, share_end] = r.my_share(n_tasks);
    r.for_each(n_tasks, [&](int64_t task) {
        if (task >= share_begin && task + 1 < share_end) prefetch_rope_task(ws, kv, task + 1);
        const RopeTask rt = rope_task(ws.attn_seqs, task);
        const int64_t r0 = rt.r0, r1 = rt.r1;
        float* q = ws.q.data() + r0 * hp.n_embd_q();
        float* k = ws.k.data() + r0 * hp.n_embd_kv();
        const float* angles = ws.rope.data() + r0 * rope.n_rot;
        ops::rope_apply(q, angles, r1 - r0, hp.n_head, hp.head_dim, rope);
        ops::rope_apply(k, angles, r1 - r0, hp.n_head_kv, hp.head_dim, rope);
        ops::kv_store(kv, rt.seq->block_table, ws.pos.data() + r0, k,
                      ws.v.data() + r0 * hp.n_embd_kv(), r1 - r0);
    });
}

// Copies the rows that want logits (each sequence's last n_logits tokens) of src
// ([n_tokens, width]) to dst ([n_logit_rows, width]), in batch order.
void gather_logit_rows(const Batch& batch, const float* src, size_t width, float* dst) {
    size_t row = 0, t = 0;
    for (const BatchSeq& s : batch.seqs) {
        for (int32_t i = s.n_tokens - s.n_logits; i < s.n_tokens; ++i, ++row)
            std::copy_n(src + (t + size_t(i)) * width, width, dst + row * width);
        t += size_t(s.n_tokens);
    }
}

// The rows a layer finishes after its Q/K/V step (attention, wo, feed-forward).
struct LayerRows {
    float* x = nullptr;  // [n, n_embd] their residual stream
    int64_t n = 0;
    const ops::AttentionPlan* plan = nullptr;  // their queries -> ws.attn
};

// Every row, except in the last layer when not every row wants logits: then only those rows
// matter (every row's K and V are in the cache by now), gathered into ws.out and ws.q_out
// (llama.cpp also finishes only these). Their bits do not change: products and attention do
// not depend on the other rows of a batch (tests/model/test_forward.cpp).
LayerRows rows_to_finish(Region& r, const HParams& hp, const Batch& batch, bool last_layer,
                         ForwardWorkspace& ws) {
    const int64_t n = batch.n_tokens();
    const int n_out = batch.n_logit_rows();
    if (!last_layer || n_out == n) return {ws.x.data(), n, &ws.attn_plan};
    if (n_out > 0) {
        r.set_op("gather");
        r.serial([&] {
            gather_logit_rows(batch, ws.q.data(), hp.n_embd_q(), ws.q_out.data());
            gather_logit_rows(batch, ws.x.data(), hp.n_embd, ws.out.data());
        });
    }
    return {ws.out.data(), n_out, &ws.out_plan};
}

std::array<ops::Weight, 3> qkv_weights(const LayerWeights& l) {
    return {l.wq, l.wk, l.wv};
}

// Q, K, V of rms_norm(x) for all n rows in one step, rotated, K and V into the cache.
void qkv_step(Region& r, const HParams& hp, const LayerWeights& l, const ops::RopeParams& rope,
              const ops::KvLayerView& cache, int64_t n, ForwardWorkspace& ws) {
    float* const qkv_out[] = {ws.q.data(), ws.k.data(), ws.v.data()};
    // The cache lines this participant's first rotate_and_store task writes: they arrive
    // during the product.
    const auto [first_rope, end_rope] = r.my_share(n_rope_tasks(ws.attn_seqs));
    if (first_rope < end_rope) prefetch_rope_task(ws, cache, first_rope);
    r.set_op("qkv");
    ops::matmul_many(r, qkv_weights(l).data(), 3,
                     {.x = ws.x.data(), .norm = l.attn_norm.data(), .eps = hp.rms_eps}, qkv_out, n);
    add_bias(r, ws.q.data(), l.bq, n);
    add_bias(r, ws.k.data(), l.bk, n);
    add_bias(r, ws.v.data(), l.bv, n);
    r.set_op("rope+kv store");
    rotate_and_store(r, hp, rope, cache, ws);
}

// The rest of the layer for `rows`: x += wo attention, then the feed-forward block (SwiGLU):
// x += down(swiglu(gate, up of rms_norm(x))). next_w: what the pass reads after it
// (prefetched whenever a participant waits, ops::prefetch_next_matmul).
void finish_layer(Region& r, const HParams& hp, const LayerWeights& l,
                  const ops::KvLayerView& cache, float scale, const LayerRows& rows,
                  const ops::Weight* next_w, int n_next_w, int64_t next_tokens,
                  ForwardWorkspace& ws) {
    r.set_op("attention");
    ops::attention(r, cache, *rows.plan, scale);
    const ops::Weight gate_up[] = {l.w_gate, l.w_up};
    ops::prefetch_next_matmul(r, gate_up, 2, rows.n);
    r.set_op("wo");
    ops::matmul(r, l.wo, {.x = ws.attn.data()}, ws.proj.data(), rows.n, rows.x);
    float* const gate_up_out[] = {ws.gate.data(), ws.up.data()};
    ops::prefetch_next_matmul(r, &l.w_down, 1, rows.n);
    r.set_op("gate+up");
    ops::matmul_many(r, gate_up, 2, {.x = rows.x, .norm = l.ffn_norm.data(), .eps = hp.rms_eps},
                     gate_up_out, rows.n);
    ops::prefetch_next_matmul(r, next_w, n_next_w, next_tokens);
    r.set_op("down");
    ops::matmul(r, l.w_down, {.x = ws.gate.data(), .up = ws.up.data()}, ws.proj.data(), rows.n,
                rows.x);
}

}  // namespace

void Model::forward(const Batch& batch, std::span<const ops::KvLayerView> kv, ForwardWorkspace& ws,
                    ThreadPool* pool, float* logits) const {
    const HParams& hp = hp_;
    TROUPE_CHECK(int(kv.size()) == hp.n_layer);
    const int64_t n = batch.n_tokens();
    if (n == 0) return;
    for (int32_t tok : batch.tokens) TROUPE_CHECK(tok >= 0 && tok < hp.n_vocab);
    prepare(hp, batch, w_.rope_freqs, kv, ws);
    ops::RopeParams rope = hp.rope;
    if (!w_.rope_freqs.empty()) rope.freq_factors = w_.rope_freqs.data();
    const float scale = 1.0f / std::sqrt(float(hp.head_dim));
    const int n_out = batch.n_logit_rows();

    run_region(pool, ws.profile, [&](Region& r) {
        // Every participant prefetches its share of the next product's weights whenever it
        // waits (ops::prefetch_next_matmul): named before the step that precedes it.
        ops::prefetch_next_matmul(r, qkv_weights(w_.layers[0]).data(), 3, n);
        r.set_op("embed");
        ops::get_rows(r, w_.tok_embd, batch.tokens.data(), n, ws.x.data());  // embeddings
        const float* final_rows = ws.x.data();  // the rows the last layer finished
        for (int il = 0; il < hp.n_layer; ++il) {
            const LayerWeights& l = w_.layers[size_t(il)];
            const bool last = il + 1 == hp.n_layer;
            ops::prefetch_next_matmul(r, &l.wo, 1, last ? n_out : n);
            qkv_step(r, hp, l, rope, kv[size_t(il)], n, ws);
            const LayerRows rows = rows_to_finish(r, hp, batch, last, ws);
            if (rows.n == 0) break;  // a prefill chunk that wants no logits: K/V stored
            // What the pass reads next: the next layer's Q/K/V, or the output matrix.
            const std::array<ops::Weight, 3> next = last ? std::array<ops::Weight, 3>{w_.output}
                                                         : qkv_weights(w_.layers[size_t(il) + 1]);
            finish_layer(r, hp, l, kv[size_t(il)], scale, rows, next.data(), last ? 1 : 3,
                         last ? n_out : n, ws);
            final_rows = rows.x;
        }
        // output: projection of the final norm of the rows that want logits
        r.prefetch_next(nullptr, nullptr);  // nothing is read after the output
        if (n_out == 0) return;
        r.set_op("output");
        ops::matmul(r, w_.output,
                    {.x = final_rows, .norm = w_.output_norm.data(), .eps = hp.rms_eps}, logits,
                    n_out);
    });
}

}  // namespace troupe
