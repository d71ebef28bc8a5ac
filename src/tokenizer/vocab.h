// A tokenizer vocabulary read from GGUF metadata (the `tokenizer.ggml.*` keys).
//
// Loading follows llama.cpp's rules so that the same file gives the same tokens, flags and
// end-of-generation set: per-model defaults for the special ids, ids outside the vocabulary
// ignored, EOT / EOM / FIM tokens found by their text when the file does not name them, the
// end-of-generation set built from EOS, EOT, EOM and well-known end-of-turn texts, and the
// per-model strip attributes of some special tokens.
//
// Thread-safety: immutable after loading.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/lookup.h"
#include "tokenizer/pre_presets.h"

namespace troupe {

class GgufFile;

// Token attributes (llama.cpp's llama_token_attr bits; GGUF stores one token type per token).
namespace token_attr {
constexpr uint32_t kUndefined = 0;
constexpr uint32_t kUnknown = 1u << 0;
constexpr uint32_t kUnused = 1u << 1;
constexpr uint32_t kNormal = 1u << 2;
constexpr uint32_t kControl = 1u << 3;
constexpr uint32_t kUserDefined = 1u << 4;
constexpr uint32_t kByte = 1u << 5;
constexpr uint32_t kLstrip = 1u << 7;  // a special token eats the whitespace before it
constexpr uint32_t kRstrip = 1u << 8;  // ... or after it
}  // namespace token_attr

enum class VocabKind {
    kSpm,  // tokenizer.ggml.model = "llama": SentencePiece BPE by scores, byte fallback
    kBpe,  // "gpt2" (byte-level BPE by merge rank) or "gemma4" (BPE on raw UTF-8)
};

// Special token ids; -1 when the vocabulary has none.
struct SpecialIds {
    int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1, mask = -1;
    int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
};

struct VocabFlags {
    bool add_bos = false;
    bool add_eos = false;
    bool add_space_prefix = false;    // SPM: a text fragment at the start or after a special
                                      // token gets a leading space
    bool escape_whitespaces = false;  // ' ' is written U+2581 in the vocabulary
    bool clean_spaces = false;        // detokenize applies HF's clean_up_tokenization_spaces
};

class Vocab {
  public:
    // Reads the vocabulary. Throws troupe::Error naming the problem when a key is missing or
    // malformed, or when the tokenizer model or pre-tokenizer is not supported.
    static Vocab from_gguf(const GgufFile& f);

    Vocab(Vocab&&) noexcept = default;
    Vocab& operator=(Vocab&&) noexcept = default;
    Vocab(const Vocab&) = delete;
    Vocab& operator=(const Vocab&) = delete;

    VocabKind kind() const { return kind_; }
    const std::string& model_name() const { return model_; }  // "llama", "gpt2", "gemma4"
    const std::string& pre_name() const { return pre_; }      // as in the file ("" if absent)
    const PrePreset* pre_preset() const { return preset_; }   // nullptr for SPM

    int32_t n_tokens() const { return int32_t(texts_.size()); }
    bool is_valid(int32_t id) const { return id >= 0 && id < n_tokens(); }
    const std::string& text(int32_t id) const { return texts_[size_t(id)]; }
    float score(int32_t id) const { return scores_[size_t(id)]; }
    uint32_t attr(int32_t id) const { return attrs_[size_t(id)]; }
    // The id whose text is `text` (the last one if several share it), or -1.
    int32_t find(std::string_view text) const { return ids_.find(text); }
    const StringIdMap& ids() const { return ids_; }  // text -> id, for batched lookups

    const SpecialIds& special() const { return special_; }
    const VocabFlags& flags() const { return flags_; }

    // Control, user-defined and unknown tokens, longest text first: the order in which
    // tokenize() looks for them in raw text.
    const std::vector<int32_t>& special_tokens() const { return special_tokens_; }
    // The end-of-generation set, ascending.
    const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
    bool is_eog(int32_t id) const;

  private:
    Vocab() = default;
    void read_kind(const GgufFile& f);
    void read_tokens(const GgufFile& f);
    void read_special_ids(const GgufFile& f);
    void find_special_by_text();
    void mark_unused();
    void build_eog_set();
    void build_special_list();
    void set_strip_attrs(const GgufFile& f);
    void mark_control(int32_t id);

    VocabKind kind_ = VocabKind::kSpm;
    std::string model_;
    std::string pre_;
    const PrePreset* preset_ = nullptr;
    std::vector<std::string> texts_;  // [n_tokens]
    std::vector<float> scores_;       // [n_tokens]
    std::vector<uint32_t> attrs_;     // [n_tokens] token_attr bits
    StringIdMap ids_;                 // keys view texts_
    SpecialIds special_;
    VocabFlags flags_;
    std::vector<int32_t> special_tokens_;
    std::vector<int32_t> eog_ids_;
};

}  // namespace troupe
