// needle-trace: why does MagicPIG miss a single needle that exact attention finds?
// For each RULER sample: exact prefill, the exact (dense) greedy answer, then MagicPIG
// teacher-forced on that answer through eval::NeedleTracer until its argmax first differs.
// At that step it writes, per sparse layer and query head, the exact and estimated weight on the
// needle's tokens, candidate status, collision counts, angles and sampling probabilities, and
// finds which layers (and heads) flip the answer back when only they attend exactly.
// Output: OUT/heads.csv, OUT/keys.csv, OUT/samples.csv, OUT/attribution.csv (docs/history/quality-2026-12-05.md,
// "The 4k single-needle miss on the retrieval model").
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "eval/needle_trace.h"
#include "eval/ruler_runner.h"
#include "eval/ruler_score.h"
#include "eval/ruler_tasks.h"
#include "model/forward.h"
#include "model/model.h"

using namespace mp;

namespace {

struct Options {
  std::string model = "models/default.gguf", task = "niah_single_2", out, haystack, policy = "magicpig";
  int64_t length = 4096;
  int first = 0, count = 20, threads = 2;
  int seeds = 0;  // > 0: also answer with projection seeds 1..seeds (seeds.csv), for a failure rate
  bool trace = true;
  uint64_t seed = 42;
  bool attribute = true;
  bool chat = false;
};

[[noreturn]] void usage() {
  std::fputs(
      "usage: needle-trace --out DIR [-m MODEL] [--task niah_single_2] [--length 4096] [--seed 42]\n"
      "       [--first 0] [--count 20] [--haystack FILE] [--attn magicpig:K=10:L=150[:seed=..]] [-t 2]\n"
      "       [--no-attribution] [--no-trace] [--seeds N] [--chat]\n"
      "A task with several needles (niah_multikey_*) watches the asked one; --chat asks in the\n"
      "model's chat template and ends answers as `magicpig eval ruler --chat` does.\n",
      stderr);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "-m") o.model = val();
    else if (a == "--task") o.task = val();
    else if (a == "--out") o.out = val();
    else if (a == "--haystack") o.haystack = val();
    else if (a == "--attn") o.policy = val();
    else if (a == "--length") o.length = std::stoll(val());
    else if (a == "--first") o.first = std::stoi(val());
    else if (a == "--count") o.count = std::stoi(val());
    else if (a == "-t") o.threads = std::stoi(val());
    else if (a == "--seed") o.seed = std::stoull(val());
    else if (a == "--no-attribution") o.attribute = false;
    else if (a == "--no-trace") o.trace = false;
    else if (a == "--seeds") o.seeds = std::stoi(val());
    else if (a == "--chat") o.chat = true;
    else usage();
  }
  if (o.out.empty()) usage();
  return o;
}

// Greedy answer of one fork, the turn ended as the RULER runner ends it.
std::vector<int32_t> greedy(Sequence& seq, const Tokenizer& tok, const eval::ruler::Sample& s) {
  return eval::ruler::answer_turn(seq, tok, eval::ruler::task_spec(s.task), s.max_new, s.chat).tokens;
}

std::string text_of(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t t : ids) s += tok.token_to_piece(t);
  return s;
}

std::string csv_text(std::string s) {
  for (char& c : s)
    if (c == ',' || c == '\n' || c == '"') c = ' ';
  return s;
}

float margin(std::span<const float> logits, int32_t want) {
  float best_other = -INFINITY;
  for (size_t i = 0; i < logits.size(); ++i)
    if (int32_t(i) != want) best_other = std::max(best_other, logits[i]);
  return logits[want] - best_other;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  const std::string data = eval::ruler::find_data_dir();
  const std::string words = (std::filesystem::path(data) / "words.txt").string();
  const std::string hay = o.haystack.empty() ? (std::filesystem::path(data) / "haystack.txt").string() : o.haystack;
  const eval::ruler::Resources res = eval::ruler::load_resources(words, hay);
  std::unique_ptr<Model> model = Model::load(o.model);
  const Tokenizer& tok = model->tokenizer;
  const attn::HeadShape shape = head_shape(model->hp);
  const std::vector<eval::ruler::PolicySpec> specs = eval::ruler::parse_policy_list(o.policy, attn::Config{});
  check(specs.size() == 1 && specs[0].config.name == "magicpig", "needle-trace: --attn takes one magicpig entry");
  const attn::Config mpcfg = specs[0].config;

  std::filesystem::create_directories(o.out);
  auto open = [&](const char* name, const char* header) {
    std::ofstream f(std::filesystem::path(o.out) / name);
    check(f.good(), std::string("needle-trace: cannot write ") + name);
    f << header << '\n';
    return f;
  };
  std::ofstream fs = open("samples.csv",
                          "sample,prompt_tokens,needle_first,needle_last,depth,reference,dense_answer,dense_score,"
                          "magicpig_answer,magicpig_score,diverge_step,dense_margin,magicpig_margin,"
                          "want_token,got_token");
  std::ofstream fh = open("heads.csv",
                          "sample,step,diverged,layer,head,n_candidates,dense_watch_mass,mp_watch_mass,"
                          "dense_exact_mass,mp_exact_mass,dense_top_pos,dense_top_weight,mp_top_pos,mp_top_weight,mp_top_dense_w,"
                          "mp_top_u,expected_candidates,expected_candidates_raw,rel_l2,replay_rel");
  std::ofstream fk = open("keys.csv",
                          "sample,step,diverged,layer,head,pos,token,exact,candidate,collisions,cos_centred,cos_raw,"
                          "u,u_raw,dense_w,mp_w");
  std::ofstream fa = open("attribution.csv", "sample,step,exact_layer,exact_head,recovers,margin");
  std::ofstream fseed = open("seeds.csv", "sample,lsh_seed,dense_score,answer,score");

  const eval::ruler::ChatWrap chat = o.chat ? eval::ruler::chat_wrap(*model) : eval::ruler::ChatWrap{};
  for (int i = o.first; i < o.first + o.count; ++i) {
    const eval::ruler::Sample s = eval::ruler::generate_sample(o.task, o.length, i, o.seed, tok, res, 0, 0, chat);
    check(s.turns() == 1 && s.references[0].size() == 1 && !s.needles.empty(),
          "needle-trace: the task must ask for one value in one turn");
    const size_t asked = eval::ruler::asked_needle(s);
    size_t at = 0;
    const std::vector<int64_t> watch = eval::tokens_over_text(tok, s.prompt_tokens, s.needles[asked].text, &at);
    SequenceOptions so;
    so.n_threads = o.threads;
    Sequence base(*model, so);
    base.prefill(s.prompt_tokens);

    attn::Config dense;
    dense.name = "dense";
    std::unique_ptr<Sequence> dseq = base.fork(dense);
    const std::vector<int32_t> dans = greedy(*dseq, tok, s);
    std::unique_ptr<Sequence> mseq = base.fork(mpcfg);
    const std::vector<int32_t> mans = greedy(*mseq, tok, s);
    const std::string dtext = text_of(tok, dans), mtext = text_of(tok, mans);
    const double dscore = eval::ruler::string_match_all(eval::ruler::postprocess_prediction(dtext), s.references[0]);
    const double mscore = eval::ruler::string_match_all(eval::ruler::postprocess_prediction(mtext), s.references[0]);

    for (int seed = 1; seed <= o.seeds; ++seed) {
      attn::Config c = mpcfg;
      c.lsh_seed = uint64_t(seed);
      std::unique_ptr<Sequence> f = base.fork(c);
      const std::string t = text_of(tok, greedy(*f, tok, s));
      fseed << i << ',' << seed << ',' << dscore << ',' << csv_text(t) << ','
            << eval::ruler::string_match_all(eval::ruler::postprocess_prediction(t), s.references[0]) << '\n';
    }
    fseed.flush();

    // Teacher-force the dense answer through the traced policy up to the first disagreement.
    auto ctl = std::make_shared<eval::NeedleTraceControl>();
    ctl->watch = watch;
    std::unique_ptr<Sequence> tseq = base.fork(std::make_unique<eval::NeedleTracer>(mpcfg, shape, ctl), "needle-trace");
    int64_t diverge = -1;
    float dm = 0, mm = 0;
    int32_t got = -1, want = -1;
    for (size_t j = 0; o.trace && j + 1 < dans.size(); ++j) {
      std::unique_ptr<Sequence> before = tseq->fork();
      ctl->heads.clear();
      ctl->keys.clear();
      ctl->record = true;
      tseq->step(dans[j]);
      dseq = base.fork(dense);  // the exact logits of the same prefix, for the margin
      for (size_t m = 0; m <= j; ++m) dseq->step(dans[m]);
      want = dans[j + 1];
      got = argmax(tseq->logits());
      const bool div = got != want;
      for (const auto& h : ctl->heads)
        fh << i << ',' << h.step << ',' << div << ',' << h.layer << ',' << h.head << ',' << h.n_candidates << ','
           << h.dense_watch_mass << ',' << h.mp_watch_mass << ',' << h.dense_exact_mass << ',' << h.mp_exact_mass
           << ',' << h.dense_top_pos << ',' << h.dense_top_weight << ',' << h.mp_top_pos << ',' << h.mp_top_weight
           << ',' << h.mp_top_dense_w << ',' << h.mp_top_u << ',' << h.expected_candidates << ','
           << h.expected_candidates_raw << ',' << h.rel_l2 << ',' << h.replay_rel << '\n';
      for (const auto& k : ctl->keys)
        fk << i << ',' << k.step << ',' << div << ',' << k.layer << ',' << k.head << ',' << k.pos << ','
           << csv_text(tok.token_to_piece(s.prompt_tokens[k.pos])) << ',' << k.exact << ',' << k.candidate << ','
           << k.collisions << ',' << k.cos_centred << ',' << k.cos_raw << ',' << k.u << ',' << k.u_raw << ','
           << k.dense_w << ',' << k.mp_w << '\n';
      if (!div) continue;
      diverge = int64_t(j);
      dm = margin(dseq->logits(), want);
      mm = margin(tseq->logits(), want);
      if (o.attribute) {
        // Which layers, then which heads of those, give the right token back when only they
        // attend exactly at this step (everything before it stays MagicPIG's).
        ctl->record = false;
        auto trial = [&](int layer, int head) {
          std::fill(ctl->exact_head.begin(), ctl->exact_head.end(), 0);
          for (int l = 0; l < shape.n_layer; ++l)
            for (int h = 0; h < shape.n_head; ++h)
              if ((layer < 0 || l == layer) && (head < 0 || h == head)) ctl->exact_head[size_t(l) * shape.n_head + h] = 1;
          std::unique_ptr<Sequence> f = before->fork();
          f->step(dans[j]);
          const bool ok = argmax(f->logits()) == want;
          fa << i << ',' << j << ',' << layer << ',' << head << ',' << ok << ',' << margin(f->logits(), want) << '\n';
          return ok;
        };
        trial(-1, -1);
        for (int l = 0; l < shape.n_layer; ++l)
          if (trial(l, -1))
            for (int h = 0; h < shape.n_head; ++h) trial(l, h);
        std::fill(ctl->exact_head.begin(), ctl->exact_head.end(), 0);
      }
      break;
    }
    fs << i << ',' << s.prompt_tokens.size() << ',' << watch.front() << ',' << watch.back() << ','
       << eval::ruler::needle_depths(s)[asked] << ',' << s.references[0][0] << ',' << csv_text(dtext) << ',' << dscore << ','
       << csv_text(mtext) << ',' << mscore << ',' << diverge << ',' << dm << ',' << mm << ','
       << csv_text(want >= 0 ? tok.token_to_piece(want) : "") << ',' << csv_text(got >= 0 ? tok.token_to_piece(got) : "")
       << '\n';
    fs.flush();
    std::fprintf(stderr, "sample %d: needle tokens [%lld, %lld], dense '%s' (%g), magicpig '%s' (%g), diverges at step %lld\n",
                 i, (long long)watch.front(), (long long)watch.back(), dtext.c_str(), dscore, mtext.c_str(), mscore,
                 (long long)diverge);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "needle-trace: %s\n", e.what());
  return 1;
}
