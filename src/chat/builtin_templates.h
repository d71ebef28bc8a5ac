// Builtin chat templates: our own Jinja sources for well-known prompt formats, for models whose
// template is missing or not supported (`--chat-template NAME`).
//
// Each renders system/user/assistant conversations exactly like the family's real template
// (tools and multimodal content are out of scope); tools/gen_chat_fixtures.py cross-checks
// them against the real templates with Python's Jinja2. Known deliberate differences:
//   gemma             Gemma 1/2 reject a system message; we prefix it to the first user turn,
//                     as Gemma 3 does.
//   mistral-v7-tekken without a system message, Mistral Small 3.x inserts a long default
//                     system prompt; we insert none.
// The templates emit bos_token where the real ones do: pass "" if the tokenizer adds BOS.
#pragma once

#include <span>
#include <string_view>

namespace troupe {

struct BuiltinChatTemplate {
    std::string_view name;         // "chatml", "llama3", ...
    std::string_view source;       // Jinja
    std::string_view description;  // the models it is for
};

std::span<const BuiltinChatTemplate> builtin_chat_templates();

// By name or alias ("mistral" is "mistral-v3"); nullptr when unknown.
const BuiltinChatTemplate* find_builtin_chat_template(std::string_view name);

}  // namespace troupe
