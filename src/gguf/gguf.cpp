#include "gguf/gguf.h"

#include <cstring>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "util/error.h"

namespace troupe {

namespace {

constexpr int kMaxArrayDepth = 8;            // nested arrays deeper than this are rejected
constexpr uint64_t kMaxKeyLength = 1 << 16;  // llama.cpp keys are short; guards garbage

// Bounds-checked little-endian reader over the mapped bytes. Every read names what it was
// reading so that a truncated file says where it ended.
class Cursor {
  public:
    Cursor(std::span<const uint8_t> bytes, const std::string& name) : b_(bytes), name_(name) {}

    size_t pos() const { return pos_; }
    size_t remaining() const { return b_.size() - pos_; }

    [[noreturn]] void fail(const std::string& what) const {
        throw Error(name_ + ": " + what + " (at byte " + std::to_string(pos_) + " of " +
                    std::to_string(b_.size()) + ")");
    }

    const uint8_t* take(uint64_t n, const char* what) {
        if (n > remaining()) fail(std::string("file truncated while reading ") + what);
        const uint8_t* p = b_.data() + pos_;
        pos_ += size_t(n);
        return p;
    }

    template <typename T>
    T read(const char* what) {
        T v;
        std::memcpy(&v, take(sizeof(T), what), sizeof(T));
        return v;
    }

    std::string_view read_string(const char* what) {
        const uint64_t len = read<uint64_t>(what);
        if (len > remaining())
            fail(std::string(what) + " has length " + std::to_string(len) +
                 " past the end of the file");
        return {reinterpret_cast<const char*>(take(len, what)), size_t(len)};
    }

  private:
    std::span<const uint8_t> b_;
    const std::string& name_;
    size_t pos_ = 0;
};

bool valid_type(uint32_t t) {
    return t <= uint32_t(GgufType::FLOAT64);
}

void read_value(Cursor& c, GgufType type, GgufValue& v, int depth, std::string_view key);

void read_array(Cursor& c, GgufValue& v, int depth, std::string_view key) {
    if (depth >= kMaxArrayDepth)
        c.fail("metadata '" + std::string(key) + "': arrays nested deeper than " +
               std::to_string(kMaxArrayDepth));
    const uint32_t et = c.read<uint32_t>("array element type");
    if (!valid_type(et))
        c.fail("metadata '" + std::string(key) + "': unknown array element type " +
               std::to_string(et));
    v.elem_type = GgufType(et);
    v.count = c.read<uint64_t>("array length");
    const size_t elem = gguf_scalar_size(v.elem_type);
    if (elem > 0) {
        if (v.count > c.remaining() / elem)
            c.fail("metadata '" + std::string(key) + "': array of " + std::to_string(v.count) +
                   " elements runs past the end of the file");
        v.raw = c.take(v.count * elem, "array data");
        return;
    }
    // A string needs at least 8 bytes (its length), a nested array 12 (type and count): reject
    // absurd counts before reserving memory for them.
    if (v.count > c.remaining() / (v.elem_type == GgufType::STRING ? 8 : 12))
        c.fail("metadata '" + std::string(key) + "': array of " + std::to_string(v.count) +
               " elements runs past the end of the file");
    if (v.elem_type == GgufType::STRING) {
        v.strings.reserve(size_t(v.count));
        for (uint64_t i = 0; i < v.count; ++i) v.strings.push_back(c.read_string("array string"));
    } else {
        v.items.resize(size_t(v.count));
        for (uint64_t i = 0; i < v.count; ++i) {
            v.items[i].type = GgufType::ARRAY;
            read_array(c, v.items[i], depth + 1, key);
        }
    }
}

void read_value(Cursor& c, GgufType type, GgufValue& v, int depth, std::string_view key) {
    v.type = type;
    switch (type) {
        case GgufType::UINT8:
            v.u = c.read<uint8_t>("u8 value");
            break;
        case GgufType::INT8:
            v.i = c.read<int8_t>("i8 value");
            break;
        case GgufType::UINT16:
            v.u = c.read<uint16_t>("u16 value");
            break;
        case GgufType::INT16:
            v.i = c.read<int16_t>("i16 value");
            break;
        case GgufType::UINT32:
            v.u = c.read<uint32_t>("u32 value");
            break;
        case GgufType::INT32:
            v.i = c.read<int32_t>("i32 value");
            break;
        case GgufType::UINT64:
            v.u = c.read<uint64_t>("u64 value");
            break;
        case GgufType::INT64:
            v.i = c.read<int64_t>("i64 value");
            break;
        case GgufType::FLOAT32:
            v.f = c.read<float>("f32 value");
            break;
        case GgufType::FLOAT64:
            v.f = c.read<double>("f64 value");
            break;
        case GgufType::BOOL: {
            const uint8_t b = c.read<uint8_t>("bool value");
            if (b > 1)
                c.fail("metadata '" + std::string(key) + "': bool value " + std::to_string(b));
            v.u = b;
            break;
        }
        case GgufType::STRING:
            v.str = c.read_string("string value");
            break;
        case GgufType::ARRAY:
            read_array(c, v, depth, key);
            break;
    }
}

template <typename T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

bool mul_overflows(int64_t a, int64_t b, int64_t* out) {
    return __builtin_mul_overflow(a, b, out);
}

}  // namespace

const char* gguf_type_name(GgufType t) {
    switch (t) {
        case GgufType::UINT8:
            return "u8";
        case GgufType::INT8:
            return "i8";
        case GgufType::UINT16:
            return "u16";
        case GgufType::INT16:
            return "i16";
        case GgufType::UINT32:
            return "u32";
        case GgufType::INT32:
            return "i32";
        case GgufType::FLOAT32:
            return "f32";
        case GgufType::BOOL:
            return "bool";
        case GgufType::STRING:
            return "string";
        case GgufType::ARRAY:
            return "array";
        case GgufType::UINT64:
            return "u64";
        case GgufType::INT64:
            return "i64";
        case GgufType::FLOAT64:
            return "f64";
    }
    return "?";
}

size_t gguf_scalar_size(GgufType t) {
    switch (t) {
        case GgufType::UINT8:
        case GgufType::INT8:
        case GgufType::BOOL:
            return 1;
        case GgufType::UINT16:
        case GgufType::INT16:
            return 2;
        case GgufType::UINT32:
        case GgufType::INT32:
        case GgufType::FLOAT32:
            return 4;
        case GgufType::UINT64:
        case GgufType::INT64:
        case GgufType::FLOAT64:
            return 8;
        case GgufType::STRING:
        case GgufType::ARRAY:
            return 0;
    }
    return 0;
}

bool GgufValue::is_integer() const {
    switch (type) {
        case GgufType::UINT8:
        case GgufType::INT8:
        case GgufType::UINT16:
        case GgufType::INT16:
        case GgufType::UINT32:
        case GgufType::INT32:
        case GgufType::UINT64:
        case GgufType::INT64:
            return true;
        default:
            return false;
    }
}

int64_t GgufValue::as_int() const {
    switch (type) {
        case GgufType::INT8:
        case GgufType::INT16:
        case GgufType::INT32:
        case GgufType::INT64:
            return i;
        case GgufType::FLOAT32:
        case GgufType::FLOAT64:
            return int64_t(f);
        default:
            return u > uint64_t(std::numeric_limits<int64_t>::max())
                       ? std::numeric_limits<int64_t>::max()
                       : int64_t(u);
    }
}

double GgufValue::as_double() const {
    if (is_float()) return f;
    return double(as_int());
}

int64_t GgufValue::int_at(uint64_t idx) const {
    TROUPE_CHECK(type == GgufType::ARRAY && idx < count && raw != nullptr);
    const size_t es = gguf_scalar_size(elem_type);
    const uint8_t* p = raw + idx * es;
    switch (elem_type) {
        case GgufType::UINT8:
        case GgufType::BOOL:
            return load<uint8_t>(p);
        case GgufType::INT8:
            return load<int8_t>(p);
        case GgufType::UINT16:
            return load<uint16_t>(p);
        case GgufType::INT16:
            return load<int16_t>(p);
        case GgufType::UINT32:
            return load<uint32_t>(p);
        case GgufType::INT32:
            return load<int32_t>(p);
        case GgufType::UINT64:
            return int64_t(load<uint64_t>(p));
        case GgufType::INT64:
            return load<int64_t>(p);
        case GgufType::FLOAT32:
            return int64_t(load<float>(p));
        case GgufType::FLOAT64:
            return int64_t(load<double>(p));
        default:
            break;
    }
    check_failed("numeric array", __FILE__, __LINE__);
}

double GgufValue::float_at(uint64_t idx) const {
    TROUPE_CHECK(type == GgufType::ARRAY && idx < count && raw != nullptr);
    if (elem_type == GgufType::FLOAT32) return load<float>(raw + idx * 4);
    if (elem_type == GgufType::FLOAT64) return load<double>(raw + idx * 8);
    return double(int_at(idx));
}

std::string GgufValue::to_string(size_t max_items) const {
    std::ostringstream os;
    switch (type) {
        case GgufType::STRING: {
            std::string s(str.substr(0, 120));
            for (char& ch : s)
                if (ch == '\n') ch = ' ';
            os << '"' << s << (str.size() > 120 ? "...\"" : "\"");
            break;
        }
        case GgufType::BOOL:
            os << (u ? "true" : "false");
            break;
        case GgufType::FLOAT32:
        case GgufType::FLOAT64:
            os << f;
            break;
        case GgufType::ARRAY: {
            os << gguf_type_name(elem_type) << "[" << count << "] [";
            const uint64_t n = std::min<uint64_t>(count, max_items);
            for (uint64_t k = 0; k < n; ++k) {
                if (k) os << ", ";
                if (elem_type == GgufType::STRING)
                    os << '"' << strings[k].substr(0, 32) << '"';
                else if (elem_type == GgufType::ARRAY)
                    os << items[k].to_string(max_items);
                else if (elem_type == GgufType::FLOAT32 || elem_type == GgufType::FLOAT64)
                    os << float_at(k);
                else
                    os << int_at(k);
            }
            if (count > n) os << ", ...";
            os << "]";
            break;
        }
        default:
            os << as_int();
            break;
    }
    return os.str();
}

std::string GgufTensor::shape_string() const {
    std::string s = "[";
    for (int d = 0; d < n_dims; ++d) {
        if (d) s += ", ";
        s += std::to_string(ne[d]);
    }
    return s + "]";
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
    std::unique_ptr<GgufFile> g(new GgufFile());
    g->file_ = std::make_unique<MappedFile>(path);
    g->bytes_ = {g->file_->data(), g->file_->size()};
    g->name_ = path;
    g->parse_all();
    return g;
}

std::unique_ptr<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes, std::string name) {
    std::unique_ptr<GgufFile> g(new GgufFile());
    g->bytes_ = bytes;
    g->name_ = std::move(name);
    g->parse_all();
    return g;
}

void GgufFile::parse_all() {
    Cursor c(bytes_, name_);
    if (bytes_.size() < 4 || std::memcmp(bytes_.data(), "GGUF", 4) != 0) {
        if (bytes_.size() >= 4 && std::memcmp(bytes_.data(), "FUGG", 4) == 0)
            c.fail("big-endian GGUF files are not supported");
        c.fail("not a GGUF file (bad magic)");
    }
    c.take(4, "magic");
    version_ = c.read<uint32_t>("version");
    if (version_ == 1) c.fail("GGUF version 1 is not supported (use a file of version 2 or 3)");
    if (version_ != 2 && version_ != 3) {
        if ((version_ & 0xffff) == 0 && version_ != 0)
            c.fail("GGUF version looks byte-swapped (big-endian file?): " +
                   std::to_string(version_));
        c.fail("unsupported GGUF version " + std::to_string(version_));
    }
    const uint64_t n_tensors = c.read<uint64_t>("tensor count");
    const uint64_t n_kv = c.read<uint64_t>("metadata count");
    // Each kv needs >= 8 (key len) + 4 (type) + 1 bytes; each tensor info >= 8 + 4 + 4 + 8.
    if (n_kv > c.remaining() / 13)
        c.fail("metadata count " + std::to_string(n_kv) + " is larger than the file can hold");
    if (n_tensors > c.remaining() / 24)
        c.fail("tensor count " + std::to_string(n_tensors) + " is larger than the file can hold");

    std::unordered_set<std::string_view> seen_keys;
    kvs_.reserve(size_t(n_kv));
    for (uint64_t k = 0; k < n_kv; ++k) {
        GgufKv kv;
        const uint64_t klen = c.read<uint64_t>("metadata key length");
        if (klen == 0 || klen > kMaxKeyLength)  // a key cut by the end of file is truncation
            c.fail("metadata key #" + std::to_string(k) + " has invalid length " +
                   std::to_string(klen));
        kv.key = {reinterpret_cast<const char*>(c.take(klen, "metadata key")), size_t(klen)};
        if (!seen_keys.insert(kv.key).second)
            c.fail("duplicate metadata key '" + std::string(kv.key) + "'");
        const uint32_t t = c.read<uint32_t>("metadata value type");
        if (!valid_type(t))
            c.fail("metadata '" + std::string(kv.key) + "' has unknown value type " +
                   std::to_string(t));
        read_value(c, GgufType(t), kv.value, 0, kv.key);
        kvs_.push_back(std::move(kv));
    }

    if (const GgufValue* a = find("general.alignment")) {
        if (a->type != GgufType::UINT32)
            c.fail(std::string("general.alignment must be u32, found ") + gguf_type_name(a->type));
        if (a->u == 0 || (a->u & (a->u - 1)) != 0)
            c.fail("general.alignment " + std::to_string(a->u) + " is not a power of two");
        alignment_ = uint32_t(a->u);
    }

    // Checked again now that the metadata is read, before sizing the tensor table by it.
    if (n_tensors > c.remaining() / 24)
        c.fail("tensor count " + std::to_string(n_tensors) + " is larger than the file can hold");
    std::unordered_set<std::string_view> seen_tensors;
    tensors_.resize(size_t(n_tensors));
    for (uint64_t ti = 0; ti < n_tensors; ++ti) {
        GgufTensor& t = tensors_[ti];
        t.name = c.read_string("tensor name");
        const std::string tname(t.name);
        if (t.name.empty()) c.fail("tensor #" + std::to_string(ti) + " has an empty name");
        if (!seen_tensors.insert(t.name).second) c.fail("duplicate tensor '" + tname + "'");
        const uint32_t nd = c.read<uint32_t>("tensor dimension count");
        if (nd == 0 || nd > uint32_t(kGgufMaxDims))
            c.fail("tensor '" + tname + "' has " + std::to_string(nd) +
                   " dimensions (1 to 4 allowed)");
        t.n_dims = int(nd);
        for (uint32_t d = 0; d < nd; ++d) {
            const int64_t ne = c.read<int64_t>("tensor dimension");
            if (ne < 0) c.fail("tensor '" + tname + "' has a negative dimension");
            t.ne[d] = ne;
        }
        const uint32_t type = c.read<uint32_t>("tensor type");
        const auto tt = type_traits(type);
        if (!tt) c.fail("tensor '" + tname + "' has unknown type " + std::to_string(type));
        t.type = DType(type);
        int64_t n = 1;
        for (int d = 0; d < kGgufMaxDims; ++d)
            if (mul_overflows(n, t.ne[d], &n)) c.fail("tensor '" + tname + "' is too large");
        if (t.ne[0] % tt->block_size != 0)
            c.fail("tensor '" + tname + "' of type " + tt->name + ": row of " +
                   std::to_string(t.ne[0]) + " values is not a multiple of the block size " +
                   std::to_string(tt->block_size));
        int64_t nbytes = 0;
        if (mul_overflows(n / tt->block_size, int64_t(tt->type_size), &nbytes))
            c.fail("tensor '" + tname + "' is too large");
        t.n_bytes = size_t(nbytes);
        t.offset = c.read<uint64_t>("tensor offset");
        if (t.offset % alignment_ != 0)
            c.fail("tensor '" + tname + "' offset " + std::to_string(t.offset) +
                   " is not a multiple of the alignment " + std::to_string(alignment_));
    }

    // The data section starts at the next multiple of the alignment.
    const size_t header_end = c.pos();
    data_offset_ = (header_end + alignment_ - 1) / alignment_ * alignment_;
    if (n_tensors > 0 && data_offset_ > bytes_.size())
        c.fail("file truncated before the tensor data section");
    const size_t data_size = bytes_.size() - std::min(data_offset_, bytes_.size());
    for (GgufTensor& t : tensors_) {
        if (t.offset > data_size || t.n_bytes > data_size - t.offset)
            throw Error(name_ + ": tensor '" + std::string(t.name) + "' (" +
                        std::to_string(t.n_bytes) + " bytes at data offset " +
                        std::to_string(t.offset) + ") extends past the end of the file (" +
                        std::to_string(data_size) + " data bytes)");
        t.data = bytes_.data() + data_offset_ + t.offset;
    }
}

const GgufValue* GgufFile::find(std::string_view key) const {
    for (const GgufKv& kv : kvs_)
        if (kv.key == key) return &kv.value;
    return nullptr;
}

namespace {
[[noreturn]] void wrong_type(const std::string& file, std::string_view key, const GgufValue& v,
                             const char* expected) {
    throw Error(file + ": metadata '" + std::string(key) + "' has type " + gguf_type_name(v.type) +
                (v.type == GgufType::ARRAY ? std::string("<") + gguf_type_name(v.elem_type) + ">"
                                           : std::string()) +
                ", expected " + expected);
}
}  // namespace

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (v->type != GgufType::STRING) wrong_type(name_, key, *v, "string");
    return std::string(v->str);
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_integer()) wrong_type(name_, key, *v, "an integer");
    return v->as_int();
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_float() && !v->is_integer()) wrong_type(name_, key, *v, "a number");
    return v->as_double();
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (v->type != GgufType::BOOL) wrong_type(name_, key, *v, "bool");
    return v->u != 0;
}

std::optional<std::vector<std::string_view>> GgufFile::get_string_array(
    std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (v->type != GgufType::ARRAY || v->elem_type != GgufType::STRING)
        wrong_type(name_, key, *v, "array<string>");
    return v->strings;
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    GgufValue probe;
    probe.type = v->elem_type;
    if (v->type != GgufType::ARRAY || !(probe.is_integer() || v->elem_type == GgufType::BOOL))
        wrong_type(name_, key, *v, "array<integer>");
    std::vector<int64_t> out(size_t(v->count));
    for (uint64_t k = 0; k < v->count; ++k) out[k] = v->int_at(k);
    return out;
}

std::optional<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (v->type != GgufType::ARRAY || gguf_scalar_size(v->elem_type) == 0 ||
        v->elem_type == GgufType::BOOL)
        wrong_type(name_, key, *v, "array<number>");
    std::vector<float> out(size_t(v->count));
    for (uint64_t k = 0; k < v->count; ++k) out[k] = float(v->float_at(k));
    return out;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
    for (const GgufTensor& t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

void GgufFile::release_tensor_pages(const GgufTensor& t) const {
    if (file_) file_->release(t.data, t.n_bytes);
}

uint64_t GgufFile::touch_tensor_data() const {
    uint64_t sum = 0;
    for (size_t off = data_offset_; off < bytes_.size(); off += 4096) sum += bytes_[off];
    return sum;
}

}  // namespace troupe
