// Bookkeeping cost of the KV cache and the scheduler, without a model: what a step costs
// besides the forward pass. Fixed inputs; machine-readable with --benchmark_format=json.
//   BM_MatchPrefix/<n>     prefix lookup of an n-token prompt whose blocks are all cached
//                          (hashing + verification), per lookup
//   BM_DecodeStep/<seqs>   schedule() + postprocess() of a step of <seqs> decoding sequences
//   BM_AdmitAndFree/<n>    admission of an n-token prompt (all new blocks), commit, free
#include <benchmark/benchmark.h>

#include <vector>

#include "engine/scheduler.h"
#include "kv/block_manager.h"

namespace {

using namespace troupe;

std::vector<int32_t> prompt(int n, int salt) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) t[size_t(i)] = (i * 7919 + salt * 104729) % 32000;
    return t;
}

void BM_MatchPrefix(benchmark::State& state) {
    const int n = int(state.range(0));
    kv::BlockManagerConfig c;
    c.n_blocks = n / 16 + 8;
    kv::BlockManager bm(c);
    const std::vector<int32_t> t = prompt(n, 1);
    kv::SeqKv seq;
    bm.admit(seq, t, "task:agent:v1", bm.match_prefix(t, "task:agent:v1"), n);
    bm.commit(seq, t, n);
    for (auto _ : state) {
        kv::PrefixMatch m = bm.match_prefix(t, "task:agent:v1");
        benchmark::DoNotOptimize(m.blocks.data());
    }
    state.SetItemsProcessed(state.iterations() * n);  // tokens
}
BENCHMARK(BM_MatchPrefix)->Arg(512)->Arg(2048)->Arg(8192);

void BM_DecodeStep(benchmark::State& state) {
    const int n_seqs = int(state.range(0));
    SchedulerConfig sc;
    sc.max_num_seqs = n_seqs;
    sc.max_num_batched_tokens = 8192;
    sc.max_model_len = 1 << 20;
    kv::BlockManagerConfig kc;
    kc.n_blocks = n_seqs * (4096 + 512) / 16 + 64;
    Scheduler sched(sc, kc);
    auto submit = [&](int salt) {
        Request r;
        r.prompt = prompt(512, salt);
        r.max_tokens = 4096;
        sched.submit(std::move(r), 0);
    };
    for (int i = 0; i < n_seqs; ++i) submit(i);
    std::vector<int32_t> sampled;
    for (int i = 0; i < 2; ++i) {  // prompts, then the first decode step
        const ScheduledBatch b = sched.schedule(0);
        sampled.assign(b.seqs.size(), 5);
        sched.postprocess(b, sampled, 0);
    }
    int salt = n_seqs;
    for (auto _ : state) {
        const ScheduledBatch b = sched.schedule(0);
        sampled.assign(b.seqs.size(), 5);
        sched.postprocess(b, sampled, 0);
        const size_t n_done = sched.take_finished().size();
        for (size_t i = 0; i < n_done; ++i) submit(++salt);
    }
    state.SetItemsProcessed(state.iterations() * n_seqs);  // decoded tokens
}
BENCHMARK(BM_DecodeStep)->Arg(1)->Arg(8)->Arg(64);

void BM_AdmitAndFree(benchmark::State& state) {
    const int n = int(state.range(0));
    kv::BlockManagerConfig c;
    c.n_blocks = 4 * (n / 16 + 1);
    kv::BlockManager bm(c);
    int salt = 0;
    for (auto _ : state) {
        const std::vector<int32_t> t = prompt(n, ++salt);  // never seen: all misses
        kv::SeqKv seq;
        bm.admit(seq, t, "", bm.match_prefix(t, ""), n);
        bm.commit(seq, t, n);
        bm.free(seq);
    }
    state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_AdmitAndFree)->Arg(512)->Arg(2048);

}  // namespace

BENCHMARK_MAIN();
