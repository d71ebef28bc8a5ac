// Regex pre-tokenizer: cuts text into the words that byte-level BPE then merges one by one.
//
// The regexes of a preset (pre_presets.h) are compiled once with PCRE2 (UTF mode, JIT when the
// platform has it) and applied in order: each regex runs inside every piece the previous ones
// produced, and both its matches and the stretches between them become pieces, so the pieces
// always tile the text. This is what llama.cpp's unicode_regex_split does.
//
// Thread-safety: immutable after construction; split() may run on many threads at once.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace troupe {

struct TextSpan {
    size_t begin = 0;  // byte offsets into the text
    size_t end = 0;
};

class PreTokenizer {
  public:
    // Throws troupe::Error when a regex does not compile.
    explicit PreTokenizer(std::span<const std::string_view> regexes);
    ~PreTokenizer();
    PreTokenizer(const PreTokenizer&) = delete;
    PreTokenizer& operator=(const PreTokenizer&) = delete;

    // Cuts `text` (valid UTF-8, see utf8::sanitize) into words. `words` is overwritten with
    // non-empty spans that cover the text in order. Throws troupe::Error if the regex engine
    // gives up (a resource limit on pathological input).
    void split(std::string_view text, std::vector<TextSpan>& words) const;

    // The pattern as compiled: `\s` / `\S` become explicit Unicode White_Space sets, and
    // `\p{L}`, `\p{N}`, `\p{M}`, `\p{P}`, `\p{S}` gain the code points that Unicode 15.0 and 15.1
    // assigned, so that both mean what they mean in llama.cpp.
    static std::string to_pcre2(std::string_view regex);

  private:
    struct CodeDeleter {
        void operator()(pcre2_real_code_8* code) const;
    };
    struct Regex {
        std::unique_ptr<pcre2_real_code_8, CodeDeleter> code;
        bool jit = false;
    };
    std::vector<Regex> regexes_;
};

}  // namespace troupe
