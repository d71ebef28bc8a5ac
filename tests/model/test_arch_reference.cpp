// The forward pass of each architecture against an independent, naive float implementation
// written here from the architectures' definitions, on small random models built with the
// GGUF writer: llama (GQA, NORM rotary pairs (2i, 2i+1), tied or separate output) and qwen2
// (q/k/v biases, NEOX rotary pairs (i, i + d/2)), with and without linear RoPE scaling.
// Checks every position's logits of a prompt, processed whole and in chunks.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "engine/sequence_kv.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "util/error.h"

namespace troupe {
namespace {

struct Spec {
    std::string arch = "llama";
    int n_embd = 32, n_layer = 2, n_head = 4, n_head_kv = 2, n_ff = 48;
    bool tied = true;
    float rope_scale = 0.0f;  // linear scaling factor (0: none)
};

using Mat = std::vector<float>;  // row-major [rows, cols]

struct RefLayer {
    Mat attn_norm, wq, wk, wv, wo, bq, bk, bv, ffn_norm, gate, up, down;
};
struct RefModel {
    Spec s;
    int n_vocab = 0, head_dim = 0;
    Mat embd, out_norm, output;
    std::vector<RefLayer> layers;
};

Mat random_mat(std::mt19937& rng, size_t n, float scale) {
    std::normal_distribution<float> d(0.0f, scale);
    Mat m(n);
    for (float& v : m) v = d(rng);
    return m;
}

// Writes the model with F32 tensors and the bundled model's tokenizer; returns the path.
std::string write_model(const RefModel& m, const std::string& name) {
    const auto vocab =
        GgufFile::open(std::string(TROUPE_SOURCE_DIR) + "/models/troupe-tiny-q8_0.gguf");
    GgufWriter w;
    for (const GgufKv& kv : vocab->metadata())
        if (kv.key.rfind("tokenizer.", 0) == 0) w.set(kv.key, GgufMetaValue::from(kv.value));
    const std::string a = m.s.arch;
    w.set_string("general.architecture", a);
    w.set_u32(a + ".context_length", 256);
    w.set_u32(a + ".embedding_length", uint32_t(m.s.n_embd));
    w.set_u32(a + ".block_count", uint32_t(m.s.n_layer));
    w.set_u32(a + ".feed_forward_length", uint32_t(m.s.n_ff));
    w.set_u32(a + ".attention.head_count", uint32_t(m.s.n_head));
    w.set_u32(a + ".attention.head_count_kv", uint32_t(m.s.n_head_kv));
    w.set_f32(a + ".rope.freq_base", 10000.0f);
    w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
    if (m.s.rope_scale > 0) {
        w.set_string(a + ".rope.scaling.type", "linear");
        w.set_f32(a + ".rope.scaling.factor", m.s.rope_scale);
    }
    auto add = [&](const std::string& n, const Mat& v, std::vector<int64_t> ne) {
        w.add_tensor(n, DType::F32, ne, {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4});
    };
    const int64_t d = m.s.n_embd, dq = m.s.n_head * m.head_dim, dkv = m.s.n_head_kv * m.head_dim;
    add("token_embd.weight", m.embd, {d, m.n_vocab});
    add("output_norm.weight", m.out_norm, {d});
    if (!m.s.tied) add("output.weight", m.output, {d, m.n_vocab});
    for (int il = 0; il < m.s.n_layer; ++il) {
        const RefLayer& l = m.layers[size_t(il)];
        const std::string p = "blk." + std::to_string(il) + ".";
        add(p + "attn_norm.weight", l.attn_norm, {d});
        add(p + "attn_q.weight", l.wq, {d, dq});
        add(p + "attn_k.weight", l.wk, {d, dkv});
        add(p + "attn_v.weight", l.wv, {d, dkv});
        add(p + "attn_output.weight", l.wo, {dq, d});
        if (a == "qwen2") {
            add(p + "attn_q.bias", l.bq, {dq});
            add(p + "attn_k.bias", l.bk, {dkv});
            add(p + "attn_v.bias", l.bv, {dkv});
        }
        add(p + "ffn_norm.weight", l.ffn_norm, {d});
        add(p + "ffn_gate.weight", l.gate, {d, m.s.n_ff});
        add(p + "ffn_up.weight", l.up, {d, m.s.n_ff});
        add(p + "ffn_down.weight", l.down, {m.s.n_ff, d});
    }
    const std::string path = (std::filesystem::temp_directory_path() / name).string();
    w.write_file(path);
    return path;
}

RefModel random_model(const Spec& s, uint32_t seed) {
    std::mt19937 rng(seed);
    RefModel m;
    m.s = s;
    m.n_vocab = 32000;
    m.head_dim = s.n_embd / s.n_head;
    const size_t d = size_t(s.n_embd), dq = size_t(s.n_head * m.head_dim),
                 dkv = size_t(s.n_head_kv * m.head_dim), ff = size_t(s.n_ff);
    m.embd = random_mat(rng, size_t(m.n_vocab) * d, 1.0f);
    m.out_norm = random_mat(rng, d, 0.2f);
    for (float& v : m.out_norm) v += 1.0f;
    m.output = s.tied ? m.embd : random_mat(rng, size_t(m.n_vocab) * d, 0.3f);
    for (int il = 0; il < s.n_layer; ++il) {
        RefLayer l;
        l.attn_norm = random_mat(rng, d, 0.2f);
        l.ffn_norm = random_mat(rng, d, 0.2f);
        for (float& v : l.attn_norm) v += 1.0f;
        for (float& v : l.ffn_norm) v += 1.0f;
        const float sc = 1.0f / std::sqrt(float(d));
        l.wq = random_mat(rng, dq * d, sc * 2);
        l.wk = random_mat(rng, dkv * d, sc * 2);
        l.wv = random_mat(rng, dkv * d, sc);
        l.wo = random_mat(rng, d * dq, sc);
        l.bq = random_mat(rng, dq, 0.5f);
        l.bk = random_mat(rng, dkv, 0.5f);
        l.bv = random_mat(rng, dkv, 0.5f);
        l.gate = random_mat(rng, ff * d, sc);
        l.up = random_mat(rng, ff * d, sc);
        l.down = random_mat(rng, d * ff, 1.0f / std::sqrt(float(ff)));
        m.layers.push_back(std::move(l));
    }
    return m;
}

// y[o] = sum_i w[o, i] x[i] (+ b[o])
std::vector<float> matvec(const Mat& w, const std::vector<float>& x, size_t n_out,
                          const Mat* b = nullptr) {
    std::vector<float> y(n_out);
    for (size_t o = 0; o < n_out; ++o) {
        double s = b ? (*b)[o] : 0.0;
        for (size_t i = 0; i < x.size(); ++i) s += double(w[o * x.size() + i]) * x[i];
        y[o] = float(s);
    }
    return y;
}

std::vector<float> rmsnorm(const std::vector<float>& x, const Mat& g) {
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double r = 1.0 / std::sqrt(ss / double(x.size()) + 1e-5);
    std::vector<float> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = float(x[i] * r * g[i]);
    return y;
}

// Rotates each head of x at position pos: theta_i = pos * scale * base^(-2i/d).
void rotate(std::vector<float>& x, int n_heads, int hd, int pos, bool neox, float scale) {
    for (int h = 0; h < n_heads; ++h)
        for (int i = 0; i < hd / 2; ++i) {
            const double theta = pos * double(scale) * std::pow(10000.0, -2.0 * i / hd);
            const int a = h * hd + (neox ? i : 2 * i), b = h * hd + (neox ? i + hd / 2 : 2 * i + 1);
            const double x0 = x[size_t(a)], x1 = x[size_t(b)];
            x[size_t(a)] = float(x0 * std::cos(theta) - x1 * std::sin(theta));
            x[size_t(b)] = float(x0 * std::sin(theta) + x1 * std::cos(theta));
        }
}

// Logits at every position of `tokens`: [n, n_vocab].
std::vector<std::vector<float>> reference_logits(const RefModel& m,
                                                 const std::vector<int32_t>& tokens) {
    const Spec& s = m.s;
    const size_t d = size_t(s.n_embd);
    const int hd = m.head_dim, group = s.n_head / s.n_head_kv;
    const bool qwen = s.arch == "qwen2";
    const float scale = s.rope_scale > 0 ? 1.0f / s.rope_scale : 1.0f;
    std::vector<std::vector<float>> x(tokens.size());
    for (size_t t = 0; t < tokens.size(); ++t)
        x[t].assign(m.embd.begin() + long(size_t(tokens[t]) * d),
                    m.embd.begin() + long(size_t(tokens[t] + 1) * d));
    for (const RefLayer& l : m.layers) {
        std::vector<std::vector<float>> q(tokens.size()), k(tokens.size()), v(tokens.size());
        for (size_t t = 0; t < tokens.size(); ++t) {
            const auto xn = rmsnorm(x[t], l.attn_norm);
            q[t] = matvec(l.wq, xn, size_t(s.n_head * hd), qwen ? &l.bq : nullptr);
            k[t] = matvec(l.wk, xn, size_t(s.n_head_kv * hd), qwen ? &l.bk : nullptr);
            v[t] = matvec(l.wv, xn, size_t(s.n_head_kv * hd), qwen ? &l.bv : nullptr);
            rotate(q[t], s.n_head, hd, int(t), qwen, scale);
            rotate(k[t], s.n_head_kv, hd, int(t), qwen, scale);
        }
        for (size_t t = 0; t < tokens.size(); ++t) {
            std::vector<float> att(size_t(s.n_head * hd), 0.0f);
            for (int h = 0; h < s.n_head; ++h) {
                const int kh = h / group;
                std::vector<double> sc(t + 1);
                double mx = -1e300;
                for (size_t p = 0; p <= t; ++p) {
                    double dot = 0;
                    for (int i = 0; i < hd; ++i)
                        dot += double(q[t][size_t(h * hd + i)]) * k[p][size_t(kh * hd + i)];
                    sc[p] = dot / std::sqrt(double(hd));
                    mx = std::max(mx, sc[p]);
                }
                double sum = 0;
                for (double& e : sc) sum += (e = std::exp(e - mx));
                for (size_t p = 0; p <= t; ++p)
                    for (int i = 0; i < hd; ++i)
                        att[size_t(h * hd + i)] += float(sc[p] / sum * v[p][size_t(kh * hd + i)]);
            }
            const auto o = matvec(l.wo, att, d);
            for (size_t i = 0; i < d; ++i) x[t][i] += o[i];
            const auto xn = rmsnorm(x[t], l.ffn_norm);
            const auto g = matvec(l.gate, xn, size_t(s.n_ff)), u = matvec(l.up, xn, size_t(s.n_ff));
            std::vector<float> hsw(size_t(s.n_ff));
            for (size_t i = 0; i < hsw.size(); ++i)
                hsw[i] = float(g[i] / (1.0 + std::exp(-double(g[i]))) * u[i]);
            const auto dn = matvec(l.down, hsw, d);
            for (size_t i = 0; i < d; ++i) x[t][i] += dn[i];
        }
    }
    std::vector<std::vector<float>> logits;
    for (const auto& xt : x)
        logits.push_back(matvec(m.output, rmsnorm(xt, m.out_norm), size_t(m.n_vocab)));
    return logits;
}

void check(const Spec& spec, uint32_t seed) {
    const RefModel ref = random_model(spec, seed);
    const std::string path =
        write_model(ref, "troupe-arch-" + spec.arch + std::to_string(seed) + ".gguf");
    const auto model = Model::load(path);
    std::filesystem::remove(path);
    const HParams& hp = model->hparams();
    ASSERT_EQ(hp.has_qkv_bias, spec.arch == "qwen2");
    const std::vector<int32_t> tokens = {1,     450,  4799,  17354, 1701,  29916, 432,
                                         17204, 975,  278,   17366, 11203, 29889, 13,
                                         1576,  4799, 17354, 29892, 3431};
    const auto want = reference_logits(ref, tokens);
    // Whole prompt at once, then the same prompt in chunks of 5 (positions continue).
    for (int chunk : {int(tokens.size()), 5}) {
        SequenceKv kv(hp, int(tokens.size()), 4, DType::F32);
        ForwardWorkspace ws;
        for (int start = 0; start < int(tokens.size()); start += chunk) {
            const int n = std::min(chunk, int(tokens.size()) - start);
            Batch b;
            b.tokens.assign(tokens.begin() + start, tokens.begin() + start + n);
            b.seqs = {{kv.block_table, start, n, n}};
            std::vector<float> logits(size_t(n) * size_t(hp.n_vocab));
            model->forward(b, kv.views, ws, nullptr, logits.data());
            for (int r = 0; r < n; ++r) {
                const auto& w = want[size_t(start + r)];
                double err = 0, norm = 0;
                for (size_t i = 0; i < w.size(); ++i) {
                    const double e = logits[size_t(r) * w.size() + i] - w[i];
                    err += e * e;
                    norm += double(w[i]) * w[i];
                }
                // F32 weights; activations go through F32 too: only summation order differs.
                EXPECT_LT(std::sqrt(err / norm), 2e-4)
                    << spec.arch << " position " << start + r << " (chunks of " << chunk << ")";
            }
        }
    }
}

TEST(ArchReference, LlamaTiedOutputGqa) {
    check(Spec{}, 1);
}

TEST(ArchReference, LlamaSeparateOutputAndLinearRopeScaling) {
    Spec s;
    s.tied = false;
    s.rope_scale = 4.0f;
    check(s, 2);
}

TEST(ArchReference, Qwen2BiasesAndNeoxRope) {
    Spec s;
    s.arch = "qwen2";
    s.n_head = 4;
    s.n_head_kv = 1;
    check(s, 3);
}

TEST(ArchReference, UnsupportedArchitectureAndMissingTensorsAreNamed) {
    RefModel m = random_model(Spec{}, 4);
    m.s.arch = "mamba";
    const std::string path = write_model(m, "troupe-arch-bad.gguf");
    try {
        Model::load(path);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("unsupported architecture 'mamba'"), std::string::npos)
            << e.what();
    }
    std::filesystem::remove(path);
}

}  // namespace
}  // namespace troupe
