#include "run_view.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include "util/timer.h"

namespace troupe::cli {

using namespace troupe::workflow;

namespace {

// The last `max_bytes` of `s` on one line, cut at a UTF-8 character boundary.
std::string tail_one_line(const std::string& s, size_t max_bytes) {
    std::string flat;
    for (char c : s) flat += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
    if (flat.size() <= max_bytes) return flat;
    size_t from = flat.size() - max_bytes;
    while (from < flat.size() && (static_cast<unsigned char>(flat[from]) & 0xC0) == 0x80) ++from;
    return "..." + flat.substr(from);
}

}  // namespace

RunView::Style RunView::pick_style(FILE* out, bool quiet) {
    if (quiet) return Style::Quiet;
    return ::isatty(::fileno(out)) ? Style::Live : Style::Labelled;
}

RunView::RunView(const Workflow& wf, Style style, FILE* out)
    : wf_(wf), style_(style), out_(out), rows_(wf.tasks.size()) {
    struct winsize ws {};
    if (style_ == Style::Live && ::ioctl(::fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 40)
        columns_ = ws.ws_col;
}

void RunView::attach(RunEvents& events) {
    if (style_ == Style::Quiet) return;
    events.on_submit = [this](int t, int attempt) { on_submit(t, attempt); };
    events.on_text = [this](int t, std::string_view text) { on_text(t, text); };
    events.on_task_done = [this](int t, const TaskResult& r) { on_done(t, r); };
}

void RunView::on_submit(int task, int attempt) {
    Row& r = rows_[size_t(task)];
    r.state = attempt == 0 ? "running" : "retry " + std::to_string(attempt);
    r.attempts = attempt + 1;
    r.text.clear();
    r.n_pieces = 0;
    if (r.start_ms < 0) r.start_ms = now_ms();
    if (style_ == Style::Labelled && attempt > 0) {
        std::fprintf(out_, "%s[%s] retry %d\n", last_task_ >= 0 ? "\n" : "",
                     wf_.tasks[size_t(task)].id.c_str(), attempt);
        last_task_ = -1;
    }
    redraw(false);
}

void RunView::on_text(int task, std::string_view text) {
    Row& r = rows_[size_t(task)];
    r.text += text;
    ++r.n_pieces;
    if (style_ == Style::Labelled) {
        if (last_task_ != task)
            std::fprintf(out_, "%s[%s] ", last_task_ >= 0 ? "\n" : "",
                         wf_.tasks[size_t(task)].id.c_str());
        last_task_ = task;
        std::fwrite(text.data(), 1, text.size(), out_);
        std::fflush(out_);
        return;
    }
    redraw(false);
}

void RunView::on_done(int task, const TaskResult& res) {
    Row& r = rows_[size_t(task)];
    r.state = task_status_name(res.status);
    r.end_ms = now_ms();
    if (style_ == Style::Labelled) {
        std::fprintf(out_, "%s[%s] %s in %.0f ms%s%s\n", last_task_ >= 0 ? "\n" : "",
                     res.id.c_str(), r.state.c_str(), res.latency_ms, res.error.empty() ? "" : ": ",
                     res.error.c_str());
        std::fflush(out_);
        last_task_ = -1;
        return;
    }
    redraw(false);
}

std::string RunView::row_line(size_t t, double now) const {
    const Row& r = rows_[t];
    const double ms = r.start_ms < 0 ? 0 : (r.end_ms >= 0 ? r.end_ms : now) - r.start_ms;
    const char* mark = r.state == "ok"        ? "+"
                       : r.state == "running" ? ">"
                       : r.state == "waiting" ? " "
                                              : "!";
    char head[160];
    std::snprintf(head, sizeof head, " %s %-14.14s %-12.12s %-9.9s %4d tok %6.1fs  ", mark,
                  wf_.tasks[t].id.c_str(), wf_.tasks[t].agent.c_str(), r.state.c_str(), r.n_pieces,
                  ms / 1000.0);
    const int room = columns_ - 1 - int(std::string(head).size());
    return head + (room > 8 ? tail_one_line(r.text, size_t(room - 3)) : std::string());
}

void RunView::redraw(bool force) {
    if (style_ != Style::Live) return;
    const double now = now_ms();
    if (!force && drawn_ && now - last_draw_ms_ < 100) return;
    last_draw_ms_ = now;
    if (drawn_) std::fprintf(out_, "\x1b[%zuA", rows_.size());  // back to the first row
    for (size_t t = 0; t < rows_.size(); ++t)
        std::fprintf(out_, "\r\x1b[2K%s\n", row_line(t, now).c_str());
    std::fflush(out_);
    drawn_ = true;
}

void RunView::finish(const RunResult& result) {
    if (style_ == Style::Quiet) return;
    if (style_ == Style::Labelled) {
        if (last_task_ >= 0) std::fprintf(out_, "\n");
        return;
    }
    redraw(true);
    for (const TaskResult& t : result.tasks) {
        std::fprintf(out_, "\n== %s (%s, %s)\n", t.id.c_str(), t.agent.c_str(),
                     task_status_name(t.status));
        if (!t.error.empty()) std::fprintf(out_, "(%s)\n", t.error.c_str());
        std::fprintf(out_, "%s\n", t.output.c_str());
    }
    std::fflush(out_);
}

}  // namespace troupe::cli
