// Power profiles: how hard the engine may drive the device. Phones and laptops throttle under
// sustained full load (and the user pays in battery and heat), so besides running flat out the
// engine can bound the threads it uses, the size of each batch, and pace its steps.
//
//                  threads           running seqs  tokens/step  duty cycle
//   performance    all               config        config       1.0  (no pause)
//   balanced       half (>= 1)       8             256          0.8  (pause 1/4 of a step)
//   low-power      a quarter (>= 1)  4             64           0.5  (pause as long as a step)
//
// Fewer threads keep fewer cores awake (on big.LITTLE phones half the threads is about the
// number of performance cores); smaller batches make shorter steps, so pauses come often and
// latency stays bounded; the duty cycle caps average load, the lever against throttling.
// The scheduler applies the batch bounds (Scheduler::set_power_profile); the engine applies
// the threads and sleeps pause_after_step_ms() after every step.
#pragma once

#include <optional>
#include <string_view>

namespace troupe {

enum class PowerMode { Performance, Balanced, LowPower };

struct PowerProfile {
    PowerMode mode = PowerMode::Performance;
    int max_threads = 0;             // worker threads; 0: all hardware threads
    int max_num_seqs = 0;            // running sequences per step; 0: the scheduler's own limit
    int max_num_batched_tokens = 0;  // tokens per step; 0: the scheduler's own limit
    double duty_cycle = 1.0;         // fraction of wall time spent computing, in (0, 1]

    // How long to pause after a step that took step_ms so that computing takes duty_cycle of
    // the time: step_ms * (1 - duty_cycle) / duty_cycle.
    double pause_after_step_ms(double step_ms) const;
    // Threads to use on a machine with hardware_threads logical CPUs (>= 1).
    int threads(int hardware_threads) const;
};

// The preset for a mode on a machine with hardware_threads logical CPUs.
PowerProfile power_profile(PowerMode mode, int hardware_threads);

const char* power_mode_name(PowerMode mode);  // "performance", "balanced", "low-power"
std::optional<PowerMode> power_mode_from_name(std::string_view name);  // also "low_power"

}  // namespace troupe
