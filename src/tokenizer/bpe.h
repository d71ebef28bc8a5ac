// BPE by merge rank, one pre-tokenized word at a time (llama.cpp's llm_tokenizer_bpe_session).
//
// A word starts as one symbol per character: per byte for byte-level vocabularies (each byte
// is one character of GPT-2's alphabet), per UTF-8 character otherwise. The adjacent pair with
// the lowest merge rank is merged first (on equal ranks, the leftmost), until no adjacent pair
// has a merge. Symbols are piece ids: token ids, or ids past the vocabulary for the few merge
// strings that are not tokens, so merging is integer work on a hash table keyed by id pairs.
// A final symbol that is not a token falls back to single-byte tokens as llama.cpp does.
//
// Thread-safety: immutable after construction; encode_word() may run on many threads at once,
// each with its own BpeScratch.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/lookup.h"
#include "tokenizer/vocab.h"

namespace troupe {

// Working memory of one tokenize() call, reused across its words.
struct BpeScratch {
    struct Symbol {
        int32_t prev, next;   // -1 at the ends
        int32_t piece;        // -1: a character that is in no token and no merge
        uint32_t begin, len;  // bytes of the word; len 0 once merged into its left neighbour
    };
    struct Bigram {
        int32_t rank, left, right, result;
        uint32_t len;  // left.len + right.len when queued; a mismatch later means it is stale
    };
    std::vector<Symbol> symbols;
    std::vector<Bigram> heap;
    std::string encoded;
};

class BpeEncoder {
  public:
    // `merges` are the "left right" strings of tokenizer.ggml.merges, in rank order.
    // `vocab` and `codec` must outlive the encoder. A merge without a separating space can never
    // apply and is skipped (llama.cpp keeps it under an empty pair).
    BpeEncoder(const Vocab& vocab, std::span<const std::string_view> merges,
               const ByteLevelCodec& codec);

    // Appends the tokens of one word: raw bytes for byte-level vocabularies, else UTF-8 text
    // with spaces already escaped.
    void encode_word(std::string_view word, std::vector<int32_t>& out, BpeScratch& scratch) const;

    size_t n_merges() const { return merges_.size(); }

  private:
    void add_merges(std::span<const std::string_view> merges);
    int32_t piece_id(std::string_view text) const;
    int32_t add_piece(std::string_view text);
    void init_symbols(std::string_view word, BpeScratch& scratch) const;
    void merge(BpeScratch& scratch) const;
    void emit(std::string_view word, const BpeScratch::Symbol& s, std::vector<int32_t>& out) const;

    const Vocab& vocab_;
    const ByteLevelCodec& codec_;
    bool byte_encode_;
    bool ignore_merges_;
    bool gemma_newlines_;
    std::deque<std::string> extra_pieces_;    // merge strings that are not tokens (stable storage)
    StringIdMap extra_ids_;                   // their piece ids, from n_tokens upwards
    PairMap merges_;                          // (left piece, right piece) -> (rank, merged piece)
    std::array<int32_t, 256> byte_pieces_{};  // byte-level: the piece of each byte's character
    std::array<int32_t, 256> hex_tokens_{};   // raw UTF-8 vocabularies: <0xXX> fallback tokens
};

}  // namespace troupe
