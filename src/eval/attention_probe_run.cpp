#include "eval/attention_probe_run.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>

#include "common/error.h"
#include "model/forward.h"

namespace mp::eval {

AttentionErrorRun run_attention_error(const Model& model, const SequenceOptions& base,
                                      std::span<const int32_t> prompt, std::span<const int32_t> continuation,
                                      const std::vector<PolicySpec>& policies,
                                      const std::function<void(int64_t, int64_t)>& progress) {
  check(!policies.empty(), "attention-error: no policies to compare (attn)");
  check(!prompt.empty(), "attention-error: the prompt is empty");
  check(!continuation.empty(), "attention-error: no decode steps to measure (steps must be >= 1)");
  SequenceOptions o = base;
  o.attention = attn::Config{};  // exact prefill and exact trajectory
  Sequence seq(model, o);
  const int64_t need = int64_t(prompt.size() + continuation.size());
  check(need <= seq.n_ctx(), "attention-error: prompt (" + std::to_string(prompt.size()) + " tokens) + steps (" +
                                 std::to_string(continuation.size()) + ") exceed the context of " +
                                 std::to_string(seq.n_ctx()) + " tokens (raise n_ctx or lower n_prompt/steps)");
  seq.prefill(prompt);

  std::vector<attn::Config> cfgs;
  for (const PolicySpec& p : policies) cfgs.push_back(p.cfg);
  auto probe = std::make_unique<AttentionProbe>(cfgs, head_shape(model.hp));
  const AttentionProbe* probe_view = probe.get();  // owned by the fork below
  std::unique_ptr<Sequence> fork = seq.fork(std::move(probe), "probe");
  for (size_t i = 0; i < continuation.size(); ++i) {
    fork->step(continuation[i]);
    if (progress) progress(int64_t(i + 1), int64_t(continuation.size()));
  }

  AttentionErrorRun run;
  run.policies = policies;
  run.errors = probe_view->errors();
  run.costs = probe_view->costs();
  run.n_layer = model.hp.n_layer;
  run.n_head = model.hp.n_head;
  run.n_prompt = int64_t(prompt.size());
  run.steps = int64_t(continuation.size());
  return run;
}

std::vector<PolicyErrorSummary> summarize(const AttentionErrorRun& run) {
  const size_t np = run.policies.size(), nl = size_t(run.n_layer);
  std::vector<PolicyErrorSummary> out(np);
  std::vector<double> err_sum(np * nl, 0), err_n(np * nl, 0), read(np * nl, 0), total(np * nl, 0);
  for (const HeadError& e : run.errors) {
    err_sum[e.policy * nl + e.layer] += e.rel_l2;
    err_n[e.policy * nl + e.layer] += 1;
  }
  for (const LayerCost& c : run.costs) {
    read[c.policy * nl + c.layer] += c.keys_read;
    total[c.policy * nl + c.layer] += c.keys_total;
  }
  for (size_t p = 0; p < np; ++p) {
    PolicyErrorSummary& s = out[p];
    s.name = run.policies[p].name();
    s.params = run.policies[p].params();
    s.label = run.policies[p].label();
    double sparse_err = 0, sparse_n = 0, all_err = 0, all_n = 0, sparse_read = 0, sparse_total = 0;
    for (size_t l = 0; l < nl; ++l) {
      const size_t i = p * nl + l;
      s.layer_rel_l2.push_back(err_n[i] > 0 ? err_sum[i] / err_n[i] : 0.0);
      s.layer_cost.push_back(total[i] > 0 ? read[i] / total[i] : 1.0);
      all_err += err_sum[i];
      all_n += err_n[i];
      if (total[i] > 0) {
        s.sparse_layers.push_back(int(l));
        sparse_err += err_sum[i];
        sparse_n += err_n[i];
        sparse_read += read[i];
        sparse_total += total[i];
      }
    }
    s.mean_rel_l2_all = all_n > 0 ? all_err / all_n : 0.0;
    s.mean_rel_l2_sparse = sparse_n > 0 ? sparse_err / sparse_n : s.mean_rel_l2_all;
    s.cost = sparse_total > 0 ? sparse_read / sparse_total : 1.0;
  }
  return out;
}

namespace {

std::ofstream open_out(const std::string& path) {
  std::ofstream f(path);
  check(f.good(), "cannot write '" + path + "'");
  return f;
}

std::string g(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string layer_list(const std::vector<int>& ls) {
  std::string s;
  for (int l : ls) s += (s.empty() ? "" : ";") + std::to_string(l);
  return s.empty() ? "none" : s;
}

}  // namespace

void write_attention_error_csv(const AttentionErrorRun& run, const std::string& path) {
  std::ofstream f = open_out(path);
  // Cost of each (policy, layer, step), looked up by the errors of the same triple.
  const size_t nl = size_t(run.n_layer), ns = size_t(run.steps);
  std::vector<double> cost(run.policies.size() * nl * ns, 1.0);
  for (const LayerCost& c : run.costs) cost[(c.policy * nl + c.layer) * ns + size_t(c.step)] = c.fraction();
  // bound, sd, rung, keys: the policy's claim and the head's prompt keys read
  // (attention/bound_report.h), empty where it made none.
  f << "policy,params,layer,head,step,rel_l2,cost,bound,sd,rung,keys\n";
  for (const HeadError& e : run.errors) {
    const PolicySpec& p = run.policies[e.policy];
    f << p.name() << ',' << p.params() << ',' << e.layer << ',' << e.head << ',' << e.step << ',' << g(e.rel_l2)
      << ',' << g(cost[(e.policy * nl + e.layer) * ns + size_t(e.step)]) << ',';
    if (e.rung >= 0)
      f << g(e.bound) << ',' << g(e.sd) << ',' << (e.exact ? std::string("exact") : std::to_string(e.rung)) << ','
        << e.keys_read;
    else f << ",,,";
    f << '\n';
  }
  check(f.good(), "error writing '" + path + "'");
}

void write_layer_csv(const AttentionErrorRun& run, const std::vector<PolicyErrorSummary>& s, const std::string& path) {
  std::ofstream f = open_out(path);
  f << "policy,params,layer,sparse,mean_rel_l2,cost\n";
  for (const PolicyErrorSummary& p : s)
    for (int l = 0; l < run.n_layer; ++l) {
      const bool sparse = std::find(p.sparse_layers.begin(), p.sparse_layers.end(), l) != p.sparse_layers.end();
      f << p.name << ',' << p.params << ',' << l << ',' << (sparse ? 1 : 0) << ',' << g(p.layer_rel_l2[l]) << ','
        << g(p.layer_cost[l]) << '\n';
    }
  check(f.good(), "error writing '" + path + "'");
}

std::string summary_csv(const std::vector<PolicyErrorSummary>& s) {
  std::string out = "policy,params,sparse_layers,mean_rel_l2_sparse,mean_rel_l2_all,cost\n";
  for (const PolicyErrorSummary& p : s)
    out += p.name + "," + p.params + "," + layer_list(p.sparse_layers) + "," + g(p.mean_rel_l2_sparse) + "," +
           g(p.mean_rel_l2_all) + "," + g(p.cost) + "\n";
  return out;
}

std::string summary_markdown(const std::vector<PolicyErrorSummary>& s) {
  std::string out = "| policy | params | sparse layers | rel. L2 error (sparse layers) | rel. L2 error (all layers) | cost |\n"
                    "|---|---|---|---|---|---|\n";
  char buf[128];
  for (const PolicyErrorSummary& p : s) {
    std::string ls = std::to_string(p.sparse_layers.size());
    std::snprintf(buf, sizeof buf, " | %.4f | %.4f | %.4f |\n", p.mean_rel_l2_sparse, p.mean_rel_l2_all, p.cost);
    out += "| " + p.name + " | " + (p.params.empty() ? "-" : p.params) + " | " + ls + buf;
  }
  return out;
}

}  // namespace mp::eval
