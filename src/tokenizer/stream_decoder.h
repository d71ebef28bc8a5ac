// Streaming detokenizer: turns generated token ids into text as they come, and never lets out
// half of a UTF-8 character when a character's bytes are split across tokens (byte tokens
// <0xE4><0xB8><0xAD>, or byte-level BPE pieces that end mid-character).
//
// Each token's piece is appended as token_to_piece() writes it (no leading-space removal:
// generated text continues a prompt). Output is always valid UTF-8: bytes that can never
// become a character are replaced by U+FFFD as soon as that is certain.
//
// Thread-safety: one decoder per stream; not shareable across threads.
#pragma once

#include <cstdint>
#include <string>

namespace troupe {

class Tokenizer;

class StreamDecoder {
  public:
    // `t` must outlive the decoder.
    explicit StreamDecoder(const Tokenizer& t, bool render_special = false);

    // The text that token `id` completes: whole characters only; an incomplete tail is kept
    // for the next call. Throws troupe::Error for an id outside the vocabulary.
    std::string push(int32_t id);

    // Whatever is still held (an incomplete character becomes U+FFFD), and resets the decoder.
    std::string flush();

    // Bytes held back, waiting for the rest of a character (at most 3).
    size_t n_pending() const { return pending_.size(); }

  private:
    const Tokenizer& tokenizer_;
    bool render_special_;
    std::string pending_;
};

}  // namespace troupe
