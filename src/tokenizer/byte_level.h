// GPT-2's byte-level alphabet: each of the 256 byte values is written as one printable
// Unicode character so that BPE vocabularies can hold arbitrary bytes as text. Bytes that are
// printable Latin-1 ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for themselves; the other
// 68 take the code points U+0100, U+0101, ... in byte order (so ' ' is 'Ġ' U+0120 and '\n' is
// 'Ċ' U+010A).
//
// Thread-safety: immutable after construction.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace troupe {

class ByteLevelCodec {
  public:
    ByteLevelCodec();

    // The character (1 or 2 UTF-8 bytes) that stands for `byte`.
    std::string_view encode(uint8_t byte) const {
        const Entry& e = enc_[byte];
        return std::string_view(e.bytes, e.n);
    }

    // Appends the byte-level form of raw `bytes` to `out`.
    void encode_append(std::string_view bytes, std::string& out) const;

    // The byte that code point `cpt` stands for, or -1 when `cpt` is not in the alphabet.
    int decode(uint32_t cpt) const { return cpt < dec_.size() ? dec_[cpt] : -1; }

  private:
    struct Entry {
        char bytes[2];
        uint8_t n;
    };
    std::array<Entry, 256> enc_{};
    std::array<int16_t, 324> dec_{};  // the alphabet ends at U+0143
};

}  // namespace troupe
