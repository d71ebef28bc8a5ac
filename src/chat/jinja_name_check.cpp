#include "chat/jinja_name_check.h"

#include "chat/jinja_builtins.h"

namespace troupe::jinja {
namespace {

// Walks the tree; `soft` is true inside an if or inline if-expression (see the header).
class NameChecker {
  public:
    explicit NameChecker(std::string_view name) : name_(name) {}

    void check(const StmtList& body, bool soft) {
        for (const auto& s : body) check(*s, soft);
    }

  private:
    void check(const Stmt& s, bool soft) {
        std::visit([&](const auto& n) { check_stmt(n, soft); }, s.node);
    }
    void check_stmt(const TextStmt&, bool) {}
    void check_stmt(const BreakStmt&, bool) {}
    void check_stmt(const ContinueStmt&, bool) {}
    void check_stmt(const OutputStmt& n, bool soft) { check(*n.expr, soft); }
    void check_stmt(const IfStmt& n, bool) {
        for (const auto& [cond, body] : n.branches) {
            check(*cond, true);
            check(body, true);
        }
        check(n.otherwise, true);
    }
    void check_stmt(const ForStmt& n, bool soft) {
        check(*n.iterable, soft);
        if (n.filter) check(*n.filter, false);
        check(n.body, false);
        check(n.otherwise, false);
    }
    void check_stmt(const SetStmt& n, bool soft) {
        if (n.value) check(*n.value, soft);
        for (const auto& f : n.filters) check(*f, soft);
        check(n.body, soft);
    }
    void check_stmt(const MacroStmt& n, bool) { check_macro(*n.def); }
    void check_stmt(const CallBlockStmt& n, bool soft) {
        check(*n.call, soft);
        check_macro(*n.caller);
    }
    void check_stmt(const FilterBlockStmt& n, bool soft) {
        for (const auto& f : n.filters) check(*f, soft);
        check(n.body, false);
    }
    void check_macro(const MacroDef& def) {
        for (const auto& p : def.params) {
            if (p.default_value) check(*p.default_value, false);
        }
        check(def.body, false);
    }

    void check(const Expr& e, bool soft) {
        std::visit([&](const auto& n) { check_expr(n, e.pos, soft); }, e.node);
    }
    void check_expr(const LiteralExpr&, SourcePos, bool) {}
    void check_expr(const NameExpr&, SourcePos, bool) {}
    void check_expr(const ListExpr& n, SourcePos, bool soft) {
        for (const auto& i : n.items) check(*i, soft);
    }
    void check_expr(const DictExpr& n, SourcePos, bool soft) {
        for (const auto& [k, v] : n.items) {
            check(*k, soft);
            check(*v, soft);
        }
    }
    void check_expr(const GetAttrExpr& n, SourcePos, bool soft) { check(*n.object, soft); }
    void check_expr(const GetItemExpr& n, SourcePos, bool soft) {
        check(*n.object, soft);
        check(*n.index, soft);
    }
    void check_expr(const SliceExpr& n, SourcePos, bool soft) {
        for (const ExprPtr* p : {&n.object, &n.start, &n.stop, &n.step}) {
            if (*p) check(**p, soft);
        }
    }
    void check_args(const std::vector<Arg>& args, bool soft) {
        for (const auto& a : args) check(*a.value, soft);
    }
    void check_expr(const CallExpr& n, SourcePos, bool soft) {
        check(*n.callee, soft);
        check_args(n.args, soft);
    }
    void check_expr(const FilterExpr& n, SourcePos pos, bool soft) {
        if (!soft && !is_known_filter(n.name))
            throw_template_error(name_, pos, "unknown filter '" + n.name + "'");
        if (n.operand) check(*n.operand, soft);
        check_args(n.args, soft);
    }
    void check_expr(const TestExpr& n, SourcePos pos, bool soft) {
        if (!soft && !is_known_test(n.name))
            throw_template_error(name_, pos, "unknown test '" + n.name + "'");
        check(*n.operand, soft);
        check_args(n.args, soft);
    }
    void check_expr(const UnaryExpr& n, SourcePos, bool soft) { check(*n.operand, soft); }
    void check_expr(const BinaryExpr& n, SourcePos, bool soft) {
        check(*n.lhs, soft);
        check(*n.rhs, soft);
    }
    void check_expr(const CompareExpr& n, SourcePos, bool soft) {
        check(*n.first, soft);
        for (const auto& [op, e] : n.rest) check(*e, soft);
    }
    void check_expr(const CondExpr& n, SourcePos, bool) {
        check(*n.then, true);
        check(*n.cond, true);
        if (n.otherwise) check(*n.otherwise, true);
    }

    std::string_view name_;
};

}  // namespace

void check_filter_and_test_names(const StmtList& body, std::string_view template_name) {
    NameChecker(template_name).check(body, false);
}

}  // namespace troupe::jinja
