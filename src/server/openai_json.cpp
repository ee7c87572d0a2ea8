#include "server/openai_json.h"

#include "tokenizer/tokenizer.h"

namespace mp::server {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json error_json(const ApiError& e) {
  json err = {{"message", e.what()}, {"type", e.type}};
  err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  err["code"] = e.code.empty() ? json(nullptr) : json(e.code);
  return json{{"error", err}};
}

json usage_json(const Usage& u) {
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
              // extension: what the attention policy cost and how long each phase took
              {"magicpig",
               {{"attn", u.attention},
                {"keys_read_fraction", u.keys_read_fraction},
                {"prompt_ms", u.prompt_ms},
                {"decode_ms", u.decode_ms},
                {"decode_tokens_per_second",
                 u.decode_ms > 0 && u.completion_tokens > 1 ? double(u.completion_tokens - 1) * 1e3 / u.decode_ms : 0.0}}}};
}

namespace {
json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}
}  // namespace

json logprobs_json(const std::vector<TokenLogprob>& tokens, const Tokenizer& tok, bool chat, size_t text_offset) {
  if (chat) {
    json content = json::array();
    for (const TokenLogprob& t : tokens) {
      const std::string piece = tok.token_to_piece(t.token);
      json top = json::array();
      for (const auto& [id, lp] : t.top) {
        const std::string p = tok.token_to_piece(id);
        top.push_back({{"token", p}, {"logprob", lp}, {"bytes", bytes_of(p)}});
      }
      content.push_back({{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}});
    }
    return json{{"content", content}};
  }
  json toks = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  for (const TokenLogprob& t : tokens) {
    const std::string piece = tok.token_to_piece(t.token);
    toks.push_back(piece);
    lps.push_back(t.logprob);
    json top = json::object();
    for (const auto& [id, lp] : t.top) top[tok.token_to_piece(id)] = lp;
    tops.push_back(top);
    offs.push_back(text_offset);
    text_offset += piece.size();
  }
  return json{{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

namespace {
json envelope(const ResponseMeta& m, bool chunk) {
  return json{{"id", m.id},
              {"object", m.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
              {"created", m.created},
              {"model", m.model},
              {"system_fingerprint", "magicpig"}};
}
}  // namespace

json full_response(const ResponseMeta& m, const std::string& text, const std::string& finish_reason, const Usage& usage,
                   const json& logprobs) {
  json r = envelope(m, false);
  json choice = {{"index", 0}, {"finish_reason", finish_reason}, {"logprobs", logprobs}};
  if (m.chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  r["choices"] = json::array({choice});
  r["usage"] = usage_json(usage);
  return r;
}

json stream_chunk(const ResponseMeta& m, const std::string& text, const json& logprobs, const std::string& finish_reason,
                  bool first) {
  json r = envelope(m, true);
  json choice = {{"index", 0}, {"logprobs", logprobs}};
  choice["finish_reason"] = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  if (m.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || finish_reason.empty()) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  r["choices"] = json::array({choice});
  return r;
}

json usage_chunk(const ResponseMeta& m, const Usage& usage) {
  json r = envelope(m, true);
  r["choices"] = json::array();
  r["usage"] = usage_json(usage);
  return r;
}

}  // namespace mp::server
