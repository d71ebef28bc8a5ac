// A cursor over the lexer's tokens, shared by the expression and statement parsers: lookahead,
// expectations with clear errors ("expected ')', found '%}'"), and the nesting limit that keeps
// recursion (and the depth of the syntax tree) bounded on hostile input.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace troupe::jinja {

class TokenCursor {
  public:
    static constexpr int kMaxNesting = 256;  // deeper blocks or expressions are rejected

    TokenCursor(const std::vector<Token>& tokens, std::string_view template_name)
        : toks_(tokens), name_(template_name) {}

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

    void expect_op(std::string_view op) {
        if (skip_op(op)) return;
        std::string quoted(1, '\'');
        quoted.append(op).push_back('\'');
        fail_here(quoted);
    }
    std::string expect_name() {
        if (cur().kind != TokenKind::kName) fail_here("a name");
        return advance().text;
    }
    void expect_block_end() {
        if (cur().kind != TokenKind::kBlockEnd) fail_here("'%}'");
        advance();
    }

    [[noreturn]] void fail(SourcePos pos, std::string_view message) const {
        throw_template_error(name_, pos, message);
    }
    [[noreturn]] void fail_here(std::string_view expected) const {
        std::string message = "expected ";
        message.append(expected).append(", found ").append(describe(cur()));
        fail(cur().pos, message);
    }

    // One level of nesting for the guard's lifetime.
    class Nest {
      public:
        Nest(TokenCursor& c, SourcePos pos) : c_(c) { c_.deepen(pos); }
        ~Nest() { --c_.depth_; }

      private:
        TokenCursor& c_;
    };

    // Each link of an operator chain (a + b + c, x.a.b, x|f|g) nests the tree one level
    // deeper, so it counts toward the limit until the chain is finished.
    class Chain {
      public:
        explicit Chain(TokenCursor& c) : c_(c) {}
        ~Chain() { c_.depth_ -= n_; }
        void link(SourcePos pos) {
            c_.deepen(pos);
            ++n_;
        }

      private:
        TokenCursor& c_;
        int n_ = 0;
    };

  private:
    void deepen(SourcePos pos) {
        if (++depth_ > kMaxNesting) {
            --depth_;
            fail(pos, "template nested too deeply");
        }
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

    const std::vector<Token>& toks_;
    std::string_view name_;
    size_t i_ = 0;
    int depth_ = 0;
};

template <typename Node>
ExprPtr make_expr(SourcePos pos, Node node) {
    return std::make_unique<Expr>(Expr{pos, std::move(node)});
}

template <typename Node>
std::unique_ptr<Stmt> make_stmt(SourcePos pos, Node node) {
    return std::make_unique<Stmt>(Stmt{pos, std::move(node)});
}

}  // namespace troupe::jinja
