// magicpig convert: other checkpoint formats to GGUF.
#include <cctype>
#include <cstdio>

#include "common.h"
#include "common/error.h"
#include "model/llama2c.h"

namespace mp::cli {

DType parse_weight_type(const std::string& v) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
    std::string name(dtype_name(t));
    for (char& c : name) c = char(std::tolower(c));
    if (name == v) return t;
  }
  throw Error("--type must be one of f32, f16, bf16, q8_0, q4_0, q4_k, q6_k; got '" + v + "'");
}

int cmd_convert(int argc, char** argv) {
  Llama2cConvertOptions o;
  Args a("convert", "Converts a llama2.c checkpoint (run.c format) to a GGUF llama model.");
  a.value({"--llama2c"}, "FILE", "llama2.c checkpoint (model.bin)", [&](const std::string& v) { o.checkpoint = v; });
  a.value({"--tokenizer"}, "FILE", "llama2.c tokenizer.bin (default: a byte-fallback placeholder vocabulary)",
          [&](const std::string& v) { o.tokenizer = v; });
  a.value({"-o", "--output"}, "FILE", "output .gguf", [&](const std::string& v) { o.output = v; });
  a.value({"--type"}, "TYPE", "weight type: f32 (default), f16, bf16, q8_0, q4_0, q4_k, q6_k",
          [&](const std::string& v) { o.type = parse_weight_type(v); });
  a.value({"--name"}, "TEXT", "general.name of the output", [&](const std::string& v) { o.name = v; });
  if (!a.parse(argc, argv, 2)) return 0;
  check(!o.checkpoint.empty(), "convert: give --llama2c FILE");
  check(!o.output.empty(), "convert: give -o FILE");
  convert_llama2c(o);
  std::fprintf(stderr, "wrote %s\n", o.output.c_str());
  return 0;
}

}  // namespace mp::cli
