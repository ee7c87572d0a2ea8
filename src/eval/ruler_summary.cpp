// summary.md: mean score per task x length x policy from predictions.jsonl.
#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "eval/ruler_records.h"

namespace mp::eval::ruler {

namespace {
struct Mean {
  double sum = 0;
  int64_t n = 0;
  void add(double x) { sum += x; ++n; }
  double value() const { return n ? sum / double(n) : 0; }
};

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}
}  // namespace

std::string summarize(const RunOptions& opt) {
  const std::string jsonl = (std::filesystem::path(opt.out_dir) / "predictions.jsonl").string();
  std::set<std::string> tasks(opt.tasks.begin(), opt.tasks.end());
  std::set<int64_t> lengths(opt.lengths.begin(), opt.lengths.end());
  std::map<std::string, size_t> column;
  for (size_t c = 0; c < opt.policies.size(); ++c) column[opt.policies[c].label] = c;
  const size_t P = opt.policies.size();

  std::map<std::pair<std::string, int64_t>, std::vector<Mean>> cell;
  std::vector<Mean> cost(P);
  // Tasks with one needle, by tenth of its depth: where in the context retrieval fails.
  std::map<std::pair<int64_t, size_t>, std::array<Mean, 10>> by_depth;
  for (const nlohmann::json& r : detail::load_records(jsonl)) {
    const std::string task = r.at("task"), policy = r.at("policy");
    const int64_t L = r.at("length");
    const int sample = r.at("sample");
    if (!tasks.count(task) || !lengths.count(L) || !column.count(policy) || sample >= opt.samples) continue;
    auto& row = cell[{task, L}];
    row.resize(P);
    row[column[policy]].add(r.at("score").get<double>());
    cost[column[policy]].add(r.at("cost").get<double>());
    if (r.contains("needle_depths") && r["needle_depths"].size() == 1) {  // older records have none
      const double d = r["needle_depths"][0].get<double>();
      const int tenth = std::clamp(int(d * 10.0), 0, 9);
      by_depth[{L, column[policy]}][size_t(tenth)].add(r.at("score").get<double>());
    }
  }

  std::string md = "# RULER\n\nmodel: `" + opt.model_path + "`, seed " + std::to_string(opt.seed) + ", " +
                   std::to_string(opt.samples) +
                   " samples per cell; prompts: " +
                   (opt.chat ? "the model's chat template (context and question in the user turn, the answer prefix "
                               "after the assistant header)"
                             : "bare (BOS, context, question, answer prefix)") +
                   "; score: string_match_all x100 (count in parentheses when a cell has fewer "
                   "samples)\n\n| task | length |";
  for (const PolicySpec& p : opt.policies) md.append(" ").append(p.label).append(" |");
  md += "\n|---|---:|";
  for (size_t c = 0; c < P; ++c) md += "---:|";
  md += "\n";
  std::vector<Mean> avg(P);
  std::map<int64_t, std::vector<Mean>> avg_len;
  for (const std::string& task : opt.tasks)
    for (int64_t L : opt.lengths) {
      auto it = cell.find({task, L});
      md.append("| ").append(task).append(" | ").append(std::to_string(L)).append(" |");
      auto& al = avg_len[L];
      al.resize(P);
      for (size_t c = 0; c < P; ++c) {
        if (it == cell.end() || it->second[c].n == 0) {
          md += " - |";
          continue;
        }
        const Mean& m = it->second[c];
        md.append(" ").append(fmt("%.1f", m.value()));
        if (m.n < opt.samples) md.append(" (").append(std::to_string(m.n)).append(")");
        md += " |";
        avg[c].add(m.value());
        al[c].add(m.value());
      }
      md += "\n";
    }
  auto row = [&](const std::string& name, const std::vector<Mean>& v, const char* f) {
    md.append("| ").append(name).append(" | |");
    for (size_t c = 0; c < P; ++c) md.append(" ").append(v[c].n ? fmt(f, v[c].value()) : std::string("-")).append(" |");
    md += "\n";
  };
  if (opt.lengths.size() > 1)
    for (int64_t L : opt.lengths) row(std::string("**average ").append(std::to_string(L)).append("**"), avg_len[L], "%.1f");
  row("**average**", avg, "%.1f");
  row("mean cost (keys read)", cost, "%.4f");
  md += "\nCost: fraction of prompt keys a sparse layer-head-step read (1 for dense).\n";
  if (!by_depth.empty()) {
    md += "\n## By needle depth (tasks with one needle)\n\nMean score (records) per tenth of the haystack "
          "before the needle: 0-10% is the needle farthest from the question.\n\n| length | policy |";
    for (int t = 0; t < 10; ++t)
      md.append(" ").append(std::to_string(10 * t)).append("-").append(std::to_string(10 * t + 10)).append("% |");
    md += "\n|---:|---|";
    for (int t = 0; t < 10; ++t) md += "---:|";
    md += "\n";
    for (const auto& [key, tenths] : by_depth) {
      md.append("| ").append(std::to_string(key.first)).append(" | ").append(opt.policies[key.second].label).append(" |");
      for (const Mean& m : tenths) {
        if (m.n == 0) {
          md += " - |";
          continue;
        }
        md.append(" ").append(fmt("%.0f", m.value())).append(" (").append(std::to_string(m.n)).append(") |");
      }
      md += "\n";
    }
  }
  return md;
}

}  // namespace mp::eval::ruler
