// Helpers of the GGUF tests: a raw byte builder for hand-made (often invalid) files, and an
// assertion that parsing fails with a troupe::Error naming the problem.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "util/error.h"

namespace troupe::test {

// Appends little-endian fields; every method returns *this for chaining.
class RawGguf {
  public:
    std::vector<uint8_t> bytes;

    template <typename T>
    RawGguf& put(T v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        bytes.insert(bytes.end(), p, p + sizeof(T));
        return *this;
    }
    RawGguf& u32(uint32_t v) { return put(v); }
    RawGguf& u64(uint64_t v) { return put(v); }
    RawGguf& str(std::string_view s) {
        u64(s.size());
        bytes.insert(bytes.end(), s.begin(), s.end());
        return *this;
    }
    RawGguf& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
        bytes.insert(bytes.end(), {'G', 'G', 'U', 'F'});
        return u32(version).u64(n_tensors).u64(n_kv);
    }
    RawGguf& key(std::string_view k, GgufType t) { return str(k).u32(uint32_t(t)); }
    RawGguf& kv_u32(std::string_view k, uint32_t v) { return key(k, GgufType::UINT32).u32(v); }
    RawGguf& tensor(std::string_view name, std::vector<int64_t> ne, uint32_t type,
                    uint64_t offset) {
        str(name).u32(uint32_t(ne.size()));
        for (int64_t d : ne) put(d);
        return u32(type).u64(offset);
    }
    RawGguf& pad(size_t alignment) {
        while (bytes.size() % alignment) bytes.push_back(0);
        return *this;
    }
    RawGguf& zeros(size_t n) {
        bytes.insert(bytes.end(), n, 0);
        return *this;
    }
};

inline std::unique_ptr<GgufFile> parse(const std::vector<uint8_t>& bytes) {
    return GgufFile::parse(std::span<const uint8_t>(bytes.data(), bytes.size()), "test.gguf");
}

// Parsing must throw troupe::Error whose message contains `needle` (and the file name).
inline void expect_parse_error(const std::vector<uint8_t>& bytes, const std::string& needle) {
    try {
        parse(bytes);
        ADD_FAILURE() << "parsed without error; expected: " << needle;
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg;
        EXPECT_EQ(msg.rfind("test.gguf: ", 0), 0u) << "message: " << msg;
    }
}

}  // namespace troupe::test
