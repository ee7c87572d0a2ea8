// Internal to src/tokenizer: UTF-8 helpers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mp::tok {

// Length of the sequence a lead byte announces, by its high nibble (llama.cpp's
// unicode_len_utf8): continuation and invalid bytes count as 1.
inline size_t utf8_len_from_lead(char c) {
  static constexpr size_t kLookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLookup[static_cast<uint8_t>(c) >> 4];
}

// Appends the UTF-8 encoding of cpt (which must be <= 0x10FFFF).
void append_utf8(std::string& out, uint32_t cpt);

// Decodes like llama.cpp's unicode_cpts_from_utf8: structurally well-formed sequences are decoded
// without overlong/surrogate checks; any other byte becomes U+FFFD and decoding resumes at the
// next byte. Code points above U+10FFFF are also replaced by U+FFFD.
std::vector<uint32_t> decode_utf8_lenient(std::string_view s);

// Strict validation of the sequence starting at s[pos] (Unicode Table 3-7).
enum class Utf8Status { kValid, kIncomplete, kInvalid };
struct Utf8Step {
  Utf8Status status;
  size_t len;  // kValid: sequence length; kInvalid: length of the maximal invalid subpart (>= 1)
};
Utf8Step utf8_step(std::string_view s, size_t pos);

}  // namespace mp::tok
