// Token -> text, as llama.cpp's llama_token_to_piece and llama_detokenize write it.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/vocab.h"

namespace troupe {

// The bytes of every token with special tokens rendered ([n_tokens]):
//   control / user-defined / unknown tokens: their text as is;
//   byte tokens <0xXX>: that byte;
//   normal tokens: SPM and SentencePiece-style BPE turn U+2581 back into ' '; byte-level BPE
//   maps each character back to its byte (a character outside the alphabet is written
//   "[UNK_BYTE_0x..]" as llama.cpp does);
//   tokens of undefined type: nothing.
std::vector<std::string> build_piece_table(const Vocab& vocab, const ByteLevelCodec& codec);

// Hugging Face's clean_up_tokenization_spaces as llama.cpp applies it after detokenizing:
// " ?", " !", " .", " ," lose their space; " ' " becomes "'"; " 's", " 'm", " 're", " 've"
// lose their space. Three passes, in that order.
std::string clean_up_spaces(std::string text);

}  // namespace troupe
