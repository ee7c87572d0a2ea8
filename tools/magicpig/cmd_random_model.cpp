// magicpig random-model: a seeded random-weight Llama GGUF of a given shape, for speed
// measurements (bench, llama-bench) on shapes no downloadable model provides here, e.g. a
// Llama-3.1-8B layer stack cut to as many layers as fit in RAM.
#include <cstdio>

#include "common.h"
#include "common/error.h"
#include "model/random_model.h"

namespace mp::cli {

DType parse_weight_type(const std::string& v);  // cmd_convert.cpp

namespace {

// Shapes of published models (everything except the layer count and vocabulary, which the
// user may cut down).
bool apply_preset(const std::string& name, RandomModelSpec& s) {
  if (name == "llama3-8b") {
    s.n_embd = 4096, s.n_layer = 32, s.n_head = 32, s.n_kv_head = 8, s.n_ff = 14336, s.n_vocab = 128256;
    s.rope_theta = 500000.0f, s.llama3_rope_scaling = true, s.n_ctx = 131072, s.tied_output = false;
  } else if (name == "llama2-7b") {
    s.n_embd = 4096, s.n_layer = 32, s.n_head = 32, s.n_kv_head = 32, s.n_ff = 11008, s.n_vocab = 32000;
    s.n_ctx = 4096, s.tied_output = false;
  } else if (name == "codellama-13b") {
    s.n_embd = 5120, s.n_layer = 40, s.n_head = 40, s.n_kv_head = 40, s.n_ff = 13824, s.n_vocab = 32016;
    s.rope_theta = 1e6f, s.n_ctx = 16384, s.tied_output = false;
  } else if (name == "tiny") {
    s.n_embd = 256, s.n_layer = 6, s.n_head = 4, s.n_kv_head = 2, s.n_ff = 688, s.n_vocab = 4096, s.n_ctx = 4096;
  } else {
    return false;
  }
  return true;
}

}  // namespace

int cmd_random_model(int argc, char** argv) {
  RandomModelSpec s;
  apply_preset("tiny", s);
  std::string out;
  Args a("random-model", "Writes a seeded random-weight Llama GGUF of a given shape (for speed measurements).");
  a.value({"--preset"}, "NAME", "llama3-8b, llama2-7b, codellama-13b or tiny (default tiny)", [&](const std::string& v) {
    check(apply_preset(v, s), "--preset must be llama3-8b, llama2-7b, codellama-13b or tiny; got '" + v + "'");
  });
  a.value({"--layers"}, "N", "number of layers (default: the preset's)",
          [&](const std::string& v) { s.n_layer = int(parse_int("--layers", v, 1, 1024)); });
  a.value({"--vocab"}, "N", "vocabulary size (placeholder tokens; default: the preset's)",
          [&](const std::string& v) { s.n_vocab = int(parse_int("--vocab", v, 260, 1 << 20)); });
  a.value({"-c", "--ctx"}, "N", "context length written to the file (default: the preset's)",
          [&](const std::string& v) { s.n_ctx = parse_int("--ctx", v, 1, int64_t(1) << 24); });
  a.value({"--type"}, "TYPE", "weight type: f32, f16, bf16, q8_0, q5_0, q5_1, q4_0 (default), q4_1, iq4_nl, q2_k, q3_k, q4_k, "
          "q5_k, q6_k",
          [&](const std::string& v) { s.type = parse_weight_type(v); });
  a.value({"--seed"}, "N", "seed (default 1)", [&](const std::string& v) { s.seed = uint64_t(parse_int("--seed", v, 0, INT64_MAX)); });
  a.value({"-o", "--output"}, "FILE", "output .gguf", [&](const std::string& v) { out = v; });
  s.type = DType::Q4_0;
  if (!a.parse(argc, argv, 2)) return 0;
  check(!out.empty(), "random-model: give -o FILE");
  s.name = "random";
  write_random_model(s, out);
  std::fprintf(stderr, "wrote %s (%d layers, dim %d, %d/%d heads, ff %d, vocab %d, %s)\n", out.c_str(), s.n_layer,
               s.n_embd, s.n_head, s.n_kv_head, s.n_ff, s.n_vocab, std::string(dtype_name(s.type)).c_str());
  return 0;
}

}  // namespace mp::cli
