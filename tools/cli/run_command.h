// `troupe run`: runs a workflow on the model, streams progress, prints the summary (or one
// JSON object), writes the trace. The command's logic, separate from its flag parsing
// (cmd_run.cpp), so it can be driven with any backend factory.
#pragma once

#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine_factory.h"

namespace troupe::cli {

struct RunCommandOptions {
    std::string workflow_path;
    std::string model_path;
    std::vector<std::string> inputs;  // NAME=VALUE or NAME=@FILE
    std::string trace_path;           // "" : no trace file
    bool baseline = false;            // no prefix reuse, no batching: the naive way
    bool no_prefix_cache = false;
    bool no_batching = false;
    bool no_shared_attention = false;  // shared prefixes' attention computed per sequence
    bool compare_baseline = false;     // run the baseline, then the optimised run; compare
    int repeat = 1;                    // with compare_baseline: pairs of runs; the medians count
    bool json = false;
    bool ignore_eos = false;
    int n_threads = 0;
    double deadline_s = 0;  // 0: none
};

// Exit codes of `troupe run`.
constexpr int kExitTasksFailed = 3;  // the run ended, but a task failed, was blocked or cancelled
constexpr int kExitCancelled = 130;  // interrupted (Ctrl-C) or past --deadline

using BackendFactory = std::function<std::unique_ptr<InferenceBackend>(const BackendOptions&)>;

// Runs the command; returns its exit code. Throws troupe::Error for bad input (workflow file,
// --input flags, trace file). `cancel` (optional) stops the run when set.
int run_command(const RunCommandOptions& options, const BackendFactory& make_backend,
                const ModelText& model_text, FILE* out, const std::atomic<bool>* cancel);

}  // namespace troupe::cli
