#include "workflow/diagnostics.h"

#include <algorithm>

#include "util/error.h"

namespace troupe::workflow {

std::string SourceLoc::str() const {
    std::string s = file.empty() ? "<workflow>" : file;
    if (line > 0) s.append(":").append(std::to_string(line));
    if (line > 0 && column > 0) s.append(":").append(std::to_string(column));
    return s;
}

void Diagnostics::error(const SourceLoc& loc, const std::string& item, const std::string& message) {
    lines_.push_back(loc.str() + ": " + item + ": " + message);
}

void Diagnostics::throw_if_any() const {
    if (lines_.empty()) return;
    std::string text;
    for (size_t i = 0; i < lines_.size() && i < kMaxShown; ++i) {
        if (i) text += '\n';
        text += lines_[i];
    }
    if (lines_.size() > kMaxShown)
        text += "\n... and " + std::to_string(lines_.size() - kMaxShown) + " more errors";
    throw Error(text);
}

namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// neighbouring characters ("plna" is one edit from "plan").
size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        for (size_t j = 1; j <= b.size(); ++j) {
            d[i][j] = std::min(
                {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    }
    return d[a.size()][b.size()];
}

}  // namespace

std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
    const std::string* best = nullptr;
    size_t best_d = 0;
    for (const std::string& c : candidates) {
        const size_t d = edit_distance(name, c);
        if (!best || d < best_d) best = &c, best_d = d;
    }
    // A typo changes at most a third of the name (and at least one edit is always allowed).
    if (!best || best_d > std::max<size_t>(1, name.size() / 3)) return "";
    return " (did you mean '" + *best + "'?)";
}

}  // namespace troupe::workflow
