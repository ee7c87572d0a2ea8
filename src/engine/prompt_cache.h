// Prompt cache (`magicpig run --prompt-cache FILE`, as in llama.cpp): a prefilled prompt saved
// to disk and restored into a fresh Sequence, so that a later prompt starting with the same
// tokens prefills only the rest. The file holds the state BEFORE decoding starts (tokens, last
// logits, K/V of the used positions), so any decode policy can continue from it: policies
// build their structures when the restored sequence finishes its prompt. Format, fingerprint
// and checks: docs/engine.md "Prompt cache".
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "engine/sequence.h"
#include "gguf/gguf.h"

namespace mp {

constexpr uint32_t kPromptCacheVersion = 1;

// 64-bit fingerprint of a model file's content: the metadata, the tensor table (names, types,
// shapes, offsets), the file size, and the tensor bytes (all of them for files up to 256 MiB,
// otherwise 64 evenly spaced 64-byte windows of every tensor, whole tensors under 4 KiB). A
// fine-tune of the same architecture changes nearly every weight, so the samples see it.
uint64_t model_fingerprint(const gguf::File& file);

struct PromptCacheInfo {
  uint32_t version = 0;
  uint64_t fingerprint = 0;
  int64_t n_ctx = 0;          // context of the sequence that was saved (informational)
  DType kv_type = DType::BF16;
  int n_layer = 0, n_kv_head = 0, head_dim = 0, n_vocab = 0;
  std::vector<int32_t> tokens;  // the saved prompt
  uint64_t file_bytes = 0;
};

// True when path is a file that starts with the prompt-cache magic (any version). The CLI
// uses it to refuse overwriting a file that is not a prompt cache.
bool is_prompt_cache_file(const std::string& path);

// Writes seq's prompt to path (first to path + ".tmp", then renamed, so a crash never leaves a
// partial file under the real name). Refuses a sequence whose prompt is finished (decoding
// started: the state to save is the prefilled prompt) or that holds no tokens.
void save_prompt_cache(const Sequence& seq, const std::string& path);

// Reads and validates the header and the tokens: magic, format version, header checksum,
// the file size implied by the header (truncation), and that the file was saved from `model`
// (fingerprint, shape). The K/V payload is not read, so the trailing checksum is not checked.
PromptCacheInfo peek_prompt_cache(const std::string& path, const Model& model);

// How many leading tokens of `prompt` a cache holding `saved` can provide: their common
// prefix, but one token fewer when that would cover the whole prompt while the cache holds
// more (logits of that last position are not in the file, so it must be prefilled again).
int64_t reusable_prefix(std::span<const int32_t> saved, std::span<const int32_t> prompt);

// Builds a new Sequence(model, opt) holding the first n_keep saved tokens (-1: all), reading
// and checking the whole file (everything peek checks, plus the trailing checksum, the
// options' kv_type and that n_keep fits opt's context). On any failure throws mp::Error
// and nothing is returned. With n_keep below the saved count, logits() are zero until the
// next prefill.
std::unique_ptr<Sequence> load_prompt_cache(const Model& model, const SequenceOptions& opt,
                                            const std::string& path, int64_t n_keep = -1);

}  // namespace mp
