#include "chat/jinja_template.h"

#include "chat/jinja_eval.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_ops.h"
#include "chat/jinja_parser.h"

namespace troupe::jinja {
namespace {

struct Function : Callable {
    Function(std::string name, std::function<Value(CallArgs&)> fn)
        : name_(std::move(name)), fn_(std::move(fn)) {}
    std::string name() const override { return name_; }
    Value call(Evaluator&, CallArgs args) const override { return fn_(args); }
    std::string name_;
    std::function<Value(CallArgs&)> fn_;
};

// range(stop) / range(start, stop[, step]) as a list.
Value builtin_range(CallArgs& args) {
    if (!args.keyword.empty()) throw ValueError("range() takes no keyword arguments");
    const auto& p = args.positional;
    if (p.empty() || p.size() > 3) throw ValueError("range() expects 1 to 3 arguments");
    const int64_t start = p.size() == 1 ? 0 : int_arg("range", p[0], 0);
    const int64_t stop = int_arg("range", p.size() == 1 ? p[0] : p[1], 0);
    const int64_t step = p.size() == 3 ? int_arg("range", p[2], 1) : 1;
    if (step == 0) throw ValueError("range() arg 3 must not be zero");
    ValueList out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (out.size() >= Evaluator::kMaxLoopItems) throw ValueError("range() too large");
        out.emplace_back(i);
    }
    return Value(std::move(out));
}

// dict(key=value, ...)
Value builtin_dict(CallArgs& args) {
    if (!args.positional.empty()) throw ValueError("dict() supports keyword arguments only");
    ValueDict d;
    for (auto& [k, v] : args.keyword) d.set(k, std::move(v));
    return Value(std::move(d));
}

// namespace(key=value, ...): the mutable object `{% set ns.key = ... %}` assigns into. The
// evaluator makes it, to release it at the end of the render.
struct NamespaceFunction : Callable {
    std::string name() const override { return "namespace"; }
    Value call(Evaluator& ev, CallArgs args) const override {
        return ev.make_namespace(std::move(args));
    }
};

}  // namespace

Value make_function(std::string name, std::function<Value(CallArgs&)> fn) {
    return Value(std::make_shared<const Function>(std::move(name), std::move(fn)));
}

Template Template::parse(std::string_view source, std::string name) {
    auto body = std::make_shared<const StmtList>(jinja::parse(tokenize(source, name), name));
    return Template(std::move(name), std::move(body));
}

std::string Template::render(const ValueDict& globals) const {
    ValueDict vars;
    vars.set("range", make_function("range", builtin_range));
    vars.set("dict", make_function("dict", builtin_dict));
    vars.set("namespace", Value(std::make_shared<const NamespaceFunction>()));
    for (const auto& [k, v] : globals.items()) vars.set(k, v);
    Evaluator ev(name_);
    return ev.render(*body_, std::move(vars));
}

}  // namespace troupe::jinja
