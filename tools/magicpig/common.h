// Options shared by the subcommands (model, threads, context, attention policy) and small
// terminal helpers.
#pragma once
#include <cstdint>
#include <string>

#include "args.h"
#include "profile_options.h"
#include "attention/policy.h"
#include "common/dtype.h"

namespace mp {
struct Model;
struct SequenceOptions;
}  // namespace mp

namespace mp::cli {

struct ModelOptions {
  std::string model;  // empty: the default model (MAGICPIG_MODEL or models/default.gguf)
  int n_threads = 0;  // 0: all cores
  int64_t n_ctx = 0;  // 0: the model's training context
  DType kv_type = DType::BF16;
  bool kv_type_set = false;  // -ctk given; otherwise kv_type_for() picks per model
};

void add_model_options(Args& a, ModelOptions& o, bool with_ctx = true, bool with_threads = true);
// The KV cache type: -ctk if given, else bf16, except f16 for gemma3. Gemma's keys lose enough
// in bf16's 8-bit mantissa to flip its first chat token to <end_of_turn> on the main job's
// prompt, where llama.cpp's default f16 cache (10-bit mantissa) does not (docs/models.md).
DType kv_type_for(const ModelOptions& o, const Model& model);
// Throws "--attn: unknown policy ..." unless name is one of attn::policy_names().
void check_policy_name(const std::string& name);
// Flags of every registry parameter that has one (attention_flags() in common.cpp), plus
// --no-lsh-insert-generated and --dense-layers; with `profile`, the parameter flags given are
// recorded there (profile_options.h), and --attn-profile FILE|none is offered when
// with_profile_flag.
void add_attention_options(Args& a, attn::Config& c, bool with_name = true, ProfileChoice* profile = nullptr,
                           bool with_profile_flag = true);
// A library error with the Config / SequenceOptions field names it uses replaced by this
// tool's flags: "lsh_k must be in [0, 16], got 17" -> "-K must be in [0, 16], got 17".
std::string with_flag_names(const std::string& msg);
// The real pretrained model that scripts/setup.sh fetches into ${MAGICPIG_CACHE}/models/.
inline constexpr const char* kDefaultRealModel = "SmolLM2-135M-Instruct.Q4_1.gguf";
// Resolves the model path: -m, else $MAGICPIG_MODEL, else kDefaultRealModel in the cache, else
// models/default.gguf in the current directory or next to the source tree. Throws when none
// exists.
std::string resolve_model_path(const std::string& given);
int default_threads();
int resolved_threads(const ModelOptions& o);
std::string human_bytes(double bytes);
// A one-line progress bar on stderr when it is a terminal; silent otherwise.
void progress_bar(const char* what, int64_t done, int64_t total, double elapsed_s);
// One stderr line with what a context of so.n_ctx tokens needs: KV cache and the policy's
// auxiliary structures (estimate) per context token and at the full context, and the memory
// available. For run and bench (mp::estimate_memory does the arithmetic).
void print_memory_plan(const Model& model, const SequenceOptions& so);

int cmd_run(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_info(int argc, char** argv);
int cmd_devices(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_convert(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_random_model(int argc, char** argv);
int cmd_calibrate(int argc, char** argv);
int cmd_eval(int argc, char** argv);  // dispatches to the three below (argv[2] is the suite)
int cmd_eval_ruler(int argc, char** argv);
int cmd_eval_attention_error(int argc, char** argv);
int cmd_eval_perplexity(int argc, char** argv);

}  // namespace mp::cli
