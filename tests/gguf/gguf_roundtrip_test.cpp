// GgufWriter -> GgufFile round trips: every metadata type, nested and string arrays, versions
// 2 and 3, custom alignments, tensor placement; and the writer's own validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include <unistd.h>

#include "gguf/gguf_writer.h"
#include "gguf_test_util.h"
#include "tensor/quant_ref.h"

namespace troupe {
namespace {

using test::parse;

template <typename T>
std::span<const T> span_of(const std::vector<T>& v) {
    return {v.data(), v.size()};
}

// A writer holding one key of every kind.
GgufWriter writer_with_every_type(uint32_t version) {
    GgufWriter w(version);
    w.set_u8("t.u8", 255);
    w.set_i8("t.i8", -128);
    w.set_u16("t.u16", 65535);
    w.set_i16("t.i16", -32768);
    w.set_u32("t.u32", 4000000000u);
    w.set_i32("t.i32", -2000000000);
    w.set_u64("t.u64", std::numeric_limits<uint64_t>::max());
    w.set_i64("t.i64", std::numeric_limits<int64_t>::min());
    w.set_f32("t.f32", -1.5f);
    w.set_f64("t.f64", 3.141592653589793);
    w.set_bool("t.true", true);
    w.set_bool("t.false", false);
    w.set_string("t.str", "h\xc3\xa9llo, world");
    w.set_string("t.empty", "");
    w.set_string("t.nul", std::string_view("a\0b", 3));
    const std::vector<uint8_t> u8s = {0, 1, 255};
    const std::vector<int8_t> i8s = {-128, 0, 127};
    const std::vector<uint16_t> u16s = {0, 65535};
    const std::vector<int16_t> i16s = {-32768, 32767};
    const std::vector<uint32_t> u32s = {1, 2, 3, 4000000000u};
    const std::vector<int32_t> i32s = {-1, 0, 1};
    const std::vector<uint64_t> u64s = {std::numeric_limits<uint64_t>::max()};
    const std::vector<int64_t> i64s = {std::numeric_limits<int64_t>::min(), 5};
    const std::vector<float> f32s = {0.5f, -0.0f, 1e30f};
    const std::vector<double> f64s = {1e-300, -2.0};
    const std::vector<uint8_t> bools = {1, 0, 1};
    w.set("a.u8", GgufMetaValue::array(GgufType::UINT8, span_of(u8s)));
    w.set("a.i8", GgufMetaValue::array(GgufType::INT8, span_of(i8s)));
    w.set("a.u16", GgufMetaValue::array(GgufType::UINT16, span_of(u16s)));
    w.set("a.i16", GgufMetaValue::array(GgufType::INT16, span_of(i16s)));
    w.set("a.u32", GgufMetaValue::array(GgufType::UINT32, span_of(u32s)));
    w.set("a.i32", GgufMetaValue::array(GgufType::INT32, span_of(i32s)));
    w.set("a.u64", GgufMetaValue::array(GgufType::UINT64, span_of(u64s)));
    w.set("a.i64", GgufMetaValue::array(GgufType::INT64, span_of(i64s)));
    w.set("a.f32", GgufMetaValue::array(GgufType::FLOAT32, span_of(f32s)));
    w.set("a.f64", GgufMetaValue::array(GgufType::FLOAT64, span_of(f64s)));
    w.set("a.bool", GgufMetaValue::array(GgufType::BOOL, span_of(bools)));
    w.set("a.empty", GgufMetaValue::array(GgufType::INT32, std::span<const int32_t>()));
    w.set_string_array("a.str", {"", "one", "two words", std::string(300, 'x')});
    w.set("a.nested",
          GgufMetaValue::array_of_arrays({GgufMetaValue::array(GgufType::INT32, span_of(i32s)),
                                          GgufMetaValue::string_array({"p", "q"}),
                                          GgufMetaValue::array_of_arrays({GgufMetaValue::array(
                                              GgufType::FLOAT32, span_of(f32s))}),
                                          GgufMetaValue::array_of_arrays({})}));
    return w;
}

void expect_every_type(const GgufFile& g) {
    EXPECT_EQ(g.find("t.u8")->type, GgufType::UINT8);
    EXPECT_EQ(g.get_int("t.u8"), 255);
    EXPECT_EQ(g.find("t.i8")->type, GgufType::INT8);
    EXPECT_EQ(g.get_int("t.i8"), -128);
    EXPECT_EQ(g.get_int("t.u16"), 65535);
    EXPECT_EQ(g.get_int("t.i16"), -32768);
    EXPECT_EQ(g.get_int("t.u32"), 4000000000ll);
    EXPECT_EQ(g.get_int("t.i32"), -2000000000);
    EXPECT_EQ(g.find("t.u64")->u, std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(g.get_int("t.i64"), std::numeric_limits<int64_t>::min());
    EXPECT_EQ(g.find("t.f32")->type, GgufType::FLOAT32);
    EXPECT_EQ(g.get_float("t.f32"), -1.5);
    EXPECT_EQ(g.get_float("t.f64"), 3.141592653589793);
    EXPECT_EQ(g.get_bool("t.true"), true);
    EXPECT_EQ(g.get_bool("t.false"), false);
    EXPECT_EQ(g.get_string("t.str"), "h\xc3\xa9llo, world");
    EXPECT_EQ(g.get_string("t.empty"), "");
    EXPECT_EQ(g.get_string("t.nul"), std::string("a\0b", 3));
    EXPECT_EQ(g.get_int_array("a.u8"), (std::vector<int64_t>{0, 1, 255}));
    EXPECT_EQ(g.get_int_array("a.i8"), (std::vector<int64_t>{-128, 0, 127}));
    EXPECT_EQ(g.get_int_array("a.u16"), (std::vector<int64_t>{0, 65535}));
    EXPECT_EQ(g.get_int_array("a.i16"), (std::vector<int64_t>{-32768, 32767}));
    EXPECT_EQ(g.get_int_array("a.u32"), (std::vector<int64_t>{1, 2, 3, 4000000000ll}));
    EXPECT_EQ(g.get_int_array("a.i32"), (std::vector<int64_t>{-1, 0, 1}));
    EXPECT_EQ(g.find("a.u64")->elem_type, GgufType::UINT64);
    EXPECT_EQ(g.get_int_array("a.i64"),
              (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 5}));
    const auto f32s = g.get_float_array("a.f32").value();
    EXPECT_EQ(f32s[0], 0.5f);
    EXPECT_TRUE(std::signbit(f32s[1]));
    EXPECT_EQ(f32s[2], 1e30f);
    EXPECT_EQ(g.find("a.f64")->float_at(0), 1e-300);
    EXPECT_EQ(g.find("a.bool")->elem_type, GgufType::BOOL);
    EXPECT_EQ(g.get_int_array("a.bool"), (std::vector<int64_t>{1, 0, 1}));
    EXPECT_EQ(g.find("a.empty")->count, 0u);
    const auto strs = g.get_string_array("a.str").value();
    ASSERT_EQ(strs.size(), 4u);
    EXPECT_EQ(strs[0], "");
    EXPECT_EQ(strs[2], "two words");
    EXPECT_EQ(strs[3], std::string(300, 'x'));
    const GgufValue& nested = *g.find("a.nested");
    ASSERT_EQ(nested.elem_type, GgufType::ARRAY);
    ASSERT_EQ(nested.items.size(), 4u);
    EXPECT_EQ(nested.items[0].elem_type, GgufType::INT32);
    EXPECT_EQ(nested.items[0].int_at(0), -1);
    EXPECT_EQ(nested.items[1].strings.at(1), "q");
    EXPECT_EQ(nested.items[2].items.at(0).float_at(2), double(1e30f));
    EXPECT_EQ(nested.items[3].count, 0u);
}

TEST(GgufRoundTrip, EveryMetadataTypeInVersions2And3) {
    for (uint32_t version : {2u, 3u}) {
        const std::vector<uint8_t> bytes = writer_with_every_type(version).write_bytes();
        const auto g = parse(bytes);
        EXPECT_EQ(g->version(), version);
        EXPECT_EQ(g->metadata().size(), 29u);
        EXPECT_EQ(g->metadata()[0].key, "t.u8");  // insertion order is kept
        expect_every_type(*g);
        EXPECT_EQ(g->tensors().size(), 0u);
    }
}

// Re-serialising what was read gives the same bytes: nothing is lost or reordered.
TEST(GgufRoundTrip, CopyOfAParsedFileIsByteIdentical) {
    GgufWriter w = writer_with_every_type(3);
    const std::vector<float> t(64, 0.25f);
    const int64_t ne[] = {64};
    w.add_tensor("x", DType::F32, ne, {reinterpret_cast<const uint8_t*>(t.data()), 256});
    const std::vector<uint8_t> first = w.write_bytes();
    const auto g = parse(first);
    GgufWriter copy(g->version());
    copy.copy_metadata(*g);
    for (const GgufTensor& ti : g->tensors())
        copy.add_tensor_view(ti.name, ti.type, std::span<const int64_t>(ti.ne, size_t(ti.n_dims)),
                             {ti.data, ti.n_bytes});
    EXPECT_EQ(copy.write_bytes(), first);
}

// Builds tensors of several types and shapes with recognisable bytes.
struct TensorSpec {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed + i * 7);
    return v;
}

size_t spec_bytes(const TensorSpec& s) {
    int64_t rows = 1;
    for (size_t d = 1; d < s.ne.size(); ++d) rows *= s.ne[d];
    return row_bytes(s.type, s.ne[0]) * size_t(rows);
}

TEST(GgufRoundTrip, TensorPlacementForEveryAlignment) {
    const std::vector<TensorSpec> specs = {
        {"f32.1d", DType::F32, {5}},          {"f16.2d", DType::F16, {6, 3}},
        {"q8_0.3d", DType::Q8_0, {64, 2, 2}}, {"q4_k.4d", DType::Q4_K, {256, 1, 2, 1}},
        {"empty", DType::F32, {0, 4}},        {"q6_k", DType::Q6_K, {512}}};
    for (uint32_t align : {1u, 8u, 32u, 64u, 4096u}) {
        GgufWriter w;
        if (align != 32) w.set_u32("general.alignment", align);
        w.set_string("general.name", "placement");
        for (size_t k = 0; k < specs.size(); ++k)
            w.add_tensor(specs[k].name, specs[k].type, specs[k].ne,
                         pattern(spec_bytes(specs[k]), uint8_t(k + 1)));
        const std::vector<uint8_t> bytes = w.write_bytes();
        const auto g = parse(bytes);
        EXPECT_EQ(g->alignment(), align);
        EXPECT_EQ(g->data_offset() % align, 0u);
        size_t expected_offset = 0;
        ASSERT_EQ(g->tensors().size(), specs.size());
        for (size_t k = 0; k < specs.size(); ++k) {
            const GgufTensor& t = g->tensors()[k];
            EXPECT_EQ(t.name, specs[k].name);
            EXPECT_EQ(t.type, specs[k].type);
            EXPECT_EQ(t.n_dims, int(specs[k].ne.size()));
            for (size_t d = 0; d < specs[k].ne.size(); ++d) EXPECT_EQ(t.ne[d], specs[k].ne[d]);
            EXPECT_EQ(t.offset, expected_offset) << "tensors are packed in order";
            EXPECT_EQ(t.offset % align, 0u);
            const auto want = pattern(spec_bytes(specs[k]), uint8_t(k + 1));
            ASSERT_EQ(t.n_bytes, want.size());
            EXPECT_TRUE(std::equal(want.begin(), want.end(), t.data)) << t.name;
            for (size_t p = t.n_bytes; p % align; ++p)  // padding after the tensor is zero
                ASSERT_EQ(bytes[g->data_offset() + t.offset + p], 0)
                    << t.name << " align " << align;
            expected_offset += (t.n_bytes + align - 1) / align * align;
        }
        EXPECT_EQ(bytes.size(), g->data_offset() + expected_offset);
    }
}

TEST(GgufRoundTrip, QuantizedTensorReadsBackItsValues) {
    std::vector<float> x(2 * 256);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i));
    std::vector<uint8_t> q(row_bytes(DType::Q4_K, 256) * 2);
    for (int r = 0; r < 2; ++r)
        quantize_row(DType::Q4_K, x.data() + 256 * r, q.data() + r * row_bytes(DType::Q4_K, 256),
                     256);
    GgufWriter w;
    const int64_t ne[] = {256, 2};
    w.add_tensor("w", DType::Q4_K, ne, q);
    const auto bytes = w.write_bytes();
    const auto g = parse(bytes);
    const GgufTensor* t = g->find_tensor("w");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->n_rows(), 2);
    EXPECT_EQ(t->n_elements(), 512);
    EXPECT_EQ(0, std::memcmp(t->data, q.data(), q.size()));
}

TEST(GgufRoundTrip, WriteFileAndOpen) {
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("troupe_gguf_" + std::to_string(getpid()) + ".gguf"))
                                 .string();
    GgufWriter w = writer_with_every_type(3);
    const std::vector<uint16_t> h = {0x3c00, 0x4000, 0xc000, 0};
    const int64_t ne[] = {4};
    w.add_tensor("h", DType::F16, ne, {reinterpret_cast<const uint8_t*>(h.data()), 8});
    w.write_file(path);
    const auto g = GgufFile::open(path);
    expect_every_type(*g);
    EXPECT_EQ(g->file_size(), w.write_bytes().size());
    EXPECT_EQ(g->find_tensor("h")->data[1], 0x3c);
    std::filesystem::remove(path);
    if (std::filesystem::exists("/dev/full")) {  // every write fails with ENOSPC
        try {
            w.write_file("/dev/full");
            ADD_FAILURE() << "no error writing to /dev/full";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("/dev/full: write failed"), std::string::npos)
                << e.what();
        }
        EXPECT_TRUE(std::filesystem::exists("/dev/full"));
    }
    try {
        w.write_file("/nonexistent-dir/x.gguf");
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.gguf"), std::string::npos);
    }
}

TEST(GgufWriter, SetReplacesInPlaceAndRemove) {
    GgufWriter w;
    w.set_u32("a", 1);
    w.set_u32("b", 2);
    w.set_string("a", "now a string");
    EXPECT_TRUE(w.remove("b"));
    EXPECT_FALSE(w.remove("b"));
    w.set_u32("c", 3);
    const auto bytes = w.write_bytes();
    const auto g = parse(bytes);
    ASSERT_EQ(g->metadata().size(), 2u);
    EXPECT_EQ(g->metadata()[0].key, "a");
    EXPECT_EQ(g->get_string("a"), "now a string");
    EXPECT_EQ(g->metadata()[1].key, "c");
}

TEST(GgufWriter, NestingUpToTheReadersLimit) {
    GgufMetaValue v = GgufMetaValue::array(GgufType::INT32, std::span<const int32_t>());
    for (int depth = 2; depth <= 8; ++depth) v = GgufMetaValue::array_of_arrays({v});
    GgufWriter w;
    w.set("deep", v);  // 8 levels
    const auto bytes = w.write_bytes();
    EXPECT_NO_THROW(parse(bytes));
    EXPECT_THROW(w.set("deeper", GgufMetaValue::array_of_arrays({v})), Error);
}

template <typename F>
void expect_writer_error(F f, const std::string& needle) {
    try {
        f();
        ADD_FAILURE() << "no troupe::Error; expected: " << needle;
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

TEST(GgufWriter, RejectsWhatTheReaderWouldRefuse) {
    GgufWriter w;
    const std::vector<uint8_t> four(4), eighteen(18);
    const int64_t one[] = {1}, q33[] = {33}, q32[] = {32}, neg[] = {-1, 1},
                  five[] = {1, 1, 1, 1, 1};
    const int64_t huge[] = {int64_t(1) << 40, int64_t(1) << 40};
    expect_writer_error([] { GgufWriter bad(1); }, "version 1");
    expect_writer_error([&] { w.set_version(4); }, "version 4");
    expect_writer_error([&] { w.set_u32("", 1); }, "key of length 0");
    expect_writer_error([&] { w.set_u64("general.alignment", 32); }, "general.alignment");
    expect_writer_error([&] { w.set_u32("general.alignment", 48); }, "power of two");
    expect_writer_error([&] { w.set_u32("general.alignment", 0); }, "power of two");
    expect_writer_error([&] { GgufMetaValue::array(GgufType::STRING, four, 1); }, "string");
    GgufMetaValue bad_count = GgufMetaValue::array(GgufType::UINT32, four, 1);
    bad_count.count = 2;
    expect_writer_error([&] { w.set("k", bad_count); }, "does not hold 2 elements");
    expect_writer_error([&] { w.add_tensor("", DType::F32, one, four); }, "name");
    expect_writer_error([&] { w.add_tensor(std::string(64, 'n'), DType::F32, one, four); },
                        "1 to 63 bytes");
    expect_writer_error([&] { w.add_tensor("t", DType::F32, {}, four); }, "0 dimensions");
    expect_writer_error([&] { w.add_tensor("t", DType::F32, five, four); }, "5 dimensions");
    expect_writer_error([&] { w.add_tensor("t", DType::F32, neg, four); }, "negative");
    expect_writer_error([&] { w.add_tensor("t", DType(4), one, four); }, "unknown type 4");
    expect_writer_error([&] { w.add_tensor("t", DType::Q4_0, q33, eighteen); }, "block size");
    expect_writer_error([&] { w.add_tensor("t", DType::Q4_0, q32, four); }, "expected 18");
    expect_writer_error([&] { w.add_tensor("t", DType::F32, huge, four); }, "too many elements");
    w.add_tensor("t", DType::Q4_0, q32, eighteen);
    expect_writer_error([&] { w.add_tensor("t", DType::Q4_0, q32, eighteen); }, "added twice");
}

}  // namespace
}  // namespace troupe
