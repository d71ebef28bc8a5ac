// Memory a task reads next, prefetched a couple of cache lines at a time from inside the
// current task's inner loops, so that the reads overlap its arithmetic.
//
// Why not one burst at the task's start: hundreds of prefetches fill the core's miss
// buffers, and the core then stalls until most of them have arrived, so the transfer and the
// arithmetic take turns (measured on decode attention over a cache evicted to DRAM: the time
// was the in-cache time plus the transfer time; spreading the same prefetches over the loops
// cut decode attention by a fifth to a quarter). Used by the attention kernel to fetch the next
// task's K and V blocks (attention.cpp); not SIMD, shared by every target. Also the distance
// the streaming kernels and the read probe prefetch ahead.
#pragma once

#include <cstddef>
#include <cstdint>

namespace troupe {

// How far ahead the kernels that stream weights from DRAM (gemv-inl.h, gemm-inl.h) and the
// read-bandwidth probe prefetch: with prefetches 16 KiB ahead a row-at-a-time kernel reads as
// fast as the memory allows (measured on Zen 5). -DTROUPE_PREFETCH_BYTES=N overrides it.
#ifndef TROUPE_PREFETCH_BYTES
#define TROUPE_PREFETCH_BYTES 16384
#endif
constexpr size_t kStreamPrefetchBytes = TROUPE_PREFETCH_BYTES;

// Requests the line at p of a stream of weights (read once per pass, from DRAM or the last-level
// cache) into L2 (x86 prefetcht1, Arm PLDL2KEEP): the interleaved kernels, Region::prefetch_next
// and the read probe. Why L2 and not the non-temporal hint (prefetchnta, PLDL1STRM), which these
// used for a while: on an Intel Xeon host (Sapphire Rapids class, 2 MiB L2, 48 KiB L1) they capped
// reads at ~5.5 GB/s a thread (such prefetches fill L1 only, so L1's few miss buffers bound the
// lines in flight: the likely cause, not measured). There, the 512 MiB read probe 11.2 -> 28.7
// GB/s (one pair); three alternating rounds of `bench model`: single decode of the 135M model
// 65-70 -> 251-274 tok/s, the 8-sequence aggregate unchanged (840-859 / 836-893). On Zen 4 the
// hint into L2 in batched passes had taken the 8-sequence aggregate 656 -> 818 tok/s (medians of 6
// pairs: non-temporal lines came too late there). On Zen 5 the non-temporal hint had been ahead:
// 8-sequence attention 6-14% less time (the weights pushed less of the KV cache out of L3), single
// decode of the tiny model (weights in L3) +20-25%. One hint for every CPU: Zen 5 loses a fifth
// where it mattered, Intel had lost three quarters.
inline void prefetch_stream(const void* p) {
    __builtin_prefetch(p, 0, 2);
}

// Runs of contiguous bytes, all of the same length, in the order they will be read.
struct PrefetchRuns {
    static constexpr int kMaxRuns = 32;
    const uint8_t* run[kMaxRuns];
    int n = 0;
    size_t bytes = 0;  // per run
};

// Walks a PrefetchRuns two lines per tick(). Held in locals of the kernel (registers), not
// shared between threads.
class LinePrefetcher {
  public:
    explicit LinePrefetcher(const PrefetchRuns* runs) {
        if (runs == nullptr || runs->n == 0 || runs->bytes == 0) return;
        bytes_ = runs->bytes;
        p_ = runs->run[0];
        end_ = p_ + bytes_;
        next_ = runs->run + 1;
        last_ = runs->run + runs->n;
    }

    // Prefetches the next two lines into L2 (the addresses stay within the runs).
    inline void tick() {
#ifdef TROUPE_NO_TICK
        return;
#endif
        if (p_ == end_) return;
        const size_t left = size_t(end_ - p_);
        __builtin_prefetch(p_, 0, 2);
        if (left > 64) __builtin_prefetch(p_ + 64, 0, 2);
        p_ += left > 128 ? 128 : left;
        if (p_ == end_ && next_ < last_) {
            p_ = *next_++;
            end_ = p_ + bytes_;
        }
    }

    // Every line has been requested.
    bool done() const { return p_ == end_; }
    // The next line requested.
    const uint8_t* next_line() const { return p_; }

  private:
    const uint8_t* p_ = nullptr;
    const uint8_t* end_ = nullptr;
    const uint8_t* const* next_ = nullptr;
    const uint8_t* const* last_ = nullptr;
    size_t bytes_ = 0;
};

}  // namespace troupe
