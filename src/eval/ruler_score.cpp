#include "eval/ruler_score.h"

#include <algorithm>

#include "common/error.h"

namespace mp::eval::ruler {

namespace {
std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return s;
}
bool contains_ci(const std::string& hay, const std::string& needle) {
  return lower(hay).find(lower(needle)) != std::string::npos;
}
}  // namespace

std::string postprocess_prediction(const std::string& prediction) {
  std::string s = prediction;
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20) c = '\n';
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

double string_match_all(const std::string& prediction, const std::vector<std::string>& references) {
  check(!references.empty(), "string_match_all: no reference strings");
  const std::string p = postprocess_prediction(prediction);
  double hit = 0;
  for (const std::string& r : references) hit += contains_ci(p, r) ? 1.0 : 0.0;
  return 100.0 * hit / double(references.size());
}

double string_match_part(const std::string& prediction, const std::vector<std::string>& references) {
  check(!references.empty(), "string_match_part: no reference strings");
  const std::string p = postprocess_prediction(prediction);
  const bool any = std::any_of(references.begin(), references.end(), [&](const std::string& r) { return contains_ci(p, r); });
  return any ? 100.0 : 0.0;
}

double score_turns(const std::vector<std::string>& predictions, const std::vector<std::vector<std::string>>& references) {
  check(!references.empty() && predictions.size() == references.size(),
        "score_turns: " + std::to_string(predictions.size()) + " predictions for " + std::to_string(references.size()) +
            " turns");
  double sum = 0;
  for (size_t t = 0; t < references.size(); ++t) sum += string_match_all(predictions[t], references[t]);
  return sum / double(references.size());
}

}  // namespace mp::eval::ruler
