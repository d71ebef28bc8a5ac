#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "engine/sequence_kv.h"
#include "util/error.h"
#include "util/sysinfo.h"
#include "util/timer.h"

namespace troupe {

namespace {

void validate(const EngineConfig& c) {
    if (c.n_threads < 0) throw Error("n_threads must be >= 0");
    if (c.n_ctx < 0) throw Error("n_ctx must be >= 0");
    if (c.block_size < 1 || c.block_size > 1024) throw Error("block_size must be in [1, 1024]");
    if (c.max_num_seqs < 1) throw Error("max_num_seqs (parallel) must be >= 1");
    if (c.max_num_batched_tokens < 1) throw Error("max_num_batched_tokens must be >= 1");
    if (c.kv_type != DType::F16 && c.kv_type != DType::BF16 && c.kv_type != DType::F32)
        throw Error("the KV cache type must be f16, bf16 or f32");
}

std::vector<int32_t> eog_tokens(const Tokenizer& t) {
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < t.n_vocab(); ++id)
        if (t.is_eog(id)) ids.push_back(id);
    return ids;
}

}  // namespace

Engine::Engine(const Model& model, const EngineConfig& config) : model_(model), config_(config) {
    validate(config_);
    const HParams& hp = model_.hparams();
    n_ctx_ = config_.n_ctx > 0 ? config_.n_ctx : hp.n_ctx_train;
    const int hw = config_.n_threads > 0 ? config_.n_threads : hardware_threads();
    power_ = power_profile(config_.power, hw);
    pool_ = std::make_unique<ThreadPool>(power_.threads(hw));

    const kv::KvGeometry geo = kv_geometry(hp, config_.block_size, config_.kv_type);
    geo.validate();
    const uint64_t budget =
        config_.kv_budget_bytes > 0 ? config_.kv_budget_bytes : kv::default_kv_budget_bytes();
    const int64_t n_blocks = geo.blocks_for_budget(budget);
    if (n_blocks < 1)
        throw Error("the KV budget of " + std::to_string(budget) + " bytes holds no block of " +
                    std::to_string(geo.bytes_per_block()) + " bytes");
    storage_ = std::make_unique<kv::KvStorage>(geo, int(std::min<int64_t>(n_blocks, 1 << 30)));
    if (config_.kv_prefault) storage_->prefault();
    for (int il = 0; il < hp.n_layer; ++il) kv_views_.push_back(storage_->layer_view(il));

    SchedulerConfig sc;
    sc.max_num_seqs = config_.enable_batching ? config_.max_num_seqs : 1;
    sc.max_num_batched_tokens = config_.max_num_batched_tokens;
    sc.max_model_len = n_ctx_;
    sc.eos_tokens = eog_tokens(model_.tokenizer());
    sc.power = power_;
    kv::BlockManagerConfig kc;
    kc.n_blocks = storage_->n_blocks();
    kc.block_size = config_.block_size;
    kc.enable_prefix_caching = config_.enable_prefix_caching;
    kc.bytes_per_block = storage_->bytes_per_block();
    scheduler_ = std::make_unique<Scheduler>(sc, kc, storage_.get());
    if (config_.warmup) warm_up();
}

Engine::~Engine() = default;

// Reads every weight page and runs one token through the network, so the first request pays
// neither page faults nor cold caches. Writes block 0 only, which holds nothing yet.
void Engine::warm_up() {
    model_.touch_weights();
    const int32_t block0 = 0;
    batch_.tokens = {model_.tokenizer().bos() >= 0 ? model_.tokenizer().bos() : 0};
    batch_.seqs = {{std::span<const int32_t>(&block0, 1), 0, 1, 1}};
    logits_.resize(size_t(model_.hparams().n_vocab));
    model_.forward(batch_, kv_views_, ws_, pool_.get(), logits_.data());
}

RequestId Engine::submit(Request request, TokenCallback on_token) {
    const Tokenizer& tok = model_.tokenizer();
    if (request.prompt.empty()) {
        if (request.prompt_text.empty()) throw Error("the request has no prompt");
        request.prompt = tok.tokenize(request.prompt_text, true, true);
    }
    for (int32_t id : request.prompt)
        if (id < 0 || id >= model_.hparams().n_vocab)
            throw Error("prompt token id " + std::to_string(id) + " is outside the vocabulary (" +
                        std::to_string(model_.hparams().n_vocab) + " tokens)");
    Live live{Sampler(request.sampling),
              StreamDecoder(tok),
              StopMatcher(request.stop),
              std::move(on_token),
              {}};
    const RequestId id = scheduler_->submit(std::move(request), now_ms());
    live_.emplace(id, std::move(live));
    return id;
}

void Engine::cancel(RequestId id) {
    scheduler_->cancel(id, now_ms());
}

bool Engine::has_work() const {
    return scheduler_->has_work();
}

void Engine::set_power_mode(PowerMode mode) {
    config_.power = mode;
    power_ = power_profile(mode, pool_->size());
    scheduler_->set_power_profile(power_);
}

// Lays the scheduled work out as one batch: every sequence's tokens, contiguous, and logits
// for the last row of those that sample.
void Engine::build_batch(const ScheduledBatch& sb) {
    batch_.tokens.clear();
    batch_.seqs.clear();
    batch_.shared_prefix_attention = config_.shared_prefix_attention;
    for (const ScheduledSeq& s : sb.seqs) {
        const auto toks = s.tokens();
        batch_.tokens.insert(batch_.tokens.end(), toks.begin(), toks.end());
        batch_.seqs.push_back(
            {s.block_table(), s.first_pos, s.n_tokens, s.needs_sample ? 1 : 0, s.n_kv_present});
    }
}

// Streams the text a newly sampled token completes, unless a stop string or the callback ends
// the request.
void Engine::emit_token(RequestId id, int32_t token) {
    auto it = live_.find(id);
    if (it == live_.end()) return;
    Live& l = it->second;
    std::string text = l.stops.push(l.decoder.push(token));
    l.text += text;
    if (l.stops.stopped()) scheduler_->finish(id, FinishReason::Stop, now_ms());
    if (l.on_token && !l.on_token(TokenEvent{id, token, std::move(text)}))
        scheduler_->cancel(id, now_ms());
}

RequestOutput Engine::make_output(const Sequence& seq) {
    RequestOutput out;
    out.id = seq.id;
    out.tag = seq.request.tag;
    out.prompt.assign(seq.tokens.begin(), seq.tokens.begin() + seq.n_prompt_tokens);
    out.tokens.assign(seq.tokens.begin() + seq.n_prompt_tokens, seq.tokens.end());
    out.finish = seq.finish;
    out.error = seq.error;
    out.stats = seq.stats;
    auto it = live_.find(seq.id);
    if (it != live_.end()) {
        Live& l = it->second;
        if (l.stops.stopped()) {
            out.finish = FinishReason::Stop;  // matched on the step that also hit the limit
        } else {
            std::string tail = l.stops.push(l.decoder.flush());
            tail += l.stops.flush();
            l.text += tail;
            if (!tail.empty() && l.on_token) l.on_token(TokenEvent{seq.id, -1, tail});
        }
        out.text = std::move(l.text);
        if (l.eog >= 0) out.tokens.push_back(l.eog);
        live_.erase(it);
    }
    return out;
}

// One forward pass over the scheduled work, a token sampled for every sequence that reached
// the end of its known tokens (sampled_[i], -1 otherwise), then the scheduler's bookkeeping.
void Engine::compute(const ScheduledBatch& sb, double t0) {
    build_batch(sb);
    const int n_vocab = model_.hparams().n_vocab;
    logits_.resize(size_t(batch_.n_logit_rows()) * size_t(n_vocab));
    const bool decode_only = std::all_of(sb.seqs.begin(), sb.seqs.end(), [](const ScheduledSeq& s) {
        return s.n_tokens == 1 && s.first_pos >= s.seq->n_prompt_tokens;
    });
    ws_.profile = config_.profile_steps ? &profiles_[decode_only ? 0 : 1] : nullptr;
    model_.forward(batch_, kv_views_, ws_, pool_.get(), logits_.data());
    ws_.profile = nullptr;
    size_t row = 0;
    for (size_t i = 0; i < sb.seqs.size(); ++i) {
        const ScheduledSeq& s = sb.seqs[i];
        if (!s.needs_sample) continue;
        std::span<float> logits(logits_.data() + row++ * size_t(n_vocab), size_t(n_vocab));
        const Sequence* seq = scheduler_->find(s.id);
        auto it = live_.find(s.id);
        if (!seq || it == live_.end()) continue;  // cancelled during the step
        sampled_[i] = it->second.sampler.sample(logits, seq->tokens);
    }
    scheduler_->postprocess(sb, sampled_, now_ms());
    const double ms = now_ms() - t0;
    (decode_only ? decode_step_ms_ : prefill_step_ms_) += ms;
    (decode_only ? decode_step_tokens_ : prefill_step_tokens_) += uint64_t(sb.n_tokens);
}

// Streams the sampled tokens that became text: the scheduler appended a token when its
// sequence still runs or just finished by length; an end-of-generation token (Eos) or a
// request cancelled during the step appended nothing.
void Engine::emit_sampled(const ScheduledBatch& sb,
                          const std::vector<std::unique_ptr<Sequence>>& finished) {
    for (size_t i = 0; i < sampled_.size(); ++i) {
        if (sampled_[i] < 0) continue;
        const RequestId id = sb.seqs[i].id;
        bool appended = scheduler_->find(id) != nullptr;
        for (const auto& f : finished) {
            if (f->id != id) continue;
            appended = f->finish == FinishReason::Length;
            if (f->finish == FinishReason::Eos) live_.at(id).eog = sampled_[i];
        }
        if (appended) emit_token(id, sampled_[i]);
    }
}

std::vector<RequestOutput> Engine::step() {
    const double t0 = now_ms();
    const ScheduledBatch sb = scheduler_->schedule(t0);
    sampled_.assign(sb.seqs.size(), -1);
    if (!sb.empty()) compute(sb, t0);
    auto finished = scheduler_->take_finished();
    emit_sampled(sb, finished);
    for (auto& seq : scheduler_->take_finished()) finished.push_back(std::move(seq));  // stopped
    std::vector<RequestOutput> outs;
    for (auto& seq : finished) outs.push_back(make_output(*seq));
    peak_rss_ = std::max(peak_rss_, peak_rss_bytes());
    if (!sb.empty()) {  // pacing of the power profile
        const double pause = power_.pause_after_step_ms(now_ms() - t0);
        if (pause > 0)
            std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(pause));
    }
    return outs;
}

std::vector<RequestOutput> Engine::run_until_done() {
    std::vector<RequestOutput> all;
    while (has_work()) {
        auto outs = step();
        for (auto& o : outs) all.push_back(std::move(o));
    }
    return all;
}

EngineStats Engine::stats() const {
    EngineStats s = scheduler_->stats();
    s.peak_rss_bytes = std::max(peak_rss_, peak_rss_bytes());
    s.decode_step_ms = decode_step_ms_;
    s.decode_step_tokens = decode_step_tokens_;
    s.prefill_step_ms = prefill_step_ms_;
    s.prefill_step_tokens = prefill_step_tokens_;
    return s;
}

}  // namespace troupe
