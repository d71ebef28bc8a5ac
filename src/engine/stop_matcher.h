// Stop strings on streamed text. Text is released only once it can no longer be the start of
// a stop string, so a streamed reply never shows part of a stop string that later matches.
#pragma once

#include <string>
#include <vector>

namespace troupe {

class StopMatcher {
  public:
    explicit StopMatcher(std::vector<std::string> stops);

    // Appends new text. Returns the text that is now safe to release; sets stopped() when a
    // stop string matched (the stop string and anything after it are dropped).
    std::string push(const std::string& text);

    // Releases what is held back (call at the end of generation when no stop matched).
    std::string flush();

    bool stopped() const { return stopped_; }

  private:
    std::vector<std::string> stops_;
    std::string pending_;  // text held back: a suffix that may begin a stop string
    bool stopped_ = false;
};

}  // namespace troupe
