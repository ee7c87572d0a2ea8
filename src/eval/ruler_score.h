// RULER's metrics (scripts/eval/synthetic/constants.py): a prediction is cleaned like
// postprocess_pred, then each reference string is searched in it case-insensitively.
#pragma once
#include <string>
#include <vector>

namespace mp::eval::ruler {

// Control characters become newlines, then surrounding whitespace is trimmed.
std::string postprocess_prediction(const std::string& prediction);
// Fraction of references contained in the prediction, x100 (every RULER task scored here).
double string_match_all(const std::string& prediction, const std::vector<std::string>& references);
// 100 if any reference is contained, else 0 (RULER's QA metric; no QA task here yet).
double string_match_part(const std::string& prediction, const std::vector<std::string>& references);
// Score of one sample: string_match_all per turn (the answer to each query is looked for in
// that turn's prediction), averaged over turns. Sizes must match.
double score_turns(const std::vector<std::string>& predictions, const std::vector<std::vector<std::string>>& references);

}  // namespace mp::eval::ruler
