// Scheduler: admission order, chunked prefill, batching, pre-emption, cancellation, stats.
// Driven with a fake model (fake_model.h) that checks every KV read through the block tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "fake_model.h"
#include "util/error.h"

namespace troupe {
namespace {

using test::Harness;
using test::range;

SchedulerConfig sched_config(int max_seqs = 8, int max_tokens = 64, int max_len = 256) {
    SchedulerConfig c;
    c.max_num_seqs = max_seqs;
    c.max_num_batched_tokens = max_tokens;
    c.max_model_len = max_len;
    c.eos_tokens = {2};
    return c;
}

kv::BlockManagerConfig kv_config(int n_blocks, int block_size = 4) {
    kv::BlockManagerConfig c;
    c.n_blocks = n_blocks;
    c.block_size = block_size;
    c.bytes_per_block = 1024;
    return c;
}

// Runs until nothing is left (at most max_steps), failing on the first fault.
void run_to_end(Harness& h, int max_steps = 1000) {
    for (int i = 0; i < max_steps && h.scheduler.has_work(); ++i) {
        h.step();
        ASSERT_EQ(h.fault, "") << "step " << i;
    }
    ASSERT_FALSE(h.scheduler.has_work());
}

std::vector<int32_t> expected_output(const std::vector<int32_t>& prompt, int n) {
    std::vector<int32_t> t = prompt;
    for (int i = 0; i < n; ++i) t.push_back(1000 + int32_t(t.size()));
    return t;
}

bool contains(const ScheduledBatch& b, RequestId id) {
    return std::any_of(b.seqs.begin(), b.seqs.end(),
                       [&](const ScheduledSeq& s) { return s.id == id; });
}

const ScheduledSeq* entry(const ScheduledBatch& b, RequestId id) {
    for (const ScheduledSeq& s : b.seqs)
        if (s.id == id) return &s;
    return nullptr;
}

void expect_error(Harness& h, std::vector<int32_t> prompt, int max_tokens, const char* words) {
    try {
        h.submit(std::move(prompt), max_tokens);
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
}

TEST(Scheduler, SubmitRejectsWhatCanNeverRun) {
    Harness h(sched_config(8, 64, 20), kv_config(4));  // 16 KV slots
    expect_error(h, {}, 4, "empty prompt");
    expect_error(h, range(1, 3), 0, "max_tokens");
    expect_error(h, range(1, 15), 6, "context length of 20");
    expect_error(h, range(1, 10), 8, "needs 5 KV blocks");  // 17 tokens need KV
    EXPECT_NO_THROW(h.submit(range(1, 10), 7));             // 16: exactly the whole pool
    EXPECT_EQ(h.scheduler.n_waiting(), 1);
}

TEST(Scheduler, RequestThatFitsAloneIsNeverFailed) {
    Harness h(sched_config(), kv_config(4));
    const RequestId a = h.submit(range(1, 3), 10);   // needs all 4 blocks by its end
    const RequestId b = h.submit(range(50, 10), 7);  // needs all 4 blocks
    const RequestId c = h.submit(range(80, 5), 9);
    run_to_end(h);
    for (RequestId id : {a, b, c}) {
        const Sequence* s = h.done(id);
        ASSERT_NE(s, nullptr);
        EXPECT_EQ(s->finish, FinishReason::Length);
        EXPECT_EQ(s->stats.generated_tokens, s->request.max_tokens);
    }
    EXPECT_EQ(h.done(a)->tokens, expected_output(range(1, 3), 10));
    EXPECT_EQ(h.done(b)->tokens, expected_output(range(50, 10), 7));
    EXPECT_GT(h.scheduler.stats().preemptions, 0u);
    EXPECT_EQ(h.scheduler.block_manager().stats().n_used, 0);
}

TEST(Scheduler, AdmissionByPriorityThenArrival) {
    Harness h(sched_config(1), kv_config(16));
    const RequestId low = h.submit(range(1, 3), 1, 0);
    const RequestId high1 = h.submit(range(10, 3), 1, 5);
    const RequestId mid = h.submit(range(20, 3), 1, 1);
    const RequestId high2 = h.submit(range(30, 3), 1, 5);
    std::vector<RequestId> order;
    while (h.scheduler.has_work()) {
        const ScheduledBatch b = h.step();
        ASSERT_EQ(h.fault, "");
        ASSERT_EQ(b.seqs.size(), 1u);
        order.push_back(b.seqs[0].id);
    }
    EXPECT_EQ(order, (std::vector<RequestId>{high1, high2, mid, low}));
}

TEST(Scheduler, ChunkedPrefillUnderTokenBudget) {
    Harness h(sched_config(8, 8), kv_config(16));
    const RequestId a = h.submit(range(1, 20), 2);
    struct Chunk {
        int first, n;
        bool sample;
    };
    const std::vector<Chunk> expect = {{0, 8, false}, {8, 8, false}, {16, 4, true}, {20, 1, true}};
    for (const Chunk& c : expect) {
        const ScheduledBatch b = h.step();
        ASSERT_EQ(h.fault, "");
        ASSERT_EQ(b.seqs.size(), 1u);
        EXPECT_EQ(b.seqs[0].id, a);
        EXPECT_EQ(b.seqs[0].first_pos, c.first);
        EXPECT_EQ(b.seqs[0].n_tokens, c.n);
        EXPECT_EQ(b.seqs[0].needs_sample, c.sample);
        EXPECT_EQ(b.n_tokens, c.n);
    }
    EXPECT_FALSE(h.scheduler.has_work());
    EXPECT_EQ(h.done(a)->tokens, expected_output(range(1, 20), 2));
}

TEST(Scheduler, DecodesAndPrefillChunksShareAStep) {
    Harness h(sched_config(8, 8), kv_config(32));
    const RequestId a = h.submit(range(1, 4), 10);
    h.step();  // a's prompt
    const RequestId b = h.submit(range(100, 20), 3);
    const ScheduledBatch s2 = h.step();
    ASSERT_EQ(h.fault, "");
    ASSERT_EQ(s2.seqs.size(), 2u);
    EXPECT_EQ(s2.seqs[0].id, a);  // decodes first
    EXPECT_EQ(s2.seqs[0].n_tokens, 1);
    EXPECT_EQ(s2.seqs[1].id, b);
    EXPECT_EQ(s2.seqs[1].n_tokens, 7);  // the rest of the budget
    EXPECT_FALSE(s2.seqs[1].needs_sample);
    EXPECT_EQ(s2.n_tokens, 8);
    const ScheduledBatch s3 = h.step();
    EXPECT_EQ(entry(s3, a)->n_tokens, 1);
    EXPECT_EQ(entry(s3, b)->first_pos, 7);
    EXPECT_EQ(entry(s3, b)->n_tokens, 7);
    run_to_end(h);
}

TEST(Scheduler, MemoryPressurePreemptsMostRecentlyStarted) {
    Harness h(sched_config(), kv_config(5));
    const RequestId a = h.submit(range(1, 8), 8);   // 2 blocks, started first
    const RequestId b = h.submit(range(50, 7), 8);  // 2 blocks
    h.step();                                       // both prompts; 1 block free
    h.step();                                       // a takes the last block for position 8
    ASSERT_EQ(h.fault, "");
    const ScheduledBatch s3 = h.step();  // b needs a block for position 8: b is the victim
    ASSERT_EQ(h.fault, "");
    EXPECT_EQ(s3.preempted, (std::vector<RequestId>{b}));
    EXPECT_TRUE(contains(s3, a));
    EXPECT_FALSE(contains(s3, b));
    EXPECT_EQ(h.scheduler.find(b)->status, SeqStatus::Waiting);
    EXPECT_EQ(h.scheduler.find(b)->n_generated(), 2);  // kept, recomputed later
    run_to_end(h);
    EXPECT_EQ(h.done(a)->stats.preemptions, 0);
    EXPECT_EQ(h.done(b)->stats.preemptions, 1);
    EXPECT_EQ(h.done(b)->tokens, expected_output(range(50, 7), 8));
    EXPECT_EQ(h.scheduler.stats().preemptions, 1u);
}

TEST(Scheduler, MemoryPressurePreemptsLowestPriorityFirst) {
    Harness h(sched_config(), kv_config(5));
    const RequestId low = h.submit(range(1, 7), 8, 0);
    h.step();  // low starts first
    const RequestId high = h.submit(range(50, 8), 8, 1);
    h.step();  // high's prompt: 2 blocks; 1 free
    ASSERT_EQ(h.fault, "");
    const ScheduledBatch s3 = h.step();  // high takes the free block; low needs one too
    ASSERT_EQ(h.fault, "");
    EXPECT_EQ(s3.preempted, (std::vector<RequestId>{low}));
    run_to_end(h);
    EXPECT_EQ(h.done(high)->stats.preemptions, 0);
    EXPECT_EQ(h.done(low)->stats.preemptions, 1);
    EXPECT_EQ(h.done(low)->tokens, expected_output(range(1, 7), 8));
}

TEST(Scheduler, RecomputeReusesItsOwnCachedBlocks) {
    Harness h(sched_config(), kv_config(6));
    const RequestId a = h.submit(range(1, 8), 12);
    const RequestId b = h.submit(range(50, 12), 4);
    run_to_end(h);
    const Sequence* pa = h.done(a);
    const Sequence* pb = h.done(b);
    ASSERT_TRUE(pa && pb);
    EXPECT_EQ(pa->stats.preemptions + pb->stats.preemptions, 1);
    // Recomputation was served by the cache, not counted as reuse of the prompt.
    EXPECT_EQ(pa->stats.cached_tokens, 0);
    EXPECT_EQ(pb->stats.cached_tokens, 0);
}

TEST(Scheduler, HighPriorityArrivalPreemptsLowerPriority) {
    Harness h(sched_config(1), kv_config(16));
    const RequestId low = h.submit(range(1, 4), 6, 0);
    h.step();
    h.step();
    const RequestId same = h.submit(range(20, 4), 2, 0);  // equal priority: waits
    const ScheduledBatch s3 = h.step();
    EXPECT_TRUE(s3.preempted.empty());
    EXPECT_TRUE(contains(s3, low));
    const RequestId high = h.submit(range(40, 4), 2, 9);
    const ScheduledBatch s4 = h.step();
    ASSERT_EQ(h.fault, "");
    EXPECT_EQ(s4.preempted, (std::vector<RequestId>{low}));
    ASSERT_EQ(s4.seqs.size(), 1u);
    EXPECT_EQ(s4.seqs[0].id, high);
    run_to_end(h);
    EXPECT_EQ(h.done(low)->stats.preemptions, 1);
    EXPECT_EQ(h.done(low)->tokens, expected_output(range(1, 4), 6));
    EXPECT_EQ(h.done(same)->stats.preemptions, 0);
    // high finished before same started (priority), low resumed before same (arrival).
    EXPECT_LT(h.done(high)->finish_ms, h.done(same)->first_scheduled_ms);
    EXPECT_LT(h.done(low)->finish_ms, h.done(same)->first_scheduled_ms);
}

TEST(Scheduler, HighPriorityPreemptsOnlyWhenItHelps) {
    Harness h(sched_config(8, 64, 64), kv_config(10));
    const RequestId mid = h.submit(range(1, 22), 2, 5);   // 6 blocks
    const RequestId low = h.submit(range(50, 10), 9, 0);  // 3 blocks
    h.step();
    ASSERT_EQ(h.fault, "");
    EXPECT_EQ(h.scheduler.block_manager().n_free_blocks(), 1);
    // 5 blocks for its prompt: pre-empting low frees 3 (4 free), not enough, and mid has the
    // same priority. Nobody is pre-empted; high waits.
    const RequestId high = h.submit(range(100, 20), 1, 5);
    const ScheduledBatch s2 = h.step();
    ASSERT_EQ(h.fault, "");
    EXPECT_TRUE(s2.preempted.empty());
    EXPECT_TRUE(contains(s2, low));
    EXPECT_FALSE(contains(s2, high));
    // A smaller urgent request does pre-empt low: 3 blocks needed, 1 + 3 free.
    const RequestId small = h.submit(range(200, 12), 1, 7);
    const ScheduledBatch s3 = h.step();
    ASSERT_EQ(h.fault, "");
    EXPECT_EQ(s3.preempted, (std::vector<RequestId>{low}));
    EXPECT_TRUE(contains(s3, small));
    run_to_end(h);
    for (RequestId id : {mid, low, high, small})
        EXPECT_EQ(h.done(id)->finish, FinishReason::Length);
}

TEST(Scheduler, CancelInEveryState) {
    Harness h(sched_config(2, 8), kv_config(8));
    const RequestId waiting = h.submit(range(1, 4), 4, -1);
    const RequestId prefill = h.submit(range(10, 20), 4, 1);
    const RequestId decode = h.submit(range(40, 2), 20, 2);
    h.step();  // decode: its prompt; prefill: a 6-token chunk; waiting: no slot
    ASSERT_EQ(h.fault, "");
    EXPECT_EQ(h.scheduler.find(waiting)->status, SeqStatus::Waiting);
    EXPECT_EQ(h.scheduler.find(prefill)->status, SeqStatus::Running);
    EXPECT_LT(h.scheduler.find(prefill)->n_computed_tokens, 20);

    EXPECT_TRUE(h.scheduler.cancel(waiting, h.now));
    EXPECT_TRUE(h.scheduler.cancel(prefill, h.now));
    EXPECT_EQ(h.scheduler.check_invariants(), "");
    h.step();
    ASSERT_EQ(h.fault, "");
    EXPECT_EQ(h.done(waiting)->finish, FinishReason::Cancelled);
    EXPECT_EQ(h.done(waiting)->stats.queue_ms, h.done(waiting)->stats.latency_ms);
    EXPECT_EQ(h.done(prefill)->finish, FinishReason::Cancelled);
    EXPECT_EQ(h.scheduler.find(decode)->status, SeqStatus::Running);

    // Between schedule() and postprocess(): the step's result for it is dropped.
    const RequestId other = h.submit(range(60, 3), 3);
    h.now += 1;
    const ScheduledBatch b = h.scheduler.schedule(h.now);
    ASSERT_TRUE(contains(b, decode) && contains(b, other));
    EXPECT_TRUE(h.scheduler.cancel(decode, h.now));
    std::vector<int32_t> sampled(b.seqs.size(), 7);
    h.scheduler.postprocess(b, sampled, h.now);
    EXPECT_EQ(h.scheduler.check_invariants(), "");
    EXPECT_EQ(h.scheduler.find(other)->n_computed_tokens, 3);
    EXPECT_EQ(h.scheduler.find(other)->n_generated(), 1);

    // Finished or unknown: nothing happens.
    EXPECT_FALSE(h.scheduler.cancel(decode, h.now));
    EXPECT_FALSE(h.scheduler.cancel(12345, h.now));
    auto taken = h.scheduler.take_finished();
    ASSERT_EQ(taken.size(), 1u);
    EXPECT_EQ(taken[0]->id, decode);
    EXPECT_EQ(taken[0]->finish, FinishReason::Cancelled);
    EXPECT_EQ(h.scheduler.cancel(other, h.now), true);
    h.step();
    EXPECT_FALSE(h.scheduler.has_work());
    EXPECT_EQ(h.scheduler.block_manager().stats().n_used, 0);
}

TEST(Scheduler, CancelWhilePreempted) {
    Harness h(sched_config(1), kv_config(16));
    const RequestId low = h.submit(range(1, 4), 6, 0);
    h.step();
    const RequestId high = h.submit(range(40, 4), 3, 9);
    const ScheduledBatch b = h.step();
    ASSERT_EQ(b.preempted, (std::vector<RequestId>{low}));
    EXPECT_TRUE(h.scheduler.cancel(low, h.now));
    run_to_end(h);
    EXPECT_EQ(h.done(low)->finish, FinishReason::Cancelled);
    EXPECT_EQ(h.done(low)->stats.preemptions, 1);
    EXPECT_EQ(h.done(high)->finish, FinishReason::Length);
}

TEST(Scheduler, EndOfGeneration) {
    Harness h(sched_config(), kv_config(16));
    const RequestId a = h.submit(range(1, 4), 10);
    Request r;
    r.prompt = range(1, 4);
    r.max_tokens = 5;
    r.ignore_eos = true;
    const RequestId b = h.scheduler.submit(r, h.now);
    auto eos_third = [](const Sequence& s) { return s.n_generated() == 2 ? 2 : 1000; };
    while (h.scheduler.has_work()) {
        h.step(eos_third);
        ASSERT_EQ(h.fault, "");
    }
    EXPECT_EQ(h.done(a)->finish, FinishReason::Eos);
    EXPECT_EQ(h.done(a)->tokens, (std::vector<int32_t>{1, 2, 3, 4, 1000, 1000}));
    EXPECT_EQ(h.done(a)->stats.generated_tokens, 2);
    EXPECT_EQ(h.done(b)->finish, FinishReason::Length);
    EXPECT_EQ(h.done(b)->n_generated(), 5);
    EXPECT_EQ(h.done(b)->tokens[6], 2);  // ignore_eos keeps it as an ordinary token
}

TEST(Scheduler, FinishWithReason) {
    Harness h(sched_config(), kv_config(16));
    const RequestId a = h.submit(range(1, 4), 10);
    h.step();
    EXPECT_TRUE(h.scheduler.finish(a, FinishReason::Stop, h.now));
    h.step();
    EXPECT_EQ(h.done(a)->finish, FinishReason::Stop);
    const RequestId b = h.submit(range(1, 4), 10);
    EXPECT_TRUE(h.scheduler.finish(b, FinishReason::Error, h.now, "tokenizer failed"));
    h.step();
    EXPECT_EQ(h.done(b)->error, "tokenizer failed");
}

TEST(Scheduler, PrefixReuseAndNamespaceIsolation) {
    Harness h(sched_config(), kv_config(64));
    const std::vector<int32_t> shared = range(1, 8);
    auto with = [&](std::vector<int32_t> suffix) {
        std::vector<int32_t> t = shared;
        t.insert(t.end(), suffix.begin(), suffix.end());
        return t;
    };
    const RequestId a = h.submit(with(range(100, 4)), 2, 0, "task1:v1");
    run_to_end(h);
    const RequestId b = h.submit(with(range(200, 5)), 2, 0, "task1:v1");  // same namespace
    const RequestId c = h.submit(with(range(200, 5)), 2, 0, "task2:v1");  // other task
    const RequestId d = h.submit(with(range(200, 5)), 2, 0, "task1:v2");  // new version
    run_to_end(h);
    EXPECT_EQ(h.done(a)->stats.cached_tokens, 0);
    EXPECT_EQ(h.done(b)->stats.cached_tokens, 8);
    EXPECT_EQ(h.done(c)->stats.cached_tokens, 0);
    EXPECT_EQ(h.done(d)->stats.cached_tokens, 0);
    const EngineStats s = h.scheduler.stats();
    EXPECT_EQ(s.prompt_tokens, 12u + 3 * 13u);
    EXPECT_EQ(s.cached_tokens, 8u);
    EXPECT_DOUBLE_EQ(s.hit_rate(), 8.0 / 51.0);
    EXPECT_EQ(s.requests_finished, 4u);
    EXPECT_EQ(s.generated_tokens, 8u);
}

TEST(Scheduler, AgentsSubmittedTogetherShareThePrefix) {
    Harness h(sched_config(8, 16), kv_config(64));
    const RequestId a = h.submit(range(1, 13), 2, 0, "task");
    const RequestId b = h.submit(range(1, 13), 2, 0, "task");
    const ScheduledBatch s1 = h.step();
    ASSERT_EQ(h.fault, "");
    // b waits while a computes the blocks it would otherwise compute a second time.
    EXPECT_TRUE(contains(s1, a));
    EXPECT_FALSE(contains(s1, b));
    const ScheduledBatch s2 = h.step();
    ASSERT_EQ(h.fault, "");
    ASSERT_TRUE(contains(s2, b));
    EXPECT_EQ(entry(s2, b)->first_pos, 12);
    run_to_end(h);
    EXPECT_EQ(h.done(b)->stats.cached_tokens, 12);
}

TEST(Scheduler, TimesComeFromTheCaller) {
    Harness h(sched_config(1), kv_config(16));
    h.now = 100;
    const RequestId a = h.submit(range(1, 4), 2);
    const RequestId b = h.submit(range(10, 4), 2);
    run_to_end(h);
    // Step k schedules at 100 + 1.5k - 0.5 and postprocesses at 100 + 1.5k.
    const Sequence* sa = h.done(a);
    EXPECT_DOUBLE_EQ(sa->stats.queue_ms, 1.0);
    EXPECT_DOUBLE_EQ(sa->stats.ttft_ms, 1.5);
    EXPECT_DOUBLE_EQ(sa->stats.latency_ms, 3.0);
    const Sequence* sb = h.done(b);
    EXPECT_DOUBLE_EQ(sb->stats.queue_ms, 4.0);
    EXPECT_DOUBLE_EQ(sb->stats.ttft_ms, 4.5);
    EXPECT_DOUBLE_EQ(sb->stats.latency_ms, 6.0);
    EXPECT_EQ(h.scheduler.stats().steps, 4u);
}

TEST(Scheduler, PowerProfileBoundsTheBatch) {
    Harness h(sched_config(16, 512), kv_config(128));
    h.scheduler.set_power_profile(power_profile(PowerMode::LowPower, 8));
    EXPECT_EQ(h.scheduler.step_max_num_seqs(), 4);
    EXPECT_EQ(h.scheduler.step_max_num_tokens(), 64);
    for (int i = 0; i < 6; ++i) h.submit(range(100 * i, 30), 4);
    const ScheduledBatch b = h.step();
    ASSERT_EQ(h.fault, "");
    EXPECT_EQ(b.n_tokens, 64);
    EXPECT_EQ(h.scheduler.n_running(), 3);  // 30 + 30 + 4: the token budget binds first
    // Running more than a lowered limit: the extra ones wait their turn, holding their blocks.
    h.scheduler.set_power_profile(power_profile(PowerMode::Performance, 8));
    h.step();
    EXPECT_EQ(h.scheduler.n_running(), 6);
    h.scheduler.set_power_profile(power_profile(PowerMode::LowPower, 8));
    const ScheduledBatch c = h.step();
    ASSERT_EQ(h.fault, "");
    EXPECT_LE(c.seqs.size(), 4u);
    EXPECT_EQ(h.scheduler.n_running(), 6);
    run_to_end(h);
    EXPECT_EQ(h.finished.size(), 6u);
}

}  // namespace
}  // namespace troupe
