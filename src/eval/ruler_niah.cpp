// Needle-in-a-haystack tasks (RULER's niah_*) and the haystack layouts shared by all tasks.
#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "eval/ruler_builders.h"

namespace mp::eval::ruler::detail {

std::string fill(std::string tmpl, const std::vector<std::pair<std::string, std::string>>& vars) {
  for (const auto& [name, value] : vars) {
    const std::string pat = "{" + name + "}";
    for (size_t p = tmpl.find(pat); p != std::string::npos; p = tmpl.find(pat, p + value.size()))
      tmpl.replace(p, pat.size(), value);
  }
  return tmpl;
}

namespace {
bool starts_space(const std::string& s) { return !s.empty() && (s[0] == ' ' || s[0] == '\n'); }
bool ends_space(const std::string& s) { return !s.empty() && (s.back() == ' ' || s.back() == '\n'); }
}  // namespace

std::string natural_context(const NaturalText& text, int64_t start, int64_t n, const std::vector<Placed>& needles,
                            std::vector<Needle>& placed) {
  const int64_t N = int64_t(text.pieces.size());
  auto piece = [&](int64_t i) -> std::string {
    const int64_t k = (start + i) % N;
    if (i > 0 && k == 0) return "\n\n" + text.pieces[0];  // the text starts over
    return i == 0 ? text.pieces[k].substr(text.pieces[k].find_first_not_of(" \n\t\r")) : text.pieces[k];
  };
  // Insertion index of each needle: after a sentence end near its depth.
  std::vector<std::pair<int64_t, size_t>> at;  // (piece index, needle)
  for (size_t j = 0; j < needles.size(); ++j) {
    const int64_t p = std::min<int64_t>(n, std::llround(needles[j].depth * double(n)));
    int64_t q = p;
    while (q < n && q - p < 40 && !(q > 0 && text.ends_sentence[(start + q - 1) % N])) ++q;
    if (q >= n || q - p >= 40) q = p;  // no sentence end nearby: at the depth itself
    at.emplace_back(q, j);
  }
  std::stable_sort(at.begin(), at.end());
  std::string out;
  size_t next = 0;
  for (int64_t i = 0; i <= n; ++i) {
    for (; next < at.size() && at[next].first == i; ++next) {
      if (!out.empty() && !ends_space(out)) out += ' ';
      placed.push_back({needles[at[next].second].text, needles[at[next].second].depth, out.size()});
      out += needles[at[next].second].text;
    }
    if (i == n) break;
    std::string p = piece(i);
    if (!out.empty() && !ends_space(out) && !starts_space(p)) out += ' ';
    if (out.empty() && starts_space(p)) p = p.substr(p.find_first_not_of(" \n\t\r"));
    out += p;
  }
  return out;
}

std::string line_context(const std::function<std::string(int64_t)>& line, int64_t n,
                         const std::vector<Placed>& needles, std::vector<Needle>& placed) {
  std::vector<std::pair<int64_t, size_t>> at;
  for (size_t j = 0; j < needles.size(); ++j)
    at.emplace_back(std::min<int64_t>(n, int64_t(std::floor(needles[j].depth * double(n + 1)))), j);
  std::stable_sort(at.begin(), at.end());
  std::string out;
  size_t next = 0;
  for (int64_t i = 0; i <= n; ++i) {
    for (; next < at.size() && at[next].first == i; ++next) {
      if (!out.empty()) out += '\n';
      placed.push_back({needles[at[next].second].text, needles[at[next].second].depth, out.size()});
      out += needles[at[next].second].text;
    }
    if (i == n) break;
    if (!out.empty()) out += '\n';
    out += line(i);
  }
  return out;
}

Draft assemble(const std::string& prefix, const std::string& context, std::vector<Needle> needles,
               const std::string& sep, const std::string& question, const std::string& answer_prefix) {
  Draft d;
  d.prompt = prefix + context + sep + question;
  if (!question.empty() && !answer_prefix.empty()) d.prompt += ' ';
  d.answer_begin = d.prompt.size();
  d.prompt += answer_prefix;
  d.haystack_begin = prefix.size();
  d.haystack_end = prefix.size() + context.size();
  for (Needle& nd : needles) nd.offset += prefix.size();
  d.needles = std::move(needles);
  return d;
}

namespace {

enum class Hay { Noise, Natural, Needles };

struct NiahConfig {
  Hay hay;
  bool uuid_keys, uuid_values;
  int n_keys;    // needles with distinct keys (the first is asked unless multiquery)
  int n_values;  // values per asked key (multivalue)
  bool all_keys_asked;
};

NiahConfig niah_config(const std::string& task) {
  if (task == "niah_single_1") return {Hay::Noise, false, false, 1, 1, false};
  if (task == "niah_single_2") return {Hay::Natural, false, false, 1, 1, false};
  if (task == "niah_single_3") return {Hay::Natural, false, true, 1, 1, false};
  if (task == "niah_multikey_1") return {Hay::Natural, false, false, 4, 1, false};
  if (task == "niah_multikey_2") return {Hay::Needles, false, false, 1, 1, false};
  if (task == "niah_multikey_3") return {Hay::Needles, true, true, 1, 1, false};
  if (task == "niah_multivalue") return {Hay::Natural, false, false, 1, 4, false};
  if (task == "niah_multiquery") return {Hay::Natural, false, false, 4, 1, true};
  throw Error("not a needle task: " + task);
}

std::string value_of(Rng& rng, bool uuid) { return uuid ? random_uuid(rng) : random_digits(rng, 7); }

}  // namespace

Builder make_niah_builder(const std::string& task, uint64_t seed, const Resources& res, double asked_depth) {
  const NiahConfig c = niah_config(task);
  Rng rng(seed);
  const std::vector<std::string>& held = res.words.heldout;
  std::vector<std::string> keys;
  while (int(keys.size()) < c.n_keys) {
    std::string k = c.uuid_keys ? random_uuid(rng) : held[uniform_index(rng, held.size())];
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  std::vector<std::vector<std::string>> values(keys.size());
  std::vector<Placed> needles;
  const std::string vtype = c.uuid_values ? "uuids" : "numbers";
  for (size_t i = 0; i < keys.size(); ++i)
    for (int v = 0; v < (i == 0 ? c.n_values : 1); ++v) {
      values[i].push_back(value_of(rng, c.uuid_values));
      needles.push_back({fill(kNeedle, {{"type", vtype}, {"key", keys[i]}, {"value", values[i].back()}}), rng.uniform()});
    }
  if (asked_depth >= 0) needles[0].depth = asked_depth;  // keys[0] is the asked key
  std::vector<size_t> order(keys.size());  // question order of multiquery
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[uniform_index(rng, i)]);
  // Natural haystacks start at a sentence start chosen by the seed.
  std::vector<int64_t> starts = {0};
  for (size_t i = 1; i < res.text.pieces.size(); ++i)
    if (res.text.ends_sentence[i - 1]) starts.push_back(int64_t(i));
  const int64_t start = starts[uniform_index(rng, starts.size())];
  const uint64_t line_seed = rng.next();

  return [=, &res](int64_t n) {
    std::vector<Needle> placed;
    std::string context, sep = "\n";
    if (c.hay == Hay::Natural) {
      context = natural_context(res.text, start, n, needles, placed);
      sep = " ";
    } else if (c.hay == Hay::Noise) {
      context = line_context([](int64_t) { return std::string(kNoise); }, n, needles, placed);
    } else {
      // Distractor needles: line i depends only on (seed, i), never with an asked key.
      context = line_context(
          [&](int64_t i) {
            uint64_t s = line_seed ^ (uint64_t(i) * 0x9e3779b97f4a7c15ull);
            Rng r(splitmix64(s));
            std::string k;
            do {
              k = c.uuid_keys ? random_uuid(r) : res.words.all[uniform_index(r, res.words.all.size())];
            } while (std::find(keys.begin(), keys.end(), k) != keys.end());
            return fill(kNeedle, {{"type", vtype}, {"key", k}, {"value", value_of(r, c.uuid_values)}});
          },
          n, needles, placed);
    }
    const std::string type1 = c.uuid_values ? "uuid" : "number";
    Draft d;
    if (c.all_keys_asked) {
      d = assemble("", context, placed, sep, "", fill(kQueryShort, {{"key", keys[order[0]]}}));
      for (size_t t = 0; t < order.size(); ++t) {
        if (t > 0) d.followups.push_back(fill(kQueryShort, {{"key", keys[order[t]]}}));
        d.references.push_back({values[order[t]][0]});
      }
    } else if (c.n_values > 1) {
      d = assemble("", context, placed, sep, fill(kMultiValueQuestion, {{"key", keys[0]}}),
                   fill(kMultiValueAnswerPrefix, {{"key", keys[0]}}));
      d.references.push_back(values[0]);
    } else {
      d = assemble("", context, placed, sep, fill(kQuestion, {{"type1", type1}, {"key", keys[0]}}),
                   fill(kAnswerPrefix, {{"type1", type1}, {"key", keys[0]}}));
      d.references.push_back(values[0]);
    }
    return d;
  };
}

}  // namespace mp::eval::ruler::detail
