// RULER prompts in a chat template: the user turn holds context and question, the assistant
// turn opens with the answer prefix; needles, haystack range and the token budget follow the
// template; the runner records it and a folder keeps one prompt format.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "common/error.h"
#include "eval/ruler_runner.h"
#include "eval/ruler_tasks.h"
#include "gguf/gguf.h"
#include "test_ruler_util.h"

namespace mp::eval::ruler {
namespace {

// SmolLM2-135M-Instruct's file (scripts/fetch_models.sh), or "" when absent.
std::string smollm2_path() {
  const std::filesystem::path p = test::peer_cache() / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
  return std::filesystem::exists(p) ? p.string() : "";
}

// SmolLM2's chat template as Jinja renders it for one user message (add_generation_prompt),
// written out here from the model's template, not produced by the code under test.
const std::string kSmolSystem =
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";
const std::string kSmolUser = "<|im_start|>user\n";
const std::string kSmolAssistant = "<|im_end|>\n<|im_start|>assistant\n";

// The key of a "One of the special magic numbers for KEY is: VALUE." needle.
std::string needle_key(const std::string& needle) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(needle, m, std::regex("^One of the special magic numbers for (.+) is: [0-9]+\\.$")))
      << needle;
  return m.size() > 1 ? m[1].str() : "";
}

// The haystack of s with its needles cut out and runs of whitespace made one space.
std::string bare_haystack(const Sample& s) {
  std::string h = s.prompt.substr(0, s.haystack_end);
  for (auto it = s.needles.rbegin(); it != s.needles.rend(); ++it) h.erase(it->offset, it->text.size());
  h = h.substr(s.haystack_begin);
  return std::regex_replace(h, std::regex("\\s+"), " ");
}

// A tiny random model's byte-level placeholder tokenizer: no chat format of its own, so the
// tests below wrap prompts in a made-up one.
const Tokenizer& bytes_tokenizer() {
  static test::TempDir dir;
  static const std::unique_ptr<Model> model = test::ruler_model(dir, "", 2048);
  return model->tokenizer;
}

TEST(RulerChat, PlainWrapKeepsNeedlesHaystackAndAnswerPrefixInPlace) {
  const Tokenizer& tok = bytes_tokenizer();
  const std::string open = "<U>", close = "</U>\n<A>\n";
  const ChatWrap wrap = [&](const std::string& user) { return open + user + close; };
  for (const char* task : {"niah_single_2", "niah_multikey_1", "niah_multiquery", "vt", "cwe", "fwe"}) {
    // The same answer room in both (a chat niah prompt gets RULER's larger one by default).
    const int room = task_spec(task).max_new;
    const Sample c = generate_sample(task, 1200, 0, 3, tok, test::ruler_resources(), room, 0, wrap);
    const Sample b = generate_sample(task, 1200, 0, 3, tok, test::ruler_resources());
    EXPECT_TRUE(c.chat);
    EXPECT_FALSE(b.chat);
    EXPECT_LE(c.budget_tokens(), 1200) << task;
    // The assistant turn opens with the bare prompt's answer prefix, which ends both prompts.
    ASSERT_GE(c.answer_begin, open.size() + close.size()) << task;
    EXPECT_EQ(c.prompt.substr(c.answer_begin), b.prompt.substr(b.answer_begin)) << task;
    EXPECT_FALSE(c.prompt.substr(c.answer_begin).empty()) << task;
    EXPECT_EQ(c.prompt.substr(0, open.size()), open) << task;
    EXPECT_EQ(c.prompt.substr(c.answer_begin - close.size(), close.size()), close) << task;
    // The user turn: the bare text before the haystack, the haystack, then the separator and
    // question with trailing whitespace trimmed.
    EXPECT_EQ(c.prompt.substr(open.size(), c.haystack_begin - open.size()), b.prompt.substr(0, b.haystack_begin))
        << task;
    const std::string b_after = b.prompt.substr(b.haystack_end, b.answer_begin - b.haystack_end);
    EXPECT_EQ(c.prompt.substr(c.haystack_end, c.answer_begin - close.size() - c.haystack_end),
              std::regex_replace(b_after, std::regex("\\s+$"), ""))
        << task;
    for (const Needle& nd : c.needles) EXPECT_EQ(c.prompt.compare(nd.offset, nd.text.size(), nd.text), 0) << task;
    EXPECT_EQ(c.needles.size(), b.needles.size()) << task;
    EXPECT_EQ(c.references, b.references) << task;
    EXPECT_EQ(c.followups, b.followups) << task;
    // The template's text came out of the haystack budget: no more haystack than the bare prompt.
    EXPECT_LE(c.haystack_units, b.haystack_units) << task;
    EXPECT_GT(c.haystack_units, b.haystack_units / 2) << task;
  }
  // An assistant turn that opens without a line break (Llama 2's "[/INST]") gets one space.
  const ChatWrap inline_open = [](const std::string& user) { return "[U] " + user + " [/U]"; };
  const Sample c = generate_sample("niah_single_2", 1200, 0, 3, tok, test::ruler_resources(), 0, 0, inline_open);
  EXPECT_EQ(c.prompt.substr(c.answer_begin - 5), "[/U] The special magic number for " +
                                                     c.prompt.substr(c.answer_begin + 29));
}

TEST(RulerChat, TemplateThatAltersTheUserTurnIsAnError) {
  const ChatWrap lossy = [](const std::string& user) { return "<U>" + user.substr(1) + "<A>"; };
  try {
    generate_sample("niah_single_2", 1200, 0, 3, bytes_tokenizer(), test::ruler_resources(), 0, 0, lossy);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("user turn"), std::string::npos) << e.what();
  }
}

TEST(RulerChat, SmolLM2PromptHasItsTemplateMarkersInOrder) {
  const std::string path = smollm2_path();
  if (path.empty()) GTEST_SKIP() << "no SmolLM2-135M-Instruct.Q4_1.gguf in " << test::peer_cache() / "models";
  const gguf::File f = gguf::File::open(path);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  const ChatWrap chat = [&](const std::string& user) { return apply_chat_template(f, tok, {{"user", user}}, true); };
  for (int i = 0; i < 3; ++i) {
    const Sample c = generate_sample("niah_single_2", 1024, i, 42, tok, test::ruler_resources(), 0, 0, chat);
    const Sample b = generate_sample("niah_single_2", 1024, i, 42, tok, test::ruler_resources());
    ASSERT_EQ(c.needles.size(), 1u);
    const std::string key = needle_key(c.needles[0].text);
    const std::string question = "What is the special magic number for " + key + " mentioned in the provided text?";
    const std::string answer = "The special magic number for " + key + " mentioned in the provided text is:";
    // Markers in order: system turn, user turn (haystack with the needle, question), assistant
    // turn opened with the answer prefix, which ends the prompt.
    EXPECT_EQ(c.prompt.substr(0, kSmolSystem.size() + kSmolUser.size()), kSmolSystem + kSmolUser);
    EXPECT_EQ(c.haystack_begin, kSmolSystem.size() + kSmolUser.size());
    EXPECT_LT(c.haystack_begin, c.needles[0].offset);
    EXPECT_LT(c.needles[0].offset + c.needles[0].text.size(), c.haystack_end);
    const std::string tail = " " + question + kSmolAssistant + answer;
    EXPECT_EQ(c.prompt.substr(c.haystack_end), tail);
    EXPECT_EQ(prompt_frame(c), kSmolSystem + kSmolUser + "[haystack: " +
                                   std::to_string(c.haystack_end - c.haystack_begin) + " bytes]" + tail);
    // The bare prompt asks the same question with the same answer prefix, without markers.
    EXPECT_EQ(b.prompt.find("<|im_start|>"), std::string::npos);
    EXPECT_EQ(b.prompt.substr(b.haystack_end), " " + question + " " + answer);
    EXPECT_EQ(b.references, c.references);
    EXPECT_EQ(needle_key(b.needles[0].text), key);
    // Same context: the chat haystack is the bare one's beginning (the template took some room).
    const std::string ch = bare_haystack(c), bh = bare_haystack(b);
    EXPECT_GT(ch.size(), bh.size() / 2);
    EXPECT_EQ(bh.compare(0, ch.size() - 40, ch, 0, ch.size() - 40), 0) << "sample " << i;
    // The markers are single special tokens, once each per turn; the prompt fits the length.
    const int32_t start = tok.find_token("<|im_start|>"), end = tok.find_token("<|im_end|>");
    ASSERT_GE(start, 0);
    ASSERT_GE(end, 0);
    EXPECT_EQ(std::count(c.prompt_tokens.begin(), c.prompt_tokens.end(), start), 3);
    EXPECT_EQ(std::count(c.prompt_tokens.begin(), c.prompt_tokens.end(), end), 2);
    // ChatML writes no BOS; the prompt opens with one when the tokenizer adds it, as run --chat does.
    const size_t first = tok.add_bos() && tok.bos() >= 0 ? 1 : 0;
    ASSERT_GT(c.prompt_tokens.size(), first);
    if (first) {
      EXPECT_EQ(c.prompt_tokens[0], tok.bos());
    }
    EXPECT_EQ(c.prompt_tokens[first], start);
    EXPECT_EQ(c.prompt_tokens, tok.encode(c.prompt, true, true));
    EXPECT_EQ(std::count(b.prompt_tokens.begin(), b.prompt_tokens.end(), start), 0);
    EXPECT_LE(c.budget_tokens(), 1024);
    EXPECT_GT(c.budget_tokens(), 1024 - 30);
  }
}

TEST(RulerChat, LineBreaksEndNoChatTurn) {
  const TaskSpec& niah = task_spec("niah_single_2");
  const TaskSpec& cwe = task_spec("cwe");
  const TaskSpec& multiquery = task_spec("niah_multiquery");
  // Bare prompts: a newline ends the turn wherever it comes (as RULER's stop at "\n").
  EXPECT_TRUE(detail::turn_ends(niah, "\n", "", false));
  EXPECT_TRUE(detail::turn_ends(niah, "\n", " 1234567", false));
  // Chat prompts: the answer may start on its own line, follow a restated question on the line
  // before it, or be a list with a line per item; only the end-of-turn token or the room end it.
  EXPECT_FALSE(detail::turn_ends(niah, "\n", "", true));
  EXPECT_FALSE(detail::turn_ends(niah, "\n\n", " \n", true));
  EXPECT_FALSE(detail::turn_ends(niah, "\n", "The special magic number for defence is:", true));
  EXPECT_FALSE(detail::turn_ends(niah, "\n", "\n1234567", true));
  EXPECT_FALSE(detail::turn_ends(niah, "123", "\n", true));
  EXPECT_FALSE(detail::turn_ends(task_spec("niah_multikey_1"), "\n", "\n\n1234567.", true));
  // List answers: in the bare format fwe, vt and multi-value stop at a newline (cwe never does).
  EXPECT_FALSE(detail::turn_ends(cwe, "\n", "apple", true));
  EXPECT_FALSE(detail::turn_ends(cwe, "\n", "apple", false));
  for (const char* list : {"fwe", "vt", "niah_multivalue"}) {
    EXPECT_FALSE(detail::turn_ends(task_spec(list), "\n", "- abc", true)) << list;
    EXPECT_TRUE(detail::turn_ends(task_spec(list), "\n", " abc", false)) << list;
  }
  // Multi-query turns end at '.', in chat once the turn holds text.
  EXPECT_FALSE(detail::turn_ends(multiquery, ".", "", true));
  EXPECT_TRUE(detail::turn_ends(multiquery, ".", " 7", true));
  EXPECT_TRUE(detail::turn_ends(multiquery, ".", "", false));
}

TEST(RulerChat, NiahGetsRulersAnswerRoomInTheChatTemplate) {
  const Tokenizer& tok = bytes_tokenizer();
  const ChatWrap wrap = [](const std::string& user) { return "<U>" + user + "</U>\n<A>\n"; };
  auto sample = [&](const char* task, int max_new, const ChatWrap& chat) {
    return generate_sample(task, 2000, 0, 3, tok, test::ruler_resources(), max_new, 0, chat);
  };
  for (const char* task : {"niah_single_1", "niah_multikey_2", "niah_multivalue", "niah_multiquery"}) {
    EXPECT_EQ(sample(task, 0, {}).max_new, task_spec(task).max_new) << task;
    const Sample chat = sample(task, 0, wrap);
    EXPECT_EQ(chat.max_new, 128) << task;
    EXPECT_LE(chat.budget_tokens(), 2000) << task;
  }
  // The other list tasks keep their own room; --max-new replaces either.
  EXPECT_EQ(sample("fwe", 0, wrap).max_new, 50);
  EXPECT_EQ(sample("vt", 0, wrap).max_new, 40);
  EXPECT_EQ(sample("niah_single_1", 30, wrap).max_new, 30);
}

std::vector<nlohmann::json> records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string l;
  while (std::getline(in, l)) out.push_back(nlohmann::json::parse(l));
  return out;
}

TEST(RulerChat, RunnerRecordsTheTemplateAndKeepsOneFormatPerFolder) {
  const std::string vocab = smollm2_path();
  if (vocab.empty()) GTEST_SKIP() << "no SmolLM2-135M-Instruct.Q4_1.gguf in " << test::peer_cache() / "models";
  test::TempDir dir;
  const std::unique_ptr<Model> model = test::ruler_model(dir, vocab, 1024);
  RunOptions opt;
  opt.model_path = dir.file("spm.gguf");
  opt.tasks = {"niah_single_2", "niah_multiquery"};
  opt.lengths = {600};
  opt.samples = 1;
  opt.policies = parse_policy_list("dense,streaming:local=16", attn::Config{});
  opt.n_threads = 1;
  opt.max_new = 3;
  opt.out_dir = dir.file("chat");
  opt.chat = true;
  const RunStats st = run_ruler(*model, test::ruler_resources(), opt);
  EXPECT_EQ(st.prefills, 2);
  const auto recs = records(opt.out_dir + "/predictions.jsonl");
  ASSERT_EQ(recs.size(), 4u);
  std::map<std::string, std::string> hash;
  for (const auto& r : recs) {
    EXPECT_TRUE(r.at("chat_template").get<bool>());
    const std::string frame = r.at("prompt_frame");
    EXPECT_EQ(frame.find(kSmolSystem + kSmolUser + "[haystack: "), 0u) << frame;
    const size_t asst = frame.find(kSmolAssistant);
    ASSERT_NE(asst, std::string::npos) << frame;
    EXPECT_EQ(frame.substr(asst + kSmolAssistant.size(), 26), "The special magic number f") << frame;
    // Every policy decodes the same prompt.
    auto [it, fresh] = hash.emplace(r.at("task").get<std::string>(), r.at("prompt_hash").get<std::string>());
    if (!fresh) {
      EXPECT_EQ(it->second, r.at("prompt_hash").get<std::string>());
    }
  }
  std::ifstream sum(opt.out_dir + "/summary.md");
  const std::string summary((std::istreambuf_iterator<char>(sum)), {});
  EXPECT_NE(summary.find("prompts: the model's chat template"), std::string::npos) << summary;

  // Bare prompts in the same folder would mix two prompt formats under one label.
  RunOptions bare = opt;
  bare.chat = false;
  try {
    run_ruler(*model, test::ruler_resources(), bare);
    FAIL() << "a bare run extended a chat folder";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chat_template"), std::string::npos) << e.what();
  }
  bare.out_dir = dir.file("bare");
  run_ruler(*model, test::ruler_resources(), bare);
  for (const auto& r : records(bare.out_dir + "/predictions.jsonl")) {
    EXPECT_FALSE(r.at("chat_template").get<bool>());
    EXPECT_EQ(r.at("prompt_frame").get<std::string>().find("<|im_start|>"), std::string::npos);
    EXPECT_NE(r.at("prompt_hash"), hash.at(r.at("task").get<std::string>()));
  }
}

}  // namespace
}  // namespace mp::eval::ruler
