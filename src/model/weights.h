// Views of a model's weight tensors inside the mapped GGUF file. Matrices stay in the file's
// type (shared by every sequence and agent: the model is loaded once), in the file's memory
// or, interleaved for the kernels (interleave_matrices), in memory of their own; the small
// norm and bias vectors are converted to float and owned.
#pragma once

#include <vector>

#include "gguf/gguf.h"
#include "kernels/ops.h"
#include "model/hparams.h"
#include "util/large_buffer.h"

namespace troupe {

struct LayerWeights {
    std::vector<float> attn_norm;   // [n_embd]
    ops::Weight wq;                 // [n_embd_q rows, n_embd]
    ops::Weight wk;                 // [n_embd_kv rows, n_embd]
    ops::Weight wv;                 // [n_embd_kv rows, n_embd]
    ops::Weight wo;                 // [n_embd rows, n_embd_q]
    std::vector<float> bq, bk, bv;  // [n_embd_q], [n_embd_kv], [n_embd_kv] (qwen2), else empty
    std::vector<float> ffn_norm;    // [n_embd]
    ops::Weight w_gate;             // [n_ff rows, n_embd]
    ops::Weight w_up;               // [n_ff rows, n_embd]
    ops::Weight w_down;             // [n_embd rows, n_ff]
};

struct ModelWeights {
    ops::Weight tok_embd;            // [n_vocab rows, n_embd]
    std::vector<float> output_norm;  // [n_embd]
    ops::Weight output;              // [n_vocab rows, n_embd]; tok_embd when tied
    bool tied_output = false;
    std::vector<float> rope_freqs;     // [n_rot / 2] (Llama 3.1) or empty
    std::vector<LayerWeights> layers;  // [n_layer]
    size_t matrix_bytes = 0;           // bytes of all matrices read per token (roofline)
    // The matrices interleaved at load (ops::WeightLayout::Interleaved16) live here.
    LargeBuffer interleaved_storage;
    size_t interleaved_bytes = 0;

    // fn(m) for every matrix view m: tok_embd, output unless tied, the layers'.
    template <class F>
    void for_each_matrix(F&& fn) {
        for_each_matrix_of(*this, fn);
    }
    template <class F>
    void for_each_matrix(F&& fn) const {
        for_each_matrix_of(*this, fn);
    }

  private:
    template <class Self, class F>
    static void for_each_matrix_of(Self& w, F& fn) {
        fn(w.tok_embd);
        if (!w.tied_output) fn(w.output);
        for (auto& l : w.layers)
            for (auto* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) fn(*m);
    }
};

// Binds every tensor the architecture needs, checking presence, shape and type. Sets
// hp.n_vocab from the embedding. Throws troupe::Error naming the tensor and the problem.
ModelWeights load_weights(const GgufFile& f, HParams& hp);

// Copies every matrix that can be interleaved (ops::can_interleave: Q8_0 or Q4_0 with whole
// groups of 16 rows; Q5_0 too, widened to Q8_0, where ops::widen_q5_0_here(), except an
// embedding that is not also the output) into w.interleaved_storage in the Interleaved16
// layout, points the views there (a tied output follows its embedding) and releases the file's
// pages of those tensors from the resident set, so the process holds each weight once. The
// values, and the bits every kernel computes from them, are the same; batched decode runs on
// the rows-in-lanes kernel. matrix_bytes grows by what widening adds.
void interleave_matrices(const GgufFile& f, ModelWeights& w);

}  // namespace troupe
