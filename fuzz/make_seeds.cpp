// Writes the fuzzers' starting corpora: make_seeds DIR (GGUF files for fuzz_gguf),
// make_seeds --tokenizer DIR (texts for fuzz_tokenizer) or make_seeds --server DIR (raw HTTP
// requests for fuzz_server_request: the malformed battery of tests/server/ and valid requests;
// fuzz/run.sh adds the real OpenAI client's requests from fuzz/seeds/server/).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "server/bad_request_cases.h"

using namespace mp;
using namespace mp::gguf;

namespace {

// Texts that reach the pre-tokenizer regexes' branches, special-token splitting, byte fallback
// and the UTF-8 repair paths. Each is written once per vocabulary selector byte 0..7 (the
// fuzzer takes byte 0 modulo the number of vocabularies; 0x80 adds BOS / EOS).
const char* const kTexts[] = {
    "Hello world",
    " Hello World! How are you?",
    "   leading and  double  spaces\t\ttabs\n\n\nnewlines \r\n",
    "I'm sure you'll see it's what they've done, WE'LL SEE, I'D SAY",
    "3.14159 and 1234567890, 1,000,000 and \xd9\xa3\xd9\xa4 (Arabic digits) and \xe2\x85\xa7",
    "def f(x):\n    return x**2  # comment\n\tif (a<=b && c!=d) { y = {'k': [1, 2]}; }",
    "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xe4\xbd\xa0\xe5\xa5\xbd \xe3\x81\x93\xe3\x82\x93 "
    "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xce\xb1\xce\xb2\xce\xb3 \xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\x82",
    "emoji \xf0\x9f\xa6\x99\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xe2\x9d\xa4\xef\xb8\x8f and \xf0\x9f\x87\xba\xf0\x9f\x87\xb8",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<s>[INST] hi [/INST]</s><unk><pad>",
    "<start_of_turn>user\nhi<end_of_turn>\n<bos><eos>",
    "<|endoftext|><|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
    "\xe2\x96\x81" "already\xe2\x96\x81" "escaped \xe2\x96\x81\xe2\x96\x81",
    "nbsp\xc2\xa0ideographic\xe3\x80\x80space\xe2\x80\xa8line\xc2\x85nel",
    "invalid \xff\xfe bytes \xc0\x80 overlong \xed\xa0\x80 surrogate \xf4\x90\x80\x80 big \xe2\x82 cut",
    "\x01\x02\x1b[0m\x7f",
    "",
};

int write_tokenizer_seeds(const std::string& dir) {
  int n = 0;
  for (const char* t : kTexts) {
    for (int sel = 0; sel < 8; ++sel) {
      const std::string path = dir + "/text" + std::to_string(n++);
      std::ofstream out(path, std::ios::binary);
      out.put(static_cast<char>(sel | (n % 2 ? 0x80 : 0)));
      out.write(t, static_cast<std::streamsize>(std::strlen(t)));
      if (!out) {
        std::fprintf(stderr, "make_seeds: cannot write %s\n", path.c_str());
        return 1;
      }
    }
  }
  return 0;
}

// Headers of the real models' kinds (tokenizer + hyper-parameters + a few tensors). Tensors are
// written as F16 of the same byte size (the Writer refuses types it does not know), then patched.
struct RawTensor {
  const char* name;
  uint32_t ggml_type;
  int64_t n;        // elements (one row)
  size_t nbytes;    // as ggml sizes it
};

std::vector<uint8_t> model_header(const std::string& arch, const std::vector<RawTensor>& ts) {
  Writer w;
  w.set_string("general.architecture", arch);
  w.set_string("general.name", "seed " + arch);
  const std::string a = arch + ".";
  w.set_u32(a + "block_count", 1);
  w.set_u32(a + "context_length", 32768);
  w.set_u32(a + "embedding_length", 64);
  w.set_u32(a + "feed_forward_length", 128);
  w.set_u32(a + "attention.head_count", 4);
  w.set_u32(a + "attention.head_count_kv", 1);
  w.set_f32(a + "rope.freq_base", 1e6f);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  if (arch == "gemma3") {
    w.set_u32(a + "attention.key_length", 256);
    w.set_u32(a + "attention.value_length", 256);
    w.set_u32(a + "attention.sliding_window", 512);
    w.set_f32(a + "rope.scaling.factor", 8.f);
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_array_string("tokenizer.ggml.tokens", {"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "\xe2\x96\x81" "a"});
    w.set_array_f32("tokenizer.ggml.scores", {0.f, 0.f, 0.f, 0.f, 0.f, -1.f});
    w.set_array_i32("tokenizer.ggml.token_type", {3, 3, 3, 2, 4, 1});
    w.set_bool("tokenizer.ggml.add_space_prefix", false);
  } else {
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", arch == "qwen2" ? "qwen2" : "smollm");
    w.set_array_string("tokenizer.ggml.tokens", {"a", "b", "ab", "\xc4\xa0", "<|endoftext|>", "<|im_start|>"});
    w.set_array_i32("tokenizer.ggml.token_type", {1, 1, 1, 1, 3, 3});
    w.set_array_string("tokenizer.ggml.merges", {"a b"});
    w.set_u32("tokenizer.ggml.eos_token_id", 4);
    w.set_string("tokenizer.chat_template", "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}");
  }
  w.set_u32("tokenizer.ggml.bos_token_id", 2);
  std::vector<uint8_t> payload(4096, 0x11);
  for (const RawTensor& t : ts) w.add_tensor(t.name, DType::F16, {int64_t(t.nbytes / 2)}, payload.data(), t.nbytes);
  std::vector<uint8_t> b = w.to_bytes();
  for (const RawTensor& t : ts) {
    // name (u64 length + bytes), n_dims u32, dims u64..., type u32, offset u64
    const std::string key = t.name;
    const auto at = std::search(b.begin(), b.end(), key.begin(), key.end()) - b.begin() + key.size();
    const uint64_t n = static_cast<uint64_t>(t.n);
    std::memcpy(&b[at + 4], &n, 8);
    std::memcpy(&b[at + 12], &t.ggml_type, 4);
  }
  return b;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// The real files' kinds: qwen2 (Q4_1, Q5_0), gemma3 (Q4_K, Q6_K); one file per other type those
// files hold (Q5_1, Q5_K, Q3_K, Q2_K, IQ4_NL) and one of an unknown type id; an unknown
// architecture; a truncated header. Sizes as ggml's blocks, so a reader that knows the type
// accepts the tensor and one that does not names it.
void write_model_seeds(const std::string& dir) {
  write_bytes(dir + "/qwen2.gguf", model_header("qwen2", {{"token_embd.weight", 3, 64, 40}, {"output.weight", 6, 64, 44}}));
  write_bytes(dir + "/gemma3.gguf", model_header("gemma3", {{"blk.0.attn_q.weight", 12, 256, 144},
                                                            {"blk.0.ffn_down.weight", 14, 256, 210}}));
  const RawTensor refused[] = {{"t.q5_1", 7, 32, 24},  {"t.q5_k", 13, 256, 176}, {"t.q3_k", 11, 256, 110},
                               {"t.q2_k", 10, 256, 84}, {"t.iq4_nl", 20, 32, 18}, {"t.unknown", 99, 32, 32}};
  for (const RawTensor& t : refused)
    write_bytes(dir + "/type_" + std::string(t.name + 2) + ".gguf", model_header("qwen2", {t}));
  write_bytes(dir + "/arch_unknown.gguf", model_header("mamba9", {{"token_embd.weight", 0, 8, 32}}));
  std::vector<uint8_t> cut = model_header("qwen2", {{"token_embd.weight", 3, 64, 40}});
  cut.resize(cut.size() * 2 / 3);
  write_bytes(dir + "/truncated.gguf", cut);
}

std::string http_request(const std::string& method, const std::string& path, const std::string& content_type,
                         const std::string& body, const std::string& auth = "Bearer test-key") {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n";
  if (!auth.empty()) r += "Authorization: " + auth + "\r\n";
  if (!content_type.empty()) r += "Content-Type: " + content_type + "\r\n";
  return r + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

int write_server_seeds(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> seeds;
  int n = 0;
  for (const mp::test::BadCase& c : mp::test::bad_request_cases())
    seeds.emplace_back("bad" + std::to_string(n++), http_request("POST", c.path, c.content_type, c.body));
  const char* J = "application/json";
  const std::string chat = R"({"messages": [{"role": "system", "content": "Be brief."}, )"
                           R"({"role": "user", "content": "Name three rivers."}], "max_tokens": 16})";
  seeds.emplace_back("ok_completion", http_request("POST", "/v1/completions", J,
                                                   R"({"prompt": "Once upon a time", "max_tokens": 3, "temperature": 0})"));
  seeds.emplace_back("ok_chat", http_request("POST", "/v1/chat/completions", J, chat));
  seeds.emplace_back("ok_charset", http_request("POST", "/v1/chat/completions", "application/json; charset=utf-8", chat));
  seeds.emplace_back("ok_policy", http_request("POST", "/v1/completions", J,
                                               R"({"prompt": [1, 2, 3], "max_tokens": 2, "stream": true, )"
                                               R"("magicpig": {"attn": "quest", "page-size": 16, "dense_layers": [0]}})"));
  seeds.emplace_back("no_key", http_request("POST", "/v1/completions", J, R"({"prompt": "x"})", ""));
  seeds.emplace_back("wrong_key", http_request("POST", "/v1/completions", J, R"({"prompt": "x"})", "Bearer nope"));
  seeds.emplace_back("models", http_request("GET", "/v1/models", "", ""));
  for (const auto& [name, bytes] : seeds) {
    const std::string path = dir + "/" + name + ".http";
    std::ofstream out(path, std::ios::binary);
    out << bytes;
    if (!out) {
      std::fprintf(stderr, "make_seeds: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--tokenizer") == 0) return write_tokenizer_seeds(argv[2]);
  if (argc == 3 && std::strcmp(argv[1], "--server") == 0) return write_server_seeds(argv[2]);
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR | make_seeds --tokenizer DIR | make_seeds --server DIR\n");
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
  write_model_seeds(dir);
  return 0;
}
