// Expression parser (Jinja2's grammar and precedence, lowest first):
//   x if c else y  <  or  <  and  <  not  <  comparisons (chained; in, not in)  <  + -
//   <  ~  <  * / // %  <  **  <  unary - +  <  filters |f(...) and tests `is [not] t(...)`
//   <  postfix .attr [i] [a:b:c] (...)  <  literals, names, (tuples), [lists], {dicts}
// Used by the statement parser (jinja_parser.cpp), which owns the token cursor.
#pragma once

#include <string>
#include <vector>

#include "chat/jinja_token_cursor.h"

namespace troupe::jinja {

class ExprParser {
  public:
    explicit ExprParser(TokenCursor& cursor) : c_(cursor) {}

    // Comma-separated expressions: one expression, or a tuple (ListExpr) if there is a comma.
    ExprPtr parse_tuple(bool with_condexpr = true);
    // One expression; without condexpr, `x if c else y` is not parsed (for `for ... if`).
    ExprPtr parse_expression(bool with_condexpr);
    // `name(args)` after a `|`; `operand` is null in filter blocks and block sets.
    ExprPtr parse_filter(ExprPtr operand);

    // While parsing a macro body: the macro, to note its use of varargs/kwargs/caller.
    void enter_macro(MacroDef* def) { macros_.push_back(def); }
    void leave_macro() { macros_.pop_back(); }

  private:
    const Token& cur() const { return c_.cur(); }
    const Token& peek(size_t k) const { return c_.peek(k); }
    const Token& advance() { return c_.advance(); }
    bool at_op(std::string_view op) const { return c_.at_op(op); }
    bool at_name(std::string_view n) const { return c_.at_name(n); }
    bool skip_op(std::string_view op) { return c_.skip_op(op); }
    bool skip_name(std::string_view n) { return c_.skip_name(n); }
    void expect_op(std::string_view op) { c_.expect_op(op); }
    std::string expect_name() { return c_.expect_name(); }
    [[noreturn]] void fail(SourcePos pos, std::string_view message) const { c_.fail(pos, message); }
    [[noreturn]] void fail_here(std::string_view expected) const { c_.fail_here(expected); }

    ExprPtr parse_condexpr();
    ExprPtr parse_or();
    ExprPtr parse_and();
    ExprPtr parse_not();
    ExprPtr parse_compare();
    template <typename Next>
    ExprPtr parse_binary(std::initializer_list<std::pair<const char*, BinaryOp>> ops, Next next);
    ExprPtr parse_math1();
    ExprPtr parse_concat();
    ExprPtr parse_math2();
    ExprPtr parse_pow();
    ExprPtr parse_unary_filtered();
    ExprPtr parse_unary(bool with_filter);
    ExprPtr parse_primary();
    ExprPtr parse_list(SourcePos pos);
    ExprPtr parse_dict(SourcePos pos);
    ExprPtr parse_postfix(ExprPtr node);
    ExprPtr parse_subscript(ExprPtr object, SourcePos pos);
    std::vector<Arg> parse_call_args();
    ExprPtr parse_call(ExprPtr callee);
    ExprPtr parse_filter_expr(ExprPtr node);
    ExprPtr parse_test(ExprPtr operand);
    void note_name_use(const std::string& name);

    TokenCursor& c_;
    std::vector<MacroDef*> macros_;
};

}  // namespace troupe::jinja
