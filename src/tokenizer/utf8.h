// UTF-8 helpers for the tokenizers.
//
// Two decoders on purpose:
// - The lenient one reproduces how llama.cpp reads text before pre-tokenizing it: the length
//   of a character comes from its lead byte alone, continuation bytes are checked, ranges are
//   not (an overlong form decodes to its code point). Each byte that does not start a
//   well-formed sequence becomes U+FFFD. Tokenizers must cut text exactly where llama.cpp
//   cuts it, so this is the one they use.
// - The strict one (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF) decides
//   what may leave the library as text (the streaming decoder).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::utf8 {

constexpr uint32_t kReplacement = 0xFFFD;

// Length of the character that `lead` starts, from its high nibble only (1 for ASCII and for
// stray continuation bytes, 2 for 0xC0-0xDF, 3 for 0xE0-0xEF, 4 for 0xF0-0xFF).
inline size_t len_from_lead(uint8_t lead) {
    static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kLen[lead >> 4];
}

// Appends the UTF-8 encoding of `cpt` (which must be <= 0x10FFFF) to `out`.
void append(std::string& out, uint32_t cpt);

// Lenient decode of the character at `text[pos]`; advances `pos` by its length, or by one byte
// (returning U+FFFD) when the sequence is malformed or truncated.
uint32_t decode_lenient(std::string_view text, size_t& pos);

// Rewrites `text` so that every character is well-formed: the lenient decode of each
// character, re-encoded. Code points a strict decoder would reject (surrogates, above
// U+10FFFF) become U+FFFD. Valid UTF-8 comes back unchanged.
std::string sanitize(std::string_view text);

// True when `text` is entirely valid UTF-8 in the strict sense.
bool is_valid(std::string_view text);

// Strict check of the sequence starting at text[pos]:
//   > 0  a complete valid character of that many bytes,
//   = 0  a valid but incomplete prefix that runs to the end of `text`,
//   < 0  invalid; the magnitude is the number of bytes to replace by one U+FFFD
//        (the maximal ill-formed subpart, as Unicode recommends).
int check_char(std::string_view text, size_t pos);

}  // namespace troupe::utf8
