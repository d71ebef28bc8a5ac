// make_backend() and load_model_text() (engine_factory.h): the real engine and the model's
// chat template and tokenizer for the workflow commands. Both load the model through
// Model::load, so `troupe run` renders prompts exactly as `troupe generate --chat` does.
#include "engine_factory.h"

#include <map>
#include <mutex>

#include "engine/engine.h"
#include "model/model.h"

namespace troupe::cli {

namespace {

// One Model per path for the life of the process: the workflow commands ask for the text
// functions and then for one or more engines (e.g. --compare-baseline), all sharing it.
std::shared_ptr<const Model> shared_model(const std::string& path) {
    static std::mutex mu;
    static std::map<std::string, std::weak_ptr<const Model>> cache;
    std::lock_guard<std::mutex> lock(mu);
    if (auto m = cache[path].lock()) return m;
    std::shared_ptr<const Model> m = Model::load(path);
    cache[path] = m;
    return m;
}

// The engine together with the model it runs (the Engine only borrows it).
class ModelEngine final : public InferenceBackend {
  public:
    ModelEngine(std::shared_ptr<const Model> model, const EngineConfig& config)
        : model_(std::move(model)), engine_(*model_, config) {}
    RequestId submit(Request r, TokenCallback cb) override {
        return engine_.submit(std::move(r), std::move(cb));
    }
    void cancel(RequestId id) override { engine_.cancel(id); }
    bool has_work() const override { return engine_.has_work(); }
    std::vector<RequestOutput> step() override { return engine_.step(); }
    EngineStats stats() const override { return engine_.stats(); }

  private:
    std::shared_ptr<const Model> model_;
    Engine engine_;
};

}  // namespace

std::unique_ptr<InferenceBackend> make_backend(const BackendOptions& o) {
    EngineConfig c;
    c.n_threads = o.n_threads;
    c.enable_prefix_caching = o.prefix_cache;
    c.enable_batching = o.batching;
    c.shared_prefix_attention = o.shared_attention;
    return std::make_unique<ModelEngine>(shared_model(o.model_path), c);
}

ModelText load_model_text(const std::string& model_path) {
    std::shared_ptr<const Model> model = shared_model(model_path);
    ModelText text;
    text.render = [model](const std::vector<workflow::Message>& messages) {
        std::vector<ChatMessage> msgs;
        for (const workflow::Message& m : messages) msgs.push_back({m.role, m.content});
        return model->apply_chat_template(msgs, /*add_generation_prompt=*/true);
    };
    text.tokenize = [model](const std::string& prompt) {
        return model->tokenizer().tokenize(prompt, /*add_special=*/true, /*parse_special=*/true);
    };
    text.context_length = model->hparams().n_ctx_train;
    return text;
}

}  // namespace troupe::cli
