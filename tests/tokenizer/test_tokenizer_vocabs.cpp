// Behaviour on real vocabularies (llama.cpp's vocab files): special tokens in chat markup,
// the end-of-generation sets, and streaming detokenization of characters split across tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab_cases.h"

namespace troupe {
namespace {

using Ids = std::vector<int32_t>;

class RealVocab : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!test::vocab_cache_dir()) GTEST_SKIP() << "no llama.cpp vocab cache";
    }
    static const Tokenizer& get(const std::string& name) {
        static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
        auto& t = loaded[name];
        if (!t) t = Tokenizer::from_gguf(*GgufFile::open(test::vocab_path(name).string()));
        return *t;
    }
};

bool contains(const Ids& ids, int32_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
}

TEST_F(RealVocab, ChatMarkupBecomesControlTokensOnlyWhenParsed) {
    const Tokenizer& t = get("qwen2");
    const std::string chat =
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n";
    const Ids parsed = t.tokenize(chat, true, true);
    ASSERT_FALSE(parsed.empty());
    EXPECT_EQ(parsed.front(), 151644);
    EXPECT_EQ(std::count(parsed.begin(), parsed.end(), 151645), 2);
    EXPECT_EQ(t.detokenize(parsed, true), chat);
    EXPECT_EQ(t.detokenize(parsed, false), "system\nBe brief.\nuser\nHi\n");
    const Ids plain = t.tokenize(chat, true, false);
    EXPECT_FALSE(contains(plain, 151644));
    EXPECT_FALSE(contains(plain, 151645));
    EXPECT_EQ(t.detokenize(plain), chat);
}

TEST_F(RealVocab, Llama3HeaderTokens) {
    const Tokenizer& t = get("llama-bpe");
    const Ids ids =
        t.tokenize("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", true, true);
    ASSERT_GE(ids.size(), 4u);
    EXPECT_EQ(ids[0], 128000);  // BOS: llama-bpe adds it
    EXPECT_EQ(ids[1], 128006);
    EXPECT_EQ(ids.back(), 128009);
    EXPECT_TRUE(t.is_eog(128009));
}

TEST_F(RealVocab, EndOfGenerationSets) {
    EXPECT_EQ(get("llama-spm").vocab().eog_ids(), (Ids{2}));
    EXPECT_EQ(get("llama-bpe").vocab().eog_ids(), (Ids{128001, 128009}));
    EXPECT_EQ(get("phi-3").vocab().eog_ids(), (Ids{2, 32000, 32007}));
    EXPECT_EQ(get("gpt-2").vocab().eog_ids(), (Ids{50256}));
    EXPECT_EQ(get("gemma-4").vocab().eog_ids(), (Ids{1, 50, 106}));
    const Tokenizer& qwen = get("qwen2");
    EXPECT_TRUE(qwen.is_eog(151643));  // <|endoftext|>
    EXPECT_TRUE(qwen.is_eog(151645));  // <|im_end|>
    EXPECT_FALSE(qwen.is_eog(151644));
    EXPECT_EQ(get("starcoder").vocab().eog_ids(), (Ids{0, 4}));  // <|endoftext|>, <fim_pad>
}

TEST_F(RealVocab, EndOfTurnTokens) {
    EXPECT_EQ(get("llama-bpe").eot(), 128009);  // <|eot_id|>
    EXPECT_EQ(get("qwen2").eot(), 151645);      // <|im_end|>
    EXPECT_EQ(get("phi-3").eot(), 32007);       // <|end|>
    EXPECT_EQ(get("deepseek-coder").eot(), 32014);
    EXPECT_EQ(get("llama-spm").eot(), -1);
}

// Streams the tokens of `text` one at a time; the pieces must be valid UTF-8, some must have
// been held back, and together they must give `expected`.
void expect_streams(const Tokenizer& t, const std::string& text, const std::string& expected) {
    const Ids ids = t.tokenize(text, false, false);
    StreamDecoder d(t);
    std::string out;
    size_t n_held = 0;
    for (const int32_t id : ids) {
        const std::string part = d.push(id);
        EXPECT_TRUE(utf8::is_valid(part));
        n_held += d.n_pending() > 0;
        out += part;
    }
    out += d.flush();
    EXPECT_EQ(out, expected) << t.vocab().pre_name();
    EXPECT_GT(n_held, 0u) << "no character was split across tokens; the test proves nothing";
}

TEST_F(RealVocab, StreamingNeverSplitsACharacter) {
    const std::string text =
        "Emoji 🦙🫠👩‍👩‍👧‍👦, rare CJK 龘靐齉 and "
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢.";
    expect_streams(get("qwen2"), text, text);
    expect_streams(get("llama-bpe"), text, text);
    expect_streams(get("gpt-2"), text, text);
    expect_streams(get("gemma-4"), text, text);
    expect_streams(get("llama-spm"), text, " " + text);  // SentencePiece's leading space stays
}

// Arbitrary bytes, mixed with pieces of chat markup, never break tokenization: ids are in range,
// streaming gives valid UTF-8, and SentencePiece with byte fallback gives the bytes back.
TEST_F(RealVocab, ArbitraryBytesNeverBreakTheTokenizer) {
    const std::vector<std::string> bits = {"<|im_start|>", "</s>", "<s>", "<|",
                                           "|>",           " ",    "\n",  "\xE2\x96",
                                           "\xF0\x9F\xA6", "a",    "é",   "1"};
    std::mt19937 rng(42);
    for (const char* name : {"llama-spm", "qwen2", "gemma-4", "deepseek-llm", "phi-3"}) {
        const Tokenizer& t = get(name);
        for (int round = 0; round < 150; ++round) {
            std::string text;
            const int n = int(rng() % 60);
            for (int i = 0; i < n; ++i) {
                if (rng() % 3 == 0)
                    text += bits[rng() % bits.size()];
                else
                    text.push_back(char(rng() % 256));
            }
            for (const bool special : {false, true}) {
                const Ids ids = t.tokenize(text, special, special);
                for (const int32_t id : ids) ASSERT_TRUE(id >= 0 && id < t.n_vocab()) << name;
                StreamDecoder d(t, special);
                std::string streamed;
                for (const int32_t id : ids) streamed += d.push(id);
                streamed += d.flush();
                EXPECT_TRUE(utf8::is_valid(streamed)) << name;
                EXPECT_NO_THROW(t.detokenize(ids, special));
            }
            // SentencePiece sizes a character by its lead byte (as llama.cpp does), so invalid
            // UTF-8 can swallow the escaped space that follows; valid text comes back whole.
            const std::string valid = utf8::sanitize(text);
            if (std::string(name) == "llama-spm" &&
                valid.find("\xE2\x96\x81") == std::string::npos) {
                EXPECT_EQ(t.detokenize(t.tokenize(valid, false, false)), valid);
            }
        }
    }
}

}  // namespace
}  // namespace troupe
