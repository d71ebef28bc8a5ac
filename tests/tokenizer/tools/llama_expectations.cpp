// Writes what llama.cpp does with a vocabulary and some texts, for the conformance test's
// data/llama_cpp_expected.tsv. Links against libllama (public API only); it is not part of the
// build: gen_llama_expectations.sh compiles and runs it.
//
//   llama_expectations VOCAB.gguf NAME TEXT_FILE...
//
// One line per (text, parse_special, add_special):
//   NAME  FILE  parse_special  add_special  n_tokens  fnv(ids)  fnv(detok)  fnv(detok special)
// where fnv is FNV-1a 64 over the little-endian bytes of the ids or the text, and detok is
// llama_detokenize(remove_special = false, unparse_special = false / true).
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "llama.h"

namespace {

uint64_t fnv(const void* data, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i)
        h = (h ^ static_cast<const uint8_t*>(data)[i]) * 1099511628211ull;
    return h;
}

std::string detokenize(const llama_vocab* v, const std::vector<llama_token>& ids, bool special) {
    std::string out(ids.size() * 64 + 64, '\0');
    int n = llama_detokenize(v, ids.data(), int32_t(ids.size()), out.data(), int32_t(out.size()),
                             false, special);
    out.resize(n < 0 ? 0 : size_t(n));
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s VOCAB.gguf NAME TEXT_FILE...\n", argv[0]);
        return 1;
    }
    llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model* model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const llama_vocab* v = llama_model_get_vocab(model);
    for (int k = 3; k < argc; ++k) {
        std::ifstream in(argv[k], std::ios::binary);
        const std::string text((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
        std::string file = argv[k];
        file = file.substr(file.find_last_of('/') + 1);
        for (int parse = 0; parse < 2; ++parse) {
            for (int add = 0; add < 2; ++add) {
                std::vector<llama_token> ids(text.size() + 8);
                const int n = llama_tokenize(v, text.data(), int32_t(text.size()), ids.data(),
                                             int32_t(ids.size()), add, parse);
                if (n < 0) return 1;
                ids.resize(size_t(n));
                const std::string d0 = detokenize(v, ids, false), d1 = detokenize(v, ids, true);
                std::printf("%s\t%s\t%d\t%d\t%d\t%016llx\t%016llx\t%016llx\n", argv[2],
                            file.c_str(), parse, add, n,
                            (unsigned long long)fnv(ids.data(), ids.size() * sizeof(llama_token)),
                            (unsigned long long)fnv(d0.data(), d0.size()),
                            (unsigned long long)fnv(d1.data(), d1.size()));
            }
        }
    }
    llama_model_free(model);
    return 0;
}
