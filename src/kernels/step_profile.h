// Where the time of parallel regions goes, op by op: for every labelled step of a region
// (Region::for_each), each participant's time on its tasks and its time waiting at the step's
// end for the others. A developer's view of a forward pass (`troupe bench model --profile`):
// which op costs what, how evenly the participants share it, and what the barriers cost.
//
// Off by default: a region records only when run_region() is given a profile (one null check
// per step otherwise). On, a step costs three clock reads per participant.
//
// Labels: the caller names the op (Region::set_op, e.g. "qkv"), the kernel may name a phase
// of it (Region::set_phase, e.g. "convert" of a matrix product); steps are keyed by the pair.
// Both must be string literals (kept by pointer).
//
// Thread-safety: during a region each participant writes only its own slot (prepare() sizes
// them before the participants start); read the results (ops()) when no region is running.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

class StepProfile {
  public:
    // One op (or op/phase) over all recorded regions.
    struct Op {
        std::string name;             // "op" or "op/phase"
        int64_t steps = 0;            // steps recorded, per participant
        std::vector<double> work_ns;  // [participants] time on tasks
        std::vector<double> wait_ns;  // [participants] time waiting at the step ends
    };

    // Sizes the per-participant slots; called by run_region before a profiled region starts.
    void prepare(int n_participants);
    // One step of `participant`: op / phase (phase may be null), its time on tasks and waiting.
    void record(int participant, const char* op, const char* phase, int64_t work_ns,
                int64_t wait_ns);
    // Counts a region (a forward pass) run with this profile.
    void end_region() { ++regions_; }

    int64_t regions() const { return regions_; }
    int participants() const { return int(slots_.size()); }
    // Every op recorded, in the order participant 0 first met them.
    std::vector<Op> ops() const;
    void clear();

  private:
    struct Entry {
        const char* op;
        const char* phase;
        int64_t steps = 0;
        int64_t work_ns = 0, wait_ns = 0;
    };
    struct alignas(64) Slot {
        std::vector<Entry> entries;
        size_t last = 0;  // the entry of the previous step: the next one usually follows it
    };
    std::vector<Slot> slots_;
    int64_t regions_ = 0;
};

}  // namespace troupe
