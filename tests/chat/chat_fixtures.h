// Shared helpers of the chat-template tests: the fixtures written by
// tools/gen_chat_fixtures.py (Python Jinja2 renderings) and the inputs of each case.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace troupe::test {

inline std::string read_text_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return {};
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

inline nlohmann::ordered_json load_chat_fixture(const std::string& name) {
    const std::string text =
        read_text_file(std::string(TROUPE_SOURCE_DIR) + "/tests/data/chat/" + name);
    return nlohmann::ordered_json::parse(text);
}

// The instant strftime_now() used when the fixtures were generated ("now_utc").
inline std::chrono::system_clock::time_point fixture_now(
    const nlohmann::ordered_json& conversations) {
    std::tm tm{};
    std::istringstream in(conversations.at("now_utc").get<std::string>());
    in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
    return std::chrono::system_clock::from_time_t(timegm(&tm));
}

// The inputs of one fixture case: the named conversation, generation prompt, tools, tokens.
inline ChatTemplateInputs case_inputs(const nlohmann::ordered_json& conversations,
                                      const nlohmann::ordered_json& test_case,
                                      const nlohmann::ordered_json& template_entry) {
    ChatTemplateInputs in;
    for (const auto& m :
         conversations.at("conversations").at(test_case.at("conversation").get<std::string>())) {
        in.messages.push_back(
            {m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    }
    in.add_generation_prompt = test_case.at("add_generation_prompt").get<bool>();
    in.bos_token = template_entry.at("bos_token").get<std::string>();
    in.eos_token = template_entry.at("eos_token").get<std::string>();
    if (test_case.at("tools").get<bool>()) in.tools = conversations.at("tools");
    in.now = fixture_now(conversations);
    return in;
}

// FNV-1a 64 of `s` as 16 hex digits (tools/gen_chat_fixtures.py records it for each template).
inline std::string fnv1a64_hex(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

// Jinja2's error message without the Python exception class ("TypeError: x" -> "x").
inline std::string python_error_message(const nlohmann::ordered_json& error) {
    std::string msg = error.get<std::string>();
    const size_t colon = msg.find(": ");
    if (colon != std::string::npos && colon >= 5 && msg.compare(colon - 5, 5, "Error") == 0) {
        msg = msg.substr(colon + 2);
    }
    return msg;
}

// The first differing byte of two renderings, for failure messages.
inline std::string first_difference(const std::string& got, const std::string& want) {
    size_t i = 0;
    while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
    auto window = [&](const std::string& s) {
        return nlohmann::json(s.substr(i < 20 ? 0 : i - 20, 60)).dump();
    };
    return "first difference at byte " + std::to_string(i) + ": got " + window(got) + ", want " +
           window(want);
}

}  // namespace troupe::test
