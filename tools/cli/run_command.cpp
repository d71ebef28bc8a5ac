#include "run_command.h"

#include <algorithm>
#include <fstream>

#include "input_flags.h"
#include "run_view.h"
#include "util/error.h"
#include "workflow/run_report.h"
#include "workflow/runtime.h"
#include "workflow/workflow_loader.h"

namespace troupe::cli {

using namespace troupe::workflow;

namespace {

struct Mode {
    bool prefix_cache = true;
    bool batching = true;
};

struct Context {
    const RunCommandOptions& o;
    const Workflow& wf;
    const InputValues& inputs;
    const BackendFactory& make_backend;
    const ModelText& model_text;
    FILE* out;
    std::ofstream* trace;  // null: no trace file
    const std::atomic<bool>* cancel;
    bool show = true;  // progress view (else quiet)
};

RunResult run_mode(const Context& c, Mode mode) {
    BackendOptions bo;
    bo.model_path = c.o.model_path;
    bo.n_threads = c.o.n_threads;
    bo.prefix_cache = mode.prefix_cache;
    bo.batching = mode.batching;
    bo.shared_attention = !c.o.no_shared_attention;
    std::unique_ptr<InferenceBackend> backend = c.make_backend(bo);

    RunOptions ro;
    ro.inputs = c.inputs;
    ro.render = c.model_text.render;
    ro.prefix_cache = mode.prefix_cache;
    ro.batching = mode.batching;
    ro.ignore_eos = c.o.ignore_eos;
    ro.deadline_s = c.o.deadline_s;
    ro.cancel = c.cancel;
    RunView view(c.wf, RunView::pick_style(c.out, c.o.json || !c.show), c.out);
    view.attach(ro.events);
    if (c.trace)
        ro.events.on_trace = [t = c.trace](const TraceRecord& r) {
            *t << to_json_line(r) << '\n';
            t->flush();
        };
    RunResult r = run_workflow(c.wf, *backend, ro);
    view.finish(r);
    return r;
}

int exit_code(const RunResult& r) {
    if (r.cancelled) return kExitCancelled;
    return r.ok() ? 0 : kExitTasksFailed;
}

bool all_greedy(const Workflow& wf) {
    for (const Agent& a : wf.agents)
        if (!a.settings.sampling.is_greedy()) return false;
    return true;
}

// Tasks whose outputs differ between two runs of the same workflow.
std::vector<std::string> differing_tasks(const RunResult& a, const RunResult& b) {
    std::vector<std::string> out;
    for (size_t i = 0; i < a.tasks.size(); ++i)
        if (a.tasks[i].output != b.tasks[i].output) out.push_back(a.tasks[i].id);
    return out;
}

void print_json(FILE* out, const nlohmann::ordered_json& j) {
    const std::string s = j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    std::fprintf(out, "%s\n", s.c_str());
}

// The run whose wall time is the median of the runs left after dropping the fastest and the
// slowest (the seed's protocol: 10 runs, drop min and max, median of 8); with fewer than 3
// runs nothing is dropped.
size_t median_run(const std::vector<RunResult>& runs) {
    std::vector<size_t> order(runs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return runs[a].summary.wall_ms < runs[b].summary.wall_ms;
    });
    const size_t drop = runs.size() >= 3 ? 1 : 0;
    const size_t kept = runs.size() - 2 * drop;
    return order[drop + (kept - 1) / 2];
}

size_t shown_run(const std::vector<RunResult>& runs) {
    for (size_t i = 0; i < runs.size(); ++i)
        if (runs[i].summary.n_tasks_failed > 0) return i;
    return median_run(runs);
}

nlohmann::ordered_json walls(const std::vector<RunResult>& runs) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const RunResult& r : runs) j.push_back(r.summary.wall_ms);
    return j;
}

int compare_with_baseline(const Context& c) {
    const int n = std::max(1, c.o.repeat);
    std::vector<RunResult> base, opt;
    for (int i = 0; i < n; ++i) {
        // Only the first pair is shown as it runs; later ones print one line each.
        Context quiet = c;
        quiet.show = i == 0 && !c.o.json;
        if (quiet.show) std::fprintf(c.out, "== baseline: one task at a time, no prefix reuse\n");
        base.push_back(run_mode(quiet, {false, false}));
        if (base.back().cancelled) return kExitCancelled;
        if (quiet.show) std::fprintf(c.out, "\n== optimised: shared prefix, batched\n");
        opt.push_back(run_mode(quiet, {true, true}));
        if (opt.back().cancelled) return kExitCancelled;
        if (n > 1 && !c.o.json)
            std::fprintf(c.out, "run %d/%d: baseline %.1f ms, optimised %.1f ms\n", i + 1, n,
                         base.back().summary.wall_ms, opt.back().summary.wall_ms);
    }
    // The median runs, or a run with failed tasks when there is one: its time proves nothing
    // (it did less work), and the comparison then says so instead of giving a speed-up.
    const RunResult& b = base[shown_run(base)];
    const RunResult& o = opt[shown_run(opt)];

    const bool greedy = all_greedy(c.wf) && !c.o.ignore_eos;
    const std::vector<std::string> diff = differing_tasks(o, b);
    if (c.o.json) {
        nlohmann::ordered_json j = run_to_json(o);
        j["baseline"] = run_to_json(b);
        const double x = speedup(o.summary, b.summary);  // 0: a run had failed tasks
        j["speedup"] = x > 0 ? nlohmann::ordered_json(x) : nlohmann::ordered_json(nullptr);
        j["same_outputs"] = diff.empty();
        j["runs"] = {{"baseline_wall_ms", walls(base)}, {"optimised_wall_ms", walls(opt)}};
        print_json(c.out, j);
    } else {
        if (n > 1)
            std::fprintf(c.out, "\nmedian runs of %d%s:", n,
                         n >= 3 ? " (fastest and slowest dropped)" : "");
        std::fprintf(c.out, "\n%s", format_comparison(o.summary, b.summary).c_str());
        std::string list;
        for (const std::string& t : diff) list += (list.empty() ? "" : ", ") + t;
        if (diff.empty())
            std::fprintf(c.out, "outputs: identical in both runs\n");
        else
            std::fprintf(c.out, "outputs: %zu of %zu tasks differ (%s)%s\n", diff.size(),
                         o.tasks.size(), list.c_str(),
                         greedy ? "" : "; expected, sampling is not greedy");
    }
    int code = 0;
    for (size_t i = 0; i < base.size(); ++i)
        code = std::max({code, exit_code(base[i]), exit_code(opt[i])});
    return code;
}

}  // namespace

int run_command(const RunCommandOptions& o, const BackendFactory& make_backend,
                const ModelText& model_text, FILE* out, const std::atomic<bool>* cancel) {
    if (o.compare_baseline && (o.baseline || o.no_prefix_cache || o.no_batching))
        throw Error(
            "--compare-baseline runs both modes itself; leave out --baseline, "
            "--no-prefix-cache and --no-batching");
    const Workflow wf = load_workflow(o.workflow_path);
    const InputValues inputs = parse_input_flags(o.inputs);
    resolve_inputs(wf, inputs);  // unknown or missing inputs fail before the model loads
    std::ofstream trace;
    if (!o.trace_path.empty()) {
        trace.open(o.trace_path, std::ios::out | std::ios::trunc);
        if (!trace) throw Error("cannot write the trace file '" + o.trace_path + "'");
    }
    const Context c{
        o,     wf, inputs, make_backend, model_text, out, o.trace_path.empty() ? nullptr : &trace,
        cancel};
    if (o.compare_baseline) return compare_with_baseline(c);

    const Mode mode{!(o.baseline || o.no_prefix_cache), !(o.baseline || o.no_batching)};
    const RunResult r = run_mode(c, mode);
    if (o.json) {
        print_json(out, run_to_json(r));
    } else {
        std::fprintf(out, "\nsummary of %s:\n%s", wf.name.c_str(),
                     format_summary(r.summary).c_str());
        if (!r.ok()) std::fprintf(out, "some tasks did not succeed: see their status above\n");
    }
    return exit_code(r);
}

}  // namespace troupe::cli
