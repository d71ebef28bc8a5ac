// A loaded model: the mapped GGUF file, its hyper-parameters and weight views, its tokenizer,
// and the forward pass. Loaded once and shared read-only by every sequence and agent.
//
// Thread-safety: immutable after load; forward() may run concurrently on different
// workspaces and KV caches (it writes only there).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "gguf/gguf.h"
#include "kernels/ops.h"
#include "kernels/thread_pool.h"
#include "model/batch.h"
#include "model/hparams.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace troupe {

// Scratch buffers of one forward pass, grown on demand and reused across steps.
struct ForwardWorkspace {
    std::vector<float> x;      // [n_tokens, n_embd] residual stream
    std::vector<float> q;      // [n_tokens, n_embd_q]
    std::vector<float> k;      // [n_tokens, n_embd_kv]
    std::vector<float> v;      // [n_tokens, n_embd_kv]
    std::vector<float> attn;   // [n_tokens, n_embd_q]
    std::vector<float> proj;   // [n_tokens, n_embd] output of wo / w_down
    std::vector<float> gate;   // [n_tokens, n_ff]
    std::vector<float> up;     // [n_tokens, n_ff]
    std::vector<float> out;    // [n_logit_rows, n_embd] residual stream of the rows that want
                               // logits, through the last layer (when not every row does)
    std::vector<float> q_out;  // [n_logit_rows, n_embd_q] their queries in the last layer
    std::vector<float> rope;   // [n_tokens, n_rot] cos | sin of each token's rotary angles
    std::vector<float> rope_pairs;  // [n_tokens, 2 n_rot] ops::rope_pair_table of rope (Norm)
    std::vector<int32_t> pos;  // [n_tokens]
    std::vector<ops::AttentionSeq> attn_seqs;  // [n_seqs]
    std::vector<int32_t> kv_present;           // [n_seqs] BatchSeq::n_kv_present: not stored
    ops::AttentionPlan attn_plan;              // the same for every layer of a pass
    // The last layer's attention when some but not all rows want logits (else out_seqs is
    // empty and out_plan stale): their queries q_out -> the first rows of attn.
    std::vector<ops::AttentionSeq> out_seqs;  // [seqs with logits]
    ops::AttentionPlan out_plan;
    StepProfile* profile = nullptr;  // when set, every step of the pass is timed into it
};

struct ModelLoadOptions {
    // Interleave the Q8_0 and Q4_0 matrices (on AVX2 / SSE4 the Q5_0 ones too, widened to Q8_0:
    // 55% more bytes for them) for the rows-in-lanes kernels (interleave_matrices):
    // the same values, batched decode faster; the weights then live in anonymous memory instead of
    // the file's page cache. false: every matrix is used in place from the mapped file.
    bool interleave_weights = true;
};

class Model {
  public:
    // Maps the file and binds the weights. Throws troupe::Error naming the problem.
    static std::unique_ptr<Model> load(const std::string& path, const ModelLoadOptions& opts = {});

    const HParams& hparams() const { return hp_; }
    const ModelWeights& weights() const { return w_; }
    const GgufFile& file() const { return *file_; }
    const Tokenizer& tokenizer() const { return *tokenizer_; }

    // Runs the batch through the network. Writes each token's K/V into the cache through
    // kv (one view per layer, [n_layer]) and the logits of the rows asked for into
    // logits: [batch.n_logit_rows(), n_vocab], in batch order.
    void forward(const Batch& batch, std::span<const ops::KvLayerView> kv, ForwardWorkspace& ws,
                 ThreadPool* pool, float* logits) const;

    // Renders messages as a prompt with the model's chat template (tokenizer.chat_template),
    // or the builtin template `template_name` when not empty. When the tokenizer adds BOS
    // itself, a BOS the template writes at the very start is dropped (no double BOS).
    // Throws troupe::Error when the model has no template or it cannot be rendered (the
    // message suggests --chat-template NAME).
    std::string apply_chat_template(const std::vector<ChatMessage>& messages,
                                    bool add_generation_prompt,
                                    const std::string& template_name = "") const;

    // Reads every weight page once so the first request does not pay for page faults.
    void touch_weights() const;

  private:
    std::unique_ptr<GgufFile> file_;
    std::unique_ptr<Tokenizer> tokenizer_;
    std::optional<ChatTemplate> chat_template_;  // the model's, when it has a usable one
    std::string chat_template_error_;            // why not, otherwise
    HParams hp_;
    ModelWeights w_;
};

}  // namespace troupe
