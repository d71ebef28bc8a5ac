// The DAG runtime against scripted fake backends: dependency order and batching, priorities,
// the A/B modes, timeouts, retries, fallbacks, failure propagation, cancellation, bounded
// waits against a broken engine, memory pressure, traces and the summary.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <string>

#include "fake_backend.h"
#include "workflow/runtime.h"
#include "workflow/workflow_loader.h"

using namespace troupe;
using namespace troupe::workflow;
using troupe::testing::FakeBackend;
using troupe::testing::FakeClock;

namespace {

// The seed's writing pipeline in miniature: plan -> 3 writers -> review -> summary.
const char* kPipeline = R"yaml(
name: pipe
prefix_version: v1
inputs:
  topic: whales
defaults:
  sampling: {temperature: 0}
  max_tokens: 4
  timeout_s: 1
shared:
  - name: rules
    text: |
      Team rules: every agent reads these rules first. Write plain English. Keep to the topic.
  - name: request
    text: "The user asks for a short essay about {{inputs.topic}}."
agents:
  - name: planner
    role: You are the planner.
  - name: writer
    role: You are a writer.
    retries: 1
    fallback: {text: "(section missing)"}
  - name: reviewer
    role: You are the reviewer.
  - name: summariser
    role: You are the summariser.
    priority: 10
tasks:
  - id: plan
    agent: planner
    prompt: Outline three sections about {{inputs.topic}}.
  - id: write_a
    agent: writer
    prompt: "Outline: {{plan.output}} Write section 1."
  - id: write_b
    agent: writer
    prompt: "Outline: {{plan.output}} Write section 2."
  - id: write_c
    agent: writer
    prompt: "Outline: {{plan.output}} Write section 3."
  - id: review
    agent: reviewer
    prompt: "Check: {{write_a.output}} | {{write_b.output}} (failed: {{write_b.failed}}) | {{write_c.output}}"
  - id: summary
    agent: summariser
    prompt: "Summarise: {{review.output}}"
)yaml";

std::string zephyr(const std::vector<Message>& msgs) {
    std::string out;
    for (const Message& m : msgs) out += "<|" + m.role + "|>\n" + m.content + "</s>\n";
    return out + "<|assistant|>\n";
}

struct Harness {
    FakeClock clock;
    FakeBackend backend;
    RunOptions opt;
    std::map<std::string, std::string> streamed;  // task id -> text seen through on_text
    const Workflow* wf = nullptr;

    explicit Harness(int max_batch = 0) : backend(clock, 10, max_batch) {
        opt.render = zephyr;
        opt.run_id = "run-test";
        opt.clock_ms = [this] { return clock(); };
        opt.memory_bytes = [] { return uint64_t(64) << 20; };
        opt.events.on_text = [this](int task, std::string_view text) {
            streamed[wf->tasks[size_t(task)].id] += text;
        };
    }
    RunResult run(const Workflow& w) {
        wf = &w;
        return run_workflow(w, backend, opt);
    }
    const FakeBackend::Submission& submission(const std::string& task, int attempt = 0) const {
        for (const auto& s : backend.submissions)
            if (s.task == task && attempt-- == 0) return s;
        throw std::runtime_error("no submission for " + task);
    }
};

const TaskResult& result(const RunResult& r, const std::string& id) {
    for (const TaskResult& t : r.tasks)
        if (t.id == id) return t;
    throw std::runtime_error("no task " + id);
}

std::vector<const TraceRecord*> records(const RunResult& r, const std::string& task) {
    std::vector<const TraceRecord*> out;
    for (const TraceRecord& t : r.trace)
        if (t.task_id == task) out.push_back(&t);
    return out;
}

}  // namespace

TEST(Runtime, RunsInDependencyOrderAndBatchesReadyTasks) {
    const Workflow wf = parse_workflow(kPipeline, "pipe.yaml");
    Harness h;
    const RunResult r = h.run(wf);
    ASSERT_TRUE(r.ok());
    std::vector<std::string> order;
    for (const auto& s : h.backend.submissions) order.push_back(s.task);
    EXPECT_EQ(order, (std::vector<std::string>{"plan", "write_a", "write_b", "write_c", "review",
                                               "summary"}));
    // The three writers were submitted together, right after plan finished, and ran together.
    EXPECT_EQ(h.submission("write_a").at_ms, h.submission("write_c").at_ms);
    EXPECT_GT(h.submission("write_a").at_ms, h.submission("plan").at_ms);
    EXPECT_EQ(h.backend.max_running_seen, 3);
    bool writers_batched = false;
    for (const auto& b : h.backend.batches) writers_batched = writers_batched || b.size() == 3;
    EXPECT_TRUE(writers_batched);

    // Every output is the fake engine's answer to the prompt the runtime laid out, and
    // downstream prompts carry the upstream outputs.
    for (const auto& s : h.backend.submissions) {
        EXPECT_EQ(result(r, s.task).output, FakeBackend::answer_for(s.request.prompt_text, 4));
        EXPECT_EQ(h.streamed[s.task], result(r, s.task).output) << "streamed text of " << s.task;
    }
    const std::string& review_prompt = h.submission("review").request.prompt_text;
    EXPECT_NE(review_prompt.find(result(r, "write_b").output + " (failed: false)"),
              std::string::npos);
    EXPECT_EQ(h.submission("plan").request.prompt_text,
              "<|system|>\nTeam rules: every agent reads these rules first. Write plain English. "
              "Keep to the topic.\n\nThe user asks for a short essay about whales.\n\nYou are the "
              "planner.</s>\n<|user|>\nOutline three sections about whales.</s>\n<|assistant|>\n");
}

TEST(Runtime, RequestsCarryAgentSettingsNamespaceAndKey) {
    const Workflow wf = parse_workflow(kPipeline, "pipe.yaml");
    Harness h;
    h.opt.ignore_eos = true;
    h.run(wf);
    const Request& req = h.submission("summary").request;
    EXPECT_EQ(req.priority, 10);
    EXPECT_EQ(req.max_tokens, 4);
    EXPECT_TRUE(req.ignore_eos);
    EXPECT_EQ(req.sampling.temperature, 0.0f);
    EXPECT_EQ(req.cache_namespace, "pipe:v1");
    EXPECT_EQ(req.tag, "summary:summariser:v1");
    for (const auto& s : h.backend.submissions) EXPECT_EQ(s.request.cache_namespace, "pipe:v1");
}

TEST(Runtime, PriorityOrdersAdmission) {
    const char* fan = R"yaml(
name: fan
agents:
  - {name: low, role: Low., max_tokens: 2}
  - {name: high, role: High., max_tokens: 2, priority: 5}
tasks:
  - {id: a, agent: low, prompt: A}
  - {id: b, agent: high, prompt: B}
  - {id: c, agent: low, prompt: C}
  - {id: d, agent: low, prompt: D, priority: 7}
)yaml";
    const Workflow wf = parse_workflow(fan, "fan.yaml");
    Harness h(/*max_batch=*/1);  // the engine runs one at a time: admission order shows
    const RunResult r = h.run(wf);
    ASSERT_TRUE(r.ok());
    std::vector<std::string> submitted, ran;
    for (const auto& s : h.backend.submissions) submitted.push_back(s.task);
    for (const auto& b : h.backend.batches)
        if (ran.empty() || ran.back() != b[0]) ran.push_back(b[0]);
    EXPECT_EQ(submitted, (std::vector<std::string>{"d", "b", "a", "c"}));
    EXPECT_EQ(ran, (std::vector<std::string>{"d", "b", "a", "c"}));
}

TEST(Runtime, BaselineRunsOneAtATimeWithoutSharing) {
    const Workflow wf = parse_workflow(kPipeline, "pipe.yaml");
    Harness h;
    h.opt.prefix_cache = false;
    h.opt.batching = false;
    EXPECT_EQ(h.opt.mode_name(), "baseline");
    const RunResult r = h.run(wf);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(h.backend.max_running_seen, 1);
    std::set<std::string> namespaces;
    for (const auto& s : h.backend.submissions) namespaces.insert(s.request.cache_namespace);
    EXPECT_EQ(namespaces.size(), h.backend.submissions.size());
    EXPECT_EQ(r.summary.cached_tokens, 0u);
    EXPECT_EQ(r.summary.hit_rate, 0.0);
    EXPECT_EQ(r.summary.mode, "baseline");
    std::vector<std::string> order;
    for (const auto& s : h.backend.submissions) order.push_back(s.task);
    EXPECT_EQ(order, (std::vector<std::string>{"plan", "write_a", "write_b", "write_c", "review",
                                               "summary"}));
}

TEST(Runtime, OptimisedAndBaselineGiveTheSameOutputs) {
    const Workflow wf = parse_workflow(kPipeline, "pipe.yaml");
    std::map<std::string, std::map<std::string, std::string>> outputs;  // mode -> task -> out
    std::map<std::string, RunSummary> summaries;
    for (int mode = 0; mode < 4; ++mode) {
        Harness h;
        h.opt.prefix_cache = mode & 1;
        h.opt.batching = mode & 2;
        const RunResult r = h.run(wf);
        ASSERT_TRUE(r.ok());
        for (const TaskResult& t : r.tasks) outputs[h.opt.mode_name()][t.id] = t.output;
        summaries[h.opt.mode_name()] = r.summary;
    }
    ASSERT_EQ(outputs.size(), 4u);
    for (const auto& [mode, out] : outputs) EXPECT_EQ(out, outputs["baseline"]) << mode;
    // The levers do what they say: sharing without batching still hits the cache, and the
    // batched run takes fewer (fake) steps of wall time than the serial one.
    EXPECT_GT(summaries["optimised"].hit_rate, 0.3);
    EXPECT_GT(summaries["no-batching"].hit_rate, 0.3);
    EXPECT_EQ(summaries["no-prefix-cache"].hit_rate, 0.0);
    EXPECT_LT(summaries["optimised"].wall_ms, summaries["baseline"].wall_ms);
}

TEST(Runtime, TimeoutIsRetriedAndTraced) {
    const Workflow wf = parse_workflow(kPipeline, "pipe.yaml");
    Harness h;
    h.backend.script("write_b", {.hang_attempts = 1});  // first attempt never answers
    const RunResult r = h.run(wf);
    ASSERT_TRUE(r.ok());
    const TaskResult& wb = result(r, "write_b");
    EXPECT_EQ(wb.status, TaskStatus::Ok);
    EXPECT_EQ(wb.attempts, 2);
    const auto recs = records(r, "write_b");
    ASSERT_EQ(recs.size(), 2u);
    EXPECT_EQ(recs[0]->status, "timeout");
    EXPECT_EQ(recs[0]->retries, 0);
    EXPECT_EQ(recs[0]->finish, "cancelled");  // the engine confirmed the cancel
    EXPECT_GE(recs[0]->latency_ms, 1000.0);   // timeout_s: 1
    EXPECT_LT(recs[0]->latency_ms, 1100.0);   // noticed within a few steps
    EXPECT_EQ(recs[1]->status, "ok");
    EXPECT_EQ(recs[1]->retries, 1);
    ASSERT_EQ(h.backend.cancelled.size(), 1u);
    EXPECT_EQ(h.backend.cancelled[0], recs[0]->request_id);
    // The slow agent held back only its own dependents: the other writers finished early.
    EXPECT_LT(result(r, "write_a").end_ms, 500.0);
    EXPECT_GT(result(r, "review").start_ms, wb.end_ms - 1e-9);
}

TEST(Runtime, SlowAgentTimesOutThenFallsBack) {
    const Workflow wf = parse_workflow(kPipeline, "pipe.yaml");
    Harness h;
    h.backend.script("write_b", {.ms_per_token = 400});  // 4 tokens take 1.6 s > 1 s
    const RunResult r = h.run(wf);
    ASSERT_TRUE(r.ok());  // the fallback keeps the run going
    const TaskResult& wb = result(r, "write_b");
    EXPECT_EQ(wb.status, TaskStatus::Fallback);
    EXPECT_TRUE(wb.failed);
    EXPECT_EQ(wb.output, "(section missing)");
    EXPECT_NE(wb.error.find("no answer within 1 s"), std::string::npos) << wb.error;
    EXPECT_EQ(records(r, "write_b").size(), 2u);  // 1 + retries
    const std::string& review_prompt = h.submission("review").request.prompt_text;
    EXPECT_NE(review_prompt.find("(section missing) (failed: true)"), std::string::npos)
        << review_prompt;
    EXPECT_GT(records(r, "write_b")[0]->generated_tokens, 0);  // partial work is traced
}

TEST(Runtime, FailingAgentRetriesThenFallsBack) {
    const Workflow wf = parse_workflow(kPipeline, "pipe.yaml");
    Harness h;
    h.backend.script("write_c", {.fail_attempts = 5});
    const RunResult r = h.run(wf);
    const TaskResult& wc = result(r, "write_c");
    EXPECT_EQ(wc.status, TaskStatus::Fallback);
    EXPECT_EQ(wc.attempts, 2);
    EXPECT_EQ(wc.error, "scripted failure");
    for (const TraceRecord* t : records(r, "write_c")) {
        EXPECT_EQ(t->status, "error");
        EXPECT_EQ(t->error, "scripted failure");
    }
    EXPECT_EQ(result(r, "summary").status, TaskStatus::Ok);
}

TEST(Runtime, SkipFallbackGivesEmptyOutputAndFailedFlag) {
    std::string text = kPipeline;
    text.replace(text.find("fallback: {text: \"(section missing)\"}"),
                 std::string("fallback: {text: \"(section missing)\"}").size(), "fallback: skip");
    const Workflow wf = parse_workflow(text, "pipe.yaml");
    Harness h;
    h.backend.script("write_b", {.fail_attempts = 2});
    const RunResult r = h.run(wf);
    EXPECT_EQ(result(r, "write_b").status, TaskStatus::Skipped);
    EXPECT_EQ(result(r, "write_b").output, "");
    EXPECT_NE(h.submission("review").request.prompt_text.find("|  (failed: true) |"),
              std::string::npos);
}

TEST(Runtime, FailureWithoutFallbackBlocksDependentsOnly) {
    const char* text = R"yaml(
name: chain
defaults: {max_tokens: 2, timeout_s: 1}
agents:
  - {name: a, role: A.}
tasks:
  - {id: root, agent: a, prompt: R}
  - {id: mid, agent: a, prompt: "{{root.output}}"}
  - {id: leaf, agent: a, prompt: "{{mid.output}}"}
  - {id: other, agent: a, prompt: O}
)yaml";
    const Workflow wf = parse_workflow(text, "chain.yaml");
    Harness h;
    h.backend.script("root", {.fail_attempts = 1});
    const RunResult r = h.run(wf);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(result(r, "root").status, TaskStatus::Failed);
    EXPECT_EQ(result(r, "mid").status, TaskStatus::Blocked);
    EXPECT_EQ(result(r, "mid").error, "dependency 'root' failed");
    EXPECT_EQ(result(r, "leaf").status, TaskStatus::Blocked);
    EXPECT_EQ(result(r, "leaf").error, "dependency 'mid' blocked");
    EXPECT_EQ(result(r, "other").status, TaskStatus::Ok);
    EXPECT_EQ(h.backend.submissions.size(), 2u);  // root and other only
}

TEST(Runtime, RejectedRequestIsNotRetried) {
    const Workflow wf = parse_workflow(kPipeline, "pipe.yaml");
    Harness h;
    h.backend.script("write_a", {.reject = true});
    const RunResult r = h.run(wf);
    const TaskResult& wa = result(r, "write_a");
    EXPECT_EQ(wa.status, TaskStatus::Fallback);
    EXPECT_EQ(wa.attempts, 1);
    const auto recs = records(r, "write_a");
    ASSERT_EQ(recs.size(), 1u);
    EXPECT_EQ(recs[0]->status, "rejected");
    EXPECT_EQ(recs[0]->request_id, 0u);
    EXPECT_EQ(r.summary.n_requests, 5);  // a rejected request never ran
}

TEST(Runtime, EngineThatNeverAnswersNorConfirmsCannotHangTheRun) {
    const Workflow wf = parse_workflow(kPipeline, "pipe.yaml");
    Harness h;
    h.opt.cancel_grace_ms = 200;
    for (const char* t : {"plan", "write_a", "write_b", "write_c", "review", "summary"})
        h.backend.script(t, {.hang_attempts = 100, .ignore_cancel = true});
    const RunResult r = h.run(wf);
    // plan (no retries, no fallback) is abandoned after its timeout plus the grace period;
    // everything downstream is blocked.
    EXPECT_EQ(result(r, "plan").status, TaskStatus::Failed);
    EXPECT_NE(result(r, "plan").error.find("abandoned"), std::string::npos);
    for (const char* t : {"write_a", "write_b", "write_c", "review", "summary"})
        EXPECT_EQ(result(r, t).status, TaskStatus::Blocked) << t;
    EXPECT_LE(r.summary.wall_ms, 1000.0 + 200.0 + 30.0);
    // A late callback from the engine finds the run gone and asks to stop.
    EXPECT_EQ(h.backend.poke_pending_callbacks(), 0);
}

TEST(Runtime, RequestDroppedByTheEngineIsAnError) {
    const Workflow wf = parse_workflow(kPipeline, "pipe.yaml");
    Harness h;
    h.backend.script("summary", {.drop = true});
    const RunResult r = h.run(wf);
    EXPECT_EQ(result(r, "summary").status, TaskStatus::Failed);
    const auto recs = records(r, "summary");
    ASSERT_EQ(recs.size(), 1u);
    EXPECT_EQ(recs[0]->status, "error");
    EXPECT_EQ(recs[0]->error, "the engine dropped the request without reporting it");
}

TEST(Runtime, CancellationCancelsEveryRequestOfTheRun) {
    const Workflow wf = parse_workflow(kPipeline, "pipe.yaml");
    Harness h;
    std::atomic<bool> cancel{false};
    h.opt.cancel = &cancel;
    h.opt.events.on_text = [&](int task, std::string_view) {
        if (wf.tasks[size_t(task)].id == "write_b") cancel = true;  // e.g. Ctrl-C mid-run
    };
    const RunResult r = h.run(wf);
    EXPECT_TRUE(r.cancelled);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(result(r, "plan").status, TaskStatus::Ok);
    for (const char* t : {"write_a", "write_b", "write_c", "review", "summary"}) {
        EXPECT_EQ(result(r, t).status, TaskStatus::Cancelled) << t;
        EXPECT_EQ(result(r, t).error, "run cancelled") << t;
    }
    std::set<RequestId> cancelled(h.backend.cancelled.begin(), h.backend.cancelled.end());
    for (const char* t : {"write_a", "write_b", "write_c"})
        EXPECT_TRUE(cancelled.count(h.submission(t).id)) << t;
    EXPECT_EQ(h.backend.submissions.size(), 4u);  // nothing submitted after the cancel
    for (const TraceRecord& t : r.trace)
        if (t.task_id != "plan") {
            EXPECT_EQ(t.status, "cancelled");
        }
}

TEST(Runtime, DeadlineEndsTheRun) {
    const Workflow wf = parse_workflow(kPipeline, "pipe.yaml");
    Harness h;
    h.opt.deadline_s = 0.1;
    const RunResult r = h.run(wf);
    EXPECT_TRUE(r.cancelled);
    EXPECT_EQ(result(r, "summary").status, TaskStatus::Cancelled);
    EXPECT_EQ(result(r, "summary").error, "run deadline reached");
    EXPECT_LE(r.summary.wall_ms, 100.0 + 30.0);
}

TEST(Runtime, MemoryPressureHoldsBackLowPriorityTasks) {
    const char* fan = R"yaml(
name: fan
defaults: {max_tokens: 3}
agents:
  - {name: w, role: W.}
tasks:
  - {id: a, agent: w, prompt: A}
  - {id: b, agent: w, prompt: B}
  - {id: urgent, agent: w, prompt: U, priority: 9}
)yaml";
    const Workflow wf = parse_workflow(fan, "fan.yaml");
    {
        Harness h;
        h.run(wf);
        EXPECT_EQ(h.backend.max_running_seen, 3);
    }
    Harness h;
    h.backend.stats_.kv_bytes_total = 1000;
    h.backend.stats_.kv_bytes_used = 950;  // above the 0.9 high-water mark
    const RunResult r = h.run(wf);
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(h.backend.max_running_seen, 1);
    EXPECT_EQ(h.backend.submissions[0].task, "urgent");
    EXPECT_EQ(r.summary.peak_kv_bytes, 950u);
}

TEST(Runtime, TraceIsCompleteAndMatchesTheSummary) {
    const Workflow wf = parse_workflow(kPipeline, "pipe.yaml");
    Harness h;
    h.backend.script("write_b", {.hang_attempts = 1});
    std::vector<TraceRecord> streamed;
    h.opt.events.on_trace = [&](const TraceRecord& t) { streamed.push_back(t); };
    const RunResult r = h.run(wf);
    ASSERT_EQ(streamed.size(), r.trace.size());
    ASSERT_EQ(r.trace.size(), 7u);  // 6 tasks + 1 retry

    uint64_t prompt = 0, cached = 0, generated = 0;
    std::set<RequestId> ids;
    for (const TraceRecord& t : r.trace) {
        const nlohmann::json j = nlohmann::json::parse(to_json_line(t));
        for (const char* key :
             {"requestId", "runId", "taskId", "agentId", "cacheHit", "prefixTokens", "promptTokens",
              "generatedTokens", "queueMs", "ttftMs", "latencyMs", "memoryMB", "retries", "status"})
            EXPECT_TRUE(j.contains(key)) << key;
        EXPECT_EQ(j["runId"], "run-test");
        EXPECT_EQ(j["cacheKey"], t.task_id + ":" + t.agent_id + ":v1");
        EXPECT_EQ(j["cacheHit"], t.prefix_tokens > 0);
        EXPECT_EQ(j["memoryMB"], 64.0);
        EXPECT_LE(t.prefix_tokens, t.prompt_tokens);
        EXPECT_NEAR(t.latency_ms, t.end_ms - t.start_ms, 1e-9);
        EXPECT_GE(t.start_ms, 0.0);
        EXPECT_LE(t.end_ms, r.summary.wall_ms);
        if (t.status == "ok") {
            EXPECT_GE(t.queue_ms, 0.0);
            EXPECT_GE(t.ttft_ms, t.queue_ms);
            EXPECT_LE(t.ttft_ms, t.latency_ms);
            EXPECT_EQ(t.generated_tokens, 4);
        }
        EXPECT_TRUE(ids.insert(t.request_id).second);
        prompt += uint64_t(t.prompt_tokens);
        cached += uint64_t(t.prefix_tokens);
        generated += uint64_t(t.generated_tokens);
    }
    const RunSummary& s = r.summary;
    EXPECT_EQ(s.n_requests, 7);
    EXPECT_EQ(s.prompt_tokens, prompt);
    EXPECT_EQ(s.cached_tokens, cached);
    EXPECT_EQ(s.generated_tokens, generated);
    EXPECT_DOUBLE_EQ(s.hit_rate, double(cached) / double(prompt));
    EXPECT_DOUBLE_EQ(s.tokens_per_s, double(generated) * 1000.0 / s.wall_ms);
    EXPECT_EQ(s.n_tasks, 6);
    EXPECT_EQ(s.n_tasks_ok, 6);
    // The critical path runs through the writer that needed a retry.
    EXPECT_EQ(s.critical_path, (std::vector<std::string>{"plan", "write_b", "review", "summary"}));
    double path_ms = 0;
    for (const std::string& id : s.critical_path) path_ms += result(r, id).latency_ms;
    EXPECT_DOUBLE_EQ(s.critical_path_ms, path_ms);
    EXPECT_LE(s.critical_path_ms, s.wall_ms + 1e-9);
    EXPECT_GE(s.latency_p95_ms, s.latency_p50_ms);
    EXPECT_EQ(s.peak_rss_bytes, uint64_t(64) << 20);
}

TEST(Runtime, InputOverridesReachThePrompts) {
    const Workflow wf = parse_workflow(kPipeline, "pipe.yaml");
    Harness h;
    h.opt.inputs = {{"topic", "lighthouses"}};
    h.run(wf);
    EXPECT_NE(h.submission("plan").request.prompt_text.find("essay about lighthouses."),
              std::string::npos);
    Harness bad;
    bad.opt.inputs = {{"topik", "x"}};
    EXPECT_THROW(bad.run(wf), Error);
}
