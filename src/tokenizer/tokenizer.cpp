#include "tokenizer/tokenizer.h"

#include "gguf/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pieces.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/special_split.h"
#include "tokenizer/spm.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace troupe {

namespace {

// ' ' -> U+2581, SentencePiece's visible space.
void append_escaped_spaces(std::string_view text, std::string& out) {
    for (const char c : text) {
        if (c == ' ') {
            out += "\xE2\x96\x81";
        } else {
            out.push_back(c);
        }
    }
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}

Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
    std::unique_ptr<Tokenizer> t(new Tokenizer(Vocab::from_gguf(f)));
    const Vocab& v = t->vocab_;
    if (v.kind() == VocabKind::kSpm) {
        t->spm_ = std::make_unique<SpmEncoder>(v);
    } else {
        const auto merges = f.get_string_array("tokenizer.ggml.merges");
        if (!merges)
            throw Error(f.path() + ": tokenizer.ggml.merges is missing (a " + v.model_name() +
                        " vocabulary needs its BPE merges)");
        t->pre_ = std::make_unique<PreTokenizer>(v.pre_preset()->regexes);
        t->bpe_ = std::make_unique<BpeEncoder>(v, *merges, t->codec_);
    }
    t->specials_ = std::make_unique<SpecialSplitter>(v);
    t->pieces_ = build_piece_table(v, t->codec_);
    return t;
}

void Tokenizer::encode_raw(std::string_view text, bool after_special,
                           std::vector<int32_t>& out) const {
    const VocabFlags& flags = vocab_.flags();
    std::string buf;
    if (spm_) {
        // SentencePiece adds a space in front of the text; llama.cpp does it for every stretch
        // that opens the text or follows a special token.
        buf.reserve(text.size() * 3 / 2 + 4);
        append_escaped_spaces(flags.add_space_prefix && after_special ? " " : "", buf);
        append_escaped_spaces(text, buf);
        TokenCache::Session cache(cache_);
        spm_->encode(buf, out, &cache);
        return;
    }
    if (flags.escape_whitespaces) {
        append_escaped_spaces(text, buf);
        buf = utf8::sanitize(buf);
    } else {
        buf = utf8::sanitize(text);
    }
    std::vector<TextSpan> words;
    pre_->split(buf, words);
    BpeScratch scratch;
    const std::string_view s = buf;
    TokenCache::Session cache(cache_);
    for (const TextSpan w : words) {
        const std::string_view word = s.substr(w.begin, w.end - w.begin);
        if (cache.lookup(word, out)) continue;
        const size_t n0 = out.size();
        bpe_->encode_word(word, out, scratch);
        cache.remember(word, std::span(out).subspan(n0));
    }
}

std::vector<int32_t> Tokenizer::tokenize(std::string_view text, bool add_special,
                                         bool parse_special) const {
    const VocabFlags& flags = vocab_.flags();
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    if (add_special && flags.add_bos) out.push_back(vocab_.special().bos);

    std::vector<Fragment> fragments;
    specials_->split(text, parse_special, fragments);
    bool after_special = true;  // the start of the text counts as following a special token
    for (const Fragment& f : fragments) {
        if (f.token >= 0) {
            out.push_back(f.token);
            after_special = true;
        } else {
            encode_raw(text.substr(f.begin, f.end - f.begin), after_special, out);
            after_special = false;
        }
    }
    if (add_special && flags.add_eos) out.push_back(vocab_.special().eos);
    return out;
}

void Tokenizer::check_id(int32_t id) const {
    if (!vocab_.is_valid(id))
        throw Error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                    std::to_string(vocab_.n_tokens() - 1) + ")");
}

const std::string& Tokenizer::token_text(int32_t id) const {
    check_id(id);
    return vocab_.text(id);
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
    check_id(id);
    if (!render_special && (vocab_.attr(id) & (token_attr::kControl | token_attr::kUnknown)))
        return {};
    return pieces_[size_t(id)];
}

std::string Tokenizer::detokenize(std::span<const int32_t> ids, bool render_special) const {
    std::string out;
    bool strip_space = vocab_.flags().add_space_prefix;  // only ever from the first token
    for (const int32_t id : ids) {
        check_id(id);
        const bool hidden =
            !render_special && (vocab_.attr(id) & (token_attr::kControl | token_attr::kUnknown));
        if (!hidden) {
            const std::string& piece = pieces_[size_t(id)];
            const size_t skip = strip_space && !piece.empty() && piece[0] == ' ' ? 1 : 0;
            out.append(piece, skip, std::string::npos);
        }
        strip_space = false;
    }
    return vocab_.flags().clean_spaces ? clean_up_spaces(std::move(out)) : out;
}

}  // namespace troupe
