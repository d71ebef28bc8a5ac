#include "tokenizer/vocab.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <climits>
#include <set>

#include "gguf/gguf.h"
#include "util/error.h"

namespace troupe {

namespace {

// GGUF token types (llama.cpp's llama_token_type) -> attribute bits.
uint32_t attr_of_type(int64_t type) {
    switch (type) {
        case 1:
            return token_attr::kNormal;
        case 2:
            return token_attr::kUnknown;
        case 3:
            return token_attr::kControl;
        case 4:
            return token_attr::kUserDefined;
        case 5:
            return token_attr::kUnused;
        case 6:
            return token_attr::kByte;
        default:
            return token_attr::kUndefined;
    }
}

bool contains_any(std::string_view s, std::initializer_list<std::string_view> parts) {
    for (const std::string_view p : parts)
        if (s.find(p) != std::string_view::npos) return true;
    return false;
}

// Texts that llama.cpp recognises as special tokens when the file does not name them.
constexpr std::array<std::string_view, 11> kEotTexts = {
    "<|eot_id|>",        "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>",   "<EOT>",      "_<EOT>",  "[EOT]",         "<｜end▁of▁sentence｜>",
    "<end_of_utterance>"};
constexpr std::array<std::string_view, 1> kEomTexts = {"<|eom_id|>"};
constexpr std::array<std::string_view, 8> kFimPreTexts = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",    "<｜fim▁begin｜>",
    "<PRE>",          "▁<PRE>",       "<|code_prefix|>", "<|prefix|>"};
constexpr std::array<std::string_view, 8> kFimSufTexts = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",    "<｜fim▁hole｜>",
    "<SUF>",          "▁<SUF>",       "<|code_suffix|>", "<|suffix|>"};
constexpr std::array<std::string_view, 8> kFimMidTexts = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>",    "<｜fim▁end｜>",
    "<MID>",          "▁<MID>",       "<|code_middle|>", "<|middle|>"};
constexpr std::array<std::string_view, 5> kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>",
                                                          "<PAD>", "[PAD]"};
constexpr std::array<std::string_view, 5> kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>",
                                                          "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::array<std::string_view, 1> kFimSepTexts = {"<|file_sep|>"};

// Texts that end generation (llama.cpp's list; see its issue #9606 on why by text).
constexpr std::array<std::string_view, 22> kEogTexts = {"<|eot_id|>",
                                                        "<|im_end|>",
                                                        "<|end|>",
                                                        "<|return|>",
                                                        "<|call|>",
                                                        "<|flush|>",
                                                        "<|calls|>",
                                                        "<end_of_turn>",
                                                        "<|endoftext|>",
                                                        "</s>",
                                                        "<|eom_id|>",
                                                        "<EOT>",
                                                        "_<EOT>",
                                                        "[EOT]",
                                                        "[EOS]",
                                                        "<|end_of_text|>",
                                                        "<end_of_utterance>",
                                                        "<eos>",
                                                        "<turn|>",
                                                        "<|tool_response>",
                                                        "<｜end▁of▁sentence｜>",
                                                        "[e~["};

constexpr std::array<std::string_view, 4> kAlwaysRenderedTexts = {"<|channel|>", "<|message|>",
                                                                  "<|start|>", "<|constrain|>"};

}  // namespace

Vocab Vocab::from_gguf(const GgufFile& f) {
    Vocab v;
    v.read_kind(f);
    v.read_tokens(f);
    v.read_special_ids(f);
    v.find_special_by_text();
    v.mark_unused();
    v.build_eog_set();
    v.build_special_list();
    v.set_strip_attrs(f);
    return v;
}

void Vocab::read_kind(const GgufFile& f) {
    const std::string& path = f.path();
    const auto model = f.get_string("tokenizer.ggml.model");
    if (!model) throw Error(path + ": no tokenizer.ggml.model key: the file carries no tokenizer");
    model_ = *model;
    pre_ = f.get_string("tokenizer.ggml.pre").value_or("");
    if (model_ == "llama") {
        kind_ = VocabKind::kSpm;
        special_.bos = 1;
        special_.eos = 2;
        special_.unk = 0;
        flags_.add_space_prefix = true;
        flags_.add_bos = true;
    } else if (model_ == "gpt2" || model_ == "gemma4") {
        kind_ = VocabKind::kBpe;
        if (model_ == "gemma4") pre_ = "gemma4";
        preset_ = find_pre_preset(pre_);
        if (!preset_)
            throw Error(path + ": pre-tokenizer '" + pre_ +
                        "' (tokenizer.ggml.pre) is not supported");
        if (model_ == "gpt2") special_.bos = special_.eos = 11;  // llama.cpp's defaults
        if (preset_->unset_default_bos) special_.bos = -1;
        flags_.escape_whitespaces = preset_->escape_whitespaces;
        flags_.clean_spaces = preset_->clean_spaces;
        flags_.add_bos = preset_->add_bos;
    } else if (model_ == "none" || model_ == "no_vocab") {
        throw Error(path + ": the file has no vocabulary (tokenizer.ggml.model = '" + model_ +
                    "')");
    } else if (model_ == "bert" || model_ == "t5" || model_ == "rwkv" || model_ == "plamo2" ||
               model_ == "hybriddna" || model_ == "whitespace") {
        throw Error(path + ": tokenizer model '" + model_ +
                    "' is not supported (supported: llama, gpt2, gemma4)");
    } else {
        throw Error(path + ": unknown tokenizer model '" + model_ + "' (tokenizer.ggml.model)");
    }
    if (const auto p = f.get_bool("tokenizer.ggml.add_space_prefix")) flags_.add_space_prefix = *p;
}

void Vocab::read_tokens(const GgufFile& f) {
    const std::string& path = f.path();
    const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    if (!tokens) throw Error(path + ": tokenizer.ggml.tokens is missing");
    const size_t n = tokens->size();
    if (n == 0) throw Error(path + ": tokenizer.ggml.tokens is empty");
    if (n > size_t(INT32_MAX)) throw Error(path + ": tokenizer.ggml.tokens is too long");

    const auto scores = f.get_float_array("tokenizer.ggml.scores");
    if (scores && scores->size() < n)
        throw Error(path + ": tokenizer.ggml.scores has " + std::to_string(scores->size()) +
                    " entries for " + std::to_string(n) + " tokens");
    const auto types = f.get_int_array("tokenizer.ggml.token_type");
    if (types && types->size() < n)
        throw Error(path + ": tokenizer.ggml.token_type has " + std::to_string(types->size()) +
                    " entries for " + std::to_string(n) + " tokens");

    texts_.resize(n);
    scores_.assign(n, 0.0f);
    attrs_.assign(n, token_attr::kNormal);
    for (size_t i = 0; i < n; ++i) {
        const std::string_view t = (*tokens)[i];
        texts_[i] = t.empty() ? "[EMPTY_" + std::to_string(i) + "]" : std::string(t);
        if (scores) scores_[i] = (*scores)[i];
        if (types) attrs_[i] = attr_of_type((*types)[i]);
    }
    ids_.reserve(n);
    for (size_t i = 0; i < n; ++i) ids_.insert(texts_[i], int32_t(i));
}

void Vocab::read_special_ids(const GgufFile& f) {
    const std::pair<const char*, int32_t*> keys[] = {
        {"tokenizer.ggml.bos_token_id", &special_.bos},
        {"tokenizer.ggml.eos_token_id", &special_.eos},
        {"tokenizer.ggml.eot_token_id", &special_.eot},
        {"tokenizer.ggml.eom_token_id", &special_.eom},
        {"tokenizer.ggml.unknown_token_id", &special_.unk},
        {"tokenizer.ggml.seperator_token_id", &special_.sep},
        {"tokenizer.ggml.padding_token_id", &special_.pad},
        {"tokenizer.ggml.mask_token_id", &special_.mask},
        {"tokenizer.ggml.fim_pre_token_id", &special_.fim_pre},
        {"tokenizer.ggml.fim_suf_token_id", &special_.fim_suf},
        {"tokenizer.ggml.fim_mid_token_id", &special_.fim_mid},
        {"tokenizer.ggml.fim_pad_token_id", &special_.fim_pad},
        {"tokenizer.ggml.fim_rep_token_id", &special_.fim_rep},
        {"tokenizer.ggml.fim_sep_token_id", &special_.fim_sep},
        // deprecated names, read after the new ones as llama.cpp does
        {"tokenizer.ggml.prefix_token_id", &special_.fim_pre},
        {"tokenizer.ggml.suffix_token_id", &special_.fim_suf},
        {"tokenizer.ggml.middle_token_id", &special_.fim_mid},
    };
    for (const auto& [key, id] : keys) {
        if (!is_valid(*id)) *id = -1;  // a default beyond a small vocabulary
        const auto v = f.get_int(key);
        if (v && *v >= 0 && *v < n_tokens()) *id = int32_t(*v);  // else: keep the default
    }
    if (const auto b = f.get_bool("tokenizer.ggml.add_bos_token")) flags_.add_bos = *b;
    if (const auto b = f.get_bool("tokenizer.ggml.add_eos_token")) flags_.add_eos = *b;
    if (preset_ && preset_->force_add_bos) flags_.add_bos = true;
    if (flags_.add_bos && special_.bos < 0)
        throw Error(f.path() + ": the vocabulary asks for a BOS token but has none");
    if (flags_.add_eos && special_.eos < 0)
        throw Error(f.path() + ": the vocabulary asks for an EOS token but has none");
}

void Vocab::mark_control(int32_t id) {
    attrs_[size_t(id)] |= token_attr::kControl;
}

// llama.cpp takes the first match in its hash map's order, which cannot be reproduced; the
// order of its lists is the intent (<|eot_id|> before <|end_of_text|>, <|im_end|> before
// <|endoftext|>) and gives the same choice on Llama 3, Qwen 2 and Phi-3.
void Vocab::find_special_by_text() {
    const auto detect = [&](int32_t& slot, const auto& texts) {
        if (slot >= 0) return;  // named by the file
        for (const std::string_view t : texts) {
            if (const int32_t id = find(t); id >= 0) {
                slot = id;
                mark_control(id);
                return;
            }
        }
    };
    detect(special_.eot, kEotTexts);
    detect(special_.eom, kEomTexts);
    detect(special_.fim_pre, kFimPreTexts);
    detect(special_.fim_suf, kFimSufTexts);
    detect(special_.fim_mid, kFimMidTexts);
    detect(special_.fim_pad, kFimPadTexts);
    detect(special_.fim_rep, kFimRepTexts);
    detect(special_.fim_sep, kFimSepTexts);
}

void Vocab::build_eog_set() {
    std::set<int32_t> eog;
    for (const int32_t id : {special_.fim_pad, special_.fim_rep, special_.fim_sep})
        if (id >= 0) eog.insert(id);
    for (const std::string_view t : kEogTexts) {
        if (const int32_t id = find(t); id >= 0) {
            eog.insert(id);
            mark_control(id);
        }
    }
    // gpt-oss's channel markup must always be rendered.
    for (const std::string_view t : kAlwaysRenderedTexts)
        if (const int32_t id = find(t); id >= 0) attrs_[size_t(id)] = token_attr::kUserDefined;
    for (const int32_t id : {special_.eos, special_.eot, special_.eom})
        if (id >= 0) eog.insert(id);

    // gpt-oss (o200k_harmony) and solar-open end a message with <|end|> but keep generating:
    // when their other end markers are present, <|end|> is not end-of-generation.
    const auto eog_with_text = [&](std::string_view text) {
        for (const int32_t id : eog)
            if (texts_[size_t(id)] == text) return id;
        return -1;
    };
    const int32_t end_id = eog_with_text("<|end|>");
    const bool has_call = eog_with_text("<|call|>") >= 0 || eog_with_text("<|calls|>") >= 0;
    if (end_id >= 0 && has_call &&
        (eog_with_text("<|return|>") >= 0 || eog_with_text("<|flush|>") >= 0)) {
        eog.erase(end_id);
        attrs_[size_t(end_id)] = token_attr::kUserDefined;
    }
    // Gemma 4 writes </s> as text inside tool responses.
    const int32_t s_id = eog_with_text("</s>");
    if (s_id >= 0 && eog_with_text("<|tool_response>") >= 0) {
        eog.erase(s_id);
        attrs_[size_t(s_id)] = token_attr::kNormal;
    }
    eog_ids_.assign(eog.begin(), eog.end());
}

// Control tokens named "...unused..." are placeholders (llama.cpp marks them unused).
void Vocab::mark_unused() {
    for (int32_t id = 0; id < n_tokens(); ++id)
        if ((attrs_[size_t(id)] & token_attr::kControl) &&
            texts_[size_t(id)].find("unused") != std::string::npos)
            attrs_[size_t(id)] |= token_attr::kUnused;
}

void Vocab::build_special_list() {
    constexpr uint32_t kSpecial =
        token_attr::kControl | token_attr::kUserDefined | token_attr::kUnknown;
    special_tokens_.clear();
    for (int32_t id = 0; id < n_tokens(); ++id)
        if (attrs_[size_t(id)] & kSpecial) special_tokens_.push_back(id);
    // The same sort as llama.cpp's (not stable), from the same ascending order, so that tokens
    // of equal length are tried in the same order.
    std::sort(special_tokens_.begin(), special_tokens_.end(), [&](int32_t a, int32_t b) {
        return texts_[size_t(a)].size() > texts_[size_t(b)].size();
    });
}

void Vocab::set_strip_attrs(const GgufFile& f) {
    std::string name = f.get_string("general.name").value_or("");
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    const std::string arch = f.get_string("general.architecture").value_or("");
    const auto set = [&](std::string_view text, uint32_t bit, bool on) {
        const int32_t id = find(text);
        if (id < 0) return;
        attrs_[size_t(id)] = on ? (attrs_[size_t(id)] | bit) : (attrs_[size_t(id)] & ~bit);
    };
    if (contains_any(pre_, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
        contains_any(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
        set("<mask>", token_attr::kLstrip, true);
    } else if (contains_any(name, {"phi-3", "phi3"})) {
        for (const int32_t id : special_tokens_) attrs_[size_t(id)] |= token_attr::kRstrip;
        set("</s>", token_attr::kRstrip, true);
        for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, token_attr::kRstrip, false);
    } else if (contains_any(name, {"modern-bert"})) {
        set("[MASK]", token_attr::kLstrip, true);
    }
}

bool Vocab::is_eog(int32_t id) const {
    return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

}  // namespace troupe
