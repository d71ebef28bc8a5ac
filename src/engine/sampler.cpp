#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "kernels/ops.h"

namespace troupe {

int32_t argmax(std::span<const float> logits) {
    if (logits.empty()) return 0;
    return int32_t(ops::argmax(logits.data(), int64_t(logits.size())));
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> history) const {
    const SamplingParams& p = params_;
    if (p.repeat_penalty == 1.0f && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f)
        return;
    size_t window = history.size();
    if (p.repeat_last_n >= 0) window = std::min(window, size_t(p.repeat_last_n));
    std::unordered_map<int32_t, int> counts;
    for (size_t i = history.size() - window; i < history.size(); ++i) counts[history[i]]++;
    for (const auto& [id, count] : counts) {
        if (id < 0 || size_t(id) >= logits.size()) continue;
        float& l = logits[size_t(id)];
        l = l <= 0.0f ? l * p.repeat_penalty : l / p.repeat_penalty;
        l -= float(count) * p.frequency_penalty + p.presence_penalty;
    }
}

void Sampler::top_k(int k) {
    if (k <= 0 || size_t(k) >= cand_.size()) {
        std::sort(cand_.begin(), cand_.end(),
                  [](const Candidate& a, const Candidate& b) { return a.logit > b.logit; });
        return;
    }
    std::partial_sort(cand_.begin(), cand_.begin() + k, cand_.end(),
                      [](const Candidate& a, const Candidate& b) { return a.logit > b.logit; });
    cand_.resize(size_t(k));
}

// Keeps the smallest prefix of candidates (sorted) whose probability mass reaches p.
void Sampler::top_p(float p) {
    if (p >= 1.0f || cand_.empty()) return;
    const float mx = cand_[0].logit;
    double total = 0.0;
    for (const Candidate& c : cand_) total += std::exp(double(c.logit - mx));
    double cum = 0.0;
    size_t keep = cand_.size();
    for (size_t i = 0; i < cand_.size(); ++i) {
        cum += std::exp(double(cand_[i].logit - mx)) / total;
        if (cum >= double(p)) {
            keep = i + 1;
            break;
        }
    }
    cand_.resize(keep);
}

// Keeps candidates whose probability is at least p times the most likely one's.
void Sampler::min_p(float p) {
    if (p <= 0.0f || cand_.empty()) return;
    const float threshold = cand_[0].logit + std::log(p);
    size_t keep = 1;
    while (keep < cand_.size() && cand_[keep].logit >= threshold) ++keep;
    cand_.resize(keep);
}

int32_t Sampler::draw(float temperature) {
    const float mx = cand_[0].logit;
    std::vector<double> w(cand_.size());
    for (size_t i = 0; i < cand_.size(); ++i)
        w[i] = std::exp(double(cand_[i].logit - mx) / double(temperature));
    std::discrete_distribution<size_t> dist(w.begin(), w.end());
    return cand_[dist(rng_)].id;
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
    apply_penalties(logits, history);
    if (params_.is_greedy()) return argmax(logits);
    cand_.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) cand_[i] = {logits[i], int32_t(i)};
    top_k(params_.top_k);  // also sorts descending
    top_p(params_.top_p);
    min_p(params_.min_p);
    return draw(params_.temperature);
}

}  // namespace troupe
