// Large anonymous memory for data that lives as long as a model (its interleaved weights):
// page-aligned, asked for in 2 MiB pages where the OS has transparent huge pages (fewer page
// faults when it is filled, fewer TLB misses when it is streamed every decode step).
#pragma once

#include <cstddef>
#include <cstdint>

namespace troupe {

class LargeBuffer {
  public:
    LargeBuffer() = default;
    // Throws troupe::Error when the memory cannot be had. The contents start as zero pages.
    explicit LargeBuffer(size_t bytes);
    ~LargeBuffer();
    LargeBuffer(LargeBuffer&& o) noexcept;
    LargeBuffer& operator=(LargeBuffer&& o) noexcept;
    LargeBuffer(const LargeBuffer&) = delete;
    LargeBuffer& operator=(const LargeBuffer&) = delete;

    uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    explicit operator bool() const { return data_ != nullptr; }

  private:
    uint8_t* data_ = nullptr;
    size_t size_ = 0;
    size_t mapped_ = 0;  // bytes mapped (size_ rounded up to the huge-page size)
};

}  // namespace troupe
