// A compiled Jinja template: the subset of Jinja2 that chat templates use, rendered the way
// Hugging Face transformers renders them (trim_blocks, lstrip_blocks, no autoescape, the
// loopcontrols extension, Python value semantics). See jinja_parser.h for the grammar and
// jinja_builtins.h for the filters and tests.
//
// Usage:
//   auto t = jinja::Template::parse(source, "zephyr");   // troupe::Error on syntax errors
//   jinja::ValueDict vars;
//   vars.set("messages", ...);
//   std::string text = t.render(vars);                  // troupe::Error on runtime errors
//
// Render globals always include range(), dict() and namespace(); callers add their own
// functions with make_function (chat templates add raise_exception and strftime_now).
//
// Thread-safety: a Template is immutable after parse; render() may run concurrently.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace troupe::jinja {

class Template {
  public:
    // Lexes and parses `source`; `name` identifies the template in error messages.
    static Template parse(std::string_view source, std::string name);

    std::string render(const ValueDict& globals) const;
    const std::string& name() const { return name_; }

  private:
    Template(std::string name, std::shared_ptr<const StmtList> body)
        : name_(std::move(name)), body_(std::move(body)) {}

    std::string name_;
    std::shared_ptr<const StmtList> body_;
};

// A global function for templates. `fn` may throw ValueError (reported with the call's
// position) or any troupe::Error (passed through unchanged).
Value make_function(std::string name, std::function<Value(CallArgs&)> fn);

}  // namespace troupe::jinja
