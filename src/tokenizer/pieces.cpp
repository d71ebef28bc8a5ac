#include "tokenizer/pieces.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "tokenizer/utf8.h"

namespace troupe {

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's space

std::string unescape_spaces(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        if (text.compare(pos, kSpaceMark.size(), kSpaceMark) == 0) {
            out.push_back(' ');
            pos += kSpaceMark.size();
        } else {
            out.push_back(text[pos++]);
        }
    }
    return out;
}

std::string decode_byte_level(std::string_view text, const ByteLevelCodec& codec) {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        uint32_t cpt = utf8::decode_lenient(text, pos);
        const int byte = codec.decode(cpt);
        if (byte >= 0) {
            out.push_back(char(byte));
            continue;
        }
        if (cpt > 0x10FFFF) cpt = utf8::kReplacement;
        std::string utf;
        utf8::append(utf, cpt);
        out += "[UNK_BYTE_0x";
        for (const char c : utf) {
            char hex[4];
            std::snprintf(hex, sizeof(hex), "%02x", unsigned(uint8_t(c)));
            out += hex;
        }
        out.append(text);  // llama.cpp appends the whole token text here
        out += "]";
    }
    return out;
}

// The byte of a byte token "<0xXX>".
std::string byte_of_hex_token(const std::string& text) {
    if (text.size() < 5) return {};
    return std::string(1, char(std::strtol(text.substr(3, 2).c_str(), nullptr, 16)));
}

std::string piece_of(const Vocab& vocab, const ByteLevelCodec& codec, int32_t id) {
    const uint32_t attr = vocab.attr(id);
    const std::string& text = vocab.text(id);
    if (attr & (token_attr::kUnknown | token_attr::kControl | token_attr::kUserDefined))
        return text;
    if (attr & token_attr::kNormal) {
        if (vocab.kind() == VocabKind::kSpm || vocab.flags().escape_whitespaces)
            return unescape_spaces(text);
        return decode_byte_level(text, codec);
    }
    if (attr & token_attr::kByte) return byte_of_hex_token(text);
    return {};
}

// The three passes of clean_up_spaces(), each on non-empty text; the first character is
// always kept.

// " ?", " !", " .", " ,": the space goes.
std::string drop_space_before_punct(const std::string& text) {
    std::string out(1, text[0]);
    for (size_t i = 1; i < text.size(); ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) out.pop_back();
        out.push_back(x);
    }
    return out;
}

// " ' ": both spaces go. The space after is consumed (llama.cpp overwrites it with NUL, so it
// no longer counts as a space for the next character).
std::string drop_spaces_around_quote(std::string text) {
    std::string out(1, text[0]);
    for (size_t i = 1; i < text.size(); ++i) {
        const char x = text[i];
        if (x == '\'' && i + 1 < text.size() && text[i - 1] == ' ' && text[i + 1] == ' ') {
            out.pop_back();
            text[++i] = '\0';
        }
        out.push_back(x);
    }
    return out;
}

// " 's", " 'm", " 're", " 've": the space goes (" 't", " 'd", " 'll" keep it).
std::string drop_space_before_contractions(const std::string& text) {
    std::string out(1, text[0]);
    const size_t n = text.size();
    for (size_t i = 1; i < n; ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            const char x1 = text[i + 1];
            const char x2 = i + 2 < n ? text[i + 2] : '\0';
            const bool drop = x1 == 's' || x1 == 'm' ||
                              (i + 2 < n && ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')));
            if (drop) out.pop_back();
        }
        out.push_back(x);
    }
    return out;
}

}  // namespace

std::vector<std::string> build_piece_table(const Vocab& vocab, const ByteLevelCodec& codec) {
    std::vector<std::string> pieces(size_t(vocab.n_tokens()));
    for (int32_t id = 0; id < vocab.n_tokens(); ++id)
        pieces[size_t(id)] = piece_of(vocab, codec, id);
    return pieces;
}

std::string clean_up_spaces(std::string text) {
    if (text.empty()) return text;
    return drop_space_before_contractions(drop_spaces_around_quote(drop_space_before_punct(text)));
}

}  // namespace troupe
