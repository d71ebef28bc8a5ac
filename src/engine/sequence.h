// One request as the scheduler tracks it: its tokens, how far their KV is computed, where that
// KV lives, and its timing. Plain data; the Scheduler owns every Sequence and is the only one
// to change it (the engine reads it to build the forward pass and the outputs).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/request.h"
#include "kv/block_manager.h"

namespace troupe {

enum class SeqStatus { Waiting, Running, Finished };

struct Sequence {
    RequestId id = 0;
    Request request;              // as submitted, except that the prompt moved to `tokens`
    std::vector<int32_t> tokens;  // [n_prompt_tokens + generated]: prompt, then generated
                                  // (an end-of-generation token ends it but is not added)
    int n_prompt_tokens = 0;
    int n_computed_tokens = 0;  // tokens [0, n_computed_tokens) have KV in kv.blocks
    kv::SeqKv kv;               // block table etc.; empty while waiting

    SeqStatus status = SeqStatus::Waiting;
    FinishReason finish = FinishReason::None;
    std::string error;  // when finish == Error

    uint64_t arrival = 0;            // submission order: ties in priority go first come first
    uint64_t start = 0;              // order of the latest admission to running; pre-emption
                                     // picks the most recently started of the lowest priority
    uint64_t preempted_at_step = 0;  // schedule() call that last pre-empted it (it is not
                                     // re-admitted in that same call)

    // Times on the caller's clock (ms); < 0 while not reached.
    double submit_ms = 0;
    double first_scheduled_ms = -1;
    double first_token_ms = -1;
    double finish_ms = -1;
    RequestStats stats;  // filled in as it runs; complete once finished

    int n_generated() const { return int(tokens.size()) - n_prompt_tokens; }
    int n_uncomputed() const { return int(tokens.size()) - n_computed_tokens; }
    int priority() const { return request.priority; }
};

}  // namespace troupe
