// The seam between agent code and inference (the seed's `InferenceEngine` interface): the
// workflow runtime, the C API and the server talk to an InferenceBackend, so the model or the
// backend can change without touching agent code. Two implementations exist: the real
// continuous-batching Engine (engine.h) and scripted fakes in tests (slow / failing agents).
//
// Driving model: the owner calls step() in a loop. Each step does a bounded amount of work
// (one forward pass over one batch) and returns the requests that finished in it, so a caller
// can enforce deadlines between steps and never waits unboundedly.
//
// Thread-safety: not thread-safe; one owner thread calls every method.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/request.h"

namespace troupe {

struct EngineStats {
    uint64_t requests_finished = 0;
    uint64_t prompt_tokens = 0;  // over all finished and running requests
    uint64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
    uint64_t generated_tokens = 0;
    uint64_t preemptions = 0;
    uint64_t steps = 0;
    double hit_rate() const {  // cached / prompt tokens
        return prompt_tokens ? double(cached_tokens) / double(prompt_tokens) : 0.0;
    }
    uint64_t kv_bytes_total = 0;  // KV pool capacity
    uint64_t kv_bytes_used = 0;   // blocks referenced by running sequences
    uint64_t peak_kv_bytes = 0;
    uint64_t peak_rss_bytes = 0;
    int blocks_total = 0;
    int blocks_used = 0;    // ref count > 0
    int blocks_cached = 0;  // ref count 0, still findable by hash
    int blocks_free = 0;    // never used or evicted
    int num_running = 0;
    int num_waiting = 0;
    // Time in forward steps (filled by the engine): steps that only decode, and their tokens,
    // give the aggregate decode rate; steps with prompt tokens give the prefill side.
    double decode_step_ms = 0;
    uint64_t decode_step_tokens = 0;
    double prefill_step_ms = 0;
    uint64_t prefill_step_tokens = 0;  // all tokens of steps with prompt work
    double decode_tokens_per_s() const {
        return decode_step_ms > 0 ? double(decode_step_tokens) * 1000.0 / decode_step_ms : 0.0;
    }
};

class InferenceBackend {
  public:
    virtual ~InferenceBackend() = default;

    // Queues a request. Throws troupe::Error when it can never run (e.g. prompt + max_tokens
    // beyond the context length or the whole KV budget); never throws for "busy".
    // on_token (optional) is called from step() for every generated token.
    virtual RequestId submit(Request request, TokenCallback on_token = {}) = 0;

    // Cancels a queued or running request; it is reported finished (Cancelled) by the next
    // step(). Unknown or finished ids are ignored.
    virtual void cancel(RequestId id) = 0;

    // True while any request is queued, running or awaiting report.
    virtual bool has_work() const = 0;

    // One scheduling + forward step. Returns the requests that finished during it.
    virtual std::vector<RequestOutput> step() = 0;

    virtual EngineStats stats() const = 0;
};

}  // namespace troupe
