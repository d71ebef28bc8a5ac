#include "chat/jinja_eval.h"

#include <algorithm>

#include "chat/jinja_builtins.h"
#include "chat/jinja_ops.h"

namespace troupe::jinja {
namespace {

// A macro (or the body of a `{% call %}` block) bound to the scope it was defined in.
struct MacroValue : Callable {
    MacroValue(const MacroDef* def, std::shared_ptr<Scope> closure)
        : def(def), closure(std::move(closure)) {}
    std::string name() const override { return def->name; }
    Value call(Evaluator& ev, CallArgs args) const override {
        return ev.call_macro(*def, closure, std::move(args));
    }
    const MacroDef* def;
    std::shared_ptr<Scope> closure;
};

// `loop.cycle(a, b, ...)`: the argument at loop.index0 modulo their count.
struct LoopCycle : Callable {
    explicit LoopCycle(int64_t index0) : index0(index0) {}
    std::string name() const override { return "loop.cycle"; }
    Value call(Evaluator&, CallArgs args) const override {
        if (args.positional.empty()) throw ValueError("loop.cycle(): no items to cycle");
        return args.positional[static_cast<size_t>(index0) % args.positional.size()];
    }
    int64_t index0;
};

Value make_loop(const ValueList& items, size_t i) {
    const auto n = static_cast<int64_t>(items.size());
    const auto idx = static_cast<int64_t>(i);
    ValueDict loop;
    loop.set("index0", Value(idx));
    loop.set("index", Value(idx + 1));
    loop.set("revindex0", Value(n - idx - 1));
    loop.set("revindex", Value(n - idx));
    loop.set("first", Value(i == 0));
    loop.set("last", Value(i + 1 == items.size()));
    loop.set("length", Value(n));
    loop.set("depth", Value(1));
    loop.set("depth0", Value(0));
    if (i > 0) loop.set("previtem", items[i - 1]);
    if (i + 1 < items.size()) loop.set("nextitem", items[i + 1]);
    loop.set("cycle", Value(std::make_shared<const LoopCycle>(idx)));
    return Value(std::move(loop));
}

// Restores the evaluator's current scope when a child scope ends (also on errors).
class ScopeGuard {
  public:
    ScopeGuard(std::shared_ptr<Scope>& current, std::shared_ptr<Scope> next)
        : current_(current), saved_(std::exchange(current, std::move(next))) {}
    ~ScopeGuard() { current_ = std::move(saved_); }

  private:
    std::shared_ptr<Scope>& current_;
    std::shared_ptr<Scope> saved_;
};

}  // namespace

const Value* Scope::find(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
        if (const Value* v = s->vars.find(name)) return v;
    }
    return nullptr;
}

Evaluator::~Evaluator() {
    for (const auto& scope : macro_scopes_) scope->vars = ValueDict();
    for (const auto& weak : namespaces_) {
        if (auto ns = weak.lock()) ns->attrs = ValueDict();
    }
}

Value Evaluator::make_namespace(CallArgs args) {
    auto ns = std::make_shared<Namespace>();
    for (const Value& init : args.positional) {  // namespace(dict) copies the dict's items
        if (!init.is_dict()) throw ValueError("namespace() positional arguments must be dicts");
        for (const auto& [k, v] : init.as_dict().items()) ns->attrs.set(k, v);
    }
    for (auto& [k, v] : args.keyword) ns->attrs.set(Value(k), std::move(v));
    namespaces_.push_back(ns);
    return Value(std::move(ns));
}

void Evaluator::fail(SourcePos pos, std::string_view message) const {
    throw_template_error(name_, pos, message);
}

std::string Evaluator::render(const StmtList& body, ValueDict globals) {
    auto root = std::make_shared<Scope>(Scope{nullptr, std::move(globals)});
    ScopeGuard guard(scope_, std::make_shared<Scope>(Scope{root, {}}));
    std::string out;
    exec_list(body, out);
    return out;
}

namespace {

// Binds a macro call's arguments into the macro's scope the way Jinja2 does: positional then
// keyword parameters, extra ones into varargs/kwargs when the body uses them, `caller` for
// call blocks. Parameters left unset get their defaults later, in the macro's scope.
void bind_macro_args(const MacroDef& def, CallArgs& args, Scope& scope) {
    const size_t n_params = def.params.size();
    ValueList varargs;
    for (size_t i = 0; i < args.positional.size(); ++i) {
        if (i < n_params) {
            scope.vars.set(def.params[i].name, std::move(args.positional[i]));
        } else if (def.uses_varargs) {
            varargs.push_back(std::move(args.positional[i]));
        } else {
            throw ValueError("macro '" + def.name + "' takes not more than " +
                             std::to_string(n_params) + " argument(s)");
        }
    }
    ValueDict kwargs;
    for (auto& [key, value] : args.keyword) {
        const bool is_param = std::any_of(def.params.begin(), def.params.end(),
                                          [&](const MacroParam& p) { return p.name == key; });
        if (is_param && scope.vars.find(key)) {
            throw ValueError("macro '" + def.name + "' got multiple values for argument '" + key +
                             "'");
        }
        if (is_param || (key == "caller" && def.uses_caller)) {
            scope.vars.set(key, std::move(value));
        } else if (def.uses_kwargs) {
            kwargs.set(key, std::move(value));
        } else {
            throw ValueError("macro '" + def.name + "' takes no keyword argument '" + key + "'");
        }
    }
    if (def.uses_varargs) scope.vars.set("varargs", Value(std::move(varargs)));
    if (def.uses_kwargs) scope.vars.set("kwargs", Value(std::move(kwargs)));
}

}  // namespace

Value Evaluator::call_macro(const MacroDef& def, const std::shared_ptr<Scope>& closure,
                            CallArgs args) {
    if (call_depth_ >= kMaxCallDepth) {
        throw ValueError("macro '" + def.name + "': maximum call depth (" +
                         std::to_string(kMaxCallDepth) + ") exceeded");
    }
    auto scope = std::make_shared<Scope>(Scope{closure, {}});
    bind_macro_args(def, args, *scope);
    ++call_depth_;
    struct DepthRestore {
        int& depth;
        ~DepthRestore() { --depth; }
    } restore{call_depth_};
    ScopeGuard guard(scope_, scope);
    for (const MacroParam& p : def.params) {  // defaults may use earlier parameters
        if (scope->vars.find(p.name)) continue;
        scope->vars.set(p.name, p.default_value ? eval(*p.default_value)
                                                : Value::undefined("parameter '" + p.name +
                                                                   "' was not provided"));
    }
    std::string out;
    exec_list(def.body, out);
    return Value(std::move(out));
}

void Evaluator::append(std::string& out, std::string_view text, SourcePos pos) const {
    if (out.size() + text.size() > kMaxOutputBytes) {
        fail(pos, "output exceeds " + std::to_string(kMaxOutputBytes >> 20) + " MiB");
    }
    out.append(text);
}

Value Evaluator::lookup(std::string_view name) const {
    if (const Value* v = scope_->find(name)) return *v;
    std::string reason = "'";
    reason.append(name).append("' is undefined");
    return Value::undefined(std::move(reason));
}

void Evaluator::assign(const std::vector<std::string>& targets, const Value& v, SourcePos pos) {
    if (targets.size() == 1) {
        scope_->vars.set(targets[0], v);
        return;
    }
    ValueList items;
    try {
        items = iterate(v);
    } catch (const ValueError& e) {
        fail(pos, std::string("cannot unpack: ") + e.what());
    }
    if (items.size() > targets.size()) {
        fail(pos, "too many values to unpack (expected " + std::to_string(targets.size()) + ")");
    }
    if (items.size() < targets.size()) {
        fail(pos, "not enough values to unpack (expected " + std::to_string(targets.size()) +
                      ", got " + std::to_string(items.size()) + ")");
    }
    for (size_t i = 0; i < targets.size(); ++i) scope_->vars.set(targets[i], items[i]);
}

std::string Evaluator::render_child(const StmtList& body, Flow* flow) {
    ScopeGuard guard(scope_, std::make_shared<Scope>(Scope{scope_, {}}));
    std::string out;
    const Flow f = exec_list(body, out);
    if (flow) *flow = f;
    return out;
}

// ---- statements ----

Evaluator::Flow Evaluator::exec_list(const StmtList& body, std::string& out) {
    for (const auto& s : body) {
        const Flow f = exec(*s, out);
        if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec(const Stmt& s, std::string& out) {
    return std::visit([&](const auto& n) { return exec_node(n, s, out); }, s.node);
}

Evaluator::Flow Evaluator::exec_node(const TextStmt& n, const Stmt& s, std::string& out) {
    append(out, n.text, s.pos);
    return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_node(const OutputStmt& n, const Stmt& s, std::string& out) {
    append(out, eval(*n.expr).str(), s.pos);
    return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_node(const IfStmt& n, const Stmt&, std::string& out) {
    for (const auto& [cond, body] : n.branches) {
        if (eval(*cond).truthy()) return exec_list(body, out);
    }
    return exec_list(n.otherwise, out);
}

Evaluator::Flow Evaluator::exec_node(const ForStmt& n, const Stmt& s, std::string& out) {
    const Value iterable = eval(*n.iterable);
    ValueList items;
    try {
        items = iterate(iterable);
    } catch (const ValueError& e) {
        fail(n.iterable->pos, e.what());
    }
    if (items.size() > kMaxLoopItems)
        fail(s.pos, "for loop over more than " + std::to_string(kMaxLoopItems) + " items");
    const std::shared_ptr<Scope> outer = scope_;
    if (n.filter) {  // `for x in xs if cond`: loop.* counts only the items kept
        ValueList kept;
        for (const Value& item : items) {
            ScopeGuard guard(scope_, std::make_shared<Scope>(Scope{outer, {}}));
            assign(n.targets, item, s.pos);
            if (eval(*n.filter).truthy()) kept.push_back(item);
        }
        items = std::move(kept);
    }
    if (items.empty()) {
        Flow flow = Flow::kNormal;
        append(out, render_child(n.otherwise, &flow), s.pos);
        return Flow::kNormal;
    }
    for (size_t i = 0; i < items.size(); ++i) {
        ScopeGuard guard(scope_, std::make_shared<Scope>(Scope{outer, {}}));
        scope_->vars.set("loop", make_loop(items, i));
        assign(n.targets, items[i], s.pos);
        if (exec_list(n.body, out) == Flow::kBreak) break;
    }
    return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_node(const SetStmt& n, const Stmt& s, std::string&) {
    Value v;
    if (n.value) {
        v = eval(*n.value);
    } else {
        v = Value(render_child(n.body, nullptr));
        v = apply_filters(n.filters, std::move(v));
    }
    if (n.attr.empty()) {
        assign(n.targets, v, s.pos);
        return Flow::kNormal;
    }
    const Value target = lookup(n.targets[0]);
    if (!target.is_namespace()) {
        fail(s.pos, "cannot assign attribute on non-namespace object ('" + n.targets[0] + "' is " +
                        target.type_name() + ", not namespace())");
    }
    target.as_namespace().attrs.set(n.attr, std::move(v));
    return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_node(const MacroStmt& n, const Stmt&, std::string&) {
    scope_->vars.set(n.def->name, Value(std::make_shared<const MacroValue>(n.def.get(), scope_)));
    if (macro_scopes_.empty() || macro_scopes_.back() != scope_) macro_scopes_.push_back(scope_);
    return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_node(const CallBlockStmt& n, const Stmt& s, std::string& out) {
    const auto& call_expr = std::get<CallExpr>(n.call->node);
    CallArgs args;
    try {
        args = eval_args(call_expr.args);
    } catch (const ValueError& e) {
        fail(n.call->pos, e.what());
    }
    args.keyword.emplace_back("caller",
                              Value(std::make_shared<const MacroValue>(n.caller.get(), scope_)));
    Value result;
    try {
        result = call(call_expr, std::move(args));
    } catch (const ValueError& e) {
        fail(n.call->pos, e.what());
    }
    append(out, result.str(), s.pos);
    return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_node(const FilterBlockStmt& n, const Stmt& s, std::string& out) {
    Flow flow = Flow::kNormal;
    Value body(render_child(n.body, &flow));
    append(out, apply_filters(n.filters, std::move(body)).str(), s.pos);
    return flow;
}

Evaluator::Flow Evaluator::exec_node(const BreakStmt&, const Stmt&, std::string&) {
    return Flow::kBreak;
}
Evaluator::Flow Evaluator::exec_node(const ContinueStmt&, const Stmt&, std::string&) {
    return Flow::kContinue;
}

Value Evaluator::apply_filters(const std::vector<ExprPtr>& filters, Value v) {
    for (const ExprPtr& f : filters) {
        const auto& filter = std::get<FilterExpr>(f->node);
        try {
            v = apply_filter(filter.name, v, eval_args(filter.args));
        } catch (const ValueError& e) {
            fail(f->pos, e.what());
        }
    }
    return v;
}

// ---- expressions ----

Value Evaluator::eval(const Expr& e) {
    try {
        return std::visit([&](const auto& n) { return eval_node(n, e); }, e.node);
    } catch (const ValueError& err) {
        fail(e.pos, err.what());
    }
}

CallArgs Evaluator::eval_args(const std::vector<Arg>& args) {
    CallArgs out;
    for (const Arg& a : args) {
        if (a.keyword.empty())
            out.positional.push_back(eval(*a.value));
        else
            out.keyword.emplace_back(a.keyword, eval(*a.value));
    }
    return out;
}

Value Evaluator::call(const CallExpr& n, CallArgs args) {
    const Value callee = eval(*n.callee);
    if (callee.is_callable()) return callee.as_callable().call(*this, std::move(args));
    if (callee.is_undefined()) callee.raise_undefined();
    throw ValueError("'" + callee.type_name() + "' object is not callable");
}

Value Evaluator::eval_node(const LiteralExpr& n, const Expr&) {
    return n.value;
}
Value Evaluator::eval_node(const NameExpr& n, const Expr&) {
    return lookup(n.name);
}

Value Evaluator::eval_node(const ListExpr& n, const Expr&) {
    ValueList items;
    items.reserve(n.items.size());
    for (const auto& item : n.items) items.push_back(eval(*item));
    return Value(std::move(items));
}

Value Evaluator::eval_node(const DictExpr& n, const Expr&) {
    ValueDict dict;
    for (const auto& [k, v] : n.items) {
        Value key = eval(*k);
        if (!key.is_string() && !key.is_number() && !key.is_none()) {
            throw ValueError("unhashable type: '" + key.type_name() + "'");
        }
        dict.set(std::move(key), eval(*v));
    }
    return Value(std::move(dict));
}

Value Evaluator::eval_node(const GetAttrExpr& n, const Expr&) {
    return get_attr(eval(*n.object), n.name);
}
Value Evaluator::eval_node(const GetItemExpr& n, const Expr&) {
    return get_item(eval(*n.object), eval(*n.index));
}

Value Evaluator::eval_node(const SliceExpr& n, const Expr&) {
    const Value obj = eval(*n.object);
    auto bound = [&](const ExprPtr& p) { return p ? eval(*p) : Value(); };
    return get_slice(obj, bound(n.start), bound(n.stop), bound(n.step));
}

Value Evaluator::eval_node(const CallExpr& n, const Expr&) {
    return call(n, eval_args(n.args));
}

Value Evaluator::eval_node(const FilterExpr& n, const Expr&) {
    Value input = eval(*n.operand);
    return apply_filter(n.name, input, eval_args(n.args));
}

Value Evaluator::eval_node(const TestExpr& n, const Expr&) {
    Value input = eval(*n.operand);
    const bool result = apply_test(n.name, input, eval_args(n.args));
    return Value(result != n.negated);
}

Value Evaluator::eval_node(const UnaryExpr& n, const Expr&) {
    const Value v = eval(*n.operand);
    if (n.op == UnaryOp::kNot) return Value(!v.truthy());
    return negate(v, n.op == UnaryOp::kNeg);
}

Value Evaluator::eval_node(const BinaryExpr& n, const Expr&) {
    Value lhs = eval(*n.lhs);
    if (n.op == BinaryOp::kAnd) return lhs.truthy() ? eval(*n.rhs) : lhs;
    if (n.op == BinaryOp::kOr) return lhs.truthy() ? lhs : eval(*n.rhs);
    return binary_op(n.op, lhs, eval(*n.rhs));
}

Value Evaluator::eval_node(const CompareExpr& n, const Expr&) {
    Value lhs = eval(*n.first);
    for (const auto& [op, expr] : n.rest) {
        Value rhs = eval(*expr);
        bool ok = false;
        switch (op) {
            case CompareOp::kEq:
                ok = values_equal(lhs, rhs);
                break;
            case CompareOp::kNe:
                ok = !values_equal(lhs, rhs);
                break;
            case CompareOp::kLt:
                ok = value_less(lhs, rhs);
                break;
            case CompareOp::kLe:
                ok = !value_less(rhs, lhs);
                break;
            case CompareOp::kGt:
                ok = value_less(rhs, lhs);
                break;
            case CompareOp::kGe:
                ok = !value_less(lhs, rhs);
                break;
            case CompareOp::kIn:
                ok = contains(rhs, lhs);
                break;
            case CompareOp::kNotIn:
                ok = !contains(rhs, lhs);
                break;
        }
        if (!ok) return Value(false);
        lhs = std::move(rhs);
    }
    return Value(true);
}

Value Evaluator::eval_node(const CondExpr& n, const Expr& e) {
    if (eval(*n.cond).truthy()) return eval(*n.then);
    if (n.otherwise) return eval(*n.otherwise);
    return Value::undefined("the inline if-expression on line " + std::to_string(e.pos.line) +
                            " evaluated to false and no else section was defined.");
}

}  // namespace troupe::jinja
