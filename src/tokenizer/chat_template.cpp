// Chat formats for Llama 3, Llama 2, ChatML and Gemma instruct models. The Jinja template in the GGUF is
// only inspected (to pick the format, and for ChatML its default system prompt), never executed.
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

// The system prompt a ChatML template writes when the conversation has none: the first string
// literal that reads "<|im_start|>system\n{prompt}<|im_end|>" (optionally + "\n"), e.g. Qwen2.5's
// 'You are Qwen, created by Alibaba Cloud. ...' and SmolLM2's 'You are a helpful AI assistant
// named SmolLM, ...'. Both templates write it exactly when the first message is not 'system'.
// "" when the template has no such literal.
std::string chatml_default_system(const std::string& tmpl) {
  const std::string open = "<|im_start|>system", close = "<|im_end|>";
  for (size_t at = tmpl.find(open); at != std::string::npos; at = tmpl.find(open, at + 1)) {
    if (at == 0 || (tmpl[at - 1] != '\'' && tmpl[at - 1] != '"')) continue;
    const char quote = tmpl[at - 1];
    std::string lit;  // the literal with Jinja's escapes undone
    size_t i = at;
    for (; i < tmpl.size() && tmpl[i] != quote; ++i) {
      if (tmpl[i] != '\\' || i + 1 == tmpl.size()) {
        lit += tmpl[i];
        continue;
      }
      const char e = tmpl[++i];
      lit += e == 'n' ? '\n' : e == 't' ? '\t' : e;
    }
    if (i == tmpl.size()) break;  // unterminated: not a literal
    if (lit.size() > close.size() && lit.back() == '\n') lit.pop_back();
    const size_t head = open.size() + 1;
    if (lit.size() <= head + close.size() || lit[open.size()] != '\n' ||
        lit.compare(lit.size() - close.size(), close.size(), close) != 0)
      continue;
    return lit.substr(head, lit.size() - head - close.size());
  }
  return std::string();
}

// ChatML (Qwen2, SmolLM2, ...): "<|im_start|>{role}\n{content}<|im_end|>\n" per message, plus
// "<|im_start|>assistant\n" with add_assistant_prefix. Contents are used as given (neither these
// templates nor llama.cpp trim them) and no BOS is written: ChatML has none.
std::string chatml(const std::string& tmpl, const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                   bool add_assistant_prefix) {
  for (const char* t : {"<|im_start|>", "<|im_end|>"})
    check(tok.find_token(t) >= 0, std::string("chat template: ChatML format needs the token ") + t +
                                      ", which the vocabulary lacks");
  std::string out;
  auto turn = [&](const std::string& role, const std::string& content) {
    check(!role.empty(), "chat template: message with an empty role");
    out += "<|im_start|>" + role + "\n" + content + "<|im_end|>\n";
  };
  // What the template's Jinja renders (as Hugging Face and llama.cpp's default --jinja path do);
  // llama.cpp's built-in "chatml" formatter (llama_chat_apply_template) leaves it out.
  if (!messages.empty() && messages[0].role != "system") {
    const std::string system = chatml_default_system(tmpl);
    if (!system.empty()) turn("system", system);
  }
  for (const ChatMessage& m : messages) turn(m.role, m.content);
  if (add_assistant_prefix) out += "<|im_start|>assistant\n";
  return out;
}

// Gemma (llama.cpp's LLM_CHAT_TEMPLATE_GEMMA, Google's template): "<start_of_turn>{role}\n
// {content}<end_of_turn>\n" per message, the assistant's role named "model", contents trimmed.
// Gemma has no system turn: system messages are joined and written at the top of the next user
// turn, followed by a blank line. The template opens with <bos>, left to the tokenizer when it
// adds one (Gemma's does).
std::string gemma(const Tokenizer& tok, const std::vector<ChatMessage>& messages, bool add_assistant_prefix) {
  for (const char* t : {"<start_of_turn>", "<end_of_turn>"})
    check(tok.find_token(t) >= 0, std::string("chat template: Gemma format needs the token ") + t +
                                      ", which the vocabulary lacks");
  std::string out;
  if (!tok.add_bos() && tok.bos() >= 0) out += tok.token_text(tok.bos());
  std::string system;
  for (const ChatMessage& m : messages) {
    check(!m.role.empty(), "chat template: message with an empty role");
    if (m.role == "system") {
      system += trim(m.content);
      continue;
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    out += "<start_of_turn>" + role + "\n";
    if (!system.empty() && role != "model") {
      out += system + "\n\n";
      system.clear();
    }
    out += trim(m.content) + "<end_of_turn>\n";
  }
  if (add_assistant_prefix) out += "<start_of_turn>model\n";
  return out;
}

}  // namespace

std::string apply_chat_template(const gguf::File& f, const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                                bool add_assistant_prefix) {
  const std::string tmpl = f.get_string("tokenizer.chat_template", "");
  auto has = [&](const char* marker) { return tmpl.find(marker) != std::string::npos; };
  // llama.cpp's llm_chat_detect_template order: <|im_start|> is checked first, and with
  // <|im_sep|> (Phi-4) or <end_of_utterance> (SmolVLM) it is not ChatML.
  if (has("<|im_start|>")) {
    check(!has("<|im_sep|>") && !has("<end_of_utterance>"),
          "chat template: unsupported <|im_start|> variant (Phi-4 <|im_sep|> or SmolVLM <end_of_utterance>)");
    return chatml(tmpl, tok, messages, add_assistant_prefix);
  }
  if (has("<|start_header_id|>")) return llama3(tok, messages, add_assistant_prefix);
  if (has("<start_of_turn>")) return gemma(tok, messages, add_assistant_prefix);
  if (has("[INST]")) return llama2(tok, messages);
  if (tmpl.empty() && tok.find_token("<|im_start|>") >= 0 && tok.find_token("<|im_end|>") >= 0)
    return chatml(tmpl, tok, messages, add_assistant_prefix);
  // Gemma 3 GGUFs converted without the template (the 270M one) still carry its turn markers
  if (tok.find_token("<start_of_turn>") >= 0 && tok.find_token("<end_of_turn>") >= 0)
    return gemma(tok, messages, add_assistant_prefix);
  if (tok.find_token("<|start_header_id|>") >= 0) return llama3(tok, messages, add_assistant_prefix);
  if (tok.model() == "llama") return llama2(tok, messages);
  throw Error("chat template: no supported chat format for this model (tokenizer.chat_template names neither "
              "ChatML <|im_start|>, Llama 3 <|start_header_id|>, Gemma <start_of_turn> nor Llama 2 [INST], and the "
              "vocabulary has none of <|im_start|>, <start_of_turn>, <|start_header_id|>)");
}

}  // namespace mp
