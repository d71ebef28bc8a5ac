// Errors of the Jinja interpreter.
//
// Every error a template can cause is a troupe::Error whose message names the template, the
// line and column, and the construct: "chat template 'custom', line 3, column 12: unknown
// filter 'from_json'". `raise_exception(msg)` called by a template is a TemplateRaised, a
// troupe::Error whose message() is exactly the template's text.
#pragma once

#include <string>
#include <string_view>

#include "util/error.h"

namespace troupe::jinja {

struct SourcePos {
    int line = 1;  // 1-based
    int col = 1;   // 1-based, in bytes
};

// "chat template 'NAME', line L, column C: MESSAGE"
std::string format_template_error(std::string_view template_name, SourcePos pos,
                                  std::string_view message);

[[noreturn]] void throw_template_error(std::string_view template_name, SourcePos pos,
                                       std::string_view message);

// The template called raise_exception(message).
class TemplateRaised : public Error {
  public:
    TemplateRaised(std::string template_name, std::string message)
        : Error("chat template '" + template_name + "' raised an exception: " + message),
          message_(std::move(message)) {}
    const std::string& message() const { return message_; }

  private:
    std::string message_;
};

}  // namespace troupe::jinja
