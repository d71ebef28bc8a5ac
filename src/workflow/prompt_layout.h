// Prompt layout: every task's prompt in one canonical order, so agents share the longest
// possible prefix (the seed's remedy for its most common pitfall, per-agent system prompts
// placed first, which leaves nothing to share):
//
//   system:  shared block 1 \n\n shared block 2 ... \n\n agent role
//   user:    the task's prompt, with its upstream outputs substituted
//
// rendered through the model's chat template (a ChatRenderer). Every task of the workflow
// then starts with the same tokens up to the end of the shared blocks; tasks of one agent
// share the role too, and tasks whose prompts start alike share further.
//
// Cache namespaces. The engine shares KV blocks only between requests with the same
// Request::cache_namespace, and its blocks are content-addressed (a block is reused only when
// the whole token prefix up to it is identical). So:
//   - the sharing scope is the namespace "{workflow name}:{prefix_version}": every task of a
//     run shares the shared context, and so do later runs with the same prefix version (the
//     rules, tools and documents stay warm across user requests);
//   - a new prefix_version (edited shared blocks give one automatically when the file does not
//     declare it) is a new namespace, so blocks cached under the old version are never
//     touched again and age out of the cache;
//   - private state cannot leak: a task's suffix (role, prompt, upstream outputs) is reused
//     only by a request whose tokens are identical up to that point, which then needs exactly
//     that KV.
// The seed's per-request key "{task}:{agent}:{prefixVersion}" (cache_key) identifies whose
// request it is; it is the request's tag and is written to the trace, not a sharing scope.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "workflow/workflow.h"

namespace troupe::workflow {

// One chat message; the same shape as the chat-template module's message, kept here so the
// layout does not depend on a renderer.
struct Message {
    std::string role;  // "system", "user" or "assistant"
    std::string content;
};

// Renders messages into the model's prompt text, ending with the generation prompt
// (e.g. the model's chat template with add_generation_prompt = true).
using ChatRenderer = std::function<std::string(const std::vector<Message>&)>;

using InputValues = std::map<std::string, std::string>;

// The workflow's input defaults overlaid with `overrides`. Throws troupe::Error naming an
// override that is not a declared input, or a required input (no default) left unset.
InputValues resolve_inputs(const Workflow& wf, const InputValues& overrides);

// What a finished task gives the tasks downstream of it.
struct UpstreamResult {
    std::string output;   // its output, or its fallback text
    bool failed = false;  // true when it fell back or was skipped
};

// The shared blocks with inputs substituted, joined by blank lines ("" if there are none).
std::string render_shared_context(const Workflow& wf, const InputValues& inputs);

// The system message's content for `agent`: the shared context, a blank line, the role.
std::string render_system(const Workflow& wf, int agent, const InputValues& inputs);

// The task's prompt with inputs and upstream results substituted. `upstream` is indexed by
// task and must hold an entry for every dependency of `task` (other entries are not read).
std::string render_task_prompt(const Workflow& wf, int task, const InputValues& inputs,
                               const std::vector<UpstreamResult>& upstream);

// The task's messages in canonical order: {system, user}.
std::vector<Message> layout_task(const Workflow& wf, int task, const InputValues& inputs,
                                 const std::vector<UpstreamResult>& upstream);

// "{workflow name}:{prefix_version}": the engine namespace all tasks of a run share.
std::string cache_namespace(const Workflow& wf);

// "{task}:{agent}:{prefix_version}": the seed's per-request cache key (tag and trace field).
std::string cache_key(const Workflow& wf, int task);

}  // namespace troupe::workflow
