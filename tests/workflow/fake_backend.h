// A scripted InferenceBackend for runtime tests: deterministic output, one token per running
// request per step, a fake clock advanced by every step, and scripted misbehaviour per task
// (slow, failing, hanging, deaf to cancel). It records what it was asked to do.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "util/error.h"

namespace troupe::testing {

struct FakeClock {
    double ms = 1000;  // not 0, so "time since start" bugs show
    double operator()() const { return ms; }
};

class FakeBackend : public InferenceBackend {
  public:
    // How requests of one task behave (the task is the tag's text before the first ':').
    struct Script {
        int n_tokens = 4;            // tokens generated before finishing (one per step)
        int fail_attempts = 0;       // this many attempts end with FinishReason::Error
        int hang_attempts = 0;       // this many attempts never produce anything
        bool ignore_cancel = false;  // cancel() is not honoured (nothing is ever reported)
        bool reject = false;         // submit() throws troupe::Error
        bool drop = false;           // the request vanishes at the next step, never reported
        double ms_per_token = 0;     // extra clock advance per token of this task (slow agent)
    };

    struct Submission {
        RequestId id;
        std::string task;
        Request request;
        double at_ms;
    };

    explicit FakeBackend(FakeClock& clock, double ms_per_step = 10, int max_batch = 0)
        : clock_(clock), ms_per_step_(ms_per_step), max_batch_(max_batch) {}

    void script(const std::string& task, Script s) { scripts_[task] = s; }

    // The deterministic answer for a prompt, one word per token: a function of the prompt
    // text only, so equal prompts give equal outputs whatever the schedule.
    static std::vector<std::string> answer_pieces(const std::string& prompt, int n_tokens) {
        static const char* kWords[] = {" whale", " sea", " ship", " letter", " garden",
                                       " rain",  " tea", " map",  " lamp",   " bell"};
        uint64_t h = 1469598103934665603ull;  // FNV-1a
        for (unsigned char c : prompt) h = (h ^ c) * 1099511628211ull;
        std::vector<std::string> out;
        for (int i = 0; i < n_tokens; ++i)
            out.push_back(kWords[((h >> (4 * (i % 16))) + 7 * uint64_t(i)) % 10]);
        return out;
    }
    static std::string answer_for(const std::string& prompt, int n_tokens) {
        std::string out;
        for (const std::string& w : answer_pieces(prompt, n_tokens)) out += w;
        return out;
    }

    // ---- InferenceBackend
    RequestId submit(Request request, TokenCallback on_token) override {
        const std::string task = request.tag.substr(0, request.tag.find(':'));
        const Script& s = scripts_[task];
        if (s.reject) throw Error("prompt too long for the fake context");
        const int attempt = attempts_[task]++;
        Seq q;
        q.id = next_id_++;
        q.task = task;
        q.priority = request.priority;
        q.cb = std::move(on_token);
        q.n_tokens = s.n_tokens;
        q.fail = attempt < s.fail_attempts;
        q.hang = attempt >= s.fail_attempts && attempt < s.fail_attempts + s.hang_attempts;
        q.ignore_cancel = s.ignore_cancel;
        q.drop = s.drop;
        q.ms_per_token = s.ms_per_token;
        q.submit_ms = clock_.ms;
        q.out.id = q.id;
        q.out.tag = request.tag;
        q.out.stats.prompt_tokens = int(request.prompt_text.size());  // one token per byte
        q.out.stats.cached_tokens = cached_prefix(request);
        q.pieces = answer_pieces(request.prompt_text, q.n_tokens);
        seen_[request.cache_namespace].push_back(request.prompt_text);
        submissions.push_back({q.id, task, std::move(request), clock_.ms});
        waiting_.push_back(std::move(q));
        return submissions.back().id;
    }

    void cancel(RequestId id) override {
        cancelled.push_back(id);
        for (auto* list : {&waiting_, &running_})
            for (Seq& q : *list)
                if (q.id == id && !q.ignore_cancel) q.cancel = true;
    }

    bool has_work() const override { return !waiting_.empty() || !running_.empty(); }

    std::vector<RequestOutput> step() override {
        clock_.ms += ms_per_step_;
        ++stats_.steps;
        admit();
        std::erase_if(running_, [](const Seq& q) { return q.drop; });
        std::vector<RequestOutput> done;
        std::vector<std::string> batch;
        for (auto it = running_.begin(); it != running_.end();) {
            Seq& q = *it;
            if (q.cancel || q.fail) {
                q.out.finish = q.cancel ? FinishReason::Cancelled : FinishReason::Error;
                if (q.fail) q.out.error = "scripted failure";
                done.push_back(finish(q));
                it = running_.erase(it);
                continue;
            }
            if (q.hang) {
                ++it;
                continue;
            }
            batch.push_back(q.task);
            emit_token(q);
            if (q.generated == q.n_tokens) {
                q.out.finish = FinishReason::Length;
                done.push_back(finish(q));
                it = running_.erase(it);
            } else {
                ++it;
            }
        }
        // Cancelled while still waiting: reported without running.
        for (auto it = waiting_.begin(); it != waiting_.end();) {
            if (!it->cancel) {
                ++it;
                continue;
            }
            it->out.finish = FinishReason::Cancelled;
            done.push_back(finish(*it));
            it = waiting_.erase(it);
        }
        if (!batch.empty()) batches.push_back(batch);
        return done;
    }

    EngineStats stats() const override { return stats_; }

    // Calls every pending request's token callback once, as a late engine would; returns how
    // many asked to continue.
    int poke_pending_callbacks() {
        int n_continue = 0;
        for (auto* list : {&waiting_, &running_})
            for (Seq& q : *list)
                if (q.cb && q.cb(TokenEvent{q.id, 0, " late"})) ++n_continue;
        return n_continue;
    }

    // ---- observations and knobs
    std::vector<Submission> submissions;
    std::vector<std::vector<std::string>> batches;  // tasks that generated a token, per step
    std::vector<RequestId> cancelled;
    EngineStats stats_;
    int max_running_seen = 0;

  private:
    struct Seq {
        RequestId id = 0;
        std::string task;
        int priority = 0;
        TokenCallback cb;
        int n_tokens = 0;
        int generated = 0;
        bool fail = false, hang = false, ignore_cancel = false, cancel = false, drop = false;
        double ms_per_token = 0;
        double submit_ms = 0;
        double first_scheduled_ms = -1;
        double first_token_ms = -1;
        std::vector<std::string> pieces;
        RequestOutput out;
    };

    int cached_prefix(const Request& r) const {
        const auto it = seen_.find(r.cache_namespace);
        size_t best = 0;
        if (it != seen_.end())
            for (const std::string& p : it->second) {
                size_t n = 0;
                while (n < p.size() && n < r.prompt_text.size() && p[n] == r.prompt_text[n]) ++n;
                best = std::max(best, n);
            }
        return int(best / 16 * 16);  // whole blocks of 16 tokens
    }

    void admit() {
        std::stable_sort(waiting_.begin(), waiting_.end(),
                         [](const Seq& a, const Seq& b) { return a.priority > b.priority; });
        while (!waiting_.empty() && (max_batch_ <= 0 || int(running_.size()) < max_batch_)) {
            if (waiting_.front().cancel) break;
            running_.push_back(std::move(waiting_.front()));
            waiting_.pop_front();
            running_.back().first_scheduled_ms = clock_.ms;
        }
        max_running_seen = std::max(max_running_seen, int(running_.size()));
    }

    void emit_token(Seq& q) {
        const std::string& piece = q.pieces[size_t(q.generated)];
        q.out.text += piece;
        q.out.tokens.push_back(int32_t(q.generated));
        ++q.generated;
        clock_.ms += q.ms_per_token;
        if (q.first_token_ms < 0) q.first_token_ms = clock_.ms;
        if (q.cb && !q.cb(TokenEvent{q.id, int32_t(q.generated), piece})) q.cancel = true;
    }

    RequestOutput finish(Seq& q) {
        RequestOutput o = q.out;
        o.stats.generated_tokens = q.generated;
        o.stats.queue_ms = q.first_scheduled_ms >= 0 ? q.first_scheduled_ms - q.submit_ms : 0;
        o.stats.ttft_ms = q.first_token_ms >= 0 ? q.first_token_ms - q.submit_ms : 0;
        o.stats.latency_ms = clock_.ms - q.submit_ms;
        ++stats_.requests_finished;
        stats_.prompt_tokens += uint64_t(o.stats.prompt_tokens);
        stats_.cached_tokens += uint64_t(o.stats.cached_tokens);
        stats_.generated_tokens += uint64_t(q.generated);
        return o;
    }

    FakeClock& clock_;
    double ms_per_step_;
    int max_batch_;
    RequestId next_id_ = 1;
    std::deque<Seq> waiting_;
    std::deque<Seq> running_;
    std::map<std::string, Script> scripts_;
    std::map<std::string, int> attempts_;
    std::map<std::string, std::vector<std::string>> seen_;  // namespace -> prompts
};

}  // namespace troupe::testing
