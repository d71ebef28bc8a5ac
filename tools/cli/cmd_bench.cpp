// troupe bench: kernels (throughput against this machine's limits), model and agents
// (end-to-end figures, bench_engine.h).
#include <string>

#include "bench_engine.h"
#include "bench_kernels.h"
#include "commands.h"

namespace troupe::cli {

void add_bench_command(CLI::App& app) {
    CLI::App* bench = app.add_subcommand("bench", "Measure performance");
    bench->require_subcommand(1);
    auto opts = std::make_shared<KernelBenchOptions>();
    CLI::App* kernels = bench->add_subcommand(
        "kernels", "Kernel throughput against the machine's read bandwidth and FMA limits");
    kernels->add_option("--threads,-t", opts->threads, "Threads (including the caller)")
        ->capture_default_str();
    kernels->add_flag("--json", opts->json, "Print one JSON document instead of tables");
    kernels->add_flag("--quick", opts->quick, "Shorter runs and a 64 MiB working set");
    kernels->add_option("--types", opts->types, "Weight types to measure (e.g. q8_0,q4_k)")
        ->delimiter(',');
    kernels->add_option("--target", opts->target, "Force a SIMD target (e.g. AVX2)");
    kernels->callback([opts] { run_kernel_bench(*opts); });
    add_bench_engine_commands(bench);
}

}  // namespace troupe::cli
