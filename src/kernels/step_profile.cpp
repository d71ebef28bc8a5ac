#include "kernels/step_profile.h"

#include <algorithm>

namespace troupe {

void StepProfile::prepare(int n_participants) {
    if (int(slots_.size()) < n_participants) slots_.resize(size_t(n_participants));
}

void StepProfile::record(int participant, const char* op, const char* phase, int64_t work_ns,
                         int64_t wait_ns) {
    Slot& s = slots_[size_t(participant)];
    auto same = [&](const Entry& e) { return e.op == op && e.phase == phase; };
    // A pass repeats the same step sequence layer after layer: look at the entry after the
    // previous step's first, then everywhere.
    size_t i = s.last + 1;
    if (i >= s.entries.size() || !same(s.entries[i])) {
        i = size_t(std::find_if(s.entries.begin(), s.entries.end(), same) - s.entries.begin());
        if (i == s.entries.size()) s.entries.push_back({op, phase});
    }
    Entry& e = s.entries[i];
    ++e.steps;
    e.work_ns += work_ns;
    e.wait_ns += wait_ns;
    s.last = i;
}

std::vector<StepProfile::Op> StepProfile::ops() const {
    std::vector<Op> out;
    std::vector<std::pair<const char*, const char*>> keys;
    for (const Slot& s : slots_)
        for (const Entry& e : s.entries) {
            const auto key = std::make_pair(e.op, e.phase);
            if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
            keys.push_back(key);
            Op op;
            op.name = std::string(e.op ? e.op : "?") + (e.phase ? std::string("/") + e.phase : "");
            op.work_ns.assign(slots_.size(), 0.0);
            op.wait_ns.assign(slots_.size(), 0.0);
            out.push_back(std::move(op));
        }
    for (size_t p = 0; p < slots_.size(); ++p)
        for (const Entry& e : slots_[p].entries) {
            const size_t k = size_t(
                std::find(keys.begin(), keys.end(), std::make_pair(e.op, e.phase)) - keys.begin());
            out[k].steps = std::max(out[k].steps, e.steps);
            out[k].work_ns[p] += double(e.work_ns);
            out[k].wait_ns[p] += double(e.wait_ns);
        }
    return out;
}

void StepProfile::clear() {
    for (Slot& s : slots_) s = Slot{};
    regions_ = 0;
}

}  // namespace troupe
