// load_model_text(): a GGUF model's chat template and tokenizer as the workflow layer takes
// them (engine_factory.h).
#include <memory>

#include "chat/chat_template.h"
#include "engine_factory.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace troupe::cli {

ModelText load_model_text(const std::string& model_path) {
    const std::unique_ptr<GgufFile> gguf = GgufFile::open(model_path);
    std::shared_ptr<const Tokenizer> tok = Tokenizer::from_gguf(*gguf);
    const std::optional<std::string> source = gguf->get_string("tokenizer.chat_template");
    if (!source) throw Error("'" + model_path + "' has no chat template (tokenizer.chat_template)");
    auto tmpl = std::make_shared<const ChatTemplate>(ChatTemplate::from_model(*source));
    // The engine tokenizes prompts with BOS as the vocabulary says; a template that writes
    // {{ bos_token }} itself then gets "" so the prompt does not start with two.
    const std::string bos = tok->add_bos() || tok->bos() < 0 ? "" : tok->token_text(tok->bos());
    const std::string eos = tok->eos() < 0 ? "" : tok->token_text(tok->eos());

    ModelText text;
    text.render = [tmpl, bos, eos](const std::vector<workflow::Message>& messages) {
        ChatTemplateInputs in;
        for (const workflow::Message& m : messages) in.messages.push_back({m.role, m.content});
        in.add_generation_prompt = true;
        in.bos_token = bos;
        in.eos_token = eos;
        return tmpl->render(in);
    };
    text.tokenize = [tok](const std::string& prompt) {
        return tok->tokenize(prompt, /*add_special=*/true, /*parse_special=*/true);
    };
    return text;
}

}  // namespace troupe::cli
