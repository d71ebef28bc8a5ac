// Target selection: every available target can be forced, and dispatch then really runs it.
#include "kernels/targets.h"

#include <gtest/gtest.h>

namespace troupe {
namespace {

TEST(Targets, ScopedTargetForcesDispatch) {
    const auto all = kernels::available_targets();
    ASSERT_FALSE(all.empty());
    EXPECT_EQ(kernels::active_target().id, all.front().id);  // the best one by default
    for (const kernels::SimdTarget& t : all) {
        kernels::ScopedTarget forced(t.id);
        EXPECT_EQ(kernels::active_target().id, t.id) << t.name;
    }
    EXPECT_EQ(kernels::active_target().id, all.front().id);  // restored
}

}  // namespace
}  // namespace troupe
