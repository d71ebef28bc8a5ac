// Token sampling from logits, llama.cpp's chain and semantics:
//   penalties (repeat / frequency / presence over the last repeat_last_n tokens)
//   -> greedy (temperature <= 0: argmax, first index on ties)
//   or top-k -> top-p -> min-p -> temperature -> random draw (seeded).
//
// Thread-safety: one Sampler per sequence (it owns the RNG state).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/request.h"

namespace troupe {

class Sampler {
  public:
    explicit Sampler(const SamplingParams& params);

    // Picks the next token. logits: [n_vocab], modified in place by the penalties.
    // history: the sequence's tokens so far (prompt and generated), newest last.
    int32_t sample(std::span<float> logits, std::span<const int32_t> history);

    const SamplingParams& params() const { return params_; }

  private:
    struct Candidate {
        float logit;
        int32_t id;
    };
    void apply_penalties(std::span<float> logits, std::span<const int32_t> history) const;
    void top_k(int k);
    void top_p(float p);
    void min_p(float p);
    int32_t draw(float temperature);

    SamplingParams params_;
    std::mt19937_64 rng_;
    std::vector<Candidate> cand_;  // [n_candidates] scratch, sorted by logit descending
};

// argmax over logits[n], first index on ties.
int32_t argmax(std::span<const float> logits);

}  // namespace troupe
