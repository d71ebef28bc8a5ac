// Chat templates: turn a conversation into the prompt text a model was trained on.
//
// A model carries its template as Jinja in `tokenizer.chat_template`; ChatTemplate renders it
// with our Jinja interpreter exactly as Hugging Face transformers does (and llama-server with
// --jinja): variables messages, add_generation_prompt, bos_token, eos_token, tools (none
// unless given), documents (none), plus raise_exception() and strftime_now(). Builtin
// templates cover the well-known formats for models whose template is missing or unsupported.
//
//   ChatTemplate t = ChatTemplate::from_model(gguf.get_string("tokenizer.chat_template").value());
//   std::string prompt = t.render({.messages = {{"system", "S"}, {"user", "U"}},
//                                  .bos_token = "<s>", .eos_token = "</s>"});
//
// BOS: many templates (Llama, Mistral, Gemma, the builtins modelled on them) write bos_token
// themselves. Either pass the BOS text and tokenize the prompt without adding BOS, or pass ""
// and let the tokenizer add it; never both.
//
// Errors are troupe::Error: parse errors name line and column; a template's own
// raise_exception() is a jinja::TemplateRaised (chat/jinja_error.h) carrying its message.
// Thread-safety: a ChatTemplate is immutable; render() may be called concurrently.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace troupe {

namespace jinja {
class Template;
}

struct ChatMessage {
    std::string role;  // "system", "user", "assistant", or any role the template knows
    std::string content;
};

struct ChatTemplateInputs {
    std::vector<ChatMessage> messages;
    bool add_generation_prompt = true;  // end with the header of the assistant's reply
    std::string bos_token;              // the model's BOS/EOS text ("" if the tokenizer adds BOS)
    std::string eos_token;
    nlohmann::ordered_json tools;          // tool schemas (array), or null: `tools` is none
    nlohmann::ordered_json extra_context;  // more variables, e.g. {"enable_thinking": false}
    // The instant strftime_now() formats, in UTC; unset: the current local time (as
    // transformers does). Set it for reproducible prompts.
    std::optional<std::chrono::system_clock::time_point> now;
};

class ChatTemplate {
  public:
    // Parses a Jinja template; name() is "custom". Throws troupe::Error on syntax errors.
    static ChatTemplate from_source(std::string jinja_source);

    // A model's own template (GGUF tokenizer.chat_template). Parses it and renders a one-message
    // conversation as a check; if either fails (a construct we do not support), throws
    // troupe::Error naming the problem and suggesting `--chat-template NAME`, with the builtin
    // that looks like the model's format when there is one.
    static ChatTemplate from_model(std::string jinja_source);

    // A builtin template by name ("chatml", "llama3", "zephyr", ...; see builtin_names()).
    // Throws troupe::Error listing the known names for an unknown one.
    static ChatTemplate builtin(std::string_view name);
    static std::vector<std::string> builtin_names();

    std::string render(const ChatTemplateInputs& in) const;

    const std::string& name() const { return name_; }      // builtin name, or "custom"
    const std::string& source() const { return source_; }  // the Jinja text

  private:
    ChatTemplate(std::string name, std::string source);

    std::string name_;
    std::string source_;
    std::shared_ptr<const jinja::Template> template_;
};

// The builtin whose format a template's text looks like (by its special markers), or "" when
// none does. Used to suggest `--chat-template NAME` when a model's template is unsupported.
std::string guess_builtin_chat_template(std::string_view jinja_source);

}  // namespace troupe
