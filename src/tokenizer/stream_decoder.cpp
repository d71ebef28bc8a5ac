#include "tokenizer/stream_decoder.h"

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace troupe {

namespace {

constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& t, bool render_special)
    : tokenizer_(t), render_special_(render_special) {}

std::string StreamDecoder::push(int32_t id) {
    pending_ += tokenizer_.token_to_piece(id, render_special_);
    std::string out;
    size_t pos = 0;
    while (pos < pending_.size()) {
        const int n = utf8::check_char(pending_, pos);
        if (n == 0) break;  // a valid start of a character that the next token may finish
        if (n > 0) {
            out.append(pending_, pos, size_t(n));
            pos += size_t(n);
        } else {
            out += kReplacementUtf8;
            pos += size_t(-n);
        }
    }
    pending_.erase(0, pos);
    return out;
}

std::string StreamDecoder::flush() {
    std::string out = pending_.empty() ? "" : std::string(kReplacementUtf8);
    pending_.clear();
    return out;
}

}  // namespace troupe
