// Finds special tokens written in raw text (llama.cpp's tokenizer_st_partition).
//
// Special tokens are looked for longest first: every occurrence of the longest one is cut out
// of the text (leftmost first, without overlaps), then the next one is looked for in the text
// that remains, and so on. A token with the lstrip / rstrip attribute also removes the ASCII
// whitespace before / after it. Control and unknown tokens are looked for only when parsing
// specials is asked for; user-defined tokens always are.
//
// Thread-safety: immutable after construction.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace troupe {

struct Fragment {
    int32_t token = -1;  // >= 0: a special token; -1: raw text [begin, end)
    size_t begin = 0;
    size_t end = 0;
};

class SpecialSplitter {
  public:
    // `vocab` must outlive the splitter.
    explicit SpecialSplitter(const Vocab& vocab);

    // Overwrites `out` with the fragments of `text`, in order. Raw fragments are never empty.
    void split(std::string_view text, bool parse_special, std::vector<Fragment>& out) const;

  private:
    bool is_candidate(int32_t id, bool parse_special) const;
    std::vector<int32_t> occurring(std::string_view text, bool parse_special) const;
    void cut(std::string_view text, int32_t id, const std::vector<Fragment>& in,
             std::vector<Fragment>& out) const;

    const Vocab& vocab_;
    // Special tokens by first byte, each list in the vocabulary's search order (indices into
    // vocab.special_tokens()), so a scan of the text finds which ones occur at all.
    std::array<std::vector<uint32_t>, 256> by_first_byte_;
};

}  // namespace troupe
