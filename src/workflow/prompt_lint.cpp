#include "workflow/prompt_lint.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace troupe::workflow {

namespace {

int common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return int(n);
}

// Upstream results as placeholders, so a prompt can be laid out before anything ran.
std::vector<UpstreamResult> placeholders(const Workflow& wf) {
    std::vector<UpstreamResult> up;
    for (const Task& t : wf.tasks) up.push_back({"[output of " + t.id + "]", false});
    return up;
}

std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
}

// Tokens of the rendered prompt up to the end of the shared context (0 if there is none or
// the template does not show it verbatim).
int shared_context_tokens(const Workflow& wf, const InputValues& inputs, const ChatRenderer& render,
                          const Tokenize& tokenize) {
    const std::string shared = render_shared_context(wf, inputs);
    if (shared.empty()) return 0;
    const std::string prompt = render(layout_task(wf, 0, inputs, placeholders(wf)));
    const size_t at = prompt.find(shared);
    if (at == std::string::npos) return 0;
    return int(tokenize(prompt.substr(0, at + shared.size())).size());
}

void warn_duplicated_roles(const Workflow& wf, const InputValues& inputs, const Tokenize& tokenize,
                           std::vector<std::string>& warnings) {
    std::vector<std::vector<int32_t>> roles;
    for (const Agent& a : wf.agents)
        roles.push_back(tokenize(a.role.render([&](const TemplateRef& r) {
            return inputs.count(r.name) ? inputs.at(r.name) : std::string();
        })));
    std::set<size_t> reported;
    for (size_t i = 0; i < roles.size(); ++i) {
        if (reported.count(i)) continue;
        std::vector<std::string> group = {wf.agents[i].name};
        int common = 0;
        for (size_t j = i + 1; j < roles.size(); ++j) {
            // Both tokenizations start with the same BOS; one token does not count.
            const int n = common_prefix(roles[i], roles[j]) - 1;
            if (n < kLintLongText) continue;
            common = common ? std::min(common, n) : n;
            group.push_back(wf.agents[j].name);
            reported.insert(j);
        }
        if (group.size() < 2) continue;
        warnings.push_back("agents " + join(group) + " begin their roles with the same " +
                           std::to_string(common) +
                           " tokens: text every agent needs belongs in a shared block, where it "
                           "is encoded once for all of them, not copied into each role");
    }
}

void warn_repeated_inputs(const Workflow& wf, const InputValues& inputs, const Tokenize& tokenize,
                          std::vector<std::string>& warnings) {
    std::map<std::string, std::set<std::string>> users;  // input -> tasks using it in the prompt
    for (const Task& t : wf.tasks)
        for (const TemplateRef& r : t.prompt.refs())
            if (r.kind == TemplateRef::Kind::Input) users[r.name].insert(t.id);
    for (const auto& [name, tasks] : users) {
        if (tasks.size() < 2) continue;
        const int n = int(tokenize(inputs.at(name)).size()) - 1;  // less BOS
        if (n < kLintLongText) continue;
        warnings.push_back("inputs." + name + " (" + std::to_string(n) +
                           " tokens) is in the prompts of tasks " +
                           join(std::vector<std::string>(tasks.begin(), tasks.end())) +
                           ", after the point where their prompts differ, so it is encoded for "
                           "each of them: put it in a shared block");
    }
}

// prompt + max_tokens of each task against the context length (see the header).
void warn_context_length(const Workflow& wf, const std::vector<LintTask>& tasks, int n_ctx,
                         std::vector<std::string>& warnings) {
    if (n_ctx <= 0) return;
    const std::string ctx = std::to_string(n_ctx);
    for (size_t t = 0; t < tasks.size(); ++t) {
        const LintTask& lt = tasks[t];
        const int gen = wf.agent_of(int(t)).settings.max_tokens;
        const std::string limit = ") exceed the model's context length (" + ctx + "): ";
        if (lt.min_prompt_tokens + gen > n_ctx) {
            const bool has_upstream = lt.max_prompt_tokens > lt.min_prompt_tokens;
            warnings.push_back(
                "task " + lt.id + ": its prompt (" + std::to_string(lt.min_prompt_tokens) +
                " tokens" + (has_upstream ? " with empty upstream outputs" : "") +
                ") and max_tokens (" + std::to_string(gen) + limit + "the engine will refuse it");
        } else if (lt.max_prompt_tokens + gen > n_ctx) {
            warnings.push_back("task " + lt.id +
                               ": with its upstream outputs at their agents' max_tokens, its "
                               "prompt (up to " +
                               std::to_string(lt.max_prompt_tokens) + " tokens) and max_tokens (" +
                               std::to_string(gen) + limit +
                               "it may be refused; lower the max_tokens or shorten the shared "
                               "context");
        }
    }
}

}  // namespace

LintReport lint_workflow(const Workflow& wf, const InputValues& inputs, const ChatRenderer& render,
                         const Tokenize& tokenize, int context_length) {
    LintReport rep;
    const std::vector<UpstreamResult> up = placeholders(wf);
    std::vector<std::vector<int32_t>> toks;
    std::vector<size_t> empty;  // prompt tokens with every upstream output empty
    for (size_t t = 0; t < wf.tasks.size(); ++t) {
        toks.push_back(tokenize(render(layout_task(wf, int(t), inputs, up))));
        const std::vector<UpstreamResult> none(wf.tasks.size());
        empty.push_back(context_length > 0
                            ? tokenize(render(layout_task(wf, int(t), inputs, none))).size()
                            : toks.back().size());
    }
    rep.shared_context_tokens = shared_context_tokens(wf, inputs, render, tokenize);

    std::vector<size_t> position(wf.tasks.size());
    for (size_t i = 0; i < wf.topo_order.size(); ++i) position[size_t(wf.topo_order[i])] = i;
    for (size_t t = 0; t < wf.tasks.size(); ++t) {
        LintTask lt;
        lt.id = wf.tasks[t].id;
        lt.agent = wf.tasks[t].agent;
        lt.prompt_tokens = int(toks[t].size());
        lt.min_prompt_tokens = int(empty[t]);
        lt.max_prompt_tokens = lt.min_prompt_tokens;
        for (const TemplateRef& r : wf.tasks[t].prompt.refs())
            if (r.kind == TemplateRef::Kind::Output)
                lt.max_prompt_tokens += wf.agent_of(wf.find_task(r.name)).settings.max_tokens;
        for (size_t o = 0; o < wf.tasks.size(); ++o) {
            if (o == t) continue;
            const int n = common_prefix(toks[t], toks[o]);
            if (lt.shared_with.empty() || n > lt.shared_tokens)
                lt.shared_tokens = n, lt.shared_with = wf.tasks[o].id;
            if (position[o] < position[t]) lt.reused_tokens = std::max(lt.reused_tokens, n);
        }
        rep.total_prompt_tokens += uint64_t(lt.prompt_tokens);
        rep.total_reused_tokens += uint64_t(lt.reused_tokens);
        if (wf.tasks.size() > 1 && rep.shared_context_tokens > 0 &&
            lt.shared_tokens < rep.shared_context_tokens - 1)  // one token of boundary slack
            rep.warnings.push_back(
                "task " + lt.id + ": its prompt differs from every other task's at token " +
                std::to_string(lt.shared_tokens) + ", inside the shared context (" +
                std::to_string(rep.shared_context_tokens) +
                " tokens): something per-task comes first, so the shared blocks are encoded "
                "again for it");
        rep.tasks.push_back(lt);
    }
    if (rep.shared_context_tokens == 0)
        rep.warnings.push_back(
            "no shared context: agents share at most the chat template's header; put the rules, "
            "tools and documents every agent needs in `shared`");
    else if (rep.shared_context_tokens < kLintLongText)
        rep.warnings.push_back("the shared context is short (" +
                               std::to_string(rep.shared_context_tokens) +
                               " tokens): little for the prefix cache to save");
    warn_duplicated_roles(wf, inputs, tokenize, rep.warnings);
    warn_repeated_inputs(wf, inputs, tokenize, rep.warnings);
    warn_context_length(wf, rep.tasks, context_length, rep.warnings);
    return rep;
}

std::string format_lint(const Workflow& wf, const LintReport& rep) {
    std::string out;
    char buf[256];
    std::snprintf(buf, sizeof buf, "workflow %s (prefix version %s): %zu tasks, %zu agents\n",
                  wf.name.c_str(), wf.prefix_version.c_str(), wf.tasks.size(), wf.agents.size());
    out += buf;
    std::snprintf(buf, sizeof buf,
                  "shared context: %d tokens (every task's prompt starts there)\n\n",
                  rep.shared_context_tokens);
    out += buf;
    std::snprintf(buf, sizeof buf, "  %-16s %-14s %7s %7s %-16s %7s %6s\n", "task", "agent",
                  "prompt", "shared", "(with)", "reused", "reuse");
    out += buf;
    for (const LintTask& t : rep.tasks) {
        const double pct = t.prompt_tokens ? 100.0 * t.reused_tokens / t.prompt_tokens : 0.0;
        std::snprintf(buf, sizeof buf, "  %-16s %-14s %7d %7d %-16s %7d %5.1f%%\n", t.id.c_str(),
                      t.agent.c_str(), t.prompt_tokens, t.shared_tokens, t.shared_with.c_str(),
                      t.reused_tokens, pct);
        out += buf;
    }
    const double total_pct = rep.total_prompt_tokens ? 100.0 * double(rep.total_reused_tokens) /
                                                           double(rep.total_prompt_tokens)
                                                     : 0.0;
    std::snprintf(buf, sizeof buf,
                  "\nprompt tokens: %llu; reusable from the prefix cache in dependency order: %llu "
                  "(%.1f%%)\n",
                  (unsigned long long)rep.total_prompt_tokens,
                  (unsigned long long)rep.total_reused_tokens, total_pct);
    out += buf;
    if (rep.warnings.empty()) return out + "no warnings\n";
    for (const std::string& w : rep.warnings) out += "warning: " + w + "\n";
    return out;
}

}  // namespace troupe::workflow
