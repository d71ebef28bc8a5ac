// A workflow: a team of agents described in a file (YAML, or JSON, which is YAML too).
//
// The file has five parts (docs/workflows.md is the full reference; examples/ has three):
//   name, description, prefix_version   identity and cache version
//   inputs      name -> default text (or {default, description}); overridable per run
//   defaults    agent settings applied to every agent before its own fields
//   shared      named context blocks (rules, tools, the request, documents), in a fixed order;
//               every agent's prompt starts with all of them, so all agents share that prefix
//   agents      name, role prompt, sampling, max_tokens, priority, timeout_s, retries, fallback
//   tasks       id, agent, prompt template, depends_on
//
// Templates (shared blocks, roles, task prompts) may reference {{inputs.NAME}}; task prompts
// may also reference {{TASK.output}} and {{TASK.failed}} of other tasks, which makes them
// dependencies (prompt_template.h).
//
// A Workflow returned by load_workflow() (workflow_loader.h) is validated: names are unique,
// every reference resolves, the dependency graph is acyclic, and `deps` / `topo_order` are
// filled in. It is immutable plain data afterwards.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "workflow/diagnostics.h"
#include "workflow/prompt_template.h"

namespace troupe::workflow {

struct Input {
    std::string name;
    std::optional<std::string> default_value;  // none: the run must provide it
    std::string description;
    SourceLoc loc;
};

struct SharedBlock {
    std::string name;
    PromptTemplate text;  // may reference inputs only
    SourceLoc loc;
};

// What a task produces when its agent fails for good (after its retries).
enum class FallbackKind {
    None,  // the task fails; tasks depending on it are blocked (not run)
    Text,  // the task's output becomes `text`; dependents run and see {{T.failed}} = true
    Skip,  // the task's output is empty; dependents run and see {{T.failed}} = true
};

struct Fallback {
    FallbackKind kind = FallbackKind::None;
    std::string text;  // kind == Text
};

// Settings an agent takes from `defaults:` and may override.
struct AgentSettings {
    SamplingParams sampling;
    int max_tokens = 128;
    int priority = 0;        // higher is admitted first and pre-empted last
    double timeout_s = 120;  // per attempt, from submission to the last token
    int retries = 0;         // extra attempts after a timeout or an error
    Fallback fallback;
    std::vector<std::string> stop;  // stop strings
};

struct Agent {
    std::string name;
    PromptTemplate role;  // may reference inputs only
    AgentSettings settings;
    SourceLoc loc;
};

struct Task {
    std::string id;
    std::string agent;
    PromptTemplate prompt;
    std::vector<std::string> depends_on;  // as written (explicit dependencies)
    std::optional<int> priority;          // overrides the agent's
    SourceLoc loc;
    SourceLoc agent_loc;       // of the `agent` value
    SourceLoc depends_on_loc;  // of the `depends_on` value

    // Filled in by validation.
    int agent_index = -1;
    std::vector<int> deps;  // task indices: explicit + referenced, sorted, unique
};

struct Workflow {
    std::string file;  // path it was loaded from (for messages)
    std::string name;  // default: the file's stem
    std::string description;
    // Cache version of the shared context. Declared in the file, or derived from a hash of the
    // shared blocks and roles ("h" + 16 hex digits), so editing the shared rules always gives a
    // new version.
    std::string prefix_version;
    std::vector<Input> inputs;
    std::vector<SharedBlock> shared;
    std::vector<Agent> agents;
    std::vector<Task> tasks;

    // Filled in by validation: every task index, dependencies first; ties keep file order.
    std::vector<int> topo_order;

    int find_task(std::string_view id) const;     // -1 when absent
    int find_agent(std::string_view name) const;  // -1 when absent
    int find_input(std::string_view name) const;  // -1 when absent
    int task_priority(int task) const;            // the task's own, else its agent's
    const Agent& agent_of(int task) const { return agents[size_t(tasks[task].agent_index)]; }
};

}  // namespace troupe::workflow
