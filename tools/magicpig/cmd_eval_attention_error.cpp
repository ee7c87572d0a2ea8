// magicpig eval attention-error: relative L2 error of each decode policy's attention output
// against exact attention, on the same states, per layer and head (docs/eval_attention.md).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common.h"
#include "eval_inputs.h"
#include "attention/registry.h"
#include "plot.h"
#include "common/error.h"
#include "eval/attention_probe_run.h"
#include "eval/bound_coverage.h"
#include "model/forward.h"
#include "model/model.h"

namespace mp::cli {

namespace {

// The paper's matched-cost comparison (Figures 3/6): the approximate policies at their defaults
// (MagicPIG K=10 L=150, the baselines at a 2% budget) plus MagicPIG's second setting. See
// docs/eval_attention.md.
std::string default_policies() { return attn::eval_default_list(/*with_exact=*/false) + ",magicpig:K=8:L=75"; }

}  // namespace

int cmd_eval_attention_error(int argc, char** argv) {
  EvalInputOptions io;
  io.list = default_policies();
  std::string out_dir = "attention-error";
  bool plot = false;
  int64_t n_prompt = 0, steps = 16;
  Args a("eval attention-error",
         "Relative L2 error of each policy's attention output vs exact attention, with the text's own\n"
         "continuation teacher-forced so every policy sees the same (exact) states.");
  add_eval_input_options(a, io, "text to measure on");
  a.value({"--n-prompt"}, "N", "prompt tokens taken from the text (default: all but the --steps after them)",
          [&](const std::string& v) { n_prompt = parse_int("--n-prompt", v, 1, int64_t(1) << 24); });
  a.value({"--steps"}, "N", "decode steps measured; the text's next tokens are fed (default 16)",
          [&](const std::string& v) { steps = parse_int("--steps", v, 1, 1 << 20); });
  a.value({"--out"}, "DIR", "output folder (default attention-error)", [&](const std::string& v) { out_dir = v; });
  a.flag({"--plot"}, "draw error_vs_cost.png and error_per_layer.png (python3-matplotlib)", plot);
  if (!a.parse(argc, argv, 2)) return 0;

  const ModelOptions& mo = io.model;
  auto [specs, text, path, model] = load_eval_inputs(io);

  const std::vector<int32_t> ids = model->tokenizer.encode(text, /*add_special=*/true);
  const int64_t T = int64_t(ids.size());
  const int64_t ctx = mo.n_ctx > 0 ? mo.n_ctx : model->hp.n_ctx_train;
  check(T >= steps + 1, "the text has " + std::to_string(T) + " tokens; --steps " + std::to_string(steps) +
                            " needs at least " + std::to_string(steps + 1) + " (a prompt plus the fed continuation)");
  check(steps < ctx, "--steps " + std::to_string(steps) + " leaves no prompt in a context of " + std::to_string(ctx));
  if (n_prompt == 0) n_prompt = std::min(T, ctx) - steps;
  check(n_prompt + steps <= T, "the text is too short: --n-prompt " + std::to_string(n_prompt) + " + --steps " +
                                   std::to_string(steps) + " = " + std::to_string(n_prompt + steps) +
                                   " tokens, but it has " + std::to_string(T));
  check(n_prompt + steps <= ctx, "--n-prompt " + std::to_string(n_prompt) + " + --steps " + std::to_string(steps) +
                                     " exceed the context of " + std::to_string(ctx) + " tokens (raise -c)");

  SequenceOptions so;
  so.n_ctx = n_prompt + steps;
  so.kv_type = kv_type_for(mo, *model);
  so.n_threads = resolved_threads(mo);
  so.memory_budget = std::make_shared<MemoryBudget>();
  const auto t0 = std::chrono::steady_clock::now();
  const std::span<const int32_t> all(ids);
  const eval::AttentionErrorRun run = eval::run_attention_error(
      *model, so, all.subspan(0, size_t(n_prompt)), all.subspan(size_t(n_prompt), size_t(steps)), specs,
      [&](int64_t done, int64_t total) {
        progress_bar("decode", done, total,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      });
  const std::vector<eval::PolicyErrorSummary> summary = eval::summarize(run);

  std::filesystem::create_directories(out_dir);
  const std::string dir = (std::filesystem::path(out_dir)).string();
  eval::write_attention_error_csv(run, dir + "/attention_error.csv");
  eval::write_layer_csv(run, summary, dir + "/attention_error_layers.csv");
  const std::string md = eval::summary_markdown(summary), csv = eval::summary_csv(summary);
  {
    std::ofstream f(dir + "/summary.csv");
    f << csv;
    std::ofstream g(dir + "/summary.md");
    g << md;
    check(f.good() && g.good(), "cannot write the summary files in '" + dir + "'");
  }
  std::printf("attention error: model %s, %lld prompt tokens, %lld teacher-forced decode steps, %d layers x %d heads\n\n",
              path.c_str(), (long long)n_prompt, (long long)steps, model->hp.n_layer, model->hp.n_head);
  std::fputs(md.c_str(), stdout);
  std::printf("\nerror = mean over sparse layers, (query head, step) of ||o - o_dense|| / ||o_dense||; "
              "cost = prompt keys read / prompt keys\n");
  std::fprintf(stderr, "wrote %s/{attention_error.csv, attention_error_layers.csv, summary.csv, summary.md}\n",
               dir.c_str());
  // Policies that claim an error bound per head-step (magicpig-adaptive): is it honest?
  const std::vector<eval::BoundCoverage> coverage = eval::bound_coverage(run);
  if (!coverage.empty()) {
    const std::string cmd = eval::coverage_markdown(coverage);
    std::ofstream f(dir + "/coverage.csv"), g(dir + "/coverage.md");
    f << eval::coverage_csv(coverage);
    g << cmd;
    check(f.good() && g.good(), "cannot write the coverage files in '" + dir + "'");
    std::printf("\nclaimed bounds (sparse layers): err = ||o - o_dense|| / ||o_dense|| per head-step\n");
    std::fputs(cmd.c_str(), stdout);
  }

  if (!plot) return 0;
  run_plot_script("scripts/plot_attention_error.py", dir);
  return 0;
}

}  // namespace mp::cli
