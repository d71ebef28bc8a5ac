// Busy-waiting for other threads of the pool: a pause hint per iteration, and a yield of the
// core now and then so that a waiter never starves a thread that was descheduled (the machine
// may have fewer cores than threads, or other processes).
#pragma once

#include <thread>

namespace troupe {

// One iteration of a spin loop: tells the core (and a hyper-thread sibling) we are waiting.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    asm volatile("yield" ::: "memory");
#endif
}

// Spins until pred() holds, yielding the core every kSpinsBeforeYield iterations.
constexpr int kSpinsBeforeYield = 1 << 10;
template <class Pred>
void spin_until(Pred pred) {
    for (int i = 1; !pred(); ++i) {
        cpu_relax();
        if (i % kSpinsBeforeYield == 0) std::this_thread::yield();
    }
}

}  // namespace troupe
