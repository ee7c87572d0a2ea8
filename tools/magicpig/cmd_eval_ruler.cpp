// magicpig eval ruler: RULER-style long-context accuracy of every decode attention policy on
// the same prompts (docs/eval_ruler.md).
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "common.h"
#include "model/forward.h"
#include "attention/registry.h"
#include "common/error.h"
#include "eval/ruler_runner.h"
#include "model/model.h"

namespace mp::cli {

int cmd_eval_ruler(int argc, char** argv) {
  ModelOptions mo;
  attn::Config base;
  std::string attn_list = attn::eval_default_list(/*with_exact=*/true);
  std::string task_list = "all", lengths_list = "1024,2048", out_dir, haystack;
  int samples = 10, max_new = 0, depth_grid = 0;
  uint64_t seed = 42;
  bool quiet = false, chat = false;
  Args a("eval ruler", "RULER-style long-context tasks: accuracy of each decode attention policy on the same prompts.");
  add_model_options(a, mo);
  a.value({"--attn"}, "LIST",
          "policies, comma separated; NAME[:K=8:L=75:budget=0.05...] sets parameters per policy, keys " +
              attn::all_keys_text() + ", dense_layers=0/16 (default " + attn_list + ")",
          [&](const std::string& v) { attn_list = v; });
  a.value({"--tasks"}, "LIST", "tasks, comma separated (default all; see docs/eval_ruler.md)",
          [&](const std::string& v) { task_list = v; });
  a.value({"--lengths"}, "LIST", "prompt lengths in tokens (default 1024,2048)",
          [&](const std::string& v) { lengths_list = v; });
  a.value({"--samples"}, "N", "samples per task and length (default 10)",
          [&](const std::string& v) { samples = int(parse_int("--samples", v, 1, 1000000)); });
  a.value({"--seed"}, "N", "seed of the task generator (default 42)",
          [&](const std::string& v) { seed = uint64_t(parse_int("--seed", v, 0, INT64_MAX)); });
  a.value({"--out"}, "DIR", "results folder: predictions.jsonl, summary.md, config.json (required; resumable)",
          [&](const std::string& v) { out_dir = v; });
  a.value({"--haystack"}, "FILE", "natural text for the haystacks (default eval/data/haystack.txt)",
          [&](const std::string& v) { haystack = v; });
  a.value({"--max-new"}, "N", "answer tokens per turn, instead of each task's own (more room for a model that answers after a preamble; fewer for quick runs)",
          [&](const std::string& v) { max_new = int(parse_int("--max-new", v, 1, 4096)); });
  a.value({"--depths"}, "N", "needle tasks: the asked needle of sample i at depth (i mod N)/(N-1), 0% to 100% "
          "(default: a seeded uniform depth per sample)",
          [&](const std::string& v) { depth_grid = int(parse_int("--depths", v, 2, 1000)); });
  a.flag({"--chat"}, "ask in the model's chat template (as run --chat): context and question as the user turn, "
         "the answer prefix after the assistant header", chat);
  a.flag({"-q", "--quiet"}, "do not print the summary on stdout", quiet);
  ProfileChoice profile;
  add_attention_options(a, base, /*with_name=*/false, &profile);
  if (!a.parse(argc, argv, 2)) return 0;

  check(!out_dir.empty(), "--out DIR is required (results and resume state go there)");
  eval::ruler::RunOptions opt;
  opt.tasks = eval::ruler::parse_task_list(task_list);
  for (const std::string& s : split(lengths_list, ','))
    opt.lengths.push_back(parse_int("--lengths", s, 16, int64_t(1) << 24));
  opt.policies = eval::ruler::parse_policy_list(attn_list, base);
  opt.samples = samples;
  opt.seed = seed;
  opt.n_threads = resolved_threads(mo);
  opt.kv_type = mo.kv_type;
  opt.n_ctx = mo.n_ctx;
  opt.max_new = max_new;
  opt.depth_grid = depth_grid;
  opt.chat = chat;
  opt.out_dir = out_dir;
  opt.model_path = resolve_model_path(mo.model);

  const std::string data = eval::ruler::find_data_dir();
  const std::string words = (std::filesystem::path(data) / "words.txt").string();
  if (haystack.empty()) haystack = (std::filesystem::path(data) / "haystack.txt").string();
  const eval::ruler::Resources res = eval::ruler::load_resources(words, haystack);
  std::unique_ptr<Model> model = Model::load(opt.model_path);
  // A bare entry ("magicpig") takes the model's calibration profile (or --attn-profile's) and is
  // labelled NAME+profile; entries with keys set their parameters themselves.
  bool applied = false;
  for (eval::ruler::PolicySpec& p : opt.policies) {
    if (p.label != p.config.name) continue;
    if (!apply_attention_profile(p.config, profile, opt.model_path, head_shape(model->hp)).empty()) {
      p.label += "+profile";
      applied = true;
    }
  }
  std::vector<attn::Config> used;
  for (const eval::ruler::PolicySpec& p : opt.policies) used.push_back(p.config);
  check_flags_read(profile, used);
  check(applied || profile.choice.empty() || profile.choice == "none",
        "--attn-profile " + profile.choice + ": no bare entry of its policy in --attn to apply it to (e.g. --attn dense,magicpig)");

  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const eval::ruler::RunStats st = eval::ruler::run_ruler(*model, res, opt, [&](int64_t done, int64_t total) {
    progress_bar("ruler", done, total, std::chrono::duration<double>(Clock::now() - t0).count());
  });
  if (!quiet) std::fputs(eval::ruler::summarize(opt).c_str(), stdout);
  std::fprintf(stderr, "ruler: %lld records written, %lld already done (skipped), %lld prefills, %lld decode steps, %.1f s; "
               "results in %s\n",
               (long long)st.records_written, (long long)st.records_skipped, (long long)st.prefills,
               (long long)st.decode_steps, st.seconds, out_dir.c_str());
  return 0;
}

}  // namespace mp::cli
