// troupe generate: one prompt through the engine, text streamed to stdout (or one JSON object
// with --json).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "engine/engine.h"
#include "options.h"
#include "prompt.h"
#include "util/error.h"

namespace troupe::cli {

namespace {

struct GenerateOptions {
    std::string model;
    std::string prompt;
    std::string system;
    std::string chat_template;
    bool chat = false;
    int n_predict = 128;
    bool ignore_eos = false;
    bool json = false;
    std::vector<std::string> stop;
    SamplingParams sampling;
    bool seed_given = false;
    EngineConfig engine;
};

void run_generate(GenerateOptions& o) {
    const auto model = Model::load(o.model);
    if (!o.seed_given) o.sampling.seed = random_seed();
    o.engine.max_num_seqs = 1;
    Engine engine(*model, o.engine);

    Request req;
    req.prompt_text =
        o.chat ? render_chat_prompt(*model, o.system, o.prompt, o.chat_template) : o.prompt;
    req.sampling = o.sampling;
    req.max_tokens = o.n_predict;
    req.ignore_eos = o.ignore_eos;
    req.stop = o.stop;
    TokenCallback stream;
    if (!o.json)
        stream = [](const TokenEvent& e) {
            std::fwrite(e.text.data(), 1, e.text.size(), stdout);
            std::fflush(stdout);
            return true;
        };
    engine.submit(req, stream);
    std::vector<RequestOutput> outs = engine.run_until_done();
    const RequestOutput& out = outs.at(0);
    if (out.finish == FinishReason::Error) throw Error(out.error);

    const RequestStats& st = out.stats;
    const double prompt_s = st.ttft_ms / 1000.0;
    const double decode_s = (st.latency_ms - st.ttft_ms) / 1000.0;
    const int n_decoded = std::max(0, st.generated_tokens - 1);  // the first token ends prefill
    const double prompt_tps = prompt_s > 0 ? st.prompt_tokens / prompt_s : 0.0;
    const double decode_tps = decode_s > 0 && n_decoded > 0 ? n_decoded / decode_s : 0.0;
    if (o.json) {
        nlohmann::json j;
        j["prompt_tokens"] = out.prompt;
        j["tokens"] = out.tokens;
        j["text"] = out.text;
        j["finish_reason"] = finish_reason_name(out.finish);
        j["seed"] = o.sampling.seed;
        j["timings"] = {
            {"prompt_tokens", st.prompt_tokens},       {"prompt_ms", st.ttft_ms},
            {"prompt_tokens_per_s", prompt_tps},       {"decode_tokens", n_decoded},
            {"decode_ms", st.latency_ms - st.ttft_ms}, {"decode_tokens_per_s", decode_tps}};
        std::printf("%s\n",
                    j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
        std::printf("\n");
        std::fprintf(stderr,
                     "\nprompt: %d tokens in %.1f ms (%.1f tokens/s); generated: %d tokens, "
                     "decode %.1f tokens/s; finish: %s\n",
                     st.prompt_tokens, st.ttft_ms, prompt_tps, st.generated_tokens, decode_tps,
                     finish_reason_name(out.finish));
    }
}

}  // namespace

void add_generate_command(CLI::App& app) {
    auto o = std::make_shared<GenerateOptions>();
    CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt");
    add_model_option(cmd, o->model);
    cmd->add_option("-p,--prompt", o->prompt, "Prompt text")->required();
    cmd->add_option("-n,--n-predict", o->n_predict, "Max tokens to generate")
        ->capture_default_str();
    cmd->add_flag("--chat", o->chat, "Wrap the prompt as a user message in the chat template");
    cmd->add_option("--system", o->system, "System message (with --chat)");
    cmd->add_option("--chat-template", o->chat_template,
                    "Use a built-in chat template by name instead of the model's");
    cmd->add_flag("--ignore-eos", o->ignore_eos, "Generate exactly N tokens");
    cmd->add_option("--stop", o->stop, "Stop string (repeatable)");
    cmd->add_flag("--json", o->json, "Print one JSON object instead of streaming");
    add_sampling_options(cmd, o->sampling, o->seed_given);
    add_engine_options(cmd, o->engine);
    cmd->callback([o] { run_generate(*o); });
}

}  // namespace troupe::cli
