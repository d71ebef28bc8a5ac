// Syntax tree of a parsed Jinja template. Built by the parser, read by the evaluator; every
// node carries the source position used in error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "chat/jinja_error.h"
#include "chat/jinja_value.h"

namespace troupe::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtList = std::vector<std::unique_ptr<Stmt>>;

// ---- expressions ----

struct Arg {
    std::string keyword;  // empty for a positional argument
    ExprPtr value;
};

struct LiteralExpr {
    Value value;
};
struct NameExpr {
    std::string name;
};
struct ListExpr {  // [a, b] and tuples (a, b)
    std::vector<ExprPtr> items;
};
struct DictExpr {
    std::vector<std::pair<ExprPtr, ExprPtr>> items;
};
struct GetAttrExpr {  // object.name
    ExprPtr object;
    std::string name;
};
struct GetItemExpr {  // object[index]
    ExprPtr object;
    ExprPtr index;
};
struct SliceExpr {  // object[start:stop:step], each bound optional
    ExprPtr object, start, stop, step;
};
struct CallExpr {
    ExprPtr callee;
    std::vector<Arg> args;
};
struct FilterExpr {  // operand | name(args); operand is null in `{% filter %}` blocks
    ExprPtr operand;
    std::string name;
    std::vector<Arg> args;
};
struct TestExpr {  // operand is [not] name(args)
    ExprPtr operand;
    std::string name;
    std::vector<Arg> args;
    bool negated = false;
};
enum class UnaryOp { kNot, kNeg, kPos };
struct UnaryExpr {
    UnaryOp op;
    ExprPtr operand;
};
enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat, kAnd, kOr };
struct BinaryExpr {
    BinaryOp op;
    ExprPtr lhs, rhs;
};
enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };
struct CompareExpr {  // a < b <= c: chained like Python
    ExprPtr first;
    std::vector<std::pair<CompareOp, ExprPtr>> rest;
};
struct CondExpr {  // then if cond else otherwise (otherwise may be null: undefined)
    ExprPtr then, cond, otherwise;
};

struct Expr {
    SourcePos pos;
    std::variant<LiteralExpr, NameExpr, ListExpr, DictExpr, GetAttrExpr, GetItemExpr, SliceExpr,
                 CallExpr, FilterExpr, TestExpr, UnaryExpr, BinaryExpr, CompareExpr, CondExpr>
        node;
};

// ---- statements ----

struct MacroParam {
    std::string name;
    ExprPtr default_value;  // null: no default (undefined when not passed)
};

// A macro body; also the body of a `{% call %}` block (the `caller` macro).
struct MacroDef {
    std::string name;
    std::vector<MacroParam> params;
    StmtList body;
    bool uses_varargs = false;  // the body reads `varargs` / `kwargs` / `caller`
    bool uses_kwargs = false;
    bool uses_caller = false;
};

struct TextStmt {
    std::string text;
};
struct OutputStmt {  // {{ expr }}
    ExprPtr expr;
};
struct IfStmt {
    std::vector<std::pair<ExprPtr, StmtList>> branches;  // if, elif...
    StmtList otherwise;
};
struct ForStmt {
    std::vector<std::string> targets;  // one name, or several to unpack
    ExprPtr iterable;
    ExprPtr filter;  // `for x in xs if cond`, may be null
    StmtList body;
    StmtList otherwise;  // {% else %}: runs when nothing was iterated
};
struct SetStmt {
    std::vector<std::string> targets;  // names; or one name with `attr` for ns.attr
    std::string attr;                  // non-empty: {% set ns.attr = ... %}
    ExprPtr value;                     // null for a block set
    StmtList body;                     // {% set x %}...{% endset %}
    std::vector<ExprPtr> filters;      // {% set x | trim %}: FilterExprs with null operand
};
struct MacroStmt {
    std::unique_ptr<MacroDef> def;
};
struct CallBlockStmt {  // {% call(args) macro(...) %}body{% endcall %}
    std::unique_ptr<MacroDef> caller;
    ExprPtr call;
};
struct FilterBlockStmt {  // {% filter f | g %}body{% endfilter %}
    std::vector<ExprPtr> filters;
    StmtList body;
};
struct BreakStmt {};
struct ContinueStmt {};

struct Stmt {
    SourcePos pos;
    std::variant<TextStmt, OutputStmt, IfStmt, ForStmt, SetStmt, MacroStmt, CallBlockStmt,
                 FilterBlockStmt, BreakStmt, ContinueStmt>
        node;
};

}  // namespace troupe::jinja
