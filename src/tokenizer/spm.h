// SentencePiece BPE as llama.cpp runs it for `tokenizer.ggml.model = llama` vocabularies.
//
// The text (spaces already written as U+2581) starts as one symbol per UTF-8 character. The
// adjacent pair whose concatenation is the vocabulary token with the highest score is merged
// first (on equal scores, the leftmost pair), until no adjacent pair forms a token. A final
// symbol that is not a token (a character outside the vocabulary) is written as its bytes,
// <0xXX> tokens.
//
// Thread-safety: immutable after construction; encode() may run on many threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace troupe {

class SpmEncoder {
  public:
    // `vocab` must outlive the encoder.
    explicit SpmEncoder(const Vocab& vocab);

    // Appends the tokens of `text` to `out`. Throws troupe::Error when a byte has to be written
    // as a byte token and the vocabulary has neither <0xXX>, the byte itself nor <unk>.
    void encode(std::string_view text, std::vector<int32_t>& out) const;

  private:
    void append_bytes(std::string_view bytes, std::vector<int32_t>& out) const;

    const Vocab& vocab_;
    std::array<int32_t, 256> byte_tokens_{};  // -1: no token for that byte
};

}  // namespace troupe
