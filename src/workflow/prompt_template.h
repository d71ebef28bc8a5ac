// Prompt templates: text with references in double braces.
//
//   {{inputs.NAME}}   the run's value of input NAME
//   {{TASK.output}}   the final output of task TASK (its fallback text if it failed)
//   {{TASK.failed}}   "true" if TASK failed (fallback or skip), else "false"
//   \{{               a literal "{{"
//
// Spaces inside the braces are allowed ({{ inputs.topic }}). Names are letters, digits, '_'
// and '-'. Nothing else is syntax: there are no conditionals or loops, so a prompt reads as
// what the model will see. Which references are allowed where (inputs only in shared blocks
// and roles) is the validator's business, not the parser's.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"
#include "workflow/diagnostics.h"

namespace troupe::workflow {

struct TemplateRef {
    enum class Kind { Input, Output, Failed };
    Kind kind = Kind::Input;
    std::string name;   // input name (Input) or task id (Output, Failed)
    size_t offset = 0;  // byte offset of the opening "{{" in the template text
    SourceLoc loc;      // where it was written in the workflow file (empty if not from a file)
    std::string str() const;  // "inputs.NAME", "TASK.output" or "TASK.failed"
};

// A syntax error at a byte offset of the template text.
class TemplateError : public Error {
  public:
    TemplateError(size_t offset, const std::string& message) : Error(message), offset(offset) {}
    size_t offset;
};

class PromptTemplate {
  public:
    PromptTemplate() = default;

    // Throws TemplateError on an unclosed "{{", an empty or malformed reference, or an unknown
    // field (anything but .output / .failed after a task id).
    // `locate` (optional) maps a byte offset of `text` to its place in the source file; it is
    // stored in each reference for later error messages.
    using Locate = std::function<SourceLoc(size_t offset)>;
    static PromptTemplate parse(std::string text, const Locate& locate = {});

    const std::string& source() const { return source_; }
    const std::vector<TemplateRef>& refs() const { return refs_; }

    // Substitutes every reference with lookup(ref); literal text is copied unchanged.
    using Lookup = std::function<std::string(const TemplateRef&)>;
    std::string render(const Lookup& lookup) const;

  private:
    struct Piece {
        std::string literal;  // used when ref < 0
        int ref = -1;         // index into refs_
    };
    std::string source_;
    std::vector<Piece> pieces_;
    std::vector<TemplateRef> refs_;
};

}  // namespace troupe::workflow
