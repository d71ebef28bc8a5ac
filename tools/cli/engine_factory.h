// What the workflow commands (`troupe run`, `troupe lint`) need from the model, declared here
// and implemented where the engine is built:
//   make_backend()     the continuous-batching engine for a model file;
//   load_model_text()  the model's chat template and tokenizer (engine_factory.cpp).
#pragma once

#include <memory>
#include <string>

#include "engine/backend.h"
#include "workflow/prompt_layout.h"
#include "workflow/prompt_lint.h"

namespace troupe::cli {

struct BackendOptions {
    std::string model_path;
    int n_threads = 0;  // 0: every core available to the process
    // The seed's A/B levers, as the workflow runtime's options (workflow/runtime.h). The
    // runtime already enforces both from its side (own cache namespaces, one request in
    // flight); an engine may also implement them natively, e.g. to skip hashing blocks.
    bool prefix_cache = true;      // false: no KV reuse between requests
    bool batching = true;          // false: one sequence per step
    bool shared_attention = true;  // false: no shared-prefix attention (engine issue, item 4)
};

// Loads the model and returns the engine, warmed up (the first request does not pay for
// kernel or page-cache warm-up). Throws troupe::Error for a bad model file.
std::unique_ptr<InferenceBackend> make_backend(const BackendOptions& options);

// The model's chat template and tokenizer, as the workflow layer takes them.
struct ModelText {
    workflow::ChatRenderer render;  // messages -> prompt, with the generation prompt
    workflow::Tokenize tokenize;    // prompt -> ids, special tokens parsed, BOS per the vocab
    int context_length = 0;         // the model's trained context (tokens per sequence)
};

// Reads the tokenizer and `tokenizer.chat_template` from a GGUF file. Throws troupe::Error
// when the file has no usable template.
ModelText load_model_text(const std::string& model_path);

}  // namespace troupe::cli
