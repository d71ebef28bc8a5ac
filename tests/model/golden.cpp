#include "model/golden.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

namespace troupe::test {

namespace {

void load_file(const std::string& path, std::vector<GoldenCase>& out, std::set<std::string>& seen) {
    std::ifstream in(path);
    if (!in) return;
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const auto& c : j.at("cases")) {
        GoldenCase g;
        g.model = c.at("model");
        g.prompt = c.at("prompt");
        g.chat = c.at("chat");
        const std::string key = g.model + "|" + g.prompt + "|" + (g.chat ? "1" : "0");
        if (!seen.insert(key).second) continue;
        g.rendered_prompt = c.at("rendered_prompt");
        g.prompt_tokens = c.at("prompt_tokens").get<std::vector<int32_t>>();
        g.tokens = c.at("tokens").get<std::vector<int32_t>>();
        g.text = c.at("text");
        for (const auto& pos : c.at("top")) {
            std::vector<std::pair<int32_t, float>> row;
            for (const auto& e : pos) row.emplace_back(e.at("id"), e.at("logprob"));
            g.top.push_back(std::move(row));
        }
        g.gap = c.at("gap").get<std::vector<float>>();
        out.push_back(std::move(g));
    }
}

}  // namespace

std::vector<GoldenCase> load_golden_cases() {
    std::vector<GoldenCase> cases;
    std::set<std::string> seen;
    load_file(std::string(TROUPE_SOURCE_DIR) + "/tests/data/golden/reference-tiny.json", cases,
              seen);
    load_file(std::string(TROUPE_SHARED_MODELS_DIR) + "/golden/reference.json", cases, seen);
    return cases;
}

std::string find_model(const std::string& file_name) {
    for (const std::string dir :
         {std::string(TROUPE_SOURCE_DIR) + "/models", std::string(TROUPE_SHARED_MODELS_DIR)}) {
        const std::string p = dir + "/" + file_name;
        if (std::filesystem::exists(p)) return p;
    }
    return {};
}

}  // namespace troupe::test
