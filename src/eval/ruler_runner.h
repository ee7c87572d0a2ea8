// Runs the RULER tasks under several decode attention policies on exactly the same prompts:
// one exact prefill per sample, forked once per policy, greedy answers scored per policy.
// Results go to OUT/predictions.jsonl (one line per task, length, sample, policy), which a
// later run with the same config extends instead of redoing (resume).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attention/policy.h"
#include "common/dtype.h"
#include "eval/ruler_tasks.h"
#include "model/model.h"

namespace mp {
class Sequence;
}

namespace mp::eval::ruler {

struct PolicySpec {
  std::string label;    // as given, e.g. "magicpig:K=8:L=75"; the column name of the summary
  attn::Config config;
};
// Comma list of NAME[:key=value...], eval::parse_policy_list's grammar (attention/policy_spec.h:
// the policy's own keys and dense_layers=a/b/c or none). Parameters not named come from `base`.
// Throws on an unknown policy or key, a bad value or a repeated label.
std::vector<PolicySpec> parse_policy_list(const std::string& list, const attn::Config& base);

struct RunOptions {
  std::string model_path;           // recorded in config.json
  std::vector<std::string> tasks;   // task_specs() names
  std::vector<int64_t> lengths;     // target prompt lengths in tokens
  int samples = 10;
  uint64_t seed = 42;
  std::vector<PolicySpec> policies;
  int n_threads = 2;
  DType kv_type = DType::BF16;
  int64_t n_ctx = 0;                // 0: the model's training context; every length must fit
  int max_new = 0;                  // > 0: answer tokens per turn instead of each task's own
  int depth_grid = 0;               // >= 2: asked needle of sample i at depth (i mod N)/(N-1)
  bool chat = false;                // prompts in the model's chat template (user turn, answer prefix after it)
  std::string out_dir;
};

struct RunStats {
  int64_t prefills = 0;        // samples prefilled (model calls over a whole prompt)
  int64_t decode_steps = 0;    // Sequence::step calls over all policies
  int64_t records_written = 0;
  int64_t records_skipped = 0; // already in predictions.jsonl
  double seconds = 0;
};

// done/total count records (task, length, sample, policy) of this invocation.
using Progress = std::function<void(int64_t done, int64_t total)>;

// Checks the options (tasks, lengths against the context, policies against the model's
// shape) before any work; creates out_dir; refuses a directory whose config.json differs in
// model, seed, data files, answer cap, KV type or the parameters of a policy label.
RunStats run_ruler(const Model& model, const Resources& res, const RunOptions& opt, const Progress& progress = {});

// The model's chat formatter for a RULER prompt (that of `magicpig run --chat`): one user
// message, the assistant turn opened. Refers to `model`, which must outlive it.
ChatWrap chat_wrap(const Model& model);

// One greedy answer turn from seq's current logits, ended as a RULER turn ends: at the
// end-of-turn token, where detail::turn_ends says, or after max_new tokens.
struct AnswerTurn {
  std::vector<int32_t> tokens;  // the answer, the end-of-turn token not included
  std::string text;             // its text in whole UTF-8 characters (a torn one as U+FFFD)
  // The token that ended the turn at a turn end or the room, not yet fed through seq.step():
  // the next turn steps it before its query. -1 when the end-of-turn token ended the turn.
  int32_t unstepped = -1;
  int64_t steps = 0;            // seq.step calls made
};
AnswerTurn answer_turn(Sequence& seq, const Tokenizer& tok, const TaskSpec& spec, int max_new, bool chat);

// Markdown table of the records in out_dir/predictions.jsonl that belong to the options' grid:
// rows task x length, columns policies, mean score (count when short of `samples`), then the
// average row(s) and each policy's mean cost (fraction of prompt keys read).
std::string summarize(const RunOptions& opt);

namespace detail {
// Whether a generated piece ends the answer turn whose text so far (without piece) is `text`:
// a newline (tasks that stop there, bare prompts only) or a '.' (multi-query; in a chat prompt
// once the turn holds non-whitespace text). The end-of-turn token and the room end every turn.
bool turn_ends(const TaskSpec& spec, const std::string& piece, const std::string& text, bool chat);
}  // namespace detail

}  // namespace mp::eval::ruler
