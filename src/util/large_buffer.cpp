#include "util/large_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "util/error.h"

namespace troupe {

namespace {
constexpr size_t kHugePage = size_t(2) << 20;
}

LargeBuffer::LargeBuffer(size_t bytes) : size_(bytes) {
    if (bytes == 0) return;
    mapped_ = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    // Map one huge page more than needed and trim to a 2 MiB-aligned start, so that the
    // kernel can back the whole range with huge pages.
    void* p = ::mmap(nullptr, mapped_ + kHugePage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        throw Error("cannot allocate " + std::to_string(bytes >> 20) +
                    " MiB: " + std::strerror(errno));
    const uintptr_t base = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (base + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > base) ::munmap(p, aligned - base);
    const uintptr_t end = base + mapped_ + kHugePage, aligned_end = aligned + mapped_;
    if (end > aligned_end) ::munmap(reinterpret_cast<void*>(aligned_end), end - aligned_end);
    data_ = reinterpret_cast<uint8_t*>(aligned);
#ifdef MADV_HUGEPAGE
    ::madvise(data_, mapped_, MADV_HUGEPAGE);  // a hint: without THP, 4 KiB pages
#endif
}

LargeBuffer::~LargeBuffer() {
    if (data_) ::munmap(data_, mapped_);
}

LargeBuffer::LargeBuffer(LargeBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      mapped_(std::exchange(o.mapped_, 0)) {}

LargeBuffer& LargeBuffer::operator=(LargeBuffer&& o) noexcept {
    if (this != &o) {
        if (data_) ::munmap(data_, mapped_);
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
        mapped_ = std::exchange(o.mapped_, 0);
    }
    return *this;
}

}  // namespace troupe
