#include "model/model.h"

#include "util/error.h"

namespace troupe {

namespace {
std::string builtin_list() {
    std::string s;
    for (const std::string& n : ChatTemplate::builtin_names()) s += (s.empty() ? "" : ", ") + n;
    return s;
}
}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path, const ModelLoadOptions& opts) {
    auto m = std::unique_ptr<Model>(new Model());
    m->file_ = GgufFile::open(path);
    m->hp_ = read_hparams(*m->file_);
    m->w_ = load_weights(*m->file_, m->hp_);
    if (opts.interleave_weights) interleave_matrices(*m->file_, m->w_);
    m->tokenizer_ = Tokenizer::from_gguf(*m->file_);
    if (m->tokenizer_->n_vocab() > m->hp_.n_vocab)
        throw Error(path + ": the vocabulary has " + std::to_string(m->tokenizer_->n_vocab()) +
                    " tokens but the embedding only " + std::to_string(m->hp_.n_vocab));
    if (const auto src = m->file_->get_string("tokenizer.chat_template")) {
        try {
            m->chat_template_ = ChatTemplate::from_model(*src);
        } catch (const Error& e) {
            m->chat_template_error_ = e.what();
        }
    } else {
        m->chat_template_error_ = path +
                                  " has no chat template (tokenizer.chat_template); "
                                  "use --chat-template NAME (" +
                                  builtin_list() + ")";
    }
    return m;
}

std::string Model::apply_chat_template(const std::vector<ChatMessage>& messages,
                                       bool add_generation_prompt,
                                       const std::string& template_name) const {
    std::optional<ChatTemplate> named;
    if (!template_name.empty()) named = ChatTemplate::builtin(template_name);
    const ChatTemplate* tmpl = named ? &*named : chat_template_ ? &*chat_template_ : nullptr;
    if (!tmpl) throw Error(chat_template_error_);
    const Tokenizer& tok = *tokenizer_;
    ChatTemplateInputs in;
    in.messages = messages;
    in.add_generation_prompt = add_generation_prompt;
    if (tok.bos() >= 0) in.bos_token = tok.token_text(tok.bos());
    if (tok.eos() >= 0) in.eos_token = tok.token_text(tok.eos());
    std::string text = tmpl->render(in);
    if (tok.add_bos() && !in.bos_token.empty() && text.rfind(in.bos_token, 0) == 0)
        text.erase(0, in.bos_token.size());
    return text;
}

void Model::touch_weights() const {
    // The matrices where the kernels read them (the file, or the interleaved copies), and the
    // rest of the file's tensors only when no matrix was copied out of it.
    uint64_t sum = 0;
    if (!w_.interleaved_storage) sum = file_->touch_tensor_data();
    w_.for_each_matrix([&](const ops::Weight& m) {
        const size_t n = size_t(m.n_out) * m.row_stride;
        for (size_t off = 0; off < n; off += 4096) sum += m.data[off];
    });
    volatile uint64_t sink = sum;
    (void)sink;
}

}  // namespace troupe
