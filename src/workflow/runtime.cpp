#include "workflow/runtime.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <random>

#include "util/error.h"
#include "util/sysinfo.h"
#include "util/timer.h"

namespace troupe::workflow {

std::string RunOptions::mode_name() const {
    if (prefix_cache && batching) return "optimised";
    if (!prefix_cache && !batching) return "baseline";
    return prefix_cache ? "no-batching" : "no-prefix-cache";
}

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string random_run_id() {
    std::random_device rd;
    char buf[24];
    std::snprintf(buf, sizeof buf, "run-%08x", unsigned(rd()));
    return buf;
}

// One request in flight for a task. Times are milliseconds from the start of the run.
struct Attempt {
    RequestId id = 0;
    double submit_ms = 0;
    double deadline_ms = 0;     // the agent's timeout
    bool cancelling = false;    // cancel() was sent
    double abandon_ms = 0;      // when cancelling: give up waiting for the report
    std::string cancel_reason;  // "timeout" or "cancelled"
    int n_tokens = 0;           // seen through the token callback
    double first_token_ms = -1;
};

struct TaskRun {
    TaskResult result;
    std::optional<Attempt> attempt;
    std::optional<std::string> prompt;  // rendered once, reused by retries
};

class DagRun;

// Token callbacks reach the run through this, so a backend that calls one after the run
// returned finds no run (and cancels the request) instead of a dangling pointer.
struct TokenSink {
    DagRun* run = nullptr;
};

class DagRun {
  public:
    DagRun(const Workflow& wf, InferenceBackend& backend, const RunOptions& opt);
    ~DagRun() { sink_->run = nullptr; }
    RunResult run();
    bool on_token(int task, const TokenEvent& ev);

  private:
    double now() const { return clock_() - t0_; }
    const Agent& agent(int t) const { return wf_.agent_of(t); }

    bool should_stop(std::string& why) const;
    void stop_all(const std::string& why);
    bool submit_ready();
    bool may_admit(int task) const;
    void submit(int task);
    Request make_request(int task) const;
    void on_output(const RequestOutput& out);
    void check_deadlines();
    void check_lost();
    void end_attempt(int task, TraceRecord rec, const std::string& text);
    void give_up(int task, const std::string& error);
    void finish_task(int task, TaskStatus status, std::string output, std::string error);
    TraceRecord record(int task, const Attempt& a, const RequestStats* st) const;
    std::string timeout_message(int task) const;
    void sample_memory();

    const Workflow& wf_;
    InferenceBackend& backend_;
    const RunOptions& opt_;
    std::function<double()> clock_;
    std::function<uint64_t()> memory_bytes_;
    InputValues inputs_;
    std::string run_id_;
    std::string namespace_;
    double t0_ = 0;
    double cpu0_ = 0;

    std::vector<TaskRun> tasks_;
    std::map<RequestId, int> inflight_;  // request -> task
    std::shared_ptr<TokenSink> sink_ = std::make_shared<TokenSink>();
    std::vector<TraceRecord> trace_;
    bool stopping_ = false;
    std::string stop_reason_;
    bool memory_pressure_ = false;
    uint64_t peak_rss_ = 0;
    uint64_t peak_kv_ = 0;
};

DagRun::DagRun(const Workflow& wf, InferenceBackend& backend, const RunOptions& opt)
    : wf_(wf), backend_(backend), opt_(opt) {
    if (!opt.render) throw Error("run_workflow: no chat renderer given");
    clock_ = opt.clock_ms ? opt.clock_ms : [] { return now_ms(); };
    memory_bytes_ = opt.memory_bytes ? opt.memory_bytes : [] { return current_rss_bytes(); };
    inputs_ = resolve_inputs(wf, opt.inputs);
    run_id_ = opt.run_id.empty() ? random_run_id() : opt.run_id;
    namespace_ = cache_namespace(wf);
    tasks_.resize(wf.tasks.size());
    for (size_t i = 0; i < wf.tasks.size(); ++i) {
        tasks_[i].result.id = wf.tasks[i].id;
        tasks_[i].result.agent = wf.tasks[i].agent;
    }
    sink_->run = this;
}

RunResult DagRun::run() {
    t0_ = clock_();
    cpu0_ = process_cpu_seconds();
    sample_memory();
    for (;;) {
        std::string why;
        if (!stopping_ && should_stop(why)) stop_all(why);
        if (!stopping_)
            while (submit_ready()) {
            }
        if (inflight_.empty()) break;
        const std::vector<RequestOutput> outs = backend_.step();
        sample_memory();
        for (const RequestOutput& o : outs) on_output(o);
        check_deadlines();
        check_lost();
    }
    for (size_t t = 0; t < tasks_.size(); ++t) {
        // Only a stopped run leaves tasks unfinished: a validated DAG always has a ready task.
        TROUPE_CHECK(stopping_ || is_terminal(tasks_[t].result.status));
        if (!is_terminal(tasks_[t].result.status))
            finish_task(int(t), TaskStatus::Cancelled, "", stop_reason_);
    }

    RunResult res;
    for (TaskRun& t : tasks_) res.tasks.push_back(std::move(t.result));
    res.trace = std::move(trace_);
    res.cancelled = stopping_;
    RunSummary& s = res.summary;
    s.run_id = run_id_;
    s.mode = opt_.mode_name();
    s.wall_ms = now();
    summarize(wf_, res.tasks, res.trace, s);
    if (!opt_.memory_bytes) peak_rss_ = std::max(peak_rss_, peak_rss_bytes());
    s.peak_rss_bytes = peak_rss_;
    s.peak_kv_bytes = peak_kv_;
    s.cpu_seconds = process_cpu_seconds() - cpu0_;
    return res;
}

bool DagRun::should_stop(std::string& why) const {
    if (opt_.cancel && opt_.cancel->load()) {
        why = "run cancelled";
        return true;
    }
    if (opt_.deadline_s > 0 && now() >= opt_.deadline_s * 1000.0) {
        why = "run deadline reached";
        return true;
    }
    return false;
}

void DagRun::stop_all(const std::string& why) {
    stopping_ = true;
    stop_reason_ = why;
    for (auto& [id, t] : inflight_) {
        Attempt& a = *tasks_[size_t(t)].attempt;
        if (a.cancelling) continue;
        backend_.cancel(id);
        a.cancelling = true;
        a.cancel_reason = "cancelled";
        a.abandon_ms = now() + opt_.cancel_grace_ms;
    }
    for (size_t t = 0; t < tasks_.size(); ++t)
        if (tasks_[t].result.status == TaskStatus::Waiting)
            finish_task(int(t), TaskStatus::Cancelled, "", why);
}

// Submits what may run now; true if a task became terminal without a request in flight
// (blocked, or refused by the engine), which may make more tasks ready.
bool DagRun::submit_ready() {
    std::vector<int> ready;
    bool changed = false;
    for (int t : wf_.topo_order) {
        TaskRun& tr = tasks_[size_t(t)];
        if (tr.result.status != TaskStatus::Waiting) continue;
        bool deps_done = true;
        int blocked_by = -1;
        for (int d : wf_.tasks[size_t(t)].deps) {
            const TaskStatus ds = tasks_[size_t(d)].result.status;
            deps_done = deps_done && is_terminal(ds);
            if (is_terminal(ds) && !is_success(ds) && blocked_by < 0) blocked_by = d;
        }
        if (blocked_by >= 0) {
            const TaskResult& dep = tasks_[size_t(blocked_by)].result;
            finish_task(t, TaskStatus::Blocked, "",
                        "dependency '" + dep.id + "' " + task_status_name(dep.status));
            changed = true;
        } else if (deps_done) {
            ready.push_back(t);
        }
    }
    std::stable_sort(ready.begin(), ready.end(), [&](int a, int b) {
        const int pa = wf_.task_priority(a), pb = wf_.task_priority(b);
        return pa != pb ? pa > pb : a < b;
    });
    for (int t : ready) {
        if (!may_admit(t)) break;  // later ones have no higher priority
        submit(t);
        changed = changed || is_terminal(tasks_[size_t(t)].result.status);
    }
    return changed;
}

bool DagRun::may_admit(int task) const {
    if (inflight_.empty()) return true;  // progress is always possible
    if (!opt_.batching) return false;
    if (!memory_pressure_) return true;
    for (const auto& [id, t] : inflight_)
        if (wf_.task_priority(t) >= wf_.task_priority(task)) return false;
    return true;
}

Request DagRun::make_request(int task) const {
    const AgentSettings& s = agent(task).settings;
    const TaskRun& tr = tasks_[size_t(task)];
    Request r;
    r.prompt_text = *tr.prompt;
    r.sampling = s.sampling;
    r.max_tokens = s.max_tokens;
    r.stop = s.stop;
    r.ignore_eos = opt_.ignore_eos;
    r.priority = wf_.task_priority(task);
    r.cache_namespace = namespace_;
    if (!opt_.prefix_cache)  // a namespace of its own: nothing is shared with anyone
        r.cache_namespace += "/" + run_id_ + "/" + wf_.tasks[size_t(task)].id + "/" +
                             std::to_string(tr.result.attempts);
    r.tag = cache_key(wf_, task);
    return r;
}

void DagRun::submit(int task) {
    TaskRun& tr = tasks_[size_t(task)];
    if (!tr.prompt) {
        try {
            std::vector<UpstreamResult> upstream(wf_.tasks.size());
            for (int d : wf_.tasks[size_t(task)].deps)
                upstream[size_t(d)] = {tasks_[size_t(d)].result.output,
                                       tasks_[size_t(d)].result.failed};
            tr.prompt = opt_.render(layout_task(wf_, task, inputs_, upstream));
        } catch (const Error& e) {
            give_up(task, std::string("cannot build the prompt: ") + e.what());
            return;
        }
    }
    Attempt a;
    a.submit_ms = now();
    a.deadline_ms = a.submit_ms + agent(task).settings.timeout_s * 1000.0;
    if (tr.result.start_ms < 0) tr.result.start_ms = a.submit_ms;
    const int attempt_index = tr.result.attempts++;
    if (opt_.events.on_submit) opt_.events.on_submit(task, attempt_index);
    auto sink = sink_;
    TokenCallback cb = [sink, task](const TokenEvent& ev) {
        return sink->run != nullptr && sink->run->on_token(task, ev);
    };
    try {
        a.id = backend_.submit(make_request(task), std::move(cb));
    } catch (const Error& e) {
        TraceRecord rec = record(task, a, nullptr);
        rec.status = "rejected";
        rec.error = e.what();
        trace_.push_back(rec);
        if (opt_.events.on_trace) opt_.events.on_trace(rec);
        give_up(task, std::string("the engine refused the request: ") + e.what());
        return;
    }
    tr.attempt = a;
    tr.result.status = TaskStatus::Running;
    inflight_[a.id] = task;
}

bool DagRun::on_token(int task, const TokenEvent& ev) {
    TaskRun& tr = tasks_[size_t(task)];
    const auto it = inflight_.find(ev.id);
    if (it == inflight_.end() || it->second != task || !tr.attempt) return false;
    Attempt& a = *tr.attempt;
    if (a.cancelling) return false;
    if (a.n_tokens++ == 0) a.first_token_ms = now();
    if (opt_.events.on_text && !ev.text.empty()) opt_.events.on_text(task, ev.text);
    return true;
}

TraceRecord DagRun::record(int task, const Attempt& a, const RequestStats* st) const {
    TraceRecord r;
    r.request_id = a.id;
    r.run_id = run_id_;
    r.task_id = wf_.tasks[size_t(task)].id;
    r.agent_id = wf_.tasks[size_t(task)].agent;
    r.cache_key = cache_key(wf_, task);
    r.retries = tasks_[size_t(task)].result.attempts - 1;
    r.start_ms = a.submit_ms;
    r.end_ms = now();
    r.latency_ms = r.end_ms - r.start_ms;
    r.memory_mb = double(memory_bytes_()) / kMiB;
    if (st) {
        r.prompt_tokens = st->prompt_tokens;
        r.prefix_tokens = st->cached_tokens;
        r.generated_tokens = st->generated_tokens;
        r.queue_ms = st->queue_ms;
        r.ttft_ms = st->generated_tokens > 0 ? st->ttft_ms : -1;
    } else {  // never reported: what the runtime itself saw
        r.generated_tokens = a.n_tokens;
        r.ttft_ms = a.first_token_ms >= 0 ? a.first_token_ms - a.submit_ms : -1;
    }
    r.cache_hit = r.prefix_tokens > 0;
    return r;
}

std::string DagRun::timeout_message(int task) const {
    char buf[64];
    std::snprintf(buf, sizeof buf, "no answer within %g s", agent(task).settings.timeout_s);
    return buf;
}

void DagRun::on_output(const RequestOutput& out) {
    const auto it = inflight_.find(out.id);
    if (it == inflight_.end()) return;  // abandoned earlier, or not ours
    const int task = it->second;
    const Attempt& a = *tasks_[size_t(task)].attempt;
    TraceRecord rec = record(task, a, &out.stats);
    rec.finish = finish_reason_name(out.finish);
    const bool complete = out.finish == FinishReason::Eos || out.finish == FinishReason::Stop ||
                          out.finish == FinishReason::Length;
    if (complete) {  // even if a cancel crossed it: a complete answer is kept
        rec.status = "ok";
    } else if (a.cancelling) {
        rec.status = a.cancel_reason;
        if (a.cancel_reason == "timeout") rec.error = timeout_message(task);
    } else {
        rec.status = "error";
        rec.error = out.finish == FinishReason::Error
                        ? out.error
                        : std::string("the engine ended it: ") + finish_reason_name(out.finish);
    }
    end_attempt(task, std::move(rec), out.text);
}

void DagRun::check_deadlines() {
    std::vector<std::pair<RequestId, int>> due;
    for (const auto& [id, t] : inflight_) due.push_back({id, t});
    for (const auto& [id, t] : due) {
        Attempt& a = *tasks_[size_t(t)].attempt;
        const double tnow = now();
        if (!a.cancelling && tnow >= a.deadline_ms) {
            backend_.cancel(id);
            a.cancelling = true;
            a.cancel_reason = "timeout";
            a.abandon_ms = tnow + opt_.cancel_grace_ms;
        } else if (a.cancelling && tnow >= a.abandon_ms) {
            TraceRecord rec = record(t, a, nullptr);
            rec.status = a.cancel_reason;
            rec.finish = "none";
            rec.error = (a.cancel_reason == "timeout" ? timeout_message(t) + "; " : "") +
                        "the engine did not confirm the cancellation (abandoned)";
            end_attempt(t, std::move(rec), "");
        }
    }
}

void DagRun::check_lost() {
    if (inflight_.empty() || backend_.has_work()) return;
    std::vector<std::pair<RequestId, int>> lost(inflight_.begin(), inflight_.end());
    for (const auto& [id, t] : lost) {
        TraceRecord rec = record(t, *tasks_[size_t(t)].attempt, nullptr);
        const bool cancelled = tasks_[size_t(t)].attempt->cancelling;
        rec.status = cancelled ? tasks_[size_t(t)].attempt->cancel_reason : "error";
        rec.finish = "none";
        rec.error = "the engine dropped the request without reporting it";
        end_attempt(t, std::move(rec), "");
    }
}

void DagRun::end_attempt(int task, TraceRecord rec, const std::string& text) {
    TaskRun& tr = tasks_[size_t(task)];
    inflight_.erase(tr.attempt->id);
    tr.attempt.reset();
    tr.result.status = TaskStatus::Waiting;
    const std::string status = rec.status, error = rec.error;
    trace_.push_back(std::move(rec));
    if (opt_.events.on_trace) opt_.events.on_trace(trace_.back());

    if (status == "ok") return finish_task(task, TaskStatus::Ok, text, "");
    if (status == "cancelled" || stopping_)
        return finish_task(task, TaskStatus::Cancelled, "", stop_reason_);
    tr.result.error = error;
    if (tr.result.attempts <= agent(task).settings.retries) return;  // Waiting: retry is due
    give_up(task, error);
}

// After the last attempt failed: the agent's fallback decides what dependents see.
void DagRun::give_up(int task, const std::string& error) {
    const Fallback& fb = agent(task).settings.fallback;
    switch (fb.kind) {
        case FallbackKind::Text:
            return finish_task(task, TaskStatus::Fallback, fb.text, error);
        case FallbackKind::Skip:
            return finish_task(task, TaskStatus::Skipped, "", error);
        case FallbackKind::None:
            return finish_task(task, TaskStatus::Failed, "", error);
    }
}

void DagRun::finish_task(int task, TaskStatus status, std::string output, std::string error) {
    TaskResult& r = tasks_[size_t(task)].result;
    r.status = status;
    r.output = std::move(output);
    r.failed = status != TaskStatus::Ok;
    r.error = status == TaskStatus::Ok ? "" : std::move(error);
    r.end_ms = now();
    r.latency_ms = r.start_ms >= 0 ? r.end_ms - r.start_ms : 0;
    if (opt_.events.on_task_done) opt_.events.on_task_done(task, r);
}

void DagRun::sample_memory() {
    const EngineStats st = backend_.stats();
    peak_kv_ = std::max({peak_kv_, st.peak_kv_bytes, st.kv_bytes_used});
    peak_rss_ = std::max({peak_rss_, st.peak_rss_bytes, memory_bytes_()});
    memory_pressure_ =
        st.kv_bytes_total > 0 &&
        double(st.kv_bytes_used) > opt_.memory_high_water * double(st.kv_bytes_total);
}

}  // namespace

RunResult run_workflow(const Workflow& wf, InferenceBackend& backend, const RunOptions& options) {
    DagRun run(wf, backend, options);
    return run.run();
}

}  // namespace troupe::workflow
