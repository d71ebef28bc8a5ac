// `troupe bench model` and `troupe bench agents`: end-to-end figures on a real model, each
// case repeated (the seed's method: run N times, drop the fastest and the slowest, report the
// median of the rest), measured side by side in one run so ratios are fair on a noisy machine.
#pragma once

#include <CLI/CLI.hpp>

namespace troupe::cli {

// Registers "model" and "agents" under the `bench` subcommand.
void add_bench_engine_commands(CLI::App* bench);

}  // namespace troupe::cli
