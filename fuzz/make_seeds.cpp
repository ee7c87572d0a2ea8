// Writes a few small valid GGUF files as the fuzzer's starting corpus: make_seeds DIR.
#include <cstdio>
#include <string>
#include <vector>

#include "gguf/gguf.h"

using namespace mp;
using namespace mp::gguf;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<uint8_t> payload(2 * 210);
  for (size_t k = 0; k < payload.size(); ++k) payload[k] = static_cast<uint8_t>(k * 7);

  Writer meta;
  meta.set_string("general.architecture", "llama");
  meta.set_u32("llama.block_count", 2);
  meta.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  meta.set_bool("tokenizer.ggml.add_bos_token", true);
  meta.set_array_string("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xe2\x96\x81the"});
  meta.set_array_f32("tokenizer.ggml.scores", {0.f, -1.f, -2.f, -3.5f});
  meta.set_array_i32("tokenizer.ggml.token_type", {2, 3, 3, 1});
  meta.set_u8("u8", 1);
  meta.set_i8("i8", -1);
  meta.set_u16("u16", 2);
  meta.set_i16("i16", -2);
  meta.set_i32("i32", -3);
  meta.set_u64("u64", 4);
  meta.set_i64("i64", -5);
  meta.set_f64("f64", 0.25);
  meta.write(dir + "/metadata.gguf");

  Writer tensors;
  tensors.set_string("general.architecture", "llama");
  tensors.add_tensor("a.f32", DType::F32, {4, 2}, payload.data(), 32);
  tensors.add_tensor("b.f16", DType::F16, {3}, payload.data(), 6);
  tensors.add_tensor("c.bf16", DType::BF16, {2, 1, 1, 2}, payload.data(), 8);
  tensors.add_tensor("d.q8_0", DType::Q8_0, {32}, payload.data(), 34);
  tensors.add_tensor("e.q4_0", DType::Q4_0, {32, 2}, payload.data(), 36);
  tensors.add_tensor("f.q4_k", DType::Q4_K, {256}, payload.data(), 144);
  tensors.add_tensor("g.q6_k", DType::Q6_K, {256, 2}, payload.data(), 420);
  tensors.write(dir + "/tensors.gguf");

  Writer aligned;
  aligned.set_alignment(64);
  aligned.add_tensor("x", DType::F32, {3}, payload.data(), 12);
  aligned.add_tensor("y", DType::F32, {5}, payload.data(), 20);
  aligned.write(dir + "/aligned64.gguf");

  Writer().write(dir + "/empty.gguf");
  return 0;
}
