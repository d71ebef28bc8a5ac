#include "engine/scheduler.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "util/error.h"

namespace troupe {

// What one schedule() call has decided so far.
struct Scheduler::StepState {
    ScheduledBatch batch;
    int max_seqs = 0;
    int budget = 0;  // tokens still available in this step
    bool preempted_for_memory = false;
    double now_ms = 0;
};

namespace {

// a is more important than b (goes first, is pre-empted last).
bool more_important(const Sequence* a, const Sequence* b) {
    if (a->priority() != b->priority()) return a->priority() > b->priority();
    return a->start < b->start;
}

int bound(int config_value, int power_value) {
    return power_value > 0 ? std::min(config_value, power_value) : config_value;
}

}  // namespace

bool Scheduler::WaitingOrder::operator()(const Sequence* a, const Sequence* b) const {
    if (a->priority() != b->priority()) return a->priority() > b->priority();
    return a->arrival < b->arrival;
}

Scheduler::Scheduler(const SchedulerConfig& config, const kv::BlockManagerConfig& kv_config,
                     kv::KvStorage* storage)
    : config_(config), blocks_(kv_config, storage) {
    TROUPE_CHECK(config.max_num_seqs >= 1 && config.max_num_batched_tokens >= 1 &&
                 config.max_model_len >= 1);
}

int Scheduler::step_max_num_seqs() const {
    return std::max(1, bound(config_.max_num_seqs, config_.power.max_num_seqs));
}

int Scheduler::step_max_num_tokens() const {
    return std::max(1, bound(config_.max_num_batched_tokens, config_.power.max_num_batched_tokens));
}

RequestId Scheduler::submit(Request request, double now_ms) {
    const int n_prompt = int(request.prompt.size());
    if (n_prompt == 0) throw Error("request has an empty prompt");
    if (request.max_tokens < 1)
        throw Error("request max_tokens must be at least 1, got " +
                    std::to_string(request.max_tokens));
    const int64_t n_total = int64_t(n_prompt) + request.max_tokens;
    if (n_total > config_.max_model_len)
        throw Error("request needs " + std::to_string(n_prompt) + " prompt + " +
                    std::to_string(request.max_tokens) +
                    " generated tokens, beyond the context length of " +
                    std::to_string(config_.max_model_len));
    // The last generated token is never computed, so it needs no KV.
    const int n_blocks = blocks_.n_blocks_for(int(n_total - 1));
    if (n_blocks > blocks_.n_blocks())
        throw Error("request needs " + std::to_string(n_blocks) + " KV blocks (" +
                    std::to_string(n_total - 1) + " tokens of " +
                    std::to_string(blocks_.block_size()) + ") but the whole KV cache has " +
                    std::to_string(blocks_.n_blocks()) +
                    "; raise the KV budget or lower max_tokens");

    auto seq = std::make_unique<Sequence>();
    seq->id = next_id_++;
    seq->tokens = std::move(request.prompt);
    request.prompt.clear();
    seq->request = std::move(request);
    seq->n_prompt_tokens = n_prompt;
    seq->arrival = ++n_arrivals_;
    seq->submit_ms = now_ms;
    seq->stats.prompt_tokens = n_prompt;
    Sequence* s = seq.get();
    live_.emplace(s->id, std::move(seq));
    waiting_.insert(s);
    return s->id;
}

ScheduledBatch Scheduler::schedule(double now_ms) {
    StepState step;
    step.max_seqs = step_max_num_seqs();
    step.budget = step_max_num_tokens();
    step.now_ms = now_ms;
    ++n_schedule_calls_;

    // 1. Decodes, most important first (running_ is in importance order; pre-emption only
    //    removes less important sequences, so a snapshot is safe to walk).
    const std::vector<Sequence*> snapshot = running_;
    for (Sequence* seq : snapshot)
        if (seq->status == SeqStatus::Running && seq->n_uncomputed() == 1)
            schedule_running(seq, step);

    // 2. Prompt chunks of running sequences and admissions, merged by priority.
    std::vector<Sequence*> prefills;
    for (Sequence* seq : running_)
        if (seq->n_uncomputed() > 1) prefills.push_back(seq);
    size_t next_prefill = 0;
    auto next_waiting = waiting_.begin();
    bool admitting = !step.preempted_for_memory;
    for (;;) {
        while (next_prefill < prefills.size() &&
               prefills[next_prefill]->status != SeqStatus::Running)
            ++next_prefill;  // pre-empted earlier in this step
        while (admitting && next_waiting != waiting_.end() &&
               (*next_waiting)->preempted_at_step == n_schedule_calls_)
            ++next_waiting;  // pre-empted in this step: not again before the next
        Sequence* run = next_prefill < prefills.size() ? prefills[next_prefill] : nullptr;
        Sequence* wait = admitting && next_waiting != waiting_.end() ? *next_waiting : nullptr;
        if (!run && !wait) break;
        if (run && (!wait || run->priority() >= wait->priority())) {
            schedule_running(run, step);
            ++next_prefill;
            if (step.preempted_for_memory) admitting = false;
            continue;
        }
        ++next_waiting;  // before try_admit, which may take `wait` out of waiting_
        if (try_admit(wait, step) == Admit::Blocked) admitting = false;
    }

    for (const ScheduledSeq& s : step.batch.seqs) step.batch.n_tokens += s.n_tokens;
    if (!step.batch.empty()) ++n_steps_;
    return std::move(step.batch);
}

void Scheduler::schedule_running(Sequence* seq, StepState& step) {
    if (int(step.batch.seqs.size()) >= step.max_seqs) return;
    const int n = std::min(seq->n_uncomputed(), step.budget);
    if (n <= 0) return;
    const int first = seq->n_computed_tokens;
    while (!blocks_.can_allocate_slots(seq->kv, first, first + n)) {
        Sequence* victim = running_.back();  // least important, possibly seq itself
        preempt(victim, step);
        step.preempted_for_memory = true;
        if (victim == seq) return;
    }
    const bool ok = blocks_.allocate_slots(seq->kv, seq->tokens, first, first + n);
    TROUPE_CHECK(ok);
    step.batch.seqs.push_back({seq, seq->id, first, n, first + n == int(seq->tokens.size())});
    step.budget -= n;
}

Scheduler::Admit Scheduler::try_admit(Sequence* seq, StepState& step) {
    if (step.budget <= 0) return Admit::Blocked;
    const kv::PrefixMatch match = blocks_.match_prefix(seq->tokens, seq->request.cache_namespace);
    if (match.next_in_flight) return Admit::Deferred;
    const int first = first_to_compute(*seq, match);
    const int n = std::min(int(seq->tokens.size()) - first, step.budget);
    const bool has_room =
        int(running_.size()) < step.max_seqs && blocks_.can_admit(match, first + n);
    if (!has_room && !preempt_for(seq, match, step)) return Admit::Blocked;
    start_running(seq, match, std::min(int(seq->tokens.size()) - first, step.budget), step);
    return Admit::Started;
}

int Scheduler::n_cached(const kv::PrefixMatch& match) const {
    return match.n_tokens(blocks_.block_size());
}

// The first token a sequence admitted with `match` computes: the one after the hits, or its
// last token when the hits hold them all (its logits are needed; its K/V are in the last hit).
int Scheduler::first_to_compute(const Sequence& seq, const kv::PrefixMatch& match) const {
    return std::min(n_cached(match), int(seq.tokens.size()) - 1);
}

// Pre-empts the fewest running sequences of lower priority than `seq`, least important first,
// that make room for its first chunk; pre-empts nobody when even all of them would not.
bool Scheduler::preempt_for(Sequence* seq, const kv::PrefixMatch& match, StepState& step) {
    const int first = first_to_compute(*seq, match);
    const int n_remaining = int(seq->tokens.size()) - first;
    const kv::BlockPool& pool = blocks_.pool();
    std::unordered_map<int32_t, int> dropped;  // block -> references the victims hold
    int n_freed = 0, budget = step.budget, n_victims = 0;
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
        const Sequence* victim = *it;
        if (victim->priority() >= seq->priority()) break;
        ++n_victims;
        for (int32_t b : victim->kv.blocks)
            if (++dropped[b] == pool.ref_count(b)) ++n_freed;
        for (const ScheduledSeq& s : step.batch.seqs)
            if (s.seq == victim) budget += s.n_tokens;
        const int n = std::min(n_remaining, budget);
        int n_needed = std::max(0, blocks_.n_blocks_for(first + n) - int(match.blocks.size()));
        for (int32_t b : match.blocks)
            if (pool.ref_count(b) == (dropped.count(b) ? dropped[b] : 0)) ++n_needed;
        const bool fits = n >= 1 && int(running_.size()) - n_victims < step.max_seqs &&
                          n_needed <= pool.n_free() + n_freed;
        if (!fits) continue;
        for (int i = 0; i < n_victims; ++i) preempt(running_.back(), step);
        return true;
    }
    return false;
}

void Scheduler::preempt(Sequence* seq, StepState& step) {
    auto& entries = step.batch.seqs;
    auto entry = std::find_if(entries.begin(), entries.end(),
                              [&](const ScheduledSeq& s) { return s.seq == seq; });
    if (entry != entries.end()) {
        step.budget += entry->n_tokens;
        entries.erase(entry);
    }
    blocks_.free(seq->kv);
    seq->n_computed_tokens = 0;
    seq->status = SeqStatus::Waiting;
    seq->preempted_at_step = n_schedule_calls_;
    ++seq->stats.preemptions;
    ++totals_.preemptions;
    running_.erase(std::find(running_.begin(), running_.end(), seq));
    waiting_.insert(seq);
    step.batch.preempted.push_back(seq->id);
}

void Scheduler::start_running(Sequence* seq, const kv::PrefixMatch& match, int n_tokens,
                              StepState& step) {
    const int n_hit = n_cached(match), first = first_to_compute(*seq, match);
    const bool ok = blocks_.admit(seq->kv, seq->tokens, seq->request.cache_namespace, match,
                                  first + n_tokens);
    TROUPE_CHECK(ok);
    waiting_.erase(seq);
    seq->status = SeqStatus::Running;
    seq->start = ++n_starts_;
    seq->n_computed_tokens = first;
    running_.insert(std::upper_bound(running_.begin(), running_.end(), seq, more_important), seq);
    if (seq->first_scheduled_ms < 0) {  // first admission: the request's own figures
        seq->first_scheduled_ms = step.now_ms;
        seq->stats.queue_ms = step.now_ms - seq->submit_ms;
        seq->stats.cached_tokens = std::min(n_hit, seq->n_prompt_tokens);
        totals_.prompt_tokens += uint64_t(seq->n_prompt_tokens);
        totals_.cached_tokens += uint64_t(seq->stats.cached_tokens);
    }
    step.batch.seqs.push_back({seq, seq->id, first, n_tokens,
                               first + n_tokens == int(seq->tokens.size()), n_hit - first});
    step.budget -= n_tokens;
}

void Scheduler::postprocess(const ScheduledBatch& batch, std::span<const int32_t> sampled,
                            double now_ms) {
    TROUPE_CHECK(sampled.size() == batch.seqs.size());
    for (size_t i = 0; i < batch.seqs.size(); ++i) {
        const ScheduledSeq& entry = batch.seqs[i];
        auto it = live_.find(entry.id);
        if (it == live_.end()) continue;  // finished (cancelled) since schedule()
        Sequence* seq = it->second.get();
        TROUPE_CHECK(seq->status == SeqStatus::Running &&
                     seq->n_computed_tokens == entry.first_pos);
        seq->n_computed_tokens += entry.n_tokens;
        blocks_.commit(seq->kv, seq->tokens, seq->n_computed_tokens);
        if (!entry.needs_sample) continue;
        TROUPE_CHECK(seq->n_computed_tokens == int(seq->tokens.size()));
        const int32_t token = sampled[i];
        if (seq->first_token_ms < 0) {
            seq->first_token_ms = now_ms;
            seq->stats.ttft_ms = now_ms - seq->submit_ms;
        }
        if (!seq->request.ignore_eos && is_eos(token)) {
            finish_sequence(seq, FinishReason::Eos, now_ms);
            continue;
        }
        seq->tokens.push_back(token);
        ++seq->stats.generated_tokens;
        ++totals_.generated_tokens;
        if (seq->n_generated() >= seq->request.max_tokens ||
            int(seq->tokens.size()) >= config_.max_model_len)
            finish_sequence(seq, FinishReason::Length, now_ms);
    }
}

bool Scheduler::is_eos(int32_t token) const {
    return std::find(config_.eos_tokens.begin(), config_.eos_tokens.end(), token) !=
           config_.eos_tokens.end();
}

bool Scheduler::finish(RequestId id, FinishReason reason, double now_ms, std::string error) {
    auto it = live_.find(id);
    if (it == live_.end()) return false;
    it->second->error = std::move(error);
    finish_sequence(it->second.get(), reason, now_ms);
    return true;
}

void Scheduler::finish_sequence(Sequence* seq, FinishReason reason, double now_ms) {
    if (seq->status == SeqStatus::Running) {
        blocks_.free(seq->kv);
        running_.erase(std::find(running_.begin(), running_.end(), seq));
    } else {
        waiting_.erase(seq);
    }
    seq->status = SeqStatus::Finished;
    seq->finish = reason;
    seq->n_computed_tokens = 0;
    seq->finish_ms = now_ms;
    seq->stats.latency_ms = now_ms - seq->submit_ms;
    if (seq->first_scheduled_ms < 0) seq->stats.queue_ms = seq->stats.latency_ms;
    ++totals_.requests_finished;
    auto node = live_.extract(seq->id);
    finished_.push_back(std::move(node.mapped()));
}

std::vector<std::unique_ptr<Sequence>> Scheduler::take_finished() {
    return std::exchange(finished_, {});
}

const Sequence* Scheduler::find(RequestId id) const {
    auto it = live_.find(id);
    return it == live_.end() ? nullptr : it->second.get();
}

EngineStats Scheduler::stats() const {
    EngineStats s = totals_;
    s.steps = n_steps_;
    const kv::KvStats kv = blocks_.stats();
    s.kv_bytes_total = uint64_t(kv.n_blocks) * kv.bytes_per_block;
    s.kv_bytes_used = kv.used_bytes();
    s.peak_kv_bytes = kv.peak_bytes();
    s.blocks_total = kv.n_blocks;
    s.blocks_used = kv.n_used;
    s.blocks_cached = kv.n_cached;
    s.blocks_free = kv.n_free;
    s.num_running = n_running();
    s.num_waiting = n_waiting();
    return s;
}

std::string Scheduler::check_invariants() const {
    size_t n_waiting = 0, n_running = 0;
    std::vector<const kv::SeqKv*> tables;
    for (const auto& [id, seq] : live_) {
        auto who = [id = id] { return "request " + std::to_string(id) + ": "; };
        if (seq->status == SeqStatus::Waiting) {
            ++n_waiting;
            if (!waiting_.count(seq.get())) return who() + "waiting but not queued";
            if (!seq->kv.empty() || seq->n_computed_tokens != 0)
                return who() + "waiting but holds KV";
        } else if (seq->status == SeqStatus::Running) {
            ++n_running;
            if (std::find(running_.begin(), running_.end(), seq.get()) == running_.end())
                return who() + "running but not in the running list";
            const int n_blocks = int(seq->kv.blocks.size());
            if (n_blocks < blocks_.n_blocks_for(seq->n_computed_tokens) ||
                n_blocks > blocks_.n_blocks_for(int(seq->tokens.size())))
                return who() + "block table does not fit its tokens";
            if (seq->n_computed_tokens >= int(seq->tokens.size()))
                return who() + "running with nothing left to compute";
        } else {
            return who() + "finished but still live";
        }
        if (seq->n_generated() > seq->request.max_tokens) return who() + "beyond max_tokens";
        tables.push_back(&seq->kv);
    }
    if (n_waiting != waiting_.size() || n_running != running_.size())
        return "queues hold sequences that are not live";
    if (!std::is_sorted(running_.begin(), running_.end(), more_important))
        return "running list is not in importance order";
    if (int(running_.size()) > config_.max_num_seqs) return "more running than max_num_seqs";
    if (std::string e = blocks_.check_invariants(tables); !e.empty()) return "kv: " + e;
    return {};
}

}  // namespace troupe
