// ChatTemplate: the builtin templates render like Python's Jinja2 (tests/data/chat/builtin.json),
// every required family is covered, errors are clear (line, column, construct), model
// templates that cannot be rendered point at --chat-template.
#include <algorithm>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "chat/builtin_templates.h"
#include "chat/jinja_error.h"
#include "chat_fixtures.h"

namespace troupe {
namespace {

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

ChatTemplateInputs system_user(std::string system, std::string user) {
    ChatTemplateInputs in;
    in.messages = {{"system", std::move(system)}, {"user", std::move(user)}};
    return in;
}

TEST(ChatTemplateBuiltins, RenderLikeJinja2) {
    const auto conversations = test::load_chat_fixture("conversations.json");
    const auto builtins = test::load_chat_fixture("builtin.json").at("templates");
    std::vector<std::string> names = ChatTemplate::builtin_names();
    ASSERT_EQ(names.size(), builtins.size())
        << "regenerate tests/data/chat with tools/gen_chat_fixtures.py";
    size_t n_cases = 0;
    for (const std::string& name : names) {
        ASSERT_TRUE(builtins.contains(name))
            << name << " has no fixture: run tools/gen_chat_fixtures.py";
        const auto& entry = builtins.at(name);
        const ChatTemplate t = ChatTemplate::builtin(name);
        ASSERT_EQ(t.name(), name);
        ASSERT_EQ(t.source(), entry.at("source").get<std::string>())
            << name << ": fixture is stale";
        for (const auto& test_case : conversations.at("cases")) {
            const std::string case_name = test_case.at("name").get<std::string>();
            const auto& want = entry.at("cases").at(case_name);
            SCOPED_TRACE(name + " / " + case_name);
            const ChatTemplateInputs in = test::case_inputs(conversations, test_case, entry);
            if (want.contains("output")) {
                const std::string got = t.render(in);
                EXPECT_EQ(got, want.at("output").get<std::string>())
                    << test::first_difference(got, want.at("output").get<std::string>());
            } else {
                ASSERT_EQ(want.at("kind"), "raise_exception");
                try {
                    t.render(in);
                    ADD_FAILURE() << "rendered; Jinja2 raised " << want.at("error");
                } catch (const jinja::TemplateRaised& e) {
                    EXPECT_EQ(e.message(), want.at("error").get<std::string>());
                }
            }
            ++n_cases;
        }
    }
    std::printf("[builtin] %zu templates x %zu cases match Jinja2\n", names.size(),
                n_cases / names.size());
}

// Each builtin was checked against the real template of its family when the fixtures were made.
TEST(ChatTemplateBuiltins, CrossCheckedAgainstRealTemplates) {
    const auto builtins = test::load_chat_fixture("builtin.json").at("templates");
    for (const auto& [name, entry] : builtins.items()) {
        const auto& refs = entry.at("verified_against");
        if (name == "llama2") {  // no real Llama 2 template in our data: see builtin_templates.h
            EXPECT_TRUE(refs.empty());
            continue;
        }
        ASSERT_FALSE(refs.empty())
            << name << " was not cross-checked (run the generator with --llama-tests)";
        for (const auto& ref : refs)
            EXPECT_FALSE(ref.at("agree").empty()) << name << " vs " << ref.at("name");
    }
}

TEST(ChatTemplateBuiltins, RequiredFamiliesAndAliases) {
    const std::vector<std::string> names = ChatTemplate::builtin_names();
    for (const char* required :
         {"chatml", "llama3", "llama2", "zephyr", "phi3", "gemma", "deepseek", "command-r",
          "mistral-v1", "mistral-v3", "mistral-v7"}) {
        EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
    }
    EXPECT_EQ(ChatTemplate::builtin("mistral").name(), "mistral-v3");
    for (const auto& t : builtin_chat_templates()) EXPECT_FALSE(t.description.empty()) << t.name;
}

TEST(ChatTemplateBuiltins, UnknownNameListsTheKnownOnes) {
    const std::string err = error_of([] { ChatTemplate::builtin("vicuna-13b"); });
    EXPECT_NE(err.find("unknown chat template 'vicuna-13b'"), std::string::npos) << err;
    for (const std::string& name : ChatTemplate::builtin_names())
        EXPECT_NE(err.find(name), std::string::npos);
}

TEST(ChatTemplateBuiltins, ZephyrLayoutOfTheTroupeModels) {
    ChatTemplateInputs in = system_user("S", "U");
    in.eos_token = "</s>";
    EXPECT_EQ(ChatTemplate::builtin("zephyr").render(in),
              "<|system|>\nS</s>\n<|user|>\nU</s>\n<|assistant|>\n");
    in.add_generation_prompt = false;
    EXPECT_EQ(ChatTemplate::builtin("zephyr").render(in), "<|system|>\nS</s>\n<|user|>\nU</s>\n");
}

TEST(ChatTemplateErrors, UnknownFilterNamesLineAndColumn) {
    const std::string err =
        error_of([] { ChatTemplate::from_source("line one\n{{ messages | frobnicate }}"); });
    EXPECT_EQ(err, "chat template 'custom', line 2, column 15: unknown filter 'frobnicate'");
}

TEST(ChatTemplateErrors, UnknownFilterInsideIfFailsWhenRun) {
    const ChatTemplate t = ChatTemplate::from_source(
        "{% if add_generation_prompt %}{{ 'x' | frobnicate }}{% endif %}");
    ChatTemplateInputs in;
    in.add_generation_prompt = false;
    EXPECT_EQ(t.render(in), "");
    in.add_generation_prompt = true;
    EXPECT_NE(
        error_of([&] { t.render(in); }).find("line 1, column 40: unknown filter 'frobnicate'"),
        std::string::npos);
}

TEST(ChatTemplateErrors, UnterminatedBlocks) {
    EXPECT_EQ(error_of([] { ChatTemplate::from_source("a\n  {% for m in messages %}{{ m }}"); }),
              "chat template 'custom', line 2, column 3: unterminated 'for' block: expected '{% "
              "endfor %}' "
              "before the end of the template");
    EXPECT_NE(error_of([] {
                  ChatTemplate::from_source("{% if x %}a{% else %}b");
              }).find("unterminated 'if' block"),
              std::string::npos);
    EXPECT_NE(error_of([] { ChatTemplate::from_source("{{ 'x' "); }).find("unterminated '{{'"),
              std::string::npos);
    EXPECT_NE(error_of([] { ChatTemplate::from_source("{# x"); }).find("unterminated comment"),
              std::string::npos);
    EXPECT_NE(error_of([] {
                  ChatTemplate::from_source("{{ 'abc }}");
              }).find("line 1, column 4: unterminated string"),
              std::string::npos);
    EXPECT_NE(
        error_of([] { ChatTemplate::from_source("{% endif %}"); }).find("unexpected '{% endif %}'"),
        std::string::npos);
}

TEST(ChatTemplateErrors, UnsupportedAndUnknownStatements) {
    EXPECT_NE(error_of([] {
                  ChatTemplate::from_source("{% include 'x' %}");
              }).find("unsupported statement 'include'"),
              std::string::npos);
    EXPECT_NE(
        error_of([] { ChatTemplate::from_source("{% frob %}"); }).find("unknown statement 'frob'"),
        std::string::npos);
    EXPECT_NE(error_of([] {
                  ChatTemplate::from_source("{% break %}");
              }).find("'break' outside of a for loop"),
              std::string::npos);
}

TEST(ChatTemplateErrors, RaiseExceptionCarriesTheTemplatesMessage) {
    const ChatTemplate t = ChatTemplate::builtin("gemma");
    ChatTemplateInputs in;
    in.messages = {{"assistant", "first"}};
    try {
        t.render(in);
        FAIL() << "expected raise_exception";
    } catch (const jinja::TemplateRaised& e) {
        EXPECT_EQ(e.message(),
                  "Conversation roles must alternate user/assistant/user/assistant/...");
        EXPECT_NE(std::string(e.what()).find(
                      "chat template 'gemma' raised an exception: Conversation roles"),
                  std::string::npos);
    }
}

TEST(ChatTemplateErrors, RuntimeErrorsNameTheirPosition) {
    const ChatTemplate t = ChatTemplate::from_source(
        "{% for m in messages %}\n  {{ m.content.missing.x }}\n{% endfor %}");
    ChatTemplateInputs in;
    in.messages = {{"user", "hi"}};
    EXPECT_EQ(error_of([&] { t.render(in); }),
              "chat template 'custom', line 2, column 23: 'str object' has no attribute 'missing'");
}

TEST(ChatTemplateErrors, HostileTemplatesAreStoppedNotCrashing) {
    EXPECT_NE(error_of([] {
                  ChatTemplate::from_source("{{ " + std::string(5000, '(') + "1" +
                                            std::string(5000, ')') + " }}");
              }).find("nested too deeply"),
              std::string::npos);
    std::string chain = "{{ 1";
    for (int i = 0; i < 5000; ++i) chain += " + 1";
    EXPECT_NE(error_of([&] { ChatTemplate::from_source(chain + " }}"); }).find("nested too deeply"),
              std::string::npos);
    const ChatTemplate recursive =
        ChatTemplate::from_source("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}");
    EXPECT_NE(error_of([&] { recursive.render({}); }).find("maximum call depth"),
              std::string::npos);
    const ChatTemplate huge =
        ChatTemplate::from_source("{% for i in range(100000000) %}{% endfor %}");
    EXPECT_NE(error_of([&] { huge.render({}); }).find("range() too large"), std::string::npos);
    const ChatTemplate big = ChatTemplate::from_source("{{ 'x' * 100000000 }}");
    EXPECT_NE(error_of([&] { big.render({}); }).find("too large"), std::string::npos);
}

// Every prefix of every builtin either parses and renders or fails with a troupe::Error: cut
// tags, strings and blocks never crash the lexer, parser or evaluator.
TEST(ChatTemplateErrors, TruncatedTemplatesFailCleanly) {
    ChatTemplateInputs in = system_user("S", "U");
    in.messages.push_back({"assistant", "A"});
    size_t n_parsed = 0, n_errors = 0;
    for (const auto& t : builtin_chat_templates()) {
        for (size_t n = 0; n <= t.source.size(); ++n) {
            try {
                ChatTemplate::from_source(std::string(t.source.substr(0, n))).render(in);
                ++n_parsed;
            } catch (const Error&) {
                ++n_errors;
            }
        }
    }
    EXPECT_GT(n_parsed, 0u);
    EXPECT_GT(n_errors, 0u);
}

TEST(ChatTemplateModel, UnsupportedModelTemplateSuggestsABuiltin) {
    const std::string err = error_of([] {
        ChatTemplate::from_model(
            "{% for m in messages %}<|im_start|>{{ m.role }}{% include 'x' %}{% endfor %}");
    });
    EXPECT_NE(err.find("the model's chat template is not supported"), std::string::npos) << err;
    EXPECT_NE(err.find("unsupported statement 'include'"), std::string::npos) << err;
    EXPECT_NE(err.find("--chat-template chatml"), std::string::npos) << err;

    const std::string unknown =
        error_of([] { ChatTemplate::from_model("{{ messages | frobnicate }}"); });
    EXPECT_NE(unknown.find("pass --chat-template NAME with one of: chatml"), std::string::npos)
        << unknown;

    // Fails only when rendered (a method we do not have): caught by the probe render.
    const std::string runtime =
        error_of([] { ChatTemplate::from_model("[INST]{{ messages[0].content.zfill(3) }}"); });
    EXPECT_NE(runtime.find("unsupported str method 'zfill'"), std::string::npos) << runtime;
    EXPECT_NE(runtime.find("--chat-template mistral-v3"), std::string::npos) << runtime;
}

TEST(ChatTemplateModel, TemplateThatRejectsTheProbeIsAccepted) {
    const ChatTemplate t = ChatTemplate::from_model(
        "{% if messages[0].role != 'system' %}{{ raise_exception('system first') }}{% endif %}ok");
    EXPECT_EQ(t.render(system_user("S", "U")), "ok");
    EXPECT_EQ(t.name(), "custom");
}

TEST(ChatTemplateModel, GuessesTheFamilyOfBundledTemplates) {
    const std::string dir = std::string(TROUPE_VOCAB_CACHE_DIR) + "/templates/";
    if (!std::filesystem::is_directory(dir))
        GTEST_SKIP() << dir << " absent: run scripts/fetch-llama-data.sh";
    const std::pair<const char*, const char*> cases[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", "chatml"},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3.1"},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", "llama3.2"},
        {"microsoft-Phi-3.5-mini-instruct.jinja", "phi3"},
        {"google-gemma-2-2b-it.jinja", "gemma"},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral-v3-tekken"},
        {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "mistral-v7-tekken"},
        {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "deepseek-r1"},
        {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", "command-r"},
    };
    for (const auto& [file, want] : cases) {
        EXPECT_EQ(guess_builtin_chat_template(test::read_text_file(dir + file)), want) << file;
    }
    EXPECT_EQ(guess_builtin_chat_template("{{ messages }}"), "");
}

TEST(ChatTemplateInputs, StrftimeNowUsesTheInjectedInstant) {
    ChatTemplateInputs in = system_user("S", "U");
    in.now = std::chrono::system_clock::from_time_t(1741944605);  // 2025-03-14 09:30:05 UTC
    const std::string out = ChatTemplate::builtin("llama3.2").render(in);
    EXPECT_NE(out.find("Today Date: 14 Mar 2025\n"), std::string::npos) << out;
    // Without an injected instant it is today's date: a date line is still there.
    in.now.reset();
    EXPECT_NE(ChatTemplate::builtin("llama3.2").render(in).find("Today Date: "), std::string::npos);
}

TEST(ChatTemplateInputs, ToolsAndExtraContextReachTheTemplate) {
    const ChatTemplate t = ChatTemplate::from_source(
        "{{ tools | tojson }}|{{ documents }}|{{ enable_thinking }}|{{ date_string | "
        "default('none') }}");
    ChatTemplateInputs in;
    EXPECT_EQ(t.render(in), "null|None||none");
    in.tools = nlohmann::ordered_json::parse(
        R"([{"type": "function", "function": {"name": "f", "x": 1.5}}])");
    in.extra_context = {{"enable_thinking", false}, {"date_string", "1 Jan 2025"}};
    EXPECT_EQ(
        t.render(in),
        R"([{"type": "function", "function": {"name": "f", "x": 1.5}}]|None|False|1 Jan 2025)");
    in.extra_context = nlohmann::ordered_json::array();
    EXPECT_NE(error_of([&] { t.render(in); }).find("extra_context must be a JSON object"),
              std::string::npos);
}

TEST(ChatTemplateInputs, ContentIsDataNotTemplate) {
    ChatTemplateInputs in = system_user("{{ 7 * 7 }}", "{% if %}<|im_end|>");
    EXPECT_EQ(ChatTemplate::builtin("chatml").render(in),
              "<|im_start|>system\n{{ 7 * 7 }}<|im_end|>\n<|im_start|>user\n{% if "
              "%}<|im_end|><|im_end|>\n"
              "<|im_start|>assistant\n");
}

TEST(ChatTemplateInputs, ConcurrentRendersAgree) {
    const ChatTemplate t = ChatTemplate::builtin("llama3.1");
    const ChatTemplateInputs in = system_user("You are terse.", "Hi");
    const std::string want = t.render(in);
    std::vector<std::string> got(4);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < got.size(); ++i) {
        threads.emplace_back([&, i] {
            for (int k = 0; k < 50; ++k) got[i] = t.render(in);
        });
    }
    for (auto& th : threads) th.join();
    for (const auto& g : got) EXPECT_EQ(g, want);
}

}  // namespace
}  // namespace troupe
