// The chat template the troupe models carry (tokenizer.chat_template of the bundled
// models/troupe-tiny-q8_0.gguf, TinyLlama's Zephyr template) renders exactly as the model card
// and llama-server say: "<|system|>\n{system}</s>\n<|user|>\n{user}</s>\n<|assistant|>\n", and
// like Python's Jinja2 on every fixture case (tests/data/chat/gguf.json).
#include <gtest/gtest.h>

#include "chat_fixtures.h"
#include "gguf/gguf.h"

namespace troupe {
namespace {

class ModelTemplateTest : public ::testing::Test {
  protected:
    void SetUp() override {
        gguf_ = GgufFile::open(std::string(TROUPE_SOURCE_DIR) + "/models/troupe-tiny-q8_0.gguf");
        source_ = gguf_->get_string("tokenizer.chat_template").value_or("");
        ASSERT_FALSE(source_.empty()) << "the bundled model has no tokenizer.chat_template";
        const auto tokens = gguf_->get_string_array("tokenizer.ggml.tokens").value();
        bos_ = std::string(
            tokens.at(static_cast<size_t>(gguf_->get_int("tokenizer.ggml.bos_token_id").value())));
        eos_ = std::string(
            tokens.at(static_cast<size_t>(gguf_->get_int("tokenizer.ggml.eos_token_id").value())));
    }
    std::unique_ptr<GgufFile> gguf_;
    std::string source_, bos_, eos_;
};

TEST_F(ModelTemplateTest, RendersTheModelCardLayout) {
    EXPECT_EQ(bos_, "<s>");
    EXPECT_EQ(eos_, "</s>");
    const ChatTemplate t = ChatTemplate::from_model(source_);
    ChatTemplateInputs in;
    in.messages = {{"system", "S"}, {"user", "U"}};
    in.bos_token = bos_;
    in.eos_token = eos_;
    EXPECT_EQ(t.render(in), "<|system|>\nS</s>\n<|user|>\nU</s>\n<|assistant|>\n");
    in.messages.push_back({"assistant", "A"});
    in.messages.push_back({"user", "U2"});
    EXPECT_EQ(t.render(in),
              "<|system|>\nS</s>\n<|user|>\nU</s>\n<|assistant|>\nA</s>\n<|user|>\nU2</"
              "s>\n<|assistant|>\n");
    EXPECT_EQ(guess_builtin_chat_template(source_), "zephyr");
}

TEST_F(ModelTemplateTest, MatchesJinja2AndTheZephyrBuiltin) {
    const auto conversations = test::load_chat_fixture("conversations.json");
    const auto fixture = test::load_chat_fixture("gguf.json");
    const auto& entry = fixture.at("templates").at("models/troupe-tiny-q8_0.gguf");
    ASSERT_EQ(test::fnv1a64_hex(source_), entry.at("fnv1a64").get<std::string>())
        << "model template changed";
    const ChatTemplate model = ChatTemplate::from_model(source_);
    const ChatTemplate zephyr = ChatTemplate::builtin("zephyr");
    for (const auto& test_case : conversations.at("cases")) {
        const std::string case_name = test_case.at("name").get<std::string>();
        SCOPED_TRACE(case_name);
        const ChatTemplateInputs in = test::case_inputs(conversations, test_case, entry);
        const std::string want = entry.at("cases").at(case_name).at("output").get<std::string>();
        const std::string got = model.render(in);
        EXPECT_EQ(got, want) << test::first_difference(got, want);
        EXPECT_EQ(zephyr.render(in), want);
    }
}

}  // namespace
}  // namespace troupe
