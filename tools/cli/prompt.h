// Building a prompt from the CLI's --system / --prompt / --chat-template flags.
#pragma once

#include <string>

#include "model/model.h"

namespace troupe::cli {

// The text of a chat with an optional system message and one user message, rendered with the
// model's chat template (or the builtin template_name when not empty), ending with the
// assistant's turn opened.
std::string render_chat_prompt(const Model& model, const std::string& system,
                               const std::string& user, const std::string& template_name);

}  // namespace troupe::cli
