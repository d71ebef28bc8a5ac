#include "chat/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

#include "chat/jinja_expr_parser.h"
#include "chat/jinja_name_check.h"

namespace troupe::jinja {
namespace {

// Statements: for, if, set, macro, call, filter, generation, break, continue. Expressions are
// delegated to ExprParser.
class Parser {
  public:
    Parser(const std::vector<Token>& tokens, std::string_view name) : c_(tokens, name), expr_(c_) {}

    StmtList parse_template() { return parse_body({}, "", {}); }

  private:
    const Token& cur() const { return c_.cur(); }
    const Token& advance() { return c_.advance(); }
    bool at_op(std::string_view op) const { return c_.at_op(op); }
    bool at_name(std::string_view n) const { return c_.at_name(n); }
    bool skip_op(std::string_view op) { return c_.skip_op(op); }
    bool skip_name(std::string_view n) { return c_.skip_name(n); }
    void expect_op(std::string_view op) { c_.expect_op(op); }
    std::string expect_name() { return c_.expect_name(); }
    void expect_block_end() { c_.expect_block_end(); }
    [[noreturn]] void fail(SourcePos pos, std::string_view message) const { c_.fail(pos, message); }
    [[noreturn]] void fail_here(std::string_view expected) const { c_.fail_here(expected); }
    ExprPtr parse_tuple(bool with_condexpr = true) { return expr_.parse_tuple(with_condexpr); }
    ExprPtr parse_expression(bool with_condexpr) { return expr_.parse_expression(with_condexpr); }
    ExprPtr parse_filter(ExprPtr operand) { return expr_.parse_filter(std::move(operand)); }

    // Parses statements until `{% <one of ends> ...`; leaves the end keyword consumed and sets
    // end_found_. With no ends, parses to the end of the template.
    StmtList parse_body(std::initializer_list<std::string_view> ends, std::string_view opener,
                        SourcePos opener_pos) {
        TokenCursor::Nest nest(c_, opener_pos);
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
        expr_.enter_macro(def.get());
        def->body = parse_body({end}, opener, pos);
        expr_.leave_macro();
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

    TokenCursor c_;
    ExprParser expr_;
    int loop_depth_ = 0;
    std::string end_found_;
};

}  // namespace

StmtList parse(const std::vector<Token>& tokens, std::string_view template_name) {
    StmtList body = Parser(tokens, template_name).parse_template();
    check_filter_and_test_names(body, template_name);
    return body;
}

}  // namespace troupe::jinja
