// `--input NAME=VALUE` flags of the workflow commands; `NAME=@FILE` reads the value from a
// file (one trailing newline dropped).
#pragma once

#include <string>
#include <vector>

#include "workflow/prompt_layout.h"

namespace troupe::cli {

// Throws troupe::Error for a flag without '=' or an unreadable file.
workflow::InputValues parse_input_flags(const std::vector<std::string>& flags);

}  // namespace troupe::cli
