// Locations and error collection for workflow files.
//
// Every problem found while loading or validating a workflow becomes one line
//   FILE:LINE:COLUMN: ITEM: MESSAGE
// e.g. "writing.yaml:42:12: task 'review': unknown agent 'reviwer' (did you mean 'reviewer'?)".
// The loader collects all of them and throws one troupe::Error whose text is those lines (the
// first line alone is a complete message), so an author sees every mistake at once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace troupe::workflow {

// Where an item was written.
struct SourceLoc {
    std::string file;
    int line = 0;             // 1-based; 0 when unknown
    int column = 0;           // 1-based; 0 when unknown
    std::string str() const;  // "file:line:column", "file:line" or "file"
};

class Diagnostics {
  public:
    static constexpr size_t kMaxShown = 20;

    // `item` names what is wrong ("task 'review'", "agent 'planner'", "workflow").
    void error(const SourceLoc& loc, const std::string& item, const std::string& message);

    bool empty() const { return lines_.empty(); }
    const std::vector<std::string>& lines() const { return lines_; }

    // Throws troupe::Error listing the first kMaxShown lines (and how many more), if any.
    void throw_if_any() const;

  private:
    std::vector<std::string> lines_;
};

// " (did you mean 'x'?)" for the candidate closest to `name` by edit distance, if one is close
// enough to be a plausible typo; "" otherwise.
std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace troupe::workflow
