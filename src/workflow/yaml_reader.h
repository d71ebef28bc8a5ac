// Typed reads of YAML nodes that report problems with file positions (internal to the
// workflow loader; yaml-cpp stays out of every public header).
//
// Each read takes a Field (a key looked up in a mapping, with the item it belongs to) and
// returns std::nullopt after reporting to Diagnostics when the value has the wrong type or is
// out of range, so the loader carries on and reports every problem of a file at once.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "workflow/diagnostics.h"
#include "workflow/prompt_template.h"

namespace troupe::workflow {

struct Field {
    YAML::Node node;   // the value (meaningless when absent)
    SourceLoc loc;     // of the value; of the key when the value is empty
    std::string item;  // what it belongs to, e.g. "agent 'planner'"
    std::string key;   // e.g. "max_tokens"
    bool found = false;
    bool present() const { return found; }
    bool is_null() const { return found && node.IsNull(); }
};

class YamlReader {
  public:
    YamlReader(std::string file, std::string_view text, Diagnostics& diag);

    SourceLoc loc(const YAML::Mark& mark) const;
    Diagnostics& diag() { return diag_; }

    // The first `key` of `map` (duplicates are check_keys' business). Absent: !present().
    Field field(const YAML::Node& map, const std::string& key, const std::string& item) const;

    // Reports every key of `map` not in `allowed` (with a suggestion) and every duplicate key.
    void check_keys(const YAML::Node& map, const std::vector<std::string>& allowed,
                    const std::string& item);

    // The keys of `map` in file order, with their locations (duplicates included).
    struct Entry {
        std::string key;
        SourceLoc loc;
        YAML::Node value;
    };
    std::vector<Entry> entries(const YAML::Node& map) const;

    bool expect_map(const Field& f);       // reports "must be a mapping" otherwise
    bool expect_sequence(const Field& f);  // reports "must be a list" otherwise

    // A scalar of any style (numbers are kept as written).
    std::optional<std::string> text(const Field& f);
    // A plain (unquoted) integer in [lo, hi].
    std::optional<int64_t> integer(const Field& f, int64_t lo, int64_t hi);
    // A plain (unquoted) number in [lo, hi].
    std::optional<double> number(const Field& f, double lo, double hi);
    // A list of scalars.
    std::optional<std::vector<std::string>> text_list(const Field& f);
    // A scalar parsed as a prompt template; trailing whitespace is dropped (so `|` blocks do not
    // end in a newline) and each reference records where it was written.
    std::optional<PromptTemplate> prompt(const Field& f);

  private:
    SourceLoc locate_in_scalar(const YAML::Node& node, const std::string& value,
                               size_t offset) const;
    void report(const Field& f, const std::string& message);

    std::string file_;
    std::string_view text_;
    std::vector<size_t> line_starts_;  // byte offset of each line of text_
    Diagnostics& diag_;
};

// A short description of a node for messages: "a list", "a mapping", "nothing", "\"abc\"".
std::string describe(const YAML::Node& node);

}  // namespace troupe::workflow
