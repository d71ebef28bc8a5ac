// Errors and invariants.
//
// - troupe::Error: bad input from outside (a file, a request, a workflow). Thrown inside the
//   library, caught at the boundaries (CLI, C API, server) and turned into a one-line message.
// - TROUPE_CHECK: an internal invariant. It stays on in release builds and aborts with the
//   failing condition and location; it is never used for input validation.
// - "No room" (out of KV blocks, budget exceeded) is neither: it is a value the caller handles.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace troupe {

class Error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

[[noreturn]] inline void check_failed(const char* cond, const char* file, int line) {
    std::fprintf(stderr, "troupe: internal invariant failed: %s (%s:%d)\n", cond, file, line);
    std::abort();
}

}  // namespace troupe

#define TROUPE_CHECK(cond) ((cond) ? (void)0 : ::troupe::check_failed(#cond, __FILE__, __LINE__))
