#include "tokenizer/byte_level.h"

#include "util/error.h"

namespace troupe {

namespace {

bool stands_for_itself(int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

}  // namespace

ByteLevelCodec::ByteLevelCodec() {
    dec_.fill(-1);
    int n_shifted = 0;
    for (int b = 0; b < 256; ++b) {
        const uint32_t cpt = stands_for_itself(b) ? uint32_t(b) : uint32_t(256 + n_shifted++);
        TROUPE_CHECK(cpt < dec_.size());
        Entry& e = enc_[size_t(b)];
        if (cpt < 0x80) {
            e.bytes[0] = char(cpt);
            e.n = 1;
        } else {
            e.bytes[0] = char(0xC0 | (cpt >> 6));
            e.bytes[1] = char(0x80 | (cpt & 0x3F));
            e.n = 2;
        }
        dec_[cpt] = int16_t(b);
    }
}

void ByteLevelCodec::encode_append(std::string_view bytes, std::string& out) const {
    for (const char c : bytes) {
        const Entry& e = enc_[uint8_t(c)];
        out.append(e.bytes, e.n);
    }
}

}  // namespace troupe
