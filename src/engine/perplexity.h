// Perplexity with llama.cpp's definition, so figures are comparable with llama-perplexity:
// the text is tokenized once (with BOS when the vocabulary adds one), cut into
// non-overlapping windows of n_ctx tokens (the first token of each window replaced by BOS),
// and only the second half of each window is scored: for positions j in [n_ctx/2, n_ctx - 1),
// -log p(token[j + 1] | tokens[0..j]).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "kernels/thread_pool.h"
#include "model/model.h"

namespace troupe {

struct PerplexityResult {
    double perplexity = 0;  // exp(mean negative log-likelihood)
    double error = 0;       // standard error of the estimate, as llama.cpp prints it (+/-)
    int64_t n_windows = 0;
    int64_t n_scored = 0;  // tokens scored
    int64_t n_tokens = 0;  // tokens in the text
};

// tokens: the whole tokenized text. n_batch: tokens per forward pass (a window is computed
// in chunks of n_batch). progress (optional) is called after each window with (done, total).
// kv_type: the KV cache's element type (F16, BF16 or F32), to measure what a type costs.
// Throws troupe::Error when the text has fewer than 2 * n_ctx tokens (llama.cpp's rule).
PerplexityResult compute_perplexity(
    const Model& model, std::span<const int32_t> tokens, int n_ctx, int n_batch, ThreadPool* pool,
    const std::function<void(int64_t, int64_t, double)>& progress = {}, DType kv_type = DType::F16);

}  // namespace troupe
