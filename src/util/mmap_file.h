// A read-only memory-mapped file. Model weights are used in place from the mapping, so the
// model is loaded once and shared by every agent (no copy per request or per sequence).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe {

class MappedFile {
  public:
    // Throws troupe::Error naming the path and the OS reason when the file cannot be mapped.
    explicit MappedFile(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& path() const { return path_; }

    // Reads every page once (sequentially) so the first inference does not pay page faults.
    // Returns a checksum-like value so the compiler cannot drop the reads.
    uint64_t touch_all() const;

    // The whole pages within [p, p + n) (inside the mapping) leave the process's resident
    // set: memory whose content now lives elsewhere (e.g. weights copied into another
    // layout). The mapping stays valid; a later read maps the pages again from the file.
    void release(const uint8_t* p, size_t n) const;

  private:
    std::string path_;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace troupe
