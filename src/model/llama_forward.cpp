// The forward pass of the Llama family (llama: Llama 2/3, TinyLlama, SmolLM; qwen2: the same
// graph plus q/k/v biases and NEOX rotary pairing), one named step per line.
//
// The whole pass runs as one parallel region (kernels/region.h): every pool thread walks the
// layers together, each op splitting its work over them, instead of one dispatch per op.
//
// Where the time goes: the seven matmuls per layer and the output projection (weights read
// once per batch), then attention over the KV cache.
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
    grow(ws.xb, n * hp.n_embd);
    grow(ws.q, n * hp.n_embd_q());
    grow(ws.k, n * hp.n_embd_kv());
    grow(ws.v, n * hp.n_embd_kv());
    grow(ws.attn, n * hp.n_embd_q());
    grow(ws.proj, n * hp.n_embd);
    grow(ws.gate, n * hp.n_ff);
    grow(ws.up, n * hp.n_ff);
    grow(ws.out, size_t(batch.n_logit_rows()) * hp.n_embd);
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
}

// y[r, :] += b for every row (qwen2's q/k/v biases); nothing without a bias.
void add_bias(Region& r, float* y, const std::vector<float>& b, int64_t n_rows) {
    if (b.empty()) return;
    const int64_t n = int64_t(b.size());
    r.for_each(n_rows, [&](int64_t row) { ops::add_inplace(y + row * n, b.data(), n); });
}

// Copies the rows that want logits (each sequence's last n_logits tokens) into ws.out.
void gather_logit_rows(Region& r, const HParams& hp, const Batch& batch, ForwardWorkspace& ws) {
    r.serial([&] {
        int row = 0;
        size_t t = 0;
        for (const BatchSeq& s : batch.seqs) {
            for (int32_t i = s.n_tokens - s.n_logits; i < s.n_tokens; ++i, ++row)
                std::copy_n(ws.x.data() + (t + size_t(i)) * hp.n_embd, hp.n_embd,
                            ws.out.data() + size_t(row) * hp.n_embd);
            t += size_t(s.n_tokens);
        }
    });
}

}  // namespace

void Model::forward(const Batch& batch, std::span<const ops::KvLayerView> kv,
                    ForwardWorkspace& ws, ThreadPool* pool, float* logits) const {
    const HParams& hp = hp_;
    TROUPE_CHECK(int(kv.size()) == hp.n_layer);
    const int64_t n = batch.n_tokens();
    if (n == 0) return;
    for (int32_t tok : batch.tokens) TROUPE_CHECK(tok >= 0 && tok < hp.n_vocab);
    prepare(hp, batch, w_.rope_freqs, kv, ws);
    ops::RopeParams rope = hp.rope;
    if (!w_.rope_freqs.empty()) rope.freq_factors = w_.rope_freqs.data();
    const float scale = 1.0f / std::sqrt(float(hp.head_dim));
    const int n_seqs = int(ws.attn_seqs.size());
    const int n_out = batch.n_logit_rows();
    float* x = ws.x.data();
    float* xb = ws.xb.data();

    run_region(pool, [&](Region& r) {
        ops::get_rows(r, w_.tok_embd, batch.tokens.data(), n, x);  // x = token embeddings
        for (int il = 0; il < hp.n_layer; ++il) {
            const LayerWeights& l = w_.layers[size_t(il)];
            const ops::KvLayerView& cache = kv[size_t(il)];
            // attention block
            ops::rms_norm(r, x, l.attn_norm.data(), xb, n, hp.n_embd, hp.rms_eps);
            const ops::Weight qkv[] = {l.wq, l.wk, l.wv};
            float* const qkv_out[] = {ws.q.data(), ws.k.data(), ws.v.data()};
            ops::matmul_many(r, qkv, 3, xb, qkv_out, n);  // Q, K, V in one step
            add_bias(r, ws.q.data(), l.bq, n);
            add_bias(r, ws.k.data(), l.bk, n);
            add_bias(r, ws.v.data(), l.bv, n);
            ops::rope_apply(r, ws.q.data(), ws.rope.data(), n, hp.n_head, hp.head_dim, rope);
            ops::rope_apply(r, ws.k.data(), ws.rope.data(), n, hp.n_head_kv, hp.head_dim, rope);
            ops::kv_store(r, cache, ws.attn_seqs.data(), n_seqs, ws.k.data(), ws.v.data());
            ops::attention(r, cache, ws.attn_plan, scale);
            ops::matmul(r, l.wo, ws.attn.data(), ws.proj.data(), n);
            ops::add_inplace(r, x, ws.proj.data(), n * hp.n_embd);  // residual
            // feed-forward block (SwiGLU)
            ops::rms_norm(r, x, l.ffn_norm.data(), xb, n, hp.n_embd, hp.rms_eps);
            const ops::Weight gate_up[] = {l.w_gate, l.w_up};
            float* const gate_up_out[] = {ws.gate.data(), ws.up.data()};
            ops::matmul_many(r, gate_up, 2, xb, gate_up_out, n);
            ops::swiglu(r, ws.gate.data(), ws.up.data(), ws.gate.data(), n * hp.n_ff);
            ops::matmul(r, l.w_down, ws.gate.data(), ws.proj.data(), n);
            ops::add_inplace(r, x, ws.proj.data(), n * hp.n_embd);  // residual
        }
        // output: final norm and projection of the rows that want logits only
        if (n_out == 0) return;
        gather_logit_rows(r, hp, batch, ws);
        ops::rms_norm(r, ws.out.data(), w_.output_norm.data(), ws.out.data(), n_out, hp.n_embd,
                      hp.rms_eps);
        ops::matmul(r, w_.output, ws.out.data(), logits, n_out);
    });
}

}  // namespace troupe
