// CLI flags for the option structs of the library, declared once here and shared by every
// subcommand (generate, batch, run, perplexity, serve): the flag names map one to one onto
// SamplingParams and EngineConfig fields, whose defaults are the library's.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine/engine.h"
#include "engine/request.h"

namespace troupe::cli {

// -m/--model, defaulting to the bundled model.
void add_model_option(CLI::App* cmd, std::string& path);

// --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --frequency-penalty
// --presence-penalty --seed (a random seed when not given; `seed_given` tells which).
void add_sampling_options(CLI::App* cmd, SamplingParams& p, bool& seed_given);

// --kv-type f16|bf16|f32 into t (EngineConfig::kv_type).
void add_kv_type_option(CLI::App* cmd, DType& t);

// --threads --ctx --kv-budget-mb --kv-type --block-size --batch-tokens --no-prefix-cache
// --no-shared-attention --power
void add_engine_options(CLI::App* cmd, EngineConfig& c);

// A fresh random seed (used when --seed is not given).
uint64_t random_seed();

}  // namespace troupe::cli
