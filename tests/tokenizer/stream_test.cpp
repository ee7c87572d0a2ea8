// Utf8Stream: never splits a code point, replaces invalid bytes with U+FFFD.
#include <gtest/gtest.h>

#include "tiny_vocab.h"

namespace mp::tok_test {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

// Every chunk must be complete, well-formed UTF-8 on its own: checked by decoding it byte by
// byte against the lengths announced by the lead bytes.
bool complete_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

TEST(TokenizerUtf8Stream, ByteByByteNeverSplitsCodePoints) {
  const std::string text = "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9D\x84\x9E!";  // héllo € 𝄞!
  Utf8Stream st;
  std::string all;
  size_t held = 0;
  for (char c : text) {
    const std::string out = st.push(std::string(1, c));
    EXPECT_TRUE(complete_utf8(out));
    if (out.empty()) ++held;
    all += out;
  }
  all += st.flush();
  EXPECT_EQ(all, text);
  EXPECT_EQ(held, 1u + 2u + 3u);  // the non-final bytes of é, € and 𝄞
}

TEST(TokenizerUtf8Stream, ByteFallbackTokensAcrossPushes) {
  VocabSpec s = spm_base();
  s.add("\xE2\x96\x81", -1);
  const Loaded l = load(s);
  const std::string text = "\xE2\x82\xAC\xF0\x9D\x84\x9E";  // €𝄞, all byte-fallback tokens
  const auto ids = l.tok->encode(text, false);
  ASSERT_EQ(ids.size(), 1u + 7u);
  Utf8Stream st;
  std::string all;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string piece = l.tok->token_to_piece(ids[i]);
    if (i == 0) piece.erase(0, 1);  // SPM's added space
    const std::string out = st.push(piece);
    EXPECT_TRUE(complete_utf8(out)) << i;
    all += out;
  }
  all += st.flush();
  EXPECT_EQ(all, text);
}

TEST(TokenizerUtf8Stream, InvalidBytesBecomeReplacementCharacters) {
  Utf8Stream st;
  EXPECT_EQ(st.push("a\xFF" "b"), "a" + kFffd + "b");
  EXPECT_EQ(st.push("\x80"), kFffd);                    // stray continuation byte
  EXPECT_EQ(st.push("\xE2\x82"), "");                   // may still complete
  EXPECT_EQ(st.push("A"), kFffd + "A");                 // ... but did not
  EXPECT_EQ(st.push("\xC0\xAF"), kFffd + kFffd);        // overlong: never valid
  EXPECT_EQ(st.push("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate
  EXPECT_EQ(st.push("\xF0\x9F"), "");
  EXPECT_EQ(st.flush(), kFffd);                         // unfinished at the end
  EXPECT_EQ(st.flush(), "");
  EXPECT_EQ(st.push("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace mp::tok_test
