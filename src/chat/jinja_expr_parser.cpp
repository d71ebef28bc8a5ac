#include "chat/jinja_expr_parser.h"

#include <charconv>
#include <cmath>

namespace troupe::jinja {

// Comma-separated expressions: one expression, or a tuple if there is a comma.
ExprPtr ExprParser::parse_tuple(bool with_condexpr) {
    const SourcePos pos = cur().pos;
    ExprPtr first = parse_expression(with_condexpr);
    if (!at_op(",")) return first;
    ListExpr tuple;
    tuple.items.push_back(std::move(first));
    while (skip_op(",")) {
        if (cur().kind == TokenKind::kBlockEnd || cur().kind == TokenKind::kVarEnd || at_op(")"))
            break;
        tuple.items.push_back(parse_expression(with_condexpr));
    }
    return make_expr(pos, std::move(tuple));
}

ExprPtr ExprParser::parse_expression(bool with_condexpr) {
    TokenCursor::Nest nest(c_, cur().pos);
    return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr ExprParser::parse_condexpr() {
    const SourcePos pos = cur().pos;
    ExprPtr expr = parse_or();
    TokenCursor::Chain chain(c_);
    while (at_name("if")) {
        chain.link(advance().pos);
        CondExpr c;
        c.then = std::move(expr);
        c.cond = parse_or();
        if (skip_name("else")) c.otherwise = parse_condexpr();
        expr = make_expr(pos, std::move(c));
    }
    return expr;
}

ExprPtr ExprParser::parse_or() {
    ExprPtr left = parse_and();
    TokenCursor::Chain chain(c_);
    while (at_name("or")) {
        const SourcePos pos = advance().pos;
        chain.link(pos);
        left = make_expr(pos, BinaryExpr{BinaryOp::kOr, std::move(left), parse_and()});
    }
    return left;
}

ExprPtr ExprParser::parse_and() {
    ExprPtr left = parse_not();
    TokenCursor::Chain chain(c_);
    while (at_name("and")) {
        const SourcePos pos = advance().pos;
        chain.link(pos);
        left = make_expr(pos, BinaryExpr{BinaryOp::kAnd, std::move(left), parse_not()});
    }
    return left;
}

ExprPtr ExprParser::parse_not() {
    if (at_name("not")) {
        TokenCursor::Nest nest(c_, cur().pos);
        const SourcePos pos = advance().pos;
        return make_expr(pos, UnaryExpr{UnaryOp::kNot, parse_not()});
    }
    return parse_compare();
}

ExprPtr ExprParser::parse_compare() {
    const SourcePos pos = cur().pos;
    ExprPtr first = parse_math1();
    CompareExpr cmp;
    for (;;) {
        static const std::pair<const char*, CompareOp> kOps[] = {
            {"==", CompareOp::kEq}, {"!=", CompareOp::kNe}, {"<", CompareOp::kLt},
            {"<=", CompareOp::kLe}, {">", CompareOp::kGt},  {">=", CompareOp::kGe}};
        bool matched = false;
        for (const auto& [text, op] : kOps) {
            if (at_op(text)) {
                advance();
                cmp.rest.emplace_back(op, parse_math1());
                matched = true;
                break;
            }
        }
        if (matched) continue;
        if (skip_name("in")) {
            cmp.rest.emplace_back(CompareOp::kIn, parse_math1());
        } else if (at_name("not") && peek(1).kind == TokenKind::kName && peek(1).text == "in") {
            advance();
            advance();
            cmp.rest.emplace_back(CompareOp::kNotIn, parse_math1());
        } else {
            break;
        }
    }
    if (cmp.rest.empty()) return first;
    cmp.first = std::move(first);
    return make_expr(pos, std::move(cmp));
}

template <typename Next>
ExprPtr ExprParser::parse_binary(std::initializer_list<std::pair<const char*, BinaryOp>> ops,
                                 Next next) {
    ExprPtr left = (this->*next)();
    TokenCursor::Chain chain(c_);
    for (;;) {
        bool matched = false;
        for (const auto& [text, op] : ops) {
            if (at_op(text)) {
                const SourcePos pos = advance().pos;
                chain.link(pos);
                left = make_expr(pos, BinaryExpr{op, std::move(left), (this->*next)()});
                matched = true;
                break;
            }
        }
        if (!matched) return left;
    }
}

ExprPtr ExprParser::parse_math1() {
    return parse_binary({{"+", BinaryOp::kAdd}, {"-", BinaryOp::kSub}}, &ExprParser::parse_concat);
}
ExprPtr ExprParser::parse_concat() {
    return parse_binary({{"~", BinaryOp::kConcat}}, &ExprParser::parse_math2);
}
ExprPtr ExprParser::parse_math2() {
    return parse_binary({{"*", BinaryOp::kMul},
                         {"/", BinaryOp::kDiv},
                         {"//", BinaryOp::kFloorDiv},
                         {"%", BinaryOp::kMod}},
                        &ExprParser::parse_pow);
}
ExprPtr ExprParser::parse_pow() {
    return parse_binary({{"**", BinaryOp::kPow}}, &ExprParser::parse_unary_filtered);
}
ExprPtr ExprParser::parse_unary_filtered() {
    return parse_unary(true);
}

ExprPtr ExprParser::parse_unary(bool with_filter) {
    TokenCursor::Nest nest(c_, cur().pos);
    const SourcePos pos = cur().pos;
    ExprPtr node;
    if (skip_op("-")) {
        node = make_expr(pos, UnaryExpr{UnaryOp::kNeg, parse_unary(false)});
    } else if (skip_op("+")) {
        node = make_expr(pos, UnaryExpr{UnaryOp::kPos, parse_unary(false)});
    } else {
        node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
}

ExprPtr ExprParser::parse_primary() {
    const Token& t = cur();
    const SourcePos pos = t.pos;
    switch (t.kind) {
        case TokenKind::kName: {
            const std::string name = advance().text;
            if (name == "true" || name == "True") return make_expr(pos, LiteralExpr{Value(true)});
            if (name == "false" || name == "False")
                return make_expr(pos, LiteralExpr{Value(false)});
            if (name == "none" || name == "None") return make_expr(pos, LiteralExpr{Value::none()});
            note_name_use(name);
            return make_expr(pos, NameExpr{name});
        }
        case TokenKind::kString: {
            std::string s;
            while (cur().kind == TokenKind::kString) s += advance().text;  // 'a' 'b' == 'ab'
            return make_expr(pos, LiteralExpr{Value(std::move(s))});
        }
        case TokenKind::kInt: {
            int64_t v = 0;
            auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
            if (ec != std::errc()) fail(pos, "integer literal out of range: " + t.text);
            advance();
            return make_expr(pos, LiteralExpr{Value(v)});
        }
        case TokenKind::kFloat: {
            double v = 0;
            const auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
            if (ec == std::errc::result_out_of_range) v = HUGE_VAL;  // Python: 1e999 is inf
            advance();
            return make_expr(pos, LiteralExpr{Value(v)});
        }
        case TokenKind::kOp:
            if (skip_op("(")) {
                if (skip_op(")")) return make_expr(pos, ListExpr{});  // empty tuple
                ExprPtr e = parse_tuple();
                expect_op(")");
                return e;
            }
            if (skip_op("[")) return parse_list(pos);
            if (skip_op("{")) return parse_dict(pos);
            break;
        default:
            break;
    }
    fail_here("an expression");
}

ExprPtr ExprParser::parse_list(SourcePos pos) {
    ListExpr list;
    while (!at_op("]")) {
        if (!list.items.empty()) expect_op(",");
        if (at_op("]")) break;
        list.items.push_back(parse_expression(true));
    }
    expect_op("]");
    return make_expr(pos, std::move(list));
}

ExprPtr ExprParser::parse_dict(SourcePos pos) {
    DictExpr dict;
    while (!at_op("}")) {
        if (!dict.items.empty()) expect_op(",");
        if (at_op("}")) break;
        ExprPtr key = parse_expression(true);
        expect_op(":");
        dict.items.emplace_back(std::move(key), parse_expression(true));
    }
    expect_op("}");
    return make_expr(pos, std::move(dict));
}

ExprPtr ExprParser::parse_postfix(ExprPtr node) {
    TokenCursor::Chain chain(c_);
    for (;;) {
        const SourcePos pos = cur().pos;
        chain.link(pos);
        if (skip_op(".")) {
            if (cur().kind == TokenKind::kInt) {
                ExprPtr index = parse_primary();
                node = make_expr(pos, GetItemExpr{std::move(node), std::move(index)});
            } else {
                node = make_expr(pos, GetAttrExpr{std::move(node), expect_name()});
            }
        } else if (skip_op("[")) {
            node = parse_subscript(std::move(node), pos);
        } else if (at_op("(")) {
            node = parse_call(std::move(node));
        } else {
            return node;
        }
    }
}

ExprPtr ExprParser::parse_subscript(ExprPtr object, SourcePos pos) {
    ExprPtr parts[3];
    int n_colons = 0;
    for (;;) {
        if (at_op(":")) {
            if (++n_colons > 2) fail_here("']'");
            advance();
            continue;
        }
        if (at_op("]")) break;
        if (parts[n_colons]) fail_here("':' or ']'");
        parts[n_colons] = parse_expression(true);
    }
    expect_op("]");
    if (n_colons == 0) {
        if (!parts[0]) fail(pos, "empty subscript");
        return make_expr(pos, GetItemExpr{std::move(object), std::move(parts[0])});
    }
    return make_expr(pos, SliceExpr{std::move(object), std::move(parts[0]), std::move(parts[1]),
                                    std::move(parts[2])});
}

std::vector<Arg> ExprParser::parse_call_args() {
    std::vector<Arg> args;
    expect_op("(");
    while (!at_op(")")) {
        if (!args.empty()) expect_op(",");
        if (at_op(")")) break;
        if (at_op("*") || at_op("**")) fail(cur().pos, "unsupported: *args / **kwargs in calls");
        Arg arg;
        if (cur().kind == TokenKind::kName && peek(1).kind == TokenKind::kOp &&
            peek(1).text == "=") {
            arg.keyword = advance().text;
            advance();
        } else if (!args.empty() && !args.back().keyword.empty()) {
            fail(cur().pos, "positional argument follows keyword argument");
        }
        arg.value = parse_expression(true);
        args.push_back(std::move(arg));
    }
    expect_op(")");
    return args;
}

ExprPtr ExprParser::parse_call(ExprPtr callee) {
    const SourcePos pos = cur().pos;
    return make_expr(pos, CallExpr{std::move(callee), parse_call_args()});
}

ExprPtr ExprParser::parse_filter_expr(ExprPtr node) {
    TokenCursor::Chain chain(c_);
    for (;;) {
        chain.link(cur().pos);
        if (at_op("|")) {
            advance();
            node = parse_filter(std::move(node));
        } else if (at_name("is")) {
            node = parse_test(std::move(node));
        } else if (at_op("(")) {
            node = parse_call(std::move(node));
        } else {
            return node;
        }
    }
}

// `name(args)` after a `|`; `operand` is null in filter blocks and block sets.
ExprPtr ExprParser::parse_filter(ExprPtr operand) {
    const SourcePos pos = cur().pos;
    FilterExpr f;
    f.operand = std::move(operand);
    f.name = expect_name();
    while (skip_op(".")) f.name.append(".").append(expect_name());
    if (at_op("(")) f.args = parse_call_args();
    return make_expr(pos, std::move(f));
}

ExprPtr ExprParser::parse_test(ExprPtr operand) {
    const SourcePos pos = advance().pos;  // 'is'
    TestExpr t;
    t.operand = std::move(operand);
    t.negated = skip_name("not");
    t.name = expect_name();
    while (skip_op(".")) t.name.append(".").append(expect_name());
    const Token& c = cur();
    const bool starts_arg = c.kind == TokenKind::kName || c.kind == TokenKind::kString ||
                            c.kind == TokenKind::kInt || c.kind == TokenKind::kFloat ||
                            (c.kind == TokenKind::kOp && (c.text == "[" || c.text == "{"));
    if (at_op("(")) {
        t.args = parse_call_args();
    } else if (starts_arg && !at_name("else") && !at_name("or") && !at_name("and")) {
        if (at_name("is")) fail(c.pos, "cannot chain tests with 'is'");
        Arg arg;
        arg.value = parse_postfix(parse_primary());
        t.args.push_back(std::move(arg));
    }
    return make_expr(pos, std::move(t));
}

void ExprParser::note_name_use(const std::string& name) {
    if (macros_.empty()) return;
    if (name == "varargs") macros_.back()->uses_varargs = true;
    if (name == "kwargs") macros_.back()->uses_kwargs = true;
    if (name == "caller") macros_.back()->uses_caller = true;
}

}  // namespace troupe::jinja
