#include "eval/calibrate.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "common/error.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "eval/needle_trace.h"
#include "eval/ruler_runner.h"
#include "model/forward.h"

namespace mp::eval {

namespace {

// Sums of one (layer, KV head) over its traced head-steps.
struct HeadSums {
  int64_t n = 0, keys_read = 0, keys_total = 0;
  double recall = 0, rel_l2 = 0, top_read = 0, top_u = 0, top_cos = 0, needle_mass = 0, missed = 0;
};

// The positions of the needles that hold a value the first turn asks for (multi-value: all of
// them; multi-key: the asked one, not the distractors).
std::vector<int64_t> asked_needle_tokens(const Tokenizer& tok, const ruler::Sample& s) {
  std::vector<int64_t> watch;
  for (const ruler::Needle& nd : s.needles) {
    const bool asked = std::any_of(s.references[0].begin(), s.references[0].end(),
                                   [&](const std::string& r) { return nd.text.find(r) != std::string::npos; });
    if (!asked) continue;
    size_t at = 0;
    for (int64_t p : tokens_over_text(tok, s.prompt_tokens, nd.text, &at)) watch.push_back(p);
  }
  std::sort(watch.begin(), watch.end());
  watch.erase(std::unique(watch.begin(), watch.end()), watch.end());
  check(!watch.empty(), "calibrate: no asked needle found in the prompt of " + s.task);
  return watch;
}

}  // namespace

double choose_exact_heads(std::vector<HeadCalibration>& heads, double cost_target, double min_missed) {
  if (heads.empty()) return 0;
  const double n = double(heads.size());
  double cost = 0;
  for (HeadCalibration& h : heads) {
    h.exact = false;
    cost += h.cost / n;
  }
  std::vector<HeadCalibration*> order;
  for (HeadCalibration& h : heads) order.push_back(&h);
  std::stable_sort(order.begin(), order.end(),
                   [](const HeadCalibration* a, const HeadCalibration* b) { return a->missed > b->missed; });
  for (HeadCalibration* h : order) {
    if (h->missed < min_missed) break;
    const double with = cost + (1.0 - h->cost) / n;
    if (with > cost_target) continue;  // a cheaper head further down may still fit
    h->exact = true;
    cost = with;
  }
  return cost;
}

Calibration calibrate(const Model& model, const ruler::Resources& res, const CalibrationOptions& opt,
                      const CalibrationProgress& progress) {
  check(opt.policy.name == "magicpig", "calibrate: the policy must be magicpig, got '" + opt.policy.name + "'");
  check(opt.samples >= 1 && opt.samples <= 1000, "calibrate: samples must be in [1, 1000]");
  check(opt.cost_target > 0 && opt.cost_target <= 1, "calibrate: cost_target must be in (0, 1]");
  check(opt.min_missed >= 0 && opt.min_missed <= 1, "calibrate: min_missed must be in [0, 1]");
  check(!opt.tasks.empty(), "calibrate: no tasks");
  for (const std::string& t : opt.tasks) {
    ruler::task_spec(t);  // throws on an unknown name
    check(t.rfind("niah_", 0) == 0 && t != "niah_multiquery",
          "calibrate: task " + t + " is not a one-turn needle task (niah_single_*, niah_multikey_*, niah_multivalue)");
  }
  const Tokenizer& tok = model.tokenizer;
  const attn::HeadShape shape = head_shape(model.hp);
  attn::Config cfg = opt.policy;
  cfg.exact_heads.clear();
  cfg.validate(shape);
  const int G = shape.n_head / shape.n_kv_head;
  const ruler::ChatWrap chat = opt.chat ? ruler::chat_wrap(model) : ruler::ChatWrap{};
  attn::Config dense;
  dense.name = "dense";

  std::map<std::pair<int, int>, HeadSums> sums;
  Calibration out;
  const int total = int(opt.tasks.size()) * opt.samples;
  for (const std::string& task : opt.tasks)
    for (int i = 0; i < opt.samples; ++i) {
      const ruler::Sample s = ruler::generate_sample(task, opt.length, i, opt.seed, tok, res, 0, 0, chat);
      if (progress) progress(out.episodes, total, task + " #" + std::to_string(i));
      SequenceOptions so;
      so.n_threads = opt.n_threads;
      Sequence base(model, so);
      base.prefill(s.prompt_tokens);
      std::unique_ptr<Sequence> dseq = base.fork(dense);
      const std::vector<int32_t> answer =
          ruler::answer_turn(*dseq, tok, ruler::task_spec(s.task), s.max_new, s.chat).tokens;

      auto ctl = std::make_shared<NeedleTraceControl>();
      ctl->watch = asked_needle_tokens(tok, s);
      std::unique_ptr<Sequence> traced = base.fork(std::make_unique<NeedleTracer>(cfg, shape, ctl), "calibrate");
      // Each answer token but the last is fed; the step that feeds token j predicts token j + 1.
      for (size_t j = 0; j + 1 < answer.size(); ++j) {
        ctl->heads.clear();
        ctl->keys.clear();
        traced->step(answer[j]);
        ++out.steps;
        for (const NeedleHeadTrace& h : ctl->heads) {
          HeadSums& a = sums[{h.layer, h.head / G}];
          ++a.n;
          a.recall += h.dense_read_mass;
          a.rel_l2 += h.rel_l2;
          a.top_read += h.dense_top_read ? 1 : 0;
          a.top_u += h.dense_top_u;
          a.top_cos += h.dense_top_cos;
          a.needle_mass += h.dense_watch_mass;
          a.missed += h.watch_missed;
          a.keys_read += h.prompt_keys_read;
          a.keys_total += int64_t(s.prompt_tokens.size());
        }
      }
      ++out.episodes;
    }
  if (progress) progress(out.episodes, total, "done");

  for (const auto& [key, a] : sums) {
    HeadCalibration h;
    h.layer = key.first, h.kv_head = key.second;
    h.head_steps = a.n;
    const double n = a.n > 0 ? double(a.n) : 1.0;
    h.recall = a.recall / n, h.rel_l2 = a.rel_l2 / n, h.top_read = a.top_read / n, h.top_u = a.top_u / n;
    h.top_cos = a.top_cos / n, h.needle_mass = a.needle_mass / n, h.missed = a.missed / n;
    h.cost = a.keys_total > 0 ? double(a.keys_read) / double(a.keys_total) : 1.0;
    out.heads.push_back(h);
  }
  for (const HeadCalibration& h : out.heads) out.sampled_cost += h.cost / double(out.heads.size());
  out.cost = choose_exact_heads(out.heads, opt.cost_target, opt.min_missed);
  for (const HeadCalibration& h : out.heads)
    if (h.exact) out.exact_heads.emplace_back(h.layer, h.kv_head);
  return out;
}

std::string calibration_table(const Calibration& c) {
  std::string t =
      "| layer | KV head | head-steps | recall | rel. L2 error | top key read | top key u | top key cos | needle mass | "
      "missed | cost | exact |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|\n";
  char row[256];
  for (const HeadCalibration& h : c.heads) {
    std::snprintf(row, sizeof row, "| %d | %d | %lld | %.3f | %.3f | %.2f | %.2f | %.2f | %.3f | %.3f | %.3f | %s |\n",
                  h.layer, h.kv_head, (long long)h.head_steps, h.recall, h.rel_l2, h.top_read, h.top_u, h.top_cos,
                  h.needle_mass, h.missed, h.cost, h.exact ? "yes" : "");
    t += row;
  }
  return t;
}

}  // namespace mp::eval
