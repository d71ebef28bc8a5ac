#include "model/hparams.h"

#include "util/error.h"

namespace troupe {

const char* arch_name(Arch a) {
    switch (a) {
        case Arch::Llama:
            return "llama";
        case Arch::Qwen2:
            return "qwen2";
    }
    return "?";
}

namespace {

int64_t require_int(const GgufFile& f, const std::string& key) {
    const auto v = f.get_int(key);
    if (!v) throw Error(f.path() + ": missing metadata '" + key + "'");
    return *v;
}

void require_positive(const GgufFile& f, const char* what, int64_t v) {
    if (v <= 0 || v > (1 << 24))
        throw Error(f.path() + ": invalid " + what + " " + std::to_string(v));
}

void read_rope(const GgufFile& f, const std::string& a, HParams& hp) {
    ops::RopeParams& r = hp.rope;
    r.mode = hp.arch == Arch::Qwen2 ? ops::RopeMode::Neox : ops::RopeMode::Norm;
    r.n_rot = int(f.get_int(a + ".rope.dimension_count").value_or(hp.head_dim));
    if (r.n_rot <= 0 || r.n_rot > hp.head_dim || r.n_rot % 2 != 0)
        throw Error(f.path() + ": invalid " + a + ".rope.dimension_count " +
                    std::to_string(r.n_rot));
    r.freq_base = float(f.get_float(a + ".rope.freq_base").value_or(10000.0));
    if (!(r.freq_base > 0.0f)) throw Error(f.path() + ": invalid rope.freq_base");

    std::string scaling = f.get_string(a + ".rope.scaling.type").value_or("");
    double factor = f.get_float(a + ".rope.scaling.factor").value_or(0.0);
    if (const auto lin = f.get_float(a + ".rope.scale_linear")) {  // older files
        if (scaling.empty()) scaling = "linear";
        factor = *lin;
    }
    if (scaling.empty() || scaling == "none") return;
    if (factor <= 0.0)
        throw Error(f.path() + ": rope scaling '" + scaling + "' without a positive factor");
    r.freq_scale = float(1.0 / factor);
    if (scaling == "linear") return;
    if (scaling == "yarn") {
        r.n_ctx_orig =
            int(f.get_int(a + ".rope.scaling.original_context_length").value_or(hp.n_ctx_train));
        r.ext_factor = float(f.get_float(a + ".rope.scaling.yarn_ext_factor").value_or(1.0));
        r.attn_factor = float(f.get_float(a + ".rope.scaling.yarn_attn_factor").value_or(1.0));
        r.beta_fast = float(f.get_float(a + ".rope.scaling.yarn_beta_fast").value_or(32.0));
        r.beta_slow = float(f.get_float(a + ".rope.scaling.yarn_beta_slow").value_or(1.0));
        return;
    }
    throw Error(f.path() + ": unsupported rope scaling type '" + scaling +
                "' (supported: linear, yarn)");
}

}  // namespace

HParams read_hparams(const GgufFile& f) {
    HParams hp;
    const auto arch = f.get_string("general.architecture");
    if (!arch) throw Error(f.path() + ": missing metadata 'general.architecture'");
    if (*arch == "llama")
        hp.arch = Arch::Llama;
    else if (*arch == "qwen2")
        hp.arch = Arch::Qwen2;
    else
        throw Error(f.path() + ": unsupported architecture '" + *arch +
                    "' (supported: llama, qwen2)");
    const std::string& a = *arch;
    hp.name = f.get_string("general.name").value_or("");
    hp.has_qkv_bias = hp.arch == Arch::Qwen2;

    hp.n_embd = int(require_int(f, a + ".embedding_length"));
    hp.n_layer = int(require_int(f, a + ".block_count"));
    hp.n_head = int(require_int(f, a + ".attention.head_count"));
    hp.n_head_kv = int(f.get_int(a + ".attention.head_count_kv").value_or(hp.n_head));
    hp.n_ff = int(require_int(f, a + ".feed_forward_length"));
    hp.n_ctx_train = int(f.get_int(a + ".context_length").value_or(2048));
    require_positive(f, "embedding_length", hp.n_embd);
    require_positive(f, "block_count", hp.n_layer);
    require_positive(f, "attention.head_count", hp.n_head);
    require_positive(f, "attention.head_count_kv", hp.n_head_kv);
    require_positive(f, "feed_forward_length", hp.n_ff);
    require_positive(f, "context_length", hp.n_ctx_train);
    if (hp.n_head % hp.n_head_kv != 0)
        throw Error(f.path() + ": head_count " + std::to_string(hp.n_head) +
                    " is not a multiple of head_count_kv " + std::to_string(hp.n_head_kv));
    hp.head_dim = int(f.get_int(a + ".attention.key_length").value_or(hp.n_embd / hp.n_head));
    const int v_len = int(f.get_int(a + ".attention.value_length").value_or(hp.head_dim));
    require_positive(f, "attention.key_length", hp.head_dim);
    if (v_len != hp.head_dim)
        throw Error(f.path() + ": key_length != value_length is not supported");
    hp.rms_eps = float(f.get_float(a + ".attention.layer_norm_rms_epsilon").value_or(1e-5));
    if (!(hp.rms_eps > 0.0f)) throw Error(f.path() + ": invalid layer_norm_rms_epsilon");
    read_rope(f, a, hp);
    return hp;
}

}  // namespace troupe
