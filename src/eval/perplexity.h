// magicpig eval perplexity as a library: teacher-forced perplexity of each decode policy over
// the last tokens of a text, and how far each policy's next-token distribution is from dense
// (KL, top-1 agreement). The prompt is prefilled exactly once; every policy forks from it.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/sequence.h"
#include "eval/attention_probe_specs.h"

namespace mp::eval {

// Mean of samples and the standard error of that mean, sqrt(sum (x - m)^2 / (n (n - 1)))
// (0 when n < 2): the formula llama-perplexity uses.
struct MeanStderr {
  double mean = 0;
  double sem = 0;  // standard error of the mean
};
MeanStderr mean_stderr(const std::vector<double>& x);

struct PerplexityResult {
  std::string name, params, label;
  int64_t n = 0;             // scored tokens
  double mean_nll = 0;       // nats per token
  double nll_stderr = 0;
  double ppl = 0;            // exp(mean_nll)
  double ppl_stderr = 0;     // delta method: ppl * nll_stderr
  double kl_mean = 0;        // KL(dense || policy) of the next-token distribution, nats
  double kl_stderr = 0;
  double top1_agree = 0;     // fraction of positions whose argmax equals dense's
  double cost = 1;           // keys read / prompt keys over sparse layer-head-steps
  std::vector<double> nll;   // per scored token
  std::vector<double> kl;    // per scored token
};

struct PerplexityRun {
  int64_t n_prompt = 0;  // prefilled tokens
  int64_t n_eval = 0;    // scored tokens
  std::vector<PerplexityResult> results;  // one per policy, in order
};

// tokens: the evaluated text, T tokens. Prefills tokens[0, T - n_eval - 1) once (exact), then
// for each policy forks and feeds tokens[T - n_eval - 1, T - 1) through step(): the logits
// after the token at position i predict token i + 1, so the last n_eval tokens are all
// predicted through the policy. Needs 1 <= n_eval <= T - 2 and T - 1 positions of context.
// The dense reference keeps n_eval x n_vocab log-probabilities in memory.
PerplexityRun run_perplexity(const Model& model, const SequenceOptions& base, std::span<const int32_t> tokens,
                             int64_t n_eval, const std::vector<PolicySpec>& policies,
                             const std::function<void(int64_t, int64_t)>& progress = {});

// log-softmax of n logits in double precision, written as floats.
void log_softmax(const float* logits, int n, float* out);

std::string perplexity_markdown(const PerplexityRun& run);
std::string perplexity_json(const PerplexityRun& run);

}  // namespace mp::eval
