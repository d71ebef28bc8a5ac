// Pre-tokenizer presets of byte-level BPE vocabularies, keyed by `tokenizer.ggml.pre`.
//
// A preset is the list of regular expressions that cut text into words before BPE (each one
// applied inside the pieces the previous one left; the text a regex does not match becomes
// pieces of its own) plus the vocabulary flags llama.cpp ties to the same name. The regexes are
// those of the models' tokenizer.json files in the form llama.cpp runs them; see
// pre_presets.cpp for the two places where the form differs and why.
#pragma once

#include <span>
#include <string_view>

namespace troupe {

struct PrePreset {
    std::string_view name;  // the canonical name, for messages
    std::span<const std::string_view> regexes;
    bool byte_encode = true;          // GPT-2 byte-level alphabet (false: raw UTF-8 + <0xXX>)
    bool escape_whitespaces = false;  // ' ' -> U+2581 before BPE (SentencePiece-style BPE)
    bool clean_spaces = true;         // detokenize removes " ," " ." " 's" ... (HF clean-up)
    bool ignore_merges = false;       // a word that is a token is taken whole
    bool add_bos = false;             // default of tokenizer.ggml.add_bos_token
    bool force_add_bos = false;       // BOS always added, whatever the file says (Gemma 4)
    bool unset_default_bos = false;   // no default BOS id (ChatGLM)
};

// The preset for `pre` (an empty name means "default"), or nullptr when unsupported.
const PrePreset* find_pre_preset(std::string_view pre);

}  // namespace troupe
