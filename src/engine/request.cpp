#include "engine/request.h"

namespace troupe {

const char* finish_reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::None: return "none";
        case FinishReason::Eos: return "eos";
        case FinishReason::Stop: return "stop";
        case FinishReason::Length: return "length";
        case FinishReason::Cancelled: return "cancelled";
        case FinishReason::Error: return "error";
    }
    return "?";
}

}  // namespace troupe
