// The shared models' tokenizer (Llama-2 SentencePiece), through the bundled
// models/troupe-tiny-q8_0.gguf: llama-server's prompt tokens and generated text from
// ../shared/models/golden/reference.json, the model card's examples, and the held-out text's
// token count. Tests that need ../shared/models skip when it is absent.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab_cases.h"

namespace troupe {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;

const fs::path kBundled = fs::path(TROUPE_SOURCE_DIR) / "models" / "troupe-tiny-q8_0.gguf";
const fs::path kShared = fs::path(TROUPE_SHARED_MODELS_DIR);

class BundledModel : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        gguf_ = GgufFile::open(kBundled.string()).release();
        tok_ = Tokenizer::from_gguf(*gguf_).release();
    }
    static void TearDownTestSuite() {
        delete tok_;
        delete gguf_;
    }
    static GgufFile* gguf_;
    static Tokenizer* tok_;
};
GgufFile* BundledModel::gguf_ = nullptr;
Tokenizer* BundledModel::tok_ = nullptr;

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST_F(BundledModel, IsTheLlama2Vocabulary) {
    EXPECT_EQ(tok_->model_name(), "llama");
    EXPECT_EQ(tok_->n_vocab(), 32000);
    EXPECT_EQ(tok_->bos(), 1);
    EXPECT_EQ(tok_->eos(), 2);
    EXPECT_TRUE(tok_->add_bos());
    EXPECT_FALSE(tok_->add_eos());
    EXPECT_EQ(tok_->vocab().eog_ids(), Ids{2});
    EXPECT_EQ(tok_->token_text(29871), "▁");
    EXPECT_EQ(tok_->token_to_piece(13), "\n");  // <0x0A>
}

TEST_F(BundledModel, TextAfterASpecialTokenGetsALeadingSpace) {
    // MODEL_CARD.md: "</s>\n<|user|>" -> [2, 29871 ' ', 13 '\n', 29966 '<', ...]
    const Ids ids = tok_->tokenize("</s>\n<|user|>", false, true);
    ASSERT_GE(ids.size(), 4u);
    EXPECT_EQ((Ids{ids[0], ids[1], ids[2], ids[3]}), (Ids{2, 29871, 13, 29966}));
    // Without special parsing "</s>" is text.
    EXPECT_NE(tok_->tokenize("</s>\n<|user|>", false, false)[0], 2);
    EXPECT_EQ(tok_->tokenize("Hello world", true, false), (Ids{1, 15043, 3186}));
}

TEST_F(BundledModel, SameTokensAsLlamaCppsLlamaSpmVocabulary) {
    if (!test::vocab_cache_dir()) GTEST_SKIP() << "no llama.cpp vocab cache";
    const auto cases = test::read_vocab_cases("llama-spm");
    ASSERT_TRUE(cases.has_value());
    for (const auto& [text, expected] : *cases)
        EXPECT_EQ(tok_->tokenize(text, false, false), expected) << "'" << text << "'";
}

TEST_F(BundledModel, PromptsTokenizeAsLlamaServerDid) {
    const fs::path ref = kShared / "golden" / "reference.json";
    if (!fs::exists(ref)) GTEST_SKIP() << ref << " is absent";
    const auto j = nlohmann::json::parse(slurp(ref));
    size_t n = 0;
    for (const auto& c : j.at("cases")) {
        const std::string prompt = c.at("rendered_prompt");
        const Ids expected = c.at("prompt_tokens").get<Ids>();
        EXPECT_EQ(tok_->tokenize(prompt, true, true), expected) << c.at("model") << ": " << prompt;
        ++n;
    }
    EXPECT_GT(n, 0u);
}

TEST_F(BundledModel, StreamingGeneratedTokensGivesLlamaServersText) {
    const fs::path ref = kShared / "golden" / "reference.json";
    if (!fs::exists(ref)) GTEST_SKIP() << ref << " is absent";
    const auto j = nlohmann::json::parse(slurp(ref));
    for (const auto& c : j.at("cases")) {
        StreamDecoder d(*tok_);
        std::string text;
        for (const int32_t id : c.at("tokens").get<Ids>()) {
            const std::string part = d.push(id);
            EXPECT_TRUE(utf8::is_valid(part));
            text += part;
        }
        text += d.flush();
        EXPECT_EQ(text, c.at("text").get<std::string>()) << c.at("prompt");
    }
}

TEST_F(BundledModel, HeldOutTextHasTheModelCardsTokenCount) {
    const fs::path heldout = kShared / "heldout.txt";
    if (!fs::exists(heldout)) GTEST_SKIP() << heldout << " is absent";
    const std::string text = slurp(heldout);
    const Ids ids = tok_->tokenize(text, true, false);
    EXPECT_EQ(ids.size(), 48995u);  // MODEL_CARD.md: "48,995 tokens with BOS"
    EXPECT_EQ(tok_->detokenize(std::span(ids).subspan(1)), text);
    tok_->clear_cache();
    EXPECT_EQ(tok_->tokenize(text, true, false), ids);  // the word cache changes nothing
}

}  // namespace
}  // namespace troupe
