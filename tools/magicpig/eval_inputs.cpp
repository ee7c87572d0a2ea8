#include "eval_inputs.h"

#include "attention/registry.h"
#include "model/forward.h"

namespace mp::cli {

void add_eval_input_options(Args& a, EvalInputOptions& o, const std::string& what) {
  add_model_options(a, o.model);
  a.value({"-p", "--prompt"}, "TEXT", what, [&o](const std::string& v) { o.prompt = v; });
  a.value({"-f", "--file"}, "FILE", "read the text from a file", [&o](const std::string& v) { o.file = v; });
  a.value({"--attn"}, "LIST",
          "policies NAME[:key=value]..., comma-separated; keys " + attn::all_keys_text() +
              ", dense_layers=0/16, exact_heads=16.1/5.0 (default " + o.list + ")",
          [&o](const std::string& v) { o.list = v; });
  add_attention_options(a, o.base, /*with_name=*/false, &o.flags, /*with_profile_flag=*/false);
}

EvalInputs load_eval_inputs(const EvalInputOptions& o) {
  EvalInputs in;
  in.specs = eval::parse_policy_list(o.list, o.base);
  std::vector<attn::Config> used;
  for (const eval::PolicySpec& s : in.specs) used.push_back(s.cfg);
  check_flags_read(o.flags, used);
  in.text = eval::read_eval_text(o.prompt, o.file);
  in.path = resolve_model_path(o.model.model);
  in.model = Model::load(in.path);
  for (const auto& s : in.specs) s.cfg.validate(head_shape(in.model->hp));
  return in;
}

}  // namespace mp::cli
