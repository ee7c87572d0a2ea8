// magicpig run: prompt in, streamed text out, llama.cpp-style timing summary on stderr.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "common.h"
#include "model/forward.h"
#include "device_options.h"
#include "run_parallel.h"
#include "run_report.h"
#include "common/error.h"
#include "engine/prompt_cache.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace mp::cli {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The longest usable prefix of `ids` from the prompt cache at path, as a new sequence, or
// nullptr when there is none (no file, an empty one, no shared prefix, or a file from another
// model, version or --cache-type, or corrupt: a warning says which; it is then rewritten). A
// file that is not a prompt cache is an error: it is not ours to overwrite.
std::unique_ptr<Sequence> restore_from_prompt_cache(const Model& model, const SequenceOptions& so, const std::string& path,
                                         std::span<const int32_t> ids, int64_t& reused) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || std::filesystem::file_size(path, ec) == 0) return nullptr;
  check(is_prompt_cache_file(path), "'" + path + "' exists but is not a magicpig prompt cache; refusing to overwrite it");
  const auto t0 = Clock::now();
  try {
    const int64_t keep = reusable_prefix(peek_prompt_cache(path, model).tokens, ids);
    if (keep == 0) {
      std::fprintf(stderr, "prompt cache: '%s' shares no prefix with this prompt\n", path.c_str());
      return nullptr;
    }
    std::unique_ptr<Sequence> seq = load_prompt_cache(model, so, path, keep);
    reused = keep;
    std::fprintf(stderr, "prompt cache: reused %lld of %zu prompt tokens from '%s' (%.2f ms)\n", (long long)keep,
                 ids.size(), path.c_str(), seconds_since(t0) * 1e3);
    return seq;
  } catch (const Error& e) {
    std::fprintf(stderr, "warning: prompt cache not used: %s\n", with_flag_names(e.what()).c_str());
    return nullptr;
  }
}
}  // namespace

int cmd_run(int argc, char** argv) {
  ModelOptions mo;
  attn::Config ac;
  SamplerParams sp;
  std::string prompt, prompt_file, system_prompt;
  bool chat = false, ignore_eos = false, show_prompt = false, have_prompt = false;
  std::string prompt_cache;
  bool prompt_cache_ro = false;
  int64_t n_predict = 128;
  Args a("run", "Generates text from a prompt, streaming it to stdout.");
  add_model_options(a, mo);
  a.value({"-p", "--prompt"}, "TEXT", "prompt text", [&](const std::string& v) { prompt = v; have_prompt = true; });
  a.value({"-f", "--file"}, "FILE", "read the prompt from a file", [&](const std::string& v) { prompt_file = v; have_prompt = true; });
  a.value({"-n", "--n-predict"}, "N", "tokens to generate (default 128; -1: until end of text or context)",
          [&](const std::string& v) { n_predict = parse_int("-n", v, -1, int64_t(1) << 24); });
  a.value({"--temp"}, "T", "temperature (default 0.8; 0: greedy)",
          [&](const std::string& v) { sp.temperature = float(parse_real("--temp", v, 0, 100)); });
  a.value({"--top-k"}, "N", "top-k sampling (default 40; 0: off)",
          [&](const std::string& v) { sp.top_k = int(parse_int("--top-k", v, 0, 1 << 24)); });
  a.value({"--top-p"}, "P", "top-p sampling (default 0.95; 1: off)",
          [&](const std::string& v) { sp.top_p = float(parse_real("--top-p", v, 0, 1, true)); });
  a.value({"--min-p"}, "P", "min-p sampling (default 0.05; 0: off)",
          [&](const std::string& v) { sp.min_p = float(parse_real("--min-p", v, 0, 0.999999)); });
  a.value({"--repeat-penalty"}, "F", "repetition penalty (default 1.0: off)",
          [&](const std::string& v) { sp.repeat_penalty = float(parse_real("--repeat-penalty", v, 1e-3, 100)); });
  a.value({"--repeat-last-n"}, "N", "tokens the repetition penalty looks back (default 64)",
          [&](const std::string& v) { sp.repeat_last_n = int(parse_int("--repeat-last-n", v, 0, 1 << 24)); });
  a.value({"-s", "--seed"}, "N", "sampling seed (default 12648430)",
          [&](const std::string& v) { sp.seed = uint64_t(parse_int("--seed", v, 0, INT64_MAX)); });
  a.flag({"--chat"}, "format the prompt as a user turn of the model's chat template", chat);
  a.value({"--system"}, "TEXT", "system message for --chat", [&](const std::string& v) { system_prompt = v; });
  a.flag({"--ignore-eos"}, "keep generating past end-of-text tokens", ignore_eos);
  a.flag({"--display-prompt"}, "echo the prompt before the generated text", show_prompt);
  a.value({"--prompt-cache"}, "FILE",
          "reuse the prefilled prompt saved in FILE (its longest prefix shared with this prompt) and save this "
          "prompt's prefill there",
          [&](const std::string& v) { prompt_cache = v; });
  a.flag({"--prompt-cache-ro"}, "use --prompt-cache without updating the file", prompt_cache_ro);
  ProfileChoice profile;
  add_attention_options(a, ac, /*with_name=*/true, &profile);
  ParallelRunOptions par;
  DeviceOptions dev;
  add_decode_options(a, par, dev);
  if (!a.parse(argc, argv, 2)) return 0;
  check_decode_options(par, dev);

  check(prompt.empty() || prompt_file.empty(), "give either -p or -f, not both");
  if (!prompt_file.empty()) {
    std::ifstream in(prompt_file, std::ios::binary);
    check(in.good(), "cannot read prompt file '" + prompt_file + "'");
    prompt.assign(std::istreambuf_iterator<char>(in), {});
  }
  check(have_prompt, "no prompt: give -p TEXT or -f FILE");
  check(!prompt_cache_ro || !prompt_cache.empty(), "--prompt-cache-ro needs --prompt-cache FILE");
  sp.validate();

  const auto t_load = Clock::now();
  const std::string path = resolve_model_path(mo.model);
  std::unique_ptr<Model> model = Model::load(path);
  const double load_s = seconds_since(t_load);
  apply_attention_profile(ac, profile, path, head_shape(model->hp));
  check_flags_read(profile, {ac});

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
  so.kv_type = kv_type_for(mo, *model);
  so.n_threads = resolved_threads(mo);
  so.attention = ac;
  so.memory_budget = std::make_shared<MemoryBudget>(par.mem_limit);
  // The GPU layers' K/V live on the device once attached: the CPU budget counts the others.
  if (dev.cuda()) so.device_kv_layers = cuda::gpu_attention_layers(so.attention, model->hp.n_layer);
  if (par.context_parallel) {
    check(prompt_cache.empty(), "--prompt-cache does not work with --context-parallel");
    return run_context_parallel(*model, path, so, par, ids, sp, n_predict, ignore_eos);
  }
  std::unique_ptr<Sequence> seq = std::make_unique<Sequence>(*model, so);
  n_predict = answer_tokens(int64_t(ids.size()), n_predict, seq->n_ctx());
  if (show_prompt) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }

  print_memory_plan(*model, so);
  // Planned (and refused when it does not fit) before the prefill, which stays on the CPU.
  std::unique_ptr<cuda::CudaDecoder> gpu;
  if (dev.cuda()) {
    SequenceOptions gso = so;
    gso.n_ctx = seq->n_ctx();
    gpu = make_cuda_decoder(*model, gso, dev, 1);
  }
  int64_t reused = 0;
  if (!prompt_cache.empty()) {
    std::unique_ptr<Sequence> restored = restore_from_prompt_cache(*model, so, prompt_cache, ids, reused);
    if (restored) seq = std::move(restored);
  }
  const std::span<const int32_t> rest = std::span<const int32_t>(ids).subspan(size_t(reused));

  const auto t_prompt = Clock::now();
  const auto bar = [&](int64_t done, int64_t total) { progress_bar("prefill", done, total, seconds_since(t_prompt)); };
  // The policy's tables are built while the prefill runs (prompt eval includes them), unless
  // the prompt cache is saved (it holds an unfinished prompt) or no step() follows (-n <= 1):
  // then the first step() builds them, as before.
  const bool save_cache = !prompt_cache.empty() && !prompt_cache_ro && !rest.empty();
  if (save_cache || n_predict <= 1) seq->prefill(rest, false, bar);
  else seq->prefill_and_finish(rest, false, bar);
  const double prompt_s = seconds_since(t_prompt);
  if (save_cache) {
    const auto t_save = Clock::now();
    try {
      save_prompt_cache(*seq, prompt_cache);
      std::fprintf(stderr, "prompt cache: saved %lld tokens to '%s' (%s, %.2f ms)\n", (long long)seq->n_tokens(),
                   prompt_cache.c_str(), human_bytes(double(std::filesystem::file_size(prompt_cache))).c_str(),
                   seconds_since(t_save) * 1e3);
    } catch (const Error& e) {  // generation does not depend on the cache
      std::fprintf(stderr, "warning: prompt cache not saved: %s\n", with_flag_names(e.what()).c_str());
    }
  }

  if (gpu) gpu->attach(*seq);
  Sampler sampler(sp);
  // Greedy without penalties needs no logits on the host: the GPU step picks the token.
  const bool greedy_on_device = gpu && cuda::takes_raw_argmax(sp);
  int32_t device_token = -1;  // the token the last GPU step chose, when greedy_on_device
  Utf8Stream out;
  const auto t_gen = Clock::now();
  int64_t generated = 0;
  for (; generated < n_predict; ++generated) {
    const int32_t tok = device_token >= 0 ? device_token : sampler.sample(seq->logits(), seq->tokens());
    if (!ignore_eos && model->tokenizer.is_eog(tok)) break;
    std::fputs(out.push(model->tokenizer.token_to_piece(tok)).c_str(), stdout);
    std::fflush(stdout);
    if (generated + 1 < n_predict) {
      if (gpu) {
        Sequence* one[] = {seq.get()};
        const int32_t toks[] = {tok};
        if (greedy_on_device) {
          int32_t next[1];
          gpu->step_greedy(one, toks, next);
          device_token = next[0];
        } else {
          gpu->step(one, toks);
        }
      } else {
        seq->step(tok);
      }
    }
  }
  std::fputs(out.flush().c_str(), stdout);
  std::fputs("\n", stdout);
  const double gen_s = seconds_since(t_gen);

  const attn::Cost& cost = seq->cost();
  std::fprintf(stderr, "\nmagicpig: model %s (%s, %d layers, %d/%d heads, ctx %lld), attention %s, %d threads%s\n",
               path.c_str(), human_bytes(double(model->weight_bytes())).c_str(), model->hp.n_layer, model->hp.n_head,
               model->hp.n_kv_head, (long long)seq->n_ctx(), ac.name.c_str(), so.n_threads,
               gpu ? ", decode on cuda" : "");
  std::fprintf(stderr, "load time   = %10.2f ms\n", load_s * 1e3);
  if (!rest.empty())
    print_token_rate("prompt eval", prompt_s, int64_t(rest.size()));
  else
    std::fprintf(stderr, "prompt eval = all %zu prompt tokens came from the prompt cache\n", ids.size());
  if (generated > 0) print_token_rate("eval time", gen_s, generated);
  std::fprintf(stderr, "keys read   = %10.4f of prompt keys per sparse layer-head-step (attention cost)\n",
               cost.fraction());
  std::fprintf(stderr, "memory      = KV %s (%s per token), attention tables %s, peak RSS %s\n",
               human_bytes(double(seq->kv_bytes())).c_str(),
               human_bytes(double(seq->kv_bytes()) / double(std::max<int64_t>(seq->n_tokens(), 1))).c_str(),
               human_bytes(double(seq->aux_bytes())).c_str(), human_bytes(double(peak_rss_bytes())).c_str());
  return 0;
}

}  // namespace mp::cli
