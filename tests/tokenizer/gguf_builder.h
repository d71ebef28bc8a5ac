// Builds small in-memory GGUF files (metadata only) for tokenizer tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace troupe::test {

class GgufBuilder {
  public:
    GgufBuilder& str(const std::string& key, const std::string& v) {
        begin(key, GgufType::STRING);
        put_str(v);
        return *this;
    }
    GgufBuilder& u32(const std::string& key, uint32_t v) {
        begin(key, GgufType::UINT32);
        put(v);
        return *this;
    }
    GgufBuilder& i32(const std::string& key, int32_t v) {
        begin(key, GgufType::INT32);
        put(v);
        return *this;
    }
    GgufBuilder& boolean(const std::string& key, bool v) {
        begin(key, GgufType::BOOL);
        put(uint8_t(v ? 1 : 0));
        return *this;
    }
    GgufBuilder& strings(const std::string& key, const std::vector<std::string>& v) {
        begin(key, GgufType::ARRAY);
        put(uint32_t(GgufType::STRING));
        put(uint64_t(v.size()));
        for (const std::string& s : v) put_str(s);
        return *this;
    }
    GgufBuilder& f32s(const std::string& key, const std::vector<float>& v) {
        begin(key, GgufType::ARRAY);
        put(uint32_t(GgufType::FLOAT32));
        put(uint64_t(v.size()));
        for (const float x : v) put(x);
        return *this;
    }
    GgufBuilder& i32s(const std::string& key, const std::vector<int32_t>& v) {
        begin(key, GgufType::ARRAY);
        put(uint32_t(GgufType::INT32));
        put(uint64_t(v.size()));
        for (const int32_t x : v) put(x);
        return *this;
    }

    // The file image (GGUF v3, no tensors). Keep it alive as long as the GgufFile.
    std::vector<uint8_t> bytes() const {
        std::vector<uint8_t> out;
        const auto append = [&](const void* p, size_t n) {
            const auto* b = static_cast<const uint8_t*>(p);
            out.insert(out.end(), b, b + n);
        };
        append("GGUF", 4);
        const uint32_t version = 3;
        const uint64_t n_tensors = 0;
        append(&version, 4);
        append(&n_tensors, 8);
        append(&n_kv_, 8);
        out.insert(out.end(), kv_.begin(), kv_.end());
        while (out.size() % 32 != 0) out.push_back(0);
        return out;
    }

  private:
    template <typename T>
    void put(T v) {
        uint8_t b[sizeof(T)];
        std::memcpy(b, &v, sizeof(T));
        kv_.insert(kv_.end(), b, b + sizeof(T));
    }
    void put_str(const std::string& s) {
        put(uint64_t(s.size()));
        kv_.insert(kv_.end(), s.begin(), s.end());
    }
    void begin(const std::string& key, GgufType type) {
        put_str(key);
        put(uint32_t(type));
        ++n_kv_;
    }

    std::vector<uint8_t> kv_;
    uint64_t n_kv_ = 0;
};

// A parsed GGUF image that owns its bytes.
struct GgufImage {
    std::vector<uint8_t> bytes;
    std::unique_ptr<GgufFile> file;

    explicit GgufImage(const GgufBuilder& b) : bytes(b.bytes()) {
        file = GgufFile::parse(bytes, "synthetic.gguf");
    }
};

}  // namespace troupe::test
