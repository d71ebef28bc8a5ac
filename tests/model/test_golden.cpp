// Our greedy tokens and log-probabilities against llama.cpp's on the shared models.
//
// The comparison is teacher-forced: at every position we feed llama.cpp's token, so every
// position of every case is compared. At each position:
// - our log-probabilities of llama.cpp's top-5 tokens agree within `logprob_tol`;
// - our argmax equals llama.cpp's greedy token, unless llama.cpp's own top-2 gap is below
//   `near_tie` (two correct implementations may then pick differently; these are counted
//   and printed).
// Tolerances by weight type. F16 weights meet llama.cpp within a few thousandths of a nat.
// Quantised weights multiply activations quantised to 8 bits (as llama.cpp does); that
// rounding amplifies the tiny upstream differences between two implementations (e.g.
// llama.cpp rounds attention inputs to F16, we keep F32), which moves log-probabilities by up
// to ~0.1 nat on these small models. The tolerances below are a little above the measured
// maxima (F16 0.005, Q8_0 0.10, Q4_0 0.10, Q4_K_M 0.15).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "engine/sequence_kv.h"
#include "model/golden.h"
#include "model/model.h"

namespace troupe {
namespace {

using test::GoldenCase;

struct Tolerance {
    float logprob_tol;
    float near_tie;
};

Tolerance tolerance_for(const std::string& model) {
    if (model.find("f16") != std::string::npos) return {0.02f, 0.01f};
    if (model.find("q8_0") != std::string::npos) return {0.15f, 0.05f};
    return {0.25f, 0.12f};  // 4-bit files
}

std::vector<float> log_softmax(const float* logits, int n) {
    const float mx = *std::max_element(logits, logits + n);
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += std::exp(double(logits[i] - mx));
    const float lse = mx + float(std::log(sum));
    std::vector<float> out(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) out[size_t(i)] = logits[i] - lse;
    return out;
}

const Model& cached_model(const std::string& path) {
    static std::map<std::string, std::unique_ptr<Model>> models;
    auto& m = models[path];
    if (!m) m = Model::load(path);
    return *m;
}

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, TeacherForcedTokensAndLogprobsMatchLlamaCpp) {
    const GoldenCase& c = GetParam();
    const std::string path = test::find_model(c.model);
    if (path.empty()) GTEST_SKIP() << c.model << " not found";
    const Model& model = cached_model(path);
    const HParams& hp = model.hparams();
    const int n_ctx = int(c.prompt_tokens.size() + c.tokens.size()) + 1;
    SequenceKv kv(hp, n_ctx);
    ThreadPool pool(2);
    ForwardWorkspace ws;
    std::vector<float> logits(size_t(hp.n_vocab));

    Batch batch;
    batch.tokens = c.prompt_tokens;
    batch.seqs = {{kv.block_table, 0, int32_t(c.prompt_tokens.size()), 1}};
    model.forward(batch, kv.views, ws, &pool, logits.data());

    const Tolerance tol = tolerance_for(c.model);
    float max_err = 0.0f;
    int n_near_ties = 0;
    int32_t pos = int32_t(c.prompt_tokens.size());
    for (size_t i = 0; i < c.tokens.size(); ++i) {
        const std::vector<float> lp = log_softmax(logits.data(), hp.n_vocab);
        for (const auto& [id, ref_lp] : c.top[i]) {
            max_err = std::max(max_err, std::abs(lp[size_t(id)] - ref_lp));
            EXPECT_NEAR(lp[size_t(id)], ref_lp, tol.logprob_tol)
                << "position " << i << " token " << id;
        }
        const int32_t ours = int32_t(std::max_element(lp.begin(), lp.end()) - lp.begin());
        if (ours != c.tokens[i]) {
            EXPECT_LT(c.gap[i], tol.near_tie)
                << "position " << i << ": ours " << ours << ", llama.cpp " << c.tokens[i]
                << " with a top-2 gap of " << c.gap[i];
            ++n_near_ties;
        }
        if (i + 1 == c.tokens.size()) break;
        batch.tokens = {c.tokens[i]};  // teacher forcing
        batch.seqs = {{kv.block_table, pos++, 1, 1}};
        model.forward(batch, kv.views, ws, &pool, logits.data());
    }
    std::printf(
        "[ compared ] %s '%.40s': %zu positions, %d near-tie disagreements, max |logprob error| "
        "%.4f\n",
        c.model.c_str(), c.prompt.c_str(), c.tokens.size(), n_near_ties, max_err);
}

std::string case_name(const ::testing::TestParamInfo<GoldenCase>& info) {
    std::string s = info.param.model.substr(0, info.param.model.find(".gguf")) + "_" +
                    std::to_string(info.index);
    for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return s;
}

INSTANTIATE_TEST_SUITE_P(Reference, Golden, ::testing::ValuesIn(test::load_golden_cases()),
                         case_name);

}  // namespace
}  // namespace troupe
