#include "workflow/workflow_validate.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <queue>
#include <set>

namespace troupe::workflow {

namespace {

bool is_valid_name(const std::string& s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    return true;
}

// Reports names that are malformed or used twice among items of one kind.
template <class T>
void check_names(const std::vector<T>& items, std::string T::*name, const char* kind,
                 Diagnostics& diag) {
    std::map<std::string, const T*> seen;
    for (const T& it : items) {
        const std::string& n = it.*name;
        const std::string item = std::string(kind) + " '" + n + "'";
        if (!is_valid_name(n))
            diag.error(it.loc, item, "names are letters, digits, '_' and '-' (and not empty)");
        auto [pos, inserted] = seen.emplace(n, &it);
        if (!inserted)
            diag.error(it.loc, item,
                       "duplicate " + std::string(kind) + " (first defined at line " +
                           std::to_string(pos->second->loc.line) + ")");
    }
}

std::vector<std::string> names_of(const Workflow& wf, char kind) {
    std::vector<std::string> out;
    if (kind == 'i')
        for (const Input& i : wf.inputs) out.push_back(i.name);
    if (kind == 'a')
        for (const Agent& a : wf.agents) out.push_back(a.name);
    if (kind == 't')
        for (const Task& t : wf.tasks) out.push_back(t.id);
    return out;
}

// A reference's location: where it was written, else the item's own.
const SourceLoc& where(const TemplateRef& ref, const SourceLoc& fallback) {
    return ref.loc.line > 0 ? ref.loc : fallback;
}

// Shared blocks and roles are the same for every task, so they may only use inputs.
void check_input_only(const Workflow& wf, const PromptTemplate& t, const SourceLoc& loc,
                      const std::string& item, Diagnostics& diag) {
    for (const TemplateRef& ref : t.refs()) {
        if (ref.kind != TemplateRef::Kind::Input) {
            diag.error(where(ref, loc), item,
                       "'{{" + ref.str() +
                           "}}': shared blocks and roles may reference only inputs (they are "
                           "the same for every task); put task outputs in a task prompt");
        } else if (wf.find_input(ref.name) < 0) {
            diag.error(where(ref, loc), item,
                       "undefined input '{{" + ref.str() + "}}'" +
                           did_you_mean(ref.name, names_of(wf, 'i')));
        }
    }
}

// Resolves a task's agent, explicit dependencies and references into agent_index and deps.
void resolve_task(Workflow& wf, int ti, Diagnostics& diag) {
    Task& t = wf.tasks[size_t(ti)];
    const std::string item = "task '" + t.id + "'";
    t.agent_index = wf.find_agent(t.agent);
    if (t.agent_index < 0)
        diag.error(t.agent_loc.line ? t.agent_loc : t.loc, item,
                   "unknown agent '" + t.agent + "'" + did_you_mean(t.agent, names_of(wf, 'a')));
    std::set<int> deps;
    auto add_dep = [&](const std::string& id, const SourceLoc& loc, const std::string& what) {
        const int d = wf.find_task(id);
        if (d < 0) {
            diag.error(loc, item, what + did_you_mean(id, names_of(wf, 't')));
        } else if (d == ti) {
            diag.error(loc, item, "depends on itself (dependency cycle: " + id + " -> " + id + ")");
        } else {
            deps.insert(d);
        }
    };
    for (const std::string& d : t.depends_on)
        add_dep(d, t.depends_on_loc.line ? t.depends_on_loc : t.loc,
                "depends_on names an unknown task '" + d + "'");
    for (const TemplateRef& ref : t.prompt.refs()) {
        if (ref.kind == TemplateRef::Kind::Input) {
            if (wf.find_input(ref.name) < 0)
                diag.error(where(ref, t.loc), item,
                           "undefined input '{{" + ref.str() + "}}'" +
                               did_you_mean(ref.name, names_of(wf, 'i')));
            continue;
        }
        add_dep(ref.name, where(ref, t.loc),
                "'{{" + ref.str() + "}}' refers to an unknown task '" + ref.name + "'");
    }
    t.deps.assign(deps.begin(), deps.end());
}

std::vector<int> topological_order(const Workflow& wf) {
    std::vector<int> n_waiting(wf.tasks.size());
    std::vector<std::vector<int>> dependents(wf.tasks.size());
    for (size_t i = 0; i < wf.tasks.size(); ++i) {
        n_waiting[i] = int(wf.tasks[i].deps.size());
        for (int d : wf.tasks[i].deps) dependents[size_t(d)].push_back(int(i));
    }
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;  // file order
    for (size_t i = 0; i < wf.tasks.size(); ++i)
        if (n_waiting[i] == 0) ready.push(int(i));
    std::vector<int> order;
    while (!ready.empty()) {
        const int t = ready.top();
        ready.pop();
        order.push_back(t);
        for (int d : dependents[size_t(t)])
            if (--n_waiting[size_t(d)] == 0) ready.push(d);
    }
    return order;
}

}  // namespace

std::vector<int> find_cycle(const std::vector<std::vector<int>>& deps) {
    enum Color : uint8_t { White, Gray, Black };
    std::vector<Color> color(deps.size(), White);
    std::vector<std::pair<int, size_t>> stack;  // (node, next dependency to visit)
    for (size_t root = 0; root < deps.size(); ++root) {
        if (color[root] != White) continue;
        stack.push_back({int(root), 0});
        color[root] = Gray;
        while (!stack.empty()) {
            auto& [node, next] = stack.back();
            if (next == deps[size_t(node)].size()) {
                color[size_t(node)] = Black;
                stack.pop_back();
                continue;
            }
            const int d = deps[size_t(node)][next++];
            if (color[size_t(d)] == White) {
                color[size_t(d)] = Gray;
                stack.push_back({d, 0});
                continue;
            }
            if (color[size_t(d)] == Black) continue;
            // Back edge: the stack from d to the top is a chain of "depends on" edges.
            std::vector<int> cycle;
            size_t k = stack.size();
            while (stack[k - 1].first != d) --k;
            for (size_t j = k - 1; j < stack.size(); ++j) cycle.push_back(stack[j].first);
            std::reverse(cycle.begin(), cycle.end());  // data-flow order
            std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
            cycle.push_back(cycle.front());
            return cycle;
        }
    }
    return {};
}

std::string derive_prefix_version(const Workflow& wf) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a, 64 bit
    auto mix = [&](const std::string& s) {
        for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
        h = (h ^ 0xffu) * 1099511628211ull;  // separator: 0xff never occurs in UTF-8
    };
    for (const SharedBlock& b : wf.shared) {
        mix(b.name);
        mix(b.text.source());
    }
    char buf[24];
    std::snprintf(buf, sizeof buf, "h%016llx", (unsigned long long)h);
    return buf;
}

void validate_workflow(Workflow& wf, Diagnostics& diag) {
    const SourceLoc file_loc{wf.file, 1, 0};
    if (wf.name.empty()) diag.error(file_loc, "workflow", "'name' must not be empty");
    if (wf.agents.empty()) diag.error(file_loc, "workflow", "no agents: define at least one");
    if (wf.tasks.empty()) diag.error(file_loc, "workflow", "no tasks: define at least one");
    check_names(wf.inputs, &Input::name, "input", diag);
    check_names(wf.shared, &SharedBlock::name, "shared block", diag);
    check_names(wf.agents, &Agent::name, "agent", diag);
    check_names(wf.tasks, &Task::id, "task", diag);
    for (const Task& t : wf.tasks)
        if (t.id == "inputs")
            diag.error(t.loc, "task 'inputs'", "'inputs' is reserved for {{inputs.NAME}}");
    for (const SharedBlock& b : wf.shared)
        check_input_only(wf, b.text, b.loc, "shared block '" + b.name + "'", diag);
    for (const Agent& a : wf.agents)
        check_input_only(wf, a.role, a.loc, "agent '" + a.name + "'", diag);
    for (size_t i = 0; i < wf.tasks.size(); ++i) resolve_task(wf, int(i), diag);
    if (!diag.empty()) return;

    std::vector<std::vector<int>> deps;
    for (const Task& t : wf.tasks) deps.push_back(t.deps);
    const std::vector<int> cycle = find_cycle(deps);
    if (!cycle.empty()) {
        std::string path;
        for (int t : cycle) path += (path.empty() ? "" : " -> ") + wf.tasks[size_t(t)].id;
        const Task& first = wf.tasks[size_t(cycle.front())];
        diag.error(first.loc, "task '" + first.id + "'", "dependency cycle: " + path);
        return;
    }
    wf.topo_order = topological_order(wf);
    if (wf.prefix_version.empty()) wf.prefix_version = derive_prefix_version(wf);
}

}  // namespace troupe::workflow
