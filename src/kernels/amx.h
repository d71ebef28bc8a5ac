// Intel AMX (Advanced Matrix Extensions: Sapphire Rapids and later Xeons) for the batched
// decode products of Q8_0 weights in the Interleaved16 layout: the one kernel here that is not
// Highway code, because Highway has no tile operations. Internal to src/kernels; used by the
// AVX3_DL target's interleaved kernel (gemv_interleaved-inl.h) when usable() says so.
//
// Why: with 8 tokens the vector kernel's 8-bit dot products (one per token, 16 rows and 4
// inputs) cost about as long as streaming the weights, and on the Intel Xeon host the two
// add up instead of overlapping (src/kernels/README.md). One tile dot product (TDPBSSD,
// signed by signed: no +128 offset, no broadcasts) takes a pair of blocks (64 inputs) of 16
// rows for up to 8 tokens.
//
// On by default where the CPU and OS allow it; TROUPE_AMX=0 turns it off. It was opt-in until
// 2026-12-07: on that host in earlier sessions the tile unit ran at a third to a half of its
// documented rate and the kernel was no faster than the vector one. On the same host type
// later, with TDPBSSD at its documented rate (5.1 ns), the scaling's accumulators kept in
// registers and each call's activations packed once per thread instead of per task: a resident
// 1536 x 576 matrix at 8 tokens, one thread, 28 us against 39 for the vector kernel; 2 threads
// 18.4-19.0 against 22.3-24.3, streamed 25.5-28.1 against 28.2-29.8; `bench model`'s 8
// sequences, five alternating pairs, 1,005-1,064 tok/s against 932-1,038 (medians 1,049 / 963).
// src/kernels/README.md has the figures.
//
// On by default means that a process on an AMX CPU asks Linux for the tile state (arch_prctl
// ARCH_REQ_XCOMP_PERM) at its first batched product. Once granted, Linux refuses alternate
// signal stacks smaller than the signal frame, which then carries the 8 KiB of tile data: an
// application that installs small sigaltstack()s should set TROUPE_AMX=0.
//
// The operands: an Interleaved16 group keeps its blocks' values back to back (scales first,
// kernels/weight_layout.h), so blocks 2p and 2p + 1 are one 16 x 64-byte B tile (row j: the
// 16 rows' 4 inputs of group j). The A tile has two rows a token, its block 2p values then 32
// zeros, and 32 zeros then its block 2p + 1 values, packed per call from the activation rows
// (Q8_0, matmul_act.h) into scratch; row 2t of the result holds block 2p's exact int32 sums,
// row 2t + 1 block 2p + 1's. They are stored to a small ring and scaled in float lanes in the
// canonical order of the 32-value block types, acc = fma(float(isum_k), dw_k * dx_k, acc) over
// k in order: the outputs have the bits of every other Q8_0 kernel's (tests/kernels).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/matmul_act.h"

namespace troupe::kernels::amx {

// Whether this process runs the AMX kernel: the CPU has AMX-TILE and AMX-INT8, the OS keeps
// tile state (XCR0 bits 17 and 18), Linux granted it to the process (arch_prctl
// ARCH_REQ_XCOMP_PERM, asked once, on the first call), and neither the environment variable
// TROUPE_AMX is "0" nor a ScopedAmx(false) is alive (a ScopedAmx(true) turns it on whatever the
// environment says). Thread-safe.
bool usable();

// Whether the CPU and OS allow it, whatever TROUPE_AMX and ScopedAmx say.
bool supported();

// While alive, usable() answers `enabled && supported()` (the environment is not consulted).
// Not thread-safe: for tests and benchmarks, one at a time.
class ScopedAmx {
  public:
    explicit ScopedAmx(bool enabled);
    ~ScopedAmx();
    ScopedAmx(const ScopedAmx&) = delete;
    ScopedAmx& operator=(const ScopedAmx&) = delete;

  private:
    int saved_;
};

// Tokens per call of gemv_q8_0_groups: two rows of a 16-row tile each.
constexpr int kMaxTokens = 8;

// Bytes of one pass's packed activations (pack's output, gemv_q8_0_groups' A operands) for
// weights of n_blocks blocks a row: a multiple of 64. A caller keeps a region per pass of
// kMaxTokens tokens (gemv_interleaved-inl.h).
size_t scratch_bytes(int64_t n_blocks);

// The tiles' A operands of T tokens, 1 <= T <= kMaxTokens, whose converted rows (l.type Q8_0)
// are at act + t * l.row_bytes, into scratch (scratch_bytes(l.n_blocks)): once per call of a
// matrix product, for all of its tasks on a thread (packing per task cost a 576 x 1536
// product, 3 row groups a task, about as much as its tile products).
void pack(const uint8_t* act, const ops::ActLayout& l, int T, uint8_t* scratch);

// Row groups [g0, g1) of an Interleaved16 Q8_0 weight (group g at w_data + g * group_bytes,
// l.n_blocks blocks a row) times the T tokens packed in `packed` (pack; their converted rows at
// act + t * l.row_bytes give the scales): y[t * ldy + 16 (g - g0) + r] for row r of group g.
// Prefetches the weight lines from pf on, up to kStreamPrefetchBytes past the blocks read and
// never at or past pf_end, into L2 (prefetch_stream), and leaves pf where it stopped, as the
// vector kernel does. Call only when usable().
void gemv_q8_0_groups(const uint8_t* w_data, size_t group_bytes, int64_t g0, int64_t g1,
                      const uint8_t* act, const ops::ActLayout& l, int T, float* y, int64_t ldy,
                      const uint8_t* packed, const uint8_t*& pf, const uint8_t* pf_end);

}  // namespace troupe::kernels::amx
