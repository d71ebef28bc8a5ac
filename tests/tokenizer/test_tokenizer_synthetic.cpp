// Tokenizers on small vocabularies written for the test: merge order and ties, byte fallback,
// special tokens, end-of-generation detection, detokenization, streaming, and every way a
// vocabulary can be bad.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tokenizer/gguf_builder.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace troupe {
namespace {

using test::GgufBuilder;
using test::GgufImage;
using Ids = std::vector<int32_t>;

// ---- a SentencePiece vocabulary

constexpr int32_t kByte0 = 3;  // <0x00> .. <0xFF> are ids 3..258
constexpr int32_t kSpace = 259, kA = 260, kB = 261, kC = 262, kAB = 263, kBC = 264;
constexpr int32_t kSpaceA = 265, kABC = 266, kUser = 267, kAA = 268;

GgufBuilder spm_vocab(bool add_space_prefix = true, const std::string& name = "test") {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<float> scores = {0, 0, 0};
    std::vector<int32_t> types = {2, 3, 3};
    for (int b = 0; b < 256; ++b) {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
        tokens.push_back(hex);
        scores.push_back(0);
        types.push_back(6);
    }
    const std::vector<std::pair<std::string, float>> normal = {{"▁", -1},  {"a", -2},  {"b", -2},
                                                               {"c", -2},  {"ab", -3}, {"bc", -1},
                                                               {"▁a", -4}, {"abc", -5}};
    for (const auto& [t, s] : normal) {
        tokens.push_back(t);
        scores.push_back(s);
        types.push_back(1);
    }
    tokens.push_back("<|user|>");
    scores.push_back(0);
    types.push_back(4);
    tokens.push_back("aa");
    scores.push_back(-6);
    types.push_back(1);
    GgufBuilder g;
    g.str("general.name", name)
        .str("tokenizer.ggml.model", "llama")
        .strings("tokenizer.ggml.tokens", tokens)
        .f32s("tokenizer.ggml.scores", scores)
        .i32s("tokenizer.ggml.token_type", types)
        .u32("tokenizer.ggml.bos_token_id", 1)
        .u32("tokenizer.ggml.eos_token_id", 2)
        .u32("tokenizer.ggml.unknown_token_id", 0)
        .boolean("tokenizer.ggml.add_space_prefix", add_space_prefix);
    return g;
}

struct Loaded {
    GgufImage image;
    std::unique_ptr<Tokenizer> tok;
    explicit Loaded(const GgufBuilder& b) : image(b), tok(Tokenizer::from_gguf(*image.file)) {}
    const Tokenizer* operator->() const { return tok.get(); }
};

TEST(SpmSynthetic, MergesTheHighestScoreFirst) {
    const Loaded t(spm_vocab());
    // "▁abc": bc (-1) beats ab (-3) and ▁a (-4); then ▁a; "▁abc" is not a token.
    EXPECT_EQ(t->tokenize("abc", false, false), (Ids{kSpaceA, kBC}));
    EXPECT_EQ(t->tokenize("abc", true, false), (Ids{1, kSpaceA, kBC}));
}

TEST(SpmSynthetic, EqualScoresMergeLeftmostFirst) {
    const Loaded t(spm_vocab(false));
    EXPECT_EQ(t->tokenize("aaa", false, false), (Ids{kAA, kA}));
    EXPECT_EQ(t->tokenize("aaaa", false, false), (Ids{kAA, kAA}));
}

TEST(SpmSynthetic, FallsBackToByteTokens) {
    const Loaded t(spm_vocab());
    EXPECT_EQ(t->tokenize("é", false, false), (Ids{kSpace, kByte0 + 0xC3, kByte0 + 0xA9}));
    EXPECT_EQ(t->detokenize(Ids{kSpace, kByte0 + 0xC3, kByte0 + 0xA9}), "é");
}

TEST(SpmSynthetic, SpecialTokensAndTheSpaceAfterThem) {
    const Loaded t(spm_vocab());
    // User-defined tokens are matched even without parse_special; the text after a special
    // token gets SentencePiece's leading space.
    EXPECT_EQ(t->tokenize("<|user|>ab", false, false), (Ids{kUser, kSpace, kAB}));
    EXPECT_EQ(t->tokenize("ab</s>ab", false, true), (Ids{kSpace, kAB, 2, kSpace, kAB}));
    const Ids plain = t->tokenize("</s>", false, false);
    EXPECT_EQ(plain.size(), 5u);  // "▁" then the bytes of "</s>"
    EXPECT_EQ(t->detokenize(plain), "</s>");
}

TEST(SpmSynthetic, PiecesAndDetokenize) {
    const Loaded t(spm_vocab());
    EXPECT_EQ(t->token_to_piece(1), "");
    EXPECT_EQ(t->token_to_piece(1, true), "<s>");
    EXPECT_EQ(t->token_to_piece(0), "");
    EXPECT_EQ(t->token_to_piece(kByte0 + 'A'), "A");
    EXPECT_EQ(t->token_to_piece(kSpaceA), " a");
    EXPECT_EQ(t->token_to_piece(kUser), "<|user|>");
    EXPECT_EQ(t->detokenize(Ids{kSpaceA, kBC}), "abc");  // SentencePiece's space removed
    // As llama_detokenize: only the first token loses its space, even if it renders empty.
    EXPECT_EQ(t->detokenize(Ids{1, kSpaceA}), " a");
    EXPECT_EQ(t->detokenize(Ids{1, kSpaceA}, true), "<s> a");
    EXPECT_EQ(t->token_text(kSpaceA), "▁a");
    EXPECT_THROW(t->token_to_piece(9999), Error);
    EXPECT_THROW(t->token_to_piece(-1), Error);
    EXPECT_THROW(t->detokenize(Ids{kA, 4000}), Error);
    EXPECT_THROW(t->token_text(4000), Error);
}

TEST(SpmSynthetic, SpecialIdsAndEndOfGeneration) {
    const Loaded t(spm_vocab());
    EXPECT_EQ(t->bos(), 1);
    EXPECT_EQ(t->eos(), 2);
    EXPECT_EQ(t->unk(), 0);
    EXPECT_EQ(t->pad(), -1);
    EXPECT_EQ(t->eot(), -1);
    EXPECT_TRUE(t->add_bos());
    EXPECT_FALSE(t->add_eos());
    EXPECT_TRUE(t->is_eog(2));
    EXPECT_FALSE(t->is_eog(1));
    EXPECT_FALSE(t->is_eog(-1));
    EXPECT_EQ(t->n_vocab(), 269);
    EXPECT_EQ(t->model_name(), "llama");
}

TEST(SpmSynthetic, Phi3SpecialTokensEatTheWhitespaceAfterThem) {
    // llama.cpp gives phi-3's special tokens the rstrip attribute (by general.name).
    const Loaded plain(spm_vocab(true, "test"));
    const Loaded phi3(spm_vocab(true, "Phi3"));
    EXPECT_EQ(phi3->tokenize("a<|user|>   a", false, false), (Ids{kSpaceA, kUser, kSpaceA}));
    EXPECT_NE(plain->tokenize("a<|user|>   a", false, false), (Ids{kSpaceA, kUser, kSpaceA}));
}

TEST(StreamDecoder, HoldsBackSplitCharacters) {
    const Loaded t(spm_vocab());
    StreamDecoder d(*t.tok);
    EXPECT_EQ(d.push(kByte0 + 0xE4), "");
    EXPECT_EQ(d.n_pending(), 1u);
    EXPECT_EQ(d.push(kByte0 + 0xB8), "");
    EXPECT_EQ(d.push(kByte0 + 0xAD), "中");
    EXPECT_EQ(d.n_pending(), 0u);
    EXPECT_EQ(d.push(kSpaceA), " a");
    EXPECT_EQ(d.push(2), "");  // EOS renders as nothing
    EXPECT_EQ(d.flush(), "");
}

TEST(StreamDecoder, ReplacesBytesThatCannotBecomeCharacters) {
    const Loaded t(spm_vocab());
    StreamDecoder d(*t.tok);
    EXPECT_EQ(d.push(kByte0 + 0xFF), "\uFFFD");
    EXPECT_EQ(d.push(kByte0 + 0xE4), "");
    EXPECT_EQ(d.push(kA), "\uFFFDa");  // the lead byte never got its continuation
    EXPECT_EQ(d.push(kByte0 + 0xF0), "");
    EXPECT_EQ(d.push(kByte0 + 0x9F), "");
    EXPECT_EQ(d.flush(), "\uFFFD");
    EXPECT_EQ(d.n_pending(), 0u);
    EXPECT_THROW(d.push(100000), Error);
    StreamDecoder special(*t.tok, true);
    EXPECT_EQ(special.push(2), "</s>");
}

// ---- a byte-level BPE vocabulary (GPT-2 alphabet: "Ġ" is a space)

GgufBuilder bpe_vocab(const std::string& pre, std::vector<std::string> extra_tokens = {},
                      std::vector<int32_t> extra_types = {}) {
    std::vector<std::string> tokens = {
        "a", "b", "c", "Ġ", "ab", "bc", "abc", "Ġa", "aa", "<|endoftext|>", "<tool>", "<|im_end|>"};
    std::vector<int32_t> types = {1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 4, 1};
    tokens.insert(tokens.end(), extra_tokens.begin(), extra_tokens.end());
    types.insert(types.end(), extra_types.begin(), extra_types.end());
    GgufBuilder g;
    g.str("tokenizer.ggml.model", "gpt2")
        .str("tokenizer.ggml.pre", pre)
        .strings("tokenizer.ggml.tokens", tokens)
        .i32s("tokenizer.ggml.token_type", types)
        .strings("tokenizer.ggml.merges", {"a b", "b c", "ab c", "Ġ a", "a a", "nomerge"})
        .u32("tokenizer.ggml.eos_token_id", 9);
    return g;
}

TEST(BpeSynthetic, MergesTheLowestRankFirst) {
    const Loaded t(bpe_vocab("gpt-2"));
    EXPECT_EQ(t->tokenize("abc", false, false), (Ids{6}));
    // " abc" is "Ġabc": "a b" (rank 0) goes before "Ġ a" (rank 3), then "ab c".
    EXPECT_EQ(t->tokenize("abc abc", false, false), (Ids{6, 3, 6}));
    EXPECT_EQ(t->tokenize("aaa", false, false), (Ids{8, 0}));  // leftmost first
    // A byte whose character is in no token is dropped, as llama.cpp does.
    EXPECT_EQ(t->tokenize("z", false, false), Ids{});
    EXPECT_EQ(t->detokenize(Ids{6, 3, 6}), "abc abc");
    EXPECT_EQ(t->tokenize(" abc", false, false), (Ids{3, 6}));
    EXPECT_EQ(t->tokenize(" aa", false, false), (Ids{7, 0}));  // "Ġ a" (3) before "a a" (4)
}

TEST(BpeSynthetic, SpecialTokensAndEndOfGeneration) {
    const Loaded t(bpe_vocab("gpt-2"));
    EXPECT_EQ(t->tokenize("ab<|endoftext|>ab", false, true), (Ids{4, 9, 4}));
    EXPECT_EQ(t->tokenize("<tool>ab", false, false), (Ids{10, 4}));  // user-defined: always
    EXPECT_EQ(t->tokenize("ab<|im_end|>", false, true), (Ids{4, 11}));
    // <|im_end|> is end-of-generation by its text, and becomes a control token.
    EXPECT_TRUE(t->is_eog(11));
    EXPECT_TRUE(t->is_eog(9));
    EXPECT_EQ(t->token_to_piece(11), "");
    EXPECT_EQ(t->token_to_piece(11, true), "<|im_end|>");
    EXPECT_EQ(t->eot(), 11);  // by llama.cpp's list order: <|im_end|> before <|endoftext|>
    EXPECT_EQ(t->bos(), 11);  // llama.cpp's default BOS for gpt2 vocabularies
    EXPECT_FALSE(t->add_bos());
}

TEST(BpeSynthetic, LongestSpecialTokenIsCutFirst) {
    // Cut longest first (as llama.cpp does), not leftmost first: "bcd" wins over "ab".
    const Loaded t(bpe_vocab("gpt-2", {"ab!", "b!c!"}, {4, 4}));
    EXPECT_EQ(t->tokenize("ab!c!", false, false), (Ids{0, 13}));
}

TEST(BpeSynthetic, CleansUpSpacesWhenTheVocabularySaysSo) {
    const Loaded gpt2(bpe_vocab("gpt-2", {",", "Ġ,"}, {1, 1}));
    const Loaded qwen2(bpe_vocab("qwen2", {",", "Ġ,"}, {1, 1}));
    EXPECT_EQ(gpt2->detokenize(Ids{0, 13}), "a,");    // " ," -> ","
    EXPECT_EQ(qwen2->detokenize(Ids{0, 13}), "a ,");  // qwen2 keeps it
}

// ---- bad vocabularies

std::string load_error(const GgufBuilder& b) {
    try {
        GgufImage image(b);
        Tokenizer::from_gguf(*image.file);
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

::testing::AssertionResult mentions(const std::string& msg, const std::string& part) {
    if (msg.find(part) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "'" << msg << "' does not mention '" << part << "'";
}

TEST(BadVocab, MissingOrUnknownModel) {
    EXPECT_TRUE(
        mentions(load_error(GgufBuilder().str("general.name", "x")), "tokenizer.ggml.model"));
    EXPECT_TRUE(mentions(load_error(GgufBuilder().str("tokenizer.ggml.model", "bert")),
                         "'bert' is not supported"));
    EXPECT_TRUE(mentions(load_error(GgufBuilder().str("tokenizer.ggml.model", "zzz")),
                         "unknown tokenizer model 'zzz'"));
    EXPECT_TRUE(
        mentions(load_error(GgufBuilder().str("tokenizer.ggml.model", "none")), "no vocabulary"));
}

TEST(BadVocab, MissingOrMalformedArrays) {
    EXPECT_TRUE(mentions(load_error(GgufBuilder().str("tokenizer.ggml.model", "llama")),
                         "tokenizer.ggml.tokens is missing"));
    EXPECT_TRUE(mentions(
        load_error(
            GgufBuilder().str("tokenizer.ggml.model", "llama").u32("tokenizer.ggml.tokens", 3)),
        "tokenizer.ggml.tokens"));
    EXPECT_TRUE(mentions(load_error(GgufBuilder()
                                        .str("tokenizer.ggml.model", "llama")
                                        .strings("tokenizer.ggml.tokens", {})),
                         "empty"));
    EXPECT_TRUE(mentions(load_error(GgufBuilder()
                                        .str("tokenizer.ggml.model", "llama")
                                        .strings("tokenizer.ggml.tokens", {"a", "b", "c"})
                                        .f32s("tokenizer.ggml.scores", {0, 0})),
                         "tokenizer.ggml.scores has 2 entries for 3 tokens"));
    EXPECT_TRUE(mentions(load_error(GgufBuilder()
                                        .str("tokenizer.ggml.model", "llama")
                                        .strings("tokenizer.ggml.tokens", {"a", "b", "c"})
                                        .i32s("tokenizer.ggml.token_type", {1})),
                         "tokenizer.ggml.token_type has 1 entries"));
    EXPECT_TRUE(mentions(load_error(GgufBuilder()
                                        .str("tokenizer.ggml.model", "gpt2")
                                        .str("tokenizer.ggml.pre", "gpt-2")
                                        .strings("tokenizer.ggml.tokens", {"a", "b"})),
                         "tokenizer.ggml.merges is missing"));
}

TEST(BadVocab, UnsupportedPreTokenizerIsNamed) {
    EXPECT_TRUE(mentions(load_error(bpe_vocab("tekken")), "pre-tokenizer 'tekken'"));
}

TEST(BadVocab, BosRequestedButAbsent) {
    // llama-bpe asks for BOS; gpt2's default BOS id 11 is beyond this two-token vocabulary.
    GgufBuilder g;
    g.str("tokenizer.ggml.model", "gpt2")
        .str("tokenizer.ggml.pre", "llama-bpe")
        .strings("tokenizer.ggml.tokens", {"a", "b"})
        .strings("tokenizer.ggml.merges", {"a b"});
    EXPECT_TRUE(mentions(load_error(g), "asks for a BOS token but has none"));
}

TEST(BadVocab, EmptyTokenTextsAndOutOfRangeIdsAreTolerated) {
    GgufBuilder g;
    g.str("tokenizer.ggml.model", "llama")
        .strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "", "a"})
        .u32("tokenizer.ggml.eos_token_id", 77);  // out of range: the default (2) stays
    const Loaded t(g);
    EXPECT_EQ(t->token_text(3), "[EMPTY_3]");
    EXPECT_EQ(t->eos(), 2);
}

}  // namespace
}  // namespace troupe
