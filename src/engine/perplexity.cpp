#include "engine/perplexity.h"

#include <cmath>
#include <numeric>
#include <vector>

#include "engine/sequence_kv.h"
#include "util/error.h"

namespace troupe {

namespace {

// -log softmax(logits)[target], in double.
double nll_of(const float* logits, int n_vocab, int32_t target) {
    float mx = logits[0];
    for (int i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
    double sum = 0.0;
    for (int i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i] - mx));
    return -(double(logits[target] - mx) - std::log(sum));
}

}  // namespace

PerplexityResult compute_perplexity(const Model& model, std::span<const int32_t> tokens, int n_ctx,
                                    int n_batch, ThreadPool* pool,
                                    const std::function<void(int64_t, int64_t, double)>& progress,
                                    DType kv_type) {
    const HParams& hp = model.hparams();
    if (n_ctx < 4) throw Error("perplexity needs a context of at least 4 tokens");
    if (int64_t(tokens.size()) < 2 * int64_t(n_ctx))
        throw Error("the text has " + std::to_string(tokens.size()) +
                    " tokens; perplexity with a context of " + std::to_string(n_ctx) +
                    " needs at least " + std::to_string(2 * n_ctx));
    n_batch = std::max(1, std::min(n_batch, n_ctx));

    SequenceKv kv(hp, n_ctx, 16, kv_type);

    const int32_t bos = model.tokenizer().bos();
    const bool add_bos = model.tokenizer().add_bos() && bos >= 0;
    const int first = n_ctx / 2;
    PerplexityResult r;
    r.n_tokens = int64_t(tokens.size());
    r.n_windows = r.n_tokens / n_ctx;
    double nll = 0.0, nll2 = 0.0;
    ForwardWorkspace ws;
    std::vector<float> logits;
    Batch batch;
    for (int64_t w = 0; w < r.n_windows; ++w) {
        const int32_t* win = tokens.data() + w * n_ctx;
        for (int start = 0; start < n_ctx; start += n_batch) {
            const int n = std::min(n_batch, n_ctx - start);
            batch.tokens.assign(win + start, win + start + n);
            if (start == 0 && add_bos) batch.tokens[0] = bos;
            // Logits for the rows that are scored: positions [first, n_ctx - 1).
            const int lo = std::max(start, first), hi = std::min(start + n, n_ctx - 1);
            const int n_logits = hi > lo ? start + n - lo : 0;
            batch.seqs = {{kv.block_table, start, n, n_logits}};
            logits.resize(size_t(n_logits) * size_t(hp.n_vocab));
            model.forward(batch, kv.views, ws, pool, logits.data());
            for (int j = lo; j < hi; ++j) {
                const double v =
                    nll_of(logits.data() + size_t(j - lo) * hp.n_vocab, hp.n_vocab, win[j + 1]);
                nll += v;
                nll2 += v * v;
                ++r.n_scored;
            }
        }
        if (progress) progress(w + 1, r.n_windows, std::exp(nll / double(r.n_scored)));
    }
    const double mean = nll / double(r.n_scored);
    r.perplexity = std::exp(mean);
    const double var = nll2 / double(r.n_scored) - mean * mean;
    r.error = var > 0 ? std::sqrt(var / double(r.n_scored - 1)) * r.perplexity : 0.0;
    return r;
}

}  // namespace troupe
