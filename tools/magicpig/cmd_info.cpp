// magicpig info: what a model file holds and what it costs to run.
#include <cstdio>
#include <map>

#include "common.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace mp::cli {

int cmd_info(int argc, char** argv) {
  ModelOptions mo;
  Args a("info", "Prints a model's architecture, sizes, tensor types, tokenizer and memory per context token.");
  add_model_options(a, mo, false);
  if (!a.parse(argc, argv, 2)) return 0;
  const std::string path = resolve_model_path(mo.model);
  std::unique_ptr<Model> m = Model::load(path);
  const HParams& hp = m->hp;
  std::map<std::string, std::pair<int, size_t>> types;
  size_t params = 0;
  for (const gguf::TensorInfo& t : m->file.tensors()) {
    auto& e = types[std::string(dtype_name(t.type))];
    e.first++;
    e.second += t.nbytes;
    params += size_t(t.n_elements());
  }
  std::printf("file:          %s (GGUF v%u, %s)\n", path.c_str(), m->file.version(),
              human_bytes(double(m->file.file_size())).c_str());
  std::printf("name:          %s\n", hp.name.c_str());
  std::printf("architecture:  %s\n", hp.arch.c_str());
  std::printf("parameters:    %.2f M\n", double(params) / 1e6);
  std::printf("layers:        %d\n", hp.n_layer);
  std::printf("embedding:     %d\n", hp.n_embd);
  std::printf("heads:         %d query, %d key/value (GQA group %d), head dim %d%s\n", hp.n_head, hp.n_kv_head,
              hp.n_head / hp.n_kv_head, hp.head_dim, m->layers[0].bq.empty() ? "" : ", Q/K/V bias");
  std::printf("feed-forward:  %d (%s)\n", hp.n_ff, hp.ffn_act == FfnActivation::GeluTanh ? "GeGLU" : "SwiGLU");
  if (hp.qk_norm || hp.post_norms || hp.embed_scale != 1)
    std::printf("gemma:         QK-norm, post-attention and post-MLP norms, embedding x %.4g%s\n", hp.embed_scale,
                hp.q_scale != 1 ? ", query pre-attention scale" : "");
  if (hp.logit_softcap > 0) std::printf("logits:        soft-capped at %g\n", hp.logit_softcap);
  std::printf("vocabulary:    %d (%s tokenizer%s%s)\n", hp.n_vocab, std::string(m->tokenizer.model()).c_str(),
              m->tokenizer.pre().empty() ? "" : ", pre-tokenizer ", std::string(m->tokenizer.pre()).c_str());
  std::printf("context:       %lld tokens trained\n", (long long)hp.n_ctx_train);
  std::printf("rope:          %s, theta %.0f%s%s%s\n",
              hp.rope.type == RopeType::Neox ? "neox (halves)" : "norm (adjacent pairs)", hp.rope.theta,
              hp.rope.linear_factor != 1 ? ", linear scaling" : "",
              hp.rope.freq_factors.empty() ? "" : ", per-frequency factors (llama3 scaling)",
              hp.sliding_window > 0 ? " (global layers)" : "");
  if (hp.sliding_window > 0) {
    std::string global;
    int n_global = 0;
    for (int l = 0; l < hp.n_layer; ++l)
      if (!hp.slides(l)) global += (n_global++ ? "," : "") + std::to_string(l);
    std::printf("attention:     %d sliding-window layers (window %d, rope theta %.0f), %d global (layers %s); "
                "attention policies apply to global layers only\n",
                hp.n_layer - n_global, hp.sliding_window, hp.rope_sliding.theta, n_global, global.c_str());
  }
  std::printf("rms epsilon:   %g\n", hp.rms_eps);
  std::printf("output:        %s\n", m->tied_output ? "tied to the token embedding" : "separate matrix");
  std::printf("tensor types:\n");
  for (const auto& [name, e] : types)
    std::printf("  %-6s %4d tensors, %s\n", name.c_str(), e.first, human_bytes(double(e.second)).c_str());
  const KvShape bf16{hp.n_layer, hp.n_kv_head, hp.head_dim, 1, DType::BF16};
  std::printf("KV cache:      %s per context token (bf16 or f16), %s at the trained context\n",
              human_bytes(double(KvCache::bytes_per_token(bf16))).c_str(),
              human_bytes(double(KvCache::bytes_per_token(bf16)) * double(hp.n_ctx_train)).c_str());
  return 0;
}

}  // namespace mp::cli
