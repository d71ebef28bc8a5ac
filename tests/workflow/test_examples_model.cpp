// The examples measured with the bundled model's own tokenizer and chat template: each shared
// context is 1,000 to 2,000 tokens, every task's prompt starts with all of it, and `troupe
// lint` has nothing to warn about.
#include <gtest/gtest.h>

#include <string>

#include "engine_factory.h"
#include "workflow/prompt_lint.h"
#include "workflow/workflow_loader.h"

using namespace troupe;
using namespace troupe::workflow;

namespace {
const std::string kModel = std::string(TROUPE_SOURCE_DIR) + "/models/troupe-tiny-q8_0.gguf";
}

class ExampleTokens : public ::testing::TestWithParam<const char*> {};

TEST_P(ExampleTokens, SharedContextSizeAndNoWarnings) {
    const Workflow wf =
        load_workflow(std::string(TROUPE_SOURCE_DIR) + "/examples/" + GetParam() + ".yaml");
    const cli::ModelText text = cli::load_model_text(kModel);
    const LintReport rep =
        lint_workflow(wf, resolve_inputs(wf, {}), text.render, text.tokenize, text.context_length);
    EXPECT_GE(rep.shared_context_tokens, 1000);
    EXPECT_LE(rep.shared_context_tokens, 2000);
    for (const LintTask& t : rep.tasks) EXPECT_GE(t.shared_tokens, rep.shared_context_tokens);
    for (const std::string& w : rep.warnings) ADD_FAILURE() << w;
    // The rendered prompt is the model's chat layout, starting with the shared rules.
    const std::string prompt = text.render(
        layout_task(wf, 0, resolve_inputs(wf, {}), std::vector<UpstreamResult>(wf.tasks.size())));
    EXPECT_EQ(prompt.rfind("<|system|>\nTeam rules.", 0) == 0 ||
                  prompt.rfind("<|system|>\nAssistant rules.", 0) == 0,
              true)
        << prompt.substr(0, 80);
    EXPECT_EQ(prompt.substr(prompt.size() - 15), "\n<|assistant|>\n");
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleTokens,
                         ::testing::Values("writing-pipeline", "personal-assistant", "fan-out"));
