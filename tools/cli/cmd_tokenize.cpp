// troupe tokenize -m MODEL -p TEXT [--ids] [--no-bos] [--parse-special]
// Prints each token as "id -> 'piece'" (llama-tokenize's layout), or with --ids only the ids
// as one JSON array on one line. BOS (and EOS) are added as the vocabulary says, unless
// --no-bos.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "commands.h"
#include "options.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace troupe::cli {

namespace {

struct TokenizeOptions {
    std::string model;
    std::string prompt;
    std::string file;
    bool ids = false;
    bool no_bos = false;
    bool parse_special = false;
    bool show_count = false;
};

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open prompt file '" + path + "'");
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void run_tokenize(const TokenizeOptions& o) {
    const std::string text = o.file.empty() ? o.prompt : read_file(o.file);
    const auto gguf = GgufFile::open(o.model);
    const auto tok = Tokenizer::from_gguf(*gguf);
    const std::vector<int32_t> ids = tok->tokenize(text, !o.no_bos, o.parse_special);
    if (o.ids) {
        std::string line = "[";
        for (size_t i = 0; i < ids.size(); ++i) {
            if (i > 0) line += ", ";
            line += std::to_string(ids[i]);
        }
        std::printf("%s]\n", line.c_str());
    } else {
        for (const int32_t id : ids) {
            const std::string piece = tok->token_to_piece(id, true);
            std::printf("%6d -> '%.*s'\n", id, int(piece.size()), piece.data());
        }
    }
    if (o.show_count) std::printf("Total number of tokens: %zu\n", ids.size());
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
    auto o = std::make_shared<TokenizeOptions>();
    CLI::App* cmd = app.add_subcommand("tokenize", "Print the tokens of a text");
    add_model_option(cmd, o->model);
    CLI::Option* prompt = cmd->add_option("-p,--prompt", o->prompt, "Text to tokenize");
    CLI::Option* file = cmd->add_option("-f,--file", o->file, "Read the text from a file");
    prompt->excludes(file);
    cmd->add_flag("--ids", o->ids, "Print only the ids, as a JSON array on one line");
    cmd->add_flag("--no-bos", o->no_bos, "Do not add BOS/EOS even if the vocabulary asks for it");
    cmd->add_flag("--parse-special", o->parse_special,
                  "Match special tokens written in the text (<|im_start|>, </s>)");
    cmd->add_flag("--show-count", o->show_count, "Print the number of tokens at the end");
    cmd->callback([o, prompt, file] {
        if (prompt->count() == 0 && file->count() == 0)
            throw Error("tokenize: give the text with -p TEXT or -f FILE");
        run_tokenize(*o);
    });
}

}  // namespace troupe::cli
