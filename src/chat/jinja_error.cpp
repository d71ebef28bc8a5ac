#include "chat/jinja_error.h"

namespace troupe::jinja {

std::string format_template_error(std::string_view template_name, SourcePos pos,
                                  std::string_view message) {
    std::string out = "chat template '";
    out.append(template_name);
    out.append("', line ").append(std::to_string(pos.line));
    out.append(", column ").append(std::to_string(pos.col));
    out.append(": ").append(message);
    return out;
}

void throw_template_error(std::string_view template_name, SourcePos pos, std::string_view message) {
    throw Error(format_template_error(template_name, pos, message));
}

}  // namespace troupe::jinja
