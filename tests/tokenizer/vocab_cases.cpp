#include "tokenizer/vocab_cases.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace troupe::test {

namespace fs = std::filesystem;

namespace {

std::optional<std::string> slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) return std::nullopt;
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::optional<fs::path> vocab_cache_dir() {
    const fs::path dir = fs::path(TROUPE_VOCAB_CACHE_DIR) / "vocab";
    if (!fs::is_directory(dir)) return std::nullopt;
    return dir;
}

std::vector<std::string> cached_vocab_names() {
    std::vector<std::string> names;
    const auto dir = vocab_cache_dir();
    if (!dir) return names;
    const std::string prefix = "ggml-vocab-", suffix = ".gguf";
    for (const auto& e : fs::directory_iterator(*dir)) {
        const std::string f = e.path().filename().string();
        if (f.size() > prefix.size() + suffix.size() && f.rfind(prefix, 0) == 0 &&
            f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0)
            names.push_back(f.substr(prefix.size(), f.size() - prefix.size() - suffix.size()));
    }
    std::sort(names.begin(), names.end());
    return names;
}

fs::path vocab_path(const std::string& name) {
    return fs::path(TROUPE_VOCAB_CACHE_DIR) / "vocab" / ("ggml-vocab-" + name + ".gguf");
}

std::optional<std::map<std::string, std::vector<int32_t>>> read_vocab_cases(
    const std::string& name) {
    const fs::path base = vocab_path(name);
    const auto inp = slurp(base.string() + ".inp");
    const auto out = slurp(base.string() + ".out");
    if (!inp || !out) return std::nullopt;

    std::vector<std::string> inputs;
    const std::string sep = "\n__ggml_vocab_test__\n";
    for (size_t pos = 0; pos < inp->size();) {
        const size_t next = inp->find(sep, pos);
        if (next == std::string::npos) {
            inputs.push_back(inp->substr(pos));
            break;
        }
        inputs.push_back(inp->substr(pos, next - pos));
        pos = next + sep.size();
    }
    std::vector<std::vector<int32_t>> outputs;
    std::istringstream lines(*out);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream ids(line);
        std::vector<int32_t> v;
        for (long id; ids >> id;) v.push_back(int32_t(id));
        outputs.push_back(std::move(v));
    }
    if (inputs.size() != outputs.size())
        throw std::runtime_error(name + ": " + std::to_string(inputs.size()) + " inputs but " +
                                 std::to_string(outputs.size()) + " outputs");
    std::map<std::string, std::vector<int32_t>> cases;
    for (size_t i = 0; i < inputs.size(); ++i) cases[inputs[i]] = outputs[i];
    return cases;
}

}  // namespace troupe::test
