#include "chat/chat_template.h"

#include <ctime>
#include <optional>

#include "chat/builtin_templates.h"
#include "chat/jinja_json.h"
#include "chat/jinja_ops.h"
#include "chat/jinja_template.h"
#include "util/error.h"

namespace troupe {
namespace {

std::string known_names() {
    std::string out;
    for (const auto& t : builtin_chat_templates()) {
        if (!out.empty()) out += ", ";
        out += t.name;
    }
    return out;
}

// strftime_now(format): the injected instant in UTC, or the current local time.
jinja::Value strftime_now(const std::optional<std::chrono::system_clock::time_point>& now,
                          jinja::CallArgs& args) {
    auto a = jinja::bind_args("strftime_now", args, {"format"});
    if (!a[0].is_string()) throw jinja::ValueError("strftime_now(): the format must be a string");
    const std::time_t t =
        std::chrono::system_clock::to_time_t(now.value_or(std::chrono::system_clock::now()));
    std::tm tm{};
    if (now)
        gmtime_r(&t, &tm);
    else
        localtime_r(&t, &tm);
    char buf[512];
    const std::string& fmt = a[0].as_string();
    const size_t n = fmt.empty() ? 0 : std::strftime(buf, sizeof(buf), fmt.c_str(), &tm);
    if (n == 0 && !fmt.empty())
        throw jinja::ValueError("strftime_now(): formatted date too long or empty");
    return jinja::Value(std::string(buf, n));
}

jinja::Value messages_value(const std::vector<ChatMessage>& messages) {
    jinja::ValueList list;
    list.reserve(messages.size());
    for (const ChatMessage& m : messages) {
        jinja::ValueDict d;
        d.set("role", jinja::Value(m.role));
        d.set("content", jinja::Value(m.content));
        list.emplace_back(std::move(d));
    }
    return jinja::Value(std::move(list));
}

bool contains(std::string_view s, std::string_view needle) {
    return s.find(needle) != std::string_view::npos;
}

}  // namespace

ChatTemplate::ChatTemplate(std::string name, std::string source)
    : name_(std::move(name)),
      source_(std::move(source)),
      template_(std::make_shared<const jinja::Template>(jinja::Template::parse(source_, name_))) {}

ChatTemplate ChatTemplate::from_source(std::string jinja_source) {
    return ChatTemplate("custom", std::move(jinja_source));
}

ChatTemplate ChatTemplate::builtin(std::string_view name) {
    const BuiltinChatTemplate* t = find_builtin_chat_template(name);
    if (!t) {
        throw Error("unknown chat template '" + std::string(name) +
                    "'; known templates: " + known_names());
    }
    return ChatTemplate(std::string(t->name), std::string(t->source));
}

std::vector<std::string> ChatTemplate::builtin_names() {
    std::vector<std::string> names;
    for (const auto& t : builtin_chat_templates()) names.emplace_back(t.name);
    return names;
}

ChatTemplate ChatTemplate::from_model(std::string jinja_source) {
    const std::string guess = guess_builtin_chat_template(jinja_source);
    auto unsupported = [&](const Error& e) {
        const std::string advice =
            guess.empty()
                ? "pass --chat-template NAME with one of: " + known_names()
                : "pass --chat-template " + guess +
                      " (the model's format looks like it), or another of: " + known_names();
        return Error(std::string("the model's chat template is not supported (") + e.what() +
                     "); " + advice);
    };
    std::optional<ChatTemplate> t;
    try {
        t.emplace(ChatTemplate("custom", std::move(jinja_source)));
    } catch (const Error& e) {
        throw unsupported(e);
    }
    try {
        ChatTemplateInputs probe;
        probe.messages = {{"user", "Hello"}};
        t->render(probe);
    } catch (const jinja::TemplateRaised&) {
        // The template itself rejected the probe (say, it wants a system message): it runs.
    } catch (const Error& e) {
        throw unsupported(e);
    }
    return std::move(*t);
}

std::string ChatTemplate::render(const ChatTemplateInputs& in) const {
    jinja::ValueDict vars;
    vars.set("messages", messages_value(in.messages));
    vars.set("add_generation_prompt", jinja::Value(in.add_generation_prompt));
    vars.set("bos_token", jinja::Value(in.bos_token));
    vars.set("eos_token", jinja::Value(in.eos_token));
    vars.set("tools", in.tools.is_null() ? jinja::Value::none() : jinja::from_json(in.tools));
    vars.set("documents", jinja::Value::none());
    const std::string template_name = name_;
    vars.set("raise_exception",
             jinja::make_function(
                 "raise_exception", [template_name](jinja::CallArgs& args) -> jinja::Value {
                     auto a = jinja::bind_args("raise_exception", args, {"message"});
                     throw jinja::TemplateRaised(template_name, a[0].str());
                 }));
    const auto now = in.now;
    vars.set("strftime_now", jinja::make_function("strftime_now", [now](jinja::CallArgs& args) {
                 return strftime_now(now, args);
             }));
    if (in.extra_context.is_object()) {
        for (const auto& [k, v] : in.extra_context.items())
            vars.set(jinja::Value(k), jinja::from_json(v));
    } else if (!in.extra_context.is_null()) {
        throw Error("chat template: extra_context must be a JSON object");
    }
    return template_->render(vars);
}

std::string guess_builtin_chat_template(std::string_view src) {
    if (contains(src, "<|im_start|>")) return contains(src, "<|im_sep|>") ? "phi4" : "chatml";
    if (contains(src, "<|start_header_id|>")) {
        if (!contains(src, "Cutting Knowledge Date")) return "llama3";
        return contains(src, "strftime_now") ? "llama3.2" : "llama3.1";
    }
    if (contains(src, "<start_of_turn>")) return "gemma";
    if (contains(src, "<|START_OF_TURN_TOKEN|>")) return "command-r";
    if (contains(src, "<｜User｜>")) return "deepseek-r1";
    if (contains(src, "### Instruction:")) return "deepseek";
    if (contains(src, "[SYSTEM_PROMPT]"))
        return contains(src, "[SYSTEM_PROMPT] ") ? "mistral-v7" : "mistral-v7-tekken";
    if (contains(src, "[INST]")) {
        if (contains(src, "<<SYS>>")) return "llama2";
        if (contains(src, " [INST] ")) return "mistral-v1";
        if (contains(src, "'[INST]'") || contains(src, "\"[INST]\"")) return "mistral-v3-tekken";
        return "mistral-v3";
    }
    if (contains(src, "<|user|>")) return contains(src, "<|end|>") ? "phi3" : "zephyr";
    if (contains(src, "'User: '") && contains(src, "Assistant:")) return "deepseek2";
    return "";
}

}  // namespace troupe
