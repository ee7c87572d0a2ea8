// The public Tokenizer: special-token splitting, BOS/EOS, and detokenization around the SPM and
// BPE encoders (llama.cpp's llama_vocab::impl::tokenize / token_to_piece / detokenize).
#include "tokenizer/tokenizer.h"

#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/vocab.h"

namespace mp {

struct Tokenizer::Impl {
  tok::Vocab v;
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_gguf(const gguf::File& f) {
  auto impl = std::make_unique<Impl>();
  impl->v = tok::load_vocab(f);
  return Tokenizer(std::move(impl));
}

namespace {

struct Fragment {
  int32_t token;  // -1: plain text [offset, offset + length)
  size_t offset, length;
};

// Splits the text on special tokens, one token at a time from the longest text down (the order
// llama.cpp's tokenizer_st_partition uses, which is what makes the longest match win).
// CONTROL and UNKNOWN tokens are split out only when parse_special; USER_DEFINED always are.
std::vector<Fragment> split_special(const tok::Vocab& v, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t id : v.special_by_length) {
    const tok::TokenData& td = v.tokens[id];
    if (!parse_special && td.type != tok::kUserDefined) continue;
    const std::string_view needle = td.text;
    if (text.find(needle) == std::string_view::npos) continue;  // cheap common case
    next.clear();
    for (const Fragment& fr : frags) {
      if (fr.token >= 0) {
        next.push_back(fr);
        continue;
      }
      size_t pos = fr.offset;
      const size_t end = fr.offset + fr.length;
      while (pos < end) {
        const size_t m = text.substr(0, end).find(needle, pos);
        if (m == std::string_view::npos) break;
        if (m > pos) next.push_back({-1, pos, m - pos});
        next.push_back({id, 0, 0});
        pos = m + needle.size();
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    frags.swap(next);
  }
  return frags;
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const tok::Vocab& v = impl_->v;
  std::vector<int32_t> out;
  const std::vector<Fragment> frags = split_special(v, text, parse_special);
  if (add_special && v.add_bos) out.push_back(v.bos);
  bool prev_special = true;  // SPM: a space goes before the first text and after a special token
  std::string buf;
  for (const Fragment& fr : frags) {
    if (fr.token >= 0) {
      out.push_back(fr.token);
      prev_special = true;
      continue;
    }
    const std::string_view piece = text.substr(fr.offset, fr.length);
    if (v.model == tok::Model::kSpm) {
      buf.clear();
      if (v.add_space_prefix && prev_special) buf = "\xE2\x96\x81";
      for (char c : piece) {
        if (c == ' ') buf += "\xE2\x96\x81";
        else buf.push_back(c);
      }
      tok::spm_encode(v, buf, out);
    } else {
      tok::bpe_encode(v, piece, out);
    }
    prev_special = false;
  }
  if (add_special && v.add_eos) out.push_back(v.eos);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  const tok::Vocab& v = impl_->v;
  check(id >= 0 && id < v.n_tokens(),
        "token id " + std::to_string(id) + " out of range [0, " + std::to_string(v.n_tokens()) + ")");
  const tok::TokenData& t = v.tokens[id];
  switch (t.type) {
    case tok::kControl:
    case tok::kUnknown:
      return render_special ? t.text : std::string();
    case tok::kUserDefined:
      return t.text;
    case tok::kNormal:
      if (v.model == tok::Model::kBpe) return tok::unicode_to_bytes(t.text);
      {
        std::string s;
        s.reserve(t.text.size());
        for (size_t i = 0; i < t.text.size(); ++i) {
          if (t.text.compare(i, 3, "\xE2\x96\x81") == 0) {
            s.push_back(' ');
            i += 2;
          } else {
            s.push_back(t.text[i]);
          }
        }
        return s;
      }
    case tok::kByte: {
      // "<0xXX>"; anything else is rendered as its text.
      const std::string& s = t.text;
      if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>') {
        try {
          return std::string(1, static_cast<char>(std::stoi(s.substr(3, 2), nullptr, 16)));
        } catch (const std::exception&) {
        }
      }
      return v.model == tok::Model::kBpe ? tok::unicode_to_bytes(s) : s;
    }
    default:  // UNUSED / UNDEFINED render as nothing, as in llama.cpp
      return std::string();
  }
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  const tok::Vocab& v = impl_->v;
  std::string out;
  // The space SPM put in front of the text is taken off again; a leading BOS does not use up
  // that removal (unlike llama_detokenize with remove_special=false), so decode(encode(s)) == s.
  bool strip_space = v.add_space_prefix;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string piece = token_to_piece(ids[i], render_special);
    if (i == 0 && ids[i] == v.bos && v.bos >= 0) {
      out += piece;
      continue;
    }
    if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip_space = false;
    out += piece;
  }
  return out;
}

int32_t Tokenizer::n_vocab() const { return impl_->v.n_tokens(); }
int32_t Tokenizer::bos() const { return impl_->v.bos; }
int32_t Tokenizer::eos() const { return impl_->v.eos; }
bool Tokenizer::is_eog(int32_t id) const { return id >= 0 && impl_->v.eog.count(id) > 0; }
bool Tokenizer::add_bos() const { return impl_->v.add_bos; }
bool Tokenizer::add_eos() const { return impl_->v.add_eos; }
bool Tokenizer::add_space_prefix() const { return impl_->v.add_space_prefix; }
std::string_view Tokenizer::model() const { return impl_->v.model_name; }
std::string_view Tokenizer::pre() const { return impl_->v.pre_name; }
int32_t Tokenizer::find_token(std::string_view text) const { return impl_->v.find(text); }

const std::string& Tokenizer::token_text(int32_t id) const {
  const tok::Vocab& v = impl_->v;
  check(id >= 0 && id < v.n_tokens(),
        "token id " + std::to_string(id) + " out of range [0, " + std::to_string(v.n_tokens()) + ")");
  return v.tokens[id].text;
}

}  // namespace mp
