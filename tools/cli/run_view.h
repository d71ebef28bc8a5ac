// What `troupe run` shows while a workflow runs.
//
//   Live      on a terminal: one line per task (state, agent, tokens, time, the tail of its
//             output), redrawn in place at most every 100 ms; the full outputs at the end.
//   Labelled  otherwise: the streamed text itself, with "[task]" written whenever the output
//             switches to another task, and one line as each task ends.
//   Quiet     nothing (--json prints one object at the end instead).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "workflow/run_result.h"
#include "workflow/runtime.h"
#include "workflow/workflow.h"

namespace troupe::cli {

class RunView {
  public:
    enum class Style { Live, Labelled, Quiet };

    // Live when `out` is a terminal, else Labelled; Quiet when quiet is set.
    static Style pick_style(FILE* out, bool quiet);

    RunView(const workflow::Workflow& wf, Style style, FILE* out);

    // Sets the progress callbacks of `events` (on_submit, on_text, on_task_done).
    void attach(workflow::RunEvents& events);

    // The final state and, in Live style, every task's full output.
    void finish(const workflow::RunResult& result);

  private:
    struct Row {
        std::string state = "waiting";
        int attempts = 0;
        int n_pieces = 0;  // streamed text events, about one per token
        double start_ms = -1;
        double end_ms = -1;
        std::string text;  // streamed so far (current attempt)
    };
    void on_submit(int task, int attempt);
    void on_text(int task, std::string_view text);
    void on_done(int task, const workflow::TaskResult& r);
    void redraw(bool force);
    std::string row_line(size_t task, double now) const;

    const workflow::Workflow& wf_;
    Style style_;
    FILE* out_;
    std::vector<Row> rows_;
    int last_task_ = -1;  // Labelled: whose text was written last
    bool drawn_ = false;  // Live: the rows are on screen
    double last_draw_ms_ = 0;
    int columns_ = 100;
};

}  // namespace troupe::cli
