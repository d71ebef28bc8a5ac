#include "util/sysinfo.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>

namespace troupe {

namespace {
// Reads "<key>: <n> kB" from /proc/self/status.
uint64_t status_kb(const char* key) {
    FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    uint64_t kb = 0;
    const size_t klen = std::strlen(key);
    while (std::fgets(line, sizeof line, f)) {
        if (std::strncmp(line, key, klen) == 0 && line[klen] == ':') {
            unsigned long long v = 0;
            if (std::sscanf(line + klen + 1, "%llu", &v) == 1) kb = v;
            break;
        }
    }
    std::fclose(f);
    return kb;
}
}  // namespace

uint64_t peak_rss_bytes() {
    return status_kb("VmHWM") * 1024;
}
uint64_t current_rss_bytes() {
    return status_kb("VmRSS") * 1024;
}

uint64_t total_memory_bytes() {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page = ::sysconf(_SC_PAGESIZE);
    return (pages > 0 && page > 0) ? uint64_t(pages) * uint64_t(page) : 0;
}

double process_cpu_seconds() {
    struct rusage ru {};
    if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
    return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

int hardware_threads() {
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
    const unsigned n = std::thread::hardware_concurrency();
    return n > 0 ? int(n) : 1;
}

}  // namespace troupe
