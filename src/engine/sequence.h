// The library API a CLI or server drives: a Model is shared, each Sequence owns its KV cache,
// its attention-policy state and its last logits. Feed a prompt (exact prefill), then step one
// token at a time through the chosen policy; fork() copies the whole state.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attention/policy.h"
#include "engine/memory_budget.h"
#include "kv/kv_cache.h"
#include "model/backend.h"
#include "model/model.h"

namespace mp {

struct SequenceOptions {
  int64_t n_ctx = 0;            // 0: the model's training context
  DType kv_type = DType::BF16;  // BF16 or F16
  int n_threads = 2;
  int prefill_chunk = 512;
  attn::Config attention;       // decode-time policy
  // Shared by the sequences of one run (batch, forks): each reserves its KV and policy
  // structures from it when made or forked and returns them when destroyed. Null: each
  // sequence is checked alone against the memory available when it is made.
  std::shared_ptr<MemoryBudget> memory_budget;
  // Layers whose K/V a device holds while the sequence is attached to a CUDA decoder (n_layer
  // flags, backends/cuda gpu_attention_layers; empty: none). The memory budget counts only the
  // other layers' K/V: attach returns these layers' CPU pages to the OS. Not counted: their
  // prompt K/V between the prefill and attach, and all of it again after a detach.
  std::vector<char> device_kv_layers;
};

class Sequence {
 public:
  // Validates options (context range, thread count, policy parameters) and checks that the
  // KV cache and policy structures fit in the memory budget (or, without one, in the memory
  // available); throws mp::Error with the numbers otherwise. Forks are checked the same way.
  Sequence(const Model& model, const SequenceOptions& opt);
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  // Appends prompt tokens with exact attention. Allowed until the first step().
  // all_logits: keep logits of every token (for perplexity), else only the last.
  void prefill(std::span<const int32_t> tokens, bool all_logits = false,
               const std::function<void(int64_t, int64_t)>& progress = {});
  // Fills n prompt positions of every layer with synthetic K/V instead of running the model,
  // for fast speed sweeps at large depth (magicpig bench --depth-fill random). Keys of KV head
  // h are N(m_h, I) with a random per-head offset |m_h| = 2 (real keys share a direction,
  // which is why MagicPIG centres them); values are N(0, I). Token ids recorded as 0.
  void fill_random(int64_t n, uint64_t seed);
  // Decodes one token through the attention policy (the first call ends the prompt and lets
  // the policy build its per-layer structures).
  void step(int32_t token);

  // Logits of the last token processed (n_vocab), or of every prefilled token if requested.
  std::span<const float> logits() const { return {logits_.data() + logits_.size() - n_vocab_, size_t(n_vocab_)}; }
  const std::vector<float>& all_logits() const { return logits_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t n_tokens() const { return cache_.n_tokens(); }
  int64_t n_ctx() const { return cache_.shape().capacity; }
  bool prompt_finished() const { return prompt_finished_; }

  std::unique_ptr<Sequence> fork() const;
  // Copies the prefilled state (KV, tokens, logits) under another decode policy, so several
  // policies decode from one prefill. Only before the prompt is finished (the policy builds
  // its structures when the copy finishes its prompt).
  std::unique_ptr<Sequence> fork(const attn::Config& policy) const;
  // The same with a caller-made policy state (e.g. an instrumented one that runs several
  // policies side by side); `name` is recorded in options().attention.name.
  std::unique_ptr<Sequence> fork(std::unique_ptr<attn::SequenceAttention> policy, const std::string& name) const;

  const attn::Cost& cost() const { return policy_->cost(); }
  size_t kv_bytes() const { return cache_.bytes_used(); }
  size_t aux_bytes() const { return policy_->aux_bytes(); }
  const SequenceOptions& options() const { return opt_; }
  // Ends the prompt explicitly (normally done by the first step()).
  void finish_prompt();
  // prefill(tokens) followed by finish_prompt(), with the policy's per-layer structures built
  // while the prefill runs: as soon as the last chunk has passed layer l, layer l goes to one
  // background thread that runs prefill_done(l, ..., 1 thread) while the prefill works on the
  // later layers. The result (logits, KV, policy state, later decode and cost) is the same as
  // prefill() + finish_prompt(). The thread is joined before returning; an error of the
  // prefill or of prefill_done is rethrown here (after a prefill_done error the prompt is in
  // the cache but not finished, so the first step() builds the structures again).
  void prefill_and_finish(std::span<const int32_t> tokens, bool all_logits = false,
                          const std::function<void(int64_t, int64_t)>& progress = {});

  // Prompt cache (engine/prompt_cache.h): what is saved, and restoring a saved prompt into this
  // fresh sequence (no tokens yet): write_kv fills K/V of positions [0, tokens.size()) of every
  // layer; last_logits has n_vocab floats. Validated before anything is written.
  const Model& model() const { return model_; }
  const KvCache& kv_cache() const { return cache_; }
  void restore_prompt(std::span<const int32_t> tokens, std::span<const float> last_logits,
                      const std::function<void(KvCache&)>& write_kv);

  // What code that runs decode steps outside step() may reach: step_batch (engine/batch.cpp)
  // and cuda::CudaDecoder (backends/cuda) run the forward pass of several sequences at once.
  // They write the step's K/V into the cache (the CUDA decoder also moves the K/V of the layers
  // a device holds out on attach and back on detach), drive the policy (attend, or exact_part /
  // attend_sampled when a device attends the exact part), and end the step with record().
  // Options, memory reservation, CPU backend and prompt state stay private.
  class ExternalStep {
   public:
    KvCache& cache() const { return s_.cache_; }
    attn::SequenceAttention& policy() const { return *s_.policy_; }
    // Ends the step: the logits (n_vocab floats) become logits() and the token joins tokens().
    void record(int32_t token, const float* logits) const;
    // Ends a step whose logits stayed on a device (greedy sampling there): logits() reads NaN
    // rather than the previous step's.
    void record_token_only(int32_t token) const;

   private:
    friend class Sequence;
    explicit ExternalStep(Sequence& s) : s_(s) {}
    Sequence& s_;
  };
  // Advancing the cache's n_tokens past the written K/V is the caller's part (as forward_decode
  // does for step()).
  ExternalStep external_step() { return ExternalStep(*this); }

 private:
  Sequence(const Sequence& other, int);  // fork
  void prefill_impl(std::span<const int32_t> tokens, bool all_logits,
                    const std::function<void(int64_t, int64_t)>& progress,
                    const std::function<void(int)>& layer_complete);
  Sequence(const Sequence& other, std::unique_ptr<attn::SequenceAttention> policy, const attn::Config& cfg);
  const Model& model_;
  SequenceOptions opt_;
  MemoryReservation reservation_;  // before cache_: nothing is allocated for a context that does not fit
  CpuBackend backend_;
  KvCache cache_;
  std::unique_ptr<attn::SequenceAttention> policy_;
  std::vector<float> logits_;
  std::vector<int32_t> tokens_;
  int n_vocab_;
  bool prompt_finished_ = false;
};

// Bytes of memory the OS reports as available (MemAvailable), or 0 if unknown.
size_t available_memory_bytes();
// Peak resident set size of this process in bytes.
size_t peak_rss_bytes();

// Memory a sequence with these options needs once its context is full: the KV cache and an
// estimate of the policy's auxiliary structures (attn::aux_bytes_estimate: magicpig's hash
// tables, quest's page summaries, per-thread scratch). Options are resolved (n_ctx 0 = the
// model's) but not validated.
struct MemoryEstimate {
  int64_t n_ctx = 0;
  size_t kv_bytes = 0;
  size_t aux_bytes = 0;
  size_t total() const { return kv_bytes + aux_bytes; }
  double kv_per_token() const { return n_ctx > 0 ? double(kv_bytes) / double(n_ctx) : 0; }
  double aux_per_token() const { return n_ctx > 0 ? double(aux_bytes) / double(n_ctx) : 0; }
};
MemoryEstimate estimate_memory(const Model& model, const SequenceOptions& opt);
// Throws mp::Error naming the sizes when est.total() does not fit in `available` bytes
// (0: unknown, accepted). `policy` names the auxiliary structures in the message.
void check_memory_fits(const MemoryEstimate& est, size_t available, const std::string& policy);

}  // namespace mp
