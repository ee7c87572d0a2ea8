// Context-parallel decoding (docs/scale-out.md): the context is split into contiguous shards
// (shard_plan.h), rank r holds shard r's KV cache and the attention policy's structures for
// every layer, and the weights are replicated, so every rank computes the same activations
// and only attention needs communication:
// - decode: each rank runs the policy on its shard (attend_with_lse) and one all-gather of
//   (output, log-normaliser) per head and layer merges the parts by log-sum-exp, every rank in
//   rank order (lse_merge.h);
// - prefill: each rank runs its shard's positions layer by layer; per layer, every rank sends
//   its shard's K/V to the later ranks, which attend to them exactly before their own causal
//   part (shard_prefill_attention.h).
// Every call is collective: all ranks make the same calls with the same arguments.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "attention/policy.h"
#include "engine/memory_budget.h"
#include "engine/sequence.h"
#include "kv/kv_cache.h"
#include "model/backend.h"
#include "model/model.h"
#include "parallel/comm.h"
#include "parallel/shard_plan.h"

namespace mp::parallel {

struct ContextParallelOptions {
  SequenceOptions seq;           // n_ctx is the whole context over all ranks (0: the model's)
  size_t rank_memory_limit = 0;  // bytes for this rank's KV + policy structures; 0: MemAvailable
};

// What went over the network, as this rank sent and received it (payload bytes).
struct ExchangeStats {
  int64_t prefill_tokens = 0;
  double prefill_sent = 0, prefill_received = 0;
  int64_t decode_steps = 0;
  double decode_sent = 0, decode_received = 0;
  double wait_s = 0;  // time spent in exchanges (waiting for the slowest rank included)
};

class ContextParallelSequence {
 public:
  // Refuses, on every rank with the failing rank's reason, a shard that does not fit its
  // rank's memory budget, a model with sliding-window layers and oracle-sampling (its output
  // has no normaliser to merge by).
  ContextParallelSequence(const Model& model, Comm& comm, const ContextParallelOptions& opt);
  ~ContextParallelSequence();
  // Throws the mp::Error that the constructor throws on every rank alike for these options
  // (context size, sliding-window layers, oracle-sampling, policy parameters), without
  // communicating: one rank can refuse them before asking the others to start.
  static void check_options(const Model& model, const SequenceOptions& seq);

  // The prompt (the same tokens on every rank), into an empty sequence, exact attention.
  void prefill(std::span<const int32_t> tokens);
  // One token through the policy on every shard (the first call ends the prompt).
  void step(int32_t token);
  // Ends the prompt: each rank builds its policy's structures (hash tables, page summaries)
  // over its shard. Called by the first step() unless called before.
  void finish_prompt();

  std::span<const float> logits() const { return logits_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t n_tokens() const { return int64_t(tokens_.size()); }
  int64_t n_ctx() const { return plan_.n_ctx; }
  const ShardPlan& plan() const { return plan_; }
  int64_t held() const { return plan_.held(comm_.rank(), n_tokens()); }  // positions on this rank
  const ExchangeStats& stats() const { return stats_; }
  size_t kv_bytes() const { return cache_->bytes_used(); }
  size_t aux_bytes() const { return policy_ ? policy_->aux_bytes() : 0; }
  // Collective: keys read over all ranks' sparse layer-head-steps (the paper's cost).
  attn::Cost cost_all_ranks();

 private:
  [[noreturn]] void fail_on_purpose();
  void attend_layer(int layer, const float* q, float* out);
  void sum_over_ranks(std::span<double> sums);  // the policy's whole-prompt statistics
  void exchange_layer_kv(int layer, std::vector<uint16_t>& mine, std::vector<std::vector<uint16_t>>& from);

  const Model& model_;
  Comm& comm_;
  SequenceOptions opt_;
  ShardPlan plan_;
  std::shared_ptr<MemoryBudget> budget_;
  MemoryReservation reservation_;
  CpuBackend backend_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<attn::SequenceAttention> policy_;  // made when the prompt ends (its size is known)
  std::vector<float> logits_;
  std::vector<int32_t> tokens_;
  std::vector<float> part_, gathered_;  // decode exchange buffers
  ExchangeStats stats_;
  int64_t fail_step_ = -1;  // MAGICPIG_CP_FAIL_RANK / _STEP: this rank dies there (fault tests)
};

// The policy configuration rank `rank` runs on its shard: the exact attention sinks live only
// in the shard of position 0 and the exact local window only in the shard of the prompt's last
// token, so the union of the shards' exact parts is the single-process one.
attn::Config shard_policy_config(const attn::Config& cfg, const ShardPlan& plan, int rank, int64_t n_prompt);

}  // namespace mp::parallel
