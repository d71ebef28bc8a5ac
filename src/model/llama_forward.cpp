// The forward pass of the Llama family (llama: Llama 2/3, TinyLlama, SmolLM; qwen2: the same
// graph plus q/k/v biases and NEOX rotary pairing), one named step per line.
//
// Where the time goes: the seven matmuls per layer and the output projection (weights read
// once per batch), then attention over the KV cache.
#include <cmath>

#include "model/model.h"
#include "util/error.h"

namespace troupe {

namespace {

// Bytes of the next matrix to start loading while attention runs (decode reads every matrix
// from memory; the first rows would otherwise stall the matmul that follows).
constexpr size_t kPrefetchBytes = 16 * 1024;

void grow(std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
}

void add_bias(float* y, const std::vector<float>& b, int64_t n_rows) {
    if (b.empty()) return;
    const int64_t n = int64_t(b.size());
    for (int64_t r = 0; r < n_rows; ++r) ops::add_inplace(y + r * n, b.data(), n);
}

void prepare(const HParams& hp, const Batch& batch, ForwardWorkspace& ws) {
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
    grow(ws.rope, n * size_t(hp.rope.n_rot));
    ws.attn_seqs.resize(batch.seqs.size());
    size_t t = 0;
    for (const BatchSeq& s : batch.seqs) {
        TROUPE_CHECK(s.n_tokens >= 0 && s.n_logits >= 0 && s.n_logits <= s.n_tokens);
        for (int32_t i = 0; i < s.n_tokens; ++i) ws.pos[t++] = s.first_pos + i;
    }
    TROUPE_CHECK(t == n);
}

// Stores this layer's K/V of every sequence's new tokens into its blocks and attends.
void attend(const HParams& hp, const Batch& batch, const ops::KvLayerView& kv, ForwardWorkspace& ws,
            ThreadPool* pool) {
    size_t t = 0;
    for (size_t s = 0; s < batch.seqs.size(); ++s) {
        const BatchSeq& bs = batch.seqs[s];
        ops::kv_store(kv, bs.block_table.data(), ws.pos.data() + t,
                      ws.k.data() + t * hp.n_embd_kv(), ws.v.data() + t * hp.n_embd_kv(),
                      bs.n_tokens);
        ops::AttentionSeq& a = ws.attn_seqs[s];
        a.block_table = bs.block_table.data();
        a.first_pos = bs.first_pos;
        a.n_q = bs.n_tokens;
        a.q = ws.q.data() + t * hp.n_embd_q();
        a.out = ws.attn.data() + t * hp.n_embd_q();
        t += size_t(bs.n_tokens);
    }
    const float scale = 1.0f / std::sqrt(float(hp.head_dim));
    if (batch.shared_prefix_attention)
        ops::attention(kv, ws.attn_seqs.data(), int(ws.attn_seqs.size()), hp.n_head, scale, pool);
    else
        ops::attention_shared(kv, ws.attn_seqs.data(), int(ws.attn_seqs.size()), {}, hp.n_head,
                              scale, pool);
}

// Copies the rows that want logits (each sequence's last n_logits tokens) into ws.out.
int gather_logit_rows(const HParams& hp, const Batch& batch, ForwardWorkspace& ws) {
    int row = 0;
    size_t t = 0;
    for (const BatchSeq& s : batch.seqs) {
        for (int32_t i = s.n_tokens - s.n_logits; i < s.n_tokens; ++i, ++row)
            std::copy_n(ws.x.data() + (t + size_t(i)) * hp.n_embd, hp.n_embd,
                        ws.out.data() + size_t(row) * hp.n_embd);
        t += size_t(s.n_tokens);
    }
    return row;
}

}  // namespace

void Model::forward(const Batch& batch, std::span<const ops::KvLayerView> kv, ForwardWorkspace& ws,
                    ThreadPool* pool, float* logits) const {
    const HParams& hp = hp_;
    TROUPE_CHECK(int(kv.size()) == hp.n_layer);
    const int64_t n = batch.n_tokens();
    if (n == 0) return;
    for (int32_t tok : batch.tokens) TROUPE_CHECK(tok >= 0 && tok < hp.n_vocab);
    prepare(hp, batch, ws);
    ops::RopeParams rope = hp.rope;
    if (!w_.rope_freqs.empty()) rope.freq_factors = w_.rope_freqs.data();
    float* x = ws.x.data();

    ops::get_rows(w_.tok_embd, batch.tokens.data(), n, x);     // x = embedding of each token
    ops::rope_angles(ws.pos.data(), n, rope, ws.rope.data());  // once for every layer
    for (int il = 0; il < hp.n_layer; ++il) {
        const LayerWeights& l = w_.layers[size_t(il)];
        // attention block
        ops::rms_norm(x, l.attn_norm.data(), ws.xb.data(), n, hp.n_embd, hp.rms_eps);
        const ops::Weight qkv[3] = {l.wq, l.wk, l.wv};
        float* const qkv_out[3] = {ws.q.data(), ws.k.data(), ws.v.data()};
        ops::matmul_many(qkv, 3, ws.xb.data(), qkv_out, n, pool);
        add_bias(ws.q.data(), l.bq, n);
        add_bias(ws.k.data(), l.bk, n);
        add_bias(ws.v.data(), l.bv, n);
        ops::rope_apply(ws.q.data(), ws.rope.data(), n, hp.n_head, hp.head_dim, rope);
        ops::rope_apply(ws.k.data(), ws.rope.data(), n, hp.n_head_kv, hp.head_dim, rope);
        ops::prefetch_weights(&l.wo, 1, kPrefetchBytes);  // hidden behind attention
        attend(hp, batch, kv[size_t(il)], ws, pool);
        ops::matmul(l.wo, ws.attn.data(), ws.proj.data(), n, pool);
        ops::add_inplace(x, ws.proj.data(), n * hp.n_embd);  // residual
        // feed-forward block (SwiGLU)
        ops::rms_norm(x, l.ffn_norm.data(), ws.xb.data(), n, hp.n_embd, hp.rms_eps);
        const ops::Weight gate_up[2] = {l.w_gate, l.w_up};
        float* const gate_up_out[2] = {ws.gate.data(), ws.up.data()};
        ops::matmul_many(gate_up, 2, ws.xb.data(), gate_up_out, n, pool);
        ops::swiglu(ws.gate.data(), ws.up.data(), ws.gate.data(), n * hp.n_ff);
        ops::matmul(l.w_down, ws.gate.data(), ws.proj.data(), n, pool);
        ops::add_inplace(x, ws.proj.data(), n * hp.n_embd);  // residual
    }
    // output: final norm and projection of the rows that want logits only
    const int n_out = gather_logit_rows(hp, batch, ws);
    if (n_out == 0) return;
    ops::rms_norm(ws.out.data(), w_.output_norm.data(), ws.out.data(), n_out, hp.n_embd,
                  hp.rms_eps);
    ops::matmul(w_.output, ws.out.data(), logits, n_out, pool);
}

}  // namespace troupe
