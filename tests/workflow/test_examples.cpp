// The bundled examples: they load, have the seed's shapes, carry a shared context of the
// intended size, and run to completion on a fake engine with the expected concurrency.
#include <gtest/gtest.h>

#include <string>

#include "fake_backend.h"
#include "workflow/prompt_layout.h"
#include "workflow/runtime.h"
#include "workflow/workflow_loader.h"

using namespace troupe;
using namespace troupe::workflow;

namespace {

Workflow load_example(const std::string& name) {
    return load_workflow(std::string(TROUPE_SOURCE_DIR) + "/examples/" + name + ".yaml");
}

std::string zephyr(const std::vector<Message>& msgs) {
    std::string out;
    for (const Message& m : msgs) out += "<|" + m.role + "|>\n" + m.content + "</s>\n";
    return out + "<|assistant|>\n";
}

// Runs on a fake engine; returns the largest number of requests that ran together.
int run_on_fake(const Workflow& wf, RunResult* out = nullptr) {
    troupe::testing::FakeClock clock;
    troupe::testing::FakeBackend backend(clock);
    RunOptions opt;
    opt.render = zephyr;
    opt.clock_ms = [&] { return clock(); };
    RunResult r = run_workflow(wf, backend, opt);
    EXPECT_TRUE(r.ok());
    if (out) *out = std::move(r);
    return backend.max_running_seen;
}

// The shared context's size, checked in characters: the examples' texts take 3.2 (many times
// and dates) to 3.7 characters per Llama-2 token, so 1,000 to 2,000 tokens is at least 3,200
// and at most 7,400 characters. (Measured with the Llama-2 vocabulary: 1,390, 1,204 and 1,106
// tokens with BOS for the writing pipeline, the assistant and the fan-out.)
void expect_shared_size(const Workflow& wf) {
    const size_t n = render_shared_context(wf, resolve_inputs(wf, {})).size();
    EXPECT_GE(n, 3200u) << wf.name;
    EXPECT_LE(n, 7400u) << wf.name;
}

}  // namespace

TEST(Examples, WritingPipeline) {
    const Workflow wf = load_example("writing-pipeline");
    ASSERT_EQ(wf.tasks.size(), 6u);
    EXPECT_EQ(wf.tasks[wf.find_task("review")].deps.size(), 3u);
    EXPECT_EQ(wf.task_priority(wf.find_task("summary")), 10);
    expect_shared_size(wf);
    EXPECT_EQ(run_on_fake(wf), 3);  // the three writers together
}

TEST(Examples, PersonalAssistant) {
    const Workflow wf = load_example("personal-assistant");
    ASSERT_EQ(wf.tasks.size(), 5u);
    EXPECT_EQ(wf.tasks[wf.find_task("summary")].deps.size(), 3u);
    expect_shared_size(wf);
    EXPECT_EQ(run_on_fake(wf), 3);  // calendar, email and restaurant together
}

TEST(Examples, FanOut) {
    const Workflow wf = load_example("fan-out");
    ASSERT_EQ(wf.tasks.size(), 9u);
    EXPECT_EQ(wf.tasks[wf.find_task("merge")].deps.size(), 8u);
    expect_shared_size(wf);
    RunResult r;
    EXPECT_EQ(run_on_fake(wf, &r), 8);  // eight specialists in one batch
    EXPECT_GT(r.summary.hit_rate, 0.5);
}
