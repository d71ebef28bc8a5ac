#include "engine/power_profile.h"

#include <algorithm>

namespace troupe {

double PowerProfile::pause_after_step_ms(double step_ms) const {
    if (duty_cycle >= 1.0 || duty_cycle <= 0.0 || step_ms <= 0.0) return 0.0;
    return step_ms * (1.0 - duty_cycle) / duty_cycle;
}

int PowerProfile::threads(int hardware_threads) const {
    const int hw = std::max(1, hardware_threads);
    return max_threads > 0 ? std::min(max_threads, hw) : hw;
}

PowerProfile power_profile(PowerMode mode, int hardware_threads) {
    const int hw = std::max(1, hardware_threads);
    PowerProfile p;
    p.mode = mode;
    switch (mode) {
        case PowerMode::Performance:
            break;
        case PowerMode::Balanced:
            p.max_threads = std::max(1, hw / 2);
            p.max_num_seqs = 8;
            p.max_num_batched_tokens = 256;
            p.duty_cycle = 0.8;
            break;
        case PowerMode::LowPower:
            p.max_threads = std::max(1, hw / 4);
            p.max_num_seqs = 4;
            p.max_num_batched_tokens = 64;
            p.duty_cycle = 0.5;
            break;
    }
    return p;
}

const char* power_mode_name(PowerMode mode) {
    switch (mode) {
        case PowerMode::Performance:
            return "performance";
        case PowerMode::Balanced:
            return "balanced";
        case PowerMode::LowPower:
            return "low-power";
    }
    return "?";
}

std::optional<PowerMode> power_mode_from_name(std::string_view name) {
    if (name == "performance") return PowerMode::Performance;
    if (name == "balanced") return PowerMode::Balanced;
    if (name == "low-power" || name == "low_power") return PowerMode::LowPower;
    return std::nullopt;
}

}  // namespace troupe
