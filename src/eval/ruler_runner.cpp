// The RULER run loop: one exact prefill per sample, one fork per policy, greedy answers.
#include "eval/ruler_runner.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/error.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "eval/ruler_records.h"
#include "eval/ruler_score.h"
#include "model/forward.h"
#include "tokenizer/tokenizer.h"

namespace mp::eval::ruler {

namespace detail {
// In the chat template a turn ends as RULER's does, at the end-of-turn token or the answer
// room, never at a line break: instruct models often set the answer on its own line, restate
// the question on one line before it, and write a list one item per line. Multi-query turns
// still end at a '.', once the turn holds text (the next query follows it).
bool turn_ends(const TaskSpec& spec, const std::string& piece, const std::string& text, bool chat) {
  if (chat && text.find_first_not_of(" \t\r\n") == std::string::npos) return false;
  return (spec.stop_at_newline && !chat && piece.find('\n') != std::string::npos) ||
         (spec.stop_at_period && piece.find('.') != std::string::npos);
}
}  // namespace detail

namespace {

struct Decoded {
  std::vector<std::string> turns;
  int64_t generated = 0;
  int64_t steps = 0;
  double cost = 1;
};

// Greedy answer of every turn under one policy. The first token of the first turn comes from
// the prefill logits the fork inherited; later queries are fed through step(), i.e. through
// the policy like any generated token.
Decoded decode(const Sequence& base, const attn::Config& cfg, const Sample& s, const TaskSpec& spec,
               const Tokenizer& tok) {
  std::unique_ptr<Sequence> seq = base.fork(cfg);
  Decoded d;
  int32_t pending = -1;  // the last token of the previous turn, not stepped yet
  auto step = [&](int32_t t) {
    seq->step(t);
    ++d.steps;
  };
  for (int turn = 0; turn < s.turns(); ++turn) {
    if (turn > 0) {
      if (pending >= 0) step(pending);
      for (int32_t t : s.followup_tokens[turn - 1]) step(t);
    }
    AnswerTurn a = answer_turn(*seq, tok, spec, s.max_new, s.chat);
    d.steps += a.steps;
    d.generated += static_cast<int64_t>(a.tokens.size());
    pending = a.unstepped;
    d.turns.push_back(std::move(a.text));
  }
  d.cost = seq->cost().fraction();
  return d;
}

std::string prompt_hash(const Sample& s) {
  // FNV-1a over the prompt text and every token id: a changed tokenizer shows up too.
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 0x100000001b3ull;
  };
  mix(s.prompt.data(), s.prompt.size());
  mix(s.prompt_tokens.data(), s.prompt_tokens.size() * sizeof(int32_t));
  for (const auto& f : s.followup_tokens) mix(f.data(), f.size() * sizeof(int32_t));
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
  return buf;
}

void validate(const Model& model, const RunOptions& opt) {
  check(!opt.tasks.empty(), "no RULER task selected");
  for (const std::string& t : opt.tasks) task_spec(t);
  check(!opt.lengths.empty(), "lengths: none given");
  check(opt.samples >= 1, "samples must be >= 1");
  check(!opt.policies.empty(), "attn: no policy given");
  check(!opt.out_dir.empty(), "out_dir: none given");
  const int64_t ctx = opt.n_ctx > 0 ? opt.n_ctx : model.hp.n_ctx_train;
  for (int64_t L : opt.lengths) {
    check(L >= 16, "lengths: " + std::to_string(L) + " is too short (>= 16 tokens)");
    check(L <= ctx, "lengths: " + std::to_string(L) + " tokens exceed the context of " + std::to_string(ctx) +
                        " tokens (" + (opt.n_ctx > 0 ? "raise n_ctx" : "the model's training context; raise n_ctx") +
                        " or lower lengths)");
  }
  const attn::HeadShape shape = head_shape(model.hp);
  for (const PolicySpec& p : opt.policies) {
    try {
      p.config.validate(shape);
    } catch (const Error& e) {
      throw Error("attn " + p.label + ": " + e.what());
    }
  }
}

}  // namespace

AnswerTurn answer_turn(Sequence& seq, const Tokenizer& tok, const TaskSpec& spec, int max_new, bool chat) {
  AnswerTurn a;
  Utf8Stream utf8;
  for (int i = 0; i < max_new; ++i) {
    const int32_t t = argmax(seq.logits());
    if (tok.is_eog(t)) break;
    const std::string piece = tok.token_to_piece(t);
    const bool ends = detail::turn_ends(spec, piece, a.text, chat);
    a.text += utf8.push(piece);
    a.tokens.push_back(t);
    if (ends || i + 1 == max_new) {
      a.unstepped = t;
      break;
    }
    seq.step(t);
    ++a.steps;
  }
  a.text += utf8.flush();
  return a;
}

ChatWrap chat_wrap(const Model& model) {
  return [&model](const std::string& user) {
    return apply_chat_template(model.file, model.tokenizer, {{"user", user}}, /*add_assistant_prefix=*/true);
  };
}

RunStats run_ruler(const Model& model, const Resources& res, const RunOptions& opt, const Progress& progress) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  validate(model, opt);
  const ChatWrap chat = opt.chat ? chat_wrap(model) : ChatWrap{};
  auto sample = [&](const std::string& task, int64_t L, int i) {
    return generate_sample(task, L, i, opt.seed, model.tokenizer, res, opt.max_new, opt.depth_grid, chat);
  };
  // A length too short for a task (or a model without a chat format) fails here, before hours
  // of work on the other tasks.
  for (const std::string& task : opt.tasks)
    for (int64_t L : opt.lengths) sample(task, L, 0);
  std::filesystem::create_directories(opt.out_dir);
  detail::check_or_write_config(opt.out_dir, detail::run_config_json(opt, res));
  const std::string jsonl = (std::filesystem::path(opt.out_dir) / "predictions.jsonl").string();
  std::set<std::string> done;
  for (const nlohmann::json& r : detail::load_records(jsonl)) done.insert(detail::record_key(r));

  RunStats st;
  int64_t total = 0;
  for (const std::string& task : opt.tasks)
    for (int64_t L : opt.lengths)
      for (int i = 0; i < opt.samples; ++i)
        for (const PolicySpec& p : opt.policies) {
          if (done.count(detail::record_key(task, L, i, p.label))) ++st.records_skipped;
          else ++total;
        }
  std::ofstream out(jsonl, std::ios::binary | std::ios::app);
  check(out.good(), "cannot write " + jsonl);
  if (progress) progress(0, total);

  const auto budget = std::make_shared<MemoryBudget>();
  for (const std::string& task : opt.tasks) {
    const TaskSpec& spec = task_spec(task);
    for (int64_t L : opt.lengths) {
      for (int i = 0; i < opt.samples; ++i) {
        std::vector<const PolicySpec*> todo;
        for (const PolicySpec& p : opt.policies)
          if (!done.count(detail::record_key(task, L, i, p.label))) todo.push_back(&p);
        if (todo.empty()) continue;
        const Sample s = sample(task, L, i);
        SequenceOptions so;
        so.n_ctx = L;
        so.kv_type = opt.kv_type;
        so.n_threads = opt.n_threads;
        so.memory_budget = budget;  // the prefilled prompt and every policy's fork
        Sequence base(model, so);
        base.prefill(s.prompt_tokens);
        ++st.prefills;
        const std::string hash = prompt_hash(s);
        const std::vector<double> depths = needle_depths(s);
        const std::string frame = prompt_frame(s);
        std::vector<std::string> refs_flat;
        for (const auto& r : s.references) refs_flat.insert(refs_flat.end(), r.begin(), r.end());
        for (const PolicySpec* p : todo) {
          const auto t_dec = Clock::now();
          const Decoded d = decode(base, p->config, s, spec, model.tokenizer);
          st.decode_steps += d.steps;
          nlohmann::json rec = {{"task", task},
                                {"length", L},
                                {"sample", i},
                                {"policy", p->label},
                                {"seed", s.seed},
                                {"prompt_hash", hash},
                                {"prompt_tokens", s.prompt_tokens.size()},
                                {"chat_template", s.chat},
                                {"prompt_frame", frame},
                                {"haystack_units", s.haystack_units},
                                {"needle_depths", depths},
                                {"references", refs_flat},
                                {"score", score_turns(d.turns, s.references)},
                                {"cost", d.cost},
                                {"generated_tokens", d.generated},
                                {"decode_seconds", std::chrono::duration<double>(Clock::now() - t_dec).count()}};
          if (s.turns() == 1) {
            rec["prediction"] = d.turns[0];
          } else {
            std::string joined;
            for (size_t t = 0; t < d.turns.size(); ++t) {
              if (t) joined += '\n';
              joined += d.turns[t];
            }
            rec["prediction"] = joined;
            rec["turn_predictions"] = d.turns;
            rec["turn_references"] = s.references;
          }
          out << rec.dump() << "\n";
          out.flush();
          check(out.good(), "cannot write " + jsonl);
          ++st.records_written;
          if (progress) progress(st.records_written, total);
        }
      }
    }
  }
  out.close();
  const std::string md = summarize(opt);
  std::ofstream sum((std::filesystem::path(opt.out_dir) / "summary.md").string());
  sum << md;
  check(sum.good(), "cannot write summary.md in " + opt.out_dir);
  st.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return st;
}

}  // namespace mp::eval::ruler
