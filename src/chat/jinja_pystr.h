// Python `str` operations on UTF-8 text, as chat templates use them.
//
// Lengths, indices and slices count code points. Whitespace is Python's (str.isspace: ASCII
// whitespace, \x1c-\x1f, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028/9, U+202F, U+205F,
// U+3000). Case mapping (upper/lower/title/capitalize) covers ASCII only; other code points
// are left unchanged.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::jinja::pystr {

// Code points of `s` as UTF-8 pieces (an invalid byte is its own piece).
std::vector<std::string_view> code_points(std::string_view s);
size_t length(std::string_view s);  // number of code points

// s[start:stop:step] with Python's rules for missing bounds, negative values and clamping.
// `step` must not be 0.
std::string slice(std::string_view s, std::optional<int64_t> start, std::optional<int64_t> stop,
                  std::optional<int64_t> step);

// Indices selected by [start:stop:step] on a sequence of length n (shared with lists).
std::vector<size_t> slice_indices(size_t n, std::optional<int64_t> start,
                                  std::optional<int64_t> stop, std::optional<int64_t> step);

bool is_space_at(std::string_view s, size_t pos, size_t* len);  // Python whitespace at pos?

// strip/lstrip/rstrip: whitespace when `chars` is nullopt, else any code point of `chars`.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);

// str.split(sep, maxsplit) / str.rsplit: whitespace runs when sep is nullopt.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit, bool from_right);
std::vector<std::string> splitlines(std::string_view s);

std::string replace(std::string_view s, std::string_view old_sub, std::string_view new_sub,
                    int64_t count);  // count < 0: all
int64_t count(std::string_view s, std::string_view sub);
int64_t find(std::string_view s, std::string_view sub, bool from_right);  // code point index

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);  // str.capitalize: first upper, rest lower
std::string title(std::string_view s);       // str.title: words start after non-letters

}  // namespace troupe::jinja::pystr
