// troupe lint WORKFLOW [-m MODEL]: validates a workflow file; with a model, also reports per
// task how many prompt tokens it shares with the others and warns where the layout wastes the
// prefix cache (workflow/prompt_lint.h).
#include <cstdio>
#include <memory>

#include "commands.h"
#include "options.h"
#include "engine_factory.h"
#include "input_flags.h"
#include "workflow/prompt_lint.h"
#include "workflow/workflow_loader.h"

namespace troupe::cli {

namespace {

struct LintOptions {
    std::string workflow_path;
    std::string model_path;
    std::vector<std::string> inputs;
    bool strict = false;
};

// Exit code when --strict and there are warnings.
constexpr int kExitWarnings = 4;

int run_lint(const LintOptions& o) {
    const workflow::Workflow wf = workflow::load_workflow(o.workflow_path);
    const workflow::InputValues inputs = workflow::resolve_inputs(wf, parse_input_flags(o.inputs));
    if (o.model_path.empty()) {
        std::printf(
            "%s: valid (%zu inputs, %zu shared blocks, %zu agents, %zu tasks; prefix "
            "version %s)\n",
            o.workflow_path.c_str(), wf.inputs.size(), wf.shared.size(), wf.agents.size(),
            wf.tasks.size(), wf.prefix_version.c_str());
        std::printf("give -m MODEL to measure the shared prefixes in the model's tokens\n");
        return 0;
    }
    const ModelText text = load_model_text(o.model_path);
    const workflow::LintReport rep =
        workflow::lint_workflow(wf, inputs, text.render, text.tokenize, text.context_length);
    std::printf("%s", workflow::format_lint(wf, rep).c_str());
    return o.strict && !rep.warnings.empty() ? kExitWarnings : 0;
}

}  // namespace

void add_lint_command(CLI::App& app) {
    auto o = std::make_shared<LintOptions>();
    CLI::App* cmd = app.add_subcommand(
        "lint", "Check a workflow file; with -m, measure how much prompt the agents share");
    cmd->add_option("workflow", o->workflow_path, "Workflow file (YAML or JSON)")->required();
    add_model_option(cmd, o->model_path);
    cmd->add_option("--input", o->inputs, "Set an input: NAME=VALUE or NAME=@FILE (repeatable)");
    cmd->add_flag("--strict", o->strict, "Exit with code 4 when there are warnings");
    cmd->callback([o] {
        if (const int code = run_lint(*o)) throw CLI::RuntimeError(code);
    });
}

}  // namespace troupe::cli
