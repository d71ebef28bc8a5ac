// `troupe lint`'s analysis and the run report (--json object, summary tables).
#include <gtest/gtest.h>

#include <functional>
#include <sstream>

#include "fake_backend.h"
#include "workflow/prompt_lint.h"
#include "workflow/run_report.h"
#include "workflow/runtime.h"
#include "workflow/workflow_loader.h"

using namespace troupe;
using namespace troupe::workflow;

namespace {

// BOS, then one token per whitespace-separated word.
std::vector<int32_t> word_tokens(const std::string& text) {
    std::vector<int32_t> out = {1};
    std::istringstream in(text);
    std::string w;
    while (in >> w) out.push_back(int32_t(std::hash<std::string>{}(w)&0x7fffffff));
    return out;
}

std::string zephyr(const std::vector<Message>& msgs) {
    std::string out;
    for (const Message& m : msgs) out += "<|" + m.role + "|>\n" + m.content + "</s>\n";
    return out + "<|assistant|>\n";
}

std::string words(int n, const char* stem) {
    std::string out;
    for (int i = 0; i < n; ++i) out += std::string(i ? " " : "") + stem + std::to_string(i);
    return out;
}

std::string team(const std::string& shared_rules, const std::string& role_prefix) {
    return "name: t\nshared:\n" +
           (shared_rules.empty() ? std::string("  []\n")
                                 : "  - {name: rules, text: \"" + shared_rules + "\"}\n") +
           "agents:\n"
           "  - {name: planner, role: \"" +
           role_prefix +
           " You plan.\"}\n"
           "  - {name: writer, role: \"" +
           role_prefix +
           " You write.\"}\n"
           "tasks:\n"
           "  - {id: plan, agent: planner, prompt: Plan it.}\n"
           "  - {id: write_a, agent: writer, prompt: \"Write A from {{plan.output}}\"}\n"
           "  - {id: write_b, agent: writer, prompt: \"Write B from {{plan.output}}\"}\n";
}

}  // namespace

TEST(Lint, CanonicalLayoutSharesTheWholeSharedContext) {
    const Workflow wf = parse_workflow(team(words(60, "rule"), ""), "t.yaml");
    const LintReport rep = lint_workflow(wf, {}, zephyr, word_tokens);
    // BOS + "<|system|>" + 60 rule words.
    EXPECT_EQ(rep.shared_context_tokens, 62);
    ASSERT_EQ(rep.tasks.size(), 3u);
    for (const LintTask& t : rep.tasks) EXPECT_GE(t.shared_tokens, 62) << t.id;
    EXPECT_EQ(rep.tasks[0].reused_tokens, 0);  // plan runs first
    EXPECT_EQ(rep.tasks[1].shared_with, "write_b");
    EXPECT_GT(rep.tasks[1].shared_tokens, rep.tasks[1].reused_tokens);  // same agent: role too
    EXPECT_EQ(rep.tasks[1].reused_tokens, 63);  // the shared context and both roles' "You"
    EXPECT_GT(rep.tasks[2].reused_tokens, 62);  // write_a ran before it, same role and prompt start
    EXPECT_TRUE(rep.warnings.empty()) << rep.warnings[0];
    const std::string text = format_lint(wf, rep);
    EXPECT_NE(text.find("shared context: 62 tokens"), std::string::npos) << text;
    EXPECT_NE(text.find("no warnings"), std::string::npos);
}

TEST(Lint, RulesCopiedIntoEveryRoleAreThePitfall) {
    const Workflow wf = parse_workflow(team("", words(40, "rule")), "t.yaml");
    const LintReport rep = lint_workflow(wf, {}, zephyr, word_tokens);
    EXPECT_EQ(rep.shared_context_tokens, 0);
    ASSERT_EQ(rep.warnings.size(), 2u);  // 40 rule words and "You" in common
    EXPECT_NE(rep.warnings[0].find("no shared context"), std::string::npos);
    EXPECT_NE(rep.warnings[1].find("agents planner, writer begin their roles with the same 41 "
                                   "tokens"),
              std::string::npos)
        << rep.warnings[1];
}

TEST(Lint, TemplateThatPutsTheTaskFirstIsCaught) {
    const Workflow wf = parse_workflow(team(words(60, "rule"), ""), "t.yaml");
    // A layout with the user turn first: the shared context no longer starts the prompt.
    auto user_first = [](const std::vector<Message>& m) { return zephyr({m[1], m[0]}); };
    const LintReport rep = lint_workflow(wf, {}, user_first, word_tokens);
    ASSERT_FALSE(rep.warnings.empty());
    EXPECT_NE(rep.warnings[0].find("task plan: its prompt differs from every other task's at "
                                   "token 2, inside the shared context"),
              std::string::npos)
        << rep.warnings[0];
}

TEST(Lint, LongInputRepeatedInTaskPrompts) {
    std::string text = team(words(60, "rule"), "");
    text.insert(text.find("shared:"), "inputs:\n  doc: \"" + words(50, "w") + "\"\n");
    text.replace(text.find("Write A from"), 12, "Write A on {{inputs.doc}} from");
    text.replace(text.find("Write B from"), 12, "Write B on {{inputs.doc}} from");
    const Workflow wf = parse_workflow(text, "t.yaml");
    const LintReport rep = lint_workflow(wf, resolve_inputs(wf, {}), zephyr, word_tokens);
    ASSERT_EQ(rep.warnings.size(), 1u);
    EXPECT_NE(rep.warnings[0].find("inputs.doc (50 tokens) is in the prompts of tasks write_a, "
                                   "write_b"),
              std::string::npos)
        << rep.warnings[0];
}

TEST(Lint, TasksBeyondTheContextLength) {
    const Workflow wf = parse_workflow(team(words(60, "rule"), ""), "t.yaml");
    const int gen = wf.agents[0].settings.max_tokens;  // every agent: the default
    // Context length 1e6: checked, nothing to warn of; the sizes are filled in.
    const LintReport free = lint_workflow(wf, {}, zephyr, word_tokens, 1000000);
    EXPECT_TRUE(free.warnings.empty());
    const LintTask& plan = free.tasks[0];
    const LintTask& write_a = free.tasks[1];
    EXPECT_EQ(plan.min_prompt_tokens, plan.prompt_tokens);  // no upstream output
    EXPECT_EQ(plan.max_prompt_tokens, plan.prompt_tokens);
    // write_a's placeholder "[output of plan]" is 3 words, the last joined to the template's
    // "</s>"; empty, "from</s>" is one word: the prompt is 2 shorter.
    EXPECT_EQ(write_a.min_prompt_tokens, write_a.prompt_tokens - 2);
    EXPECT_EQ(write_a.max_prompt_tokens, write_a.min_prompt_tokens + gen);  // plan's output

    // Room for every prompt and its own max_tokens, not for plan's output in the writers'.
    const int n_ctx = write_a.min_prompt_tokens + gen + 1;
    const LintReport tight = lint_workflow(wf, {}, zephyr, word_tokens, n_ctx);
    ASSERT_EQ(tight.warnings.size(), 2u);
    EXPECT_NE(tight.warnings[0].find("task write_a: with its upstream outputs at their agents' "
                                     "max_tokens, its prompt (up to " +
                                     std::to_string(write_a.max_prompt_tokens) + " tokens)"),
              std::string::npos)
        << tight.warnings[0];
    EXPECT_NE(tight.warnings[1].find("task write_b:"), std::string::npos);

    const LintReport small = lint_workflow(wf, {}, zephyr, word_tokens, plan.prompt_tokens);
    ASSERT_EQ(small.warnings.size(), 3u);
    EXPECT_NE(
        small.warnings[0].find("task plan: its prompt (" + std::to_string(plan.prompt_tokens) +
                               " tokens) and max_tokens (" + std::to_string(gen) +
                               ") exceed the model's context length (" +
                               std::to_string(plan.prompt_tokens) + "): the engine will refuse it"),
        std::string::npos)
        << small.warnings[0];
    EXPECT_NE(small.warnings[1].find("task write_a: its prompt (" +
                                     std::to_string(write_a.min_prompt_tokens) +
                                     " tokens with empty upstream outputs)"),
              std::string::npos)
        << small.warnings[1];
}

TEST(RunReport, JsonHasTheDocumentedShape) {
    const Workflow wf = parse_workflow(team(words(20, "rule"), ""), "t.yaml");
    troupe::testing::FakeClock clock;
    troupe::testing::FakeBackend backend(clock);
    backend.script("write_b", {.fail_attempts = 1});
    RunOptions opt;
    opt.render = zephyr;
    opt.clock_ms = [&] { return clock(); };
    const RunResult r = run_workflow(wf, backend, opt);
    const nlohmann::ordered_json j = run_to_json(r);
    for (const char* key : {"wall_ms", "hit_rate", "prompt_tokens", "cached_tokens",
                            "generated_tokens", "peak_rss_bytes", "peak_kv_bytes", "cpu_seconds"})
        EXPECT_TRUE(j["summary"].contains(key)) << key;
    EXPECT_EQ(j["summary"]["prompt_tokens"], r.summary.prompt_tokens);
    EXPECT_EQ(j["summary"]["ok"], false);
    ASSERT_EQ(j["tasks"].size(), 3u);
    for (const TaskResult& t : r.tasks) {
        const auto& jt = j["tasks"][t.id];
        EXPECT_EQ(jt["output"], t.output);
        EXPECT_EQ(jt["status"], task_status_name(t.status));
        EXPECT_EQ(jt["agent"], t.agent);
        EXPECT_TRUE(jt.contains("latency_ms"));
    }
    EXPECT_EQ(j["tasks"]["write_b"]["status"], "failed");
    EXPECT_EQ(j["tasks"]["write_b"]["error"], "scripted failure");

    const std::string table = format_summary(r.summary);
    EXPECT_NE(table.find("critical path"), std::string::npos) << table;
    EXPECT_NE(table.find("prefix-cache hit rate"), std::string::npos) << table;
    // r has a failed task: no speed-up is claimed for it.
    RunSummary slow = r.summary;
    slow.wall_ms = r.summary.wall_ms * 3;
    EXPECT_EQ(speedup(r.summary, slow), 0.0);
    EXPECT_NE(format_comparison(r.summary, slow).find("speed-up: not measured"), std::string::npos);
    RunSummary fast = r.summary;
    fast.n_tasks_failed = slow.n_tasks_failed = 0;
    EXPECT_DOUBLE_EQ(speedup(fast, slow), 3.0);
    EXPECT_NE(format_comparison(fast, slow).find("speed-up: 3.00x"), std::string::npos);
}
