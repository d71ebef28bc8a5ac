// llama.cpp reference outputs (tests/data/golden/, ../shared/models/golden/): greedy tokens and
// top-5 log-probabilities for fixed prompts, per model file.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace troupe::test {

struct GoldenCase {
    std::string model;  // file name
    std::string prompt;
    bool chat = false;
    std::string rendered_prompt;
    std::vector<int32_t> prompt_tokens;
    std::vector<int32_t> tokens;  // greedy continuation
    std::string text;
    std::vector<std::vector<std::pair<int32_t, float>>> top;  // [n_tokens][5] (id, logprob)
    std::vector<float> gap;  // [n_tokens] logprob(best) - logprob(second)
};

// Cases from the in-repository copy (tiny models) plus, when present, the shared reference
// (all models). Deduplicated by (model, prompt, chat).
std::vector<GoldenCase> load_golden_cases();

// Path of a model file: the bundled models/ folder first, then the shared models folder.
// Empty when neither has it.
std::string find_model(const std::string& file_name);

}  // namespace troupe::test
