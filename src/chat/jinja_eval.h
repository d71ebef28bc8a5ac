// Evaluator: renders a parsed template (internal to the Jinja interpreter; the public entry
// point is jinja::Template in jinja_template.h).
//
// Scoping follows Jinja2: the render globals are the outermost scope, the template's own
// `set`s go to the template scope above them; `if` opens no scope; each for-loop iteration,
// macro call, block set and filter block runs in a fresh child scope whose assignments do not
// leak out (that is why templates use namespace()). Macros see the scope they were defined in
// as it is when they are called.
//
// Macros hold the scope they were defined in, and that scope holds the macro; namespaces can hold
// themselves. The evaluator breaks these reference cycles when it is destroyed (the end of the
// render), so nothing leaks.
//
// Limits keep a hostile template from exhausting the machine: macro recursion depth, output
// size and loop length are bounded; exceeding them is a troupe::Error.
//
// One Evaluator renders one template once; it is not thread-safe (create one per render).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace troupe::jinja {

struct Scope {
    std::shared_ptr<Scope> parent;
    ValueDict vars;

    const Value* find(std::string_view name) const;
};

class Evaluator {
  public:
    static constexpr int kMaxCallDepth = 100;
    static constexpr size_t kMaxOutputBytes = size_t{64} << 20;
    static constexpr size_t kMaxLoopItems = size_t{1} << 20;

    explicit Evaluator(std::string_view template_name) : name_(template_name) {}
    ~Evaluator();
    Evaluator(const Evaluator&) = delete;
    Evaluator& operator=(const Evaluator&) = delete;

    // Renders `body` with `globals` as the outermost variables. Throws troupe::Error.
    std::string render(const StmtList& body, ValueDict globals);

    // Calls a macro defined in `closure` (used by macro values). A `{% call %}` block passes
    // its body as the keyword argument `caller`.
    Value call_macro(const MacroDef& def, const std::shared_ptr<Scope>& closure, CallArgs args);

    std::string_view template_name() const { return name_; }

    // namespace(dict..., key=value...): a new namespace object, released with the evaluator.
    Value make_namespace(CallArgs args);

  private:
    enum class Flow { kNormal, kBreak, kContinue };

    Flow exec_list(const StmtList& body, std::string& out);
    Flow exec(const Stmt& s, std::string& out);
    Flow exec_node(const TextStmt& n, const Stmt& s, std::string& out);
    Flow exec_node(const OutputStmt& n, const Stmt& s, std::string& out);
    Flow exec_node(const IfStmt& n, const Stmt& s, std::string& out);
    Flow exec_node(const ForStmt& n, const Stmt& s, std::string& out);
    Flow exec_node(const SetStmt& n, const Stmt& s, std::string& out);
    Flow exec_node(const MacroStmt& n, const Stmt& s, std::string& out);
    Flow exec_node(const CallBlockStmt& n, const Stmt& s, std::string& out);
    Flow exec_node(const FilterBlockStmt& n, const Stmt& s, std::string& out);
    Flow exec_node(const BreakStmt& n, const Stmt& s, std::string& out);
    Flow exec_node(const ContinueStmt& n, const Stmt& s, std::string& out);

    Value eval(const Expr& e);
    Value eval_node(const LiteralExpr& n, const Expr& e);
    Value eval_node(const NameExpr& n, const Expr& e);
    Value eval_node(const ListExpr& n, const Expr& e);
    Value eval_node(const DictExpr& n, const Expr& e);
    Value eval_node(const GetAttrExpr& n, const Expr& e);
    Value eval_node(const GetItemExpr& n, const Expr& e);
    Value eval_node(const SliceExpr& n, const Expr& e);
    Value eval_node(const CallExpr& n, const Expr& e);
    Value eval_node(const FilterExpr& n, const Expr& e);
    Value eval_node(const TestExpr& n, const Expr& e);
    Value eval_node(const UnaryExpr& n, const Expr& e);
    Value eval_node(const BinaryExpr& n, const Expr& e);
    Value eval_node(const CompareExpr& n, const Expr& e);
    Value eval_node(const CondExpr& n, const Expr& e);

    CallArgs eval_args(const std::vector<Arg>& args);
    Value call(const CallExpr& n, CallArgs args);
    Value apply_filters(const std::vector<ExprPtr>& filters, Value v);  // block filters
    Value lookup(std::string_view name) const;
    void assign(const std::vector<std::string>& targets, const Value& v, SourcePos pos);
    // Renders `body` in a child scope of the current one.
    std::string render_child(const StmtList& body, Flow* flow);
    void append(std::string& out, std::string_view text, SourcePos pos) const;

    [[noreturn]] void fail(SourcePos pos, std::string_view message) const;

    std::string_view name_;
    std::shared_ptr<Scope> scope_;
    int call_depth_ = 0;
    std::vector<std::shared_ptr<Scope>> macro_scopes_;  // scopes that define macros (cycles)
    std::vector<std::weak_ptr<Namespace>> namespaces_;
};

}  // namespace troupe::jinja
