// llama.cpp's tokenizer test data: models/ggml-vocab-NAME.gguf with NAME.gguf.inp (inputs
// separated by "\n__ggml_vocab_test__\n") and NAME.gguf.out (one line of space-separated
// expected ids per input), fetched into .cache/llama-data/vocab by scripts/fetch-llama-data.sh.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace troupe::test {

// The vocabulary cache folder, or nullopt when it has not been fetched.
std::optional<std::filesystem::path> vocab_cache_dir();

// Names (NAME in ggml-vocab-NAME.gguf) of every vocabulary in the cache, sorted.
std::vector<std::string> cached_vocab_names();

std::filesystem::path vocab_path(const std::string& name);

// Reads NAME.gguf.inp / .out as llama.cpp's test-tokenizer-0 does: the same separator, lines
// of ids stripped of surrounding whitespace, and a map, so a repeated input keeps its last
// expected output. nullopt when the files are absent; throws std::runtime_error when they
// disagree in length.
std::optional<std::map<std::string, std::vector<int32_t>>> read_vocab_cases(
    const std::string& name);

}  // namespace troupe::test
