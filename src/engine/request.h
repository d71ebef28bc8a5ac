// What callers hand the engine and what they get back. Plain data, shared by the CLI, the
// workflow runtime, the C API and the server (one definition of each field and its default).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace troupe {

using RequestId = uint64_t;

// Defaults are llama.cpp's, so `troupe generate` and `llama-cli` behave alike.
struct SamplingParams {
    float temperature = 0.8f;        // <= 0: greedy (argmax)
    int top_k = 40;                  // <= 0: off
    float top_p = 0.95f;             // >= 1: off
    float min_p = 0.05f;             // <= 0: off
    float repeat_penalty = 1.0f;     // 1: off. Divides positive / multiplies negative logits
    int repeat_last_n = 64;          // window of recent tokens the penalties look at (-1: all)
    float frequency_penalty = 0.0f;  // 0: off. Subtracts count * value
    float presence_penalty = 0.0f;   // 0: off. Subtracts value once per present token
    uint64_t seed = 0;               // RNG seed; the same seed gives the same text

    bool is_greedy() const { return temperature <= 0.0f; }
};

enum class FinishReason {
    None,       // still running
    Eos,        // the model emitted an end-of-generation token
    Stop,       // a stop string matched (it is not included in the text)
    Length,     // max_tokens reached
    Cancelled,  // cancel() or the token callback returned false
    Error,      // see RequestOutput::error
};
const char* finish_reason_name(FinishReason r);  // "eos", "stop", "length", ...

struct Request {
    // The prompt, as token ids (BOS included when the model wants one). If empty,
    // prompt_text is tokenized by the engine with special tokens parsed and BOS per the vocab.
    std::vector<int32_t> prompt;
    std::string prompt_text;
    SamplingParams sampling;
    int max_tokens = 256;
    std::vector<std::string> stop;  // stop strings, matched on the generated text
    bool ignore_eos = false;        // keep generating past end-of-generation tokens
    int priority = 0;               // higher is admitted first and pre-empted last
    // KV sharing scope: requests share cached prefix blocks only within one namespace
    // (e.g. "{taskId}:{prefixVersion}"); "" is the default namespace.
    std::string cache_namespace;
    std::string tag;  // caller's label, carried into stats and traces
};

struct RequestStats {
    int prompt_tokens = 0;
    int cached_tokens = 0;  // prompt tokens whose KV was reused from the prefix cache
    int generated_tokens = 0;
    double queue_ms = 0;    // submit -> first scheduled
    double ttft_ms = 0;     // submit -> first generated token
    double latency_ms = 0;  // submit -> finished
    int preemptions = 0;
};

struct RequestOutput {
    RequestId id = 0;
    std::string tag;
    std::vector<int32_t> prompt;  // the prompt's ids (as tokenized when given as text)
    std::vector<int32_t> tokens;  // generated ids, ending with the end-of-generation token
                                  // when finish == Eos (it is not part of the text)
    std::string text;             // generated text (stop string excluded)
    FinishReason finish = FinishReason::None;
    std::string error;  // set when finish == Error
    RequestStats stats;
};

// A streamed token. `text` is the new complete UTF-8 text since the previous event (it may be
// empty while a multi-byte character is incomplete, or while a stop string may be forming).
struct TokenEvent {
    RequestId id = 0;
    int32_t token = -1;
    std::string text;
};
// Return false to cancel the request.
using TokenCallback = std::function<bool(const TokenEvent&)>;

}  // namespace troupe
