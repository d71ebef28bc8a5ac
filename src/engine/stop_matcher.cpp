#include "engine/stop_matcher.h"

#include <algorithm>

namespace troupe {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
    for (std::string& s : stops)
        if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::push(const std::string& text) {
    if (stopped_) return {};
    pending_ += text;
    // Earliest complete match of any stop string.
    size_t cut = std::string::npos;
    for (const std::string& s : stops_) cut = std::min(cut, pending_.find(s));
    if (cut != std::string::npos) {
        stopped_ = true;
        std::string out = pending_.substr(0, cut);
        pending_.clear();
        return out;
    }
    // Hold back the longest suffix that is a proper prefix of some stop string.
    size_t hold = 0;
    for (const std::string& s : stops_)
        for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len)
            if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
                hold = len;
                break;
            }
    std::string out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
    return out;
}

std::string StopMatcher::flush() {
    std::string out;
    out.swap(pending_);
    return stopped_ ? std::string() : out;
}

}  // namespace troupe
