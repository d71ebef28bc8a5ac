// Building blocks of the tokenizers, without any vocabulary file: UTF-8 handling, the byte-level
// alphabet, the lookup tables, the space clean-up and the regex pre-tokenizer.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/lookup.h"
#include "tokenizer/pieces.h"
#include "tokenizer/pre_presets.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/token_cache.h"
#include "tokenizer/utf8.h"

namespace troupe {
namespace {

// ---- UTF-8

TEST(Utf8, EncodesAndDecodesBoundaryCodePoints) {
    for (const uint32_t cpt : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
        std::string s;
        utf8::append(s, cpt);
        size_t pos = 0;
        EXPECT_EQ(utf8::decode_lenient(s, pos), cpt);
        EXPECT_EQ(pos, s.size());
        EXPECT_EQ(utf8::check_char(s, 0), int(s.size()));
    }
}

TEST(Utf8, LenientDecodeReadsLikeLlamaCpp) {
    const auto decode = [](std::string_view s, size_t& pos) {
        return utf8::decode_lenient(s, pos);
    };
    size_t pos = 0;
    EXPECT_EQ(decode("\x80", pos), utf8::kReplacement);  // stray continuation byte
    EXPECT_EQ(pos, 1u);
    pos = 0;
    EXPECT_EQ(decode("\xE4\xB8", pos), utf8::kReplacement);  // truncated
    EXPECT_EQ(pos, 1u);
    pos = 0;
    EXPECT_EQ(decode("\xE4"
                     "a"
                     "b",
                     pos),
              utf8::kReplacement);  // bad continuation
    EXPECT_EQ(pos, 1u);
    pos = 0;
    EXPECT_EQ(decode("\xC0\x80", pos), 0u);  // overlong forms are accepted
    EXPECT_EQ(pos, 2u);
    pos = 0;
    EXPECT_EQ(decode("\xF8\x80\x80\x80\x80", pos), utf8::kReplacement);
    EXPECT_EQ(pos, 1u);
}

TEST(Utf8, SanitizeKeepsValidTextAndReplacesTheRest) {
    const std::string valid = "plain, ünïcödé, 中文, 🦙";
    EXPECT_EQ(utf8::sanitize(valid), valid);
    EXPECT_EQ(utf8::sanitize("a\x80"
                             "b"),
              "a\xEF\xBF\xBD"
              "b");
    EXPECT_EQ(utf8::sanitize("\xED\xA0\x80"), "\xEF\xBF\xBD");  // a surrogate
    EXPECT_EQ(utf8::sanitize("\xC0\x80"), std::string(1, '\0'));
    EXPECT_TRUE(utf8::is_valid(utf8::sanitize("\xFF\xFE\xF0\x9F\x98")));
}

TEST(Utf8, StrictCheckFindsCompleteIncompleteAndInvalid) {
    EXPECT_EQ(utf8::check_char("\xE4\xB8\xAD", 0), 3);
    EXPECT_EQ(utf8::check_char("\xE4\xB8", 0), 0);
    EXPECT_EQ(utf8::check_char("\xF0\x9F\x98", 0), 0);
    EXPECT_EQ(utf8::check_char("\xE4"
                               "A",
                               0),
              -1);
    EXPECT_EQ(utf8::check_char("\xE4\xB8"
                               "A",
                               0),
              -2);
    EXPECT_EQ(utf8::check_char("\xED\xA0\x80", 0), -1);      // surrogate
    EXPECT_EQ(utf8::check_char("\xC0\x80", 0), -1);          // overlong
    EXPECT_EQ(utf8::check_char("\xF4\x90\x80\x80", 0), -1);  // above U+10FFFF
    EXPECT_EQ(utf8::check_char("\x80", 0), -1);
    EXPECT_FALSE(utf8::is_valid("abc\xE4\xB8"));
    EXPECT_TRUE(utf8::is_valid("abc\xE4\xB8\xAD"));
}

// ---- GPT-2 byte-level alphabet

TEST(ByteLevel, MapsEveryByteToADistinctCharacterAndBack) {
    const ByteLevelCodec codec;
    EXPECT_EQ(codec.encode(' '), "Ġ");
    EXPECT_EQ(codec.encode('\n'), "Ċ");
    EXPECT_EQ(codec.encode('a'), "a");
    EXPECT_EQ(codec.encode(0xAD), "Ń");  // the last shifted byte, U+0143
    std::set<std::string> seen;
    for (int b = 0; b < 256; ++b) {
        const std::string_view e = codec.encode(uint8_t(b));
        seen.insert(std::string(e));
        size_t pos = 0;
        EXPECT_EQ(codec.decode(utf8::decode_lenient(e, pos)), b);
    }
    EXPECT_EQ(seen.size(), 256u);
    EXPECT_EQ(codec.decode(0x144), -1);
    EXPECT_EQ(codec.decode(' '), -1);  // a space is not in the alphabet
}

// ---- lookup tables

TEST(Lookup, StringIdMapFindsOverwritesAndGrows) {
    std::vector<std::string> keys;
    for (int i = 0; i < 5000; ++i) {
        std::string k = "k";
        k += std::to_string(i);
        keys.push_back(k);
    }
    keys.push_back("");
    StringIdMap m;
    for (size_t i = 0; i < keys.size(); ++i) m.insert(keys[i], int32_t(i));
    EXPECT_EQ(m.size(), keys.size());
    for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(m.find(keys[i]), int32_t(i));
    EXPECT_EQ(m.find("missing"), -1);
    m.insert(keys[7], 99);  // the newer id wins
    EXPECT_EQ(m.find("k7"), 99);
    EXPECT_EQ(m.size(), keys.size());
    EXPECT_EQ(StringIdMap().find("x"), -1);
}

TEST(Lookup, PairMapKeepsTheFirstInsertion) {
    PairMap m;
    for (int32_t a = 0; a < 300; ++a)
        for (int32_t b = 0; b < 10; ++b) m.insert_first(a, b, {a * 10 + b, a + b});
    m.insert_first(3, 4, {-7, -7});
    ASSERT_NE(m.find(3, 4), nullptr);
    EXPECT_EQ(m.find(3, 4)->rank, 34);
    EXPECT_EQ(m.find(299, 9)->result, 308);
    EXPECT_EQ(m.find(4, 3)->rank, 43);
    EXPECT_EQ(m.find(300, 0), nullptr);
    EXPECT_EQ(m.find(-1, 0), nullptr);
    EXPECT_EQ(m.size(), 3000u);
}

// ---- word cache

std::string numbered(char prefix, int i) {
    std::string w(1, prefix);
    w += std::to_string(i);
    return w;
}

std::vector<int32_t> ids_of(const std::string& word) {
    std::vector<int32_t> ids;
    for (const char c : word) ids.push_back(int32_t(uint8_t(c)));
    return ids;
}

TEST(TokenCache, RemembersWordsAcrossSessions) {
    TokenCache cache;
    {
        TokenCache::Session s(cache);
        std::vector<int32_t> out;
        EXPECT_FALSE(s.lookup("hello", out));
        s.remember("hello", std::vector<int32_t>{7, 8});
        s.remember(std::string(TokenCache::kMaxKeyBytes + 1, 'x'), std::vector<int32_t>{1});
    }
    EXPECT_EQ(cache.size(), 1u);  // the over-long word is not kept
    TokenCache::Session s(cache);
    std::vector<int32_t> out = {1};
    EXPECT_TRUE(s.lookup("hello", out));
    EXPECT_EQ(out, (std::vector<int32_t>{1, 7, 8}));
    EXPECT_FALSE(s.lookup("hell", out));
}

TEST(TokenCache, PublishesInBatchesAndEmptiesWhenFull) {
    TokenCache cache(100);
    {
        TokenCache::Session s(cache);
        for (size_t i = 0; i < TokenCache::kPublishEvery; ++i) {
            const std::string w = numbered('w', int(i));
            s.remember(w, ids_of(w));
        }
        std::vector<int32_t> out;
        EXPECT_TRUE(s.lookup("w0", out));  // published during the session
    }
    {
        TokenCache::Session s(cache);
        for (int i = 0; i < 150; ++i) {
            const std::string w = numbered('v', i);
            s.remember(w, ids_of(w));
        }
    }
    EXPECT_LE(cache.size(), 100u);
    cache.clear();
    EXPECT_EQ(cache.size(), 0u);
}

TEST(TokenCache, ConcurrentSessionsAgree) {
    TokenCache cache(1000);
    const auto work = [&] {
        for (int round = 0; round < 50; ++round) {
            TokenCache::Session s(cache);
            for (int i = 0; i < 200; ++i) {
                const std::string w = std::to_string((i * 7 + round) % 300);
                std::vector<int32_t> out;
                if (s.lookup(w, out)) {
                    EXPECT_EQ(out, ids_of(w));
                } else {
                    s.remember(w, ids_of(w));
                }
            }
        }
    };
    std::thread a(work), b(work);
    a.join();
    b.join();
    EXPECT_LE(cache.size(), 300u);
}

// ---- HF clean-up of spaces

TEST(CleanUpSpaces, RemovesSpacesLikeLlamaCpp) {
    EXPECT_EQ(clean_up_spaces("Hello , world ! Is it . ?"), "Hello, world! Is it.?");
    EXPECT_EQ(clean_up_spaces("a ' b"), "a'b");
    EXPECT_EQ(clean_up_spaces("x ' ' y"), "x'' y");  // the consumed space does not count twice
    EXPECT_EQ(clean_up_spaces("it 's I 'm we 're you 've"), "it's I'm we're you've");
    EXPECT_EQ(clean_up_spaces("don 't I 'd we 'll"), "don 't I 'd we 'll");
    EXPECT_EQ(clean_up_spaces(" ,x"), ",x");
    EXPECT_EQ(clean_up_spaces(""), "");
    EXPECT_EQ(clean_up_spaces("plain text"), "plain text");
}

// ---- regex pre-tokenizer

std::vector<std::string> words_of(const PreTokenizer& pre, std::string_view text) {
    std::vector<TextSpan> spans;
    pre.split(text, spans);
    std::vector<std::string> words;
    for (const TextSpan s : spans) words.emplace_back(text.substr(s.begin, s.end - s.begin));
    return words;
}

const PrePreset& preset(std::string_view name) {
    const PrePreset* p = find_pre_preset(name);
    EXPECT_NE(p, nullptr) << name;
    return *p;
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, RewritesClassesForPcre2) {
    const std::string ws = PreTokenizer::to_pcre2("\\s");
    EXPECT_EQ(ws.front(), '[');
    EXPECT_NE(ws.find("\\x{85}"), std::string::npos);
    const std::string inner = ws.substr(1, ws.size() - 2);
    EXPECT_EQ(PreTokenizer::to_pcre2("[^\\s\\r]"), std::string("[^") + inner + "\\r]");
    EXPECT_EQ(PreTokenizer::to_pcre2("\\S"), std::string("[^") + inner + "]");
    EXPECT_EQ(PreTokenizer::to_pcre2("a\\\\s\\["), "a\\\\s\\[");  // escaped backslash, bracket
    EXPECT_EQ(PreTokenizer::to_pcre2("\\p{Han}"), "\\p{Han}");    // left alone
    const std::string letters = PreTokenizer::to_pcre2("\\p{L}");
    EXPECT_EQ(letters.rfind("[\\p{L}", 0), 0u);
    EXPECT_NE(letters.find("\\x{31350}-\\x{323AF}"), std::string::npos);  // CJK extension H
}

TEST(PreTokenizer, KnowsCharactersOfUnicode15) {
    // Assigned in Unicode 15.0 / 15.1 (after PCRE2 10.42's Unicode 14): llama.cpp's tables
    // have them, so words of them stay together.
    const PreTokenizer pre(preset("llama-bpe").regexes);
    EXPECT_EQ(words_of(pre, "x\U00031350y \U0002EBF0z"),  // CJK extensions H and I
              (Words{"x\U00031350y", " \U0002EBF0z"}));
    EXPECT_EQ(words_of(pre, "\U0001D2C0\U0001D2C1\U0001D2C2\U0001D2C3"),  // Kaktovik numerals
              (Words{"\U0001D2C0\U0001D2C1\U0001D2C2", "\U0001D2C3"}));
}

TEST(PreTokenizer, Gpt2SplitsWordsNumbersAndSpaces) {
    const PreTokenizer pre(preset("gpt-2").regexes);
    EXPECT_EQ(words_of(pre, "Hello world's  test\n\n 123"),
              (Words{"Hello", " world", "'s", " ", " test", "\n\n", " 123"}));
    EXPECT_EQ(words_of(pre, ""), Words{});
    EXPECT_EQ(words_of(pre, "   "), Words{"   "});
}

TEST(PreTokenizer, WhitespaceIsUnicodeWhiteSpace) {
    const PreTokenizer pre(preset("gpt-2").regexes);
    // U+00A0 and U+0085 are White_Space: a run of them splits as spaces do (and only an ASCII
    // space joins the next word).
    EXPECT_EQ(words_of(pre, "a\u00A0\u00A0b"), (Words{"a", "\u00A0", "\u00A0", "b"}));
    EXPECT_EQ(words_of(pre, "a\u0085\u0085b"), (Words{"a", "\u0085", "\u0085", "b"}));
    // U+180E is a format character (it was a space before Unicode 6.3): not whitespace.
    EXPECT_EQ(words_of(pre, "a\u180E\u180Eb"), (Words{"a", "\u180E\u180E", "b"}));
}

TEST(PreTokenizer, Llama3GroupsDigitsByThreeAndKeepsNewlines) {
    const PreTokenizer pre(preset("llama-bpe").regexes);
    EXPECT_EQ(words_of(pre, "1234567 x\n\n  y"),
              (Words{"123", "456", "7", " x", "\n\n", " ", " y"}));
    EXPECT_EQ(words_of(pre, "I'VE seen"), (Words{"I", "'VE", " seen"}));
    EXPECT_EQ(words_of(pre, "x  \n  \n y"), (Words{"x", "  \n  \n", " y"}));
}

TEST(PreTokenizer, Qwen35KeepsCombiningMarksInWords) {
    const std::string text = "e\u0301te 12";
    EXPECT_EQ(words_of(PreTokenizer(preset("qwen2").regexes), text),
              (Words{"e", "\u0301te", " ", "1", "2"}));
    EXPECT_EQ(words_of(PreTokenizer(preset("qwen35").regexes), text),
              (Words{"e\u0301te", " ", "1", "2"}));
}

TEST(PreTokenizer, DeepseekLiteralClassesExcludeWhitespace) {
    // U+3000 is White_Space: llama.cpp never lets it into a literal class.
    const PreTokenizer pre(preset("deepseek-llm").regexes);
    EXPECT_EQ(words_of(pre, "\u3002\u3000\u3002"), (Words{"\u3002", "\u3000", "\u3002"}));
    EXPECT_EQ(words_of(pre, "中文\u3000中"), (Words{"中文", "\u3000", "中"}));
}

TEST(PreTokenizer, EveryPresetTilesRandomText) {
    const std::vector<std::string> alphabet = {
        "a",  "Z", " ",      "  ", "\n",   "\r\n",   "\t",     "7", "'s", "'",  ".",
        "!!", "é", "\u0301", "中", "🦙", "\u00A0", "\u3000", "٣", "$",  "<|", "ß"};
    std::mt19937 rng(1234);
    for (const char* name : {"default", "gpt-2", "llama-bpe", "qwen2", "qwen35", "starcoder",
                             "falcon", "deepseek-llm", "deepseek-coder", "gemma4"}) {
        const PreTokenizer pre(preset(name).regexes);
        for (int round = 0; round < 200; ++round) {
            std::string text;
            const int n = int(rng() % 40);
            for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
            std::vector<TextSpan> spans;
            pre.split(text, spans);
            size_t at = 0;
            for (const TextSpan s : spans) {
                ASSERT_EQ(s.begin, at) << name << ": '" << text << "'";
                ASSERT_LT(s.begin, s.end) << name;
                at = s.end;
            }
            ASSERT_EQ(at, text.size()) << name;
        }
    }
}

TEST(PreTokenizer, HandlesLongRunsWithoutGivingUp) {
    const PreTokenizer pre(preset("llama-bpe").regexes);
    const std::string spaces(200000, ' ');
    EXPECT_EQ(words_of(pre, spaces + "x"), (Words{spaces.substr(1), " x"}));
    const std::string newlines(100000, '\n');
    EXPECT_EQ(words_of(pre, newlines), Words{newlines});
    const std::string punct(100000, '!');
    EXPECT_EQ(words_of(pre, punct), Words{punct});
}

TEST(PrePresets, KnowsTheRequiredNamesAndRejectsOthers) {
    for (const char* name :
         {"default", "gpt-2", "llama-bpe", "qwen2", "qwen35", "starcoder", "deepseek-llm",
          "deepseek-coder", "falcon", "mpt", "refact", "command-r", "smollm", ""})
        EXPECT_NE(find_pre_preset(name), nullptr) << name;
    EXPECT_EQ(find_pre_preset("tekken"), nullptr);
    EXPECT_EQ(find_pre_preset("no-such-pre"), nullptr);
    EXPECT_TRUE(find_pre_preset("llama-bpe")->ignore_merges);
    EXPECT_TRUE(find_pre_preset("llama-bpe")->add_bos);
    EXPECT_FALSE(find_pre_preset("qwen2")->clean_spaces);
    EXPECT_TRUE(find_pre_preset("gpt-2")->clean_spaces);
}

}  // namespace
}  // namespace troupe
