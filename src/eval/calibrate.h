// Per-head calibration of MagicPIG for one model (`magicpig calibrate`, docs/calibration.md).
// On RULER retrieval episodes generated from a calibration seed (never an evaluation seed),
// the exact answer is teacher-forced through eval::NeedleTracer, and every (layer, KV head) of
// the sparse layers gets: the recall of the exact attention mass by the keys MagicPIG read, the
// probability of reading the top-attended key against its cosine with the query, the relative
// error of the head's output, and the needle mass the sampler is expected to miss. The heads
// that miss the most needle mass are chosen to attend exactly, as long as the mean measured cost
// (exact heads at full cost) stays within the target.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "attention/policy.h"
#include "eval/ruler_tasks.h"
#include "model/model.h"

namespace mp::eval {

struct CalibrationOptions {
  attn::Config policy;  // the magicpig configuration to calibrate (its exact_heads are ignored)
  std::vector<std::string> tasks = {"niah_single_2", "niah_multikey_1", "niah_multivalue"};
  int64_t length = 4096;  // prompt length of the episodes, in tokens
  int samples = 4;        // episodes per task
  uint64_t seed = 7;      // RULER generator seed of the episodes
  bool chat = true;       // prompts in the model's chat template
  double cost_target = 0.08;  // mean fraction of prompt keys read, exact heads included
  double min_missed = 0.02;   // a head is made exact only if it misses at least this needle mass
  int n_threads = 2;
};

// One (layer, KV head) of a sparse layer, averaged over its query heads and traced steps.
struct HeadCalibration {
  int layer = 0, kv_head = 0;
  int64_t head_steps = 0;  // (query head, step) pairs traced
  double recall = 0;       // exact attention mass on the keys read
  double rel_l2 = 0;       // relative L2 error of the head's output
  double top_read = 0;     // fraction of head-steps whose top-attended key was read
  double top_u = 0;        // mean sampling probability of the top-attended key (1 when exact)
  double top_cos = 0;      // mean centred cosine of the top-attended key with the query
  double needle_mass = 0;  // mean exact attention mass on the needle's tokens
  double missed = 0;       // mean needle mass the sampler is expected to miss (mass * (1 - u))
  double cost = 0;         // fraction of prompt keys read when sampled
  bool exact = false;      // chosen to attend exactly
};

struct Calibration {
  std::vector<HeadCalibration> heads;  // sparse layers only, by layer then KV head
  std::vector<std::pair<int, int>> exact_heads;
  double sampled_cost = 0;  // mean cost with every sparse head sampled
  double cost = 0;          // mean cost with the chosen heads exact
  int episodes = 0;
  int64_t steps = 0;        // teacher-forced answer steps traced
};

using CalibrationProgress = std::function<void(int done, int total, const std::string& what)>;

// Throws mp::Error when the policy is not magicpig or an option is out of range.
Calibration calibrate(const Model& model, const ruler::Resources& res, const CalibrationOptions& opt,
                      const CalibrationProgress& progress = {});

// The heads to make exact: most missed needle mass first, while the mean cost stays within
// cost_target and the head misses at least min_missed. Sets each chosen head's `exact` and
// returns the mean cost with them exact, over `heads` (every sparse layer's KV heads).
double choose_exact_heads(std::vector<HeadCalibration>& heads, double cost_target, double min_missed);

// The per-head table as Markdown (one row per head, chosen heads marked).
std::string calibration_table(const Calibration& c);

}  // namespace mp::eval
