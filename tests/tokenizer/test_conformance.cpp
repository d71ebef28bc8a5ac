// Conformance with llama.cpp on its tokenizer test vocabularies (models/ggml-vocab-*.gguf in
// .cache/llama-data/vocab), each vocabulary loaded once and checked four ways:
//  1. llama.cpp's own .inp/.out cases, tokenized as its tests/test-tokenizer-0 does
//     (add_special = false, parse_special = false);
//  2. data/llama_cpp_expected.tsv: what libllama gave for the stress texts in data/ (and the
//     shared held-out text) with every combination of add_special / parse_special, as token
//     counts and hashes of the ids and of the detokenized text (tools/gen_llama_expectations.sh);
//  3. round trips detokenize(tokenize(text)) == text over every input of every case file;
//  4. the same tokens from two threads at once.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "gguf/gguf.h"
#include "tokenizer/pieces.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_cases.h"
#include "util/error.h"

namespace troupe {
namespace {

namespace fs = std::filesystem;
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

uint64_t fnv(const void* data, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i)
        h = (h ^ static_cast<const uint8_t*>(data)[i]) * 1099511628211ull;
    return h;
}

// ---- 1. llama.cpp's .inp/.out cases

void check_cases(const Tokenizer& tok, const std::string& name) {
    const auto cases = read_vocab_cases(name);
    if (!cases) {
        std::printf("[ vocab    ] %-15s no .inp/.out cases\n", name.c_str());
        return;
    }
    size_t n_pass = 0;
    for (const auto& [text, expected] : *cases) {
        const std::vector<int32_t> got = tok.tokenize(text, false, false);
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

// ---- 2. libllama's results on the stress texts

struct Expectation {
    std::string file;
    bool parse_special = false, add_special = false;
    size_t n_tokens = 0;
    uint64_t ids = 0, detok = 0, detok_special = 0;
};

std::vector<Expectation> expectations_for(const std::string& vocab) {
    std::ifstream in(fs::path(TROUPE_SOURCE_DIR) / "tests/tokenizer/data/llama_cpp_expected.tsv");
    std::vector<Expectation> out;
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream f(line);
        std::string name, ids, d0, d1;
        Expectation e;
        f >> name >> e.file >> e.parse_special >> e.add_special >> e.n_tokens >> ids >> d0 >> d1;
        if (name != vocab) continue;
        e.ids = std::stoull(ids, nullptr, 16);
        e.detok = std::stoull(d0, nullptr, 16);
        e.detok_special = std::stoull(d1, nullptr, 16);
        out.push_back(e);
    }
    return out;
}

std::optional<std::string> read_text(const std::string& file) {
    for (const fs::path& dir : {fs::path(TROUPE_SOURCE_DIR) / "tests/tokenizer/data",
                                fs::path(TROUPE_SHARED_MODELS_DIR)}) {
        std::ifstream in(dir / file, std::ios::binary);
        if (in)
            return std::string(std::istreambuf_iterator<char>(in),
                               std::istreambuf_iterator<char>());
    }
    return std::nullopt;  // the shared held-out text may be absent
}

void check_stress_texts(const Tokenizer& tok, const std::string& name) {
    const std::vector<Expectation> expected = expectations_for(name);
    ASSERT_FALSE(expected.empty()) << "no expectations for " << name;
    size_t n_checked = 0;
    for (const Expectation& e : expected) {
        const auto text = read_text(e.file);
        if (!text) continue;
        const std::vector<int32_t> ids = tok.tokenize(*text, e.add_special, e.parse_special);
        const std::string d0 = tok.detokenize(ids, false), d1 = tok.detokenize(ids, true);
        const std::string where = name + " " + e.file +
                                  " parse_special=" + std::to_string(e.parse_special) +
                                  " add_special=" + std::to_string(e.add_special);
        EXPECT_EQ(ids.size(), e.n_tokens) << where;
        EXPECT_EQ(fnv(ids.data(), ids.size() * sizeof(int32_t)), e.ids) << where << ": token ids";
        EXPECT_EQ(fnv(d0.data(), d0.size()), e.detok) << where << ": detokenized";
        EXPECT_EQ(fnv(d1.data(), d1.size()), e.detok_special) << where << ": with specials";
        ++n_checked;
    }
    EXPECT_GE(n_checked, 8u);
    std::printf("[ vocab    ] %-15s %3zu / %3zu stress-text results equal libllama's\n",
                name.c_str(), n_checked, expected.size());
}

// ---- 3. round trips

// Every input of every case file, and text the case files do not have.
const std::set<std::string>& round_trip_corpus() {
    static const std::set<std::string> inputs = [] {
        std::set<std::string> s;
        for (const char* name : kTextVocabs)
            if (const auto cases = read_vocab_cases(name))
                for (const auto& c : *cases) s.insert(c.first);
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

void check_round_trips(const Tokenizer& tok, const std::string& name) {
    // Byte-level and byte-fallback vocabularies lose nothing; detokenize only applies the
    // vocabulary's own clean-up of spaces.
    const bool clean = tok.vocab().flags().clean_spaces;
    for (const std::string& text : round_trip_corpus()) {
        const std::vector<int32_t> ids = tok.tokenize(text, false, false);
        EXPECT_EQ(tok.detokenize(ids), clean ? clean_up_spaces(text) : text)
            << name << ": " << show_ids(ids);
    }
}

// ---- 4. threads

void check_threads(const Tokenizer& tok) {
    tok.clear_cache();
    const auto tokenize_all = [&] {
        std::vector<std::vector<int32_t>> r;
        for (const std::string& text : round_trip_corpus())
            r.push_back(tok.tokenize(text, true, true));
        return r;
    };
    std::vector<std::vector<int32_t>> a, b;
    std::thread ta([&] { a = tokenize_all(); });
    std::thread tb([&] { b = tokenize_all(); });
    ta.join();
    tb.join();
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, tokenize_all());
}

class VocabConformance : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabConformance, MatchesLlamaCpp) {
    if (!vocab_cache_dir())
        GTEST_SKIP() << "no llama.cpp vocab cache (scripts/fetch-llama-data.sh)";
    const std::string name = GetParam();
    const auto tok = load(name);
    check_cases(*tok, name);
    check_stress_texts(*tok, name);
    check_round_trips(*tok, name);
    check_threads(*tok);
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
