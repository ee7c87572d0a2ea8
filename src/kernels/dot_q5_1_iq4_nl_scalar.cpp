// Scalar twins of the Q5_1 and IQ4_NL dot kernels: the integer block sums the SIMD versions form.
#include "kernels/block_dot_scalar.h"
#include "kernels/dot_quant_isa.h"

namespace mp::kernels::detail {

// d*x.d*(q.x) + m*(x.d*sum x) per block, q unsigned 5-bit (as Q4_1 with Q5_0's fifth bit).
float dot_q5_1_scalar(const BlockQ5_1* w, const ActQ8* x, int64_t nb) {
  return scalar_dot::dot_blocks32(w, x, nb, scalar_dot::five_bits<BlockQ5_1>);
}

// d*x.d*(v.x) per block with v the codebook values (int8) of the nibbles.
float dot_iq4_nl_scalar(const BlockIQ4_NL* w, const ActQ8* x, int64_t nb) {
  return scalar_dot::dot_blocks32(w, x, nb, [](const BlockIQ4_NL& b, int j) {
    const scalar_dot::QuantPair n = scalar_dot::nibbles(b, j);
    return scalar_dot::QuantPair{kIq4nlValues[n.lo], kIq4nlValues[n.hi]};
  });
}

}  // namespace mp::kernels::detail
