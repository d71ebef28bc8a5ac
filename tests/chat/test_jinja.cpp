// The Jinja interpreter against Python's Jinja2: every snippet of tests/data/chat/snippets.json
// (one construct each: whitespace control, operators, filters, tests, methods, loops, scoping,
// macros, errors) renders byte for byte like Jinja2 did, or fails where Jinja2 failed - at parse
// time where Jinja2 failed to compile.
#include <gtest/gtest.h>

#include "chat/jinja_error.h"
#include "chat_fixtures.h"

namespace troupe {
namespace {

class SnippetTest : public ::testing::TestWithParam<std::string> {
  protected:
    static const nlohmann::ordered_json& snippets() {
        static const nlohmann::ordered_json data =
            test::load_chat_fixture("snippets.json").at("snippets");
        return data;
    }
    static const nlohmann::ordered_json& conversations() {
        static const nlohmann::ordered_json data = test::load_chat_fixture("conversations.json");
        return data;
    }

  public:
    static std::vector<std::string> names() {
        std::vector<std::string> out;
        for (const auto& [name, unused] : snippets().items()) out.push_back(name);
        return out;
    }
};

TEST_P(SnippetTest, MatchesJinja2) {
    const auto& s = snippets().at(GetParam());
    const std::string source = s.at("source").get<std::string>();
    SCOPED_TRACE("source: " + nlohmann::json(source).dump());
    ChatTemplateInputs in;
    in.bos_token = "<s>";
    in.eos_token = "</s>";
    in.extra_context = s.at("context");
    in.now = test::fixture_now(conversations());

    std::optional<ChatTemplate> tmpl;
    try {
        tmpl.emplace(ChatTemplate::from_source(source));
    } catch (const Error& e) {
        ASSERT_TRUE(s.contains("error")) << "parse failed: " << e.what();
        // Statements we do not support (include, import, ...) fail at parse time; Jinja2
        // compiles them and fails when it runs them (there is no template loader).
        const bool unsupported =
            std::string(e.what()).find("unsupported statement") != std::string::npos;
        if (!unsupported) {
            EXPECT_EQ(s.at("kind"), "compile") << "Jinja2 compiled it, we did not: " << e.what();
        }
        return;
    }
    if (s.contains("error") && s.at("kind") == "compile") {
        ADD_FAILURE() << "Jinja2 failed to compile (" << s.at("error").get<std::string>()
                      << "), we parsed it";
        return;
    }
    try {
        const std::string got = tmpl->render(in);
        ASSERT_FALSE(s.contains("error"))
            << "rendered " << nlohmann::json(got).dump()
            << " but Jinja2 failed: " << s.at("error").get<std::string>();
        const std::string want = s.at("output").get<std::string>();
        EXPECT_EQ(got, want) << test::first_difference(got, want);
    } catch (const jinja::TemplateRaised& e) {
        ASSERT_TRUE(s.contains("error")) << e.what();
        EXPECT_EQ(s.at("kind"), "raise_exception");
        EXPECT_EQ(e.message(), s.at("error").get<std::string>());
    } catch (const Error& e) {
        ASSERT_TRUE(s.contains("error")) << "render failed: " << e.what();
        EXPECT_EQ(s.at("kind"), "runtime") << e.what();
        if (GetParam() != "err_unknown_filter_in_if_run") {  // ours: "unknown filter 'frobnicate'"
            EXPECT_NE(std::string(e.what()).find(test::python_error_message(s.at("error"))),
                      std::string::npos)
                << "ours: " << e.what() << "\nJinja2: " << s.at("error").get<std::string>();
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Jinja2, SnippetTest, ::testing::ValuesIn(SnippetTest::names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                             return info.param;
                         });

}  // namespace
}  // namespace troupe
