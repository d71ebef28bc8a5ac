#include "kernels/simd_targets.h"  // first: decides the targets

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/targets.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace troupe::HWY_NAMESPACE {
// The target this copy of the code was compiled for: what dispatch really picks.
int64_t CompiledTarget() {
    return HWY_TARGET;
}
}  // namespace troupe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy/targets.h"
#include "kernels/amx.h"
#include "kernels/targets.h"
#include "util/error.h"

namespace troupe {
HWY_EXPORT(CompiledTarget);

namespace kernels {

std::vector<SimdTarget> available_targets() {
    std::vector<SimdTarget> out;
    for (int64_t t : hwy::SupportedAndGeneratedTargets()) out.push_back({t, hwy::TargetName(t)});
    return out;
}

SimdTarget active_target() {
    const int64_t t = HWY_DYNAMIC_DISPATCH(CompiledTarget)();
    return {t, hwy::TargetName(t)};
}

bool amx_in_use() {
    return active_target().id == HWY_AVX3_DL && amx::usable();
}

std::string active_units() {
    return active_target().name + (amx_in_use() ? " + AMX" : "");
}

ScopedTarget::ScopedTarget(int64_t target_id) {
    bool known = false;
    for (const SimdTarget& t : available_targets()) known |= t.id == target_id;
    TROUPE_CHECK(known);
    hwy::SetSupportedTargetsForTest(target_id);
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

ScopedTarget::~ScopedTarget() {
    hwy::SetSupportedTargetsForTest(0);
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

}  // namespace kernels
}  // namespace troupe
#endif  // HWY_ONCE
