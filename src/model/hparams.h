// Hyper-parameters of a decoder-only transformer, read from GGUF metadata (`{arch}.*` keys).
#pragma once

#include <string>

#include "gguf/gguf.h"
#include "kernels/ops.h"

namespace troupe {

enum class Arch {
    Llama,  // Llama 2/3, TinyLlama, SmolLM, Mistral-style: no biases, NORM rope
    Qwen2,  // Qwen2 / Qwen2.5: q/k/v biases, NEOX rope
};

const char* arch_name(Arch a);

struct HParams {
    Arch arch = Arch::Llama;
    std::string name;  // general.name
    int n_vocab = 0;
    int n_ctx_train = 0;  // {arch}.context_length
    int n_embd = 0;
    int n_layer = 0;
    int n_head = 0;
    int n_head_kv = 0;  // < n_head: grouped-query attention
    int head_dim = 0;   // {arch}.attention.key_length, default n_embd / n_head
    int n_ff = 0;
    float rms_eps = 1e-5f;
    ops::RopeParams rope;  // n_rot, base, scaling (linear / yarn), mode by architecture
    bool has_qkv_bias = false;

    int n_embd_q() const { return n_head * head_dim; }
    int n_embd_kv() const { return n_head_kv * head_dim; }
};

// Reads and validates the hyper-parameters. Throws troupe::Error naming the missing or
// inconsistent key, or the unsupported architecture.
HParams read_hparams(const GgufFile& f);

}  // namespace troupe
