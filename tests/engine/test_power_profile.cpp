// Power profiles: presets, pacing arithmetic, names.
#include <gtest/gtest.h>

#include "engine/power_profile.h"

namespace troupe {
namespace {

TEST(PowerProfile, Presets) {
    const PowerProfile perf = power_profile(PowerMode::Performance, 8);
    const PowerProfile bal = power_profile(PowerMode::Balanced, 8);
    const PowerProfile low = power_profile(PowerMode::LowPower, 8);
    EXPECT_EQ(perf.threads(8), 8);
    EXPECT_EQ(bal.threads(8), 4);
    EXPECT_EQ(low.threads(8), 2);
    EXPECT_EQ(perf.max_num_seqs, 0);
    EXPECT_EQ(bal.max_num_seqs, 8);
    EXPECT_EQ(low.max_num_seqs, 4);
    EXPECT_EQ(low.max_num_batched_tokens, 64);
    for (PowerMode m : {PowerMode::Performance, PowerMode::Balanced, PowerMode::LowPower})
        EXPECT_EQ(power_profile(m, 1).threads(1), 1);  // never zero threads
    EXPECT_EQ(power_profile(PowerMode::LowPower, 3).threads(3), 1);
}

TEST(PowerProfile, Pacing) {
    EXPECT_DOUBLE_EQ(power_profile(PowerMode::Performance, 4).pause_after_step_ms(10), 0.0);
    EXPECT_DOUBLE_EQ(power_profile(PowerMode::Balanced, 4).pause_after_step_ms(10), 2.5);
    EXPECT_DOUBLE_EQ(power_profile(PowerMode::LowPower, 4).pause_after_step_ms(10), 10.0);
    PowerProfile p;
    p.duty_cycle = 0.25;
    EXPECT_DOUBLE_EQ(p.pause_after_step_ms(4), 12.0);
    p.duty_cycle = 0;  // nonsense: no pause rather than forever
    EXPECT_DOUBLE_EQ(p.pause_after_step_ms(4), 0.0);
}

TEST(PowerProfile, Names) {
    for (PowerMode m : {PowerMode::Performance, PowerMode::Balanced, PowerMode::LowPower})
        EXPECT_EQ(power_mode_from_name(power_mode_name(m)), m);
    EXPECT_EQ(power_mode_from_name("low_power"), PowerMode::LowPower);
    EXPECT_FALSE(power_mode_from_name("turbo").has_value());
}

}  // namespace
}  // namespace troupe
