// RULER prompts in a chat template: context and question as the user turn, the answer prefix
// after the assistant header, as RULER prompts instruct models.
#include <algorithm>

#include "common/error.h"
#include "eval/ruler_builders.h"

namespace mp::eval::ruler {

namespace detail {

Draft in_chat_template(Draft d, const ChatWrap& chat) {
  const char* ws = " \t\n\r\f\v";
  const std::string head = d.prompt.substr(0, d.answer_begin);
  const size_t first = head.find_first_not_of(ws);
  check(first != std::string::npos, "RULER chat prompt: the user turn (context and question) is empty");
  const size_t last = head.find_last_not_of(ws);
  const std::string user = head.substr(first, last - first + 1);
  std::string text = chat(user);
  // The template writes the user turn last, just before the assistant header; Llama 3 and
  // Gemma trim contents, which `user` already is, so it appears verbatim.
  const size_t at = text.rfind(user);
  check(at != std::string::npos, "RULER chat prompt: the chat template did not keep the user turn verbatim");
  auto moved = [&](size_t offset) { return std::min(std::max(offset, first), last + 1) - first + at; };
  for (Needle& nd : d.needles) nd.offset = moved(nd.offset);
  d.haystack_begin = moved(d.haystack_begin);
  d.haystack_end = moved(d.haystack_end);
  const std::string answer = d.prompt.substr(d.answer_begin);
  // Formats whose assistant turn opens without a line break (Llama 2's "[/INST]") get a space.
  if (!answer.empty() && !text.empty() && std::string(ws).find(text.back()) == std::string::npos) text += ' ';
  d.answer_begin = text.size();
  d.prompt = text + answer;
  return d;
}

}  // namespace detail

std::string prompt_frame(const Sample& s) {
  return s.prompt.substr(0, s.haystack_begin) + "[haystack: " + std::to_string(s.haystack_end - s.haystack_begin) +
         " bytes]" + s.prompt.substr(s.haystack_end);
}

}  // namespace mp::eval::ruler
