#include "tokenizer/pre_presets.h"

#include <array>

namespace troupe {

namespace {

// Notation: PCRE2 with UTF. `\s` and `\S` are rewritten by the pre-tokenizer to the Unicode
// White_Space set before compiling (see pre_tokenizer.cpp).

constexpr std::string_view kGpt2Words =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";

// tokenizer.json has (?i:'s|'t|...); the expanded form is the same for ASCII and is what
// llama.cpp runs.
constexpr std::string_view kLlama3Words =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr std::string_view kQwen2Words =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr std::string_view kQwen35Words =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// DeepSeek's literal classes. llama.cpp matches these regexes on text where every non-ASCII
// White_Space character has been replaced by U+000B, so such characters match `\s` but never
// a literal class. Here the classes leave them out instead, with the same effect:
// U+3000 is cut from U+3000-U+3002, and U+1680, U+2000-U+200A, U+2028, U+2029, U+202F,
// U+205F and U+3000 from U+0800-U+4E00.
constexpr std::string_view kDeepseekLetters =
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";
constexpr std::string_view kDeepseekPunct =
    R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3001}-\x{3002}]+)re";
constexpr std::string_view kDeepseekCjk =
    R"re([\x{4E00}-\x{9FA5}\x{800}-\x{167F}\x{1681}-\x{1FFF}\x{200B}-\x{2027}\x{202A}-\x{202E}\x{2030}-\x{205E}\x{2060}-\x{2FFF}\x{3001}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";

constexpr std::array kGpt2{kGpt2Words};
constexpr std::array kLlama3{kLlama3Words};
constexpr std::array kQwen2{kQwen2Words};
constexpr std::array kQwen35{kQwen35Words};
constexpr std::array kDefault{std::string_view(R"re([\p{P}\$\+<=>\^~\|]+)re"), kGpt2Words,
                              std::string_view(R"re(\p{N}+)re"),
                              std::string_view(R"re([0-9][0-9][0-9])re")};
constexpr std::array kFalcon{std::string_view(R"re([\p{P}\$\+<=>\^~\|`]+)re"), kGpt2Words,
                             std::string_view(R"re([0-9][0-9][0-9])re")};
constexpr std::array kStarcoder{std::string_view(R"re(\p{N})re"), kGpt2Words};
constexpr std::array kDeepseekLlm{
    std::string_view(R"re([\r\n])re"), kDeepseekLetters, kDeepseekPunct,
    std::string_view(R"re(\s+$)re"),   kDeepseekCjk,     std::string_view(R"re(\p{N}+)re")};
constexpr std::array kDeepseekCoder{
    std::string_view(R"re([\r\n])re"), std::string_view(R"re(\s?\p{L}+)re"),
    std::string_view(R"re(\s?\p{P}+)re"), kDeepseekCjk, std::string_view(R"re(\p{N})re")};
constexpr std::array kNewlines{std::string_view(R"re([^\n]+|[\n]+)re")};

struct Entry {
    std::string_view alias;
    PrePreset preset;
};

PrePreset make(std::string_view name, std::span<const std::string_view> regexes,
               bool clean_spaces) {
    PrePreset p;
    p.name = name;
    p.regexes = regexes;
    p.clean_spaces = clean_spaces;
    return p;
}

PrePreset llama3(std::string_view name) {
    PrePreset p = make(name, kLlama3, true);
    p.ignore_merges = true;
    p.add_bos = true;
    return p;
}

PrePreset chatglm(std::string_view name) {
    PrePreset p = make(name, kLlama3, true);
    p.unset_default_bos = true;
    return p;
}

PrePreset gemma4(std::string_view name) {
    PrePreset p = make(name, kNewlines, true);
    p.byte_encode = false;
    p.escape_whitespaces = true;
    p.force_add_bos = true;
    return p;
}

// Every name llama.cpp accepts whose behaviour is one of the regex lists above.
const Entry kEntries[] = {
    {"default", make("default", kDefault, true)},
    {"llama3", llama3("llama3")},
    {"llama-v3", llama3("llama3")},
    {"llama-bpe", llama3("llama3")},
    {"falcon3", llama3("llama3")},
    {"falcon-h1", llama3("llama3")},
    {"pixtral", llama3("llama3")},
    {"midm-2.0", llama3("llama3")},
    {"lfm2", llama3("llama3")},
    {"jina-v5-nano", llama3("llama3")},
    {"dbrx", make("dbrx", kLlama3, true)},
    {"smaug-bpe", make("smaug-bpe", kLlama3, true)},
    {"glm4", chatglm("chatglm4")},
    {"chatglm-bpe", chatglm("chatglm4")},
    {"deepseek-llm", make("deepseek-llm", kDeepseekLlm, false)},
    {"deepseek-coder", make("deepseek-coder", kDeepseekCoder, false)},
    {"falcon", make("falcon", kFalcon, true)},
    {"mpt", make("mpt", kGpt2, true)},
    {"olmo", make("olmo", kGpt2, true)},
    {"jais", make("jais", kGpt2, true)},
    {"gpt-2", make("gpt-2", kGpt2, true)},
    {"phi-2", make("gpt-2", kGpt2, true)},
    {"jina-es", make("gpt-2", kGpt2, true)},
    {"jina-de", make("gpt-2", kGpt2, true)},
    {"gigachat", make("gpt-2", kGpt2, true)},
    {"jina-v2-es", make("gpt-2", kGpt2, true)},
    {"jina-v2-de", make("gpt-2", kGpt2, true)},
    {"a.x-4.0", make("gpt-2", kGpt2, true)},
    {"mellum", make("gpt-2", kGpt2, true)},
    {"modern-bert", make("gpt-2", kGpt2, true)},
    {"exaone4", make("gpt-2", kGpt2, true)},
    {"jina-v1-en", make("gpt-2", kGpt2, true)},
    {"jina-v2-code", make("gpt-2", kGpt2, true)},
    {"roberta-bpe", make("gpt-2", kGpt2, true)},
    {"trillion", make("trillion", kGpt2, false)},
    {"granite-docling", make("granite-docling", kGpt2, false)},
    {"starcoder", make("starcoder", kStarcoder, true)},
    {"refact", make("refact", kStarcoder, true)},
    {"codeshell", make("codeshell", kStarcoder, true)},
    {"exaone", make("exaone", kStarcoder, true)},
    {"minerva-7b", make("minerva-7b", kStarcoder, true)},
    {"mellum2", make("mellum2", kStarcoder, true)},
    {"command-r", make("command-r", kStarcoder, false)},
    {"smollm", make("smollm", kStarcoder, false)},
    {"qwen2", make("qwen2", kQwen2, false)},
    {"deepseek-r1-qwen", make("qwen2", kQwen2, false)},
    {"kormo", make("qwen2", kQwen2, false)},
    {"f2llmv2", make("qwen2", kQwen2, false)},
    {"hunyuan", make("hunyuan", kQwen2, false)},
    {"solar-open", make("solar-open", kQwen2, false)},
    {"grok-2", make("grok-2", kQwen2, false)},
    {"megrez", make("qwen2", kQwen2, true)},
    {"stablelm2", make("stablelm2", kQwen2, true)},
    {"qwen35", make("qwen35", kQwen35, false)},
    {"gemma4", gemma4("gemma4")},
    {"granite-embed-multi-311m", gemma4("gemma4")},
};

}  // namespace

const PrePreset* find_pre_preset(std::string_view pre) {
    if (pre.empty()) pre = "default";
    for (const Entry& e : kEntries)
        if (e.alias == pre) return &e.preset;
    return nullptr;
}

}  // namespace troupe
