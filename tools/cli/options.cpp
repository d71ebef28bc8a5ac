#include "options.h"

#include <random>

#include "kv/kv_storage.h"

namespace troupe::cli {

void add_model_option(CLI::App* cmd, std::string& path) {
    path = TROUPE_DEFAULT_MODEL;
    cmd->add_option("-m,--model", path, "GGUF model file (default: the bundled model)");
}

void add_sampling_options(CLI::App* cmd, SamplingParams& p, bool& seed_given) {
    cmd->add_option("--temp", p.temperature, "Temperature; 0 = greedy")->capture_default_str();
    cmd->add_option("--top-k", p.top_k, "Top-k; 0 = off")->capture_default_str();
    cmd->add_option("--top-p", p.top_p, "Top-p; 1 = off")->capture_default_str();
    cmd->add_option("--min-p", p.min_p, "Min-p; 0 = off")->capture_default_str();
    cmd->add_option("--repeat-penalty", p.repeat_penalty, "Repetition penalty; 1 = off")
        ->capture_default_str();
    cmd->add_option("--repeat-last-n", p.repeat_last_n,
                    "Tokens the penalties look back at; -1 = all")
        ->capture_default_str();
    cmd->add_option("--frequency-penalty", p.frequency_penalty, "Frequency penalty; 0 = off")
        ->capture_default_str();
    cmd->add_option("--presence-penalty", p.presence_penalty, "Presence penalty; 0 = off")
        ->capture_default_str();
    cmd->add_option_function<uint64_t>(
        "--seed",
        [&p, &seed_given](uint64_t s) {
            p.seed = s;
            seed_given = true;
        },
        "Random seed (default: random)");
}

void add_kv_type_option(CLI::App* cmd, DType& type) {
    cmd->add_option_function<std::string>(
        "--kv-type",
        [&type](const std::string& t) {
            if (t == "f16")
                type = DType::F16;
            else if (t == "bf16")
                type = DType::BF16;
            else if (t == "f32")
                type = DType::F32;
            else
                throw CLI::ValidationError("--kv-type", "must be f16, bf16 or f32");
        },
        "KV cache type: f16 (default), bf16 (queries rounded to bf16 too; scores by BF16 dot "
        "products where the CPU has them) or f32");
}

void add_engine_options(CLI::App* cmd, EngineConfig& c) {
    cmd->add_option("-t,--threads", c.n_threads, "Threads; 0 = all hardware threads")
        ->capture_default_str();
    cmd->add_option("-c,--ctx", c.n_ctx, "Max tokens per sequence; 0 = the model's context length")
        ->capture_default_str();
    cmd->add_option_function<double>(
        "--kv-budget-mb", [&c](double mb) { c.kv_budget_bytes = uint64_t(mb * 1024 * 1024); },
        "KV cache memory budget in MiB (default: 1/8 of physical memory)");
    add_kv_type_option(cmd, c.kv_type);
    cmd->add_flag("--kv-prefault", c.kv_prefault,
                  "Make the whole KV budget resident at start (no page faults while serving)");
    cmd->add_option("--block-size", c.block_size, "Tokens per KV block")->capture_default_str();
    cmd->add_option("--batch-tokens", c.max_num_batched_tokens, "Tokens per forward pass")
        ->capture_default_str();
    cmd->add_flag("--no-prefix-cache{false}", c.enable_prefix_caching,
                  "Do not reuse the KV of equal prompt prefixes");
    cmd->add_flag("--no-shared-attention{false}", c.shared_prefix_attention,
                  "Attend to shared prefix blocks per sequence instead of once per batch");
    cmd->add_option_function<std::string>(
        "--power",
        [&c](const std::string& name) {
            const auto m = power_mode_from_name(name);
            if (!m)
                throw CLI::ValidationError("--power", "must be performance, balanced or low-power");
            c.power = *m;
        },
        "Power profile: performance (default), balanced, low-power");
}

uint64_t random_seed() {
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ rd();
}

}  // namespace troupe::cli
