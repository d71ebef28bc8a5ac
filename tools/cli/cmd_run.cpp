// troupe run WORKFLOW -m MODEL: runs a team of agents (run_command.h does the work).
#include <atomic>
#include <csignal>
#include <memory>

#include "commands.h"
#include "options.h"
#include "run_command.h"

namespace troupe::cli {

namespace {

// Ctrl-C cancels the run (every request is cancelled, the summary still prints); a second one
// ends the process. A signal handler can only reach static storage, hence this one flag.
std::atomic<bool> g_interrupted{false};

void on_interrupt(int sig) {
    if (g_interrupted.exchange(true)) {
        std::signal(sig, SIG_DFL);
        std::raise(sig);
    }
}

}  // namespace

void add_run_command(CLI::App& app) {
    auto o = std::make_shared<RunCommandOptions>();
    CLI::App* cmd = app.add_subcommand(
        "run",
        "Run a workflow (a team of agents) and print its summary. Exit code 3: a task "
        "failed; 130: interrupted or past --deadline");
    cmd->add_option("workflow", o->workflow_path, "Workflow file (YAML or JSON)")->required();
    add_model_option(cmd, o->model_path);
    cmd->add_option("--input", o->inputs, "Set an input: NAME=VALUE or NAME=@FILE (repeatable)");
    cmd->add_option("--trace", o->trace_path, "Write one JSON line per request to FILE");
    cmd->add_flag("--baseline", o->baseline,
                  "The naive way: one task at a time, no prefix reuse, no batching");
    cmd->add_flag("--no-prefix-cache", o->no_prefix_cache, "No KV reuse between requests");
    cmd->add_flag("--no-batching", o->no_batching, "One request at a time");
    cmd->add_flag("--no-shared-attention", o->no_shared_attention,
                  "Attention over shared prefixes computed per sequence");
    cmd->add_flag("--compare-baseline", o->compare_baseline,
                  "Run --baseline, then the optimised run, and print the speed-up");
    cmd->add_option("--repeat", o->repeat,
                    "With --compare-baseline: run both N times and compare the median runs "
                    "(fastest and slowest dropped when N >= 3)")
        ->check(CLI::Range(1, 100));
    cmd->add_flag("--json", o->json, "Print one JSON object (summary, tasks) instead of text");
    cmd->add_flag("--ignore-eos", o->ignore_eos,
                  "Generate each agent's max_tokens exactly (fixed lengths for benchmarks)");
    cmd->add_option("-t,--threads", o->n_threads, "Threads (default: all cores)");
    cmd->add_option("--deadline", o->deadline_s, "Cancel the run after this many seconds");
    cmd->callback([o] {
        g_interrupted = false;
        std::signal(SIGINT, on_interrupt);
        std::signal(SIGTERM, on_interrupt);
        const int code =
            run_command(*o, make_backend, load_model_text(o->model_path), stdout, &g_interrupted);
        std::signal(SIGINT, SIG_DFL);
        std::signal(SIGTERM, SIG_DFL);
        if (code != 0) throw CLI::RuntimeError(code);
    });
}

}  // namespace troupe::cli
