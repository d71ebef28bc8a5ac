// `troupe bench kernels`: the machine's limits (read bandwidth, FMA and int8 throughput on
// the kernels' own threads) and what the kernels reach on the shapes of the 135M model:
// matrix-vector GB/s per weight type, matrix-matrix GFLOP/s per type and batch size,
// attention per layer, thread-pool dispatch cost. Every figure is the median of repeated
// runs (the best is reported too: machines shared with other work are noisy).
#pragma once

#include <string>
#include <vector>

namespace troupe::cli {

struct KernelBenchOptions {
    int threads = 2;
    bool json = false;               // one JSON document on stdout instead of tables
    bool quick = false;              // shorter runs and a smaller working set
    std::vector<std::string> types;  // weight types to measure (empty: the default set)
    std::string target;              // force a SIMD target by name (empty: the best)
};

void run_kernel_bench(const KernelBenchOptions& options);

}  // namespace troupe::cli
