#include "prompt.h"

namespace troupe::cli {

std::string render_chat_prompt(const Model& model, const std::string& system,
                               const std::string& user, const std::string& template_name) {
    std::vector<ChatMessage> messages;
    if (!system.empty()) messages.push_back({"system", system});
    messages.push_back({"user", user});
    return model.apply_chat_template(messages, true, template_name);
}

}  // namespace troupe::cli
