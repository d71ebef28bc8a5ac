// `troupe run` on the bundled model: optimised and baseline runs give the same tokens.
// Labelled slow (15 runs: minutes under the sanitizers, seconds in the release build).
#include "compare_runs.h"

namespace troupe::test {
namespace {

TEST(CliRun, OptimisedRunGivesTheBaselineTokensOnTheBundledModel) {
    for (const char* name : kExamples) check_example_on(bundled_model(), name);
}

}  // namespace
}  // namespace troupe::test
