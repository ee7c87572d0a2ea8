// magicpig calibrate: per-head diagnosis of MagicPIG on one model and the profile that makes
// its failing heads exact (eval/calibrate.h, docs/calibration.md).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "attention/profile.h"
#include "attention/registry.h"
#include "common.h"
#include "plot.h"
#include "common/error.h"
#include "eval/calibrate.h"
#include "eval/ruler_runner.h"
#include "model/forward.h"
#include "model/model.h"

namespace mp::cli {

namespace {

nlohmann::json calibration_json(const eval::CalibrationOptions& o, const eval::Calibration& c) {
  nlohmann::json heads = nlohmann::json::array();
  for (const eval::HeadCalibration& h : c.heads)
    heads.push_back({{"layer", h.layer},
                     {"kv_head", h.kv_head},
                     {"head_steps", h.head_steps},
                     {"recall", h.recall},
                     {"rel_l2", h.rel_l2},
                     {"top_read", h.top_read},
                     {"top_u", h.top_u},
                     {"top_cos", h.top_cos},
                     {"needle_mass", h.needle_mass},
                     {"missed", h.missed},
                     {"cost", h.cost},
                     {"exact", h.exact}});
  return {{"seed", o.seed},     {"tasks", o.tasks},         {"length", o.length},
          {"samples", o.samples}, {"chat", o.chat},          {"cost_target", o.cost_target},
          {"min_missed", o.min_missed}, {"episodes", c.episodes}, {"steps", c.steps},
          {"sampled_cost", c.sampled_cost}, {"cost", c.cost}, {"heads", heads}};
}

void write_heads_csv(const std::string& path, const eval::Calibration& c) {
  std::ofstream f(path);
  check(f.good(), "cannot write '" + path + "'");
  f << "layer,kv_head,head_steps,recall,rel_l2,top_read,top_u,top_cos,needle_mass,missed,cost,exact\n";
  for (const eval::HeadCalibration& h : c.heads)
    f << h.layer << ',' << h.kv_head << ',' << h.head_steps << ',' << h.recall << ',' << h.rel_l2 << ',' << h.top_read
      << ',' << h.top_u << ',' << h.top_cos << ',' << h.needle_mass << ',' << h.missed << ',' << h.cost << ','
      << int(h.exact) << '\n';
  check(f.good(), "cannot write '" + path + "'");
}

}  // namespace

int cmd_calibrate(int argc, char** argv) {
  ModelOptions mo;
  eval::CalibrationOptions opt;
  opt.policy.name = "magicpig";
  std::string out_dir = "calibration", profile_path, tasks;
  bool no_chat = false, plot = false;
  Args a("calibrate",
         "Per-head diagnosis of MagicPIG on RULER needle episodes from a calibration seed: recall of the\n"
         "attention mass, the top key's draw against its cosine, the output error and the needle mass\n"
         "missed, per (layer, KV head); writes a profile that makes the most-missing heads exact within\n"
         "a cost target (docs/calibration.md).");
  add_model_options(a, mo, /*with_ctx=*/false);
  ProfileChoice flags;
  add_attention_options(a, opt.policy, /*with_name=*/false, &flags, /*with_profile_flag=*/false);
  a.value({"--tasks"}, "LIST", "one-turn needle tasks (default niah_single_2,niah_multikey_1,niah_multivalue)",
          [&](const std::string& v) { tasks = v; });
  a.value({"--length"}, "N", "prompt tokens per episode (default 4096)",
          [&](const std::string& v) { opt.length = parse_int("--length", v, 256, int64_t(1) << 24); });
  a.value({"--samples"}, "N", "episodes per task (default 4)",
          [&](const std::string& v) { opt.samples = int(parse_int("--samples", v, 1, 1000)); });
  a.value({"--seed"}, "N", "calibration seed of the episodes (default 7; report on another)",
          [&](const std::string& v) { opt.seed = uint64_t(parse_int("--seed", v, 0, INT64_MAX)); });
  a.flag({"--no-chat"}, "bare prompts instead of the model's chat template", no_chat);
  a.value({"--cost-target"}, "F", "mean fraction of prompt keys read, exact heads included (default 0.08)",
          [&](const std::string& v) { opt.cost_target = parse_real("--cost-target", v, 0, 1, /*lo_open=*/true); });
  a.value({"--min-missed"}, "F", "needle mass a head must miss to be made exact (default 0.02)",
          [&](const std::string& v) { opt.min_missed = parse_real("--min-missed", v, 0, 1); });
  a.value({"--out"}, "DIR", "heads.csv and calibration.md (default calibration)",
          [&](const std::string& v) { out_dir = v; });
  a.value({"-o", "--profile"}, "FILE", "the profile (default DIR/profile.json; MODEL.gguf.profile.json is used by default)",
          [&](const std::string& v) { profile_path = v; });
  a.flag({"--plot"}, "also draw DIR/heads.png (scripts/plot_calibration.py, needs matplotlib)", plot);
  if (!a.parse(argc, argv, 2)) return 0;
  check_flags_read(flags, {opt.policy});
  opt.chat = !no_chat;
  if (!tasks.empty()) opt.tasks = split(tasks, ',');
  opt.n_threads = resolved_threads(mo);

  const std::string path = resolve_model_path(mo.model);
  std::unique_ptr<Model> model = Model::load(path);
  const std::string data = eval::ruler::find_data_dir();
  const eval::ruler::Resources res = eval::ruler::load_resources(data + "/words.txt", data + "/haystack.txt");
  check(opt.length <= model->hp.n_ctx_train,
        "--length " + std::to_string(opt.length) + " is over the model's training context (" +
            std::to_string(model->hp.n_ctx_train) + ")");
  const auto t0 = std::chrono::steady_clock::now();
  const eval::Calibration c = eval::calibrate(*model, res, opt, [&](int done, int total, const std::string&) {
    progress_bar("calibrate", done, total, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::filesystem::create_directories(out_dir);
  write_heads_csv(out_dir + "/heads.csv", c);
  std::string sampler = opt.policy.name;  // the sampler's own parameters, as a spec names them
  const attn::PolicyDesc& desc = attn::policy_desc(opt.policy.name);
  for (const attn::ParamDesc* p : desc.params)
    if (p->in_label && attn::param_applies(desc, *p, opt.policy))
      sampler += ":" + std::string(p->key) + "=" + attn::param_text(*p, opt.policy);
  char head[640];
  std::snprintf(head, sizeof head,
                "calibration of %s on %s: %d episodes (%s, %lld tokens, seed %llu), %lld answer "
                "steps, %.0f s\nmean cost: %.4f sampled, %.4f with %zu exact KV heads (target %.4f)\n\n",
                sampler.c_str(), path.c_str(), c.episodes,
                tasks.empty() ? "niah_single_2,niah_multikey_1,niah_multivalue" : tasks.c_str(), (long long)opt.length,
                (unsigned long long)opt.seed, (long long)c.steps, secs, c.sampled_cost, c.cost, c.exact_heads.size(),
                opt.cost_target);
  const std::string table = eval::calibration_table(c);
  std::fputs(head, stdout);
  std::fputs(table.c_str(), stdout);
  {
    std::ofstream f(out_dir + "/calibration.md");
    f << head << table;
    check(f.good(), "cannot write '" + out_dir + "/calibration.md'");
  }

  attn::Profile p;
  p.model_file = std::filesystem::path(path).filename().string();
  p.shape = head_shape(model->hp);
  p.shape.sliding.clear();
  p.config = opt.policy;  // profile_json writes the policy's default dense layers when none were set
  p.config.exact_heads = c.exact_heads;
  p.calibration = calibration_json(opt, c);
  if (profile_path.empty()) profile_path = out_dir + "/profile.json";
  attn::write_profile(profile_path, p);
  std::fprintf(stderr, "calibrate: profile %s (exact heads:", profile_path.c_str());
  for (const auto& [l, h] : c.exact_heads) std::fprintf(stderr, " %d.%d", l, h);
  std::fprintf(stderr, "), tables in %s\n", out_dir.c_str());
  if (plot) run_plot_script("scripts/plot_calibration.py", out_dir);
  return 0;
}

}  // namespace mp::cli
