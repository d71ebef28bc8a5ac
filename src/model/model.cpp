#include "model/model.h"

namespace troupe {

std::unique_ptr<Model> Model::load(const std::string& path) {
    auto m = std::unique_ptr<Model>(new Model());
    m->file_ = GgufFile::open(path);
    m->hp_ = read_hparams(*m->file_);
    m->w_ = load_weights(*m->file_, m->hp_);
    return m;
}

void Model::touch_weights() const {
    volatile uint64_t sink = file_->touch_tensor_data();
    (void)sink;
}

}  // namespace troupe
