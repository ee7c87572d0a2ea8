// Task list and the sizing of each prompt to a target length in the model's tokens.
#include "eval/ruler_tasks.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "eval/ruler_builders.h"

namespace mp::eval::ruler {

const std::vector<TaskSpec>& task_specs() {
  // Answer room: a 7-digit number is up to 8 tokens with split digits, a uuid ~36.
  static const std::vector<TaskSpec> specs = {
      {"niah_single_1", 12, true, false, "noise haystack, word key -> 7-digit number", 128},
      {"niah_single_2", 12, true, false, "natural-text haystack, word -> number", 128},
      {"niah_single_3", 50, true, false, "natural-text haystack, word -> uuid", 128},
      {"niah_multikey_1", 12, true, false, "natural text, 1 asked needle + 3 distractor needles", 128},
      {"niah_multikey_2", 12, true, false, "haystack made of needles, word -> number", 128},
      {"niah_multikey_3", 50, true, false, "haystack made of uuid -> uuid needles", 128},
      {"niah_multivalue", 50, true, false, "one key with 4 numbers, all asked", 128},
      {"niah_multiquery", 12, true, true, "4 keys, asked one after another (4 turns)", 128},
      {"vt", 40, true, false, "variable tracking: a chain of 5 variables in noise"},
      {"cwe", 120, false, false, "common words extraction: the 10 most common words of a list"},
      {"fwe", 50, true, false, "frequent words extraction: the 3 most frequent coded words"},
  };
  return specs;
}

const TaskSpec& task_spec(const std::string& name) {
  std::string known;
  for (const TaskSpec& s : task_specs()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw Error("unknown RULER task '" + name + "' (known: " + known + ")");
}

std::vector<std::string> parse_task_list(const std::string& list) {
  std::vector<std::string> out;
  if (list.empty() || list == "all") {
    for (const TaskSpec& s : task_specs()) out.push_back(s.name);
    return out;
  }
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    const std::string name = list.substr(pos, end - pos);
    check(!name.empty(), "tasks: empty task name in '" + list + "'");
    task_spec(name);
    check(std::find(out.begin(), out.end(), name) == out.end(), "tasks: '" + name + "' given twice");
    out.push_back(name);
    pos = end + 1;
  }
  return out;
}

int64_t Sample::budget_tokens() const {
  int64_t n = int64_t(prompt_tokens.size()) + int64_t(turns()) * max_new;
  for (const auto& f : followup_tokens) n += int64_t(f.size());
  return n;
}

std::vector<double> needle_depths(const Sample& s) {
  size_t needle_bytes = 0;
  for (const Needle& nd : s.needles) needle_bytes += nd.text.size();
  const double hay_bytes = double(s.haystack_end - s.haystack_begin - needle_bytes);
  std::vector<double> depths;
  size_t before = 0;  // needle bytes ahead of this needle
  for (const Needle& nd : s.needles) {
    const double at = double(nd.offset - s.haystack_begin - before);
    depths.push_back(hay_bytes > 0 ? std::round(1e4 * at / hay_bytes) / 1e4 : 0.0);
    before += nd.text.size();
  }
  return depths;
}

uint64_t sample_seed(uint64_t run_seed, const std::string& task, int64_t length, int index) {
  uint64_t s = run_seed;
  uint64_t h = splitmix64(s) ^ crc32(task);
  h = splitmix64(h) ^ uint64_t(length);
  h = splitmix64(h) ^ uint64_t(index);
  return splitmix64(h);
}

std::vector<int32_t> encode_continuation(const Tokenizer& tok, const std::string& text) {
  return tok.encode(tok.model() == "llama" && tok.add_space_prefix() ? text : " " + text, false);
}

namespace {

detail::Builder make_builder(const std::string& task, uint64_t seed, int64_t length, const Resources& res,
                             double asked_depth) {
  if (task.rfind("niah_", 0) == 0) return detail::make_niah_builder(task, seed, res, asked_depth);
  if (task == "vt") return detail::make_vt_builder(seed);
  if (task == "fwe") return detail::make_fwe_builder(seed);
  task_spec(task);  // throws for unknown names
  throw Error("RULER task '" + task + "' has no generator");
}

// cwe frequencies (common, uncommon): RULER's (30, 3) from 4K tokens on; below that 300 list
// entries do not fit, so they scale down with the length.
std::pair<int, int> cwe_frequencies(int64_t length) {
  if (length >= 4096) return {30, 3};
  if (length >= 2048) return {10, 2};
  if (length >= 1024) return {6, 2};
  return {3, 1};
}

struct Fitted {
  detail::Draft draft;
  std::vector<int32_t> prompt_tokens;
  std::vector<std::vector<int32_t>> followup_tokens;
  int64_t total = 0;
};

Fitted measure(const detail::Builder& build, int64_t n, const Tokenizer& tok, int max_new, const ChatWrap& chat) {
  Fitted f;
  f.draft = build(n);
  if (chat) {
    // As `magicpig run --chat` encodes a templated prompt: BOS as the tokenizer adds it, the
    // template's markers parsed as special tokens.
    f.draft = detail::in_chat_template(std::move(f.draft), chat);
    f.prompt_tokens = tok.encode(f.draft.prompt, /*add_special=*/true, /*parse_special=*/true);
  } else {
    if (tok.add_bos() && tok.bos() >= 0) f.prompt_tokens.push_back(tok.bos());
    const std::vector<int32_t> body = tok.encode(f.draft.prompt, false);
    f.prompt_tokens.insert(f.prompt_tokens.end(), body.begin(), body.end());
  }
  f.total = int64_t(f.prompt_tokens.size()) + int64_t(f.draft.references.size()) * max_new;
  for (const std::string& q : f.draft.followups) {
    f.followup_tokens.push_back(encode_continuation(tok, q));
    f.total += int64_t(f.followup_tokens.back().size());
  }
  return f;
}

}  // namespace

Sample generate_sample(const std::string& task, int64_t length, int index, uint64_t run_seed,
                       const Tokenizer& tok, const Resources& res, int max_new_override, int depth_grid,
                       const ChatWrap& chat) {
  const TaskSpec& spec = task_spec(task);
  check(depth_grid == 0 || (depth_grid >= 2 && depth_grid <= 1000),
        "RULER depth grid must be 0 (seeded depths) or 2..1000, got " + std::to_string(depth_grid));
  const double asked_depth = depth_grid ? double(index % depth_grid) / double(depth_grid - 1) : -1.0;
  check(length >= 1, "RULER length must be positive, got " + std::to_string(length));
  const int task_room = chat && spec.chat_max_new > 0 ? spec.chat_max_new : spec.max_new;
  const int max_new = max_new_override > 0 ? max_new_override : task_room;
  const uint64_t seed = sample_seed(run_seed, task, length, index);
  auto fits = [&](const Fitted& f) { return f.total <= length; };
  detail::Builder build;
  if (task == "cwe") {
    // The common words may take at most half of the prompt (a tokenizer that spends many
    // tokens per word gets fewer repetitions), else the list would hold little else.
    auto [cw, ucw] = cwe_frequencies(length);
    for (;; cw = std::max(2, cw * 2 / 3), ucw = std::min(ucw, cw - 1)) {
      build = detail::make_cwe_builder(seed, cw, ucw, res);
      if (cw == 2 || measure(build, 0, tok, max_new, chat).total <= length / 2) break;
    }
  } else {
    build = make_builder(task, seed, length, res, asked_depth);
  }

  // Largest haystack size n whose prompt fits: a guess from the tokens per unit, a bracket
  // around it, then bisection. Only the invariant matters (lo fits, hi does not), so a token
  // count that is not exactly monotone in n still yields a prompt that fits.
  Fitted best = measure(build, 0, tok, max_new, chat);
  check(fits(best), "RULER task " + task + " needs at least " + std::to_string(best.total) +
                        " tokens (question, needles and " + std::to_string(max_new) +
                        " answer tokens per turn); length " + std::to_string(length) + " is too short");
  const int64_t probe = 64, n_max = int64_t(1) << 26;
  const Fitted at_probe = measure(build, probe, tok, max_new, chat);
  const double per_unit = std::max(1e-3, double(at_probe.total - best.total) / double(probe));
  int64_t lo = 0, hi = -1;
  if (fits(at_probe)) {
    lo = probe;
    best = at_probe;
  } else {
    hi = probe;
  }
  int64_t guess = std::clamp<int64_t>(int64_t(double(length - best.total) / per_unit) + lo, lo + 1, n_max);
  if (hi < 0 || guess < hi) {
    while (hi < 0) {
      Fitted f = measure(build, guess, tok, max_new, chat);
      if (!fits(f)) {
        hi = guess;
        break;
      }
      lo = guess;
      best = std::move(f);
      check(guess < n_max, "RULER task " + task + ": haystack does not grow with its size");
      guess = std::min(n_max, guess + std::max<int64_t>(8, guess / 16));
    }
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    Fitted f = measure(build, mid, tok, max_new, chat);
    if (fits(f)) {
      lo = mid;
      best = std::move(f);
    } else {
      hi = mid;
    }
  }

  Sample s;
  s.task = task;
  s.length = length;
  s.index = index;
  s.seed = seed;
  s.prompt = std::move(best.draft.prompt);
  s.followups = std::move(best.draft.followups);
  s.references = std::move(best.draft.references);
  s.needles = std::move(best.draft.needles);
  s.haystack_begin = best.draft.haystack_begin;
  s.haystack_end = best.draft.haystack_end;
  s.answer_begin = best.draft.answer_begin;
  s.chat = bool(chat);
  s.haystack_units = lo;
  s.max_new = max_new;
  s.prompt_tokens = std::move(best.prompt_tokens);
  s.followup_tokens = std::move(best.followup_tokens);
  return s;
}

size_t asked_needle(const Sample& s) {
  check(!s.references.empty() && !s.references[0].empty(), "sample has no reference answer");
  for (size_t i = 0; i < s.needles.size(); ++i)
    if (s.needles[i].text.find(s.references[0][0]) != std::string::npos) return i;
  throw Error("no needle of the " + s.task + " sample holds its answer '" + s.references[0][0] + "'");
}

}  // namespace mp::eval::ruler
