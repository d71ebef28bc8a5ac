// Reading workflow files (YAML or JSON; yaml-cpp reads both, with positions).
//
// Both functions return a validated Workflow (workflow_validate.h) or throw troupe::Error
// listing every problem found, one per line, as "FILE:LINE:COLUMN: ITEM: MESSAGE".
#pragma once

#include <string>
#include <string_view>

#include "workflow/workflow.h"

namespace troupe::workflow {

// Reads and validates the file at `path`.
Workflow load_workflow(const std::string& path);

// Parses and validates `text`; `file_name` is used in messages and for the default name.
Workflow parse_workflow(std::string_view text, const std::string& file_name);

}  // namespace troupe::workflow
