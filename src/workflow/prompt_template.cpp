#include "workflow/prompt_template.h"

namespace troupe::workflow {

namespace {

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool is_name(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!is_name_char(c)) return false;
    return true;
}

// Parses the inside of "{{ ... }}" (already trimmed) into a reference.
TemplateRef parse_ref(std::string_view expr, size_t offset) {
    const std::string shown = "{{" + std::string(expr) + "}}";
    if (expr.empty()) throw TemplateError(offset, "empty reference '{{}}'");
    const size_t dot = expr.find('.');
    if (dot == std::string_view::npos)
        throw TemplateError(offset, "reference '" + shown +
                                        "' needs a field: use {{inputs.NAME}}, {{TASK.output}} "
                                        "or {{TASK.failed}}");
    const std::string_view head = expr.substr(0, dot);
    const std::string_view field = expr.substr(dot + 1);
    if (!is_name(head) || !is_name(field))
        throw TemplateError(
            offset, "malformed reference '" + shown + "' (names are letters, digits, '_' and '-')");
    TemplateRef ref;
    ref.offset = offset;
    if (head == "inputs") {
        ref.kind = TemplateRef::Kind::Input;
        ref.name = std::string(field);
    } else if (field == "output" || field == "failed") {
        ref.kind = field == "output" ? TemplateRef::Kind::Output : TemplateRef::Kind::Failed;
        ref.name = std::string(head);
    } else {
        throw TemplateError(offset, "unknown field '" + std::string(field) + "' in '" + shown +
                                        "' (a task has .output and .failed)");
    }
    return ref;
}

}  // namespace

std::string TemplateRef::str() const {
    switch (kind) {
        case Kind::Input:
            return "inputs." + name;
        case Kind::Output:
            return name + ".output";
        case Kind::Failed:
            return name + ".failed";
    }
    return name;
}

PromptTemplate PromptTemplate::parse(std::string text, const Locate& locate) {
    PromptTemplate t;
    std::string literal;
    size_t i = 0;
    while (i < text.size()) {
        if (text.compare(i, 3, "\\{{") == 0) {
            literal += "{{";
            i += 3;
            continue;
        }
        if (text.compare(i, 2, "{{") != 0) {
            literal += text[i++];
            continue;
        }
        const size_t close = text.find("}}", i + 2);
        const size_t next_open = text.find("{{", i + 2);
        if (close == std::string::npos || (next_open != std::string::npos && next_open < close))
            throw TemplateError(i, "unclosed '{{' (write \\{{ for a literal '{{')");
        const std::string_view expr = trim(std::string_view(text).substr(i + 2, close - i - 2));
        if (!literal.empty()) t.pieces_.push_back({std::move(literal), -1});
        literal.clear();
        t.refs_.push_back(parse_ref(expr, i));
        if (locate) t.refs_.back().loc = locate(i);
        t.pieces_.push_back({{}, int(t.refs_.size()) - 1});
        i = close + 2;
    }
    if (!literal.empty()) t.pieces_.push_back({std::move(literal), -1});
    t.source_ = std::move(text);
    return t;
}

std::string PromptTemplate::render(const Lookup& lookup) const {
    std::string out;
    out.reserve(source_.size());
    for (const Piece& p : pieces_) out += p.ref < 0 ? p.literal : lookup(refs_[size_t(p.ref)]);
    return out;
}

}  // namespace troupe::workflow
