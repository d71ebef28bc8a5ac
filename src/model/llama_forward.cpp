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
#include <utility>

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
    ws.kv_present.resize(batch.seqs.size());
    size_t t = 0;
    for (size_t s = 0; s < batch.seqs.size(); ++s) {
        const BatchSeq& bs = batch.seqs[s];
        TROUPE_CHECK(bs.n_tokens >= 0 && bs.n_logits >= 0 && bs.n_logits <= bs.n_tokens &&
                     bs.n_kv_present >= 0 && bs.n_kv_present <= bs.n_tokens);
        ws.kv_present[s] = bs.n_kv_present;
        ws.attn_seqs[s] = {bs.block_table.data(), bs.first_pos, bs.n_tokens,
                           ws.q.data() + t * hp.n_embd_q(), ws.attn.data() + t * hp.n_embd_q()};
        for (int32_t i = 0; i < bs.n_tokens; ++i) ws.pos[t++] = bs.first_pos + i;
    }
    TROUPE_CHECK(t == n);
    ops::RopeParams rope = hp.rope;
    if (!rope_freqs.empty()) rope.freq_factors = rope_freqs.data();
    grow(ws.rope, n * size_t(rope.n_rot));
    ops::rope_angles(ws.pos.data(), int64_t(n), rope, ws.rope.data());
    grow(ws.rope_pairs, n * size_t(2 * rope.n_rot));
    ops::rope_pair_table(ws.rope.data(), int64_t(n), rope, ws.rope_pairs.data());
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

// The multiple of rows every task of the Q/K/V product starts at (QkvEpilogue): RoPE's pairs
// stay within a task.
int64_t qkv_row_multiple(const HParams& hp, const ops::RopeParams& rope) {
    return rope.mode == ops::RopeMode::Neox ? int64_t(hp.head_dim) : 2;
}

// The Q/K/V product's epilogue (ops::MatmulEpilogue), for the rows of each task: the bias
// (qwen2), RoPE of Q and K, and K and V into the cache, right after the task computed them,
// in its participant's cache, with no step of their own (a step and a barrier per layer
// fewer; every op's arithmetic unchanged). Tasks keep RoPE's pairs whole (Neox: whole heads).
// The cache lines a participant's own K and V rows will write are requested before the
// product (decode writes a line per two dimensions of K, all of them evicted since the
// previous token wrote next to them): they arrive while it streams the weights.
struct QkvEpilogue {
    const HParams& hp;
    const LayerWeights& l;
    const ops::RopeParams& rope;
    const ops::KvLayerView& kv;
    const ForwardWorkspace& ws;
    float* const* out;  // q, k, v: [n_tokens, width(m)]

    int64_t width(int m) const { return m == 0 ? hp.n_embd_q() : hp.n_embd_kv(); }
    const std::vector<float>& bias(int m) const { return m == 0 ? l.bq : m == 1 ? l.bk : l.bv; }

    // Sequences with at most this many rows have their lines prefetched (a prefill writes
    // each line for many consecutive positions).
    static constexpr int kPrefetchRows = 4;

    // Requests the lines that rows [o0, o1) of K (m = 1) or V (m = 2) will write.
    void prefetch(int m, int64_t o0, int64_t o1) const {
        size_t t = 0;
        for (size_t i = 0; i < ws.attn_seqs.size(); ++i) {
            const ops::AttentionSeq& s = ws.attn_seqs[i];
            const int skip = ws.kv_present[i];  // K/V already in the cache: not stored
            if (s.n_q - skip > 0 && s.n_q - skip <= kPrefetchRows)
                ops::prefetch_kv_store_cols(kv, m == 2, int(o0), int(o1), s.block_table,
                                            ws.pos.data() + t + size_t(skip), s.n_q - skip);
            t += size_t(s.n_q);
        }
    }

    static void after(void* ctx, int m, int64_t o0, int64_t o1) {
        const auto& e = *static_cast<const QkvEpilogue*>(ctx);
        const int64_t n = int64_t(e.ws.pos.size()), w = e.width(m), n_rot = e.rope.n_rot;
        float* y = e.out[m];
        const std::vector<float>& b = e.bias(m);
        if (!b.empty())
            for (int64_t t = 0; t < n; ++t) ops::add_inplace(y + t * w + o0, b.data() + o0, o1 - o0);
        if (m < 2)
            for (int64_t t = 0; t < n; ++t)
                ops::rope_apply_cols(y + t * w, o0, o1, e.ws.rope.data() + t * n_rot,
                                     e.ws.rope_pairs.data() + t * 2 * n_rot, e.hp.head_dim, e.rope);
        if (m == 0) return;
        size_t t = 0;
        for (size_t i = 0; i < e.ws.attn_seqs.size(); ++i) {
            const ops::AttentionSeq& s = e.ws.attn_seqs[i];
            const size_t skip = size_t(e.ws.kv_present[i]);  // K/V already in the cache
            if (size_t(s.n_q) > skip)
                ops::kv_store_cols(e.kv, m == 2, int(o0), int(o1), s.block_table,
                                   e.ws.pos.data() + t + skip, y + int64_t(t + skip) * w,
                                   s.n_q - int(skip));
            t += size_t(s.n_q);
        }
    }
};

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

// Q, K, V of rms_norm(x) for all n rows in one step, rotated, K and V into the cache
// (QkvEpilogue).
void qkv_step(Region& r, const HParams& hp, const LayerWeights& l, const ops::RopeParams& rope,
              const ops::KvLayerView& cache, int64_t n, ForwardWorkspace& ws) {
    float* const qkv_out[] = {ws.q.data(), ws.k.data(), ws.v.data()};
    QkvEpilogue e{hp, l, rope, cache, ws, qkv_out};
    const int64_t multiple = qkv_row_multiple(hp, rope);
    const auto weights = qkv_weights(l);
    std::pair<int64_t, int64_t> mine[3];
    ops::matmul_share_rows(r, weights.data(), 3, n, multiple, mine);
    for (int m = 1; m <= 2; ++m)
        if (mine[m].first < mine[m].second) e.prefetch(m, mine[m].first, mine[m].second);
    const ops::MatmulEpilogue epi{&QkvEpilogue::after, &e, multiple};
    r.set_op("qkv");
    ops::matmul_many(r, weights.data(), 3,
                     {.x = ws.x.data(), .norm = l.attn_norm.data(), .eps = hp.rms_eps}, qkv_out, n,
                     nullptr, &epi);
}

// The rest of the layer for `rows`: x += wo attention, then the feed-forward block (SwiGLU):
// x += down(swiglu(gate, up of rms_norm(x))). next_w: what the pass reads after it
// (prefetched whenever a participant waits, ops::prefetch_next_matmul).
void finish_layer(Region& r, const HParams& hp, const LayerWeights& l,
                  const ops::KvLayerView& cache, float scale, const LayerRows& rows,
                  const ops::Weight* next_w, int n_next_w, int64_t next_tokens,
                  int64_t next_row_multiple, ForwardWorkspace& ws) {
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
    ops::prefetch_next_matmul(r, next_w, n_next_w, next_tokens, next_row_multiple);
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
        ops::prefetch_next_matmul(r, qkv_weights(w_.layers[0]).data(), 3, n,
                                  qkv_row_multiple(hp, rope));
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
                         last ? n_out : n, last ? 1 : qkv_row_multiple(hp, rope), ws);
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
