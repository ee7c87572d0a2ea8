// llama.cpp's tokenizer test inputs (models/ggml-vocab-*.gguf.inp/.out) and small helpers shared
// by the conformance tests.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"

namespace mp::tok_test {

// ${MAGICPIG_CACHE:-$HOME/.cache/magicpig}/llama.cpp/models/ggml-vocab-NAME.gguf
inline std::string vocab_path(const std::string& name) {
  std::string base;
  if (const char* c = std::getenv("MAGICPIG_CACHE"); c && *c) {
    base = c;
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    base = std::string(h) + "/.cache/magicpig";
  }
  return base + "/llama.cpp/models/ggml-vocab-" + name + ".gguf";
}

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The inputs of an .inp file, split as test-tokenizer-0.cpp does ("\n__ggml_vocab_test__\n").
inline std::vector<std::string> read_inputs(const std::string& inp_path) {
  const std::string raw = read_all(inp_path);
  std::vector<std::string> inputs;
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  return inputs;
}

inline std::vector<int32_t> parse_ids(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream ls(line);
  for (int32_t id; ls >> id;) ids.push_back(id);
  return ids;
}

// Inputs with their expected ids (one line of the .out file per input). Like llama.cpp this
// keys a std::map by the input text, so repeated inputs count once.
inline std::map<std::string, std::vector<int32_t>> read_tests(const std::string& gguf_path) {
  const std::vector<std::string> inputs = read_inputs(gguf_path + ".inp");
  std::vector<std::vector<int32_t>> outputs;
  std::ifstream out(gguf_path + ".out");
  for (std::string line; std::getline(out, line);) outputs.push_back(parse_ids(line));
  EXPECT_EQ(inputs.size(), outputs.size()) << gguf_path;
  std::map<std::string, std::vector<int32_t>> tests;
  for (size_t i = 0; i < std::min(inputs.size(), outputs.size()); ++i) tests[inputs[i]] = outputs[i];
  return tests;
}

inline bool valid_utf8(const std::string& s) {
  Utf8Stream st;
  return st.push(s) == s && st.flush().empty();
}

inline std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

}  // namespace mp::tok_test
