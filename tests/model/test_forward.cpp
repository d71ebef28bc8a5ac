// Model::forward's contracts on batches: the last layer runs only on the rows that want
// logits (when they are not all the rows), and that changes no bit of their logits nor of the
// KV the pass stores (checked against passes where every row wants logits, on the bundled
// model); and a sequence decoded in a batch gets the bits it gets decoded alone, for every
// weight type of the tiny models that is present (the batched products take other kernels:
// the pair layout for Q8_0 and Q4_0).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "engine/sequence_kv.h"
#include "model/golden.h"
#include "model/model.h"

namespace troupe {
namespace {

const Model& tiny() {
    static const std::unique_ptr<Model> m =
        Model::load(std::string(TROUPE_SOURCE_DIR) + "/models/troupe-tiny-q8_0.gguf");
    return *m;
}

std::vector<int32_t> some_tokens(int n, int seed) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) t[size_t(i)] = 100 + (seed * 7919 + i * 104729) % 3000;
    return t;
}

// One sequence of a test batch: its tokens, where they start, the logits it asks for, and
// which blocks of the shared KV buffer it uses.
struct Seq {
    std::vector<int32_t> tokens;
    int32_t first_pos;
    int32_t n_logits;
    std::vector<int32_t> blocks;
};

// Runs one pass over seqs; logits [n_logit_rows, n_vocab].
std::vector<float> run(const Model& m, SequenceKv& kv, const std::vector<Seq>& seqs,
                       bool all_logits, ThreadPool& pool, ForwardWorkspace& ws,
                       bool shared_attention = true) {
    Batch b;
    b.shared_prefix_attention = shared_attention;
    for (const Seq& s : seqs) {
        b.tokens.insert(b.tokens.end(), s.tokens.begin(), s.tokens.end());
        const int32_t n = int32_t(s.tokens.size());
        b.seqs.push_back({s.blocks, s.first_pos, n, all_logits ? n : s.n_logits});
    }
    std::vector<float> logits(size_t(b.n_logit_rows()) * size_t(m.hparams().n_vocab));
    m.forward(b, kv.views, ws, &pool, logits.data());
    return logits;
}

// Logit rows of seqs as asked for (n_logits each), taken from a pass where every row had them.
std::vector<float> asked_rows(const std::vector<Seq>& seqs, const std::vector<float>& all,
                              int n_vocab) {
    std::vector<float> out;
    size_t row = 0;
    for (const Seq& s : seqs) {
        const size_t n = s.tokens.size();
        const size_t first = row + n - size_t(s.n_logits);
        out.insert(out.end(), all.begin() + ptrdiff_t(first * size_t(n_vocab)),
                   all.begin() + ptrdiff_t((row + n) * size_t(n_vocab)));
        row += n;
    }
    return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<int32_t> range(int a, int b) {
    std::vector<int32_t> v;
    for (int i = a; i < b; ++i) v.push_back(i);
    return v;
}

TEST(Forward, LogitsDoNotDependOnWhichRowsAskForThem) {
    const Model& m = tiny();
    const int nv = m.hparams().n_vocab;
    ThreadPool pool(2);
    // Blocks of 16: a 144-token prefix in blocks 0-8 (past one 128-key chunk, so the last
    // layer's decode-like rows read it together) that a and b share, their private blocks
    // after it; a sequence z asking for no logits between them, and c of its own.
    const std::vector<Seq> prefix = {{some_tokens(144, 1), 0, 0, range(0, 9)}};
    const std::vector<int32_t> shared = range(0, 9);
    auto with = [](std::vector<int32_t> t, std::vector<int32_t> more) {
        t.insert(t.end(), more.begin(), more.end());
        return t;
    };
    const std::vector<Seq> step = {
        {some_tokens(40, 2), 144, 1, with(shared, range(9, 13))},   // prefill after the prefix
        {some_tokens(9, 5), 0, 0, {13}},                            // no logits at all
        {some_tokens(21, 3), 144, 3, with(shared, range(14, 16))},  // three logit rows
        {some_tokens(50, 4), 0, 50, range(16, 20)},                 // every row
    };
    for (bool shared_attention : {true, false}) {
        std::vector<float> want, got;
        for (bool all : {true, false}) {
            SequenceKv kv(m.hparams(), 16 * 20);
            ForwardWorkspace ws;
            run(m, kv, prefix, all, pool, ws, shared_attention);
            std::vector<float> logits = run(m, kv, step, all, pool, ws, shared_attention);
            // A decode step of every sequence reads the KV both passes stored, last layer too.
            std::vector<Seq> decode;
            for (const Seq& s : step)
                decode.push_back(
                    {{s.tokens.back()}, s.first_pos + int32_t(s.tokens.size()), 1, s.blocks});
            const std::vector<float> next = run(m, kv, decode, all, pool, ws, shared_attention);
            std::vector<float>& out = all ? want : got;
            out = all ? asked_rows(step, logits, nv) : logits;
            out.insert(out.end(), next.begin(), next.end());
        }
        ASSERT_EQ(got.size(), size_t(1 + 0 + 3 + 50 + 4) * size_t(nv));
        EXPECT_TRUE(same_bits(got, want)) << "shared attention " << shared_attention;
    }
}

TEST(Forward, PrefillChunksWithoutLogitsStoreTheSameKv) {
    const Model& m = tiny();
    ThreadPool pool(2);
    const std::vector<int32_t> prompt = some_tokens(70, 6);
    std::vector<float> want, got;
    for (bool all : {true, false}) {
        SequenceKv kv(m.hparams(), 96);
        ForwardWorkspace ws;
        const std::vector<int32_t> blocks = kv.block_table;
        // Two chunks that ask for no logits, then the last token.
        run(m, kv, {{{prompt.begin(), prompt.begin() + 33}, 0, 0, blocks}}, all, pool, ws);
        run(m, kv, {{{prompt.begin() + 33, prompt.end() - 1}, 33, 0, blocks}}, all, pool, ws);
        (all ? want : got) = run(m, kv, {{{prompt.back()}, 69, 1, blocks}}, all, pool, ws);
    }
    EXPECT_TRUE(same_bits(got, want));
}

// A prompt found whole in the prefix cache computes its last token again for the logits
// (BatchSeq::n_kv_present): they are the bits of the pass that stored the prompt, and the K/V
// of that token are read from the cache, never stored (its block may be shared). Checked by
// giving the cache another token's K/V at that position: the logits follow them, and the
// cache keeps them.
TEST(Forward, TokensWithTheirKvPresentAreNotStored) {
    const Model& m = tiny();
    const int nv = m.hparams().n_vocab;
    ThreadPool pool(2);
    const std::vector<int32_t> prompt = some_tokens(48, 7);  // three whole blocks
    SequenceKv kv(m.hparams(), 64);
    ForwardWorkspace ws;
    const std::vector<int32_t> blocks = kv.block_table;
    const std::vector<float> stored = run(m, kv, {{prompt, 0, 1, blocks}}, false, pool, ws);
    const auto last_again = [&] {
        Batch b;
        b.tokens = {prompt.back()};
        b.seqs = {{blocks, 47, 1, 1, 1}};
        std::vector<float> logits(static_cast<size_t>(nv));
        m.forward(b, kv.views, ws, &pool, logits.data());
        return logits;
    };
    EXPECT_TRUE(same_bits(last_again(), stored));

    run(m, kv, {{{prompt.back() + 1}, 47, 0, blocks}}, false, pool, ws);  // other K/V at 47
    const auto bytes = [&] {
        std::vector<uint8_t> all;
        for (int i = 0; i < kv.storage.geometry().pieces_per_block(); ++i) {
            const uint8_t* p = kv.storage.piece(2, i);  // the block holding position 47
            all.insert(all.end(), p, p + kv.storage.geometry().head_bytes());
        }
        return all;
    };
    const std::vector<uint8_t> before = bytes();
    EXPECT_FALSE(same_bits(last_again(), stored));
    EXPECT_EQ(bytes(), before);
}

TEST(Forward, BatchedDecodeGivesTheBitsOfDecodeAlone) {
    int n_models = 0;
    for (const char* file : {"troupe-tiny-q8_0.gguf", "troupe-tiny-q4_0.gguf",
                             "troupe-tiny-f16.gguf", "troupe-tiny-q4_k_m.gguf"}) {
        const std::string path = test::find_model(file);
        if (path.empty()) continue;  // only the Q8_0 model is in the repository
        ++n_models;
        const auto m = Model::load(path);
        const int nv = m->hparams().n_vocab;
        ThreadPool pool(2);
        // 20 sequences: the matrix-matrix kernels of every type (the pair layout's up to 16
        // tokens, the K-quants' from 16), against the matrix-vector ones of decode alone.
        constexpr int kSeqs = 20;
        // Sequence i: a prompt of its own in blocks 2i and 2i + 1, then one decode token.
        std::vector<Seq> prompts, decode;
        for (int i = 0; i < kSeqs; ++i) {
            const int n = 17 + i % 8;  // + 1 decoded: within the sequence's 32 slots
            prompts.push_back({some_tokens(n, 10 + i), 0, 1, range(2 * i, 2 * i + 2)});
            decode.push_back({some_tokens(1, 30 + i), n, 1, range(2 * i, 2 * i + 2)});
        }
        std::vector<float> alone, batched;
        for (bool batch : {false, true}) {
            SequenceKv kv(m->hparams(), 16 * 2 * kSeqs);
            ForwardWorkspace ws;
            for (const Seq& s : prompts) run(*m, kv, {s}, false, pool, ws);
            if (batch) {
                batched = run(*m, kv, decode, false, pool, ws);
            } else {
                for (const Seq& s : decode) {
                    const std::vector<float> one = run(*m, kv, {s}, false, pool, ws);
                    alone.insert(alone.end(), one.begin(), one.end());
                }
            }
        }
        ASSERT_EQ(alone.size(), size_t(kSeqs) * size_t(nv)) << file;
        EXPECT_TRUE(same_bits(batched, alone)) << file;
    }
    EXPECT_GE(n_models, 1);
}

void check_interleaved_model(const std::string& path) {
    const auto file_layout = Model::load(path, {.interleave_weights = false});
    const auto interleaved = Model::load(path);
    EXPECT_EQ(file_layout->weights().interleaved_bytes, 0u);
    EXPECT_EQ(interleaved->weights().interleaved_bytes, interleaved->weights().matrix_bytes);
    EXPECT_EQ(interleaved->weights().layers[0].w_up.layout, ops::WeightLayout::Interleaved16);
    ThreadPool pool(2);
    constexpr int kSeqs = 9;
    std::vector<Seq> prompts, decode;
    for (int i = 0; i < kSeqs; ++i) {
        const int n = 20 + i;
        prompts.push_back({some_tokens(n, 50 + i), 0, 2, range(2 * i, 2 * i + 2)});
        decode.push_back({some_tokens(1, 70 + i), n, 1, range(2 * i, 2 * i + 2)});
    }
    std::vector<float> logits[2];
    for (int use : {0, 1}) {
        const Model& m = use ? *interleaved : *file_layout;
        SequenceKv kv(m.hparams(), 16 * 2 * kSeqs);
        ForwardWorkspace ws;
        for (const Seq& s : prompts) {
            const std::vector<float> l = run(m, kv, {s}, false, pool, ws);
            logits[use].insert(logits[use].end(), l.begin(), l.end());
        }
        const std::vector<float> one = run(m, kv, {decode[0]}, false, pool, ws);
        logits[use].insert(logits[use].end(), one.begin(), one.end());
        const std::vector<float> many = run(m, kv, decode, false, pool, ws);
        logits[use].insert(logits[use].end(), many.begin(), many.end());
    }
    // The decodes read every layer's stored K/V: equal logits mean equal caches too.
    EXPECT_TRUE(same_bits(logits[1], logits[0]));
}

// The Q8_0 and Q4_0 matrices interleaved at load (the default) give every logit and every
// K/V value of the file's layout bit for bit: prefills, a single decode and a batch of
// decodes.
TEST(Forward, InterleavedWeightsGiveTheBitsOfTheFileLayout) {
    for (const char* file : {"troupe-tiny-q8_0.gguf", "troupe-tiny-q4_0.gguf"}) {
        const std::string path = test::find_model(file);
        if (path.empty()) continue;  // only the Q8_0 model is in the repository
        SCOPED_TRACE(file);
        check_interleaved_model(path);
    }
}

}  // namespace
}  // namespace troupe
