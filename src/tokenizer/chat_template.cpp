// Chat formats for Llama 3 and Llama 2 instruct models. The Jinja template in the GGUF is only
// inspected to pick the format, never executed.
//
// BOS: the result is meant for encode(text, add_special=true, parse_special=true). The template's
// own leading BOS (<|begin_of_text|> / <s>) is therefore written only when the tokenizer does not
// add one itself, so the prompt starts with exactly one BOS either way.
#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace mp {
namespace {

std::string trim(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t a = s.find_first_not_of(ws);
  if (a == std::string::npos) return std::string();
  const size_t b = s.find_last_not_of(ws);
  return s.substr(a, b - a + 1);
}

std::string llama3(const Tokenizer& tok, const std::vector<ChatMessage>& messages, bool add_assistant_prefix) {
  for (const char* t : {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"})
    check(tok.find_token(t) >= 0, std::string("chat template: Llama 3 format needs the token ") + t +
                                      ", which the vocabulary lacks");
  std::string out;
  if (!tok.add_bos() && tok.bos() >= 0) out += tok.token_text(tok.bos());
  for (const ChatMessage& m : messages) {
    check(!m.role.empty(), "chat template: message with an empty role");
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
  }
  if (add_assistant_prefix) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Meta's Llama 2 chat format (the Hugging Face template): "<s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n
// {user} [/INST] {assistant} </s><s>[INST] {user} [/INST]". The last user turn already opens the
// assistant's reply, so add_assistant_prefix changes nothing here.
std::string llama2(const Tokenizer& tok, const std::vector<ChatMessage>& messages) {
  check(tok.bos() >= 0 && tok.eos() >= 0, "chat template: Llama 2 format needs BOS and EOS tokens");
  const std::string bos = tok.token_text(tok.bos()), eos = tok.token_text(tok.eos());
  std::string out;
  size_t first = 0;
  std::string system;
  if (!messages.empty() && messages[0].role == "system") {
    system = messages[0].content;
    first = 1;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool expect_user = (i - first) % 2 == 0;
    check(m.role == (expect_user ? "user" : "assistant"),
          "chat template: Llama 2 format needs an optional first 'system' message, then alternating "
          "'user'/'assistant' messages starting with 'user'; message " + std::to_string(i) + " has role '" +
              m.role + "'");
    if (expect_user) {
      std::string content = m.content;
      if (i == first && first == 1) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
      if (i > first || !tok.add_bos()) out += bos;
      out += "[INST] " + trim(content) + " [/INST]";
    } else {
      out += ' ';  // appended piecewise: "a" + std::string trips a GCC 12 -Wrestrict false positive
      out += trim(m.content);
      out += ' ';
      out += eos;
    }
  }
  check(messages.size() > first, "chat template: Llama 2 format needs at least one 'user' message");
  return out;
}

}  // namespace

std::string apply_chat_template(const gguf::File& f, const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                                bool add_assistant_prefix) {
  const std::string tmpl = f.get_string("tokenizer.chat_template", "");
  if (tmpl.find("<|start_header_id|>") != std::string::npos) return llama3(tok, messages, add_assistant_prefix);
  if (tmpl.find("[INST]") != std::string::npos) return llama2(tok, messages);
  if (tok.find_token("<|start_header_id|>") >= 0) return llama3(tok, messages, add_assistant_prefix);
  if (tok.model() == "llama") return llama2(tok, messages);
  throw Error("chat template: no supported chat format for this model (tokenizer.chat_template names neither "
              "Llama 3 <|start_header_id|> nor Llama 2 [INST], and the vocabulary has no <|start_header_id|>)");
}

}  // namespace mp
