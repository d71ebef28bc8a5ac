#include "workflow/prompt_layout.h"

#include "util/error.h"

namespace troupe::workflow {

namespace {

std::string input_value(const InputValues& inputs, const TemplateRef& ref) {
    const auto it = inputs.find(ref.name);
    // Validation guarantees every referenced input is declared, and resolve_inputs() gives
    // every declared input a value; a caller passing other values gets a clear message.
    if (it == inputs.end()) throw Error("no value for input '" + ref.name + "'");
    return it->second;
}

std::string render_inputs_only(const PromptTemplate& t, const InputValues& inputs) {
    return t.render([&](const TemplateRef& ref) { return input_value(inputs, ref); });
}

}  // namespace

InputValues resolve_inputs(const Workflow& wf, const InputValues& overrides) {
    InputValues values;
    for (const auto& [name, value] : overrides) {
        if (wf.find_input(name) >= 0) continue;
        std::string declared;
        for (const Input& in : wf.inputs) declared += (declared.empty() ? "" : ", ") + in.name;
        throw Error("workflow '" + wf.name + "' has no input '" + name +
                    "' (inputs: " + (declared.empty() ? std::string("none") : declared) + ")");
    }
    for (const Input& in : wf.inputs) {
        const auto it = overrides.find(in.name);
        if (it != overrides.end()) {
            values[in.name] = it->second;
        } else if (in.default_value) {
            values[in.name] = *in.default_value;
        } else {
            throw Error(in.loc.str() + ": input '" + in.name +
                        "' has no default: give it with --input " + in.name + "=...");
        }
    }
    return values;
}

std::string render_shared_context(const Workflow& wf, const InputValues& inputs) {
    std::string out;
    for (const SharedBlock& b : wf.shared) {
        if (!out.empty()) out += "\n\n";
        out += render_inputs_only(b.text, inputs);
    }
    return out;
}

std::string render_system(const Workflow& wf, int agent, const InputValues& inputs) {
    std::string out = render_shared_context(wf, inputs);
    if (!out.empty()) out += "\n\n";
    out += render_inputs_only(wf.agents[size_t(agent)].role, inputs);
    return out;
}

std::string render_task_prompt(const Workflow& wf, int task, const InputValues& inputs,
                               const std::vector<UpstreamResult>& upstream) {
    const Task& t = wf.tasks[size_t(task)];
    return t.prompt.render([&](const TemplateRef& ref) -> std::string {
        if (ref.kind == TemplateRef::Kind::Input) return input_value(inputs, ref);
        const int dep = wf.find_task(ref.name);
        TROUPE_CHECK(dep >= 0 && size_t(dep) < upstream.size());
        const UpstreamResult& r = upstream[size_t(dep)];
        if (ref.kind == TemplateRef::Kind::Failed) return r.failed ? "true" : "false";
        return r.output;
    });
}

std::vector<Message> layout_task(const Workflow& wf, int task, const InputValues& inputs,
                                 const std::vector<UpstreamResult>& upstream) {
    return {{"system", render_system(wf, wf.tasks[size_t(task)].agent_index, inputs)},
            {"user", render_task_prompt(wf, task, inputs, upstream)}};
}

std::string cache_namespace(const Workflow& wf) {
    return wf.name + ":" + wf.prefix_version;
}

std::string cache_key(const Workflow& wf, int task) {
    const Task& t = wf.tasks[size_t(task)];
    return t.id + ":" + t.agent + ":" + wf.prefix_version;
}

}  // namespace troupe::workflow
