// Real GGUF files open without error: the bundled model (always present) and llama.cpp's
// tokenizer vocabularies in .cache/llama-data/vocab (skipped when not fetched).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace troupe {
namespace {

TEST(GgufFiles, BundledModelOpens) {
    const auto g = GgufFile::open(std::string(TROUPE_SOURCE_DIR) + "/models/troupe-tiny-q8_0.gguf");
    EXPECT_EQ(g->get_string("general.architecture"), "llama");
    EXPECT_EQ(g->get_int("llama.embedding_length"), 288);
    EXPECT_EQ(g->tensors().size(), 56u);  // 13 norms + 43 Q8_0 matrices (tied embeddings)
    const GgufTensor* emb = g->find_tensor("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->type, DType::Q8_0);
    EXPECT_EQ(emb->ne[0], 288);
    EXPECT_EQ(emb->ne[1], 32000);
    EXPECT_EQ(g->get_string_array("tokenizer.ggml.tokens")->size(), 32000u);
}

// Writing back what was read gives the same file, byte for byte: the writer and the reader
// agree with the writer that made this file (the training GPU's) on the whole layout.
TEST(GgufFiles, BundledModelRewritesIdentically) {
    const std::string path = std::string(TROUPE_SOURCE_DIR) + "/models/troupe-tiny-q8_0.gguf";
    const auto g = GgufFile::open(path);
    GgufWriter w(g->version());
    w.copy_metadata(*g);
    for (const GgufTensor& t : g->tensors())
        w.add_tensor_view(t.name, t.type, std::span<const int64_t>(t.ne, size_t(t.n_dims)),
                          {t.data, t.n_bytes});
    const std::vector<uint8_t> bytes = w.write_bytes();
    ASSERT_EQ(bytes.size(), g->file_size());
    const auto again = GgufFile::parse(bytes, "rewritten");
    EXPECT_EQ(again->data_offset(), g->data_offset());
    std::vector<uint8_t> original(g->file_size());
    FILE* f = std::fopen(path.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fread(original.data(), 1, original.size(), f), original.size());
    std::fclose(f);
    EXPECT_TRUE(bytes == original);
}

TEST(GgufFiles, LlamaCppVocabFilesOpen) {
    const std::filesystem::path dir = std::filesystem::path(TROUPE_VOCAB_CACHE_DIR) / "vocab";
    if (!std::filesystem::is_directory(dir))
        GTEST_SKIP() << dir << " absent (scripts/fetch-llama-data.sh)";
    int n = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        if (entry.path().extension() != ".gguf" || name.rfind("ggml-vocab-", 0) != 0) continue;
        SCOPED_TRACE(name);
        try {
            const auto g = GgufFile::open(entry.path().string());
            EXPECT_TRUE(g->get_string("tokenizer.ggml.model").has_value());
            EXPECT_GT(g->get_string_array("tokenizer.ggml.tokens")->size(), 0u);
        } catch (const Error& e) {
            ADD_FAILURE() << e.what();
        }
        ++n;
    }
    EXPECT_GT(n, 0);
}

}  // namespace
}  // namespace troupe
