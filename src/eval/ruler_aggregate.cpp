// Multi-hop tracing (vt) and aggregation (cwe, fwe) tasks of RULER.
#include <algorithm>
#include <cmath>

#include "eval/ruler_builders.h"

namespace mp::eval::ruler::detail {

namespace {
template <class T>
void shuffle(std::vector<T>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[uniform_index(rng, i)]);
}

// A stream that depends on (seed, n) only, for choices that are redrawn for every size.
Rng size_rng(uint64_t seed, int64_t n) {
  uint64_t s = seed ^ (uint64_t(n) * 0xd1b54a32d192ed03ull);
  return Rng(splitmix64(s));
}
}  // namespace

// RULER's variable tracking with one chain of 4 hops (5 variables) in the noise haystack.
// Assignments use training/data.py's wording: "VAR B = A." (no second VAR).
Builder make_vt_builder(uint64_t seed) {
  Rng rng(seed);
  const int n_vars = 5;
  const std::string value = random_digits(rng, 5);
  std::vector<std::string> names;
  while (int(names.size()) < n_vars) {
    std::string s = random_upper(rng, 5);
    if (std::find(names.begin(), names.end(), s) == names.end()) names.push_back(s);
  }
  std::vector<double> depths(n_vars);
  for (double& d : depths) d = rng.uniform();
  std::sort(depths.begin(), depths.end());  // the chain in reading order
  std::vector<Placed> needles;
  needles.push_back({fill(kVtAssignValue, {{"name", names[0]}, {"value", value}}), depths[0]});
  for (int i = 1; i < n_vars; ++i)
    needles.push_back({fill(kVtAssignVar, {{"name", names[i]}, {"other", names[i - 1]}}), depths[i]});
  return [=](int64_t n) {
    std::vector<Needle> placed;
    const std::string context = line_context([](int64_t) { return std::string(kNoise); }, n, needles, placed);
    Draft d = assemble("", context, placed, "\n", fill(kVtQuestion, {{"value", value}}),
                       fill(kVtAnswerPrefix, {{"value", value}}));
    d.references.push_back(names);
    return d;
  };
}

// Common words extraction: 10 words appear freq_cw times each, n other words freq_ucw times,
// in a numbered list (frequencies: cwe_frequencies in ruler_tasks.cpp).
Builder make_cwe_builder(uint64_t seed, int freq_cw, int freq_ucw, const Resources& res) {
  const int n_common = 10;
  Rng rng(seed);
  std::vector<std::string> pool = res.words.all;
  shuffle(pool, rng);
  const std::vector<std::string> common(pool.begin(), pool.begin() + n_common);
  const std::vector<std::string> others(pool.begin() + n_common, pool.end());
  return [=](int64_t n) {
    std::vector<std::string> list;
    for (const std::string& w : common) list.insert(list.end(), freq_cw, w);
    for (int64_t i = 0; i < n; ++i) {
      // Past the word list, two words joined make further distinct rare words.
      const size_t m = others.size();
      const std::string w = size_t(i) < m ? others[i] : others[(i / m) % m] + others[i % m];
      list.insert(list.end(), freq_ucw, w);
    }
    Rng r = size_rng(seed, n);
    shuffle(list, r);
    std::string context;
    for (size_t i = 0; i < list.size(); ++i) {
      if (i) context += '\n';
      context += std::to_string(i + 1);
      context += ". ";
      context += list[i];
    }
    Draft d = assemble(
        "Below is a numbered list of words. In these words, some appear more often than others. "
        "Memorize the ones that appear most often.\n",
        context, {}, "\n",
        "Question: What are the 10 most common words in the above list?",
        "Answer: The top 10 words that appear most often in the list are:");
    d.references.push_back(common);
    return d;
  };
}

// Frequent words extraction: n draws of coded words with Zipf counts (alpha 2) over a
// 2000-word coded vocabulary; rank 1 is the noise word "...", ranks 2-4 are the answer.
Builder make_fwe_builder(uint64_t seed) {
  const int vocab_size = 2000;
  const double alpha = 2.0, zeta2 = M_PI * M_PI / 6.0;
  Rng rng(seed);
  std::vector<std::string> vocab;
  while (int(vocab.size()) < vocab_size) {
    std::string w = random_lower(rng, 6);
    if (std::find(vocab.begin(), vocab.end(), w) == vocab.end()) vocab.push_back(w);
  }
  vocab[0] = "...";
  return [=](int64_t n) {
    std::vector<std::string> words;
    for (int k = 0; k < vocab_size; ++k) {
      const int64_t count = int64_t(double(n) * std::pow(double(k + 1), -alpha) / zeta2);
      if (count == 0) break;
      words.insert(words.end(), count, vocab[k]);
    }
    Rng r = size_rng(seed, n);
    shuffle(words, r);
    std::string context;
    for (size_t i = 0; i < words.size(); ++i) {
      if (i) context += ' ';
      context += words[i];
    }
    Draft d = assemble(
        "Read the following coded text and track the frequency of each coded word. "
        "Find the three most frequently appeared coded words. ",
        context, {}, "\n",
        "Question: Do not provide any explanation. Please ignore the dots '....'. What are the three "
        "most frequently appeared words in the above coded text?",
        "Answer: According to the coded text above, the three most frequently appeared words are:");
    d.references.push_back({vocab[1], vocab[2], vocab[3]});
    return d;
  };
}

}  // namespace mp::eval::ruler::detail
