#include "workflow/workflow.h"

namespace troupe::workflow {

namespace {
template <class T>
int index_of(const std::vector<T>& items, std::string T::*name, std::string_view key) {
    for (size_t i = 0; i < items.size(); ++i)
        if (items[i].*name == key) return int(i);
    return -1;
}
}  // namespace

int Workflow::find_task(std::string_view id) const {
    return index_of(tasks, &Task::id, id);
}
int Workflow::find_agent(std::string_view n) const {
    return index_of(agents, &Agent::name, n);
}
int Workflow::find_input(std::string_view n) const {
    return index_of(inputs, &Input::name, n);
}

int Workflow::task_priority(int task) const {
    const Task& t = tasks[size_t(task)];
    return t.priority ? *t.priority : agent_of(task).settings.priority;
}

}  // namespace troupe::workflow
