// Conformance with llama.cpp on its own tokenizer test vocabularies (models/ggml-vocab-*.gguf
// with .inp/.out cases), tokenized as its tests/test-tokenizer-0 does: add_special = false,
// parse_special = false. Plus round trips detokenize(tokenize(text)) == text on every
// vocabulary, over the inputs of all the case files.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "gguf/gguf.h"
#include "tokenizer/pieces.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab_cases.h"
#include "util/error.h"

namespace troupe {
namespace {

using test::read_vocab_cases;
using test::vocab_cache_dir;
using test::vocab_path;

// Text-model vocabularies of llama.cpp's models/ folder, and the two embedding-model ones
// (WordPiece, Unigram) that Troupe does not support.
const char* const kTextVocabs[] = {
    "aquila",  "baichuan", "command-r", "deepseek-coder", "deepseek-llm", "falcon",
    "gemma-4", "gpt-2",    "gpt-neox",  "llama-bpe",      "llama-spm",    "mpt",
    "phi-3",   "qwen2",    "qwen35",    "refact",         "starcoder"};
const char* const kUnsupportedVocabs[] = {"bert-bge", "nomic-bert-moe"};

std::string show_ids(const std::vector<int32_t>& ids) {
    std::string s = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) s += ' ';
        s += std::to_string(ids[i]);
    }
    return s + "]";
}

std::unique_ptr<Tokenizer> load(const std::string& name) {
    const auto gguf = GgufFile::open(vocab_path(name).string());
    return Tokenizer::from_gguf(*gguf);
}

// Every input of every case file: the round-trip corpus.
const std::set<std::string>& all_inputs() {
    static const std::set<std::string> inputs = [] {
        std::set<std::string> s;
        for (const char* name : kTextVocabs)
            if (const auto cases = read_vocab_cases(name))
                for (const auto& c : *cases) s.insert(c.first);
        // Text that exercises what the case files do not: special-looking text, long runs.
        s.insert("<|im_start|>user\n</s><s> [INST] <<SYS>>\n");
        s.insert(std::string(3000, ' ') + "x" + std::string(2000, '\n') + std::string(100, '9'));
        s.insert(
            "naïve café — “quotes” ½ ① ٣ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 👩‍👩‍👧‍👦 🫠 한국어 "
            "日本語 "
            "עברית");
        return s;
    }();
    return inputs;
}

class VocabConformance : public ::testing::TestWithParam<const char*> {
  protected:
    void SetUp() override {
        if (!vocab_cache_dir())
            GTEST_SKIP() << "no llama.cpp vocab cache (run scripts/fetch-llama-data.sh)";
    }
};

TEST_P(VocabConformance, MatchesLlamaCppCases) {
    const std::string name = GetParam();
    const auto tok = load(name);
    const auto cases = read_vocab_cases(name);
    if (!cases) GTEST_SKIP() << name << " has no .inp/.out cases (load and round trip only)";
    size_t n_pass = 0;
    for (const auto& [text, expected] : *cases) {
        const std::vector<int32_t> got = tok->tokenize(text, false, false);
        if (got == expected) {
            ++n_pass;
        } else {
            ADD_FAILURE() << name << ": '" << text << "'\n  expected " << show_ids(expected)
                          << "\n  got      " << show_ids(got);
        }
    }
    std::printf("[ vocab    ] %-15s %3zu / %3zu llama.cpp cases pass\n", name.c_str(), n_pass,
                cases->size());
}

TEST_P(VocabConformance, RoundTrips) {
    const std::string name = GetParam();
    const auto tok = load(name);
    size_t n = 0;
    for (const std::string& text : all_inputs()) {
        // Byte-level and byte-fallback vocabularies lose nothing; detokenize only applies the
        // vocabulary's own space clean-up.
        const std::vector<int32_t> ids = tok->tokenize(text, false, false);
        const std::string want = tok->vocab().flags().clean_spaces ? clean_up_spaces(text) : text;
        EXPECT_EQ(tok->detokenize(ids), want) << name << ": " << show_ids(ids);
        ++n;
    }
    EXPECT_GT(n, 10u);
}

TEST_P(VocabConformance, SameTokensFromConcurrentThreads) {
    const std::string name = GetParam();
    const auto tok = load(name);
    const auto tokenize_all = [&] {
        std::vector<std::vector<int32_t>> r;
        for (const std::string& text : all_inputs()) r.push_back(tok->tokenize(text, true, true));
        return r;
    };
    const auto expected = tokenize_all();
    std::vector<std::vector<int32_t>> a, b;
    std::thread ta([&] { a = tokenize_all(); });
    std::thread tb([&] { b = tokenize_all(); });
    ta.join();
    tb.join();
    EXPECT_EQ(a, expected);
    EXPECT_EQ(b, expected);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, VocabConformance, ::testing::ValuesIn(kTextVocabs),
                         [](const auto& info) {
                             std::string s = info.param;
                             for (char& c : s)
                                 if (!isalnum(uint8_t(c))) c = '_';
                             return s;
                         });

TEST(VocabConformance, UnsupportedModelsAreNamed) {
    if (!vocab_cache_dir()) GTEST_SKIP() << "no llama.cpp vocab cache";
    for (const char* name : kUnsupportedVocabs) {
        try {
            load(name);
            ADD_FAILURE() << name << " loaded";
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find("is not supported"), std::string::npos) << msg;
        }
    }
}

}  // namespace
}  // namespace troupe
