// The continuous-batching engine: requests from many agents share one model, one paged KV
// cache with automatic prefix caching, and one forward pass per step.
//
// Each step(): the scheduler picks the work (decode tokens of running sequences plus prompt
// chunks, under the token budget and the KV budget, by priority), one forward pass computes
// it, each sequence that reached the end of its known tokens samples one token, text is
// streamed through the token callbacks, stop strings and end-of-generation finish requests,
// and finished requests free their KV blocks at once (full blocks stay cached for later
// requests in the same namespace).
//
// Thread-safety: not thread-safe; one owner thread drives it (see InferenceBackend).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/backend.h"
#include "engine/power_profile.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/stop_matcher.h"
#include "kernels/thread_pool.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "tokenizer/stream_decoder.h"

namespace troupe {

// One definition of each engine option and its default (the CLI flags, the C API and the
// server's settings map onto these fields).
struct EngineConfig {
    int n_threads = 0;                  // 0: all hardware threads (bounded by the power profile)
    int n_ctx = 0;                      // max tokens per sequence; 0: the model's training context
    int block_size = 16;                // tokens per KV block
    uint64_t kv_budget_bytes = 0;       // 0: kv::default_kv_budget_bytes()
    DType kv_type = DType::F16;         // F16, BF16 or F32
    int max_num_seqs = 64;              // running sequences at once (--parallel)
    int max_num_batched_tokens = 512;   // tokens per forward pass (decodes + prompt chunks)
    bool enable_prefix_caching = true;  // reuse cached KV of equal prompt prefixes
    bool enable_batching = true;        // false: one sequence at a time (baseline)
    bool shared_prefix_attention = true;  // attend to shared prefix blocks once per batch
    PowerMode power = PowerMode::Performance;
    bool warmup = true;  // touch the weights and run one step at start
    // Make the whole KV cache resident at start (kv::KvStorage::prefault), as llama.cpp and
    // vLLM do, so that no step page-faults on a block's first use; costs the budget's memory
    // from the start instead of as blocks are first used (off: memory grows with use).
    bool kv_prefault = false;
    // Time every step of the forward passes, op by op (kernels/step_profile.h; `troupe bench
    // model --profile`). Costs a few clock reads per step.
    bool profile_steps = false;
};

class Engine final : public InferenceBackend {
  public:
    // Allocates the KV cache and the thread pool; warms up when config.warmup. Throws
    // troupe::Error on an invalid configuration (naming the field).
    Engine(const Model& model, const EngineConfig& config);
    ~Engine() override;

    RequestId submit(Request request, TokenCallback on_token = {}) override;
    void cancel(RequestId id) override;
    bool has_work() const override;
    std::vector<RequestOutput> step() override;
    EngineStats stats() const override;

    // Runs step() until every request submitted so far has finished.
    std::vector<RequestOutput> run_until_done();

    // Switches the power profile (threads, batch bounds, pacing) from the next step on.
    void set_power_mode(PowerMode mode);

    const Model& model() const { return model_; }
    const EngineConfig& config() const { return config_; }
    // With config.profile_steps: the steps of the passes that only decode (decode true) or
    // that compute prompt tokens, since the engine started (warm-up excluded).
    const StepProfile& step_profile(bool decode) const { return profiles_[decode ? 0 : 1]; }
    int n_ctx() const { return n_ctx_; }

  private:
    // Per-request state the scheduler does not keep: sampling, streaming, stop strings.
    struct Live {
        Sampler sampler;
        StreamDecoder decoder;
        StopMatcher stops;
        TokenCallback on_token;
        std::string text;  // released text so far
        int32_t eog = -1;  // the end-of-generation token that finished it, if any
    };

    void warm_up();
    void build_batch(const ScheduledBatch& sb);
    void compute(const ScheduledBatch& sb, double t0);
    void emit_sampled(const ScheduledBatch& sb,
                      const std::vector<std::unique_ptr<Sequence>>& finished);
    void emit_token(RequestId id, int32_t token);
    RequestOutput make_output(const Sequence& seq);

    const Model& model_;
    EngineConfig config_;
    int n_ctx_ = 0;
    PowerProfile power_;
    std::unique_ptr<ThreadPool> pool_;
    std::unique_ptr<kv::KvStorage> storage_;
    std::unique_ptr<Scheduler> scheduler_;
    std::vector<ops::KvLayerView> kv_views_;  // [n_layer]
    std::unordered_map<RequestId, Live> live_;

    // Per-step buffers, reused.
    Batch batch_;
    ForwardWorkspace ws_;
    std::vector<float> logits_;     // [n_logit_rows, n_vocab]
    std::vector<int32_t> sampled_;  // [n_scheduled]
    uint64_t peak_rss_ = 0;
    double decode_step_ms_ = 0, prefill_step_ms_ = 0;
    uint64_t decode_step_tokens_ = 0, prefill_step_tokens_ = 0;
    StepProfile profiles_[2];  // config.profile_steps: decode-only passes, the others
};

}  // namespace troupe
