// Machine-limit probes, run on the same threads as the kernels so that kernel figures can be
// shown as a fraction of what this machine can do:
// - read bandwidth: every thread streams its own slice of a buffer, summing floats (the
//   access pattern of decode: read each byte once per step), with software prefetches as far
//   ahead as the matrix-vector kernels', in huge pages where the OS has them (as the
//   interleaved weights are). Far larger than the last-level cache it measures DRAM; read
//   over a model's own weight matrices (probe_read_ranges), what decode of that model can
//   stream (on the development host the two vCPUs' last-level caches keep part of the 126 MB
//   of weights between passes: ~53 GB/s against ~30 for 512 MiB in the same minute);
// - FMA throughput: every thread runs independent chains of float fused multiply-adds in
//   registers (the arithmetic limit of matrix-matrix products);
// - int8 dot throughput: the same with the 8-bit dot product the quantised kernels use;
// - core-to-core latency: threads 0 and 1 pass a cache line back and forth. What a barrier
//   or a value written by one thread and read by the other costs: on the development host
//   ~100 ns when the two vCPUs share a last-level cache, ~400 ns when they do not (then the
//   read bandwidth is higher, two memory paths, and batched decode, which exchanges
//   activations between the threads at every step, is slower).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/thread_pool.h"

namespace troupe::kernels {

struct ProbeResult {
    double best = 0;    // the fastest repetition (least disturbed by other processes)
    double median = 0;  // the median repetition
};

// GB/s (1e9 bytes per second) reading `bytes` (rounded down to whole pages per thread) with
// all pool threads (pool null: the calling thread alone), `reps` repetitions after three
// passes that are not counted (the caches then hold what they keep of it from pass to pass).
ProbeResult probe_read_bandwidth(ThreadPool* pool, size_t bytes, int reps);

// GB/s reading the given byte ranges (a model's weight matrices: decode's own memory, pages
// and cache state) in order, each split over the pool threads, `reps` repetitions after
// three uncounted passes: the roofline of decoding that model on this machine.
struct ByteRange {
    const void* data;
    size_t bytes;
};
// stepped: the threads meet at a barrier after every range, as a forward pass's threads do
// after every product (the pass's step structure without its arithmetic: what the steps
// alone cost against one free-running read).
ProbeResult probe_read_ranges(ThreadPool* pool, const std::vector<ByteRange>& ranges, int reps,
                              bool stepped = false);

// GFLOP/s (a fused multiply-add counts 2) with all pool threads, `reps` repetitions.
ProbeResult probe_fma(ThreadPool* pool, int reps);

// G int8 multiply-adds per second (counted as 2 operations each, like FLOPs) with all pool
// threads, through the same dot-product instructions as the quantised matmul.
ProbeResult probe_int8_dot(ThreadPool* pool, int reps);

// Nanoseconds of one round trip of a cache line between pool threads 0 and 1 (best: the
// lowest of `reps` repetitions). 0 when the pool has fewer than 2 threads.
ProbeResult probe_core_to_core_ns(ThreadPool* pool, int reps);

}  // namespace troupe::kernels
