// `troupe run`'s logic (tools/cli/run_command.h) on a fake engine: the --json object, the
// trace file, --compare-baseline, exit codes and the labelled stream.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "fake_backend.h"
#include "run_command.h"
#include "util/error.h"

using namespace troupe;
using namespace troupe::cli;

namespace {

const std::string kExample = std::string(TROUPE_SOURCE_DIR) + "/examples/writing-pipeline.yaml";

std::string zephyr(const std::vector<workflow::Message>& msgs) {
    std::string out;
    for (const workflow::Message& m : msgs) out += "<|" + m.role + "|>\n" + m.content + "</s>\n";
    return out + "<|assistant|>\n";
}

// A factory of fake engines, each with its own clock; remembers the options it was given.
struct FakeFactory {
    std::vector<BackendOptions> seen;
    std::vector<std::unique_ptr<troupe::testing::FakeClock>> clocks;
    std::map<std::string, troupe::testing::FakeBackend::Script> scripts;

    BackendFactory get() {
        return [this](const BackendOptions& o) -> std::unique_ptr<InferenceBackend> {
            seen.push_back(o);
            clocks.push_back(std::make_unique<troupe::testing::FakeClock>());
            auto b = std::make_unique<troupe::testing::FakeBackend>(*clocks.back());
            for (const auto& [task, s] : scripts) b->script(task, s);
            return b;
        };
    }
};

struct Captured {
    int code = -1;
    std::string out;
};

Captured run(const RunCommandOptions& o, FakeFactory& f) {
    const ModelText text{zephyr, {}};
    FILE* out = std::tmpfile();
    Captured c;
    c.code = run_command(o, f.get(), text, out, nullptr);
    std::fflush(out);
    std::rewind(out);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, out)) > 0) c.out.append(buf, n);
    std::fclose(out);
    return c;
}

RunCommandOptions options() {
    RunCommandOptions o;
    o.workflow_path = kExample;
    o.model_path = "model.gguf";
    return o;
}

}  // namespace

TEST(RunCommand, JsonObjectAndTraceFile) {
    FakeFactory f;
    RunCommandOptions o = options();
    o.json = true;
    o.trace_path = ::testing::TempDir() + "/troupe_trace.jsonl";
    const Captured c = run(o, f);
    EXPECT_EQ(c.code, 0);
    const nlohmann::json j = nlohmann::json::parse(c.out);
    EXPECT_EQ(j["summary"]["mode"], "optimised");
    EXPECT_EQ(j["tasks"].size(), 6u);
    EXPECT_EQ(j["tasks"]["summary"]["agent"], "summariser");
    ASSERT_EQ(f.seen.size(), 1u);
    EXPECT_TRUE(f.seen[0].prefix_cache);
    EXPECT_EQ(f.seen[0].model_path, "model.gguf");

    std::ifstream trace(o.trace_path);
    std::string line;
    int n = 0;
    uint64_t prompt = 0;
    while (std::getline(trace, line)) {
        const nlohmann::json r = nlohmann::json::parse(line);
        prompt += r["promptTokens"].get<uint64_t>();
        ++n;
    }
    EXPECT_EQ(n, 6);
    EXPECT_EQ(prompt, j["summary"]["prompt_tokens"].get<uint64_t>());
}

TEST(RunCommand, CompareBaselineReportsSpeedupAndSameOutputs) {
    FakeFactory f;
    RunCommandOptions o = options();
    o.compare_baseline = true;
    o.json = true;
    const Captured c = run(o, f);
    EXPECT_EQ(c.code, 0);
    const nlohmann::json j = nlohmann::json::parse(c.out);
    EXPECT_EQ(j["summary"]["mode"], "optimised");
    EXPECT_EQ(j["baseline"]["summary"]["mode"], "baseline");
    EXPECT_EQ(j["same_outputs"], true);
    EXPECT_GT(j["speedup"].get<double>(), 0.0);  // real time on a fake engine: any value
    ASSERT_EQ(f.seen.size(), 2u);
    EXPECT_FALSE(f.seen[0].prefix_cache);  // the baseline runs first
    EXPECT_FALSE(f.seen[0].batching);
    EXPECT_TRUE(f.seen[1].prefix_cache);

    o.repeat = 3;
    const nlohmann::json r3 = nlohmann::json::parse(run(o, f).out);
    EXPECT_EQ(r3["runs"]["baseline_wall_ms"].size(), 3u);
    EXPECT_EQ(r3["runs"]["optimised_wall_ms"].size(), 3u);
    EXPECT_EQ(f.seen.size(), 2u + 6u);

    o.json = false;
    o.repeat = 1;
    const Captured text = run(o, f);
    EXPECT_NE(text.out.find("speed-up: "), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("outputs: identical in both runs"), std::string::npos) << text.out;
}

TEST(RunCommand, CompareBaselineClaimsNoSpeedupWhenTasksFail) {
    FakeFactory f;
    f.scripts["plan"] = {.fail_attempts = 10};  // fails in both runs; its dependents block
    RunCommandOptions o = options();
    o.compare_baseline = true;
    o.json = true;
    const Captured c = run(o, f);
    EXPECT_EQ(c.code, kExitTasksFailed);
    const nlohmann::json j = nlohmann::json::parse(c.out);
    EXPECT_TRUE(j["speedup"].is_null()) << j["speedup"];
    o.json = false;
    const Captured text = run(o, f);
    EXPECT_NE(text.out.find("speed-up: not measured, tasks did not finish ok (optimised 6 of 6, "
                            "baseline 6 of 6)"),
              std::string::npos)
        << text.out;
}

TEST(RunCommand, LabelledStreamAndFailureExitCode) {
    FakeFactory f;
    f.scripts["plan"] = {.fail_attempts = 10};  // the planner has no fallback
    RunCommandOptions o = options();
    o.no_batching = true;
    const Captured c = run(o, f);
    EXPECT_EQ(c.code, kExitTasksFailed);
    EXPECT_FALSE(f.seen[0].batching);
    EXPECT_TRUE(f.seen[0].prefix_cache);
    EXPECT_NE(c.out.find("[plan] retry 1"), std::string::npos) << c.out;
    EXPECT_NE(c.out.find("[plan] failed in"), std::string::npos) << c.out;
    EXPECT_NE(c.out.find("[summary] blocked"), std::string::npos) << c.out;
    EXPECT_NE(c.out.find("mode                    no-batching"), std::string::npos) << c.out;
}

TEST(RunCommand, BadInputsFailBeforeTheModelLoads) {
    FakeFactory f;
    RunCommandOptions o = options();
    o.inputs = {"colour=red"};
    EXPECT_THROW(run(o, f), Error);
    o.inputs = {"request"};
    EXPECT_THROW(run(o, f), Error);
    o.inputs = {};
    o.compare_baseline = o.baseline = true;
    EXPECT_THROW(run(o, f), Error);
    EXPECT_TRUE(f.seen.empty());
}
