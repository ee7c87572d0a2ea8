// RULER-style synthetic long-context tasks (docs/eval_ruler.md): a seeded generator that
// sizes every prompt to a target length in the model's own tokens.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "eval/ruler_text.h"
#include "tokenizer/tokenizer.h"

namespace mp::eval::ruler {

// Needle and question templates: RULER's, worded exactly as training/data.py trains them.
inline constexpr const char* kNeedle = "One of the special magic {type} for {key} is: {value}.";
// Each question is split where RULER splits it: the question proper, then the answer prefix
// (what the answer continues). The bare prompt joins them with one space, as training does;
// a chat prompt puts the question in the user turn and the answer prefix after the assistant
// header.
inline constexpr const char* kQuestion = "What is the special magic {type1} for {key} mentioned in the provided text?";
inline constexpr const char* kAnswerPrefix = "The special magic {type1} for {key} mentioned in the provided text is:";
inline constexpr const char* kQueryShort = "The special magic number for {key} is:";
inline constexpr const char* kMultiValueQuestion =
    "What are all the special magic numbers for {key} mentioned in the provided text?";
inline constexpr const char* kMultiValueAnswerPrefix =
    "The special magic numbers for {key} mentioned in the provided text are:";
inline constexpr const char* kVtAssignValue = "VAR {name} = {value}.";
inline constexpr const char* kVtAssignVar = "VAR {name} = {other}.";
inline constexpr const char* kVtQuestion = "Find all variables that are assigned the value {value} in the text above.";
inline constexpr const char* kVtAnswerPrefix = "Answer: the variables assigned the value {value} are:";
inline constexpr const char* kNoise =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

struct TaskSpec {
  std::string name;
  int max_new = 12;             // answer tokens per turn (room reserved in the prompt budget)
  bool stop_at_newline = true;  // end a turn at a generated newline
  bool stop_at_period = false;  // end a turn at a generated '.' (multi-query turns: " 1234567.")
  std::string description;
  // Answer room in the chat template (0: max_new). RULER's own room for the niah tasks: an
  // instruct model often restates the question before the number.
  int chat_max_new = 0;
};
// Every task, in the order of the summary table.
const std::vector<TaskSpec>& task_specs();
// Throws "unknown RULER task 'x' (known: ...)".
const TaskSpec& task_spec(const std::string& name);
// Parses a comma list ("" or "all": every task); throws on an unknown or repeated name.
std::vector<std::string> parse_task_list(const std::string& list);

struct Needle {
  std::string text;     // exactly as it appears in the prompt
  double depth = 0;     // requested position as a fraction of the haystack, [0, 1)
  size_t offset = 0;    // byte offset of text in Sample::prompt
};

// Wraps the user turn (context and question) in a chat template and opens the assistant turn,
// e.g. apply_chat_template(file, tok, {{"user", user}}, true). Empty: the bare prompt format.
using ChatWrap = std::function<std::string(const std::string& user)>;

struct Sample {
  std::string task;
  int64_t length = 0;   // target: prompt + later queries + answer room <= length tokens
  int index = 0;
  uint64_t seed = 0;    // of this sample (derived from the run seed, task, length, index)
  std::string prompt;   // what the model reads first (no BOS)
  std::vector<std::string> followups;  // later queries, each fed after the previous answer
  std::vector<std::vector<std::string>> references;  // per turn: strings the answer must contain
  std::vector<Needle> needles;
  size_t haystack_begin = 0, haystack_end = 0;  // byte range of the context in prompt
  size_t answer_begin = 0;     // byte offset of the answer prefix in prompt (its size: none)
  bool chat = false;           // prompt is in the model's chat template
  int64_t haystack_units = 0;  // words, sentences, needles or list entries chosen to fit
  int max_new = 0;             // answer tokens per turn
  std::vector<int32_t> prompt_tokens;  // BOS (if the model adds one) + prompt
  std::vector<std::vector<int32_t>> followup_tokens;
  int64_t budget_tokens() const;  // prompt + followups + answer room over all turns
  int turns() const { return int(references.size()); }
};

// Where each needle of `s` sits, in reading order: the fraction of the haystack's own bytes
// (the needles' not counted) before it, 0 to 1, rounded to 4 decimals. This is the realised
// depth, which the records report; Needle::depth is the requested one.
std::vector<double> needle_depths(const Sample& s);

// Index in s.needles of the needle the first turn asks for: the one holding its first
// reference value (a multi-key prompt also holds distractors). Throws when none does.
size_t asked_needle(const Sample& s);

// Seed of one sample: a pure function of the run seed and (task, length, index), so a sample
// is the same whichever other tasks, lengths or samples a run contains.
uint64_t sample_seed(uint64_t run_seed, const std::string& task, int64_t length, int index);

// Builds the sample whose haystack is as large as fits `length` tokens. max_new > 0 replaces
// the task's answer tokens per turn (room reserved in the prompt budget). depth_grid N >= 2 puts the asked needle of sample i (niah tasks) at
// depth (i mod N) / (N - 1), 0% to 100% (the needle-in-a-haystack sweep); 0 keeps the seeded
// uniform depth. A non-empty `chat` puts context and question in the user turn and the answer
// prefix after the assistant header, and tokenizes like `magicpig run --chat` (special tokens
// parsed); the template's tokens count against `length`. Throws when even an empty haystack
// does not fit.
Sample generate_sample(const std::string& task, int64_t length, int index, uint64_t run_seed,
                       const Tokenizer& tok, const Resources& res, int max_new = 0, int depth_grid = 0,
                       const ChatWrap& chat = {});

// What the prompt holds besides the haystack: the text before it, "[haystack: N bytes]", the
// text after it (template markers, question, answer prefix). Records show it.
std::string prompt_frame(const Sample& s);

// Tokens of text as it continues a previous text (SentencePiece adds its own leading "▁";
// byte-level BPE needs the space spelled out).
std::vector<int32_t> encode_continuation(const Tokenizer& tok, const std::string& text);

}  // namespace mp::eval::ruler
