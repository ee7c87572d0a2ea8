// serve-bench: a bounded load test of an OpenAI-compatible server (magicpig serve or
// llama-server) on loopback. C concurrent clients each send streamed /v1/completions requests
// back to back for a fixed time; every request's prompt is a different slice of a text file,
// so no prompt is a prefix of another. Reports throughput and the percentiles of time to first
// token (TTFT) and time per output token (TPOT) over the finished requests.
//   serve-bench --port 8080 -f book.txt --prompt-chars 16000 -n 32 --clients 1,4,8 --duration 20
// Exits 1 when any request failed. --arrival: the gap test instead. One stream decodes; after 1 s a second request with the long
// prompt arrives; reports the longest gap between two tokens of the first stream.
// --poisson RATE: open-loop traffic instead. Requests arrive as a Poisson process of RATE per
// second for --duration seconds (a pool of --clients connections, the first value; an arrival
// waits for a free one), each with a prompt of L tokens drawn from a bounded Pareto
// distribution on [--prompt-min, --prompt-max] with shape --pareto-alpha (long-tailed: most
// prompts short, a few near the maximum), realized as L x --chars-per-token characters of the
// text (the table reports the server's own token counts). First requests alone give the idle
// time per output token (the median of 5 after one to warm up: one request varies ~20% here);
// then the table: TTFT, TPOT and inter-token gap percentiles, TPOT p99 over idle TPOT, each
// request's slowdown (its TPOT over its TPOT when replayed alone after the traffic), output and
// prompt throughput; the three slowest streams on stderr.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string text;
  size_t prompt_chars = 16000;
  int max_tokens = 32;
  std::vector<int> clients = {1, 4, 8};
  double duration_s = 20;
  json extra = json::object();  // merged into every request body
  std::string label = "server";
  bool arrival = false;
  double poisson_rate = 0;  // requests per second; 0: the closed-loop load test
  int prompt_min = 100, prompt_max = 8000;
  double pareto_alpha = 0.5, chars_per_token = 4.0;
  uint64_t seed = 55;
};

struct Sample {
  double ttft_ms = 0, tpot_ms = 0, max_gap_ms = 0;
  double arrival_s = 0;  // --poisson: when it was sent, from the start of the traffic
  std::string prompt;     // --poisson: its prompt, replayed alone afterwards
  double alone_tpot_ms = 0;  // and the TPOT it then got
  int64_t tokens = 0, prompt_tokens = 0;
  bool ok = false;
  std::vector<double> gaps_ms;
};

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// One streamed request; a token is a chunk with non-empty text.
Sample run_request(const Options& o, const std::string& prompt, int max_tokens) {
  httplib::Client cli(o.host, o.port);
  cli.set_read_timeout(600, 0);
  json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", true},
               {"ignore_eos", true}};
  body.update(o.extra);
  Sample s;
  std::string buf;
  const auto t0 = Clock::now();
  Clock::time_point last{};
  auto on_event = [&](const std::string& data) {
    if (data == "[DONE]") return;
    const json j = json::parse(data, nullptr, false);
    if (j.is_discarded()) return;
    if (j.contains("usage") && j["usage"].is_object()) {
      s.prompt_tokens = j["usage"].value("prompt_tokens", int64_t(0));
    }
    if (!j.contains("choices") || j["choices"].empty()) return;
    const json& c = j["choices"][0];
    const std::string text = c.contains("text") && c["text"].is_string() ? c["text"].get<std::string>() : "";
    if (text.empty()) return;
    const auto now = Clock::now();
    if (s.tokens == 0) s.ttft_ms = ms(now - t0);
    else {
      const double g = ms(now - last);
      s.gaps_ms.push_back(g);
      s.max_gap_ms = std::max(s.max_gap_ms, g);
    }
    last = now;
    ++s.tokens;
  };
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.set_header("Content-Type", "application/json");
  req.body = body.dump();
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buf.append(data, n);
    size_t cut;
    while ((cut = buf.find("\n\n")) != std::string::npos) {
      const std::string ev = buf.substr(0, cut);
      buf.erase(0, cut + 2);
      if (ev.rfind("data: ", 0) == 0) on_event(ev.substr(6));
    }
    return true;
  };
  auto res = cli.send(req);
  s.ok = res && res->status == 200 && s.tokens > 0;
  if (s.tokens > 1) s.tpot_ms = ms(last - t0 - std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double, std::milli>(s.ttft_ms))) /
                                double(s.tokens - 1);
  return s;
}

// n characters of the text from a position set by k, wrapping around the end.
std::string slice_chars(const Options& o, uint64_t k, size_t n) {
  const size_t start = size_t((k * 7919u * 131u) % o.text.size());
  std::string out;
  while (out.size() < n) out += o.text.substr(out.empty() ? start : 0, n - out.size());
  return out;
}

std::string slice(const Options& o, uint64_t k) {
  const size_t n = std::min(o.prompt_chars, o.text.size());
  const size_t room = o.text.size() - n;
  const size_t start = room ? size_t((k * 7919u * 131u) % room) : 0;
  return o.text.substr(start, n);
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p / 100.0 * double(v.size())))];
}

// Returns the number of failed requests (0 when every request of every cell succeeded).
int load_test(const Options& o) {
  int failures = 0;
  std::printf("| server | clients | requests | failed | prompt tokens | output tok/s | TTFT p50 ms | TTFT p99 ms | "
              "TPOT p50 ms | TPOT p99 ms |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (int c : o.clients) {
    std::mutex mu;
    std::vector<Sample> done;
    std::atomic<uint64_t> next{uint64_t(c) * 1000};
    int failed = 0;
    const auto t0 = Clock::now();
    const auto until = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s));
    std::vector<std::thread> th;
    for (int i = 0; i < c; ++i)
      th.emplace_back([&] {
        while (Clock::now() < until) {
          Sample s = run_request(o, slice(o, next++), o.max_tokens);
          std::lock_guard<std::mutex> lk(mu);
          if (s.ok) done.push_back(std::move(s));
          else ++failed;
        }
      });
    for (auto& t : th) t.join();
    const double wall = ms(Clock::now() - t0) / 1e3;
    failures += failed + (done.empty() ? 1 : 0);
    std::vector<double> ttft, tpot;
    int64_t tokens = 0, prompt = 0;
    for (const Sample& s : done) {
      ttft.push_back(s.ttft_ms);
      if (s.tokens > 1) tpot.push_back(s.tpot_ms);
      tokens += s.tokens;
      prompt = std::max(prompt, s.prompt_tokens);
    }
    std::printf("| %s | %d | %zu | %d | %lld | %.2f | %.0f | %.0f | %.1f | %.1f |\n", o.label.c_str(), c, done.size(),
                failed, (long long)prompt, double(tokens) / wall, pct(ttft, 50), pct(ttft, 99), pct(tpot, 50),
                pct(tpot, 99));
    std::fflush(stdout);
  }
  return failures;
}

void arrival_test(const Options& o) {
  Sample running;
  std::thread a([&] { running = run_request(o, "Once upon a time, in a small village by the sea,", 400); });
  std::this_thread::sleep_for(std::chrono::seconds(1));
  Sample arriving = run_request(o, slice(o, 1), 4);
  a.join();
  std::printf("| server | running stream tokens | median gap ms | longest gap ms | arriving prompt tokens | arriving TTFT ms |\n"
              "|---|---|---|---|---|---|\n| %s | %lld | %.1f | %.0f | %lld | %.0f |\n",
              o.label.c_str(), (long long)running.tokens, pct(running.gaps_ms, 50), running.max_gap_ms,
              (long long)arriving.prompt_tokens, arriving.ttft_ms);
}

// Bounded Pareto on [lo, hi] with shape alpha, by inverting its CDF.
double bounded_pareto(std::mt19937_64& rng, double lo, double hi, double alpha) {
  const double u = std::uniform_real_distribution<double>(0, 1)(rng);
  return lo / std::pow(1 - u * (1 - std::pow(lo / hi, alpha)), 1 / alpha);
}

int poisson_test(const Options& o) {
  // Idle: the time per token a stream gets when nothing else runs; the median of 5 requests
  // alone after a warm-up one.
  const std::string idle_prompt = slice_chars(o, 999, size_t(o.prompt_min * o.chars_per_token));
  Sample idle = run_request(o, idle_prompt, o.max_tokens);
  std::vector<double> idle_tpot;
  for (int i = 0; i < 5 && idle.ok; ++i) {
    idle = run_request(o, idle_prompt, o.max_tokens);
    idle_tpot.push_back(idle.tpot_ms);
  }
  idle.tpot_ms = idle_tpot.empty() ? 0 : pct(idle_tpot, 50);
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> gap(o.poisson_rate);
  const int pool = o.clients.empty() ? 16 : o.clients.front();
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0, failed = 0;
  std::vector<Sample> done;
  std::vector<std::thread> th;
  const auto t0 = Clock::now();
  double at = 0;
  for (uint64_t k = 0;; ++k) {
    at += gap(rng);
    if (at > o.duration_s) break;
    const auto tokens = size_t(bounded_pareto(rng, o.prompt_min, o.prompt_max, o.pareto_alpha));
    const std::string prompt = slice_chars(o, k, size_t(double(tokens) * o.chars_per_token));
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at)));
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return in_flight < pool; });
      ++in_flight;
    }
    th.emplace_back([&, prompt, at] {
      Sample s = run_request(o, prompt, o.max_tokens);
      s.arrival_s = at;
      s.prompt = prompt;
      std::lock_guard<std::mutex> lk(mu);
      if (s.ok) done.push_back(std::move(s));
      else ++failed;
      --in_flight;
      cv.notify_all();
    });
  }
  for (auto& t : th) t.join();
  const double wall = ms(Clock::now() - t0) / 1e3;
  // Each request's slowdown: its TPOT in the traffic over its TPOT replayed alone afterwards (the
  // same prompt, so the same context length: a 4k-token stream decodes slower than the idle
  // 100-token one even alone).
  // A replay that fails counts as a failure (exit 1), not as a request left out of the slowdowns.
  std::vector<double> slowdown;
  int replays_failed = 0;
  for (Sample& s : done) {
    const Sample alone = run_request(o, s.prompt, o.max_tokens);
    replays_failed += alone.ok ? 0 : 1;
    if (alone.ok && alone.tpot_ms > 0 && s.tokens > 1) slowdown.push_back(s.tpot_ms / alone.tpot_ms);
    s.alone_tpot_ms = alone.tpot_ms;
  }
  if (replays_failed > 0) std::fprintf(stderr, "%d replays alone failed\n", replays_failed);
  // The slowest streams on stderr, to see what sets the TPOT tail.
  std::sort(done.begin(), done.end(), [](const Sample& a, const Sample& b) { return a.tpot_ms > b.tpot_ms; });
  for (size_t i = 0; i < done.size() && i < 3; ++i)
    std::fprintf(stderr,
                 "slowest TPOT %zu: %.1f ms (alone %.1f ms), sent at %.1f s, %lld prompt tokens, TTFT %.0f ms, "
                 "longest gap %.0f ms\n",
                 i + 1, done[i].tpot_ms, done[i].alone_tpot_ms, done[i].arrival_s, (long long)done[i].prompt_tokens,
                 done[i].ttft_ms, done[i].max_gap_ms);
  std::vector<double> ttft, tpot, gaps, prompts;
  int64_t out_tokens = 0, prompt_tokens = 0;
  for (const Sample& s : done) {
    ttft.push_back(s.ttft_ms);
    if (s.tokens > 1) tpot.push_back(s.tpot_ms);
    gaps.insert(gaps.end(), s.gaps_ms.begin(), s.gaps_ms.end());
    prompts.push_back(double(s.prompt_tokens));
    out_tokens += s.tokens;
    prompt_tokens += s.prompt_tokens;
  }
  std::printf("| server | requests | failed | prompt tokens p50 / p99 / max | idle TPOT ms | TTFT p50 ms | TTFT p99 ms | "
              "TPOT p50 ms | TPOT p99 ms | TPOT p99 / idle | slowdown p50 / p99 | gap p99 ms | gap max ms | "
              "output tok/s | prompt tok/s |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::printf(
      "| %s | %zu | %d | %.0f / %.0f / %.0f | %.1f | %.0f | %.0f | %.1f | %.1f | %.2f | %.2f / %.2f | %.0f | %.0f | %.2f | "
      "%.0f |\n",
      o.label.c_str(), done.size(), failed, pct(prompts, 50), pct(prompts, 99), pct(prompts, 100), idle.tpot_ms,
      pct(ttft, 50), pct(ttft, 99), pct(tpot, 50), pct(tpot, 99), idle.tpot_ms > 0 ? pct(tpot, 99) / idle.tpot_ms : 0.0,
      pct(slowdown, 50), pct(slowdown, 99), pct(gaps, 99), pct(gaps, 100), double(out_tokens) / wall,
      double(prompt_tokens) / wall);
  std::fflush(stdout);
  return failed + replays_failed + (idle.ok ? 0 : 1);
}

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "serve-bench: %s\nusage: serve-bench [--host H] [--port P] -f TEXT [--prompt-chars N] "
                       "[-n MAX_TOKENS] [--clients 1,4,8] [--duration S] [--extra JSON] [--label NAME] [--arrival]\n"
                       "       [--poisson RATE [--prompt-min 100] [--prompt-max 8000] [--pareto-alpha 0.5] "
                       "[--chars-per-token 4] [--seed N]]\n",
               msg.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string file;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--host") o.host = val();
      else if (a == "--port") o.port = std::stoi(val());
      else if (a == "-f") file = val();
      else if (a == "--prompt-chars") o.prompt_chars = std::stoul(val());
      else if (a == "-n") o.max_tokens = std::stoi(val());
      else if (a == "--duration") o.duration_s = std::stod(val());
      else if (a == "--label") o.label = val();
      else if (a == "--arrival") o.arrival = true;
      else if (a == "--extra") o.extra = json::parse(val());
      else if (a == "--poisson") o.poisson_rate = std::stod(val());
      else if (a == "--prompt-min") o.prompt_min = std::stoi(val());
      else if (a == "--prompt-max") o.prompt_max = std::stoi(val());
      else if (a == "--pareto-alpha") o.pareto_alpha = std::stod(val());
      else if (a == "--chars-per-token") o.chars_per_token = std::stod(val());
      else if (a == "--seed") o.seed = std::stoull(val());
      else if (a == "--clients") {
        o.clients.clear();
        std::string v = val();
        for (size_t p = 0; p <= v.size();) {
          const size_t q = std::min(v.find(',', p), v.size());
          o.clients.push_back(std::stoi(v.substr(p, q - p)));
          p = q + 1;
        }
      } else usage_error("unknown argument " + a);
    } catch (const std::exception& e) {
      usage_error("bad value for " + a + ": " + e.what());
    }
  }
  if (file.empty()) usage_error("-f TEXT is required");
  std::ifstream in(file, std::ios::binary);
  if (!in) usage_error("cannot read " + file);
  o.text.assign(std::istreambuf_iterator<char>(in), {});
  if (o.text.empty()) usage_error(file + " is empty");
  if (o.arrival) {
    arrival_test(o);
    return 0;
  }
  if (o.poisson_rate > 0) {
    if (o.prompt_min < 1 || o.prompt_max < o.prompt_min || o.pareto_alpha <= 0 || o.chars_per_token <= 0)
      usage_error("need 1 <= --prompt-min <= --prompt-max, --pareto-alpha > 0 and --chars-per-token > 0");
    return poisson_test(o) == 0 ? 0 : 1;
  }
  return load_test(o) == 0 ? 0 : 1;  // a failed request (or a cell with none done) fails the run
}
