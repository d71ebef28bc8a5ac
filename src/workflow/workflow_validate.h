// Validation of a loaded workflow: names, uniqueness, references and the dependency graph.
#pragma once

#include <vector>

#include "workflow/diagnostics.h"
#include "workflow/workflow.h"

namespace troupe::workflow {

// Reports every problem to `diag` (unknown agent, undefined reference, duplicate name, bad
// name, a reference to a task output where only inputs are allowed, dependency cycles with
// their path). When there is none, fills Task::agent_index, Task::deps, Workflow::topo_order,
// and Workflow::prefix_version if the file did not declare one.
void validate_workflow(Workflow& wf, Diagnostics& diag);

// A cycle in the graph where deps[i] lists the nodes node i depends on, in data-flow order
// (each node feeds the next) and starting at its lowest index, the first node repeated at the
// end: {0, 1, 2, 0} means 0 feeds 1 feeds 2 feeds 0. Empty when the graph is acyclic.
std::vector<int> find_cycle(const std::vector<std::vector<int>>& deps);

// The default prefix_version: "h" + 16 hex digits of a hash of the shared blocks (names and
// text as written, in order).
std::string derive_prefix_version(const Workflow& wf);

}  // namespace troupe::workflow
