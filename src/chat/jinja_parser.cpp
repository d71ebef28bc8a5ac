#include "chat/jinja_parser.h"

#include <algorithm>
#include <charconv>
#include <initializer_list>

#include "chat/jinja_builtins.h"

namespace troupe::jinja {
namespace {

constexpr int kMaxNesting = 256;  // deeper expressions or blocks are rejected, not recursed

template <typename Node>
ExprPtr make_expr(SourcePos pos, Node node) {
    return std::make_unique<Expr>(Expr{pos, std::move(node)});
}

template <typename Node>
std::unique_ptr<Stmt> make_stmt(SourcePos pos, Node node) {
    return std::make_unique<Stmt>(Stmt{pos, std::move(node)});
}

class Parser {
  public:
    Parser(const std::vector<Token>& tokens, std::string_view name) : toks_(tokens), name_(name) {}

    StmtList parse_template() {
        StmtList body = parse_body({}, "", {});
        return body;
    }

  private:
    // ---- token helpers ----
    const Token& cur() const { return toks_[i_]; }
    const Token& peek(size_t k) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
    const Token& advance() { return toks_[i_ < toks_.size() - 1 ? i_++ : i_]; }
    bool at_op(std::string_view op) const {
        return cur().kind == TokenKind::kOp && cur().text == op;
    }
    bool at_name(std::string_view n) const {
        return cur().kind == TokenKind::kName && cur().text == n;
    }
    bool skip_op(std::string_view op) { return at_op(op) ? (advance(), true) : false; }
    bool skip_name(std::string_view n) { return at_name(n) ? (advance(), true) : false; }

    [[noreturn]] void fail(SourcePos pos, std::string_view message) const {
        throw_template_error(name_, pos, message);
    }
    [[noreturn]] void fail_here(std::string_view expected) const {
        fail(cur().pos,
             std::string("expected ") + std::string(expected) + ", found " + describe(cur()));
    }
    static std::string describe(const Token& t) {
        switch (t.kind) {
            case TokenKind::kEnd:
                return "end of template";
            case TokenKind::kBlockEnd:
                return "'%}'";
            case TokenKind::kVarEnd:
                return "'}}'";
            case TokenKind::kString:
                return "a string";
            case TokenKind::kText:
                return "text";
            default:
                return "'" + t.text + "'";
        }
    }
    void expect_op(std::string_view op) {
        if (!skip_op(op)) fail_here("'" + std::string(op) + "'");
    }
    std::string expect_name() {
        if (cur().kind != TokenKind::kName) fail_here("a name");
        return advance().text;
    }
    void expect_block_end() {
        if (cur().kind != TokenKind::kBlockEnd) fail_here("'%}'");
        advance();
    }

    // Each link of an operator chain (a + b + c, x.a.b, x|f|g) nests the tree one level
    // deeper, so it counts toward the nesting limit until the chain is finished.
    struct ChainGuard {
        explicit ChainGuard(Parser& p) : p(p) {}
        void link(SourcePos pos) {
            ++n;
            if (++p.depth_ > kMaxNesting) p.fail(pos, "template nested too deeply");
        }
        ~ChainGuard() { p.depth_ -= n; }
        Parser& p;
        int n = 0;
    };

    struct DepthGuard {
        DepthGuard(Parser& p, SourcePos pos) : p(p) {
            if (++p.depth_ > kMaxNesting) p.fail(pos, "template nested too deeply");
        }
        ~DepthGuard() { --p.depth_; }
        Parser& p;
    };

    // ---- statements ----

    // Parses statements until `{% <one of ends> ...`; leaves the end keyword consumed and sets
    // end_found_. With no ends, parses to the end of the template.
    StmtList parse_body(std::initializer_list<std::string_view> ends, std::string_view opener,
                        SourcePos opener_pos) {
        DepthGuard guard(*this, opener_pos);
        StmtList body;
        for (;;) {
            const Token& t = cur();
            if (t.kind == TokenKind::kEnd) {
                if (ends.size() == 0) return body;
                fail(opener_pos, "unterminated '" + std::string(opener) + "' block: expected '{% " +
                                     std::string(*ends.begin()) +
                                     " %}' before the end of the template");
            }
            if (t.kind == TokenKind::kText) {
                body.push_back(make_stmt(t.pos, TextStmt{t.text}));
                advance();
            } else if (t.kind == TokenKind::kVarBegin) {
                advance();
                ExprPtr e = parse_tuple();
                if (cur().kind != TokenKind::kVarEnd) fail_here("'}}'");
                advance();
                body.push_back(make_stmt(t.pos, OutputStmt{std::move(e)}));
            } else if (t.kind == TokenKind::kBlockBegin) {
                advance();
                if (cur().kind == TokenKind::kName &&
                    std::find(ends.begin(), ends.end(), cur().text) != ends.end()) {
                    end_found_ = advance().text;
                    return body;
                }
                body.push_back(parse_statement(t.pos));
            } else {
                fail_here("text or a tag");
            }
        }
    }

    std::unique_ptr<Stmt> parse_statement(SourcePos pos) {
        if (cur().kind != TokenKind::kName) fail_here("a statement name");
        const std::string kw = advance().text;
        if (kw == "for") return parse_for(pos);
        if (kw == "if") return parse_if(pos);
        if (kw == "set") return parse_set(pos);
        if (kw == "macro") return parse_macro(pos);
        if (kw == "call") return parse_call_block(pos);
        if (kw == "filter") return parse_filter_block(pos);
        if (kw == "generation") {
            expect_block_end();
            FilterBlockStmt block;  // no filters: the body renders unchanged
            block.body = parse_body({"endgeneration"}, "generation", pos);
            expect_block_end();
            return make_stmt(pos, std::move(block));
        }
        if (kw == "break" || kw == "continue") {
            if (loop_depth_ == 0) fail(pos, "'" + kw + "' outside of a for loop");
            expect_block_end();
            if (kw == "break") return make_stmt(pos, BreakStmt{});
            return make_stmt(pos, ContinueStmt{});
        }
        static const char* const kEndTags[] = {"endfor",        "endif",    "elif",    "else",
                                               "endset",        "endmacro", "endcall", "endfilter",
                                               "endgeneration", "endraw"};
        for (const char* end : kEndTags) {
            if (kw == end)
                fail(pos, "unexpected '{% " + kw + " %}' without a matching opening tag");
        }
        static const char* const kUnsupported[] = {"include", "import", "from",       "extends",
                                                   "block",   "with",   "autoescape", "do",
                                                   "trans",   "print"};
        for (const char* unsupported : kUnsupported) {
            if (kw == unsupported) {
                fail(pos, "unsupported statement '" + kw +
                              "' (chat templates support for, if, set, macro, call, filter, break, "
                              "continue, raw, generation)");
            }
        }
        fail(pos, "unknown statement '" + kw + "'");
    }

    std::unique_ptr<Stmt> parse_for(SourcePos pos) {
        ForStmt f;
        const bool paren = skip_op("(");
        do {
            f.targets.push_back(expect_name());
        } while (skip_op(","));
        if (paren) expect_op(")");
        if (!skip_name("in")) fail_here("'in'");
        f.iterable = parse_tuple(/*with_condexpr=*/false);
        if (skip_name("if")) f.filter = parse_expression(true);
        if (at_name("recursive")) fail(cur().pos, "unsupported: recursive for loops");
        expect_block_end();
        ++loop_depth_;
        f.body = parse_body({"endfor", "else"}, "for", pos);
        --loop_depth_;
        if (end_found_ == "else") {
            expect_block_end();
            f.otherwise = parse_body({"endfor"}, "for", pos);
        }
        expect_block_end();
        return make_stmt(pos, std::move(f));
    }

    std::unique_ptr<Stmt> parse_if(SourcePos pos) {
        IfStmt s;
        for (;;) {
            ExprPtr cond = parse_tuple(/*with_condexpr=*/false);
            expect_block_end();
            StmtList body = parse_body({"elif", "else", "endif"}, "if", pos);
            s.branches.emplace_back(std::move(cond), std::move(body));
            if (end_found_ == "elif") continue;
            if (end_found_ == "else") {
                expect_block_end();
                s.otherwise = parse_body({"endif"}, "if", pos);
            }
            expect_block_end();
            return make_stmt(pos, std::move(s));
        }
    }

    std::unique_ptr<Stmt> parse_set(SourcePos pos) {
        SetStmt s;
        s.targets.push_back(expect_name());
        if (skip_op(".")) {
            s.attr = expect_name();
        } else {
            while (skip_op(",")) s.targets.push_back(expect_name());
        }
        if (skip_op("=")) {
            s.value = parse_tuple();
            expect_block_end();
            return make_stmt(pos, std::move(s));
        }
        if (!s.attr.empty() || s.targets.size() != 1) fail_here("'='");
        while (skip_op("|")) s.filters.push_back(parse_filter(nullptr));
        expect_block_end();
        s.body = parse_body({"endset"}, "set", pos);
        expect_block_end();
        return make_stmt(pos, std::move(s));
    }

    // Parameters "(a, b=default, ...)" of a macro or call block.
    void parse_params(MacroDef& def) {
        expect_op("(");
        while (!at_op(")")) {
            if (!def.params.empty()) expect_op(",");
            if (at_op(")")) break;
            MacroParam p;
            p.name = expect_name();
            if (skip_op("=")) p.default_value = parse_expression(true);
            def.params.push_back(std::move(p));
        }
        expect_op(")");
    }

    std::unique_ptr<MacroDef> parse_macro_body(std::unique_ptr<MacroDef> def, std::string_view end,
                                               std::string_view opener, SourcePos pos) {
        const int saved_loop_depth = loop_depth_;
        loop_depth_ = 0;
        macros_.push_back(def.get());
        def->body = parse_body({end}, opener, pos);
        macros_.pop_back();
        loop_depth_ = saved_loop_depth;
        expect_block_end();
        return def;
    }

    std::unique_ptr<Stmt> parse_macro(SourcePos pos) {
        auto def = std::make_unique<MacroDef>();
        def->name = expect_name();
        parse_params(*def);
        expect_block_end();
        return make_stmt(pos,
                         MacroStmt{parse_macro_body(std::move(def), "endmacro", "macro", pos)});
    }

    std::unique_ptr<Stmt> parse_call_block(SourcePos pos) {
        auto def = std::make_unique<MacroDef>();
        def->name = "caller";
        if (at_op("(")) parse_params(*def);
        ExprPtr call = parse_expression(true);
        if (!std::holds_alternative<CallExpr>(call->node))
            fail(call->pos, "expected a macro call after 'call'");
        expect_block_end();
        CallBlockStmt s{parse_macro_body(std::move(def), "endcall", "call", pos), std::move(call)};
        return make_stmt(pos, std::move(s));
    }

    std::unique_ptr<Stmt> parse_filter_block(SourcePos pos) {
        FilterBlockStmt s;
        do {
            s.filters.push_back(parse_filter(nullptr));
        } while (skip_op("|"));
        expect_block_end();
        s.body = parse_body({"endfilter"}, "filter", pos);
        expect_block_end();
        return make_stmt(pos, std::move(s));
    }

    // ---- expressions ----

    // Comma-separated expressions: one expression, or a tuple if there is a comma.
    ExprPtr parse_tuple(bool with_condexpr = true) {
        const SourcePos pos = cur().pos;
        ExprPtr first = parse_expression(with_condexpr);
        if (!at_op(",")) return first;
        ListExpr tuple;
        tuple.items.push_back(std::move(first));
        while (skip_op(",")) {
            if (cur().kind == TokenKind::kBlockEnd || cur().kind == TokenKind::kVarEnd ||
                at_op(")"))
                break;
            tuple.items.push_back(parse_expression(with_condexpr));
        }
        return make_expr(pos, std::move(tuple));
    }

    ExprPtr parse_expression(bool with_condexpr) {
        DepthGuard guard(*this, cur().pos);
        return with_condexpr ? parse_condexpr() : parse_or();
    }

    ExprPtr parse_condexpr() {
        const SourcePos pos = cur().pos;
        ExprPtr expr = parse_or();
        ChainGuard chain(*this);
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

    ExprPtr parse_or() {
        ExprPtr left = parse_and();
        ChainGuard chain(*this);
        while (at_name("or")) {
            const SourcePos pos = advance().pos;
            chain.link(pos);
            left = make_expr(pos, BinaryExpr{BinaryOp::kOr, std::move(left), parse_and()});
        }
        return left;
    }

    ExprPtr parse_and() {
        ExprPtr left = parse_not();
        ChainGuard chain(*this);
        while (at_name("and")) {
            const SourcePos pos = advance().pos;
            chain.link(pos);
            left = make_expr(pos, BinaryExpr{BinaryOp::kAnd, std::move(left), parse_not()});
        }
        return left;
    }

    ExprPtr parse_not() {
        if (at_name("not")) {
            DepthGuard guard(*this, cur().pos);
            const SourcePos pos = advance().pos;
            return make_expr(pos, UnaryExpr{UnaryOp::kNot, parse_not()});
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
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
    ExprPtr parse_binary(std::initializer_list<std::pair<const char*, BinaryOp>> ops, Next next) {
        ExprPtr left = (this->*next)();
        ChainGuard chain(*this);
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

    ExprPtr parse_math1() {
        return parse_binary({{"+", BinaryOp::kAdd}, {"-", BinaryOp::kSub}}, &Parser::parse_concat);
    }
    ExprPtr parse_concat() {
        return parse_binary({{"~", BinaryOp::kConcat}}, &Parser::parse_math2);
    }
    ExprPtr parse_math2() {
        return parse_binary({{"*", BinaryOp::kMul},
                             {"/", BinaryOp::kDiv},
                             {"//", BinaryOp::kFloorDiv},
                             {"%", BinaryOp::kMod}},
                            &Parser::parse_pow);
    }
    ExprPtr parse_pow() {
        return parse_binary({{"**", BinaryOp::kPow}}, &Parser::parse_unary_filtered);
    }
    ExprPtr parse_unary_filtered() { return parse_unary(true); }

    ExprPtr parse_unary(bool with_filter) {
        DepthGuard guard(*this, cur().pos);
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

    ExprPtr parse_primary() {
        const Token& t = cur();
        const SourcePos pos = t.pos;
        switch (t.kind) {
            case TokenKind::kName: {
                const std::string name = advance().text;
                if (name == "true" || name == "True")
                    return make_expr(pos, LiteralExpr{Value(true)});
                if (name == "false" || name == "False")
                    return make_expr(pos, LiteralExpr{Value(false)});
                if (name == "none" || name == "None")
                    return make_expr(pos, LiteralExpr{Value::none()});
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
                std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
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

    ExprPtr parse_list(SourcePos pos) {
        ListExpr list;
        while (!at_op("]")) {
            if (!list.items.empty()) expect_op(",");
            if (at_op("]")) break;
            list.items.push_back(parse_expression(true));
        }
        expect_op("]");
        return make_expr(pos, std::move(list));
    }

    ExprPtr parse_dict(SourcePos pos) {
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

    ExprPtr parse_postfix(ExprPtr node) {
        ChainGuard chain(*this);
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

    ExprPtr parse_subscript(ExprPtr object, SourcePos pos) {
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

    std::vector<Arg> parse_call_args() {
        std::vector<Arg> args;
        expect_op("(");
        while (!at_op(")")) {
            if (!args.empty()) expect_op(",");
            if (at_op(")")) break;
            if (at_op("*") || at_op("**"))
                fail(cur().pos, "unsupported: *args / **kwargs in calls");
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

    ExprPtr parse_call(ExprPtr callee) {
        const SourcePos pos = cur().pos;
        return make_expr(pos, CallExpr{std::move(callee), parse_call_args()});
    }

    ExprPtr parse_filter_expr(ExprPtr node) {
        ChainGuard chain(*this);
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
    ExprPtr parse_filter(ExprPtr operand) {
        const SourcePos pos = cur().pos;
        FilterExpr f;
        f.operand = std::move(operand);
        f.name = expect_name();
        while (skip_op(".")) f.name += "." + expect_name();
        if (at_op("(")) f.args = parse_call_args();
        return make_expr(pos, std::move(f));
    }

    ExprPtr parse_test(ExprPtr operand) {
        const SourcePos pos = advance().pos;  // 'is'
        TestExpr t;
        t.operand = std::move(operand);
        t.negated = skip_name("not");
        t.name = expect_name();
        while (skip_op(".")) t.name += "." + expect_name();
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

    void note_name_use(const std::string& name) {
        if (macros_.empty()) return;
        if (name == "varargs") macros_.back()->uses_varargs = true;
        if (name == "kwargs") macros_.back()->uses_kwargs = true;
        if (name == "caller") macros_.back()->uses_caller = true;
    }

    const std::vector<Token>& toks_;
    std::string_view name_;
    size_t i_ = 0;
    int depth_ = 0;
    int loop_depth_ = 0;
    std::string end_found_;
    std::vector<MacroDef*> macros_;
};

// Jinja2 resolves filter and test names when it compiles: an unknown name is an error, unless
// it sits inside an `if` (test or branches) or an inline if-expression, where the error is
// raised only if that code runs. Loops, macros and filter blocks start a strict scope again.
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

StmtList parse(const std::vector<Token>& tokens, std::string_view template_name) {
    StmtList body = Parser(tokens, template_name).parse_template();
    NameChecker(template_name).check(body, false);
    return body;
}

}  // namespace troupe::jinja
