// Prompt templates, the canonical prompt layout, and the summary's statistics.
#include <gtest/gtest.h>

#include "util/error.h"
#include "workflow/prompt_layout.h"
#include "workflow/prompt_template.h"
#include "workflow/run_result.h"
#include "workflow/workflow_loader.h"

using namespace troupe;
using namespace troupe::workflow;

namespace {
std::string render_all(const PromptTemplate& t) {
    return t.render(
        [](const TemplateRef& r) { return std::string("[").append(r.str()).append("]"); });
}
size_t error_offset(const std::string& text) {
    try {
        PromptTemplate::parse(text);
    } catch (const TemplateError& e) {
        return e.offset;
    }
    ADD_FAILURE() << "no error for " << text;
    return 0;
}
}  // namespace

TEST(PromptTemplate, ParsesReferences) {
    const PromptTemplate t =
        PromptTemplate::parse("Hi {{inputs.name}}, see {{ plan.output }} ({{plan-2.failed}}).");
    ASSERT_EQ(t.refs().size(), 3u);
    EXPECT_EQ(t.refs()[0].kind, TemplateRef::Kind::Input);
    EXPECT_EQ(t.refs()[0].name, "name");
    EXPECT_EQ(t.refs()[0].offset, 3u);
    EXPECT_EQ(t.refs()[1].kind, TemplateRef::Kind::Output);
    EXPECT_EQ(t.refs()[1].name, "plan");
    EXPECT_EQ(t.refs()[2].kind, TemplateRef::Kind::Failed);
    EXPECT_EQ(t.refs()[2].name, "plan-2");
    EXPECT_EQ(render_all(t), "Hi [inputs.name], see [plan.output] ([plan-2.failed]).");
}

TEST(PromptTemplate, LiteralTextIsUntouched) {
    EXPECT_EQ(render_all(PromptTemplate::parse("no refs } { }} here")), "no refs } { }} here");
    EXPECT_EQ(render_all(PromptTemplate::parse("a \\{{b}} c")), "a {{b}} c");
    EXPECT_EQ(render_all(PromptTemplate::parse("")), "");
    EXPECT_EQ(render_all(PromptTemplate::parse("{{x.output}}{{y.output}}")),
              "[x.output][y.output]");
}

TEST(PromptTemplate, SyntaxErrorsCarryOffsets) {
    EXPECT_EQ(error_offset("abc {{inputs.x"), 4u);
    EXPECT_EQ(error_offset("abc {{inputs.x {{y.output}}"), 4u);
    EXPECT_EQ(error_offset("x {{}}"), 2u);
    EXPECT_EQ(error_offset("x {{plan}}"), 2u);
    EXPECT_EQ(error_offset("x {{plan.outputs}}"), 2u);
    EXPECT_EQ(error_offset("x {{pl an.output}}"), 2u);
    EXPECT_EQ(error_offset("x {{inputs.}}"), 2u);
    EXPECT_EQ(error_offset("x {{a.b.c}}"), 2u);
}

namespace {
const char* kTeam = R"yaml(
name: team
inputs: {who: Emma}
shared:
  - {name: rules, text: Rule one.}
  - {name: request, text: "Help {{inputs.who}}."}
agents:
  - {name: a, role: You are A.}
  - {name: b, role: You are B.}
tasks:
  - {id: t1, agent: a, prompt: First.}
  - {id: t2, agent: b, prompt: "Given {{t1.output}} (failed {{t1.failed}}), go."}
)yaml";
}

TEST(PromptLayout, SharedBlocksThenRoleThenTask) {
    const Workflow wf = parse_workflow(kTeam, "team.yaml");
    const InputValues in = resolve_inputs(wf, {});
    std::vector<UpstreamResult> up(2);
    up[0] = {"the plan", true};
    const std::vector<Message> m = layout_task(wf, 1, in, up);
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].role, "system");
    EXPECT_EQ(m[0].content, "Rule one.\n\nHelp Emma.\n\nYou are B.");
    EXPECT_EQ(m[1].role, "user");
    EXPECT_EQ(m[1].content, "Given the plan (failed true), go.");
    // Every agent's system message starts with the same shared context.
    const std::string shared = render_shared_context(wf, in);
    EXPECT_EQ(shared, "Rule one.\n\nHelp Emma.");
    EXPECT_EQ(render_system(wf, 0, in).rfind(shared, 0), 0u);
    EXPECT_EQ(render_system(wf, 1, in).rfind(shared, 0), 0u);
}

TEST(PromptLayout, NoSharedBlocksMeansJustTheRole) {
    const Workflow wf = parse_workflow(
        "agents: [{name: a, role: Solo.}]\ntasks: [{id: t, agent: a, prompt: Go.}]\n", "s.yaml");
    EXPECT_EQ(render_system(wf, 0, {}), "Solo.");
}

TEST(CriticalPath, LongestChainBySummedLatency) {
    const Workflow wf = parse_workflow(R"yaml(
agents: [{name: a, role: A.}]
tasks:
  - {id: p, agent: a, prompt: P}
  - {id: x, agent: a, prompt: "{{p.output}}"}
  - {id: y, agent: a, prompt: "{{p.output}}"}
  - {id: z, agent: a, prompt: "{{x.output}} {{y.output}}"}
  - {id: lone, agent: a, prompt: L}
)yaml",
                                       "cp.yaml");
    CriticalPath cp = critical_path(wf, {10, 5, 30, 1, 20});
    EXPECT_DOUBLE_EQ(cp.ms, 41.0);
    EXPECT_EQ(cp.tasks, (std::vector<int>{0, 2, 3}));
    cp = critical_path(wf, {10, 5, 30, 1, 50});
    EXPECT_DOUBLE_EQ(cp.ms, 50.0);
    EXPECT_EQ(cp.tasks, (std::vector<int>{4}));
}

TEST(Percentile, InterpolatesBetweenRanks) {
    EXPECT_EQ(percentile({}, 50), 0.0);
    EXPECT_EQ(percentile({7}, 95), 7.0);
    EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
    EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 95), 10.5);
    EXPECT_DOUBLE_EQ(percentile({1, 2, 3}, 100), 3.0);
    EXPECT_DOUBLE_EQ(percentile({1, 2, 3}, 0), 1.0);
}
