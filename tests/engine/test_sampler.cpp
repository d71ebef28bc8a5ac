#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "engine/sampler.h"
#include "engine/stop_matcher.h"

namespace troupe {
namespace {

SamplingParams plain(float temp, uint64_t seed = 1) {
    SamplingParams p;
    p.temperature = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

std::map<int32_t, int> histogram(SamplingParams p, const std::vector<float>& logits, int n) {
    Sampler s(p);
    std::map<int32_t, int> h;
    for (int i = 0; i < n; ++i) {
        std::vector<float> l = logits;
        h[s.sample(l, {})]++;
    }
    return h;
}

const std::vector<float> kProbs = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};

TEST(Sampler, GreedyIsArgmaxWithFirstIndexOnTies) {
    Sampler s(plain(0.0f));
    std::vector<float> l = {1.0f, 3.0f, 3.0f, -2.0f};
    EXPECT_EQ(s.sample(l, {}), 1);
    EXPECT_EQ(argmax(std::vector<float>{-1.0f, -1.0f}), 0);
}

TEST(Sampler, RepeatPenaltyDividesPositiveAndMultipliesNegative) {
    SamplingParams p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    Sampler s(p);
    std::vector<float> l = {4.0f, 3.0f, -1.0f};
    const std::vector<int32_t> hist = {0, 2};
    EXPECT_EQ(s.sample(l, hist), 1);  // 4 -> 2, so 3 wins
    EXPECT_FLOAT_EQ(l[0], 2.0f);
    EXPECT_FLOAT_EQ(l[2], -2.0f);
}

TEST(Sampler, FrequencyAndPresencePenalties) {
    SamplingParams p = plain(0.0f);
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    Sampler s(p);
    std::vector<float> l = {5.0f, 4.0f};
    const std::vector<int32_t> hist = {0, 0, 0};
    EXPECT_EQ(s.sample(l, hist), 1);  // 5 - 3*0.5 - 0.25 = 3.25
    EXPECT_FLOAT_EQ(l[0], 3.25f);
    EXPECT_FLOAT_EQ(l[1], 4.0f);
}

TEST(Sampler, PenaltyWindowLooksOnlyAtRecentTokens) {
    SamplingParams p = plain(0.0f);
    p.repeat_penalty = 10.0f;
    p.repeat_last_n = 1;
    Sampler s(p);
    std::vector<float> l = {5.0f, 4.0f};
    const std::vector<int32_t> hist = {0, 1};  // only token 1 is in the window
    EXPECT_EQ(s.sample(l, hist), 0);
}

TEST(Sampler, DrawFollowsTheDistribution) {
    const auto h = histogram(plain(1.0f), kProbs, 20000);
    EXPECT_NEAR(h.at(0) / 20000.0, 0.5, 0.02);
    EXPECT_NEAR(h.at(1) / 20000.0, 0.3, 0.02);
    EXPECT_NEAR(h.at(2) / 20000.0, 0.2, 0.02);
}

TEST(Sampler, TemperatureSharpens) {
    const auto h = histogram(plain(0.25f), kProbs, 20000);
    // p^4 normalised: 0.0625, 0.0081, 0.0016 -> 0.86, 0.11, 0.02
    EXPECT_NEAR(h.at(0) / 20000.0, 0.0625 / 0.0722, 0.02);
}

TEST(Sampler, TopKTopPMinPTruncate) {
    SamplingParams k = plain(1.0f);
    k.top_k = 1;
    EXPECT_EQ(histogram(k, kProbs, 200).size(), 1u);

    SamplingParams tp = plain(1.0f);
    tp.top_p = 0.6f;  // 0.5 < 0.6 <= 0.8: tokens 0 and 1
    const auto h = histogram(tp, kProbs, 5000);
    EXPECT_EQ(h.count(2), 0u);
    EXPECT_NEAR(h.at(0) / 5000.0, 0.5 / 0.8, 0.03);

    SamplingParams mp = plain(1.0f);
    mp.min_p = 0.5f;  // keep p >= 0.25
    const auto m = histogram(mp, kProbs, 5000);
    EXPECT_EQ(m.count(2), 0u);
    EXPECT_EQ(m.count(1), 1u);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
    std::vector<float> logits(100);
    for (int i = 0; i < 100; ++i) logits[size_t(i)] = float(i % 7) * 0.1f;
    auto run = [&](uint64_t seed) {
        Sampler s(plain(1.0f, seed));
        std::vector<int32_t> out;
        for (int i = 0; i < 50; ++i) {
            std::vector<float> l = logits;
            out.push_back(s.sample(l, {}));
        }
        return out;
    };
    EXPECT_EQ(run(42), run(42));
    EXPECT_NE(run(42), run(43));
}

TEST(StopMatcher, HoldsBackPossiblePrefixAndCutsAtMatch) {
    StopMatcher m({"</end>", "STOP"});
    EXPECT_EQ(m.push("hello </"), "hello ");
    EXPECT_EQ(m.push("e"), "");
    EXPECT_EQ(m.push("x"), "</ex");  // no longer a prefix
    EXPECT_EQ(m.push(" ST"), " ");
    EXPECT_EQ(m.push("OP and more"), "");
    EXPECT_TRUE(m.stopped());
    EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, EarliestMatchWinsAndFlushReleasesTail) {
    StopMatcher m({"bc", "abcd"});
    EXPECT_EQ(m.push("xabcd"), "x");  // "abcd" starts before "bc"
    EXPECT_TRUE(m.stopped());
    StopMatcher n({"zz"});
    EXPECT_EQ(n.push("abz"), "ab");
    EXPECT_EQ(n.flush(), "z");
    StopMatcher none({});
    EXPECT_EQ(none.push("text"), "text");
}

}  // namespace
}  // namespace troupe
