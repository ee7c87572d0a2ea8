// magicpig tokenize: token ids (and pieces) of a text under a model's vocabulary.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include "common.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace mp::cli {

int cmd_tokenize(int argc, char** argv) {
  ModelOptions mo;
  std::string prompt, file;
  bool have_prompt = false, from_stdin = false, pieces = false, no_bos = false, parse_special = false;
  Args a("tokenize", "Prints the token ids of a text (vocabulary-only GGUF files work too).");
  add_model_options(a, mo, false);
  a.value({"-p", "--prompt"}, "TEXT", "text to tokenize", [&](const std::string& v) {
    prompt = v;
    have_prompt = true;
  });
  a.value({"-f", "--file"}, "FILE", "tokenize the bytes of a file", [&](const std::string& v) { file = v; });
  a.flag({"--stdin"}, "tokenize everything read from standard input", from_stdin);
  a.flag({"--pieces"}, "print each token's text beside its id", pieces);
  a.flag({"--no-bos"}, "do not add the BOS token", no_bos);
  a.flag({"--parse-special"}, "turn special-token text such as <|eot_id|> into special tokens", parse_special);
  if (!a.parse(argc, argv, 2)) return 0;
  check(int(have_prompt) + int(!file.empty()) + int(from_stdin) == 1, "give exactly one of -p TEXT, -f FILE, --stdin");
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    check(in.good(), "cannot read '" + file + "'");
    prompt.assign(std::istreambuf_iterator<char>(in), {});
  } else if (from_stdin) {
    prompt.assign(std::istreambuf_iterator<char>(std::cin), {});
  }
  const gguf::File f = gguf::File::open(resolve_model_path(mo.model));
  const Tokenizer tok = Tokenizer::from_gguf(f);
  const std::vector<int32_t> ids = tok.encode(prompt, !no_bos, parse_special);
  if (!pieces) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
    std::printf("\n");
    return 0;
  }
  for (int32_t id : ids) std::printf("%6d -> '%s'\n", id, tok.token_to_piece(id, true).c_str());
  return 0;
}

}  // namespace mp::cli
