// The engine on the bundled model: exactness of greedy output under prefix caching, batching,
// chunked prefill and pre-emption; namespace isolation; streaming, stop strings,
// cancellation; block accounting; bad requests.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "engine/engine.h"
#include "engine/sequence_kv.h"
#include "util/error.h"

namespace troupe {
namespace {

const Model& bundled_model() {
    static std::unique_ptr<Model> m =
        Model::load(std::string(TROUPE_SOURCE_DIR) + "/models/troupe-tiny-q8_0.gguf");
    return *m;
}

EngineConfig small_config() {
    EngineConfig c;
    c.n_threads = 2;
    c.kv_budget_bytes = 64ull << 20;
    c.warmup = false;
    return c;
}

// Prompts with a long shared head (as agents of one task have) and private tails.
std::vector<std::string> agent_prompts() {
    const std::string shared =
        "You are part of a team of writers. The rules: write plain English, keep to the facts "
        "of the story, never repeat a sentence, and answer in at most three sentences. The "
        "story so far: Elizabeth walked to the window and looked at the garden, where the rain "
        "had fallen all night and the roads were deep in mud. Her sister sat by the fire. ";
    return {shared + "Task: describe the garden.",    shared + "Task: describe the sister.",
            shared + "Task: what happens next?",      shared + "Task: summarise the story so far.",
            "It is a truth universally acknowledged", "In the beginning",
            shared + "Task: describe the weather.",   shared + "Task: write a title."};
}

Request greedy(const std::string& prompt, int max_tokens, const std::string& ns = "") {
    Request r;
    r.prompt_text = prompt;
    r.sampling.temperature = 0.0f;
    r.max_tokens = max_tokens;
    r.cache_namespace = ns;
    return r;
}

// Each prompt alone, one at a time, nothing cached: the reference outputs.
std::vector<RequestOutput> run_alone(const std::vector<std::string>& prompts, int max_tokens,
                                     DType kv_type = DType::F16) {
    EngineConfig c = small_config();
    c.kv_type = kv_type;
    c.enable_prefix_caching = false;
    c.enable_batching = false;
    Engine e(bundled_model(), c);
    std::vector<RequestOutput> outs;
    for (const std::string& p : prompts) {
        e.submit(greedy(p, max_tokens));
        auto done = e.run_until_done();
        outs.push_back(std::move(done.at(0)));
    }
    return outs;
}

// Logits of the model's next token after `tokens`, computed alone (one sequence, one pass)
// over a cache of kv_type.
std::vector<float> next_logits(const std::vector<int32_t>& tokens, DType kv_type) {
    const Model& m = bundled_model();
    const HParams& hp = m.hparams();
    SequenceKv kv(hp, int(tokens.size()) + 1, 16, kv_type);
    Batch batch;
    batch.tokens = tokens;
    batch.seqs = {{kv.block_table, 0, int32_t(tokens.size()), 1}};
    ForwardWorkspace ws;
    std::vector<float> logits(size_t(hp.n_vocab));
    m.forward(batch, kv.views, ws, nullptr, logits.data());
    return logits;
}

// Greedy outputs must be equal. Where they first differ, the difference is accepted only as a
// numeric near-tie: the two tokens are the reference's top two and their logits are within
// kNearTie. Returns 1 for a near-tie (counted by the caller), 0 when equal; fails otherwise.
constexpr float kNearTie = 0.05f;

int compare_greedy(const RequestOutput& ref, const RequestOutput& ours, const std::string& what,
                   DType kv_type = DType::F16) {
    if (ours.tokens == ref.tokens) return 0;
    size_t k = 0;
    while (k < ours.tokens.size() && k < ref.tokens.size() && ours.tokens[k] == ref.tokens[k]) ++k;
    if (k == ours.tokens.size() || k == ref.tokens.size()) {
        ADD_FAILURE() << what << ": one output is a prefix of the other";
        return 0;
    }
    std::vector<int32_t> ctx = ref.prompt;
    ctx.insert(ctx.end(), ref.tokens.begin(), ref.tokens.begin() + long(k));
    const std::vector<float> l = next_logits(ctx, kv_type);
    std::vector<int32_t> order(l.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
    std::partial_sort(order.begin(), order.begin() + 2, order.end(),
                      [&](int32_t a, int32_t b) { return l[size_t(a)] > l[size_t(b)]; });
    const float gap = l[size_t(order[0])] - l[size_t(order[1])];
    const bool top_two = (order[0] == ref.tokens[k] && order[1] == ours.tokens[k]) ||
                         (order[1] == ref.tokens[k] && order[0] == ours.tokens[k]);
    EXPECT_TRUE(top_two && gap < kNearTie)
        << what << ": differs at generated token " << k << " (" << ours.tokens[k] << " vs "
        << ref.tokens[k] << "), top-2 logit gap " << gap;
    std::printf("[ near-tie ] %s: generated token %zu, %d vs %d, top-2 logit gap %.5f\n",
                what.c_str(), k, ours.tokens[k], ref.tokens[k], gap);
    return 1;
}

std::map<RequestId, RequestOutput> by_id(std::vector<RequestOutput> outs) {
    std::map<RequestId, RequestOutput> m;
    for (auto& o : outs) m[o.id] = std::move(o);
    return m;
}

// The agents' prompts batched, with prefix caching and chunked prefill, against each alone
// (kv_type: the cache's element type, the same for both).
void check_greedy_same_batched(DType kv_type) {
    const auto prompts = agent_prompts();
    const auto ref = run_alone(prompts, 24, kv_type);

    EngineConfig c = small_config();
    c.kv_type = kv_type;
    c.max_num_batched_tokens = 48;  // prompts are prefilled in chunks beside other decodes
    Engine e(bundled_model(), c);
    std::vector<RequestId> ids;
    for (const std::string& p : prompts) ids.push_back(e.submit(greedy(p, 24)));
    auto outs = by_id(e.run_until_done());
    int n_cached = 0, n_near_ties = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
        const RequestOutput& o = outs.at(ids[i]);
        n_near_ties += compare_greedy(ref[i], o, "prompt " + std::to_string(i), kv_type);
        n_cached += o.stats.cached_tokens;
    }
    std::printf("[ summary  ] %zu prompts, %d near-tie differences\n", prompts.size(), n_near_ties);
    EXPECT_GT(n_cached, 0) << "the shared prefix was never reused";
    EXPECT_EQ(e.stats().blocks_used, 0);
}

TEST(Engine, GreedyOutputIsTheSameWithCachingBatchingAndChunkedPrefill) {
    check_greedy_same_batched(DType::F16);
}

// A BF16 cache (--kv-type bf16) keeps the same guarantee: its kernels, with or without the
// CPU's BF16 dot products, compute one arithmetic for every path.
TEST(Engine, GreedyOutputIsTheSameBatchedOnABf16Cache) {
    check_greedy_same_batched(DType::BF16);
}

// Agents given one whole prompt whose length is a multiple of the block size share all its
// blocks, the last one too: the first computes the prompt, the others find it whole in the
// cache and compute only its last token again, for the logits (its K/V read from the shared
// block). Their greedy outputs are the prompt's alone.
TEST(Engine, AWholeCachedPromptIsSharedToItsLastBlock) {
    const std::string text = agent_prompts()[0];
    std::vector<int32_t> prompt = bundled_model().tokenizer().tokenize(text, true, false);
    ASSERT_GE(prompt.size(), 64u);
    prompt.resize(64);  // four whole blocks of 16
    const auto request = [&] {
        Request r = greedy("", 12);
        r.prompt = prompt;
        return r;
    };
    RequestOutput ref;
    {
        EngineConfig c = small_config();
        c.enable_prefix_caching = false;
        Engine e(bundled_model(), c);
        e.submit(request());
        ref = std::move(e.run_until_done().at(0));
    }
    Engine e(bundled_model(), small_config());
    for (int i = 0; i < 4; ++i) e.submit(request());  // submitted together
    const std::vector<RequestOutput> together = e.run_until_done();
    e.submit(request());  // and one more later
    const std::vector<RequestOutput> later = e.run_until_done();
    int n_whole = 0;
    for (const RequestOutput& o : together) {
        compare_greedy(ref, o, "request " + std::to_string(o.id));
        n_whole += o.stats.cached_tokens == 64;
    }
    EXPECT_EQ(n_whole, 3);  // all but the first
    compare_greedy(ref, later.at(0), "later request");
    EXPECT_EQ(later.at(0).stats.cached_tokens, 64);
    EXPECT_EQ(e.stats().blocks_used, 0);
}

TEST(Engine, PreemptionAndCancellationKeepOutputsExactAndAccountingClean) {
    const auto prompts = agent_prompts();
    const auto ref = run_alone(prompts, 40);

    EngineConfig c = small_config();
    c.kv_budget_bytes = 0;
    c.max_num_batched_tokens = 64;
    // Room for two or three of these sequences at once: the rest wait or are pre-empted.
    const Model& m = bundled_model();
    const size_t block_bytes = size_t(m.hparams().n_layer) * 2 * m.hparams().n_head_kv *
                               c.block_size * m.hparams().head_dim * 2;
    c.kv_budget_bytes = block_bytes * 14;
    Engine e(m, c);
    std::mt19937 rng(7);
    std::vector<RequestId> ids;
    for (size_t i = 0; i < prompts.size(); ++i) {
        Request r = greedy(prompts[i], 40);
        r.priority = int(rng() % 3);
        ids.push_back(e.submit(r));
    }
    const RequestId cancelled = ids[2];
    std::map<RequestId, RequestOutput> outs;
    int steps = 0, n_near_ties = 0;
    while (e.has_work()) {
        if (++steps == 12) e.cancel(cancelled);
        for (auto& o : e.step()) outs[o.id] = std::move(o);
    }
    const EngineStats st = e.stats();
    EXPECT_GT(st.preemptions, 0u) << "the budget should force pre-emptions";
    for (size_t i = 0; i < prompts.size(); ++i) {
        const RequestOutput& o = outs.at(ids[i]);
        if (ids[i] == cancelled) {
            EXPECT_EQ(o.finish, FinishReason::Cancelled);
            continue;
        }
        n_near_ties += compare_greedy(ref[i], o,
                                      "prompt " + std::to_string(i) + " (pre-empted " +
                                          std::to_string(o.stats.preemptions) + " times)");
    }
    std::printf("[ summary  ] %llu pre-emptions, %d near-tie differences\n",
                (unsigned long long)st.preemptions, n_near_ties);
    EXPECT_EQ(st.blocks_used, 0);
    EXPECT_EQ(st.blocks_used + st.blocks_cached + st.blocks_free, st.blocks_total);
}

TEST(Engine, NamespacesIsolateTheCache) {
    const std::string prompt = agent_prompts()[0];
    Engine e(bundled_model(), small_config());
    auto run = [&](const std::string& ns) {
        e.submit(greedy(prompt, 4, ns));
        return e.run_until_done().at(0);
    };
    const RequestOutput a = run("task1:v1");
    EXPECT_EQ(a.stats.cached_tokens, 0);
    const RequestOutput b = run("task1:v1");
    EXPECT_GE(b.stats.cached_tokens, b.stats.prompt_tokens - 16);
    const RequestOutput other = run("task2:v1");
    EXPECT_EQ(other.stats.cached_tokens, 0) << "another namespace must never hit";
    const RequestOutput new_version = run("task1:v2");
    EXPECT_EQ(new_version.stats.cached_tokens, 0) << "a new prefix version must never hit";
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.tokens, other.tokens);
}

TEST(Engine, StreamingStopStringsAndCallbackCancellation) {
    const std::string prompt = "It is a truth universally acknowledged";
    const auto ref = run_alone({prompt}, 48).at(0);
    ASSERT_GT(ref.text.size(), 12u);

    Engine e(bundled_model(), small_config());
    std::string streamed;
    e.submit(greedy(prompt, 48), [&](const TokenEvent& ev) {
        streamed += ev.text;
        return true;
    });
    const RequestOutput full = e.run_until_done().at(0);
    EXPECT_EQ(streamed, full.text);
    EXPECT_EQ(full.text, ref.text);

    // A stop string taken from the middle of the known reply cuts the text before it.
    const std::string stop = ref.text.substr(8, 4);
    Request r = greedy(prompt, 48);
    r.stop = {stop};
    std::string streamed_stop;
    e.submit(r, [&](const TokenEvent& ev) {
        streamed_stop += ev.text;
        return true;
    });
    const RequestOutput stopped = e.run_until_done().at(0);
    EXPECT_EQ(stopped.finish, FinishReason::Stop);
    EXPECT_EQ(stopped.text, ref.text.substr(0, ref.text.find(stop)));
    EXPECT_EQ(streamed_stop, stopped.text);

    // The callback returning false cancels the request.
    int n_events = 0;
    e.submit(greedy(prompt, 48), [&](const TokenEvent&) { return ++n_events < 3; });
    const RequestOutput cancelled = e.run_until_done().at(0);
    EXPECT_EQ(cancelled.finish, FinishReason::Cancelled);
    EXPECT_EQ(n_events, 3);
    EXPECT_EQ(e.stats().blocks_used, 0);
}

TEST(Engine, BadRequestsGetClearErrors) {
    EngineConfig c = small_config();
    c.n_ctx = 64;
    Engine e(bundled_model(), c);
    Request empty;
    EXPECT_THROW(e.submit(empty), Error);
    Request bad_id;
    bad_id.prompt = {1, 99999};
    try {
        e.submit(bad_id);
        FAIL() << "expected an error";
    } catch (const Error& err) {
        EXPECT_NE(std::string(err.what()).find("outside the vocabulary"), std::string::npos);
    }
    Request too_long = greedy(std::string(400, 'a'), 8);
    EXPECT_THROW(e.submit(too_long), Error);
    Request too_many = greedy("hello", 100);
    EXPECT_THROW(e.submit(too_many), Error);
    EXPECT_FALSE(e.has_work());
}

TEST(Engine, InvalidConfigurationIsRejected) {
    EngineConfig c = small_config();
    c.max_num_seqs = 0;
    EXPECT_THROW(Engine(bundled_model(), c), Error);
    c = small_config();
    c.kv_budget_bytes = 1;
    EXPECT_THROW(Engine(bundled_model(), c), Error);
    c = small_config();
    c.kv_type = DType::Q8_0;  // not a cache type
    EXPECT_THROW(Engine(bundled_model(), c), Error);
}

}  // namespace
}  // namespace troupe
