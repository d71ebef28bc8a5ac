// `troupe lint`: how much of each task's prompt the prefix cache can share, measured in the
// model's own tokens, and warnings where the layout wastes it.
//
// Every task's prompt is laid out (prompt_layout.h) and rendered with the model's chat
// template; upstream outputs are not known before a run, so each {{T.output}} is replaced by
// the placeholder "[output of T]" and {{T.failed}} by "false". Then, per task:
//   prompt_tokens   the whole prompt
//   shared_tokens   the longest token prefix it has in common with any other task
//   reused_tokens   the longest prefix in common with a task that runs before it (dependency
//                   order), i.e. what the prefix cache can serve in a run
// Warnings:
//   - a task that diverges from every other task before the end of the shared context
//     (something, e.g. the chat template, puts per-task text first);
//   - little or no shared context;
//   - agents whose roles begin with the same long text (rules copied into every agent's
//     system prompt: the seed's most common pitfall; move them into a shared block);
//   - a long input placed in several tasks' prompts, after their prefixes diverge, so it is
//     encoded once per task instead of once per run;
//   - (given the model's context length, which `troupe run` uses) a task whose prompt plus
//     max_tokens does not fit even with empty upstream outputs: the engine will refuse it;
//     or that may not fit once its upstream outputs are in, each estimated at its agent's
//     max_tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "workflow/prompt_layout.h"
#include "workflow/workflow.h"

namespace troupe::workflow {

// Text -> token ids as the engine would tokenize a prompt (special tokens parsed, BOS added).
using Tokenize = std::function<std::vector<int32_t>(const std::string&)>;

struct LintTask {
    std::string id;
    std::string agent;
    int prompt_tokens = 0;
    int shared_tokens = 0;    // longest common prefix with any other task
    std::string shared_with;  // that task ("" if there is no other task)
    int reused_tokens = 0;    // longest common prefix with a task earlier in dependency order
    int min_prompt_tokens = 0;  // the prompt with every upstream output empty
    int max_prompt_tokens = 0;  // min_prompt_tokens + its upstream outputs' max_tokens (an
                                // estimate: an output's text may tokenize differently)
};

struct LintReport {
    int shared_context_tokens = 0;  // prompt tokens up to the end of the shared blocks
    std::vector<LintTask> tasks;    // in file order
    uint64_t total_prompt_tokens = 0;
    uint64_t total_reused_tokens = 0;
    std::vector<std::string> warnings;
};

// Warnings count texts of at least this many tokens as "long".
constexpr int kLintLongText = 32;

// context_length: the model's (tokens per sequence); 0 = unknown, not checked.
LintReport lint_workflow(const Workflow& wf, const InputValues& inputs, const ChatRenderer& render,
                         const Tokenize& tokenize, int context_length = 0);

// The report as a table and a list of warnings (trailing newline).
std::string format_lint(const Workflow& wf, const LintReport& report);

}  // namespace troupe::workflow
