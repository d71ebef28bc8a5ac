// Loading and validating workflow files: the schema, defaults, dependencies from references,
// and every kind of error with its file:line and item.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "util/error.h"
#include "workflow/prompt_layout.h"
#include "workflow/workflow_loader.h"
#include "workflow/workflow_validate.h"

using namespace troupe;
using namespace troupe::workflow;

namespace {

// A small valid workflow; tests edit copies of it. Line numbers matter: keep in sync.
const char* kValid = R"yaml(name: demo
prefix_version: v1
inputs:
  topic: the sea
  tone: {default: plain, description: how it reads}
defaults:
  sampling: {temperature: 0}
  max_tokens: 32
  timeout_s: 5
shared:
  - name: rules
    text: |
      Be brief.
  - name: request
    text: "Topic: {{inputs.topic}}"
agents:
  - name: planner
    role: You plan.
    priority: 2
    retries: 1
  - name: writer
    role: You write in a {{inputs.tone}} tone.
    max_tokens: 64
    sampling: {top_k: 5}
    fallback: {text: "(no section)"}
  - name: summariser
    role: You summarise.
    fallback: skip
tasks:
  - id: plan
    agent: planner
    prompt: Plan three sections about {{inputs.topic}}.
  - id: write_a
    agent: writer
    prompt: |
      Outline:
      {{plan.output}}
      Write section A.
  - id: write_b
    agent: writer
    prompt: Write section B.
    depends_on: [plan]
  - id: summary
    agent: summariser
    priority: 9
    prompt: "A: {{write_a.output}} (failed: {{write_a.failed}}) B: {{ write_b.output }}"
)yaml";

std::string replace(std::string s, const std::string& from, const std::string& to) {
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << "test bug: '" << from << "' not in the text";
    if (at != std::string::npos) s.replace(at, from.size(), to);
    return s;
}

// Parses `text` expecting failure; returns the error message.
std::string error_of(const std::string& text) {
    try {
        parse_workflow(text, "team.yaml");
    } catch (const Error& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected an error for:\n" << text;
    return "";
}

}  // namespace

TEST(WorkflowLoader, ParsesEverySection) {
    const Workflow wf = parse_workflow(kValid, "team.yaml");
    EXPECT_EQ(wf.name, "demo");
    EXPECT_EQ(wf.prefix_version, "v1");
    ASSERT_EQ(wf.inputs.size(), 2u);
    EXPECT_EQ(*wf.inputs[0].default_value, "the sea");
    EXPECT_EQ(wf.inputs[1].description, "how it reads");
    ASSERT_EQ(wf.shared.size(), 2u);
    EXPECT_EQ(wf.shared[0].name, "rules");
    EXPECT_EQ(wf.shared[0].text.source(), "Be brief.");  // the block's final newline is dropped
    EXPECT_EQ(wf.shared[1].text.refs().at(0).str(), "inputs.topic");

    ASSERT_EQ(wf.agents.size(), 3u);
    const AgentSettings& planner = wf.agents[0].settings;
    EXPECT_EQ(planner.max_tokens, 32);  // from defaults
    EXPECT_EQ(planner.sampling.temperature, 0.0f);
    EXPECT_EQ(planner.timeout_s, 5.0);
    EXPECT_EQ(planner.priority, 2);
    EXPECT_EQ(planner.retries, 1);
    EXPECT_EQ(planner.fallback.kind, FallbackKind::None);
    const AgentSettings& writer = wf.agents[1].settings;
    EXPECT_EQ(writer.max_tokens, 64);
    EXPECT_EQ(writer.sampling.top_k, 5);
    EXPECT_EQ(writer.sampling.temperature, 0.0f);  // defaults merge field by field
    EXPECT_EQ(writer.fallback.kind, FallbackKind::Text);
    EXPECT_EQ(writer.fallback.text, "(no section)");
    EXPECT_EQ(wf.agents[2].settings.fallback.kind, FallbackKind::Skip);

    ASSERT_EQ(wf.tasks.size(), 4u);
    EXPECT_EQ(wf.tasks[1].agent_index, 1);
    EXPECT_EQ(wf.tasks[1].deps, (std::vector<int>{0}));     // implied by {{plan.output}}
    EXPECT_EQ(wf.tasks[2].deps, (std::vector<int>{0}));     // explicit
    EXPECT_EQ(wf.tasks[3].deps, (std::vector<int>{1, 2}));  // implied, deduplicated
    EXPECT_EQ(wf.task_priority(3), 9);                      // the task's own
    EXPECT_EQ(wf.task_priority(0), 2);                      // its agent's
    EXPECT_EQ(wf.topo_order, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(cache_namespace(wf), "demo:v1");
    EXPECT_EQ(cache_key(wf, 1), "write_a:writer:v1");
}

TEST(WorkflowLoader, ReferencesRecordTheirLines) {
    const Workflow wf = parse_workflow(kValid, "team.yaml");
    const TemplateRef& ref = wf.tasks[1].prompt.refs().at(0);  // {{plan.output}} in a | block
    EXPECT_EQ(ref.loc.line, 37);
    EXPECT_EQ(ref.loc.column, 7);
}

TEST(WorkflowLoader, JsonIsAccepted) {
    const char* json = R"({
	"name": "j",
	"agents": [{"name": "a", "role": "You help.", "max_tokens": 8}],
	"tasks": [
		{"id": "t1", "agent": "a", "prompt": "Hello"},
		{"id": "t2", "agent": "a", "prompt": "Then {{t1.output}}"}
	]
})";
    const Workflow wf = parse_workflow(json, "team.json");
    EXPECT_EQ(wf.agents[0].settings.max_tokens, 8);
    EXPECT_EQ(wf.tasks[1].deps, (std::vector<int>{0}));
    EXPECT_EQ(wf.prefix_version.substr(0, 1), "h");  // derived

    const std::string e = error_of(replace(json, "\"max_tokens\": 8", "\"max_tokens\": \"8\""));
    EXPECT_NE(e.find("team.yaml:3:"), std::string::npos) << e;
    EXPECT_NE(e.find("must be an integer"), std::string::npos) << e;
}

TEST(WorkflowLoader, NameDefaultsToTheFileStem) {
    const Workflow wf = parse_workflow(replace(kValid, "name: demo\n", ""), "dir/my-team.yaml");
    EXPECT_EQ(wf.name, "my-team");
}

TEST(WorkflowLoader, DerivedPrefixVersionFollowsTheSharedBlocks) {
    const std::string base = replace(kValid, "prefix_version: v1\n", "");
    const Workflow a = parse_workflow(base, "t.yaml");
    const Workflow b = parse_workflow(base, "t.yaml");
    const Workflow c = parse_workflow(replace(base, "Be brief.", "Be very brief."), "t.yaml");
    const Workflow d = parse_workflow(replace(base, "You plan.", "You plan well."), "t.yaml");
    EXPECT_EQ(a.prefix_version, b.prefix_version);
    EXPECT_NE(a.prefix_version, c.prefix_version);  // shared rules changed: new version
    EXPECT_EQ(a.prefix_version, d.prefix_version);  // a role is not shared context
    EXPECT_EQ(a.prefix_version.size(), 17u);
}

TEST(WorkflowErrors, UnknownAgentNamesLineAndSuggests) {
    const std::string e = error_of(replace(kValid, "agent: summariser", "agent: sumariser"));
    EXPECT_NE(e.find("team.yaml:44:12:"), std::string::npos) << e;
    EXPECT_NE(e.find("task 'summary': unknown agent 'sumariser' (did you mean 'summariser'?)"),
              std::string::npos)
        << e;
}

TEST(WorkflowErrors, UndefinedInputReference) {
    const std::string e =
        error_of(replace(kValid, "about {{inputs.topic}}", "about {{inputs.topc}}"));
    EXPECT_NE(e.find("team.yaml:32:39:"), std::string::npos) << e;
    EXPECT_NE(e.find("task 'plan': undefined input '{{inputs.topc}}' (did you mean 'topic'?)"),
              std::string::npos)
        << e;
}

TEST(WorkflowErrors, UndefinedTaskReferenceInsideABlock) {
    const std::string e = error_of(replace(kValid, "{{plan.output}}", "{{plna.output}}"));
    EXPECT_NE(e.find("team.yaml:37:7: task 'write_a': '{{plna.output}}' refers to an unknown "
                     "task 'plna' (did you mean 'plan'?)"),
              std::string::npos)
        << e;
}

TEST(WorkflowErrors, UnknownDependency) {
    const std::string e =
        error_of(replace(kValid, "depends_on: [plan]", "depends_on: [plan, outline]"));
    EXPECT_NE(e.find("task 'write_b': depends_on names an unknown task 'outline'"),
              std::string::npos)
        << e;
}

TEST(WorkflowErrors, DuplicateIdsNameBothPlaces) {
    const std::string e = error_of(replace(kValid, "id: write_b", "id: write_a"));
    EXPECT_NE(e.find("team.yaml:39:5: task 'write_a': duplicate task (first defined at line 33)"),
              std::string::npos)
        << e;
    const std::string e2 = error_of(replace(kValid, "name: summariser", "name: writer"));
    EXPECT_NE(e2.find("agent 'writer': duplicate agent (first defined at line 21)"),
              std::string::npos)
        << e2;
    const std::string e3 = error_of(replace(kValid, "name: request", "name: rules"));
    EXPECT_NE(e3.find("shared block 'rules': duplicate shared block"), std::string::npos) << e3;
}

TEST(WorkflowErrors, BadTypesAndRanges) {
    EXPECT_NE(
        error_of(replace(kValid, "max_tokens: 64", "max_tokens: lots"))
            .find("team.yaml:23:17: agent 'writer': 'max_tokens' must be an integer, got lots"),
        std::string::npos);
    EXPECT_NE(error_of(replace(kValid, "max_tokens: 64", "max_tokens: 0"))
                  .find("'max_tokens' must be between 1 and 32768, got 0"),
              std::string::npos);
    EXPECT_NE(error_of(replace(kValid, "timeout_s: 5", "timeout_s: -1"))
                  .find("defaults: 'timeout_s' must be between 0.001 and 86400, got -1"),
              std::string::npos);
    EXPECT_NE(error_of(replace(kValid, "{top_k: 5}", "{top_k: 5, temperature: hot}"))
                  .find("agent 'writer' sampling: 'temperature' must be a number, got hot"),
              std::string::npos);
    EXPECT_NE(error_of(replace(kValid, "depends_on: [plan]", "depends_on: {plan: 1}"))
                  .find("task 'write_b': 'depends_on' must be a list, got a mapping"),
              std::string::npos);
    EXPECT_NE(error_of(replace(kValid, "fallback: skip", "fallback: later"))
                  .find("'fallback' must be skip, none or {text: ...}, got later"),
              std::string::npos);
    EXPECT_NE(error_of(replace(kValid, "role: You plan.", "role: [You, plan]"))
                  .find("agent 'planner': 'role' must be text, got a list"),
              std::string::npos);
}

TEST(WorkflowErrors, UnknownAndMissingKeys) {
    std::string e = error_of(replace(kValid, "depends_on: [plan]", "dependson: [plan]"));
    EXPECT_NE(e.find("team.yaml:42:5: task 'write_b': unknown key 'dependson' (did you mean "
                     "'depends_on'?)"),
              std::string::npos)
        << e;
    e = error_of(replace(kValid, "    role: You summarise.\n", ""));
    EXPECT_NE(e.find("agent 'summariser': missing required key 'role'"), std::string::npos) << e;
    e = error_of(replace(kValid, "prefix_version: v1", "prefix_versoin: v1"));
    EXPECT_NE(e.find("team.yaml:2:1: workflow: unknown key 'prefix_versoin'"), std::string::npos)
        << e;
    e = error_of(replace(kValid, "  max_tokens: 32\n", "  max_tokens: 32\n  max_tokens: 16\n"));
    EXPECT_NE(e.find("defaults: duplicate key 'max_tokens' (first at line 8)"), std::string::npos)
        << e;
}

TEST(WorkflowErrors, TemplateSyntaxPointsIntoTheBlock) {
    const std::string e =
        error_of(replace(kValid, "      Write section A.", "      Write {{section A."));
    EXPECT_NE(e.find("team.yaml:38:13: task 'write_a': in 'prompt': unclosed '{{'"),
              std::string::npos)
        << e;
    EXPECT_NE(error_of(replace(kValid, "{{plan.output}}", "{{plan.text}}"))
                  .find("unknown field 'text' in '{{plan.text}}'"),
              std::string::npos);
}

TEST(WorkflowErrors, SharedBlocksAndRolesTakeOnlyInputs) {
    const std::string e =
        error_of(replace(kValid, "Topic: {{inputs.topic}}", "Topic: {{plan.output}}"));
    EXPECT_NE(e.find("team.yaml:15:19: shared block 'request': '{{plan.output}}': shared blocks "
                     "and roles may reference only inputs"),
              std::string::npos)
        << e;
}

TEST(WorkflowErrors, CycleShowsItsPath) {
    // plan <- write_a <- summary <- plan
    const std::string text = replace(kValid, "prompt: Plan three sections about {{inputs.topic}}.",
                                     "prompt: Plan again after {{summary.output}}.");
    const std::string e = error_of(text);
    EXPECT_NE(e.find("team.yaml:30:5: task 'plan': dependency cycle: plan -> write_a -> summary "
                     "-> plan"),
              std::string::npos)
        << e;
}

TEST(WorkflowErrors, SelfDependency) {
    const std::string e = error_of(replace(kValid, "depends_on: [plan]", "depends_on: [write_b]"));
    EXPECT_NE(e.find("task 'write_b': depends on itself (dependency cycle: write_b -> write_b)"),
              std::string::npos)
        << e;
}

TEST(WorkflowErrors, SyntaxErrorsAndWrongShapes) {
    std::string e = error_of(replace(kValid, "  - name: writer\n", "  - name: [writer\n"));
    EXPECT_NE(e.find("team.yaml:"), std::string::npos) << e;
    EXPECT_NE(e.find("not valid YAML or JSON"), std::string::npos) << e;
    e = error_of("- just\n- a list\n");
    EXPECT_NE(e.find("team.yaml:1:1: workflow: the file must be a mapping"), std::string::npos)
        << e;
    e = error_of("name: x\nagents: []\ntasks: []\n");
    EXPECT_NE(e.find("no agents"), std::string::npos) << e;
    EXPECT_NE(e.find("no tasks"), std::string::npos) << e;
    e = error_of(replace(kValid, "id: plan", "id: \"plan now\""));
    EXPECT_NE(e.find("task 'plan now': names are letters, digits"), std::string::npos) << e;
}

TEST(WorkflowErrors, AllProblemsAreReportedTogether) {
    std::string text = replace(kValid, "agent: summariser", "agent: nobody");
    text = replace(text, "{{inputs.tone}}", "{{inputs.mood}}");
    const std::string e = error_of(text);
    EXPECT_NE(e.find("unknown agent 'nobody'"), std::string::npos) << e;
    EXPECT_NE(e.find("undefined input '{{inputs.mood}}'"), std::string::npos) << e;
    EXPECT_NE(e.find('\n'), std::string::npos) << "one line per problem";
}

TEST(WorkflowErrors, MissingFile) {
    try {
        load_workflow("/nonexistent/team.yaml");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cannot open workflow file '/nonexistent/team.yaml'"),
                  std::string::npos);
    }
}

TEST(WorkflowInputs, DefaultsOverridesAndRequired) {
    const Workflow wf = parse_workflow(kValid, "team.yaml");
    InputValues v = resolve_inputs(wf, {{"tone", "grand"}});
    EXPECT_EQ(v["topic"], "the sea");
    EXPECT_EQ(v["tone"], "grand");
    EXPECT_THROW(resolve_inputs(wf, {{"colour", "red"}}), Error);
    const Workflow req = parse_workflow(replace(kValid, "topic: the sea", "topic:"), "team.yaml");
    try {
        resolve_inputs(req, {});
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("input 'topic' has no default: give it with --input "
                                             "topic=..."),
                  std::string::npos)
            << e.what();
    }
    EXPECT_EQ(resolve_inputs(req, {{"topic", "rain"}})["topic"], "rain");
}

TEST(FindCycle, ReportsInDataFlowOrderFromTheLowestIndex) {
    // deps: 0 <- 2, 1 <- 0, 2 <- 1 : 0 feeds 1 feeds 2 feeds 0
    EXPECT_EQ(find_cycle({{2}, {0}, {1}}), (std::vector<int>{0, 1, 2, 0}));
    EXPECT_EQ(find_cycle({{}, {0}, {1}}), std::vector<int>{});
    EXPECT_EQ(find_cycle({{}, {1}}), (std::vector<int>{1, 1}));
    // A diamond is not a cycle.
    EXPECT_EQ(find_cycle({{}, {0}, {0}, {1, 2}}), std::vector<int>{});
    // The cycle is found behind an acyclic part.
    EXPECT_EQ(find_cycle({{}, {0, 3}, {1}, {2}}), (std::vector<int>{1, 2, 3, 1}));
}
