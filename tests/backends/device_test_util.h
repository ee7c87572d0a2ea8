// Shared helper of the CUDA backend tests: llama.cpp's test-backend-ops error (random inputs:
// testutil's normal_floats).
#pragma once
#include <cstddef>
#include <vector>

#include "testutil/testutil.h"

namespace mp::cuda::test {

// Normalised mean squared error, as llama.cpp's test-backend-ops: sum (a-b)^2 / sum b^2.
inline double nmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return den > 0 ? num / den : num;
}

}  // namespace mp::cuda::test
