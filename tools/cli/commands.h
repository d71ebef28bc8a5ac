// Subcommands of the `troupe` CLI. Each lives in its own cmd_<name>.cpp and registers itself
// on the app; the callback runs the command and throws troupe::Error on bad input.
#pragma once

#include <CLI/CLI.hpp>

namespace troupe::cli {

void add_inspect_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_batch_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_run_command(CLI::App& app);   // cmd_run.cpp
void add_lint_command(CLI::App& app);  // cmd_lint.cpp
void add_bench_command(CLI::App& app);

}  // namespace troupe::cli
