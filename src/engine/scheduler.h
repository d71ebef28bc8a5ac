// Continuous-batching scheduler: which sequences compute which tokens in the next step, under
// a token budget, a sequence limit and the KV memory budget, by priority.
//
// Policy (each schedule() call is one step):
//   1. Decodes first: every running sequence with one token left to compute gets it (cheap,
//      and it keeps time between tokens low), most important first.
//   2. Then prompt chunks and admissions, merged by priority: running sequences still
//      prefilling (chunks of at most the remaining budget: chunked prefill) and waiting
//      requests, higher priority first; at equal priority running work goes before new work,
//      and waiting requests go by arrival. Admission reuses cached prefix blocks (their tokens
//      are not computed again) and is strictly in order: when the first waiting request cannot
//      start, nobody behind it does - except that a request whose next prefix block another
//      sequence is computing in this very step waits one step (it will hit it instead of
//      computing it twice) and lets others pass.
//   3. Memory pressure: when a running sequence needs a block and none is free, the least
//      important running sequence is pre-empted: lowest priority, then most recently started.
//      Its blocks are freed (full ones stay in the prefix cache, so recomputing it later is
//      mostly cache hits) and it goes back to waiting with its generated tokens; it is
//      recomputed when admitted again. No new request is admitted in a step that pre-empted.
//   4. Priority: a waiting request that cannot start for lack of blocks or of a sequence slot
//      pre-empts running sequences of strictly lower priority (least important first), but
//      only when pre-empting them actually makes room.
//   Importance order, used everywhere: priority descending, then start (running) or arrival
//   (waiting) ascending.
// A request whose prompt + max_tokens needs more blocks than the whole pool is rejected by
// submit(); every other request eventually runs, because the most important running sequence
// can always pre-empt the others.
//
// Engine contract, one step (see ScheduledBatch):
//     ScheduledBatch batch = sched.schedule(now_ms());
//     for (const ScheduledSeq& s : batch.seqs) {
//         // compute tokens s.tokens() at positions s.first_pos .. s.first_pos + s.n_tokens - 1,
//         // writing their K/V through s.block_table() (except the first s.n_kv_present, whose
//         // K/V are there already); if s.needs_sample, sample a token from the logits of its
//         // last row into sampled[i] (ignored otherwise)
//     }
//     sched.postprocess(batch, sampled, now_ms());
//     for (auto& seq : sched.take_finished()) ...report seq->id, seq->tokens, seq->stats...
// Copies for copy-on-write happen inside the scheduler through the KvStorage it was given.
// Cancelling between schedule() and postprocess() is safe: the forward pass may still write
// the cancelled sequence's slots, which belong to no one and hold nothing cached.
// The K/V of every scheduled token must be written before attention reads it: within a
// batch, no sequence reads another's blocks written in the same step (prefix hits are on
// blocks computed in earlier steps only).
//
// The clock is the caller's: every call that records time takes now_ms, so tests are exact.
// Thread-safety: none; one owner thread calls every method.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/backend.h"
#include "engine/power_profile.h"
#include "engine/request.h"
#include "engine/sequence.h"
#include "kv/block_manager.h"

namespace troupe {

struct SchedulerConfig {
    int max_num_seqs = 16;             // running sequences (and batch entries) at most
    int max_num_batched_tokens = 512;  // tokens computed per step: decodes + prompt chunks
    int max_model_len = 4096;          // context length: prompt + generated tokens
    std::vector<int32_t> eos_tokens;   // end-of-generation ids (unless Request::ignore_eos)
    PowerProfile power;                // further bounds on seqs and tokens per step
};

// One sequence's work in a step.
struct ScheduledSeq {
    Sequence* seq = nullptr;    // valid until postprocess() (which goes by id, so a sequence
    RequestId id = 0;           // cancelled and taken in between is simply skipped)
    int first_pos = 0;          // == seq->n_computed_tokens when scheduled
    int n_tokens = 0;           // >= 1: tokens [first_pos, first_pos + n_tokens) are computed
    bool needs_sample = false;  // the chunk ends at the last known token: sample the next one
    // Its first tokens whose K/V are in the cache already: a prompt found whole in the prefix
    // cache computes its last token again for the logits, reading that token's K/V from the
    // (shared) last block instead of storing them (0 or 1).
    int n_kv_present = 0;

    std::span<const int32_t> tokens() const {
        return {seq->tokens.data() + first_pos, size_t(n_tokens)};
    }
    // Physical block of every position [0, first_pos + n_tokens): position p is in
    // block_table()[p / block_size]. Valid until postprocess().
    std::span<const int32_t> block_table() const { return seq->kv.blocks; }
};

struct ScheduledBatch {
    std::vector<ScheduledSeq> seqs;
    int n_tokens = 0;                  // sum of seqs[i].n_tokens
    std::vector<RequestId> preempted;  // pre-empted in this step (for traces)
    bool empty() const { return seqs.empty(); }
};

class Scheduler {
  public:
    // storage: the KV bytes, for copy-on-write copies (may be null in tests without a model).
    Scheduler(const SchedulerConfig& config, const kv::BlockManagerConfig& kv_config,
              kv::KvStorage* storage = nullptr);
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    // Queues a request (its prompt must be tokenized: request.prompt). Throws troupe::Error,
    // naming the numbers, when it can never run: empty prompt, max_tokens < 1, prompt +
    // max_tokens beyond max_model_len, or more KV blocks than the whole pool.
    RequestId submit(Request request, double now_ms);

    // Plans the next step and reserves its KV slots. May return an empty batch (nothing to do).
    ScheduledBatch schedule(double now_ms);

    // Applies a computed step: sampled[i] is the token sampled for batch.seqs[i] when it
    // needs_sample (anything otherwise). Appends tokens, makes computed blocks findable by the
    // prefix cache, finishes sequences (end-of-generation, max_tokens, max_model_len) and frees
    // their blocks at once. Entries finished since schedule() (cancelled) are skipped.
    void postprocess(const ScheduledBatch& batch, std::span<const int32_t> sampled, double now_ms);

    // Finishes a waiting or running request now (a stop string matched, the client went away,
    // an error) and frees its blocks. Returns false for unknown or already finished ids.
    bool finish(RequestId id, FinishReason reason, double now_ms, std::string error = {});
    bool cancel(RequestId id, double now_ms) { return finish(id, FinishReason::Cancelled, now_ms); }

    // Finished sequences not yet taken, in the order they finished.
    std::vector<std::unique_ptr<Sequence>> take_finished();

    const Sequence* find(RequestId id) const;  // a waiting or running sequence, or null
    bool has_work() const { return !waiting_.empty() || !running_.empty() || !finished_.empty(); }
    int n_waiting() const { return int(waiting_.size()); }
    int n_running() const { return int(running_.size()); }

    // Changes the bounds from now on (e.g. the device started throttling). Running sequences
    // beyond a lower max_num_seqs keep their blocks and wait for their turn.
    void set_power_profile(const PowerProfile& power) { config_.power = power; }
    const PowerProfile& power_profile() const { return config_.power; }
    int step_max_num_seqs() const;  // config and power profile combined
    int step_max_num_tokens() const;

    // Drops the cached blocks of a dead namespace (see kv::BlockManager::invalidate_namespace).
    void invalidate_namespace(std::string_view ns) { blocks_.invalidate_namespace(ns); }

    const kv::BlockManager& block_manager() const { return blocks_; }
    // Scheduler and KV figures (peak_rss_bytes is the engine's to fill).
    EngineStats stats() const;

    // Empty when every internal invariant holds (queues and statuses agree, block tables
    // cover the computed tokens, reference counts match the block tables), else the first
    // fault found. Cheap enough to call every step in tests.
    std::string check_invariants() const;

  private:
    struct StepState;
    enum class Admit { Started, Deferred, Blocked };

    void schedule_running(Sequence* seq, StepState& step);
    Admit try_admit(Sequence* seq, StepState& step);
    bool preempt_for(Sequence* seq, const kv::PrefixMatch& match, StepState& step);
    int n_cached(const kv::PrefixMatch& match) const;  // tokens the hits hold
    int first_to_compute(const Sequence& seq, const kv::PrefixMatch& match) const;
    void preempt(Sequence* seq, StepState& step);
    void start_running(Sequence* seq, const kv::PrefixMatch& match, int n_tokens, StepState& step);
    void finish_sequence(Sequence* seq, FinishReason reason, double now_ms);
    bool is_eos(int32_t token) const;

    // Importance: priority descending, then start / arrival ascending.
    struct WaitingOrder {
        bool operator()(const Sequence* a, const Sequence* b) const;
    };

    SchedulerConfig config_;
    kv::BlockManager blocks_;
    std::unordered_map<RequestId, std::unique_ptr<Sequence>> live_;  // waiting or running
    std::set<Sequence*, WaitingOrder> waiting_;
    std::vector<Sequence*> running_;  // in importance order; back() is the first victim
    std::vector<std::unique_ptr<Sequence>> finished_;

    RequestId next_id_ = 1;
    uint64_t n_arrivals_ = 0;
    uint64_t n_starts_ = 0;
    uint64_t n_schedule_calls_ = 0;
    uint64_t n_steps_ = 0;  // schedule() calls that returned work
    EngineStats totals_;    // request and token counters
};

}  // namespace troupe
