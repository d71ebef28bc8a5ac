// Checks for black-box tests of `troupe run` on a real model: under greedy sampling, the optimised
// run (prefix cache + continuous batching + shared-prefix attention) produces exactly the tokens of
// the baseline (one task at a time, no cache, no batching), and so does each lever alone.
// This holds only because every kernel computes a row the same way whatever its batch.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run_cli.h"

namespace troupe::test {

inline const char* const kExamples[] = {"writing-pipeline", "personal-assistant", "fan-out"};

inline std::string example(const std::string& name) {
    return std::string(TROUPE_SOURCE_DIR) + "/examples/" + name + ".yaml";
}

inline nlohmann::json run_json(std::vector<std::string> args) {
    args.insert(args.end(), {"-t", "2", "--json"});
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

// Every task's output in `a` equals the one in `b`; names the first task that differs.
inline void expect_same_outputs(const nlohmann::json& a, const nlohmann::json& b,
                                const std::string& what) {
    ASSERT_TRUE(a.contains("tasks") && b.contains("tasks")) << what;
    ASSERT_EQ(a["tasks"].size(), b["tasks"].size()) << what;
    for (const auto& [id, task] : a["tasks"].items()) {
        EXPECT_EQ(task.at("status"), "ok") << what << ": " << id;
        EXPECT_EQ(task.at("output"), b["tasks"].at(id).at("output")) << what << ": task " << id;
    }
}

inline void check_example_on(const std::string& model, const std::string& name) {
    SCOPED_TRACE(name);
    const nlohmann::json cmp = run_json({"run", example(name), "-m", model, "--compare-baseline"});
    ASSERT_FALSE(cmp.is_null());
    EXPECT_EQ(cmp.at("same_outputs"), true);
    expect_same_outputs(cmp, cmp.at("baseline"), name + ": optimised vs baseline");
    // The levers did work: the optimised run reused the shared context, the baseline did not.
    EXPECT_GT(cmp["summary"].at("hit_rate").get<double>(), 0.5);
    EXPECT_EQ(cmp["baseline"]["summary"].at("cached_tokens"), 0);
    // Each lever alone gives the same tokens as well.
    for (const char* lever : {"--no-prefix-cache", "--no-batching", "--no-shared-attention"}) {
        const nlohmann::json one = run_json({"run", example(name), "-m", model, lever});
        expect_same_outputs(one, cmp.at("baseline"), name + " with " + lever);
    }
}

}  // namespace troupe::test
