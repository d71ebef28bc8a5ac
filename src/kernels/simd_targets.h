// The one place that decides which SIMD targets the kernels are compiled for. Every kernel
// translation unit includes this header before any Highway header; Highway then compiles the
// kernels once per target (hwy/foreach_target.h) and picks the best one the CPU supports at
// run time (HWY_DYNAMIC_DISPATCH).
//
// x86-64: AVX3_DL (AVX-512 with VNNI: Ice Lake, Zen 4/5), AVX3 (AVX-512: Skylake-X), AVX2
// (Haswell, Zen 1-3), SSE4, and the baseline (HWY_SCALAR with GCC < 12.3, else EMU128).
// arm64: NEON and the baseline. SSSE3 is dropped: no CPU that lacks SSE4 matters. SVE is
// dropped too: phones implement it with 128-bit vectors, where it brings nothing over NEON
// for these kernels, and Apple's cores do not have it.
#pragma once

#if defined(HWY_TARGET) || defined(HIGHWAY_HWY_DETECT_TARGETS_H_)
#error "kernels/simd_targets.h must be included before any Highway header"
#endif

// AVX3_DL is opt-in in Highway 1.0: it brings VNNI's 8-bit dot products.
#define HWY_WANT_AVX3_DL 1
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)

#include <hwy/detect_targets.h>
