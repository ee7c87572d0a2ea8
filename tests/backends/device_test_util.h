// Shared helpers of the CUDA backend tests: random inputs and llama.cpp's test-backend-ops error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace mp::cuda::test {

inline std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

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
