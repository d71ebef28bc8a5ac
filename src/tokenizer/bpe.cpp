#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace troupe {

namespace {

using Bigram = BpeScratch::Bigram;

// Heap order: the lowest rank on top, then the leftmost pair.
bool lower_priority(const Bigram& a, const Bigram& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

}  // namespace

BpeEncoder::BpeEncoder(const Vocab& vocab, std::span<const std::string_view> merges,
                       const ByteLevelCodec& codec)
    : vocab_(vocab), codec_(codec) {
    const PrePreset* preset = vocab.pre_preset();
    TROUPE_CHECK(preset != nullptr);
    byte_encode_ = preset->byte_encode;
    ignore_merges_ = preset->ignore_merges;
    gemma_newlines_ = preset->name == "gemma4";

    add_merges(merges);
    for (int b = 0; b < 256; ++b) {
        byte_pieces_[size_t(b)] = piece_id(codec_.encode(uint8_t(b)));
        char hex[8];
        std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
        hex_tokens_[size_t(b)] = vocab.find(hex);
    }
}

// Parses "left right" merges in blocks: the keys of a block are hashed and their slots
// prefetched before any is looked up, so the cache misses of a block overlap.
void BpeEncoder::add_merges(std::span<const std::string_view> merges) {
    constexpr size_t kBlock = 16;
    struct Item {
        std::string joined;
        StringIdMap::Key keys[3];  // left, right, joined
        bool valid = false;
    };
    std::vector<Item> block(kBlock);
    merges_.reserve(merges.size());
    for (size_t first = 0; first < merges.size(); first += kBlock) {
        const size_t n = std::min(kBlock, merges.size() - first);
        for (size_t k = 0; k < n; ++k) {
            Item& it = block[k];
            const std::string_view m = merges[first + k];
            const size_t space = m.find(' ', 1);
            it.valid = space != std::string_view::npos && space + 1 < m.size();
            if (!it.valid) continue;  // it could never apply
            const std::string_view left = m.substr(0, space), right = m.substr(space + 1);
            it.joined.assign(left).append(right);
            it.keys[0] = StringIdMap::make_key(left);
            it.keys[1] = StringIdMap::make_key(right);
            it.keys[2] = StringIdMap::make_key(it.joined);
            for (const auto& key : it.keys) vocab_.ids().prefetch(key);
        }
        for (size_t k = 0; k < n; ++k) {
            const Item& it = block[k];
            if (!it.valid) continue;
            int32_t ids[3];
            for (int j = 0; j < 3; ++j) {
                ids[j] = vocab_.ids().find(it.keys[j]);
                if (ids[j] < 0) ids[j] = add_piece(it.keys[j].text);
            }
            merges_.insert_first(ids[0], ids[1], {int32_t(first + k), ids[2]});
        }
    }
}

int32_t BpeEncoder::piece_id(std::string_view text) const {
    const int32_t id = vocab_.find(text);
    return id >= 0 ? id : extra_ids_.find(text);
}

int32_t BpeEncoder::add_piece(std::string_view text) {
    const int32_t id = piece_id(text);
    if (id >= 0) return id;
    extra_pieces_.emplace_back(text);
    const int32_t extra = vocab_.n_tokens() + int32_t(extra_pieces_.size()) - 1;
    extra_ids_.insert(extra_pieces_.back(), extra);
    return extra;
}

void BpeEncoder::init_symbols(std::string_view word, BpeScratch& scratch) const {
    auto& symbols = scratch.symbols;
    symbols.clear();
    for (size_t pos = 0; pos < word.size();) {
        size_t len = 1;
        int32_t piece;
        if (byte_encode_) {
            piece = byte_pieces_[uint8_t(word[pos])];
        } else {
            len = std::min(utf8::len_from_lead(uint8_t(word[pos])), word.size() - pos);
            piece = piece_id(word.substr(pos, len));
        }
        const int32_t index = int32_t(symbols.size());
        pos += len;
        symbols.push_back({index - 1, pos == word.size() ? -1 : index + 1, piece,
                           uint32_t(pos - len), uint32_t(len)});
    }
}

void BpeEncoder::merge(BpeScratch& scratch) const {
    auto& symbols = scratch.symbols;
    auto& heap = scratch.heap;
    heap.clear();
    const auto try_add = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const auto& l = symbols[size_t(left)];
        const auto& r = symbols[size_t(right)];
        const PairMap::Value* m = merges_.find(l.piece, r.piece);
        if (!m) return;
        heap.push_back({m->rank, left, right, m->result, l.len + r.len});
        std::push_heap(heap.begin(), heap.end(), lower_priority);
    };
    for (int32_t i = 1; i < int32_t(symbols.size()); ++i) try_add(i - 1, i);

    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), lower_priority);
        const Bigram b = heap.back();
        heap.pop_back();
        auto& l = symbols[size_t(b.left)];
        auto& r = symbols[size_t(b.right)];
        if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // stale
        l.piece = b.result;
        l.len += r.len;
        r.len = 0;
        l.next = r.next;
        if (r.next >= 0) symbols[size_t(r.next)].prev = b.left;
        try_add(l.prev, b.left);
        try_add(b.left, l.next);
    }
}

void BpeEncoder::emit(std::string_view word, const BpeScratch::Symbol& s,
                      std::vector<int32_t>& out) const {
    if (s.piece >= 0 && s.piece < vocab_.n_tokens()) {
        out.push_back(s.piece);
        return;
    }
    // Not a token: llama.cpp looks up each byte of the symbol's text as a one-byte token
    // (byte-level text) or as <0xXX> (raw UTF-8 text) and drops the bytes it cannot find.
    for (const char c : word.substr(s.begin, s.len)) {
        if (byte_encode_) {
            for (const char e : codec_.encode(uint8_t(c))) {
                const int32_t id = vocab_.find(std::string_view(&e, 1));
                if (id >= 0) out.push_back(id);
            }
        } else if (const int32_t id = hex_tokens_[uint8_t(c)]; id >= 0) {
            out.push_back(id);
        }
    }
}

void BpeEncoder::encode_word(std::string_view word, std::vector<int32_t>& out,
                             BpeScratch& scratch) const {
    if (word.empty()) return;
    if (ignore_merges_) {
        std::string_view key = word;
        if (byte_encode_) {
            scratch.encoded.clear();
            codec_.encode_append(word, scratch.encoded);
            key = scratch.encoded;
        }
        if (const int32_t id = vocab_.find(key); id >= 0) {
            out.push_back(id);
            return;
        }
    }
    if (gemma_newlines_ && word.find_first_not_of('\n') == std::string_view::npos) {
        if (const int32_t id = vocab_.find(word); id >= 0) {
            out.push_back(id);
            return;
        }
    }
    init_symbols(word, scratch);
    merge(scratch);
    for (int32_t i = 0; i != -1; i = scratch.symbols[size_t(i)].next)
        emit(word, scratch.symbols[size_t(i)], out);
}

}  // namespace troupe
