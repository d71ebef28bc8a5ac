// Tokenizer throughput: tokenize a fixed text (the shared held-out text by default) with each
// vocabulary, several repetitions, and report the median as MB/s and tokens/s.
//
//   troupe-bench-tokenizer [--text FILE] [--model GGUF]... [--reps N]
//
// Defaults: ../shared/models/heldout.txt, the bundled model's vocabulary (Llama-2 SPM, the
// shared models' tokenizer) and llama.cpp's Qwen2 vocabulary from .cache/llama-data.
// Prints one JSON object per vocabulary on stdout, and a human-readable line on stderr.
// Tokenization is done as the engine does it for prompts: add_special and parse_special on.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/timer.h"

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw troupe::Error("cannot open '" + path + "'");
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void bench_one(const std::string& model, const std::string& text_path, const std::string& text,
               int reps) {
    const double t_load0 = troupe::now_ms();
    const auto gguf = troupe::GgufFile::open(model);
    const auto tok = troupe::Tokenizer::from_gguf(*gguf);
    const double load_ms = troupe::now_ms() - t_load0;

    // Cold: the word cache emptied before each run (it still fills during the run, as it would
    // for one long document). Warm: the same text again, as when agents resend a prompt.
    std::vector<double> cold_ms, warm_ms, dec_ms;
    std::vector<int32_t> ids;
    for (int r = 0; r < reps; ++r) {
        tok->clear_cache();
        const double t0 = troupe::now_ms();
        ids = tok->tokenize(text, true, true);
        const double t1 = troupe::now_ms();
        const std::vector<int32_t> again = tok->tokenize(text, true, true);
        const double t2 = troupe::now_ms();
        const std::string back = tok->detokenize(ids, true);
        const double t3 = troupe::now_ms();
        if (again != ids) throw troupe::Error("tokens differ between a cold and a warm cache");
        cold_ms.push_back(t1 - t0);
        warm_ms.push_back(t2 - t1);
        dec_ms.push_back(t3 - t2);
    }
    const size_t n_tokens = ids.size();
    const double enc = median(cold_ms), warm = median(warm_ms), dec = median(dec_ms);
    const double mb = double(text.size()) / 1e6;
    const std::string name = std::filesystem::path(model).filename().string();
    const std::string pre = tok->vocab().pre_name();
    std::printf(
        "{\"bench\": \"tokenizer\", \"model\": \"%s\", \"tokenizer\": \"%.*s\", \"pre\": \"%s\", "
        "\"text\": \"%s\", \"text_bytes\": %zu, \"tokens\": %zu, \"reps\": %d, "
        "\"load_ms\": %.1f, \"tokenize_median_ms\": %.3f, \"tokenize_mb_per_s\": %.2f, "
        "\"tokenize_tokens_per_s\": %.0f, \"tokenize_warm_median_ms\": %.3f, "
        "\"tokenize_warm_mb_per_s\": %.2f, \"tokenize_warm_tokens_per_s\": %.0f, "
        "\"detokenize_median_ms\": %.3f, \"detokenize_mb_per_s\": %.2f}\n",
        name.c_str(), int(tok->model_name().size()), tok->model_name().data(), pre.c_str(),
        std::filesystem::path(text_path).filename().string().c_str(), text.size(), n_tokens, reps,
        load_ms, enc, mb / (enc / 1e3), double(n_tokens) / (enc / 1e3), warm, mb / (warm / 1e3),
        double(n_tokens) / (warm / 1e3), dec, mb / (dec / 1e3));
    std::fprintf(stderr,
                 "%-24s %-6.*s tokenize %6.2f MB/s %8.0f tok/s (cold cache, median of %d) | "
                 "warm %6.2f MB/s | detokenize %6.1f MB/s | load %.0f ms | %zu tokens\n",
                 name.c_str(), int(tok->model_name().size()), tok->model_name().data(),
                 mb / (enc / 1e3), double(n_tokens) / (enc / 1e3), reps, mb / (warm / 1e3),
                 mb / (dec / 1e3), load_ms, n_tokens);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"troupe-bench-tokenizer: tokenizer throughput (median MB/s and tokens/s)"};
    std::string text_path = std::string(TROUPE_SHARED_MODELS_DIR) + "/heldout.txt";
    std::vector<std::string> models;
    int reps = 10;
    app.add_option("--text", text_path, "Text file to tokenize");
    app.add_option("-m,--model", models, "GGUF file(s) whose vocabulary to use");
    app.add_option("--reps", reps, "Repetitions (the median is reported)")
        ->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);
    if (models.empty()) {
        models.push_back(std::string(TROUPE_SOURCE_DIR) + "/models/troupe-tiny-q8_0.gguf");
        models.push_back(std::string(TROUPE_VOCAB_CACHE_DIR) + "/vocab/ggml-vocab-qwen2.gguf");
    }
    try {
        const std::string text = read_file(text_path);
        for (const std::string& m : models) bench_one(m, text_path, text, reps);
    } catch (const troupe::Error& e) {
        std::fprintf(stderr, "troupe-bench-tokenizer: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
