// Text <-> tokens for the vocabularies GGUF models carry, matching llama.cpp token for token.
//
//   tokenizer.ggml.model = llama   SentencePiece BPE by scores with byte fallback (spm.h)
//   tokenizer.ggml.model = gpt2    byte-level BPE by merge rank after the regex pre-tokenizer
//                                  that tokenizer.ggml.pre names (bpe.h, pre_presets.h)
//   tokenizer.ggml.model = gemma4  BPE by merge rank on raw UTF-8 with U+2581 for spaces
//
// tokenize() first cuts out the special tokens written in the text (special_split.h), then
// encodes each stretch of raw text. SPM gives a stretch a leading space when it opens the text
// or follows a special token (add_space_prefix), as SentencePiece does: with specials parsed,
// "</s>\n<|user|>" becomes [2, 29871 ' ', 13 '\n', 29966 '<', ...] in the Llama-2 vocabulary.
//
// Thread-safety: every method may be called from many threads at once. The only state that
// changes after from_gguf() is a word cache (token_cache.h), which locks internally. A
// Tokenizer does not keep the GgufFile.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/token_cache.h"
#include "tokenizer/vocab.h"

namespace troupe {

class GgufFile;
class SpmEncoder;
class BpeEncoder;
class PreTokenizer;
class SpecialSplitter;

class Tokenizer {
  public:
    // Throws troupe::Error naming the problem on a missing, malformed or unsupported vocabulary.
    static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& f);
    ~Tokenizer();
    Tokenizer(const Tokenizer&) = delete;
    Tokenizer& operator=(const Tokenizer&) = delete;

    // add_special: add BOS / EOS as the vocabulary's add_bos / add_eos flags say.
    // parse_special: control tokens written in the text (<|im_start|>, </s>) become those
    // tokens; otherwise they are plain text. User-defined tokens are always matched.
    // Text that is not valid UTF-8 is read as llama.cpp reads it (a malformed byte is U+FFFD
    // for BPE vocabularies, a byte token for SPM).
    std::vector<int32_t> tokenize(std::string_view text, bool add_special,
                                  bool parse_special) const;

    // The bytes of one token. Control and unknown tokens give "" unless render_special.
    // SPM: U+2581 -> ' ', <0xNN> -> that byte; byte-level BPE: each character -> its byte.
    // A piece may be part of a UTF-8 character. Throws troupe::Error for an id out of range.
    std::string token_to_piece(int32_t id, bool render_special = false) const;

    // The text of a token sequence, as llama_detokenize(remove_special = false) writes it: the
    // pieces joined, the leading space SPM added to the first token removed, and for
    // vocabularies that ask for it, HF's clean-up of spaces before punctuation.
    std::string detokenize(std::span<const int32_t> ids, bool render_special = false) const;

    int32_t n_vocab() const { return vocab_.n_tokens(); }
    int32_t bos() const { return vocab_.special().bos; }  // -1 when absent
    int32_t eos() const { return vocab_.special().eos; }
    int32_t eot() const { return vocab_.special().eot; }
    int32_t pad() const { return vocab_.special().pad; }
    int32_t unk() const { return vocab_.special().unk; }
    bool add_bos() const { return vocab_.flags().add_bos; }
    bool add_eos() const { return vocab_.flags().add_eos; }
    // End of generation: EOS, EOT, EOM, and the end-of-turn tokens llama.cpp finds by text
    // (<|im_end|>, <|eot_id|>, <|endoftext|>, <end_of_turn>, ...).
    bool is_eog(int32_t id) const { return vocab_.is_eog(id); }
    const std::string& token_text(int32_t id) const;  // the raw vocabulary string
    std::string_view model_name() const { return vocab_.model_name(); }
    const Vocab& vocab() const { return vocab_; }

    // Empties the word cache (tokens never depend on it; benchmarks measure a cold cache).
    void clear_cache() const { cache_.clear(); }

  private:
    explicit Tokenizer(Vocab vocab);
    void check_id(int32_t id) const;
    void encode_raw(std::string_view text, bool after_special, std::vector<int32_t>& out) const;

    Vocab vocab_;
    ByteLevelCodec codec_;
    std::unique_ptr<SpecialSplitter> specials_;
    std::unique_ptr<SpmEncoder> spm_;    // SPM vocabularies
    std::unique_ptr<PreTokenizer> pre_;  // BPE vocabularies
    std::unique_ptr<BpeEncoder> bpe_;    // BPE vocabularies
    std::vector<std::string> pieces_;    // [n_vocab] token_to_piece(id, true)
    mutable TokenCache cache_;           // word -> tokens (internally synchronized)
};

}  // namespace troupe
