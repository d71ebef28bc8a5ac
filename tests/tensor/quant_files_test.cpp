// The reference quantizers and dequantizers against the shared model files. Skipped when
// /work/shared/models (TROUPE_SHARED_MODELS_DIR) does not hold them.
//
// - troupe-tiny-q4_0 and -q4_k_m were made by llama-quantize (no importance matrix) from
//   troupe-tiny-f16: re-quantizing the F16 tensors must give the same bytes, for every type in
//   them (Q4_0, Q5_0, Q8_0, Q4_K, Q6_K).
// - troupe-tiny-q8_0 was written on the training GPU from the F32 master weights, not from the
//   F16 file. Quantizing the F16 tensors gives identical blocks except where the f16 rounding of
//   the source moves a value across a rounding boundary; the test checks that every difference
//   is explained that way (and that the Q8_0 encoder matches llama-quantize exactly above).
// - Dequantized tensors are close to the F16 ones: relative RMS error per type below.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tensor/quant_ref.h"
#include "util/fp16.h"

namespace troupe {
namespace {

std::unique_ptr<GgufFile> open_shared(const std::string& file) {
    const std::string path = std::string(TROUPE_SHARED_MODELS_DIR) + "/" + file;
    if (!std::filesystem::exists(path)) return nullptr;
    return GgufFile::open(path);
}

// Relative RMS error of each type's dequantized tensors against F16, on these trained weights
// (measured: Q8_0 0.0056, Q5_0 0.045, Q4_0 0.090, Q4_K 0.072, Q6_K 0.018); F32 tensors (the
// norms) are copies.
double rms_bound(DType t) {
    switch (t) {
        case DType::F32:
            return 0.0;
        case DType::Q8_0:
            return 0.0065;
        case DType::Q6_K:
            return 0.021;
        case DType::Q5_0:
            return 0.050;
        case DType::Q4_K:
            return 0.080;
        case DType::Q4_0:
            return 0.100;
        default:
            return 0.0;
    }
}

struct Row {
    std::vector<float> ref;  // the F16 tensor's row
    std::vector<uint8_t> q;  // the same row encoded by quantize_row
};

// Compares each tensor of `qfile` with troupe-tiny-f16. Returns the number of rows whose
// re-encoding differs, per type; calls on_row_diff(tensor, row, ref, file_row) for each.
template <typename OnDiff>
std::map<DType, int64_t> compare_with_f16(const std::string& qfile, OnDiff on_row_diff) {
    std::map<DType, int64_t> differing;
    const auto f16 = open_shared("troupe-tiny-f16.gguf");
    const auto q = open_shared(qfile);
    if (!f16 || !q) return differing;
    for (const GgufTensor& t : q->tensors()) {
        const GgufTensor* r = f16->find_tensor(t.name);
        if (!r) {
            ADD_FAILURE() << t.name << " missing from the F16 file";
            continue;
        }
        EXPECT_EQ(r->n_elements(), t.n_elements()) << t.name;
        const int64_t n = t.ne[0];
        const size_t qrow = row_bytes(t.type, n), rrow = row_bytes(r->type, n);
        Row row{std::vector<float>(size_t(n)), std::vector<uint8_t>(qrow)};
        std::vector<float> deq(static_cast<size_t>(n));
        double err = 0, mag = 0;
        differing[t.type] += 0;
        for (int64_t i = 0; i < t.n_rows(); ++i) {
            dequantize_row(r->type, r->data + size_t(i) * rrow, row.ref.data(), n);
            dequantize_row(t.type, t.data + size_t(i) * qrow, deq.data(), n);
            for (int64_t k = 0; k < n; ++k) {
                err += double(deq[k] - row.ref[k]) * (deq[k] - row.ref[k]);
                mag += double(row.ref[k]) * row.ref[k];
            }
            quantize_row(t.type, row.ref.data(), row.q.data(), n);
            const uint8_t* file_row = t.data + size_t(i) * qrow;
            if (std::memcmp(row.q.data(), file_row, qrow) != 0) {
                differing[t.type]++;
                on_row_diff(t, row, file_row);
            }
        }
        EXPECT_LE(std::sqrt(err / mag), rms_bound(t.type))
            << qfile << " " << t.name << " " << type_name(t.type);
    }
    return differing;
}

TEST(QuantFiles, LlamaQuantizeQ4_0IsReproducedByteForByte) {
    const auto d = compare_with_f16("troupe-tiny-q4_0.gguf", [](auto&&...) {});
    if (d.empty()) GTEST_SKIP() << "shared models not found";
    EXPECT_EQ(d.at(DType::Q4_0), 0);
    EXPECT_EQ(d.at(DType::Q8_0), 0);  // token_embd
    EXPECT_EQ(d.at(DType::F32), 0);
}

TEST(QuantFiles, LlamaQuantizeQ4_K_MIsReproducedByteForByte) {
    const auto d = compare_with_f16("troupe-tiny-q4_k_m.gguf", [](auto&&...) {});
    if (d.empty()) GTEST_SKIP() << "shared models not found";
    for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q5_0, DType::Q8_0, DType::F32})
        EXPECT_EQ(d.at(t), 0) << type_name(t);
}

// Half the distance between the f16 neighbours of |v|: how far the F32 source value can be
// from its f16 rounding v.
float f16_half_ulp(float v) {
    const uint16_t h = fp32_to_fp16(std::fabs(v));
    return (fp16_to_fp32(uint16_t(h + 1)) - fp16_to_fp32(h)) / 2;
}

// Checks that the file's block could come from some F32 source w with f16(w) = ref: its d is
// f16(a / 127) for an amax a within half an f16 ulp of the F16 block's amax, and each level is
// round(127 w / a) for such w and a.
void expect_explained_by_f16_rounding(const std::string& name, const float* ref,
                                      const BlockQ8_0& file) {
    float amax = 0;
    for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(ref[j]));
    const float hu = f16_half_ulp(amax);
    EXPECT_GE(file.d, fp32_to_fp16((amax - hu) / 127.0f)) << name;
    EXPECT_LE(file.d, fp32_to_fp16((amax + hu) / 127.0f)) << name;
    for (int j = 0; j < QK8_0; ++j) {
        const float exact = 127.0f * ref[j] / amax;
        const float slack =
            127.0f * (f16_half_ulp(ref[j]) / amax + std::fabs(ref[j]) * hu / (amax * amax));
        EXPECT_LE(std::fabs(exact - float(file.qs[j])), 0.5f + slack + 1e-4f) << name << " " << j;
    }
}

TEST(QuantFiles, GpuWrittenQ8_0DiffersOnlyByTheF16RoundingOfItsSource) {
    int64_t blocks = 0, blocks_differing = 0;
    const auto d = compare_with_f16(
        "troupe-tiny-q8_0.gguf", [&](const GgufTensor& t, const Row& row, const uint8_t* file_row) {
            const auto* mine = reinterpret_cast<const BlockQ8_0*>(row.q.data());
            const auto* theirs = reinterpret_cast<const BlockQ8_0*>(file_row);
            for (int64_t b = 0; b < t.ne[0] / QK8_0; ++b) {
                blocks++;
                if (std::memcmp(&mine[b], &theirs[b], sizeof(BlockQ8_0)) == 0) continue;
                blocks_differing++;
                expect_explained_by_f16_rounding(std::string(t.name), row.ref.data() + b * QK8_0,
                                                 theirs[b]);
            }
        });
    if (d.empty()) GTEST_SKIP() << "shared models not found";
    EXPECT_EQ(d.at(DType::F32), 0);
    // Not identical (the F16 file is a rounding of the source), but each difference is
    // explained above. Recorded for the report: about 45% of the blocks of differing rows.
    std::printf(
        "troupe-tiny-q8_0: %lld Q8_0 rows re-encode differently; %lld of their %lld "
        "blocks differ, all within the f16 rounding of the F32 source\n",
        (long long)d.at(DType::Q8_0), (long long)blocks_differing, (long long)blocks);
}

}  // namespace
}  // namespace troupe
