// SentencePiece BPE as llama.cpp runs it for `tokenizer.ggml.model = llama` vocabularies.
//
// The text (spaces already written as U+2581) starts as one symbol per UTF-8 character. The
// adjacent pair whose concatenation is the vocabulary token with the highest score is merged
// first (on equal scores, the leftmost pair), until no adjacent pair forms a token. A final
// symbol that is not a token (a character outside the vocabulary) is written as its bytes,
// <0xXX> tokens.
//
// The text is cut into chunks that are encoded one by one, each with a small heap: a merge can
// only cross a point between characters c1 and c2 if some token contains "c1c2", so cutting
// in front of a U+2581 whose preceding character never precedes U+2581 inside a token changes
// nothing (no pair across the cut ever forms a token, and within a chunk the merge order by
// score and position is the same).
//
// Thread-safety: immutable after construction; encode() may run on many threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/lookup.h"
#include "tokenizer/token_cache.h"
#include "tokenizer/vocab.h"

namespace troupe {

class SpmEncoder {
  public:
    // `vocab` must outlive the encoder.
    explicit SpmEncoder(const Vocab& vocab);

    // Appends the tokens of `text` to `out`, using and filling the word cache (may be null)
    // chunk by chunk.
    // Throws troupe::Error when a byte has to be written as a byte token and the vocabulary
    // has neither <0xXX>, the byte itself nor <unk>.
    void encode(std::string_view text, std::vector<int32_t>& out, TokenCache::Session* cache) const;

  private:
    struct Scratch;
    void encode_chunk(std::string_view text, std::vector<int32_t>& out, Scratch& scratch,
                      TokenCache::Session* cache) const;
    void merge_chunk(std::string_view text, std::vector<int32_t>& out, Scratch& scratch) const;
    void append_bytes(std::string_view bytes, std::vector<int32_t>& out) const;

    const Vocab& vocab_;
    std::array<int32_t, 256> byte_tokens_{};  // -1: no token for that byte
    StringIdMap joins_space_;                 // characters that precede U+2581 inside some token
};

}  // namespace troupe
