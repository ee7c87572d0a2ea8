#include "model/hparams.h"

#include <cmath>

#include "common/error.h"
#include "gguf/gguf.h"
#include "kernels/kernels.h"

namespace mp {

static int positive_int(const gguf::File& f, const std::string& key, int64_t max) {
  const int64_t v = f.get_int(key);
  check(v > 0 && v <= max, f.path() + ": " + key + " = " + std::to_string(v) + " is out of range [1, " +
                               std::to_string(max) + "]");
  return static_cast<int>(v);
}

// Gemma 3's additions, with the defaults llama.cpp's gemma3 loader uses (src/models/gemma3.cpp):
// five sliding layers then one global layer, repeating; sliding layers rotate with base 10000
// unless rope.freq_base_swa says otherwise and never with the global layers' rope scaling.
static void read_gemma3(const gguf::File& f, HParams& hp) {
  const std::string a = hp.arch + ".";
  hp.embed_scale = std::sqrt(static_cast<float>(hp.n_embd));
  hp.ffn_act = FfnActivation::GeluTanh;
  hp.qk_norm = true;
  hp.post_norms = true;
  // Google's reference scales queries by query_pre_attn_scalar^-1/2: head_dim, except 27B's
  // n_embd / n_head; llama.cpp recognises 27B by its 62 layers.
  if (hp.n_layer == 62) {
    const double scale = 1.0 / std::sqrt(double(hp.n_embd / hp.n_head));
    hp.q_scale = static_cast<float>(scale * std::sqrt(double(hp.head_dim)));
  }
  const double softcap = f.get_float(a + "final_logit_softcapping", 0.0);
  check(softcap >= 0 && std::isfinite(softcap), f.path() + ": final_logit_softcapping must be >= 0");
  hp.logit_softcap = static_cast<float>(softcap);

  const int64_t window = f.get_int(a + "attention.sliding_window", 0);
  check(window >= 0 && window <= (int64_t(1) << 24), f.path() + ": attention.sliding_window out of range");
  if (window == 0) return;
  hp.sliding_window = static_cast<int>(window);
  hp.layer_slides.assign(hp.n_layer, 0);
  const std::string pattern_key = a + "attention.sliding_window_pattern";
  const gguf::Value* pattern = f.find(pattern_key);
  if (pattern && pattern->is_array()) {
    check(pattern->ints.size() == size_t(hp.n_layer),
          f.path() + ": " + pattern_key + " must hold one flag per layer");
    for (int l = 0; l < hp.n_layer; ++l) hp.layer_slides[l] = pattern->ints[l] != 0;
  } else {
    // Gemma 3's files omit the key: llama.cpp's default of 6 then applies, whatever n_layer is.
    const int64_t n = pattern ? f.get_int(pattern_key) : 6;
    check(!pattern || (n >= 0 && n <= hp.n_layer + 1),
          f.path() + ": " + pattern_key + " = " + std::to_string(n) + " out of range [0, n_layer + 1]");
    // llama.cpp's set_swa_pattern: 0 makes every layer slide, n the last of every n global
    for (int l = 0; l < hp.n_layer; ++l) hp.layer_slides[l] = n == 0 || l % n < n - 1;
  }
  hp.rope_sliding.type = hp.rope.type;
  hp.rope_sliding.theta = static_cast<float>(f.get_float(a + "rope.freq_base_swa", 10000.0));
  check(hp.rope_sliding.theta > 1, f.path() + ": rope.freq_base_swa must be > 1");
}

HParams read_hparams(const gguf::File& f) {
  HParams hp;
  hp.arch = f.get_string("general.architecture");
  // llama and qwen2 run one graph; they differ in the rotary layout and in qwen2's Q/K/V biases,
  // which the loader takes wherever the file has them. gemma3 adds to that graph (hparams.h).
  if (hp.arch == "llama") {
    hp.rope.type = RopeType::Norm;
  } else if (hp.arch == "qwen2" || hp.arch == "gemma3") {
    hp.rope.type = RopeType::Neox;
  } else {
    throw Error(f.path() + ": architecture '" + hp.arch +
                "' is not supported (supported: llama — Llama 2, Llama 3/3.1, Mistral; qwen2 — Qwen2, Qwen2.5; "
                "gemma3 — Gemma 3 text models)");
  }
  hp.name = f.get_string("general.name", "");
  const std::string a = hp.arch + ".";
  hp.n_embd = positive_int(f, a + "embedding_length", 1 << 16);
  hp.n_layer = positive_int(f, a + "block_count", 1024);
  hp.n_head = positive_int(f, a + "attention.head_count", 1024);
  hp.n_kv_head = f.find(a + "attention.head_count_kv") ? positive_int(f, a + "attention.head_count_kv", 1024)
                                                        : hp.n_head;
  hp.n_ff = positive_int(f, a + "feed_forward_length", 1 << 20);
  hp.n_ctx_train = positive_int(f, a + "context_length", 1 << 24);
  if (f.find(a + "attention.key_length")) {
    // heads need not be embedding_length / head_count wide (Mistral-Nemo's 128-dim heads in a
    // 5120 embedding; a model grown by heads): the projections are [n_head * head_dim, n_embd]
    hp.head_dim = positive_int(f, a + "attention.key_length", 1 << 12);
    if (f.find(a + "attention.value_length")) {
      const int vl = positive_int(f, a + "attention.value_length", 1 << 12);
      check(vl == hp.head_dim, f.path() + ": attention.value_length " + std::to_string(vl) +
                                   " differs from key_length " + std::to_string(hp.head_dim) + "; not supported");
    }
  } else {
    check(hp.n_embd % hp.n_head == 0, f.path() + ": embedding_length " + std::to_string(hp.n_embd) +
                                          " is not a multiple of head_count " + std::to_string(hp.n_head));
    hp.head_dim = hp.n_embd / hp.n_head;
  }
  check(hp.n_head % hp.n_kv_head == 0, f.path() + ": head_count " + std::to_string(hp.n_head) +
                                           " is not a multiple of head_count_kv " + std::to_string(hp.n_kv_head));
  check(hp.head_dim % 2 == 0, f.path() + ": head dimension must be even for RoPE");
  if (f.find(a + "rope.dimension_count")) {
    const int64_t rd = f.get_int(a + "rope.dimension_count");
    check(rd == hp.head_dim, f.path() + ": rope.dimension_count " + std::to_string(rd) +
                                 " != head dimension (partial rotary embeddings are not supported)");
  }
  hp.rms_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-5));
  check(hp.rms_eps > 0 && hp.rms_eps < 1, f.path() + ": attention.layer_norm_rms_epsilon out of range");
  hp.rope.theta = static_cast<float>(f.get_float(a + "rope.freq_base", 10000.0));
  check(hp.rope.theta > 1, f.path() + ": rope.freq_base must be > 1");

  const std::string scaling = f.get_string(a + "rope.scaling.type", "none");
  if (scaling == "linear") {
    hp.rope.linear_factor = static_cast<float>(f.get_float(a + "rope.scaling.factor", 1.0));
    check(hp.rope.linear_factor >= 1, f.path() + ": rope.scaling.factor must be >= 1");
  } else if (scaling != "none") {
    throw Error(f.path() + ": rope scaling type '" + scaling + "' is not supported (supported: none, linear, "
                "llama3 via rope_freqs.weight)");
  }
  if (const gguf::TensorInfo* t = f.find_tensor("rope_freqs.weight")) {
    // llama.cpp's qwen2 graph has no frequency factors (and its loader refuses extra tensors)
    check(hp.arch == "llama", f.path() + ": rope_freqs.weight is not supported for architecture " + hp.arch);
    check(t->n_elements() == hp.head_dim / 2, f.path() + ": rope_freqs.weight has " +
                                                  std::to_string(t->n_elements()) + " elements, expected " +
                                                  std::to_string(hp.head_dim / 2));
    hp.rope.freq_factors.resize(hp.head_dim / 2);
    kernels::dequantize_row(t->type, t->data, hp.rope.freq_factors.data(), hp.head_dim / 2);
    for (float v : hp.rope.freq_factors)
      check(std::isfinite(v) && v > 0, f.path() + ": rope_freqs.weight holds a non-positive value");
  }

  if (hp.arch == "gemma3") read_gemma3(f, hp);

  const gguf::TensorInfo& emb = f.tensor("token_embd.weight");
  check(emb.shape.size() == 2 && emb.shape[0] == hp.n_embd,
        f.path() + ": token_embd.weight must be [" + std::to_string(hp.n_embd) + ", n_vocab]");
  hp.n_vocab = static_cast<int>(emb.shape[1]);
  return hp;
}

std::vector<float> llama3_rope_freq_factors(int head_dim, float theta, float factor, float low_freq_factor,
                                            float high_freq_factor, int original_context) {
  // Wavelengths longer than original_context/low_freq_factor are slowed by `factor`, shorter
  // than original_context/high_freq_factor are kept, and the band between is interpolated.
  std::vector<float> out(head_dim / 2);
  const double low_wavelen = original_context / low_freq_factor;
  const double high_wavelen = original_context / high_freq_factor;
  for (int i = 0; i < head_dim / 2; ++i) {
    const double freq = std::pow(theta, -2.0 * i / head_dim);
    const double wavelen = 2 * M_PI / freq;
    double div;
    if (wavelen < high_wavelen) {
      div = 1.0;
    } else if (wavelen > low_wavelen) {
      div = factor;
    } else {
      const double smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      div = 1.0 / ((1 - smooth) / factor + smooth);
    }
    out[i] = static_cast<float>(div);
  }
  return out;
}

}  // namespace mp
