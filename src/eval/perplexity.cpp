#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "attention/registry.h"
#include "common/error.h"

namespace mp::eval {

MeanStderr mean_stderr(const std::vector<double>& x) {
  MeanStderr r;
  if (x.empty()) return r;
  double s = 0;
  for (double v : x) s += v;
  r.mean = s / double(x.size());
  if (x.size() < 2) return r;
  double ss = 0;
  for (double v : x) ss += (v - r.mean) * (v - r.mean);
  r.sem = std::sqrt(ss / (double(x.size()) * double(x.size() - 1)));
  return r;
}

void log_softmax(const float* logits, int n, float* out) {
  double mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = std::max(mx, double(logits[i]));
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  for (int i = 0; i < n; ++i) out[i] = float(double(logits[i]) - lse);
}

namespace {

int argmax(const float* x, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

void finish(PerplexityResult& r) {
  r.n = int64_t(r.nll.size());
  const MeanStderr nll = mean_stderr(r.nll), kl = mean_stderr(r.kl);
  r.mean_nll = nll.mean;
  r.nll_stderr = nll.sem;
  r.ppl = std::exp(nll.mean);
  r.ppl_stderr = r.ppl * nll.sem;
  r.kl_mean = kl.mean;
  r.kl_stderr = kl.sem;
}

}  // namespace

PerplexityRun run_perplexity(const Model& model, const SequenceOptions& base, std::span<const int32_t> tokens,
                             int64_t n_eval, const std::vector<PolicySpec>& policies,
                             const std::function<void(int64_t, int64_t)>& progress) {
  const int64_t T = int64_t(tokens.size());
  check(!policies.empty(), "perplexity: no policies to evaluate (attn)");
  check(T >= 3, "perplexity: the text has " + std::to_string(T) +
                    " tokens; at least 3 are needed (a prompt token, a fed token and a scored token)");
  check(n_eval >= 1 && n_eval <= T - 2, "perplexity: n_eval " + std::to_string(n_eval) + " is out of range [1, " +
                                            std::to_string(T - 2) + "] for a context of " + std::to_string(T) +
                                            " tokens (at least one prompt token must precede the scored ones)");
  SequenceOptions o = base;
  o.attention = attn::Config{};
  Sequence prompt_seq(model, o);
  check(T - 1 <= prompt_seq.n_ctx(), "perplexity: " + std::to_string(T) + " tokens need a context of " +
                                         std::to_string(T - 1) + ", have " + std::to_string(prompt_seq.n_ctx()));
  const int64_t n_prompt = T - n_eval - 1;
  prompt_seq.prefill(tokens.subspan(0, size_t(n_prompt)));

  const int nv = model.hp.n_vocab;
  const int64_t total_steps = n_eval * int64_t(policies.size() + 1);
  int64_t done = 0;
  std::vector<float> dense_lp(size_t(n_eval) * nv), lp(nv);
  std::vector<int> dense_top(static_cast<size_t>(n_eval), 0);

  // Runs one policy over the scored positions; `reference` fills dense_lp instead of comparing.
  auto evaluate = [&](const PolicySpec& spec, bool reference) {
    PerplexityResult r;
    r.name = spec.name();
    r.params = spec.params();
    r.label = spec.label();
    std::unique_ptr<Sequence> seq = prompt_seq.fork(spec.cfg);
    int64_t agree = 0;
    for (int64_t i = 0; i < n_eval; ++i) {
      seq->step(tokens[size_t(n_prompt + i)]);
      const int32_t target = tokens[size_t(n_prompt + i + 1)];
      float* out = reference ? &dense_lp[size_t(i) * nv] : lp.data();
      log_softmax(seq->logits().data(), nv, out);
      r.nll.push_back(-double(out[target]));
      const int top = argmax(out, nv);
      if (reference) dense_top[size_t(i)] = top;
      const float* ref = &dense_lp[size_t(i) * nv];
      double kl = 0;
      for (int v = 0; v < nv; ++v) {
        const double p = std::exp(double(ref[v]));
        if (p > 0) kl += p * (double(ref[v]) - double(out[v]));
      }
      r.kl.push_back(std::max(kl, 0.0));  // rounding can give -1e-17 for equal distributions
      agree += top == dense_top[size_t(i)];
      if (progress) progress(++done, total_steps);
    }
    r.top1_agree = double(agree) / double(n_eval);
    r.cost = seq->cost().fraction();
    finish(r);
    return r;
  };

  PolicySpec dense_spec;
  dense_spec.entry = "dense";
  const PerplexityResult dense = evaluate(dense_spec, true);
  PerplexityRun run;
  run.n_prompt = n_prompt;
  run.n_eval = n_eval;
  for (const PolicySpec& p : policies) {
    if (attn::policy_desc(p.cfg.name).exact) {  // identical to the reference run: reuse it
      PerplexityResult r = dense;
      r.name = p.name();
      r.params = p.params();
      r.label = p.label();
      run.results.push_back(r);
      done += n_eval;
      if (progress) progress(done, total_steps);
      continue;
    }
    run.results.push_back(evaluate(p, false));
  }
  return run;
}

std::string perplexity_markdown(const PerplexityRun& run) {
  std::string out = "| policy | params | PPL | KL vs dense (nats) | top-1 agree | cost |\n|---|---|---|---|---|---|\n";
  char buf[256];
  for (const PerplexityResult& r : run.results) {
    std::snprintf(buf, sizeof buf, " | %.4f +/- %.4f | %.6f +/- %.6f | %.2f%% | %.4f |\n", r.ppl, r.ppl_stderr,
                  r.kl_mean, r.kl_stderr, 100.0 * r.top1_agree, r.cost);
    out += "| " + r.name + " | " + (r.params.empty() ? "-" : r.params) + buf;
  }
  return out;
}

std::string perplexity_json(const PerplexityRun& run) {
  nlohmann::json j;
  j["n_prompt"] = run.n_prompt;
  j["n_eval"] = run.n_eval;
  j["results"] = nlohmann::json::array();
  for (const PerplexityResult& r : run.results)
    j["results"].push_back({{"policy", r.name},
                            {"params", r.params},
                            {"n", r.n},
                            {"mean_nll", r.mean_nll},
                            {"nll_stderr", r.nll_stderr},
                            {"ppl", r.ppl},
                            {"ppl_stderr", r.ppl_stderr},
                            {"kl_mean", r.kl_mean},
                            {"kl_stderr", r.kl_stderr},
                            {"top1_agree", r.top1_agree},
                            {"cost", r.cost}});
  return j.dump(2) + "\n";
}

}  // namespace mp::eval
