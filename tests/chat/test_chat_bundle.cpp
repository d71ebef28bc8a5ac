// Every chat template of llama.cpp's bundle (.cache/llama-data/templates, fetched by
// scripts/fetch-llama-data.sh) renders byte for byte like Python's Jinja2 did when
// tools/gen_chat_fixtures.py wrote tests/data/chat/bundle.json. Skipped when the cache is absent.
#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "chat/jinja_error.h"
#include "chat_fixtures.h"

namespace troupe {
namespace {

class BundleTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = std::string(TROUPE_VOCAB_CACHE_DIR) + "/templates";
        if (!std::filesystem::is_directory(dir_))
            GTEST_SKIP() << dir_ << " absent: run scripts/fetch-llama-data.sh";
    }
    std::string dir_;
};

TEST_F(BundleTest, EveryTemplateRendersLikeJinja2) {
    const auto conversations = test::load_chat_fixture("conversations.json");
    const auto bundle = test::load_chat_fixture("bundle.json");
    int n_templates = 0, n_exact = 0, n_cases = 0, n_expected_errors = 0;
    std::map<std::string, std::string> failures;  // template -> first problem
    for (const auto& [file, entry] : bundle.at("templates").items()) {
        const std::string source = test::read_text_file(dir_ + "/" + file);
        if (source.empty()) {
            failures[file] = "missing from the cache";
            continue;
        }
        if (test::fnv1a64_hex(source) != entry.at("fnv1a64").get<std::string>()) {
            failures[file] =
                "differs from the template the fixtures were made from: rerun "
                "tools/gen_chat_fixtures.py";
            continue;
        }
        ++n_templates;
        std::string problem;
        std::optional<ChatTemplate> tmpl;
        try {
            tmpl.emplace(ChatTemplate::from_source(source));
        } catch (const Error& e) {
            problem = std::string("parse: ") + e.what();
        }
        for (const auto& test_case : conversations.at("cases")) {
            if (!problem.empty()) break;
            const std::string case_name = test_case.at("name").get<std::string>();
            const auto& want = entry.at("cases").at(case_name);
            ++n_cases;
            try {
                const std::string got =
                    tmpl->render(test::case_inputs(conversations, test_case, entry));
                if (want.contains("error")) {
                    problem = case_name + ": rendered, but Jinja2 failed with: " +
                              want.at("error").get<std::string>();
                } else if (got != want.at("output").get<std::string>()) {
                    problem = case_name + ": " +
                              test::first_difference(got, want.at("output").get<std::string>());
                }
            } catch (const jinja::TemplateRaised& e) {
                if (!want.contains("error") || want.at("kind") != "raise_exception" ||
                    e.message() != want.at("error")) {
                    problem = case_name + ": unexpected raise_exception: " + e.what();
                } else {
                    ++n_expected_errors;
                }
            } catch (const Error& e) {
                if (!want.contains("error") || want.at("kind") == "raise_exception") {
                    problem = case_name + ": " + e.what();
                } else if (std::string(e.what()).find(
                               test::python_error_message(want.at("error"))) == std::string::npos) {
                    problem = case_name +
                              ": failed like Jinja2 but for another reason: " + e.what() +
                              " (Jinja2: " + want.at("error").get<std::string>() + ")";
                } else {
                    ++n_expected_errors;
                }
            }
        }
        if (problem.empty()) {
            ++n_exact;
        } else {
            failures[file] = problem;
        }
    }
    std::printf(
        "[bundle] %d of %d templates render all %zu cases exactly (%d case renderings, %d expected "
        "errors)\n",
        n_exact, n_templates, conversations.at("cases").size(), n_cases, n_expected_errors);
    for (const auto& [file, problem] : failures) ADD_FAILURE() << file << ": " << problem;
}

}  // namespace
}  // namespace troupe
