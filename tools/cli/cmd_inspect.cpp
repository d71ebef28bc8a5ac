// troupe inspect MODEL: the file's metadata and a summary of its tensor table.
#include <cstdio>
#include <map>
#include <string>

#include "commands.h"
#include "gguf/gguf.h"

namespace troupe::cli {

namespace {

struct InspectOptions {
    std::string model;
    bool all_tensors = false;
    size_t max_items = 8;
};

void run_inspect(const InspectOptions& o) {
    const auto g = GgufFile::open(o.model);
    std::printf("file: %s\n", o.model.c_str());
    std::printf("gguf version: %u, alignment: %u, data offset: %zu, size: %zu bytes\n",
                g->version(), g->alignment(), g->data_offset(), g->file_size());
    std::printf("\nmetadata (%zu keys):\n", g->metadata().size());
    for (const GgufKv& kv : g->metadata()) {
        std::string type = gguf_type_name(kv.value.type);
        std::printf("  %-44.*s %-8s %s\n", int(kv.key.size()), kv.key.data(), type.c_str(),
                    kv.value.to_string(o.max_items).c_str());
    }

    std::map<std::string, std::pair<int, size_t>> by_type;  // type -> (count, bytes)
    size_t total_bytes = 0;
    int64_t total_params = 0;
    for (const GgufTensor& t : g->tensors()) {
        auto& e = by_type[type_name(t.type)];
        e.first++;
        e.second += t.n_bytes;
        total_bytes += t.n_bytes;
        total_params += t.n_elements();
    }
    std::printf("\ntensors: %zu, %lld parameters, %.2f MiB of data\n", g->tensors().size(),
                (long long)total_params, double(total_bytes) / (1024.0 * 1024.0));
    for (const auto& [name, e] : by_type)
        std::printf("  %-8s %4d tensors %10.2f MiB\n", name.c_str(), e.first,
                    double(e.second) / (1024.0 * 1024.0));
    std::printf("\n");
    size_t shown = 0;
    for (const GgufTensor& t : g->tensors()) {
        // Without --all, show the first layer's tensors and every tensor outside the blocks.
        const std::string name(t.name);
        const bool in_block = name.rfind("blk.", 0) == 0;
        if (!o.all_tensors && in_block && name.rfind("blk.0.", 0) != 0) continue;
        std::printf("  %-36s %-8s %-20s %10zu bytes\n", name.c_str(), type_name(t.type),
                    t.shape_string().c_str(), t.n_bytes);
        ++shown;
    }
    if (shown < g->tensors().size())
        std::printf("  ... %zu more block tensors (use --all)\n", g->tensors().size() - shown);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
    auto o = std::make_shared<InspectOptions>();
    CLI::App* cmd = app.add_subcommand("inspect", "Print a GGUF file's metadata and tensor table");
    cmd->add_option("model", o->model, "GGUF model file")->required();
    cmd->add_flag("--all", o->all_tensors, "List every tensor");
    cmd->add_option("--max-items", o->max_items, "Array elements to show per key");
    cmd->callback([o] { run_inspect(*o); });
}

}  // namespace troupe::cli
