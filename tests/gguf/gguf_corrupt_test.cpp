// Corrupt GGUF inputs: each must give a troupe::Error whose message names the problem, never a
// crash or an out-of-bounds read (run under ASan/UBSan in the sanitizer build).
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <memory>

#include "gguf/gguf_writer.h"
#include "gguf_test_util.h"

namespace troupe {
namespace {

using test::expect_parse_error;
using test::RawGguf;

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();
constexpr uint32_t kF32 = uint32_t(DType::F32);
constexpr uint32_t kQ4_0 = uint32_t(DType::Q4_0);

// A small valid file with metadata of several kinds and two tensors.
std::vector<uint8_t> small_valid_file() {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_u32("n", 7);
    w.set_bool("flag", true);
    w.set_string_array("tokens", {"a", "bc", ""});
    const std::vector<int16_t> v = {1, -2};
    w.set("nested", GgufMetaValue::array_of_arrays(
                        {GgufMetaValue::array(GgufType::INT16, std::span<const int16_t>(v))}));
    w.set_f32("eps", 1e-5f);
    const std::vector<uint8_t> a(16, 1), b(68, 2);
    const int64_t ne_a[] = {4}, ne_b[] = {32, 2};
    w.add_tensor("a", DType::F32, ne_a, a);
    w.add_tensor("b", DType::Q8_0, ne_b, b);
    return w.write_bytes();
}

bool names_truncation(const std::string& msg) {
    for (const char* s : {"truncated", "past the end", "larger than the file can hold"})
        if (msg.find(s) != std::string::npos) return true;
    return false;
}

// Every prefix of a valid file that cuts into the header or the tensor data is an error naming
// the truncation; prefixes that only drop the zero padding after the last tensor still parse.
TEST(GgufCorrupt, TruncationAtEveryByteOffset) {
    const std::vector<uint8_t> full = small_valid_file();
    const auto g = test::parse(full);
    const GgufTensor& last = g->tensors().back();
    const size_t needed = g->data_offset() + last.offset + last.n_bytes;
    ASSERT_LT(needed, full.size());  // the file ends with padding: both branches are tested
    for (size_t len = 0; len < full.size(); ++len) {
        // An exact-size heap copy, so that any read past `len` is caught by ASan.
        std::unique_ptr<uint8_t[]> buf(new uint8_t[len + 1]);
        std::memcpy(buf.get(), full.data(), len);
        const std::span<const uint8_t> bytes(buf.get(), len);
        if (len >= needed) {
            EXPECT_NO_THROW(GgufFile::parse(bytes, "test.gguf")) << len;
            continue;
        }
        try {
            GgufFile::parse(bytes, "test.gguf");
            ADD_FAILURE() << "prefix of " << len << " bytes parsed";
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_TRUE(len < 4 ? msg.find("bad magic") != std::string::npos
                                : names_truncation(msg))
                << len << ": " << msg;
        }
    }
}

TEST(GgufCorrupt, BadMagic) {
    expect_parse_error({}, "bad magic");
    expect_parse_error({'G', 'G'}, "bad magic");
    std::vector<uint8_t> b = small_valid_file();
    b[3] = 'X';
    expect_parse_error(b, "not a GGUF file (bad magic)");
}

TEST(GgufCorrupt, Versions) {
    expect_parse_error(RawGguf().header(1, 0, 0).bytes, "version 1 is not supported");
    expect_parse_error(RawGguf().header(0, 0, 0).bytes, "unsupported GGUF version 0");
    expect_parse_error(RawGguf().header(4, 0, 0).bytes, "unsupported GGUF version 4");
    expect_parse_error(RawGguf().header(0x03000000, 0, 0).bytes, "byte-swapped");
}

TEST(GgufCorrupt, UnknownTypes) {
    expect_parse_error(RawGguf().header(3, 0, 1).key("k", GgufType(13)).u32(0).bytes,
                       "metadata 'k' has unknown value type 13");
    expect_parse_error(RawGguf().header(3, 0, 1).key("k", GgufType::ARRAY).u32(13).u64(0).bytes,
                       "unknown array element type 13");
    expect_parse_error(RawGguf().header(3, 1, 0).tensor("t", {32}, 99, 0).pad(32).zeros(128).bytes,
                       "tensor 't' has unknown type 99");
    // 4 and 5 were Q4_2 / Q4_3, removed from ggml: a file using them cannot be read.
    expect_parse_error(RawGguf().header(3, 1, 0).tensor("t", {32}, 4, 0).pad(32).zeros(128).bytes,
                       "unknown type 4");
}

TEST(GgufCorrupt, TensorDataPastTheEnd) {
    expect_parse_error(RawGguf().header(3, 1, 0).tensor("t", {32}, kF32, 0).pad(32).zeros(64).bytes,
                       "tensor 't' (128 bytes at data offset 0) extends past the end");
    expect_parse_error(RawGguf()
                           .header(3, 1, 0)
                           .tensor("t", {32}, kF32, uint64_t(1) << 63)
                           .pad(32)
                           .zeros(128)
                           .bytes,
                       "extends past the end");
    expect_parse_error(RawGguf().header(3, 1, 0).tensor("t", {32}, kF32, 0).bytes,
                       "truncated before the tensor data");
}

TEST(GgufCorrupt, Alignment) {
    expect_parse_error(RawGguf().header(3, 1, 0).tensor("t", {4}, kF32, 4).pad(32).zeros(64).bytes,
                       "offset 4 is not a multiple of the alignment 32");
    expect_parse_error(RawGguf().header(3, 0, 1).kv_u32("general.alignment", 48).bytes,
                       "general.alignment 48 is not a power of two");
    expect_parse_error(RawGguf().header(3, 0, 1).kv_u32("general.alignment", 0).bytes,
                       "not a power of two");
    expect_parse_error(
        RawGguf().header(3, 0, 1).key("general.alignment", GgufType::UINT64).u64(32).bytes,
        "general.alignment must be u32, found u64");
    expect_parse_error(
        RawGguf().header(3, 0, 1).key("general.alignment", GgufType::STRING).str("32").bytes,
        "general.alignment must be u32, found string");
    // A valid custom alignment: data at 64, tensor offset 64.
    const auto ok = RawGguf()
                        .header(3, 2, 1)
                        .kv_u32("general.alignment", 64)
                        .tensor("a", {4}, kF32, 0)
                        .tensor("b", {4}, kF32, 64)
                        .pad(64)
                        .zeros(80)
                        .bytes;
    EXPECT_EQ(test::parse(ok)->tensors()[1].offset, 64u);
}

TEST(GgufCorrupt, AbsurdCounts) {
    expect_parse_error(RawGguf().header(3, 0, kMax64).bytes,
                       "metadata count 18446744073709551615 is larger than the file can hold");
    expect_parse_error(RawGguf().header(3, uint64_t(1) << 62, 0).bytes,
                       "tensor count 4611686018427387904 is larger than the file can hold");
    expect_parse_error(RawGguf().header(3, 0, 1).key("k", GgufType::ARRAY).u32(4).u64(kMax64).bytes,
                       "metadata 'k': array of 18446744073709551615 elements runs past the end");
    // count * 8 overflows 64 bits: must still be rejected, not wrapped
    expect_parse_error(
        RawGguf().header(3, 0, 1).key("k", GgufType::ARRAY).u32(10).u64(uint64_t(1) << 61).bytes,
        "runs past the end");
    expect_parse_error(
        RawGguf().header(3, 0, 1).key("k", GgufType::ARRAY).u32(8).u64(kMax64 - 1).bytes,
        "runs past the end");
    expect_parse_error(RawGguf().header(3, 0, 1).key("k", GgufType::ARRAY).u32(9).u64(kMax64).bytes,
                       "runs past the end");
    // The tensor count is checked again once the metadata is read.
    expect_parse_error(
        RawGguf().header(3, 2, 1).key("k", GgufType::STRING).str(std::string(100, 'x')).bytes,
        "tensor count 2 is larger than the file can hold");
    expect_parse_error(RawGguf().header(3, 0, 1).key("k", GgufType::STRING).u64(kMax64).bytes,
                       "string value has length 18446744073709551615 past the end");
    expect_parse_error(RawGguf().header(3, 0, 1).u64(kMax64).zeros(64).bytes,
                       "metadata key #0 has invalid length 18446744073709551615");
    expect_parse_error(RawGguf().header(3, 0, 1).u64(0).zeros(64).bytes, "invalid length 0");
    expect_parse_error(RawGguf().header(3, 0, 1).u64(1000).zeros(64).bytes,
                       "file truncated while reading metadata key");
    expect_parse_error(RawGguf().header(3, 1, 0).u64(kMax64).zeros(64).bytes,
                       "tensor name has length 18446744073709551615 past the end");
}

TEST(GgufCorrupt, NestingDepth) {
    auto nested = [](int depth) {
        RawGguf r;
        r.header(3, 0, 1).key("deep", GgufType::ARRAY);
        for (int d = 1; d < depth; ++d) r.u32(uint32_t(GgufType::ARRAY)).u64(1);
        r.u32(uint32_t(GgufType::INT32)).u64(0);
        return r.bytes;
    };
    EXPECT_NO_THROW(test::parse(nested(8)));
    expect_parse_error(nested(9), "metadata 'deep': arrays nested deeper than 8");
    expect_parse_error(nested(10000), "nested deeper than 8");
}

TEST(GgufCorrupt, Duplicates) {
    expect_parse_error(RawGguf().header(3, 0, 2).kv_u32("k", 1).kv_u32("k", 2).bytes,
                       "duplicate metadata key 'k'");
    expect_parse_error(RawGguf()
                           .header(3, 2, 0)
                           .tensor("w", {4}, kF32, 0)
                           .tensor("w", {4}, kF32, 32)
                           .pad(32)
                           .zeros(64)
                           .bytes,
                       "duplicate tensor 'w'");
}

TEST(GgufCorrupt, Shapes) {
    auto one = [](std::vector<int64_t> ne, uint32_t type) {
        return RawGguf()
            .header(3, 1, 0)
            .tensor("t", std::move(ne), type, 0)
            .pad(32)
            .zeros(256)
            .bytes;
    };
    expect_parse_error(one({}, kF32), "tensor 't' has 0 dimensions (1 to 4 allowed)");
    expect_parse_error(one({1, 1, 1, 1, 1}, kF32), "has 5 dimensions");
    expect_parse_error(one({4, -1}, kF32), "tensor 't' has a negative dimension");
    expect_parse_error(one({33}, kQ4_0), "row of 33 values is not a multiple of the block size 32");
    const int64_t big = int64_t(1) << 31;
    expect_parse_error(one({big, big, big, big}, kF32), "tensor 't' is too large");
    expect_parse_error(one({int64_t(1) << 62}, kF32), "is too large");  // bytes overflow
    expect_parse_error(RawGguf().header(3, 1, 0).tensor("", {4}, kF32, 0).pad(32).zeros(32).bytes,
                       "tensor #0 has an empty name");
}

TEST(GgufCorrupt, BadBool) {
    expect_parse_error(RawGguf().header(3, 0, 1).key("b", GgufType::BOOL).put<uint8_t>(2).bytes,
                       "metadata 'b': bool value 2");
}

TEST(GgufCorrupt, OpenNamesThePath) {
    try {
        GgufFile::open("/nonexistent/model.gguf");
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
    }
}

}  // namespace
}  // namespace troupe
