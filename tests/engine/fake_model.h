// A model-free stand-in for the forward pass, to drive the Scheduler in tests.
//
// It "computes" KV by writing into a shadow of every block slot which (namespace, position,
// token) it holds, and "attends" by reading every earlier position of the sequence back through
// its block table. So a wrong block table, a prefix hit on the wrong block or namespace, a
// write into a shared block or a block freed under a running sequence shows up at once as a
// mismatch, exactly where a real model would silently produce wrong text.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/scheduler.h"

namespace troupe::test {

class FakeModel {
  public:
    FakeModel(int n_blocks, int block_size)
        : block_size_(block_size), slots_(size_t(n_blocks) * size_t(block_size)) {}

    // Checks the reads of every scheduled sequence, then performs its writes. Returns "" or
    // the first fault.
    std::string forward(const ScheduledBatch& batch, const kv::BlockManager& bm) {
        int n_tokens = 0;
        for (const ScheduledSeq& s : batch.seqs) {
            const Sequence& seq = *s.seq;
            const std::string who = "request " + std::to_string(s.id) + ": ";
            if (s.n_tokens < 1 || s.first_pos != seq.n_computed_tokens ||
                s.first_pos + s.n_tokens > int(seq.tokens.size()))
                return who + "bad token range";
            if (s.needs_sample != (s.first_pos + s.n_tokens == int(seq.tokens.size())))
                return who + "needs_sample wrong";
            if (int(s.block_table().size()) * block_size_ < s.first_pos + s.n_tokens)
                return who + "block table too short";
            if (s.n_kv_present < 0 || s.n_kv_present > s.n_tokens)
                return who + "bad n_kv_present";
            // Tokens with their K/V present (a whole-prompt hit's last token) are read too.
            for (int p = 0; p < s.first_pos + s.n_kv_present; ++p) {
                const Slot& slot = slot_of(s, p);
                if (slot.pos != p || slot.token != seq.tokens[size_t(p)] ||
                    slot.ns != seq.request.cache_namespace)
                    return who + "reads wrong KV at position " + std::to_string(p);
            }
            n_tokens += s.n_tokens;
        }
        if (n_tokens != batch.n_tokens) return "batch token count is wrong";
        for (const ScheduledSeq& s : batch.seqs) {
            for (int p = s.first_pos + s.n_kv_present; p < s.first_pos + s.n_tokens; ++p) {
                const int block = s.block_table()[size_t(p / block_size_)];
                if (bm.pool().ref_count(block) != 1)
                    return "request " + std::to_string(s.id) + " writes shared block " +
                           std::to_string(block);
                slot_of(s, p) = {p, s.seq->tokens[size_t(p)], s.seq->request.cache_namespace};
            }
        }
        return {};
    }

  private:
    struct Slot {
        int pos = -1;
        int32_t token = -1;
        std::string ns;
    };
    Slot& slot_of(const ScheduledSeq& s, int p) {
        const int block = s.block_table()[size_t(p / block_size_)];
        return slots_[size_t(block) * size_t(block_size_) + size_t(p % block_size_)];
    }

    int block_size_;
    std::vector<Slot> slots_;
};

// Scheduler + fake model + a clock that advances one ms per step.
struct Harness {
    using Sampler = std::function<int32_t(const Sequence&)>;

    Harness(SchedulerConfig config, kv::BlockManagerConfig kv_config)
        : scheduler(config, kv_config), model(kv_config.n_blocks, kv_config.block_size) {}

    // The default "model" output: a token that depends on the position only, so a sequence
    // recomputed after pre-emption generates the same text.
    static int32_t by_position(const Sequence& seq) { return 1000 + int32_t(seq.tokens.size()); }

    RequestId submit(std::vector<int32_t> prompt, int max_tokens, int priority = 0,
                     std::string ns = {}) {
        Request r;
        r.prompt = std::move(prompt);
        r.max_tokens = max_tokens;
        r.priority = priority;
        r.cache_namespace = std::move(ns);
        return scheduler.submit(std::move(r), now);
    }

    // One step: schedule, forward, sample, postprocess, collect finished. Returns the batch.
    ScheduledBatch step(const Sampler& sample = by_position) {
        now += 1.0;
        ScheduledBatch batch = scheduler.schedule(now);
        fault = model.forward(batch, scheduler.block_manager());
        std::vector<int32_t> sampled;
        for (const ScheduledSeq& s : batch.seqs)
            sampled.push_back(s.needs_sample ? sample(*s.seq) : -1);
        now += 0.5;
        scheduler.postprocess(batch, sampled, now);
        if (fault.empty()) fault = scheduler.check_invariants();
        for (auto& seq : scheduler.take_finished()) finished.push_back(std::move(seq));
        return batch;
    }

    const Sequence* done(RequestId id) const {
        for (const auto& seq : finished)
            if (seq->id == id) return seq.get();
        return nullptr;
    }

    Scheduler scheduler;
    FakeModel model;
    double now = 0;
    std::string fault;  // first fault of the latest step ("" when fine)
    std::vector<std::unique_ptr<Sequence>> finished;
};

inline std::vector<int32_t> range(int first, int n) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(first + i);
    return t;
}

}  // namespace troupe::test
