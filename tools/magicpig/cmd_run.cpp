// magicpig run: prompt in, streamed text out, llama.cpp-style timing summary on stderr.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "common.h"
#include "common/error.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace mp::cli {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

int cmd_run(int argc, char** argv) {
  ModelOptions mo;
  attn::Config ac;
  SamplerParams sp;
  std::string prompt, prompt_file, system_prompt;
  bool chat = false, ignore_eos = false, show_prompt = false, have_prompt = false;
  int64_t n_predict = 128;
  Args a("run", "Generates text from a prompt, streaming it to stdout.");
  add_model_options(a, mo);
  a.value({"-p", "--prompt"}, "TEXT", "prompt text", [&](const std::string& v) { prompt = v; have_prompt = true; });
  a.value({"-f", "--file"}, "FILE", "read the prompt from a file", [&](const std::string& v) { prompt_file = v; have_prompt = true; });
  a.value({"-n", "--n-predict"}, "N", "tokens to generate (default 128; -1: until end of text or context)",
          [&](const std::string& v) { n_predict = parse_int("-n", v, -1, int64_t(1) << 24); });
  a.value({"--temp"}, "T", "temperature (default 0.8; 0: greedy)",
          [&](const std::string& v) { sp.temperature = float(parse_float("--temp", v, 0, 100)); });
  a.value({"--top-k"}, "N", "top-k sampling (default 40; 0: off)",
          [&](const std::string& v) { sp.top_k = int(parse_int("--top-k", v, 0, 1 << 24)); });
  a.value({"--top-p"}, "P", "top-p sampling (default 0.95; 1: off)",
          [&](const std::string& v) { sp.top_p = float(parse_float("--top-p", v, 1e-9, 1)); });
  a.value({"--min-p"}, "P", "min-p sampling (default 0.05; 0: off)",
          [&](const std::string& v) { sp.min_p = float(parse_float("--min-p", v, 0, 0.999999)); });
  a.value({"--repeat-penalty"}, "F", "repetition penalty (default 1.0: off)",
          [&](const std::string& v) { sp.repeat_penalty = float(parse_float("--repeat-penalty", v, 1e-3, 100)); });
  a.value({"--repeat-last-n"}, "N", "tokens the repetition penalty looks back (default 64)",
          [&](const std::string& v) { sp.repeat_last_n = int(parse_int("--repeat-last-n", v, 0, 1 << 24)); });
  a.value({"-s", "--seed"}, "N", "sampling seed (default 12648430)",
          [&](const std::string& v) { sp.seed = uint64_t(parse_int("--seed", v, 0, INT64_MAX)); });
  a.flag({"--chat"}, "format the prompt as a user turn of the model's chat template", chat);
  a.value({"--system"}, "TEXT", "system message for --chat", [&](const std::string& v) { system_prompt = v; });
  a.flag({"--ignore-eos"}, "keep generating past end-of-text tokens", ignore_eos);
  a.flag({"--display-prompt"}, "echo the prompt before the generated text", show_prompt);
  add_attention_options(a, ac);
  if (!a.parse(argc, argv, 2)) return 0;

  check(prompt.empty() || prompt_file.empty(), "give either -p or -f, not both");
  if (!prompt_file.empty()) {
    std::ifstream in(prompt_file, std::ios::binary);
    check(in.good(), "cannot read prompt file '" + prompt_file + "'");
    prompt.assign(std::istreambuf_iterator<char>(in), {});
  }
  check(have_prompt, "no prompt: give -p TEXT or -f FILE");
  sp.validate();

  const auto t_load = Clock::now();
  const std::string path = resolve_model_path(mo.model);
  std::unique_ptr<Model> model = Model::load(path);
  const double load_s = seconds_since(t_load);

  std::string text = prompt;
  if (chat) {
    std::vector<ChatMessage> msgs;
    if (!system_prompt.empty()) msgs.push_back({"system", system_prompt});
    msgs.push_back({"user", prompt});
    text = apply_chat_template(model->file, model->tokenizer, msgs, true);
  }
  const std::vector<int32_t> ids = model->tokenizer.encode(text, /*add_special=*/true, /*parse_special=*/chat);
  check(!ids.empty(), "the prompt tokenizes to nothing");

  SequenceOptions so;
  so.n_ctx = mo.n_ctx;
  so.kv_type = mo.kv_type;
  so.n_threads = resolved_threads(mo);
  so.attention = ac;
  Sequence seq(*model, so);
  check(int64_t(ids.size()) < seq.n_ctx(), "prompt is too long: " + std::to_string(ids.size()) +
                                               " tokens do not fit the context of " + std::to_string(seq.n_ctx()) +
                                               " (raise -c)");
  if (n_predict < 0) n_predict = seq.n_ctx() - int64_t(ids.size());
  check(int64_t(ids.size()) + n_predict <= seq.n_ctx(),
        "prompt (" + std::to_string(ids.size()) + " tokens) + -n " + std::to_string(n_predict) +
            " exceeds the context of " + std::to_string(seq.n_ctx()) + " tokens (raise -c or lower -n)");
  if (show_prompt) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }

  const auto t_prompt = Clock::now();
  seq.prefill(ids, false, [&](int64_t done, int64_t total) {
    progress_bar("prefill", done, total, seconds_since(t_prompt));
  });
  const double prompt_s = seconds_since(t_prompt);

  Sampler sampler(sp);
  Utf8Stream out;
  const auto t_gen = Clock::now();
  int64_t generated = 0;
  for (; generated < n_predict; ++generated) {
    const int32_t tok = sampler.sample(seq.logits(), seq.tokens());
    if (!ignore_eos && model->tokenizer.is_eog(tok)) break;
    std::fputs(out.push(model->tokenizer.token_to_piece(tok)).c_str(), stdout);
    std::fflush(stdout);
    if (generated + 1 < n_predict) seq.step(tok);
  }
  std::fputs(out.flush().c_str(), stdout);
  std::fputs("\n", stdout);
  const double gen_s = seconds_since(t_gen);

  const attn::Cost& cost = seq.cost();
  std::fprintf(stderr, "\nmagicpig: model %s (%s, %d layers, %d/%d heads, ctx %lld), attention %s, %d threads\n",
               path.c_str(), human_bytes(double(model->weight_bytes())).c_str(), model->hp.n_layer, model->hp.n_head,
               model->hp.n_kv_head, (long long)seq.n_ctx(), ac.name.c_str(), so.n_threads);
  std::fprintf(stderr, "load time   = %10.2f ms\n", load_s * 1e3);
  std::fprintf(stderr, "prompt eval = %10.2f ms / %5zu tokens (%8.2f ms per token, %9.2f tokens per second)\n",
               prompt_s * 1e3, ids.size(), prompt_s * 1e3 / double(ids.size()), double(ids.size()) / prompt_s);
  if (generated > 0)
    std::fprintf(stderr, "eval time   = %10.2f ms / %5lld tokens (%8.2f ms per token, %9.2f tokens per second)\n",
                 gen_s * 1e3, (long long)generated, gen_s * 1e3 / double(generated), double(generated) / gen_s);
  std::fprintf(stderr, "keys read   = %10.4f of prompt keys per sparse layer-head-step (attention cost)\n",
               cost.fraction());
  std::fprintf(stderr, "memory      = KV %s (%s per token), attention tables %s, peak RSS %s\n",
               human_bytes(double(seq.kv_bytes())).c_str(),
               human_bytes(double(seq.kv_bytes()) / double(std::max<int64_t>(seq.n_tokens(), 1))).c_str(),
               human_bytes(double(seq.aux_bytes())).c_str(), human_bytes(double(peak_rss_bytes())).c_str());
  return 0;
}

}  // namespace mp::cli
