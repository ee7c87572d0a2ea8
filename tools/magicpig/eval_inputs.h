// What the teacher-forced evals (attention-error, perplexity) read: a text (-p TEXT or -f
// FILE), a policy list (--attn) and the model, loaded and checked against each other.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "common.h"
#include "eval/attention_probe_specs.h"
#include "model/model.h"

namespace mp::cli {

struct EvalInputOptions {
  ModelOptions model;
  std::string prompt, file;
  std::string list;  // --attn: the default on entry
  attn::Config base;  // the attention flags, under every entry of the list
  ProfileChoice flags;  // which of them were given (no profile is offered here)
};
// The model options, -p TEXT (help: `what`), -f FILE, --attn LIST and the attention flags.
void add_eval_input_options(Args& a, EvalInputOptions& o, const std::string& what);

struct EvalInputs {
  std::vector<eval::PolicySpec> specs;
  std::string text, path;
  std::unique_ptr<Model> model;
};
// Parses the list against the base config, reads the text, loads the model and validates every policy
// against it; throws mp::Error naming what is wrong.
EvalInputs load_eval_inputs(const EvalInputOptions& o);

}  // namespace mp::cli
