// The error estimate of magicpig-adaptive: a delta-method variance of the self-normalised
// importance-sampling estimator, computed from the sample itself (docs/attention.md
// "magicpig-adaptive").
//
// The sampled part estimates N = sum_i e^{s_i} v_i and D = sum_i e^{s_i} over the offloaded keys
// by N^ = sum_{i in S} e^{s_i} v_i / u_i and D^ likewise, where key i is in the candidate set S
// with probability u_i (its collision probability). The exact part (sinks, local window, recent
// tokens) adds known terms to both. The output is o^ = N^ / D^. Treating inclusions as
// independent (Poisson sampling), the delta method gives
//   Var(o^) ~= sum_i (1 - u_i) / u_i * e^{2 s_i} |v_i - o|^2 / D^2     (trace over the d outputs)
// and its Horvitz-Thompson estimate from the sample is
//   V^ = sum_{i in S} (1 - u_i) / u_i^2 * e^{2 s_i} |v_i - o^|^2 / D^2.
// With p_i = e^{s_i - m} / u_i (the sampled softmax weights) the summand is a_i |v_i - o^|^2 with
// a_i = p_i^2 (1 - u_i), expanded as A1 - 2 o^.B + |o^|^2 A0 with A0 = sum a_i,
// A1 = sum a_i |v_i|^2, B = sum a_i v_i, so only one more weighted walk over the value rows
// (for B) is needed.
#pragma once
#include <cstdint>

#include "attention/kernels/partial_softmax.h"

namespace mp::attn::adaptive {

// a[i] = p[i]^2 * (1 - u_i) with u_i = clamp(c[i] - floor, 0, 1), where c[i] is the sampling
// probability plus the correction's floor (the weight the estimator used is 1 / c[i]).
// Returns A0 = sum a[i] and *a1 = sum a[i] * vnorm2[i] (double sums).
double variance_weights(const float* p, const float* c, const float* vnorm2, int64_t n, double floor, float* a,
                        double* a1);

// sqrt(V^) / |o^|: the estimated standard deviation of the relative L2 error of o^ ([d]).
// sampled = the sampled part's (m, l) (a, A0, A1, b are in its e^{m} units: b = sum a_i v_i
// [d]); merged = exact part merged with the sampled part (o^ = its acc / l). 0 when nothing
// was sampled; +inf when o^ = 0 but the variance is not.
double relative_sd(const PartialSoftmax& sampled, const PartialSoftmax& merged, const float* o, const float* b,
                   double a0, double a1, int d);

// P(|e| > eps) for an error e whose relative standard deviation is sigma, on the normal tail
// the bound uses: erfc(eps / (sigma sqrt 2)) = P(|Z| > eps / sigma). By Szekely-Bakirov (2003)
// this is an upper bound for the norm of a Gaussian vector of total variance sigma^2 while it
// is <= 0.215. 0 when sigma = 0 (exact); 1 when sigma is NaN or infinite.
double exceed_probability(double eps, double sigma);

}  // namespace mp::attn::adaptive
