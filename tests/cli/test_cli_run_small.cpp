// `troupe run` on the shared 135M model (skipped when absent): optimised and baseline runs
// give the same tokens. Slow: about a minute on 2 threads.
#include <filesystem>

#include "compare_runs.h"

namespace troupe::test {
namespace {

TEST(CliRun, OptimisedRunGivesTheBaselineTokensOnTheSmallModel) {
    const std::string small = std::string(TROUPE_SHARED_MODELS_DIR) + "/troupe-small-q8_0.gguf";
    if (!std::filesystem::exists(small)) GTEST_SKIP() << small << " not present";
    for (const char* name : kExamples) check_example_on(small, name);
}

}  // namespace
}  // namespace troupe::test
