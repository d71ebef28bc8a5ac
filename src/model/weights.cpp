#include "model/weights.h"

#include "kernels/weight_layout.h"
#include "tensor/quant_ref.h"
#include "util/error.h"

namespace troupe {

namespace {

class Binder {
  public:
    Binder(const GgufFile& f) : f_(f) {}

    const GgufTensor* find(const std::string& name) const { return f_.find_tensor(name); }

    const GgufTensor& require(const std::string& name) const {
        const GgufTensor* t = f_.find_tensor(name);
        if (!t) throw Error(f_.path() + ": missing tensor '" + name + "'");
        return *t;
    }

    // A matrix of n_out rows of n_in values.
    ops::Weight matrix(const std::string& name, int64_t n_in, int64_t n_out) {
        const GgufTensor& t = require(name);
        if (t.n_dims != 2 || t.ne[0] != n_in || t.ne[1] != n_out)
            throw Error(f_.path() + ": tensor '" + name + "' has shape " + t.shape_string() +
                        ", expected [" + std::to_string(n_in) + ", " + std::to_string(n_out) + "]");
        if (!traits(t.type).has_compute)
            throw Error(f_.path() + ": tensor '" + name + "' has type " + type_name(t.type) +
                        ", which Troupe cannot compute with");
        ops::Weight w;
        w.type = t.type;
        w.n_in = n_in;
        w.n_out = n_out;
        w.data = t.data;
        w.row_stride = row_bytes(t.type, n_in);
        bytes_ += t.n_bytes;
        return w;
    }

    std::vector<float> vector(const std::string& name, int64_t n) const {
        const GgufTensor& t = require(name);
        if (t.n_elements() != n || t.ne[0] != n)
            throw Error(f_.path() + ": tensor '" + name + "' has shape " + t.shape_string() +
                        ", expected [" + std::to_string(n) + "]");
        if (!traits(t.type).has_compute)
            throw Error(f_.path() + ": tensor '" + name + "' has unsupported type " +
                        type_name(t.type));
        std::vector<float> out(static_cast<size_t>(n));
        dequantize_row(t.type, t.data, out.data(), n);
        return out;
    }

    std::vector<float> optional_vector(const std::string& name, int64_t n) const {
        return find(name) ? vector(name, n) : std::vector<float>{};
    }

    size_t bytes() const { return bytes_; }

  private:
    const GgufFile& f_;
    size_t bytes_ = 0;
};

}  // namespace

ModelWeights load_weights(const GgufFile& f, HParams& hp) {
    Binder b(f);
    ModelWeights w;
    const GgufTensor& embd = b.require("token_embd.weight");
    if (embd.n_dims != 2 || embd.ne[0] != hp.n_embd)
        throw Error(f.path() + ": tensor 'token_embd.weight' has shape " + embd.shape_string() +
                    ", expected [" + std::to_string(hp.n_embd) + ", n_vocab]");
    hp.n_vocab = int(embd.ne[1]);
    w.tok_embd = b.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
    w.output_norm = b.vector("output_norm.weight", hp.n_embd);
    if (b.find("output.weight")) {
        w.output = b.matrix("output.weight", hp.n_embd, hp.n_vocab);
    } else {
        w.output = w.tok_embd;  // tied embeddings: the output projection reuses token_embd
        w.tied_output = true;
    }
    if (b.find("rope_freqs.weight"))
        w.rope_freqs = b.vector("rope_freqs.weight", hp.rope.n_rot / 2);

    const int64_t d = hp.n_embd, dq = hp.n_embd_q(), dkv = hp.n_embd_kv(), ff = hp.n_ff;
    w.layers.resize(size_t(hp.n_layer));
    for (int il = 0; il < hp.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        LayerWeights& l = w.layers[size_t(il)];
        l.attn_norm = b.vector(p + "attn_norm.weight", d);
        l.wq = b.matrix(p + "attn_q.weight", d, dq);
        l.wk = b.matrix(p + "attn_k.weight", d, dkv);
        l.wv = b.matrix(p + "attn_v.weight", d, dkv);
        l.wo = b.matrix(p + "attn_output.weight", dq, d);
        if (hp.has_qkv_bias) {
            l.bq = b.vector(p + "attn_q.bias", dq);
            l.bk = b.vector(p + "attn_k.bias", dkv);
            l.bv = b.vector(p + "attn_v.bias", dkv);
        }
        l.ffn_norm = b.vector(p + "ffn_norm.weight", d);
        l.w_gate = b.matrix(p + "ffn_gate.weight", d, ff);
        l.w_up = b.matrix(p + "ffn_up.weight", d, ff);
        l.w_down = b.matrix(p + "ffn_down.weight", ff, d);
    }
    // Per generated token every layer matrix and the output projection are read once; the
    // embedding table is only gathered (one row per token) unless it is also the output.
    w.matrix_bytes = b.bytes();
    if (!w.tied_output) w.matrix_bytes -= row_bytes(w.tok_embd.type, d) * size_t(hp.n_vocab);
    return w;
}

void interleave_matrices(const GgufFile& f, ModelWeights& w) {
    // An embedding that is only gathered stays Q5_0: widening it would only cost memory.
    const bool widen = ops::widen_q5_0_here();
    const auto wanted = [&](const ops::Weight& m) {
        return ops::can_interleave(m, widen && (&m != &w.tok_embd || w.tied_output));
    };
    size_t total = 0;
    w.for_each_matrix([&](ops::Weight& m) {
        if (wanted(m)) total += ops::interleaved_bytes(m);
    });
    if (total == 0) return;
    w.interleaved_storage = LargeBuffer(total);
    uint8_t* next = w.interleaved_storage.data();
    w.interleaved_bytes = total;
    w.for_each_matrix([&](ops::Weight& m) {
        if (!wanted(m)) return;
        const uint8_t* src = m.data;
        const size_t file_bytes = size_t(m.n_out) * m.row_stride;
        const size_t bytes = ops::interleaved_bytes(m);
        m = ops::interleave(m, next);
        next += bytes;
        w.matrix_bytes += bytes - file_bytes;  // a widened matrix reads more per token
        for (const GgufTensor& t : f.tensors())
            if (t.data == src) f.release_tensor_pages(t);
    });
    if (w.tied_output) w.output = w.tok_embd;
}

}  // namespace troupe
