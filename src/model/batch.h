// One forward pass's worth of tokens from several sequences (continuous batching): decode
// tokens of running sequences and chunks of prompts being prefilled, side by side.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace troupe {

struct BatchSeq {
    // Physical KV blocks of this sequence: position p lives in block_table[p / block_size],
    // slot p % block_size. Must cover positions [0, first_pos + n_tokens).
    std::span<const int32_t> block_table;
    int32_t first_pos = 0;  // position of the sequence's first token in this batch
    int32_t n_tokens = 0;   // its tokens in Batch::tokens (contiguous, in sequence order)
    int32_t n_logits = 0;   // logits wanted for its last n_logits tokens (0 .. n_tokens)
    // Its first n_kv_present tokens (0 .. n_tokens) already have their K/V in the cache (a
    // prompt found whole in the prefix cache, its last token computed again for the logits):
    // they are computed but their K/V are not stored (the blocks may be shared).
    int32_t n_kv_present = 0;
};

// Contract: the tokens of seqs[0] come first in `tokens`, then those of seqs[1], ...; the
// KV of positions [0, first_pos + n_kv_present) of every sequence is already in the cache. A
// physical block written by this batch (positions >= first_pos + n_kv_present) belongs to one
// sequence only.
struct Batch {
    std::vector<int32_t> tokens;  // [n_tokens]
    std::vector<BatchSeq> seqs;
    // Sequences whose block tables begin with the same physical blocks (a prefix shared
    // through the prefix cache) attend to those blocks together, reading each shared K/V block
    // once for all of them (ops::attention); false: each sequence reads all its blocks itself.
    // Both give bit-identical results (ops::AttentionPlan).
    bool shared_prefix_attention = true;

    int n_tokens() const { return int(tokens.size()); }
    int n_logit_rows() const {
        int n = 0;
        for (const BatchSeq& s : seqs) n += s.n_logits;
        return n;
    }
};

}  // namespace troupe
