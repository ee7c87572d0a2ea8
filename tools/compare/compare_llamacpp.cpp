// compare-llamacpp: magicpig against llama.cpp (through tools/peer's llama-dump) on a real GGUF
// model and a text, teacher-forced, the way llama-perplexity cuts a text into chunks.
//
//   compare-llamacpp -m MODEL.gguf -f TEXT [--ctx 1024] [--chunks K] [--greedy 32] [--near-tie 0.5]
//                    [--llama-dump PATH] [-t 2] [--tmp DIR] [--reference N]
//
// The text is tokenized by llama.cpp (llama-dump --tokenize-file --add-special, i.e. as
// llama-perplexity's common_tokenize(text, add_special = true)); our tokenizer's ids are compared
// with them and reported. The ids are cut into floor(T / ctx) chunks of ctx tokens (at most
// --chunks); as in llama-perplexity the first id of a chunk becomes BOS when the model adds one.
// Each chunk is evaluated in one pass by both engines (llama-dump --all-logits, f16 KV, flash
// attention off; magicpig Sequence::prefill with all logits, f16 KV, dense), followed by
// --greedy llama.cpp greedy steps that magicpig is teacher-forced through.
//
// Printed: positions compared, top-1 agreement (argmax of every chunk row predicting a text
// token), perplexity of both engines computed identically from their logits, scored like
// llama-perplexity (positions ctx/2 .. ctx-2 of each chunk predict the next token) and over every
// position, the largest and mean max|logit diff| / (logit range of llama.cpp's row), and per
// chunk the greedy steps equal before the first near-tie (llama.cpp's top-2 gap < --near-tie).
// --reference N: a third opinion on the first N positions of chunk 0, the model evaluated in
// double precision with exact activations (tests/testutil/reference_forward.h; slow, ~1 s per
// position for a 135M model): top-1 agreement and RMS logit error of each engine against it.
// This is magicpig's own program (not llama.cpp code); scripts/compare_llamacpp.sh drives it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "common/error.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "model/model.h"
#include "testutil/reference_forward.h"  // tests/testutil: the model in double precision

namespace {

using mp::check;

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

void run(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  check(rc == 0, "command failed (status " + std::to_string(rc) + "): " + cmd);
}

std::vector<int32_t> read_ids(const std::string& path) {
  std::ifstream f(path);
  std::vector<int32_t> ids;
  for (int32_t t; f >> t;) ids.push_back(t);
  return ids;
}

size_t argmax(const float* l, int n) { return size_t(mp::argmax(std::span<const float>(l, size_t(n)))); }
double log_prob(const float* l, int n, int32_t token) { return mp::log_prob(std::span<const float>(l, size_t(n)), token); }

struct RowStats {
  double max_abs = 0, rel = 0, range = 0, gap = 0;
};

RowStats compare_row(const float* peer, const float* ours, int n) {
  RowStats r;
  float lo = peer[0], hi = peer[0], a = -INFINITY, b = -INFINITY;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, peer[i]);
    hi = std::max(hi, peer[i]);
    if (peer[i] > a) { b = a; a = peer[i]; }
    else if (peer[i] > b) b = peer[i];
    r.max_abs = std::max(r.max_abs, double(std::abs(peer[i] - ours[i])));
  }
  r.range = double(hi) - lo;
  r.rel = r.range > 0 ? r.max_abs / r.range : 0;
  r.gap = double(a) - b;
  return r;
}

int usage() {
  std::fprintf(stderr,
               "usage: compare-llamacpp -m MODEL.gguf -f TEXT [--ctx 1024] [--chunks K] [--greedy 32]\n"
               "                        [--near-tie 0.5] [--llama-dump PATH] [-t 2] [--tmp DIR] [--reference N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string model_path, text_path, tmp;
  int64_t ctx = 1024, max_chunks = 0;
  int greedy = 32, threads = 2, reference = 0;
  double near_tie = 0.5;
  const char* cache = std::getenv("MAGICPIG_CACHE");
  const char* home = std::getenv("HOME");
  std::string dump = (cache ? std::string(cache) : std::string(home ? home : "/root") + "/.cache/magicpig") +
                     "/bin/llama-dump";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      check(i + 1 < argc, a + " needs a value");
      return argv[++i];
    };
    if (a == "-m") model_path = val();
    else if (a == "-f") text_path = val();
    else if (a == "--ctx") ctx = std::stoll(val());
    else if (a == "--chunks") max_chunks = std::stoll(val());
    else if (a == "--greedy") greedy = std::stoi(val());
    else if (a == "--near-tie") near_tie = std::stod(val());
    else if (a == "--llama-dump") dump = val();
    else if (a == "-t") threads = std::stoi(val());
    else if (a == "--tmp") tmp = val();
    else if (a == "--reference") reference = std::stoi(val());
    else if (a == "-h" || a == "--help") return usage(), 0;
    else return usage();
  }
  if (model_path.empty() || text_path.empty()) return usage();
  check(ctx >= 4, "--ctx must be >= 4");
  check(std::filesystem::exists(dump), dump + " is missing: run scripts/build_peer.sh --lib-only");

  std::filesystem::path dir = tmp.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(tmp);
  dir /= "compare-llamacpp-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  struct Cleanup {
    std::filesystem::path p;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(p, ec);
    }
  } cleanup{dir};

  const auto model = mp::Model::load(model_path);
  const int V = model->hp.n_vocab;

  // Tokenization: llama.cpp's ids are the ones evaluated; ours are compared with them.
  const std::string peer_ids_file = (dir / "text.ids").string();
  run(shell_quote(dump) + " -m " + shell_quote(model_path) + " --vocab-only --add-special --tokenize-file " +
      shell_quote(text_path) + " >" + shell_quote(peer_ids_file) + " 2>/dev/null");
  const std::vector<int32_t> ids = read_ids(peer_ids_file);
  std::string text;
  {
    std::ifstream f(text_path, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  const std::vector<int32_t> our_ids = model->tokenizer.encode(text, /*add_special=*/true);
  size_t tok_mismatch = 0;
  while (tok_mismatch < std::min(ids.size(), our_ids.size()) && ids[tok_mismatch] == our_ids[tok_mismatch])
    ++tok_mismatch;
  const bool tok_equal = ids == our_ids;

  int64_t n_chunk = int64_t(ids.size()) / ctx;
  if (max_chunks > 0) n_chunk = std::min(n_chunk, max_chunks);
  check(n_chunk >= 1, "the text has " + std::to_string(ids.size()) + " tokens, fewer than --ctx " +
                          std::to_string(ctx));
  const bool add_bos = model->tokenizer.add_bos() && model->tokenizer.bos() >= 0;
  const int64_t first = ctx / 2;

  double nll_ours_h = 0, nll_peer_h = 0, nll_ours_all = 0, nll_peer_all = 0;
  int64_t n_h = 0, n_all = 0, agree = 0, rows = 0;
  double worst_rel = 0, sum_rel = 0, worst_abs = 0;
  std::vector<float> peer_row(size_t(V) * 1);
  std::printf("model %s\ntext %s: %zu tokens (llama.cpp), our tokenizer %s\n", model_path.c_str(), text_path.c_str(),
              ids.size(),
              tok_equal ? "identical"
                        : ("DIFFERS from index " + std::to_string(tok_mismatch) + " (ours " +
                           std::to_string(our_ids.size()) + " tokens)")
                              .c_str());
  std::printf("%lld chunks of %lld tokens%s, greedy %d steps per chunk, near-tie: llama.cpp top-2 gap < %.3g\n",
              (long long)n_chunk, (long long)ctx, add_bos ? " (first id of each chunk -> BOS)" : "", greedy,
              near_tie);
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  double secs_peer = 0, secs_ours = 0;
  int greedy_ok_chunks = 0;
  for (int64_t c = 0; c < n_chunk; ++c) {
    std::vector<int32_t> chunk(ids.begin() + c * ctx, ids.begin() + (c + 1) * ctx);
    if (add_bos) chunk[0] = model->tokenizer.bos();
    std::string tokens_arg;
    for (int32_t t : chunk) {
      if (!tokens_arg.empty()) tokens_arg += ',';
      tokens_arg += std::to_string(t);
    }
    const std::string tokens_file = (dir / "chunk.tokens").string(), out_ids = (dir / "greedy.ids").string(),
                      logit_file = (dir / "peer.f32").string();
    std::ofstream(tokens_file) << tokens_arg;
    const auto tp = std::chrono::steady_clock::now();
    run(shell_quote(dump) + " -m " + shell_quote(model_path) + " --tokens \"$(cat " + shell_quote(tokens_file) +
        ")\" -n " + std::to_string(greedy) + " --all-logits --kv-type f16 --flash-attn off --threads " +
        std::to_string(threads) + " --logits-out " + shell_quote(logit_file) + " >" + shell_quote(out_ids) +
        " 2>/dev/null");
    secs_peer += std::chrono::duration<double>(std::chrono::steady_clock::now() - tp).count();
    const std::vector<int32_t> gen = read_ids(out_ids);
    check(int(gen.size()) == greedy, "llama-dump printed " + std::to_string(gen.size()) + " ids");
    const int64_t n_rows = ctx + greedy;
    check(std::filesystem::file_size(logit_file) == uintmax_t(n_rows) * V * 4,
          "llama-dump logits file has an unexpected size (n_vocab mismatch?)");

    const auto to = std::chrono::steady_clock::now();
    mp::SequenceOptions so;
    so.n_ctx = n_rows + 1;
    so.kv_type = mp::DType::F16;
    so.n_threads = threads;
    mp::Sequence seq(*model, so);
    seq.prefill(chunk, /*all_logits=*/true);
    std::vector<float> ours(seq.all_logits().begin(), seq.all_logits().end());
    for (int g = 0; g < greedy; ++g) {
      seq.step(gen[size_t(g)]);
      ours.insert(ours.end(), seq.logits().begin(), seq.logits().end());
    }
    secs_ours += std::chrono::duration<double>(std::chrono::steady_clock::now() - to).count();

    std::ifstream lf(logit_file, std::ios::binary);
    int greedy_equal = -1, first_tie = -1, greedy_total_equal = 0;
    double min_gap = 1e30;
    for (int64_t r = 0; r < n_rows; ++r) {
      lf.read(reinterpret_cast<char*>(peer_row.data()), std::streamsize(V) * 4);
      check(bool(lf), "short read of the llama-dump logits");
      const float* p = peer_row.data();
      const float* q = ours.data() + size_t(r) * V;
      const RowStats s = compare_row(p, q, V);
      worst_rel = std::max(worst_rel, s.rel);
      worst_abs = std::max(worst_abs, s.max_abs);
      sum_rel += s.rel;
      ++rows;
      const bool same = argmax(p, V) == argmax(q, V);
      if (r < ctx - 1) {  // predicts text token r + 1
        agree += same;
        const int32_t next = chunk[size_t(r + 1)];
        const double lo = -log_prob(q, V, next), lp = -log_prob(p, V, next);
        nll_ours_all += lo, nll_peer_all += lp, ++n_all;
        if (r >= first) nll_ours_h += lo, nll_peer_h += lp, ++n_h;
      } else if (r < ctx - 1 + greedy) {  // greedy step g = r - (ctx - 1)
        const int g = int(r - (ctx - 1));
        min_gap = std::min(min_gap, s.gap);
        if (first_tie < 0 && s.gap < near_tie) first_tie = g;
        greedy_total_equal += same;
        if (!same && greedy_equal < 0) greedy_equal = g;
      }
    }
    if (greedy_equal < 0) greedy_equal = greedy;
    if (c == 0 && reference > 0) {
      const int n_ref = int(std::min<int64_t>(reference, ctx));
      const std::vector<int32_t> head(chunk.begin(), chunk.begin() + n_ref);
      const auto ref = mp::test::reference_logits(*model, head, 0);
      std::ifstream lf2(logit_file, std::ios::binary);
      double e_ours = 0, e_peer = 0;
      int a_ours = 0, a_peer = 0, a_both = 0;
      std::vector<float> rr(size_t(V), 0.0f);
      for (int r = 0; r < n_ref; ++r) {
        lf2.read(reinterpret_cast<char*>(peer_row.data()), std::streamsize(V) * 4);
        const float* q = ours.data() + size_t(r) * V;
        for (int v = 0; v < V; ++v) {
          rr[size_t(v)] = float(ref[size_t(r)][size_t(v)]);
          e_ours += std::pow(q[v] - ref[size_t(r)][size_t(v)], 2);
          e_peer += std::pow(peer_row[size_t(v)] - ref[size_t(r)][size_t(v)], 2);
        }
        const size_t t = argmax(rr.data(), V);
        a_ours += argmax(q, V) == t;
        a_peer += argmax(peer_row.data(), V) == t;
        a_both += argmax(q, V) == argmax(peer_row.data(), V);
      }
      const double n = double(n_ref) * V;
      std::printf("reference (double precision, exact activations), first %d positions of chunk 0: top-1 agreement "
                  "with it magicpig %d, llama.cpp %d (with each other %d); RMS logit error magicpig %.4f, "
                  "llama.cpp %.4f\n",
                  n_ref, a_ours, a_peer, a_both, std::sqrt(e_ours / n), std::sqrt(e_peer / n));
    }
    const bool ok = first_tie < 0 ? greedy_equal == greedy : greedy_equal >= first_tie;
    greedy_ok_chunks += ok;
    std::printf("chunk %lld: greedy %d/%d steps equal before the first difference, first near-tie at step %s "
                "(min top-2 gap %.3g) -> %s; %.1f s elapsed\n",
                (long long)c, greedy_equal, greedy, first_tie < 0 ? "none" : std::to_string(first_tie).c_str(),
                min_gap, ok ? "ok" : "NOT equal up to the first near-tie",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::fflush(stdout);
  }
  const double ppl_ours_h = std::exp(nll_ours_h / double(n_h)), ppl_peer_h = std::exp(nll_peer_h / double(n_h));
  const double ppl_ours_all = std::exp(nll_ours_all / double(n_all)),
               ppl_peer_all = std::exp(nll_peer_all / double(n_all));
  std::printf("\npositions compared (teacher-forced, predicting a text token): %lld\n", (long long)n_all);
  std::printf("top-1 agreement: %.2f%% (%lld / %lld)\n", 100.0 * double(agree) / double(n_all), (long long)agree,
              (long long)n_all);
  std::printf("perplexity, llama-perplexity scoring (%lld positions, 2nd half of each chunk): magicpig %.4f, "
              "llama.cpp %.4f, ratio - 1 = %+.3f%%\n",
              (long long)n_h, ppl_ours_h, ppl_peer_h, 100.0 * (ppl_ours_h / ppl_peer_h - 1));
  std::printf("perplexity, every position (%lld): magicpig %.4f, llama.cpp %.4f, ratio - 1 = %+.3f%%\n",
              (long long)n_all, ppl_ours_all, ppl_peer_all, 100.0 * (ppl_ours_all / ppl_peer_all - 1));
  std::printf("max |logit diff| / logit range of llama.cpp's row: max %.4f, mean %.4f over %lld rows "
              "(largest absolute %.3f)\n",
              worst_rel, sum_rel / double(rows), (long long)rows, worst_abs);
  std::printf("greedy equal up to the first near-tie: %d / %lld chunks\n", greedy_ok_chunks, (long long)n_chunk);
  std::printf("time: llama-dump %.1f s, magicpig %.1f s\n", secs_peer, secs_ours);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
