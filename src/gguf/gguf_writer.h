// GGUF writer: builds a GGUF file (version 3 by default, or 2) from metadata and tensors, in
// the layout GgufFile (gguf.h) reads and llama.cpp writes:
//   header | kv pairs (in insertion order) | tensor infos (in insertion order) | zero padding to
//   general.alignment (default 32) | tensor data, each tensor at an aligned offset, followed by
//   zero padding to the next multiple of the alignment.
//
// Used by tests to build small models and by `troupe quantize`. Every problem the reader would
// reject (bad key, duplicate tensor, row not a multiple of the block size, data size that does
// not match the shape, invalid general.alignment, ...) is reported as a troupe::Error when it
// is added or at the latest when the file is written, so a writer never produces a file that
// GgufFile refuses.
//
// Thread-safety: none (build on one thread); write_* are const and may run concurrently.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "tensor/types.h"

namespace troupe {

// An owned metadata value (GgufValue in gguf.h points into a mapped file). Build one with the
// static constructors; arrays of arrays nest to any depth the reader accepts (8).
struct GgufMetaValue {
    GgufType type = GgufType::UINT8;
    std::vector<uint8_t> bytes;            // scalar: its little-endian bytes; numeric array: all
                                           // elements; STRING: the characters
    GgufType elem_type = GgufType::UINT8;  // ARRAY only
    uint64_t count = 0;                    // ARRAY only: number of elements
    std::vector<std::string> strings;      // ARRAY of STRING
    std::vector<GgufMetaValue> items;      // ARRAY of ARRAY

    static GgufMetaValue u8(uint8_t v);
    static GgufMetaValue i8(int8_t v);
    static GgufMetaValue u16(uint16_t v);
    static GgufMetaValue i16(int16_t v);
    static GgufMetaValue u32(uint32_t v);
    static GgufMetaValue i32(int32_t v);
    static GgufMetaValue u64(uint64_t v);
    static GgufMetaValue i64(int64_t v);
    static GgufMetaValue f32(float v);
    static GgufMetaValue f64(double v);
    static GgufMetaValue boolean(bool v);
    static GgufMetaValue string(std::string_view v);

    // Numeric array: elem_type must be a scalar type (not STRING or ARRAY); `raw` holds count
    // elements of gguf_scalar_size(elem_type) bytes each, little-endian.
    static GgufMetaValue array(GgufType elem_type, std::span<const uint8_t> raw, uint64_t count);
    template <typename T>
    static GgufMetaValue array(GgufType elem_type, std::span<const T> values) {
        return array(elem_type,
                     {reinterpret_cast<const uint8_t*>(values.data()), values.size_bytes()},
                     values.size());
    }
    static GgufMetaValue string_array(std::vector<std::string> values);
    static GgufMetaValue array_of_arrays(std::vector<GgufMetaValue> arrays);  // each an ARRAY

    // A copy of a value read from a file (strings and arrays included).
    static GgufMetaValue from(const GgufValue& v);
};

class GgufWriter {
  public:
    explicit GgufWriter(uint32_t version = 3);  // 2 or 3, else troupe::Error

    void set_version(uint32_t version);  // 2 or 3, else troupe::Error
    uint32_t version() const { return version_; }

    // Sets a metadata key; a key set twice keeps its first position and takes the new value.
    // The key must be 1 to 65536 bytes. general.alignment must be a u32 power of two.
    void set(std::string_view key, GgufMetaValue value);
    void set_u8(std::string_view key, uint8_t v) { set(key, GgufMetaValue::u8(v)); }
    void set_i8(std::string_view key, int8_t v) { set(key, GgufMetaValue::i8(v)); }
    void set_u16(std::string_view key, uint16_t v) { set(key, GgufMetaValue::u16(v)); }
    void set_i16(std::string_view key, int16_t v) { set(key, GgufMetaValue::i16(v)); }
    void set_u32(std::string_view key, uint32_t v) { set(key, GgufMetaValue::u32(v)); }
    void set_i32(std::string_view key, int32_t v) { set(key, GgufMetaValue::i32(v)); }
    void set_u64(std::string_view key, uint64_t v) { set(key, GgufMetaValue::u64(v)); }
    void set_i64(std::string_view key, int64_t v) { set(key, GgufMetaValue::i64(v)); }
    void set_f32(std::string_view key, float v) { set(key, GgufMetaValue::f32(v)); }
    void set_f64(std::string_view key, double v) { set(key, GgufMetaValue::f64(v)); }
    void set_bool(std::string_view key, bool v) { set(key, GgufMetaValue::boolean(v)); }
    void set_string(std::string_view key, std::string_view v) {
        set(key, GgufMetaValue::string(v));
    }
    void set_string_array(std::string_view key, std::vector<std::string> v) {
        set(key, GgufMetaValue::string_array(std::move(v)));
    }
    bool remove(std::string_view key);  // false when absent
    const GgufMetaValue* find(std::string_view key) const;

    // Copies every metadata key of `file` (for tools that rewrite a model).
    void copy_metadata(const GgufFile& file);

    // Adds a tensor. ne[0] is the row length (contiguous); 1 to 4 dimensions, each >= 0;
    // ne[0] a multiple of the type's block size; data.size() == row_bytes(type, ne[0]) * rows.
    // add_tensor copies the bytes; add_tensor_view keeps a pointer that must stay valid until
    // the last write_* call.
    void add_tensor(std::string_view name, DType type, std::span<const int64_t> ne,
                    std::span<const uint8_t> data);
    void add_tensor_view(std::string_view name, DType type, std::span<const int64_t> ne,
                         std::span<const uint8_t> data);
    size_t n_tensors() const { return tensors_.size(); }

    uint32_t alignment() const;  // general.alignment, or 32

    std::vector<uint8_t> write_bytes() const;
    // Writes the file (replacing it). troupe::Error naming the path on any I/O failure; a
    // partial file is removed.
    void write_file(const std::string& path) const;

  private:
    struct Kv {
        std::string key;
        GgufMetaValue value;
    };
    struct Tensor {
        std::string name;
        DType type;
        int n_dims;
        int64_t ne[kGgufMaxDims];
        std::vector<uint8_t> owned;
        std::span<const uint8_t> data;
    };
    class Sink;

    void add_tensor_impl(std::string_view name, DType type, std::span<const int64_t> ne,
                         std::span<const uint8_t> data, bool copy);
    void write(Sink& out) const;

    uint32_t version_ = 3;
    std::vector<Kv> kvs_;
    std::vector<Tensor> tensors_;
};

}  // namespace troupe
