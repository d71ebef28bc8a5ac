// What the process and machine report about memory and CPU time (Linux /proc; other
// platforms return 0 where unknown).
#pragma once

#include <cstdint>

namespace troupe {

uint64_t peak_rss_bytes();      // high-water mark of resident memory (VmHWM)
uint64_t current_rss_bytes();   // resident memory now (VmRSS)
uint64_t total_memory_bytes();  // physical memory of the machine
double process_cpu_seconds();   // user + system CPU time of this process
int hardware_threads();         // logical CPUs available to this process

}  // namespace troupe
