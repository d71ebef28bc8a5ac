#include "gguf/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "util/error.h"

namespace troupe {

namespace {

constexpr uint64_t kMaxKeyLength = 1 << 16;  // as the reader
constexpr int kMaxArrayDepth = 8;            // arrays nested up to 8 levels, as the reader
constexpr size_t kMaxTensorName = 63;        // llama.cpp's limit (GGML_MAX_NAME - 1)
constexpr uint32_t kDefaultAlignment = 32;

template <typename T>
GgufMetaValue scalar(GgufType type, T v) {
    GgufMetaValue m;
    m.type = type;
    m.bytes.resize(sizeof(T));
    std::memcpy(m.bytes.data(), &v, sizeof(T));
    return m;
}

bool is_scalar(GgufType t) {
    return gguf_scalar_size(t) > 0;
}
bool valid_type(GgufType t) {
    return uint32_t(t) <= uint32_t(GgufType::FLOAT64);
}

// Checks the internal consistency of a value (sizes, counts, nesting) before it is stored.
void validate(const GgufMetaValue& v, std::string_view key, int depth) {
    auto fail = [&](const std::string& what) {
        throw Error("GGUF writer: metadata '" + std::string(key) + "': " + what);
    };
    if (!valid_type(v.type)) fail("unknown value type " + std::to_string(uint32_t(v.type)));
    if (is_scalar(v.type)) {
        if (v.bytes.size() != gguf_scalar_size(v.type)) fail("scalar of the wrong size");
        if (v.type == GgufType::BOOL && v.bytes[0] > 1) fail("bool value is not 0 or 1");
        return;
    }
    if (v.type == GgufType::STRING) return;
    if (depth >= kMaxArrayDepth)
        fail("arrays nested deeper than " + std::to_string(kMaxArrayDepth));
    if (!valid_type(v.elem_type))
        fail("unknown array element type " + std::to_string(uint32_t(v.elem_type)));
    if (is_scalar(v.elem_type)) {
        if (v.bytes.size() != v.count * gguf_scalar_size(v.elem_type))
            fail("array data does not hold " + std::to_string(v.count) + " elements");
    } else if (v.elem_type == GgufType::STRING) {
        if (v.count != v.strings.size()) fail("string array count mismatch");
    } else {
        if (v.count != v.items.size()) fail("nested array count mismatch");
        for (const GgufMetaValue& item : v.items) {
            if (item.type != GgufType::ARRAY)
                fail("an element of an array of arrays is not an array");
            validate(item, key, depth + 1);
        }
    }
}

uint64_t align_up(uint64_t v, uint64_t a) {
    return (v + a - 1) / a * a;
}

}  // namespace

GgufMetaValue GgufMetaValue::u8(uint8_t v) {
    return scalar(GgufType::UINT8, v);
}
GgufMetaValue GgufMetaValue::i8(int8_t v) {
    return scalar(GgufType::INT8, v);
}
GgufMetaValue GgufMetaValue::u16(uint16_t v) {
    return scalar(GgufType::UINT16, v);
}
GgufMetaValue GgufMetaValue::i16(int16_t v) {
    return scalar(GgufType::INT16, v);
}
GgufMetaValue GgufMetaValue::u32(uint32_t v) {
    return scalar(GgufType::UINT32, v);
}
GgufMetaValue GgufMetaValue::i32(int32_t v) {
    return scalar(GgufType::INT32, v);
}
GgufMetaValue GgufMetaValue::u64(uint64_t v) {
    return scalar(GgufType::UINT64, v);
}
GgufMetaValue GgufMetaValue::i64(int64_t v) {
    return scalar(GgufType::INT64, v);
}
GgufMetaValue GgufMetaValue::f32(float v) {
    return scalar(GgufType::FLOAT32, v);
}
GgufMetaValue GgufMetaValue::f64(double v) {
    return scalar(GgufType::FLOAT64, v);
}
GgufMetaValue GgufMetaValue::boolean(bool v) {
    return scalar(GgufType::BOOL, uint8_t(v));
}

GgufMetaValue GgufMetaValue::string(std::string_view v) {
    GgufMetaValue m;
    m.type = GgufType::STRING;
    m.bytes.assign(v.begin(), v.end());
    return m;
}

GgufMetaValue GgufMetaValue::array(GgufType elem_type, std::span<const uint8_t> raw,
                                   uint64_t count) {
    if (!is_scalar(elem_type))
        throw Error(std::string("GGUF writer: numeric array of element type ") +
                    gguf_type_name(elem_type));
    GgufMetaValue m;
    m.type = GgufType::ARRAY;
    m.elem_type = elem_type;
    m.count = count;
    m.bytes.assign(raw.begin(), raw.end());
    return m;
}

GgufMetaValue GgufMetaValue::string_array(std::vector<std::string> values) {
    GgufMetaValue m;
    m.type = GgufType::ARRAY;
    m.elem_type = GgufType::STRING;
    m.count = values.size();
    m.strings = std::move(values);
    return m;
}

GgufMetaValue GgufMetaValue::array_of_arrays(std::vector<GgufMetaValue> arrays) {
    GgufMetaValue m;
    m.type = GgufType::ARRAY;
    m.elem_type = GgufType::ARRAY;
    m.count = arrays.size();
    m.items = std::move(arrays);
    return m;
}

GgufMetaValue GgufMetaValue::from(const GgufValue& v) {
    switch (v.type) {
        case GgufType::UINT8:
            return u8(uint8_t(v.u));
        case GgufType::INT8:
            return i8(int8_t(v.i));
        case GgufType::UINT16:
            return u16(uint16_t(v.u));
        case GgufType::INT16:
            return i16(int16_t(v.i));
        case GgufType::UINT32:
            return u32(uint32_t(v.u));
        case GgufType::INT32:
            return i32(int32_t(v.i));
        case GgufType::UINT64:
            return u64(v.u);
        case GgufType::INT64:
            return i64(v.i);
        case GgufType::FLOAT32:
            return f32(float(v.f));
        case GgufType::FLOAT64:
            return f64(v.f);
        case GgufType::BOOL:
            return boolean(v.u != 0);
        case GgufType::STRING:
            return string(v.str);
        case GgufType::ARRAY:
            break;
    }
    if (v.elem_type == GgufType::STRING)
        return string_array(std::vector<std::string>(v.strings.begin(), v.strings.end()));
    if (v.elem_type == GgufType::ARRAY) {
        std::vector<GgufMetaValue> items;
        items.reserve(v.items.size());
        for (const GgufValue& item : v.items) items.push_back(from(item));
        return array_of_arrays(std::move(items));
    }
    const size_t n = size_t(v.count) * gguf_scalar_size(v.elem_type);
    return array(v.elem_type, {v.raw, v.raw ? n : 0}, v.count);
}

GgufWriter::GgufWriter(uint32_t version) {
    set_version(version);
}

void GgufWriter::set_version(uint32_t version) {
    if (version != 2 && version != 3)
        throw Error("GGUF writer: version " + std::to_string(version) + " (2 or 3 supported)");
    version_ = version;
}

void GgufWriter::set(std::string_view key, GgufMetaValue value) {
    if (key.empty() || key.size() > kMaxKeyLength)
        throw Error("GGUF writer: metadata key of length " + std::to_string(key.size()));
    validate(value, key, 0);
    if (key == "general.alignment") {
        uint32_t a = 0;
        if (value.type == GgufType::UINT32) std::memcpy(&a, value.bytes.data(), 4);
        if (value.type != GgufType::UINT32 || a == 0 || (a & (a - 1)) != 0)
            throw Error("GGUF writer: general.alignment must be a u32 power of two");
    }
    for (Kv& kv : kvs_) {
        if (kv.key == key) {
            kv.value = std::move(value);
            return;
        }
    }
    kvs_.push_back({std::string(key), std::move(value)});
}

bool GgufWriter::remove(std::string_view key) {
    for (auto it = kvs_.begin(); it != kvs_.end(); ++it) {
        if (it->key == key) {
            kvs_.erase(it);
            return true;
        }
    }
    return false;
}

const GgufMetaValue* GgufWriter::find(std::string_view key) const {
    for (const Kv& kv : kvs_)
        if (kv.key == key) return &kv.value;
    return nullptr;
}

void GgufWriter::copy_metadata(const GgufFile& file) {
    for (const GgufKv& kv : file.metadata()) set(kv.key, GgufMetaValue::from(kv.value));
}

uint32_t GgufWriter::alignment() const {
    const GgufMetaValue* a = find("general.alignment");
    if (!a) return kDefaultAlignment;
    uint32_t v;
    std::memcpy(&v, a->bytes.data(), 4);
    return v;
}

void GgufWriter::add_tensor(std::string_view name, DType type, std::span<const int64_t> ne,
                            std::span<const uint8_t> data) {
    add_tensor_impl(name, type, ne, data, true);
}

void GgufWriter::add_tensor_view(std::string_view name, DType type, std::span<const int64_t> ne,
                                 std::span<const uint8_t> data) {
    add_tensor_impl(name, type, ne, data, false);
}

void GgufWriter::add_tensor_impl(std::string_view name, DType type, std::span<const int64_t> ne,
                                 std::span<const uint8_t> data, bool copy) {
    const std::string label = "GGUF writer: tensor '" + std::string(name) + "'";
    if (name.empty() || name.size() > kMaxTensorName)
        throw Error(label + ": name must be 1 to 63 bytes");
    for (const Tensor& t : tensors_)
        if (t.name == name) throw Error(label + " added twice");
    const auto tt = type_traits(uint32_t(type));
    if (!tt) throw Error(label + ": unknown type " + std::to_string(uint32_t(type)));
    if (ne.empty() || ne.size() > size_t(kGgufMaxDims))
        throw Error(label + ": " + std::to_string(ne.size()) + " dimensions (1 to 4 allowed)");
    Tensor t{std::string(name), type, int(ne.size()), {1, 1, 1, 1}, {}, {}};
    int64_t n = 1;
    for (size_t d = 0; d < ne.size(); ++d) {
        if (ne[d] < 0) throw Error(label + ": negative dimension");
        t.ne[d] = ne[d];
        if (__builtin_mul_overflow(n, ne[d], &n)) throw Error(label + ": too many elements");
    }
    if (t.ne[0] % tt->block_size != 0)
        throw Error(label + ": row of " + std::to_string(t.ne[0]) +
                    " values is not a multiple of the block size " +
                    std::to_string(tt->block_size) + " of " + tt->name);
    int64_t n_bytes = 0;
    if (__builtin_mul_overflow(n / tt->block_size, int64_t(tt->type_size), &n_bytes))
        throw Error(label + ": too many elements");
    if (uint64_t(n_bytes) != data.size())
        throw Error(label + ": " + std::to_string(data.size()) + " bytes of data, expected " +
                    std::to_string(n_bytes));
    if (copy) {
        t.owned.assign(data.begin(), data.end());
        t.data = t.owned;
    } else {
        t.data = data;
    }
    tensors_.push_back(std::move(t));
}

// Where the bytes go: a vector or a file. Counts what was written, for padding.
class GgufWriter::Sink {
  public:
    virtual ~Sink() = default;
    virtual void put(const void* p, size_t n) = 0;
    uint64_t pos() const { return pos_; }

    void bytes(const void* p, size_t n) {
        if (n) put(p, n);
        pos_ += n;
    }
    template <typename T>
    void value(T v) {
        bytes(&v, sizeof(T));
    }
    void string(std::string_view s) {
        value<uint64_t>(s.size());
        bytes(s.data(), s.size());
    }
    void pad_to(uint64_t alignment) {
        static const uint8_t zeros[256] = {};
        uint64_t n = align_up(pos_, alignment) - pos_;
        while (n > 0) {
            const size_t k = size_t(std::min<uint64_t>(n, sizeof(zeros)));
            bytes(zeros, k);
            n -= k;
        }
    }

  private:
    uint64_t pos_ = 0;
};

namespace {

void write_value(auto& out, const GgufMetaValue& v) {
    if (v.type == GgufType::STRING) {
        out.string({reinterpret_cast<const char*>(v.bytes.data()), v.bytes.size()});
    } else if (v.type != GgufType::ARRAY) {
        out.bytes(v.bytes.data(), v.bytes.size());
    } else {
        out.template value<uint32_t>(uint32_t(v.elem_type));
        out.template value<uint64_t>(v.count);
        if (v.elem_type == GgufType::STRING) {
            for (const std::string& s : v.strings) out.string(s);
        } else if (v.elem_type == GgufType::ARRAY) {
            for (const GgufMetaValue& item : v.items) write_value(out, item);
        } else {
            out.bytes(v.bytes.data(), v.bytes.size());
        }
    }
}

}  // namespace

void GgufWriter::write(Sink& out) const {
    const uint32_t align = alignment();
    out.bytes("GGUF", 4);
    out.value<uint32_t>(version_);
    out.value<uint64_t>(tensors_.size());
    out.value<uint64_t>(kvs_.size());
    for (const Kv& kv : kvs_) {
        out.string(kv.key);
        out.value<uint32_t>(uint32_t(kv.value.type));
        write_value(out, kv.value);
    }
    uint64_t offset = 0;  // relative to the data section
    for (const Tensor& t : tensors_) {
        out.string(t.name);
        out.value<uint32_t>(uint32_t(t.n_dims));
        for (int d = 0; d < t.n_dims; ++d) out.value<int64_t>(t.ne[d]);
        out.value<uint32_t>(uint32_t(t.type));
        out.value<uint64_t>(offset);
        offset += align_up(t.data.size(), align);
    }
    out.pad_to(align);
    for (const Tensor& t : tensors_) {
        out.bytes(t.data.data(), t.data.size());
        out.pad_to(align);
    }
}

std::vector<uint8_t> GgufWriter::write_bytes() const {
    class VectorSink : public Sink {
      public:
        std::vector<uint8_t> v;
        void put(const void* p, size_t n) override {
            const auto* b = static_cast<const uint8_t*>(p);
            v.insert(v.end(), b, b + n);
        }
    } sink;
    write(sink);
    return std::move(sink.v);
}

void GgufWriter::write_file(const std::string& path) const {
    class FileSink : public Sink {
      public:
        FILE* f = nullptr;
        int error = 0;  // errno of the first failed write
        void put(const void* p, size_t n) override {
            if (error == 0 && std::fwrite(p, 1, n, f) != n) error = errno ? errno : EIO;
        }
    } sink;
    sink.f = std::fopen(path.c_str(), "wb");
    if (!sink.f) throw Error(path + ": cannot create file: " + std::strerror(errno));
    write(sink);
    if (std::fclose(sink.f) != 0 && sink.error == 0) sink.error = errno ? errno : EIO;
    if (sink.error != 0) {
        std::error_code ec;  // remove a partial file, never a device such as /dev/full
        if (std::filesystem::is_regular_file(path, ec)) std::filesystem::remove(path, ec);
        throw Error(path + ": write failed: " + std::strerror(sink.error));
    }
}

}  // namespace troupe
