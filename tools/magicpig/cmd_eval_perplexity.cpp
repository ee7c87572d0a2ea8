// magicpig eval perplexity: teacher-forced perplexity of each decode policy over the last
// tokens of a text, with KL and top-1 agreement against dense (docs/eval_attention.md).
#include <chrono>
#include <cstdio>
#include <fstream>

#include "common.h"
#include "eval_inputs.h"
#include "attention/registry.h"
#include "common/error.h"
#include "eval/perplexity.h"
#include "model/forward.h"
#include "model/model.h"

namespace mp::cli {

int cmd_eval_perplexity(int argc, char** argv) {
  EvalInputOptions io;
  io.list = attn::eval_default_list(/*with_exact=*/true);
  std::string out_json;
  int64_t n_eval = 0;
  Args a("eval perplexity",
         "Perplexity of each decode policy over the last --n-eval tokens of a text (teacher forced after\n"
         "one exact prefill of the rest), KL divergence and top-1 agreement vs dense.");
  add_eval_input_options(a, io, "text to evaluate");
  a.value({"--n-eval"}, "N", "scored tokens at the end of the context (default: min(256, half the context))",
          [&](const std::string& v) { n_eval = parse_int("--n-eval", v, 1, int64_t(1) << 24); });
  a.value({"--out"}, "FILE.json", "also write the results as JSON", [&](const std::string& v) { out_json = v; });
  if (!a.parse(argc, argv, 2)) return 0;

  const ModelOptions& mo = io.model;
  auto [specs, text, path, model] = load_eval_inputs(io);

  std::vector<int32_t> ids = model->tokenizer.encode(text, /*add_special=*/true);
  // -c is the evaluated context: the first N tokens of the text (one window, like one chunk of
  // llama-perplexity).
  const int64_t ctx = mo.n_ctx > 0 ? mo.n_ctx : model->hp.n_ctx_train;
  if (int64_t(ids.size()) > ctx) ids.resize(size_t(ctx));
  const int64_t T = int64_t(ids.size());
  check(T >= 3, "the text has " + std::to_string(T) + " tokens; perplexity needs at least 3");
  if (n_eval == 0) n_eval = std::min<int64_t>(256, T / 2);
  check(n_eval <= T - 2, "--n-eval " + std::to_string(n_eval) + " is too large for a context of " + std::to_string(T) +
                             " tokens (at most " + std::to_string(T - 2) + ": one prompt token and one fed token come first)");

  SequenceOptions so;
  so.n_ctx = T;
  so.kv_type = kv_type_for(mo, *model);
  so.n_threads = resolved_threads(mo);
  so.memory_budget = std::make_shared<MemoryBudget>();  // the exact prefix and every policy's fork
  const auto t0 = std::chrono::steady_clock::now();
  const eval::PerplexityRun run = eval::run_perplexity(*model, so, ids, n_eval, specs, [&](int64_t done, int64_t total) {
    progress_bar("decode", done, total, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::printf("perplexity: model %s, context %lld tokens (prompt %lld prefilled once, %lld scored through each policy)\n\n",
              path.c_str(), (long long)T, (long long)run.n_prompt, (long long)run.n_eval);
  for (const eval::PerplexityResult& r : run.results)
    std::printf("%-40s PPL = %.4f +/- %.5f\n", r.label.c_str(), r.ppl, r.ppl_stderr);
  std::printf("\n%s\nKL = mean over scored positions of KL(dense || policy) of the next-token distribution; "
              "cost = prompt keys read / prompt keys\n",
              eval::perplexity_markdown(run).c_str());
  std::fprintf(stderr, "perplexity: %.1f s\n", secs);
  if (!out_json.empty()) {
    std::ofstream f(out_json);
    f << eval::perplexity_json(run);
    check(f.good(), "cannot write '" + out_json + "'");
  }
  return 0;
}

}  // namespace mp::cli
