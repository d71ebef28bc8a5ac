// `troupe perplexity` on the shared held-out text against llama.cpp's figure for the bundled
// model (MODEL_CARD.md: troupe-tiny Q8_0, -c 512: 41.589). Minutes of compute: label slow.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "run_cli.h"

namespace troupe {
namespace {

TEST(CliPerplexity, MatchesLlamaCppOnTheHeldOutText) {
    const std::string text = std::string(TROUPE_SHARED_MODELS_DIR) + "/heldout.txt";
    if (!std::filesystem::exists(text)) GTEST_SKIP() << text << " not found";
    const auto r = test::run_cli(
        {"perplexity", "-m", test::bundled_model(), "-f", text, "--ctx", "512", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("tokens").get<int>(), 48995);
    EXPECT_NEAR(j.at("perplexity").get<double>(), 41.589, 0.05);
}

}  // namespace
}  // namespace troupe
