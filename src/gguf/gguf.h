// GGUF reader: the model file format of llama.cpp (versions 2 and 3).
//
// The file is memory-mapped; metadata is parsed and validated at open, tensor data is used in
// place. Every length, count, offset and size is checked against the file size before it is
// used, so a truncated or corrupt file produces a troupe::Error with one line naming the
// problem (and the byte offset where it was found), never a crash or an out-of-bounds read.
//
// Layout: magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv | kv pairs | tensor infos |
// padding to general.alignment (default 32) | tensor data (each tensor at an aligned offset
// relative to the start of the data section). All integers little-endian.
//
// Thread-safety: a GgufFile is immutable after construction; share it freely.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/types.h"
#include "util/mmap_file.h"

namespace troupe {

enum class GgufType : uint32_t {
    UINT8 = 0,
    INT8 = 1,
    UINT16 = 2,
    INT16 = 3,
    UINT32 = 4,
    INT32 = 5,
    FLOAT32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    UINT64 = 10,
    INT64 = 11,
    FLOAT64 = 12,
};

const char* gguf_type_name(GgufType t);
size_t gguf_scalar_size(GgufType t);  // 0 for STRING and ARRAY

// One metadata value. Scalars are widened into `u`/`i`/`f`; strings point into the mapped
// file (valid while the GgufFile lives).
struct GgufValue {
    GgufType type = GgufType::UINT8;
    uint64_t u = 0;          // UINT8/16/32/64, BOOL
    int64_t i = 0;           // INT8/16/32/64
    double f = 0;            // FLOAT32/64
    std::string_view str;    // STRING

    // ARRAY: element type and count. Numeric elements stay raw in the file (`raw`, little
    // endian, count * scalar size bytes); strings are listed in `strings`; nested arrays in
    // `items`.
    GgufType elem_type = GgufType::UINT8;
    uint64_t count = 0;
    const uint8_t* raw = nullptr;
    std::vector<std::string_view> strings;
    std::vector<GgufValue> items;

    bool is_integer() const;
    bool is_float() const { return type == GgufType::FLOAT32 || type == GgufType::FLOAT64; }
    int64_t as_int() const;      // any integer type (u64 above INT64_MAX is clamped)
    double as_double() const;    // any integer or float type

    // Numeric array element i widened to int64 / double (elem_type must be numeric).
    int64_t int_at(uint64_t idx) const;
    double float_at(uint64_t idx) const;

    std::string to_string(size_t max_items = 8) const;  // for `troupe inspect`
};

struct GgufKv {
    std::string_view key;
    GgufValue value;
};

constexpr int kGgufMaxDims = 4;

struct GgufTensor {
    std::string_view name;
    DType type = DType::F32;
    int n_dims = 0;
    int64_t ne[kGgufMaxDims] = {1, 1, 1, 1};  // ne[0] = values per row (contiguous)
    uint64_t offset = 0;                       // relative to the data section
    size_t n_bytes = 0;
    const uint8_t* data = nullptr;             // in the mapped file

    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
    std::string shape_string() const;  // "[288, 32000]"
};

class GgufFile {
public:
    // Maps and validates the file. Throws troupe::Error("<path>: <problem>") on any defect.
    static std::unique_ptr<GgufFile> open(const std::string& path);

    // Parses an in-memory image (used by tests); `bytes` must outlive the object.
    static std::unique_ptr<GgufFile> parse(std::span<const uint8_t> bytes, std::string name);

    uint32_t version() const { return version_; }
    uint32_t alignment() const { return alignment_; }
    size_t data_offset() const { return data_offset_; }
    size_t file_size() const { return bytes_.size(); }
    const std::string& path() const { return name_; }

    const std::vector<GgufKv>& metadata() const { return kvs_; }
    const GgufValue* find(std::string_view key) const;

    // Typed getters: nullopt when the key is absent; troupe::Error when present with an
    // incompatible type (any integer width is accepted for integers, f32/f64 for floats).
    std::optional<std::string> get_string(std::string_view key) const;
    std::optional<int64_t> get_int(std::string_view key) const;
    std::optional<double> get_float(std::string_view key) const;
    std::optional<bool> get_bool(std::string_view key) const;
    std::optional<std::vector<std::string_view>> get_string_array(std::string_view key) const;
    std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;
    std::optional<std::vector<float>> get_float_array(std::string_view key) const;

    const std::vector<GgufTensor>& tensors() const { return tensors_; }
    const GgufTensor* find_tensor(std::string_view name) const;

    // Reads every tensor page once (warm-up) and returns a value the compiler must keep.
    uint64_t touch_tensor_data() const;

    // The whole pages of t's data leave the process's resident set (MappedFile::release):
    // for tensors whose values were copied elsewhere. No effect on an in-memory image.
    void release_tensor_pages(const GgufTensor& t) const;

  private:
    GgufFile() = default;
    void parse_all();

    std::unique_ptr<MappedFile> file_;
    std::span<const uint8_t> bytes_;
    std::string name_;
    uint32_t version_ = 0;
    uint32_t alignment_ = 32;
    size_t data_offset_ = 0;
    std::vector<GgufKv> kvs_;
    std::vector<GgufTensor> tensors_;
};

}  // namespace troupe
