// magicpig convert: other checkpoint formats to GGUF.
#include <cctype>
#include <cstdio>

#include "common.h"
#include "common/error.h"
#include "convert/hf_llama.h"
#include "model/llama2c.h"

namespace mp::cli {

DType parse_weight_type(const std::string& v) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q5_0, DType::Q5_1, DType::Q4_0, DType::Q4_1,
                  DType::IQ4_NL, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    std::string name(dtype_name(t));
    for (char& c : name) c = char(std::tolower(c));
    if (name == v) return t;
  }
  throw Error("--type must be one of f32, f16, bf16, q8_0, q5_0, q5_1, q4_0, q4_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k; "
              "got '" + v + "'");
}

int cmd_convert(int argc, char** argv) {
  Llama2cConvertOptions o;
  convert::HfConvertOptions h;
  bool type_given = false;
  Args a("convert",
         "Converts a checkpoint to a GGUF llama model: a Hugging Face Llama directory (config.json + "
         "*.safetensors, --hf) or a llama2.c checkpoint (run.c format, --llama2c).");
  a.value({"--hf"}, "DIR", "Hugging Face Llama checkpoint directory (config.json, *.safetensors)",
          [&](const std::string& v) { h.dir = v; });
  a.value({"--vocab"}, "FILE", "--hf: GGUF whose tokenizer.ggml.* keys are copied, with as many tokens as the model "
          "(default: DIR/tokenizer.model if present, else llama.cpp's ggml-vocab-llama-spm.gguf in the peer cache)",
          [&](const std::string& v) { h.vocab = v; });
  a.value({"--llama2c"}, "FILE", "llama2.c checkpoint (model.bin)", [&](const std::string& v) { o.checkpoint = v; });
  a.value({"--tokenizer"}, "FILE", "--llama2c: tokenizer.bin (default: a byte-fallback placeholder vocabulary)",
          [&](const std::string& v) { o.tokenizer = v; });
  a.value({"-o", "--output"}, "FILE", "output .gguf", [&](const std::string& v) { o.output = h.output = v; });
  a.value({"--type"}, "TYPE", "weight type: f32, f16, bf16, q8_0, q5_0, q4_0, q4_1 (--hf default q8_0); q5_1, iq4_nl, q2_k, q3_k, "
          "q4_k, q5_k, q6_k (--llama2c, default f32)",
          [&](const std::string& v) {
            o.type = h.type = parse_weight_type(v);
            type_given = true;
          });
  a.value({"-t", "--threads"}, "N", "--hf: threads for quantisation (default 2)",
          [&](const std::string& v) { h.n_threads = int(parse_int("--threads", v, 1, 256)); });
  a.value({"--name"}, "TEXT", "general.name of the output", [&](const std::string& v) { o.name = h.name = v; });
  if (!a.parse(argc, argv, 2)) return 0;
  check(o.checkpoint.empty() != h.dir.empty(), "convert: give exactly one of --hf DIR or --llama2c FILE");
  check(!o.output.empty(), "convert: give -o FILE");
  if (!h.dir.empty()) {
    if (!type_given) h.type = DType::Q8_0;
    convert::convert_hf_llama(h);
  } else {
    convert_llama2c(o);
  }
  std::fprintf(stderr, "wrote %s\n", o.output.c_str());
  return 0;
}

}  // namespace mp::cli
