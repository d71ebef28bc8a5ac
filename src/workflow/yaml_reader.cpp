#include "workflow/yaml_reader.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace troupe::workflow {

namespace {

bool is_plain(const YAML::Node& n) {
    return n.Tag() == "?";
}

std::string quoted(const std::string& s) {
    std::string shown = s.size() > 40 ? s.substr(0, 37) + "..." : s;
    return "\"" + shown + "\"";
}

std::string number_text(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

}  // namespace

std::string describe(const YAML::Node& node) {
    if (!node.IsDefined() || node.IsNull()) return "nothing";
    if (node.IsSequence()) return "a list";
    if (node.IsMap()) return "a mapping";
    return is_plain(node) ? node.Scalar() : "the string " + quoted(node.Scalar());
}

YamlReader::YamlReader(std::string file, std::string_view text, Diagnostics& diag)
    : file_(std::move(file)), text_(text), diag_(diag) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < text_.size(); ++i)
        if (text_[i] == '\n') line_starts_.push_back(i + 1);
}

SourceLoc YamlReader::loc(const YAML::Mark& mark) const {
    SourceLoc l;
    l.file = file_;
    if (mark.line >= 0) l.line = mark.line + 1;
    if (mark.column >= 0) l.column = mark.column + 1;
    return l;
}

std::vector<YamlReader::Entry> YamlReader::entries(const YAML::Node& map) const {
    std::vector<Entry> out;
    if (!map.IsMap()) return out;
    for (auto it = map.begin(); it != map.end(); ++it)
        out.push_back({it->first.IsScalar() ? it->first.Scalar() : std::string("?"),
                       loc(it->first.Mark()), it->second});
    return out;
}

Field YamlReader::field(const YAML::Node& map, const std::string& key,
                        const std::string& item) const {
    Field f;
    f.item = item;
    f.key = key;
    if (!map.IsMap()) return f;
    for (auto it = map.begin(); it != map.end(); ++it) {
        if (!it->first.IsScalar() || it->first.Scalar() != key) continue;
        f.node = it->second;
        f.found = true;
        // An empty value's mark points past it; the key's is where the author looks.
        f.loc = it->second.IsNull() ? loc(it->first.Mark()) : loc(it->second.Mark());
        return f;
    }
    return f;
}

void YamlReader::check_keys(const YAML::Node& map, const std::vector<std::string>& allowed,
                            const std::string& item) {
    std::map<std::string, int> first_line;
    for (const Entry& e : entries(map)) {
        bool known = false;
        for (const std::string& a : allowed) known = known || a == e.key;
        if (!known) {
            diag_.error(e.loc, item, "unknown key '" + e.key + "'" + did_you_mean(e.key, allowed));
            continue;
        }
        auto [it, inserted] = first_line.emplace(e.key, e.loc.line);
        if (!inserted)
            diag_.error(
                e.loc, item,
                "duplicate key '" + e.key + "' (first at line " + std::to_string(it->second) + ")");
    }
}

void YamlReader::report(const Field& f, const std::string& message) {
    diag_.error(f.loc, f.item, "'" + f.key + "' " + message);
}

bool YamlReader::expect_map(const Field& f) {
    if (f.node.IsMap()) return true;
    report(f, "must be a mapping of keys to values, got " + describe(f.node));
    return false;
}

bool YamlReader::expect_sequence(const Field& f) {
    if (f.node.IsSequence()) return true;
    report(f, "must be a list, got " + describe(f.node));
    return false;
}

std::optional<std::string> YamlReader::text(const Field& f) {
    if (f.node.IsScalar()) return f.node.Scalar();
    report(f, "must be text, got " + describe(f.node));
    return std::nullopt;
}

std::optional<int64_t> YamlReader::integer(const Field& f, int64_t lo, int64_t hi) {
    int64_t v = 0;
    bool ok = f.node.IsScalar() && is_plain(f.node);
    if (ok) {
        const std::string& s = f.node.Scalar();
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        ok = ec == std::errc() && end == s.data() + s.size();
    }
    if (!ok) {
        report(f, "must be an integer, got " + describe(f.node));
        return std::nullopt;
    }
    if (v < lo || v > hi) {
        report(f, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                      ", got " + std::to_string(v));
        return std::nullopt;
    }
    return v;
}

std::optional<double> YamlReader::number(const Field& f, double lo, double hi) {
    double v = 0;
    bool ok = f.node.IsScalar() && is_plain(f.node) && !f.node.Scalar().empty();
    if (ok) {
        const std::string& s = f.node.Scalar();
        char* end = nullptr;
        v = std::strtod(s.c_str(), &end);
        ok = end == s.c_str() + s.size() && std::isfinite(v);
    }
    if (!ok) {
        report(f, "must be a number, got " + describe(f.node));
        return std::nullopt;
    }
    if (v < lo || v > hi) {
        report(f, "must be between " + number_text(lo) + " and " + number_text(hi) + ", got " +
                      number_text(v));
        return std::nullopt;
    }
    return v;
}

std::optional<std::vector<std::string>> YamlReader::text_list(const Field& f) {
    if (!expect_sequence(f)) return std::nullopt;
    std::vector<std::string> out;
    bool ok = true;
    for (const YAML::Node& n : f.node) {
        if (n.IsScalar()) {
            out.push_back(n.Scalar());
            continue;
        }
        diag_.error(loc(n.Mark()), f.item,
                    "'" + f.key + "' must list text items, got " + describe(n));
        ok = false;
    }
    if (!ok) return std::nullopt;
    return out;
}

std::optional<PromptTemplate> YamlReader::prompt(const Field& f) {
    std::optional<std::string> s = text(f);
    if (!s) return std::nullopt;
    while (!s->empty() && (s->back() == '\n' || s->back() == ' ' || s->back() == '\t'))
        s->pop_back();
    const YAML::Node node = f.node;
    const std::string value = *s;
    try {
        return PromptTemplate::parse(
            *s, [&](size_t offset) { return locate_in_scalar(node, value, offset); });
    } catch (const TemplateError& e) {
        SourceLoc l = locate_in_scalar(node, value, e.offset);
        diag_.error(l, f.item, "in '" + f.key + "': " + e.what());
        return std::nullopt;
    }
}

// Maps a byte offset of a scalar's value back to the file. Exact for literal block scalars
// (`|`, the usual form of a prompt) and single-line scalars; approximate for folded ones.
SourceLoc YamlReader::locate_in_scalar(const YAML::Node& node, const std::string& value,
                                       size_t offset) const {
    const YAML::Mark mark = node.Mark();
    SourceLoc l = loc(mark);
    if (mark.pos < 0 || size_t(mark.pos) >= text_.size()) return l;
    size_t newlines = 0, line_begin = 0;
    for (size_t i = 0; i < offset && i < value.size(); ++i)
        if (value[i] == '\n') ++newlines, line_begin = i + 1;
    const char first = text_[size_t(mark.pos)];
    const bool block = first == '|' || first == '>';
    const bool quoted_scalar = first == '"' || first == '\'';
    const size_t src_line = size_t(mark.line) + (block ? 1 : 0) + newlines;  // 0-based
    l.line = int(src_line) + 1;
    l.column = 0;
    if (block && src_line < line_starts_.size()) {
        size_t indent = 0;
        for (size_t p = line_starts_[src_line]; p < text_.size() && text_[p] == ' '; ++p) ++indent;
        l.column = int(indent + (offset - line_begin)) + 1;
    } else if (newlines == 0) {
        l.column = mark.column + int(offset) + (quoted_scalar ? 1 : 0) + 1;
    }
    return l;
}

}  // namespace troupe::workflow
