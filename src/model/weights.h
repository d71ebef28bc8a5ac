// Views of a model's weight tensors inside the mapped GGUF file. Matrices stay in the file's
// type and memory (shared by every sequence and agent: the model is loaded once); the small
// norm and bias vectors are converted to float and owned.
#pragma once

#include <vector>

#include "gguf/gguf.h"
#include "kernels/ops.h"
#include "model/hparams.h"

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
};

// Binds every tensor the architecture needs, checking presence, shape and type. Sets
// hp.n_vocab from the embedding. Throws troupe::Error naming the tensor and the problem.
ModelWeights load_weights(const GgufFile& f, HParams& hp);

}  // namespace troupe
